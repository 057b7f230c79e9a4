package screen_test

import (
	"bytes"
	"context"
	"image/png"
	"testing"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/internal/xprobe"
	"github.com/deskenv/deskenv/screen"
)

// TestPointerInScreenshots: with ShooterOptions.Pointer, a screenshot after
// mouse_move to (x, y) shows the pointer's image with its hot spot at
// (x, y), as the reference tool's scrot -p does; without it the screen
// under the pointer is bare. Moving the pointer changes the shot.
func TestPointerInScreenshots(t *testing.T) {
	ctx := context.Background()
	d := testrig.Display(t, display.Config{Width: 320, Height: 240})
	testrig.Probe(t, d, xprobe.Options{Background: 0x336699})
	ex, err := hci.NewExecutor(d, hci.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	capt, err := screen.NewCapturer(d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { capt.Close() })
	with := screen.NewShooter(capt, screen.ShooterOptions{Pointer: true})
	without := screen.NewShooter(capt, screen.ShooterOptions{})

	for _, at := range [][2]int{{100, 80}, {200, 150}} {
		if _, err := ex.Do(ctx, hci.Action{Action: hci.ActMouseMove, Coordinate: []int{at[0], at[1]}}, hci.SourceAgent); err != nil {
			t.Fatal(err)
		}
		p, err := capt.Pointer(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if p.X != at[0] || p.Y != at[1] {
			t.Fatalf("the pointer is at %d,%d, want %v", p.X, p.Y, at)
		}
		shot, err := with.Shot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		bare, err := without.Shot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		img, _ := png.Decode(bytes.NewReader(shot.Data))
		plain, _ := png.Decode(bytes.NewReader(bare.Data))
		opaque := 0
		for j := 0; j < p.H; j++ {
			for i := 0; i < p.W; i++ {
				px := p.ARGB[j*p.W+i]
				x, y := at[0]-p.XHot+i, at[1]-p.YHot+j
				if px>>24 != 0xff || x < 0 || y < 0 || x >= 320 || y >= 240 {
					continue
				}
				opaque++
				r, g, b, _ := img.At(x, y).RGBA()
				if byte(r>>8) != byte(px>>16) || byte(g>>8) != byte(px>>8) || byte(b>>8) != byte(px) {
					t.Fatalf("pixel %d,%d of the screenshot is %02x%02x%02x, the pointer's is %06x", x, y, r>>8, g>>8, b>>8, px&0xffffff)
				}
				if r, g, b, _ := plain.At(x, y).RGBA(); byte(r>>8) != 0x33 || byte(g>>8) != 0x66 || byte(b>>8) != 0x99 {
					t.Fatalf("without the pointer, pixel %d,%d is %02x%02x%02x, want the probe's 336699", x, y, r>>8, g>>8, b>>8)
				}
			}
		}
		if opaque == 0 {
			t.Fatalf("the pointer image (%dx%d, hot spot %d,%d) has no opaque pixel on the screen", p.W, p.H, p.XHot, p.YHot)
		}
		if !shot.Changed {
			t.Errorf("the shot after moving the pointer to %v is the last one reused", at)
		}
	}
}
