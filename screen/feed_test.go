package screen

import (
	"bytes"
	"image"
	"syscall"
	"testing"
	"time"

	"github.com/deskenv/deskenv/internal/testrig"
)

// TestDamageFeed: a feed shares the capturer's one damage subscription with
// settles, wakes on drawing, and Take tells a drawn screen from a still one,
// also while a settle is waiting on the same subscription (which empties the
// region at each event itself) and after the X server restarted.
func TestDamageFeed(t *testing.T) {
	d := startDisplay(t, 320, 240)
	p := paint(t, d, 0x000000)
	c, err := NewCapturer(d)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f := c.DamageFeed()
	defer f.Close()
	if f.w != c.damage() {
		t.Fatal("the feed made a damage subscription of its own: settles and the stream must share one")
	}
	testrig.WaitWithin(t, 10*time.Second, "a damage subscription", func() bool { return liveGen(f.w) != 0 })
	ctx := testrig.Context(t, 60*time.Second)

	// drawn fills a rectangle and waits for the feed to wake and Take to
	// say drawn (a wake may be left from before: the wake is coalesced, so
	// a stale one is followed by the one for this drawing).
	drawn := func(what string, rgb uint32) {
		t.Helper()
		if err := p.Fill(10, 10, 50, 50, rgb); err != nil {
			t.Fatal(err)
		}
		deadline := time.After(5 * time.Second)
		for {
			select {
			case <-f.Wake():
			case <-deadline:
				t.Fatalf("%s: the feed did not wake and say drawn within 5 s of a drawing", what)
			}
			if f.Take() {
				return
			}
		}
	}
	// still checks that Take says "unchanged" once nothing is drawn (the
	// first Take may still carry a drawing from before).
	still := func(what string) {
		t.Helper()
		f.Take()
		for len(f.Wake()) > 0 {
			<-f.Wake()
		}
		if f.Take() {
			t.Errorf("%s: Take says drawn on a still screen", what)
		}
		select {
		case <-f.Wake():
			t.Errorf("%s: the feed woke on a still screen", what)
		case <-time.After(100 * time.Millisecond):
		}
	}

	f.Take() // whatever came before
	still("at start")
	tests := []struct {
		name   string
		settle bool // a settle waits on the subscription meanwhile
	}{
		{name: "alone"},
		{name: "beside a settle", settle: true},
		{name: "alone again"},
	}
	for i, tc := range tests {
		done := make(chan error, 1)
		if tc.settle {
			go func() {
				_, _, err := c.Settle(ctx, SettleOptions{Quiet: 300 * time.Millisecond, Max: 5 * time.Second})
				done <- err
			}()
			time.Sleep(50 * time.Millisecond) // the settle has begun
		} else {
			done <- nil
		}
		for j := range 3 {
			drawn(tc.name, uint32(0x102030*(i*3+j+1))&0xffffff)
		}
		if err := <-done; err != nil {
			t.Fatalf("%s: settle: %v", tc.name, err)
		}
		still(tc.name)
	}

	oldGen := liveGen(f.w)
	changed := d.Changed()
	if err := syscall.Kill(d.ServerPID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-changed
	testrig.WaitWithin(t, 20*time.Second, "a damage subscription on the new X server", func() bool {
		g := liveGen(f.w)
		return g != 0 && g != oldGen
	})
	if !f.Take() {
		t.Error("after a restart Take says unchanged: what the new server shows is unknown, so it must say drawn")
	}
	p = paint(t, d, 0x000000)
	f.Take()
	drawn("after a restart", 0xff0000)
	still("after a restart")
}

// TestDamageFeedArea: TakeArea says where the screen was drawn on, a
// capture of just that area brings a frame up to date (the same pixels as a
// full capture), a drawing that leaves the pixels as they were is reported
// unchanged, and a second feed on the same subscription learns of drawing
// the first one's Take emptied.
func TestDamageFeedArea(t *testing.T) {
	d := startDisplay(t, 320, 240)
	p := paint(t, d, 0x000000)
	c, err := NewCapturer(d)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a, b := c.DamageFeed(), c.DamageFeed()
	defer a.Close()
	defer b.Close()
	testrig.WaitWithin(t, 10*time.Second, "a damage subscription", func() bool { return liveGen(a.w) != 0 })
	ctx := testrig.Context(t, 60*time.Second)
	px, py, _, _ := p.Bounds()

	if changed, _, whole := a.TakeArea(); !changed || !whole {
		t.Fatalf("the first TakeArea: changed %v whole %v; want the whole screen (what came before is unknown)", changed, whole)
	}
	b.TakeArea()
	var f Frame
	if err := c.CaptureInto(ctx, &f); err != nil {
		t.Fatal(err)
	}
	// takeDrawn waits for feed to wake and return the drawn area.
	takeDrawn := func(feed *DamageFeed, what string) image.Rectangle {
		t.Helper()
		deadline := time.After(5 * time.Second)
		for {
			select {
			case <-feed.Wake():
			case <-deadline:
				t.Fatalf("%s: no area reported within 5 s of a drawing", what)
			}
			changed, area, whole := feed.TakeArea()
			if whole {
				t.Fatalf("%s: TakeArea says the whole screen; want the area drawn", what)
			}
			if changed {
				return area
			}
		}
	}
	tests := []struct {
		name       string
		x, y, w, h int
		rgb        uint32
	}{
		{"a small square", 40, 30, 16, 16, 0xff0000},
		{"odd corner and size", 101, 77, 9, 5, 0x00ff00},
		{"a strip across", 0, 200, 320, 3, 0x0000ff},
	}
	for _, tc := range tests {
		if err := p.Fill(tc.x, tc.y, tc.w, tc.h, tc.rgb); err != nil {
			t.Fatal(err)
		}
		drawnAt := image.Rect(px+tc.x, py+tc.y, px+tc.x+tc.w, py+tc.y+tc.h)
		area := takeDrawn(a, tc.name)
		if !drawnAt.In(area) {
			t.Errorf("%s: drew %v, TakeArea says %v", tc.name, drawnAt, area)
		}
		if area.Dx()*area.Dy() > 4*(tc.w+2)*(tc.h+2) {
			t.Errorf("%s: drew %v, TakeArea says %v: far more than was drawn", tc.name, drawnAt, area)
		}
		changed, got, err := c.CaptureAreaInto(ctx, &f, area)
		if err != nil {
			t.Fatal(err)
		}
		if !changed || !drawnAt.In(got) || got.Min.X%2 != 0 || got.Min.Y%2 != 0 || got.Max.X%2 != 0 || got.Max.Y%2 != 0 {
			t.Errorf("%s: CaptureAreaInto(%v) = changed %v, wrote %v; want changed, even edges, covering %v", tc.name, area, changed, got, drawnAt)
		}
		full, err := c.Capture(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(full.Pix, f.Pix) || full.Hash != f.Hash {
			t.Errorf("%s: the frame brought up to date by area differs from a full capture", tc.name)
		}
		if got := pixel(&f, drawnAt.Min.X, drawnAt.Min.Y); got != tc.rgb {
			t.Errorf("%s: pixel %06x, want %06x", tc.name, got, tc.rgb)
		}
		// The other feed was not the one that emptied the region: it is
		// told all the same.
		if bArea := takeDrawn(b, tc.name+" (second feed)"); !drawnAt.In(bArea) {
			t.Errorf("%s: the second feed says %v, want it to cover %v", tc.name, bArea, drawnAt)
		}
	}

	// The same colour again: drawn on, but no pixel changed.
	if err := p.Fill(40, 30, 16, 16, 0xff0000); err != nil {
		t.Fatal(err)
	}
	area := takeDrawn(a, "a repaint")
	if changed, _, err := c.CaptureAreaInto(ctx, &f, area); err != nil || changed {
		t.Errorf("a repaint in the same colour: changed %v (%v); want unchanged", changed, err)
	}
	// An empty area, or a frame of another size, is a full capture.
	var fresh Frame
	if changed, got, err := c.CaptureAreaInto(ctx, &fresh, image.Rect(0, 0, 4, 4)); err != nil || !changed || got != image.Rect(0, 0, 320, 240) {
		t.Errorf("an area into an empty frame: changed %v wrote %v (%v); want a full capture", changed, got, err)
	}
}
