package codec

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCodecs runs every codec through the Encoder interface: the first
// picture is a keyframe, the next are not until one is forced, and the
// descriptor's MIME type and format parameters are what SDP needs.
func TestCodecs(t *testing.T) {
	const w, h = 320, 240
	tests := []struct {
		c        Codec
		mime     string
		fmtp     string
		keyCheck func([]byte) bool
	}{
		{H264(), "video/H264", "packetization-mode=1;profile-level-id=42e01e", func(f []byte) bool {
			for _, n := range SplitNALs(f) {
				if NALType(n) == NALIDR {
					return true
				}
			}
			return false
		}},
		{VP8(), "video/VP8", "", func(f []byte) bool {
			hd, err := ParseVP8Header(f)
			return err == nil && hd.Key && hd.Width == w && hd.Height == h
		}},
	}
	for _, tc := range tests {
		t.Run(tc.c.Name, func(t *testing.T) {
			if tc.c.MimeType != tc.mime || tc.c.ClockRate != 90000 {
				t.Errorf("MimeType %q clock %d, want %q at 90000", tc.c.MimeType, tc.c.ClockRate, tc.mime)
			}
			if fmtp, err := tc.c.FMTP(w, h, 30); err != nil || !strings.Contains(fmtp, tc.fmtp) {
				t.Errorf("FMTP = %q, %v; want it to contain %q", fmtp, err, tc.fmtp)
			}
			if got, ok := Lookup(tc.mime); !ok || got.Name != tc.c.Name {
				t.Errorf("Lookup(%q) = %q, %v", tc.mime, got.Name, ok)
			}
			if tc.c.NewPayloader() == nil {
				t.Error("no payloader")
			}
			enc, err := tc.c.NewEncoder(Options{Width: w, Height: h, FPS: 30, BitrateKbps: 1000})
			if err != nil {
				t.Fatal(err)
			}
			defer enc.Close()
			pic := NewI420(w, h)
			for i := 0; i < 6; i++ {
				if err := BGRXToI420(desktop(w, h, i), w*4, w, h, pic); err != nil {
					t.Fatal(err)
				}
				if i == 4 {
					enc.ForceKeyframe()
				}
				f, key, err := enc.Encode(pic, time.Duration(i)*time.Second/30)
				if err != nil || len(f) == 0 {
					t.Fatalf("picture %d: %d bytes, %v", i, len(f), err)
				}
				if want := i == 0 || i == 4; key != want || tc.keyCheck(f) != want {
					t.Errorf("picture %d: keyframe %v, in the bitstream %v; want %v", i, key, tc.keyCheck(f), want)
				}
			}
			if err := enc.SetBitrate(500); err != nil {
				t.Errorf("SetBitrate: %v", err)
			}
		})
	}
	if _, ok := Lookup("AV1"); ok {
		t.Error("Lookup found AV1, which nothing here encodes")
	}
}

func TestVP8Options(t *testing.T) {
	tests := []struct {
		name string
		opt  VP8Options
		want string
	}{
		{"odd width", VP8Options{Width: 1281, Height: 800}, "even"},
		{"tiny", VP8Options{Width: 8, Height: 8}, "out of range"},
		{"frame rate", VP8Options{Width: 640, Height: 480, FPS: 500}, "frame rate 500"},
		{"bitrate", VP8Options{Width: 640, Height: 480, BitrateKbps: 10}, "bitrate 10"},
		{"cpu-used", VP8Options{Width: 640, Height: 480, CPUUsed: 2}, "cpu-used 2"},
		{"threads", VP8Options{Width: 640, Height: 480, Threads: 9}, "threads 9"},
	}
	for _, tc := range tests {
		e, err := NewVP8Encoder(tc.opt)
		if err == nil {
			e.Close()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to mention %q", tc.name, err, tc.want)
		}
	}
}

func TestVP8EncodeErrors(t *testing.T) {
	enc, err := NewVP8Encoder(VP8Options{Width: 320, Height: 240})
	if err != nil {
		t.Fatal(err)
	}
	_, _, wrongSize := enc.Encode(NewI420(640, 480), 0)
	_, _, nilFrame := enc.Encode(nil, 0)
	lowRate := enc.SetBitrate(10)
	if _, _, err := enc.Encode(NewI420(320, 240), 0); err != nil {
		t.Fatalf("good picture after bad ones: %v", err)
	}
	enc.Close()
	_, _, closed := enc.Encode(NewI420(320, 240), time.Second)
	closedRate := enc.SetBitrate(1000)
	enc.ForceKeyframe()
	enc.Close()
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"wrong size", wrongSize, "opened for 320x240"},
		{"nil frame", nilFrame, "nil"},
		{"bitrate too low", lowRate, "bitrate 10"},
		{"encode after close", closed, "closed"},
		{"bitrate after close", closedRate, "closed"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to mention %q", tc.name, tc.err, tc.want)
		}
	}
}

// TestVP8Decodes encodes a desktop with a window being dragged, forces a
// keyframe midway, and has ffmpeg's VP8 decoder (an independent one) decode
// the frames from an IVF file.
func TestVP8Decodes(t *testing.T) {
	ffmpeg := requireTool(t, "ffmpeg")
	const w, h, n, forceAt = 640, 400, 20, 10
	enc, err := NewVP8Encoder(VP8Options{Width: w, Height: h, FPS: 30, BitrateKbps: 3000})
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	var ivf bytes.Buffer
	ivf.WriteString("DKIF")
	binary.Write(&ivf, binary.LittleEndian, []uint16{0, 32})
	ivf.WriteString("VP80")
	binary.Write(&ivf, binary.LittleEndian, []uint16{w, h})
	binary.Write(&ivf, binary.LittleEndian, []uint32{30, 1, n, 0})
	pic := NewI420(w, h)
	for i := 0; i < n; i++ {
		if err := BGRXToI420(desktop(w, h, i), w*4, w, h, pic); err != nil {
			t.Fatal(err)
		}
		if i == forceAt {
			enc.ForceKeyframe()
		}
		f, key, err := enc.Encode(pic, time.Duration(i)*time.Second/30)
		if err != nil {
			t.Fatal(err)
		}
		hd, err := ParseVP8Header(f)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if want := i == 0 || i == forceAt; key != want || hd.Key != want || !hd.Show {
			t.Errorf("frame %d: keyframe %v, header %+v; want keyframe %v, shown", i, key, hd, want)
		}
		binary.Write(&ivf, binary.LittleEndian, uint32(len(f)))
		binary.Write(&ivf, binary.LittleEndian, uint64(i))
		ivf.Write(f)
	}
	file := filepath.Join(t.TempDir(), "desktop.ivf")
	if err := os.WriteFile(file, ivf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(ffmpeg, "-v", "error", "-i", file, "-f", "rawvideo", "-pix_fmt", "yuv420p", "-")
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("ffmpeg decode: %v: %s", err, stderr.String())
	}
	size := w * h * 3 / 2
	if len(raw) != n*size {
		t.Fatalf("ffmpeg decoded %d bytes, want %d frames of %d", len(raw), n, size)
	}
	src := NewI420(w, h)
	for i := 0; i < n; i++ {
		if err := BGRXToI420(desktop(w, h, i), w*4, w, h, src); err != nil {
			t.Fatal(err)
		}
		// Wrong pictures (garbage, a lost reference) score far below 15 dB.
		if p := psnr(src.Y, raw[i*size:i*size+w*h]); p < 18 {
			t.Errorf("frame %d decodes at %.1f dB luma PSNR, want at least 18", i, p)
		} else if i == 0 || i == n-1 {
			t.Logf("frame %d: %.1f dB luma PSNR", i, p)
		}
	}
}
