package screen

import (
	"context"
	"fmt"
	"image"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/internal/testrig"
)

// benchDesktop starts a 1280x800 desktop with real content: openbox and two
// xterms full of text.
func benchDesktop(b *testing.B, w, h int) *display.Display {
	b.Helper()
	testrig.NeedTools(b, "openbox", "xterm")
	d := testrig.Display(b, display.Config{Width: w, Height: h, WindowManager: []string{"openbox"}, Apps: [][]string{
		{"xterm", "-geometry", "120x40+0+0", "-e", "sh", "-c", "ls -la /usr/bin | head -200; exec sleep 600"},
		{"xterm", "-geometry", "80x30+500+300", "-bg", "navy", "-fg", "yellow", "-e", "sh", "-c", "cat /etc/services; exec sleep 600"},
	}})
	time.Sleep(1500 * time.Millisecond) // let the terminals draw
	return d
}

func BenchmarkCapture(b *testing.B) {
	d := benchDesktop(b, 1280, 800)
	c, _ := NewCapturer(d)
	defer c.Close()
	ctx := context.Background()
	var f Frame
	b.Run("shm", func(b *testing.B) {
		for b.Loop() {
			if err := c.CaptureInto(ctx, &f); err != nil {
				b.Fatal(err)
			}
		}
	})
	// What the stream's loop pays for a changed 64x64 area (a pointer, a
	// typed word) once damage says where: the area grabbed and written over
	// the last frame, the hash taken again.
	b.Run("shm-area-64x64", func(b *testing.B) {
		if err := c.CaptureInto(ctx, &f); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			f.Pix[(100*f.Stride)+100*4]++ // so the area differs and the hash is taken
			if _, _, err := c.CaptureAreaInto(ctx, &f, image.Rect(100, 100, 164, 164)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("getimage", func(b *testing.B) {
		c.mu.Lock()
		c.useSHM = false
		c.mu.Unlock()
		defer func() { c.mu.Lock(); c.gen = 0; c.mu.Unlock() }()
		for b.Loop() {
			if err := c.CaptureInto(ctx, &f); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkScreenshot compares the whole screenshot path (capture, scale,
// encode PNG) with what the usual demo runs: scrot to a file, and scrot plus
// ImageMagick's resize.
func BenchmarkScreenshot(b *testing.B) {
	for _, size := range []struct {
		name         string
		w, h, mw, mh int
	}{
		{"1280x800", 1280, 800, 1280, 800},
		{"1920x1200_to_1280x800", 1920, 1200, 1280, 800},
	} {
		b.Run(size.name, func(b *testing.B) {
			d := benchDesktop(b, size.w, size.h)
			c, _ := NewCapturer(d)
			defer c.Close()
			ctx := context.Background()
			dir := b.TempDir()
			shot := filepath.Join(dir, "shot.png")

			b.Run("deskenv_png", func(b *testing.B) {
				s := NewShooter(c, ShooterOptions{ModelW: size.mw, ModelH: size.mh})
				var bytes int
				for b.Loop() {
					s.hasLast = false // measure a fresh encode, not the cache
					for i := range s.png.bands {
						s.png.bands[i].valid = false // nor the bands kept from the last one
					}
					sh, err := s.Shot(ctx)
					if err != nil {
						b.Fatal(err)
					}
					bytes = len(sh.Data)
				}
				b.ReportMetric(float64(bytes), "png_bytes")
			})
			// A line of text changed since the last screenshot: the capture
			// is real, the change is made in its pixels (a 600 x 16 block
			// inverted, alternately, as a typed line would), and the
			// encoder keeps its bands from the last encode, as a Shooter's
			// does.
			b.Run("deskenv_png_line_changed", func(b *testing.B) {
				var f Frame
				var e pngEncoder
				i := 0
				for b.Loop() {
					if err := c.CaptureInto(ctx, &f); err != nil {
						b.Fatal(err)
					}
					g := &f
					if size.mw != size.w {
						g = Scale(&f, size.mw, size.mh)
					}
					if i++; i%2 == 0 {
						for y := 400; y < 416; y++ {
							row := g.Pix[y*g.Stride : y*g.Stride+600*4]
							for k := range row {
								row[k] = ^row[k]
							}
						}
					}
					if err := e.encode(io.Discard, g); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("deskenv_stdlib_png_bestspeed", func(b *testing.B) {
				enc := png.Encoder{CompressionLevel: png.BestSpeed}
				var f Frame
				for b.Loop() {
					c.CaptureInto(ctx, &f)
					if err := enc.Encode(io.Discard, Scale(&f, size.mw, size.mh).RGBA()); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("scrot", func(b *testing.B) {
				for b.Loop() {
					os.Remove(shot)
					cmd := exec.Command("scrot", "-o", shot)
					cmd.Env = d.Env()
					if out, err := cmd.CombinedOutput(); err != nil {
						b.Fatalf("scrot: %v: %s", err, out)
					}
				}
			})
			b.Run("scrot_convert_resize", func(b *testing.B) {
				out := filepath.Join(dir, "small.png")
				for b.Loop() {
					cmd := exec.Command("scrot", "-o", shot)
					cmd.Env = d.Env()
					if o, err := cmd.CombinedOutput(); err != nil {
						b.Fatalf("scrot: %v: %s", err, o)
					}
					if o, err := exec.Command("convert", shot, "-resize", "1280x800!", out).CombinedOutput(); err != nil {
						b.Fatalf("convert: %v: %s", err, o)
					}
				}
			})
		})
	}
}

// BenchmarkScale: the downscale alone, from the screen sizes deskenv most
// often meets to their model space.
func BenchmarkScale(b *testing.B) {
	for _, sz := range []struct{ sw, sh, dw, dh int }{{1920, 1200, 1280, 800}, {1920, 1080, 1366, 768}} {
		src := &Frame{Pix: make([]byte, sz.sw*sz.sh*4), Stride: sz.sw * 4, Width: sz.sw, Height: sz.sh}
		for i := range src.Pix {
			src.Pix[i] = byte(i * 7)
		}
		b.Run(fmt.Sprintf("%dx%d_to_%dx%d", sz.sw, sz.sh, sz.dw, sz.dh), func(b *testing.B) {
			for b.Loop() {
				Scale(src, sz.dw, sz.dh)
			}
		})
	}
}
