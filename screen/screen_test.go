package screen

import (
	"bytes"
	"context"
	"fmt"
	"hash/adler32"
	"hash/maphash"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jezek/xgb/xproto"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/internal/xprobe"
)

func startDisplay(t testing.TB, w, h int) *display.Display {
	t.Helper()
	return testrig.Display(t, display.Config{Width: w, Height: h, RestartOnCrash: true})
}

// paint opens a full-screen probe, fills it with bg and draws rects on it.
func paint(t testing.TB, d *display.Display, bg uint32, rects ...[5]int) *xprobe.Probe {
	t.Helper()
	p, err := xprobe.Open(d.Name(), xprobe.Options{Background: bg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	w, h := d.Size()
	if err := p.Fill(0, 0, w, h, bg); err != nil {
		t.Fatal(err)
	}
	for _, r := range rects {
		if err := p.Fill(r[0], r[1], r[2], r[3], uint32(r[4])); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func pixel(f *Frame, x, y int) uint32 {
	i := y*f.Stride + x*4
	return uint32(f.Pix[i+2])<<16 | uint32(f.Pix[i+1])<<8 | uint32(f.Pix[i])
}

func TestCaptureSeesPaintedPixels(t *testing.T) {
	d := startDisplay(t, 640, 480)
	paint(t, d, 0x102030, [5]int{100, 50, 20, 10, 0xff0000}, [5]int{300, 400, 5, 5, 0x00ff7f})
	c, err := NewCapturer(d)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !c.UsesSHM() {
		t.Fatal("capture does not use MIT-SHM on Xvfb")
	}
	f, err := c.Capture(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		x, y int
		want uint32
	}{
		{0, 0, 0x102030}, {100, 50, 0xff0000}, {119, 59, 0xff0000}, {120, 59, 0x102030},
		{99, 50, 0x102030}, {302, 402, 0x00ff7f}, {639, 479, 0x102030},
	}
	for _, tc := range tests {
		if got := pixel(f, tc.x, tc.y); got != tc.want {
			t.Errorf("pixel %d,%d = %06x, want %06x", tc.x, tc.y, got, tc.want)
		}
	}
}

func TestPNGLosslessAndJPEG(t *testing.T) {
	d := startDisplay(t, 640, 480)
	paint(t, d, 0xffffff, [5]int{10, 10, 200, 100, 0x336699}, [5]int{400, 300, 1, 1, 0x010203})
	c, _ := NewCapturer(d)
	defer c.Close()
	f, err := c.Capture(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := EncodePNG(&buf, f); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatalf("our PNG does not decode: %v", err)
	}
	for y := 0; y < f.Height; y++ {
		for x := 0; x < f.Width; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			got := (r>>8)<<16 | (g>>8)<<8 | b>>8
			if want := pixel(f, x, y); got != want {
				t.Fatalf("PNG pixel %d,%d = %06x, want %06x", x, y, got, want)
			}
		}
	}

	s := NewShooter(c, ShooterOptions{Format: JPEG, JPEGQuality: 90})
	shot, err := s.Shot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if shot.MIME != "image/jpeg" {
		t.Fatalf("MIME %q", shot.MIME)
	}
	jimg, err := jpeg.Decode(bytes.NewReader(shot.Data))
	if err != nil {
		t.Fatal(err)
	}
	if b := jimg.Bounds(); b.Dx() != 640 || b.Dy() != 480 {
		t.Fatalf("JPEG size %v", b)
	}
}

func TestScale(t *testing.T) {
	tests := []struct {
		name         string
		sw, sh       int
		dw, dh       int
		region       image.Rectangle // painted red in source coords
		probe        image.Point     // inside region in dest coords
		outsideProbe image.Point
	}{
		{"1920x1200 to 1280x800", 1920, 1200, 1280, 800, image.Rect(300, 300, 600, 600), image.Pt(300, 300), image.Pt(10, 10)},
		{"1366x768 to 1024x576", 1366, 768, 1024, 576, image.Rect(0, 0, 100, 100), image.Pt(10, 10), image.Pt(500, 500)},
		{"identity", 800, 600, 800, 600, image.Rect(5, 5, 6, 6), image.Pt(5, 5), image.Pt(6, 6)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := &Frame{Pix: make([]byte, tc.sw*tc.sh*4), Stride: tc.sw * 4, Width: tc.sw, Height: tc.sh}
			for y := 0; y < tc.sh; y++ {
				for x := 0; x < tc.sw; x++ {
					i := y*src.Stride + x*4
					if image.Pt(x, y).In(tc.region) {
						src.Pix[i+2] = 0xff
					} else {
						src.Pix[i], src.Pix[i+1], src.Pix[i+2] = 0xff, 0xff, 0xff
					}
				}
			}
			dst := Scale(src, tc.dw, tc.dh)
			if dst.Width != tc.dw || dst.Height != tc.dh || len(dst.Pix) < tc.dw*tc.dh*4 {
				t.Fatalf("size %dx%d, want %dx%d", dst.Width, dst.Height, tc.dw, tc.dh)
			}
			if got := pixel(dst, tc.probe.X, tc.probe.Y); got != 0xff0000 {
				t.Errorf("inside the red region got %06x", got)
			}
			if got := pixel(dst, tc.outsideProbe.X, tc.outsideProbe.Y); got != 0xffffff {
				t.Errorf("outside the red region got %06x", got)
			}
		})
	}
}

func TestShooterCachesUnchangedAndZoomIsFullResolution(t *testing.T) {
	d := startDisplay(t, 1920, 1200)
	p := paint(t, d, 0x000000, [5]int{1000, 600, 40, 30, 0x00ff00})
	c, _ := NewCapturer(d)
	defer c.Close()
	s := NewShooter(c, ShooterOptions{ModelW: 1280, ModelH: 800})
	ctx := context.Background()
	first, err := s.Shot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !first.Changed || first.Width != 1280 || first.Height != 800 {
		t.Fatalf("first shot %dx%d changed=%v", first.Width, first.Height, first.Changed)
	}
	second, _ := s.Shot(ctx)
	if second.Changed || !bytes.Equal(first.Data, second.Data) || s.Encodes() != 1 {
		t.Fatalf("unchanged screen was re-encoded: changed=%v encodes=%d", second.Changed, s.Encodes())
	}
	p.Fill(0, 0, 10, 10, 0xffffff)
	third, _ := s.Shot(ctx)
	if !third.Changed || s.Encodes() != 2 {
		t.Fatalf("a changed screen was not re-encoded")
	}

	zoom, err := s.Zoom(ctx, image.Rect(990, 590, 1050, 640))
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(zoom.Data))
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 60 || b.Dy() != 50 {
		t.Fatalf("zoom is %v, want 60x50 (full resolution)", b)
	}
	if got := color.RGBAModel.Convert(img.At(10, 10)).(color.RGBA); got.G != 0xff || got.R != 0 {
		t.Fatalf("zoom pixel at the green square = %v", got)
	}
	if got := color.RGBAModel.Convert(img.At(9, 9)).(color.RGBA); got.G != 0 {
		t.Fatalf("zoom pixel just outside the green square = %v", got)
	}
	for _, bad := range []image.Rectangle{image.Rect(0, 0, 0, 0), image.Rect(1900, 1100, 2000, 1300)} {
		if _, err := s.Zoom(ctx, bad); err == nil || !strings.Contains(err.Error(), "zoom region") {
			t.Errorf("Zoom(%v) err = %v, want a clear error", bad, err)
		}
	}
}

func TestSettle(t *testing.T) {
	d := startDisplay(t, 320, 240)
	p := paint(t, d, 0x000000)
	c, _ := NewCapturer(d)
	defer c.Close()
	ctx := context.Background()

	settled, _, err := c.Settle(ctx, SettleOptions{Quiet: 30 * time.Millisecond, Max: 2 * time.Second})
	if err != nil || !settled {
		t.Fatalf("idle screen did not settle: %v %v", settled, err)
	}

	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			p.Fill(0, 0, 50, 50, uint32(i*0x10101)&0xffffff)
		}
	}()
	settled, waited, err := c.Settle(ctx, SettleOptions{Quiet: 100 * time.Millisecond, Max: 400 * time.Millisecond})
	close(stop)
	<-done
	if err != nil || settled {
		t.Fatalf("a screen that kept changing settled (waited %s, err %v)", waited, err)
	}
	if waited < 400*time.Millisecond {
		t.Fatalf("gave up after %s, before Max", waited)
	}
}

func TestNoSegmentLeakAndRestart(t *testing.T) {
	d := startDisplay(t, 320, 240)
	c, _ := NewCapturer(d)
	defer c.Close()
	ctx := context.Background()
	before := shmSegments(t)
	var f Frame
	for i := 0; i < 500; i++ {
		if err := c.CaptureInto(ctx, &f); err != nil {
			t.Fatal(err)
		}
	}
	if after := shmSegments(t); after > before {
		t.Fatalf("shared memory segments grew from %d to %d over 500 captures", before, after)
	}

	changed := d.Changed()
	syscall.Kill(d.ServerPID(), syscall.SIGKILL)
	<-changed
	deadline := time.Now().Add(10 * time.Second)
	for d.Restarts() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	var err error
	for i := 0; i < 3; i++ { // the first try may race the reconnect
		if err = c.CaptureInto(ctx, &f); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("capture after the X server restarted: %v", err)
	}
}

func shmSegments(t testing.TB) int {
	data, err := os.ReadFile("/proc/sysvipc/shm")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(data), "\n") - 1
}

func TestAdler32Combine(t *testing.T) {
	data := []byte("the quick brown fox jumps over the lazy dog, again and again and again")
	for _, cut := range []int{0, 1, 10, len(data) - 1, len(data)} {
		a, b := data[:cut], data[cut:]
		got := adler32Combine(adler32.Checksum(a), adler32.Checksum(b), len(b))
		if want := adler32.Checksum(data); got != want {
			t.Errorf("cut %d: combined %08x, want %08x", cut, got, want)
		}
	}
	big := bytes.Repeat([]byte{0xff}, 200000)
	if got, want := adler32Combine(adler32.Checksum(big[:123457]), adler32.Checksum(big[123457:]), len(big)-123457), adler32.Checksum(big); got != want {
		t.Errorf("large: combined %08x, want %08x", got, want)
	}
}

// scaleReference is Scale as first written (uint64 sums, no flattening): the
// faster Scale must give the very same bytes.
func scaleReference(f *Frame, w, h int) *Frame {
	xs := areaWeights(f.Width, w)
	ys := areaWeights(f.Height, h)
	dst := &Frame{Pix: make([]byte, w*h*4), Stride: w * 4, Width: w, Height: h}
	acc := make([]uint64, f.Width*3)
	for y := 0; y < h; y++ {
		clear(acc)
		for _, c := range ys[y] {
			row := f.Pix[c.i*f.Stride:]
			for x := 0; x < f.Width; x++ {
				for ch := 0; ch < 3; ch++ {
					acc[x*3+ch] += uint64(row[x*4+ch]) * uint64(c.w)
				}
			}
		}
		for x := 0; x < w; x++ {
			var sum [3]uint64
			for _, c := range xs[x] {
				for ch := 0; ch < 3; ch++ {
					sum[ch] += acc[c.i*3+ch] * uint64(c.w)
				}
			}
			for ch := 0; ch < 3; ch++ {
				dst.Pix[y*dst.Stride+x*4+ch] = byte((sum[ch] + 1<<(2*weightBits-1)) >> (2 * weightBits))
			}
			dst.Pix[y*dst.Stride+x*4+3] = 0xff
		}
	}
	return dst
}

func TestScaleMatchesReference(t *testing.T) {
	sizes := []struct{ sw, sh, dw, dh int }{
		{1920, 1200, 1280, 800}, {1366, 768, 1024, 576}, {1920, 1080, 1366, 768}, {101, 37, 50, 20}, {640, 480, 639, 479},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var reused scaler // as a Shooter keeps one: the sizes change under it
	for _, sz := range sizes {
		src := &Frame{Pix: make([]byte, sz.sw*sz.sh*4), Stride: sz.sw * 4, Width: sz.sw, Height: sz.sh}
		for i := range src.Pix {
			// Extremes as well as noise: all-255 areas are where a sum
			// would overflow first.
			switch rng.IntN(3) {
			case 0:
				src.Pix[i] = 0xff
			case 1:
				src.Pix[i] = byte(rng.IntN(256))
			}
		}
		got, want := Scale(src, sz.dw, sz.dh), scaleReference(src, sz.dw, sz.dh)
		if !bytes.Equal(got.Pix, want.Pix) {
			t.Errorf("%dx%d to %dx%d: Scale differs from the reference", sz.sw, sz.sh, sz.dw, sz.dh)
		}
		for range 2 { // the second time with the weights and frame it kept
			if got := reused.scale(src, sz.dw, sz.dh); !bytes.Equal(got.Pix, want.Pix) {
				t.Errorf("%dx%d to %dx%d: a reused scaler differs from the reference", sz.sw, sz.sh, sz.dw, sz.dh)
			}
		}
	}
}

// TestCaptureSurvivesResize: a program on the desktop shrinks the screen
// with xrandr (which Xvfb allows); the next capture puts the size back and
// succeeds instead of failing with BadMatch until the next reset.
func TestCaptureSurvivesResize(t *testing.T) {
	if _, err := exec.LookPath("xrandr"); err != nil {
		t.Fatalf("xrandr is required (scripts/install-deps.sh installs x11-xserver-utils): %v", err)
	}
	d := startDisplay(t, 1280, 800)
	c, err := NewCapturer(d)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	for _, size := range []string{"1024x768", "640x480"} {
		cmd := exec.Command("xrandr", "--fb", size)
		cmd.Env = d.Env()
		cmd.Run() // xrandr reports an error about the output, but the screen does shrink
		if got := rootSize(t, d); got == "1280x800" {
			t.Fatalf("xrandr --fb %s did not shrink the screen; the test proves nothing", size)
		}
		f, err := c.Capture(ctx)
		if err != nil {
			t.Fatalf("capture after xrandr --fb %s: %v", size, err)
		}
		if f.Width != 1280 || f.Height != 800 {
			t.Errorf("frame %dx%d, want 1280x800", f.Width, f.Height)
		}
		if got := rootSize(t, d); got != "1280x800" {
			t.Errorf("the screen is %s after the capture, want it restored to 1280x800", got)
		}
	}
}

func rootSize(t *testing.T, d *display.Display) string {
	t.Helper()
	c, err := d.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	g, err := xproto.GetGeometry(c, xproto.Drawable(d.Root())).Reply()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%dx%d", g.Width, g.Height)
}

// TestFrameRehash: a frame whose rows were rewritten and rehashed band by
// band has the Hash of the same pixels hashed whole, wherever the rows
// fall (inside a band, across bands, the last short band), and a copy
// with pixels of its own does not reuse the bands of the frame it was
// copied from.
func TestFrameRehash(t *testing.T) {
	seed := maphash.MakeSeed()
	const w, h = 37, 70 // the last band is 6 rows
	fresh := func() *Frame {
		f := &Frame{Pix: make([]byte, w*h*4), Stride: w * 4, Width: w, Height: h}
		for i := range f.Pix {
			f.Pix[i] = byte(i * 7)
		}
		f.rehash(seed, 0, h)
		return f
	}
	whole := func(f *Frame) uint64 {
		g := &Frame{Pix: append([]byte(nil), f.Pix...), Stride: f.Stride, Width: f.Width, Height: f.Height}
		g.rehash(seed, 0, g.Height)
		return g.Hash
	}
	for _, tc := range []struct {
		name   string
		y0, y1 int
	}{
		{"one row", 3, 4},
		{"inside a band", 17, 30},
		{"across bands", 14, 35},
		{"the last short band", 66, 70},
		{"everything", 0, 70},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fresh()
			before := f.Hash
			for y := tc.y0; y < tc.y1; y++ {
				f.Pix[y*f.Stride+5] ^= 0xff
			}
			f.rehash(seed, tc.y0, tc.y1)
			if f.Hash == before {
				t.Errorf("the hash did not change after rows %d-%d changed", tc.y0, tc.y1)
			}
			if want := whole(f); f.Hash != want {
				t.Errorf("rehashed rows %d-%d: hash %x, hashed whole %x", tc.y0, tc.y1, f.Hash, want)
			}
		})
	}
	t.Run("a copy with pixels of its own", func(t *testing.T) {
		f := fresh()
		c := *f
		c.Pix = append([]byte(nil), f.Pix...)
		c.Pix[0] ^= 0xff // a change rehash is not told of: only a new Pix shows it
		c.rehash(seed, 60, 61)
		if want := whole(&c); c.Hash != want {
			t.Errorf("the copy's hash %x, hashed whole %x: it used the original's bands", c.Hash, want)
		}
		if orig := whole(f); f.Hash != orig {
			t.Errorf("the original's hash changed under the copy")
		}
		f.Pix[40*f.Stride] ^= 0xff
		f.rehash(seed, 40, 41)
		if want := whole(f); f.Hash != want {
			t.Errorf("the original's bands were written by the copy: hash %x, hashed whole %x", f.Hash, want)
		}
	})
}
