package stream

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/pion/rtp/codecs"
	"github.com/pion/webrtc/v4"

	"github.com/deskenv/deskenv/internal/codec"
	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/internal/xprobe"
)

// readVP8 depacketizes VP8 into frames, checking each packet's payload
// descriptor (RFC 7741): a frame starts with S=1 in partition 0, and
// carries the picture ID the server enables, one more for each frame.
func (c *client) readVP8(tr *webrtc.TrackRemote) {
	var cur []byte
	var lastPID uint16
	havePID := false
	for {
		pkt, _, err := tr.ReadRTP()
		if err != nil {
			return
		}
		var dep codecs.VP8Packet
		b, err := dep.Unmarshal(pkt.Payload)
		if err != nil {
			c.t.Errorf("depacketize VP8: %v", err)
			continue
		}
		if len(cur) == 0 && (dep.S != 1 || dep.PID != 0) {
			c.t.Errorf("VP8 frame starts with S=%d PID=%d, want S=1 PID=0", dep.S, dep.PID)
		}
		// pion's payloader leaves out picture ID 0 (its first).
		pid := dep.PictureID
		if dep.I != 1 {
			pid = 0
		}
		if len(cur) == 0 {
			if havePID && pid != (lastPID+1)&0x7fff {
				c.t.Errorf("VP8 picture ID %d (I=%d) after %d", pid, dep.I, lastPID)
			}
			lastPID, havePID = pid, true
		}
		cur = append(cur, b...)
		if pkt.Marker {
			f := frame{vp8: append([]byte(nil), cur...), timestamp: pkt.Timestamp, at: time.Now()}
			cur = cur[:0]
			select {
			case c.frames <- f:
			default:
			}
		}
	}
}

// decodeVP8 has ffmpeg decode VP8 frames (from an IVF file) and returns the
// last picture as RGB.
func decodeVP8(t *testing.T, frames []frame, w, h int) []byte {
	t.Helper()
	testrig.NeedTools(t, "ffmpeg") // to check the decoded pictures
	var ivf bytes.Buffer
	ivf.WriteString("DKIF")
	binary.Write(&ivf, binary.LittleEndian, []uint16{0, 32})
	ivf.WriteString("VP80")
	binary.Write(&ivf, binary.LittleEndian, []uint16{uint16(w), uint16(h)})
	binary.Write(&ivf, binary.LittleEndian, []uint32{30, 1, uint32(len(frames)), 0})
	// Frame numbers for timestamps: the RTP clock starts anywhere, and
	// ffmpeg would fill the time before it with copies of pictures.
	for i, f := range frames {
		binary.Write(&ivf, binary.LittleEndian, uint32(len(f.vp8)))
		binary.Write(&ivf, binary.LittleEndian, uint64(i))
		ivf.Write(f.vp8)
	}
	in := filepath.Join(t.TempDir(), "in.ivf")
	if err := os.WriteFile(in, ivf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ffmpeg", "-v", "error", "-i", in, "-f", "rawvideo", "-pix_fmt", "rgb24", "-")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ffmpeg could not decode the stream: %v\n%s", err, stderr.String())
	}
	if stderr.Len() > 0 {
		t.Errorf("ffmpeg complained about the stream: %s", stderr.String())
	}
	n := w * h * 3
	if len(out) < n || len(out)%n != 0 {
		t.Fatalf("ffmpeg gave %d bytes, not a whole number of %dx%d pictures", len(out), w, h)
	}
	return out[len(out)-n:]
}

// TestVideoVP8 is a browser without H.264: its offer has VP8 only, and it
// is sent VP8, a keyframe first, that decodes to what the screen shows.
// With an H.264 viewer beside it each gets its own codec.
func TestVideoVP8(t *testing.T) {
	const w, h = 640, 480
	const bg = 0x204060
	e := newEnv(t, envOptions{width: w, height: h})
	p := testrig.Probe(t, e.d, xprobe.Options{Background: bg})

	v := join(t, e, clientOptions{vp8Only: true})
	defer v.close()
	var all []frame
	f := v.waitFrame(10 * time.Second)
	all = append(all, f)
	hd, err := codec.ParseVP8Header(f.vp8)
	if err != nil || !hd.Key || hd.Width != w || hd.Height != h {
		t.Fatalf("first frame: header %+v, %v; want a %dx%d keyframe", hd, err, w, h)
	}
	v.mu.Lock()
	answered := v.codec
	v.mu.Unlock()
	if answered != "vp8" {
		t.Errorf("the answer says codec %q, want vp8", answered)
	}

	all = append(all, v.collect(settled)...)
	if err := p.Fill(100, 100, 200, 150, 0xff0000); err != nil {
		t.Fatal(err)
	}
	f = v.waitFrame(5 * time.Second)
	if hd, err := codec.ParseVP8Header(f.vp8); err != nil || hd.Key {
		t.Errorf("a change was sent as header %+v, %v: want an interframe", hd, err)
	}
	all = append(all, f)
	all = append(all, v.collect(settled)...)
	pic := decodeVP8(t, all, w, h)
	if c := rgbAt(pic, w, 200, 170); !near(c, 0xff0000, 40) {
		t.Errorf("decoded pixel in the filled area is %v, want red", c)
	}
	if c := rgbAt(pic, w, 20, 300); !near(c, bg, 40) {
		t.Errorf("decoded background pixel is %v, want %06x", c, bg)
	}

	// An H.264 viewer beside it: both codecs are encoded, each viewer gets
	// its own, and the keyframe the newcomer asks for is H.264's alone.
	a := join(t, e, clientOptions{})
	if f := a.waitFrame(10 * time.Second); len(f.nals) == 0 || !f.has(5) {
		t.Fatalf("the H.264 viewer's first frame has NAL types %v, want an IDR", f.types())
	}
	for _, f := range v.collect(settled) {
		if hd, err := codec.ParseVP8Header(f.vp8); err != nil || hd.Key {
			t.Errorf("the VP8 viewer got header %+v, %v when an H.264 viewer joined: want no keyframe", hd, err)
		}
	}
	if err := p.Fill(300, 300, 100, 100, 0x00ff00); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*client{a, v} {
		got := c.waitFrame(5 * time.Second)
		if (c == v) != (got.vp8 != nil) {
			t.Errorf("viewer got a frame in the wrong codec (VP8 %d bytes, H.264 NALs %v)", len(got.vp8), got.types())
		}
	}
	v.close()
	a.collect(settled)
	a.close()
}
