package stream

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/pion/rtcp"

	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/internal/codec"
	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/internal/xprobe"
	"github.com/deskenv/deskenv/screen"
)

// decodeLast decodes an H.264 stream with ffmpeg and returns the last
// picture as RGB24, or fails the test when ffmpeg is missing.
func decodeLast(t *testing.T, stream []byte, w, h int) []byte {
	t.Helper()
	testrig.NeedTools(t, "ffmpeg") // to check the decoded pictures
	dir := t.TempDir()
	in := filepath.Join(dir, "in.h264")
	if err := os.WriteFile(in, stream, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ffmpeg", "-v", "error", "-f", "h264", "-i", in, "-f", "rawvideo", "-pix_fmt", "rgb24", "-")
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

func rgbAt(pic []byte, w, x, y int) [3]int {
	i := (y*w + x) * 3
	return [3]int{int(pic[i]), int(pic[i+1]), int(pic[i+2])}
}

func near(a [3]int, rgb uint32, tol int) bool {
	b := [3]int{int(rgb >> 16 & 0xff), int(rgb >> 8 & 0xff), int(rgb & 0xff)}
	for i := range a {
		if d := a[i] - b[i]; d < -tol || d > tol {
			return false
		}
	}
	return true
}

// settled is a quiet time after which refinement is surely over: it starts
// after refineAfter of stillness and sends a frame per tick.
const settled = refineAfter + 500*time.Millisecond

// collect gathers frames until quiet for the given time.
func (c *client) collect(quiet time.Duration) []frame {
	var fs []frame
	for {
		select {
		case f := <-c.frames:
			fs = append(fs, f)
		case <-time.After(quiet):
			return fs
		}
	}
}

func TestVideo(t *testing.T) {
	const w, h = 640, 480
	const bg = 0x204060
	e := newEnv(t, envOptions{width: w, height: h})
	p := testrig.Probe(t, e.d, xprobe.Options{Background: bg})
	// The pointer starts far from where the test paints.
	if err := e.exec.MoveTo(context.Background(), 600, 20, hci.SourceScript); err != nil {
		t.Fatal(err)
	}
	if st := e.s.Stats(); st.Encoding || st.FramesCaptured != 0 {
		t.Fatalf("before any viewer: %+v, want nothing running", st)
	}

	a := join(t, e, clientOptions{})
	defer a.close()
	var all []frame

	t.Run("keyframe first", func(t *testing.T) {
		f := a.waitFrame(10 * time.Second)
		all = append(all, f)
		for _, typ := range []int{7, 8, 5} {
			if !f.has(typ) {
				t.Fatalf("first frame has NAL types %v, want SPS (7), PPS (8) and an IDR slice (5)", f.types())
			}
		}
		sps := f.nals[0]
		for _, n := range f.nals {
			if codec.NALType(n) == 7 {
				sps = n
			}
		}
		level, _ := codec.Level(w, h, DefaultFPS)
		if sps[1] != 66 || sps[2]&0x40 == 0 || int(sps[3]) != level {
			t.Errorf("SPS profile %d constraints %#x level %d, want constrained baseline (66, set1) level %d", sps[1], sps[2], sps[3], level)
		}
	})

	t.Run("idle sends nothing", func(t *testing.T) {
		all = append(all, a.collect(settled)...)
		before := e.s.Stats()
		idle := a.collect(time.Second)
		after := e.s.Stats()
		all = append(all, idle...)
		// At most a keep-alive: the same picture again, nothing captured.
		keep := after.FramesKeepalive - before.FramesKeepalive
		if enc := after.FramesEncoded - before.FramesEncoded; enc != keep || keep > 1 || len(idle) > 1 {
			t.Errorf("an idle screen sent %d frames (encoded %d, %d of them keep-alives) in a second", len(idle), enc, keep)
		}
		if after.FramesSkipped <= before.FramesSkipped {
			t.Errorf("no ticks skipped while idle: %+v", after)
		}
		if after.FramesCaptured-before.FramesCaptured > 1 {
			t.Errorf("an idle screen was captured %d times in a second: damage tracking should avoid it", after.FramesCaptured-before.FramesCaptured)
		}
	})

	t.Run("change sends a frame", func(t *testing.T) {
		last := all[len(all)-1]
		start := time.Now()
		if err := p.Fill(100, 100, 200, 150, 0xff0000); err != nil {
			t.Fatal(err)
		}
		f := a.waitFrame(5 * time.Second)
		all = append(all, f)
		all = append(all, a.collect(settled)...)
		if f.has(5) {
			t.Errorf("a change was sent as an IDR: only joins and losses should cost keyframes")
		}
		// The RTP clock ran on while nothing was sent.
		gap := time.Duration(f.timestamp-last.timestamp) * time.Second / 90000
		wall := f.at.Sub(last.at)
		if gap < wall/2 || gap > wall+time.Second {
			t.Errorf("RTP timestamps advanced %v over %v of wall clock (since %v ago)", gap, wall, time.Since(start))
		}
		var stream []byte
		for _, f := range all {
			stream = append(stream, f.annexB()...)
		}
		pic := decodeLast(t, stream, w, h)
		if c := rgbAt(pic, w, 200, 170); !near(c, 0xff0000, 40) {
			t.Errorf("decoded pixel in the filled area is %v, want red", c)
		}
		if c := rgbAt(pic, w, 20, 300); !near(c, bg, 40) {
			t.Errorf("decoded background pixel is %v, want %06x", c, bg)
		}
	})

	t.Run("pointer is drawn", func(t *testing.T) {
		before := e.s.Stats()
		if err := e.exec.MoveTo(context.Background(), 400, 300, hci.SourceScript); err != nil {
			t.Fatal(err)
		}
		f := a.waitFrame(5 * time.Second)
		all = append(all, f)
		all = append(all, a.collect(settled)...)
		if after := e.s.Stats(); after.FramesCaptured != before.FramesCaptured {
			t.Errorf("a pointer move captured the screen %d times; the screen did not change", after.FramesCaptured-before.FramesCaptured)
		}
		var stream []byte
		for _, f := range all {
			stream = append(stream, f.annexB()...)
		}
		pic := decodeLast(t, stream, w, h)
		differ := 0
		for y := 290; y < 310; y++ {
			for x := 390; x < 410; x++ {
				if !near(rgbAt(pic, w, x, y), bg, 40) {
					differ++
				}
			}
		}
		if differ < 10 {
			t.Errorf("only %d pixels around the pointer differ from the background: the pointer is not drawn", differ)
		}
		if c := rgbAt(pic, w, 600, 20); !near(c, bg, 40) {
			t.Errorf("pixel where the pointer was is %v: the old pointer was not erased", c)
		}
	})

	t.Run("pointer moved outside hci", func(t *testing.T) {
		testrig.NeedTools(t, "xdotool")
		a.collect(settled) // idle: the loop polls slowly now
		cmd := exec.Command("xdotool", "mousemove", "100", "400")
		cmd.Env = e.d.Env()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("xdotool: %v: %s", err, out)
		}
		f := a.waitFrame(5 * time.Second)
		fs := append(all, f)
		fs = append(fs, a.collect(settled)...)
		all = fs
		var stream []byte
		for _, f := range all {
			stream = append(stream, f.annexB()...)
		}
		pic := decodeLast(t, stream, w, h)
		if c := rgbAt(pic, w, 100, 400); near(c, bg, 40) {
			t.Errorf("no pointer drawn at (100,400) after xdotool moved it there: %v", c)
		}
	})

	// Once there is a frame, only the damaged area is captured and
	// converted: after small changes at odd places, one of them under the
	// pointer, the whole decoded picture still matches the screen.
	t.Run("changed areas alone, the rest intact", func(t *testing.T) {
		a.collect(settled)
		fills := []struct {
			x, y, w, h int
			rgb        uint32
		}{
			{31, 17, 7, 5, 0x00ff00},
			{95, 395, 13, 11, 0xffff00}, // under the pointer at (100,400)
			{601, 441, 9, 9, 0x0000ff},
			{0, 0, 640, 2, 0xff00ff},
		}
		for _, f := range fills {
			if err := p.Fill(f.x, f.y, f.w, f.h, f.rgb); err != nil {
				t.Fatal(err)
			}
			time.Sleep(40 * time.Millisecond)
		}
		all = append(all, a.collect(settled)...)
		var stream []byte
		for _, f := range all {
			stream = append(stream, f.annexB()...)
		}
		pic := decodeLast(t, stream, w, h)
		shot, err := e.s.capt.Capture(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		px, py, _, _ := p.Bounds()
		nearEdge := func(x, y int) bool {
			for _, f := range fills {
				in := func(x0, y0, x1, y1 int) bool { return x >= x0 && x < x1 && y >= y0 && y < y1 }
				if in(f.x-3, f.y-3, f.x+f.w+3, f.y+f.h+3) && !in(f.x+3, f.y+3, f.x+f.w-3, f.y+f.h-3) {
					return true
				}
			}
			return false
		}
		bad := 0
		for y := 0; y < h; y += 3 {
			for x := 0; x < w; x += 3 {
				if x >= 80 && x < 130 && y >= 385 && y < 435 {
					continue // the pointer
				}
				if nearEdge(x, y) {
					continue // 4:2:0 and the quantizer blur a fill's edges
				}
				sx, sy := x+px, y+py
				i := sy*shot.Stride + sx*4
				want := uint32(shot.Pix[i+2])<<16 | uint32(shot.Pix[i+1])<<8 | uint32(shot.Pix[i])
				if !near(rgbAt(pic, w, x, y), want, 60) {
					if bad < 5 {
						t.Errorf("decoded (%d,%d) is %v, the screen %06x", x, y, rgbAt(pic, w, x, y), want)
					}
					bad++
				}
			}
		}
		if bad > 0 {
			t.Errorf("%d sampled pixels of the decoded picture differ from the screen", bad)
		}
		if c := rgbAt(pic, w, 34, 19); !near(c, 0x00ff00, 60) {
			t.Errorf("the 7x5 fill at (31,17) decodes as %v, want green", c)
		}
	})

	t.Run("PLI gets a keyframe", func(t *testing.T) {
		a.collect(settled) // past the keyframe interval
		ssrc := uint32(a.pc.GetReceivers()[0].Track().SSRC())
		if err := a.pc.WriteRTCP([]rtcp.Packet{&rtcp.PictureLossIndication{MediaSSRC: ssrc}}); err != nil {
			t.Fatal(err)
		}
		f := a.waitFrame(5 * time.Second)
		if !f.has(5) || !f.has(7) {
			t.Errorf("after a PLI the frame has NAL types %v, want an IDR with SPS", f.types())
		}
	})

	t.Run("second viewer gets a keyframe, one encode for both", func(t *testing.T) {
		a.collect(settled)
		b := join(t, e, clientOptions{})
		defer b.close()
		f := b.waitFrame(10 * time.Second)
		if !f.has(5) {
			t.Fatalf("second viewer's first frame has NAL types %v, want an IDR", f.types())
		}
		b.collect(settled)
		a.collect(settled)
		before := e.s.Stats()
		for i := 0; i < 5; i++ {
			p.Fill(10+i*20, 400, 15, 15, uint32(0x00ff00+i))
			time.Sleep(50 * time.Millisecond)
		}
		na := len(a.collect(settled))
		nb := len(b.collect(settled))
		after := e.s.Stats()
		if enc := int(after.FramesEncoded - before.FramesEncoded); enc != na || enc != nb || enc < 5 {
			t.Errorf("5 changes encoded %d frames; the viewers got %d and %d: each frame must be encoded once and reach both", enc, na, nb)
		}
	})
}

// TestVideoScaled streams a video smaller than the screen.
func TestVideoScaled(t *testing.T) {
	e := newEnv(t, envOptions{width: 1280, height: 800, cfg: Config{VideoWidth: 640, VideoHeight: 400}})
	p := testrig.Probe(t, e.d, xprobe.Options{Background: 0x000000})
	if err := e.exec.MoveTo(context.Background(), 1270, 790, hci.SourceScript); err != nil {
		t.Fatal(err)
	}
	p.Fill(640, 400, 640, 400, 0xffffff) // the bottom right quarter
	a := join(t, e, clientOptions{})
	defer a.close()
	fs := []frame{a.waitFrame(10 * time.Second)}
	fs = append(fs, a.collect(settled)...)
	var stream []byte
	for _, f := range fs {
		stream = append(stream, f.annexB()...)
	}
	pic := decodeLast(t, stream, 640, 400)
	for _, pt := range []struct {
		x, y int
		rgb  uint32
	}{{100, 100, 0}, {500, 300, 0xffffff}, {330, 210, 0xffffff}, {310, 190, 0}} {
		if c := rgbAt(pic, 640, pt.x, pt.y); !near(c, pt.rgb, 40) {
			t.Errorf("video pixel (%d,%d) = %v, want %06x", pt.x, pt.y, c, pt.rgb)
		}
	}
}

// TestVideoAfterServerRestart kills Xvfb under a watching viewer: once the
// display is back, changes on the new server reach the same viewer.
func TestVideoAfterServerRestart(t *testing.T) {
	const w, h = 640, 480
	e := newEnv(t, envOptions{width: w, height: h, restart: true})
	a := join(t, e, clientOptions{})
	defer a.close()
	fs := []frame{a.waitFrame(10 * time.Second)}
	fs = append(fs, a.collect(settled)...)

	gen := e.d.Generation()
	if err := syscall.Kill(e.d.ServerPID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testrig.WaitWithin(t, 20*time.Second, "the display to come back", func() bool {
		return e.d.Generation() != gen && e.d.Health(context.Background()) == nil
	})
	p := testrig.Probe(t, e.d, xprobe.Options{Background: 0x00ff00})
	// The stream goes on (with P-frames from the same encoder, or an IDR
	// from a new one): decoded from the start, it ends showing the probe.
	testrig.WaitState(t, 15*time.Second, "a frame showing the new server's probe window", func() (bool, string) {
		fs = append(fs, a.waitFrame(15*time.Second))
		fs = append(fs, a.collect(settled)...)
		var stream []byte
		for _, f := range fs {
			stream = append(stream, f.annexB()...)
		}
		pic := decodeLast(t, stream, w, h)
		if c := rgbAt(pic, w, 10, 10); !near(c, 0x00ff00, 40) {
			p.Fill(0, 0, 20, 20, 0x00ff00)
			return false, fmt.Sprintf("pixel %v", c)
		}
		return true, ""
	})
}

// decodeAll decodes an H.264 stream into RGB24 pictures.
func decodeAll(t *testing.T, stream []byte, w, h int) [][]byte {
	t.Helper()
	last := decodeLast(t, stream, w, h) // fails without ffmpeg; checks the stream
	_ = last
	dir := t.TempDir()
	in := filepath.Join(dir, "in.h264")
	os.WriteFile(in, stream, 0o644)
	out, err := exec.Command("ffmpeg", "-v", "error", "-f", "h264", "-i", in, "-f", "rawvideo", "-pix_fmt", "rgb24", "-").Output()
	if err != nil {
		t.Fatal(err)
	}
	var pics [][]byte
	for n := w * h * 3; len(out) >= n; out = out[n:] {
		pics = append(pics, out[:n])
	}
	return pics
}

// psnr compares an RGB24 picture with a BGRX capture.
func psnr(rgb []byte, f *screen.Frame) float64 {
	var sum float64
	for y := 0; y < f.Height; y++ {
		for x := 0; x < f.Width; x++ {
			i, j := (y*f.Width+x)*3, y*f.Stride+x*4
			for c, k := range [3]int{2, 1, 0} {
				d := float64(int(rgb[i+c]) - int(f.Pix[j+k]))
				sum += d * d
			}
		}
	}
	mse := sum / float64(f.Width*f.Height*3)
	if mse == 0 {
		return 99
	}
	return 10 * math.Log10(255*255/mse)
}

// TestRefine draws a screenful of fine detail at once: the first frame is
// rate-limited and blurred, and the frames that follow while the screen is
// still sharpen it.
func TestRefine(t *testing.T) {
	const w, h = 640, 480
	e := newEnv(t, envOptions{width: w, height: h, cfg: Config{BitrateKbps: 1000}})
	p := testrig.Probe(t, e.d, xprobe.Options{Background: 0xffffff})
	if err := e.exec.MoveTo(context.Background(), w-1, h-1, hci.SourceScript); err != nil {
		t.Fatal(err)
	}
	a := join(t, e, clientOptions{})
	defer a.close()
	fs := []frame{a.waitFrame(10 * time.Second)}
	fs = append(fs, a.collect(800*time.Millisecond)...)

	// "Text": rows of tiny dark strokes, drawn as one burst.
	r := rand.New(rand.NewPCG(3, 4))
	for row := 8; row < h-16; row += 14 {
		for x := 4; x < w-8; x += 6 {
			p.Fill(x+r.IntN(3), row+r.IntN(8), 1+r.IntN(2), 1+r.IntN(3), 0x101010)
		}
	}
	p.Sync(context.Background())
	capt, err := screen.NewCapturer(e.d)
	if err != nil {
		t.Fatal(err)
	}
	defer capt.Close()
	src, err := capt.Capture(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	before := len(fs)
	fs = append(fs, a.waitFrame(5*time.Second))
	fs = append(fs, a.collect(800*time.Millisecond)...)
	var stream []byte
	for _, f := range fs {
		stream = append(stream, f.annexB()...)
	}
	pics := decodeAll(t, stream, w, h)
	if len(pics) != len(fs) {
		t.Fatalf("decoded %d pictures from %d frames", len(pics), len(fs))
	}
	// The first frame showing the text may be a partial draw; take the
	// last frame before refinement set in: the first after the drawing
	// finished is the one whose content equals src.
	first, last := psnr(pics[before], src), psnr(pics[len(pics)-1], src)
	for i := before; i < len(pics); i++ {
		t.Logf("frame %d: %.1f dB, %d bytes", i, psnr(pics[i], src), len(fs[i].annexB()))
	}
	if st := e.s.Stats(); st.FramesRefined == 0 {
		t.Errorf("no frame was refined: %+v", st)
	}
	if last < first+3 || last < 25 {
		t.Errorf("the still picture went from %.1f dB to %.1f dB: refinement should sharpen it", first, last)
	}
}
