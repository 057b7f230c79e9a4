package codec

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// moving paints a frame of a pattern that changes with i, like a window being dragged.
func moving(w, h, i int) []byte {
	pix := make([]byte, w*h*4)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			p := pix[(y*w+x)*4:]
			p[0], p[1], p[2] = byte(x+i*4), byte(y), byte((x^y)+i)
			if x/64 == (i*8/64)%(w/64) {
				p[0], p[1], p[2] = 0xff, 0xff, 0xff
			}
		}
	}
	return pix
}

func TestBGRXToI420Colours(t *testing.T) {
	tests := []struct {
		name      string
		b, g, r   byte
		y, u, v   int
		tolerance int
	}{
		{"white", 255, 255, 255, 235, 128, 128, 1},
		{"black", 0, 0, 0, 16, 128, 128, 1},
		{"red", 0, 0, 255, 81, 90, 240, 2},
		{"blue", 255, 0, 0, 41, 240, 110, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const w, h = 64, 32
			src := make([]byte, w*h*4)
			for i := 0; i < len(src); i += 4 {
				src[i], src[i+1], src[i+2] = tc.b, tc.g, tc.r
			}
			dst := NewI420(w, h)
			if err := BGRXToI420(src, w*4, w, h, dst); err != nil {
				t.Fatal(err)
			}
			near := func(got byte, want int) bool { d := int(got) - want; return d >= -tc.tolerance && d <= tc.tolerance }
			if !near(dst.Y[100], tc.y) || !near(dst.U[10], tc.u) || !near(dst.V[10], tc.v) {
				t.Fatalf("YUV = %d,%d,%d, want about %d,%d,%d", dst.Y[100], dst.U[10], dst.V[10], tc.y, tc.u, tc.v)
			}
		})
	}
}

func TestConversionErrors(t *testing.T) {
	dst := NewI420(64, 32)
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"short source", BGRXToI420(make([]byte, 100), 256, 64, 32, dst), "too small"},
		{"size mismatch", BGRXToI420(make([]byte, 32*16*4), 128, 32, 16, dst), "ScaleBGRXToI420"},
		{"empty", BGRXToI420(nil, 0, 0, 0, dst), "empty"},
	}
	for _, tc := range tests {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to mention %q", tc.name, tc.err, tc.want)
		}
	}
	big := NewI420(32, 16)
	if err := ScaleBGRXToI420(make([]byte, 64*32*4), 256, 64, 32, big); err != nil {
		t.Errorf("scale 64x32 to 32x16: %v", err)
	}
}

func TestEncoderOptions(t *testing.T) {
	tests := []struct {
		opt  H264Options
		want string
	}{
		{H264Options{Width: 1281, Height: 800}, "even"},
		{H264Options{Width: 8, Height: 8}, "out of range"},
		{H264Options{Width: 640, Height: 480, Slices: 8}, "at most 4"},
		{H264Options{Width: 640, Height: 480, Preset: "ludicrous"}, "unknown x264 preset"},
		{H264Options{Width: 640, Height: 480, FPS: 500}, "frame rate"},
	}
	for _, tc := range tests {
		e, err := NewH264Encoder(tc.opt)
		if err == nil {
			e.Close()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want it to mention %q", tc.opt, err, tc.want)
		}
	}
}

func TestLevel(t *testing.T) {
	tests := []struct{ w, h, fps, want int }{
		{640, 480, 30, 30}, {1280, 720, 30, 31}, {1280, 800, 30, 32}, {1920, 1080, 30, 40}, {1920, 1080, 60, 42}, {3840, 2160, 30, 51},
	}
	for _, tc := range tests {
		if got, err := Level(tc.w, tc.h, tc.fps); err != nil || got != tc.want {
			t.Errorf("Level(%d,%d,%d) = %d, %v; want %d", tc.w, tc.h, tc.fps, got, err, tc.want)
		}
	}
}

func TestEncodeStream(t *testing.T) {
	const w, h, n = 1280, 800, 60
	enc, err := NewH264Encoder(H264Options{Width: w, Height: h, FPS: 30, BitrateKbps: 4000, Slices: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	defer enc.Close() // twice is harmless
	if enc.ProfileLevelID() != "42e020" {
		t.Errorf("profile-level-id %s, want 42e020 (constrained baseline, level 3.2)", enc.ProfileLevelID())
	}
	pic := NewI420(w, h)
	var stream []byte
	for i := 0; i < n; i++ {
		if err := BGRXToI420(moving(w, h, i), w*4, w, h, pic); err != nil {
			t.Fatal(err)
		}
		if i == 40 {
			enc.ForceKeyframe()
		}
		au, key, err := enc.Encode(pic, time.Duration(i)*33*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if len(au) == 0 {
			t.Fatalf("frame %d: no output (no lookahead should mean one access unit per picture)", i)
		}
		stream = append(stream, au...)
		types := map[int]int{}
		for _, nal := range SplitNALs(au) {
			types[NALType(nal)]++
		}
		wantKey := i == 0 || i == 40
		if key != wantKey {
			t.Errorf("frame %d: keyframe=%v, want %v", i, key, wantKey)
		}
		switch {
		case wantKey:
			if types[7] != 1 || types[8] != 1 || types[5] == 0 {
				t.Errorf("frame %d: NAL types %v, want SPS, PPS and IDR slices", i, types)
			}
			sps := SplitNALs(au)[0]
			if NALType(sps) != 7 || sps[1] != 66 || sps[2]&0x40 == 0 {
				t.Errorf("SPS %x: want profile_idc 66 with constraint_set1 (constrained baseline)", sps[:4])
			}
		default:
			if types[1] == 0 || types[5] != 0 || types[7] != 0 {
				t.Errorf("frame %d: NAL types %v, want only P slices", i, types)
			}
		}
		if s := types[1] + types[5]; s > 4 {
			t.Errorf("frame %d: %d slices, at most 4 wanted", i, s)
		}
	}

	// Decode everything with FFmpeg, an independent decoder.
	if _, err := exec.LookPath("ffprobe"); err != nil {
		t.Fatalf("ffprobe (Debian ffmpeg) is needed to check the stream decodes; run scripts/install-deps.sh: %v", err)
	}
	file := filepath.Join(t.TempDir(), "out.h264")
	os.WriteFile(file, stream, 0o644)
	out, err := exec.Command("ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0",
		"-show_entries", "stream=nb_read_frames,profile,width,height,has_b_frames", "-of", "default=nw=1", file).CombinedOutput()
	if err != nil {
		t.Fatalf("ffprobe: %v: %s", err, out)
	}
	got := string(out)
	for _, want := range []string{"nb_read_frames=" + strconv.Itoa(n), "width=1280", "height=800", "profile=Constrained Baseline", "has_b_frames=0"} {
		if !strings.Contains(got, want) {
			t.Errorf("ffprobe says %q, want %q", got, want)
		}
	}
}

func TestSplitNALs(t *testing.T) {
	b := []byte{0, 0, 0, 1, 0x67, 1, 2, 0, 0, 1, 0x68, 3, 0, 0, 0, 1, 0x65, 4, 5}
	nals := SplitNALs(b)
	if len(nals) != 3 || NALType(nals[0]) != 7 || NALType(nals[1]) != 8 || NALType(nals[2]) != 5 || len(nals[0]) != 3 || len(nals[2]) != 3 {
		t.Fatalf("SplitNALs = %x", nals)
	}
}
