package main

import (
	"strings"
	"testing"

	"github.com/jezek/xgb/xproto"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/internal/xprobe"
)

// TestAnimation paints the benchmarks' animation on a real X server and
// reads back what the server drew: the counter cell steps through its
// palette, the topmost box is where the animation says, the boxes stay
// below the marker row and inside the screen however long it runs, and the
// marker is left alone for the latency samples.
func TestAnimation(t *testing.T) {
	const w, h = 640, 400
	d := testrig.Display(t, display.Config{Width: w, Height: h})
	probe := testrig.Probe(t, d, xprobe.Options{Background: background})
	c, err := d.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pixel := func(x, y int) uint32 {
		t.Helper()
		img, err := xproto.GetImage(c, xproto.ImageFormatZPixmap, xproto.Drawable(d.Root()), int16(x), int16(y), 1, 1, 0xffffffff).Reply()
		if err != nil || len(img.Data) < 4 {
			t.Fatalf("read the pixel at %d,%d: %v", x, y, err)
		}
		return uint32(img.Data[2])<<16 | uint32(img.Data[1])<<8 | uint32(img.Data[0]) // BGRX
	}
	if err := probe.Fill(0, 0, w, h, background); err != nil {
		t.Fatal(err)
	}
	a := newAnimation(probe, w, h)
	for _, steps := range []int{1, 2, 7, 300} {
		for a.n < steps {
			if err := a.step(); err != nil {
				t.Fatalf("step %d: %v", a.n+1, err)
			}
		}
		if got, want := pixel(counterX+cell/2, markerY+cell/2), counterPalette[steps%len(counterPalette)]; got != want {
			t.Errorf("after %d steps the counter cell is %06x, want %06x", steps, got, want)
		}
		if got := pixel(markerX+cell/2, markerY+cell/2); got != background {
			t.Errorf("after %d steps the marker is %06x, want the background %06x", steps, got, background)
		}
		for i, b := range a.boxes {
			if b.x < 0 || b.x+b.w > w || b.y < a.top || b.y+b.h > h {
				t.Errorf("after %d steps box %d is at %d,%d %dx%d, outside %d,%d-%d,%d", steps, i, b.x, b.y, b.w, b.h, 0, a.top, w, h)
			}
		}
		last := len(a.boxes) - 1
		top := a.boxes[last] // painted last, so over the others
		if got, want := pixel(top.x+top.w/2, top.y+top.h/2), boxColors[last%len(boxColors)]; got != want {
			t.Errorf("after %d steps the top box's middle is %06x, want %06x", steps, got, want)
		}
	}
}

func TestDeskenvServeArgs(t *testing.T) {
	tests := []struct {
		name string
		more []string
		want string
	}{
		{"latency", nil, "-mode deskenv -display :7 -fps 30 -bitrate 4000"},
		{"network adds its own", []string{"-udp-port", "9", "-fixed-bitrate"}, "-mode deskenv -display :7 -fps 30 -bitrate 4000 -udp-port 9 -fixed-bitrate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := deskenvServeArgs(":7", 30, 4000, tc.more...)
			if s := strings.Join(got, " "); s != tc.want {
				t.Errorf("deskenvServeArgs = %q, want %q", s, tc.want)
			}
		})
	}
}
