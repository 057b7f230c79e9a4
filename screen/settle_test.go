package screen

import (
	"bytes"
	"image/png"
	"syscall"
	"testing"
	"time"

	"github.com/jezek/xgb/xproto"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/internal/xprobe"
)

// burst is one drawing of the burst application: a rectangle in a colour.
type burst struct {
	x, y, w, h int
	rgb        uint32
}

var bursts = []burst{
	{10, 10, 40, 30, 0xff0000},
	{120, 60, 40, 30, 0x00ff00},
	{230, 150, 60, 50, 0x0000ff},
}

// drawBursts is an application that answers an action by drawing in
// several bursts gap apart, the first after a short reaction time, as an
// application that loads and paints in steps does. It returns when the last
// burst is on the screen.
func drawBursts(t *testing.T, p *xprobe.Probe, gap time.Duration) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(5 * time.Millisecond)
		for i, b := range bursts {
			if i > 0 {
				time.Sleep(gap)
			}
			if err := p.Fill(b.x, b.y, b.w, b.h, b.rgb); err != nil {
				t.Errorf("burst %d: %v", i, err)
				return
			}
		}
	}()
	return done
}

// TestSettleShotWaitsForTheLastBurst: whether the settle learns of drawing
// from damage events or from sampling, the screenshot it returns shows every
// burst of an application that draws in steps closer together than the
// quiet period, and a settle from damage does not sample the screen. The
// shot made ahead during a quiet spell that a later burst ends is thrown
// away (bursts 70 ms apart, quiet 80 ms: each spell passes its half).
func TestSettleShotWaitsForTheLastBurst(t *testing.T) {
	d := startDisplay(t, 320, 240)
	p := paint(t, d, 0x000000)
	c, err := NewCapturer(d)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := NewShooter(c, ShooterOptions{})
	ctx := testrig.Context(t, 30*time.Second)

	tests := []struct {
		name  string
		poll  bool
		gap   time.Duration
		quiet time.Duration
	}{
		{"damage, bursts 40 ms apart", false, 40 * time.Millisecond, 80 * time.Millisecond},
		{"damage, bursts 70 ms apart", false, 70 * time.Millisecond, 80 * time.Millisecond},
		{"damage, bursts 25 ms apart, quiet 30 ms", false, 25 * time.Millisecond, 30 * time.Millisecond},
		{"polling, bursts 40 ms apart", true, 40 * time.Millisecond, 80 * time.Millisecond},
		{"polling, bursts 70 ms apart", true, 70 * time.Millisecond, 80 * time.Millisecond},
	}
	for round := range 3 {
		for _, tc := range tests {
			if err := p.Fill(0, 0, 320, 240, 0x000000); err != nil {
				t.Fatal(err)
			}
			before := c.captures.Load()
			done := drawBursts(t, p, tc.gap)
			shot, settled, waited, err := s.SettleShot(ctx, SettleOptions{Quiet: tc.quiet, Max: 10 * time.Second, Poll: tc.poll})
			captures := c.captures.Load() - before
			<-done
			if err != nil || !settled {
				t.Fatalf("%s (round %d): settled %v after %s: %v", tc.name, round, settled, waited, err)
			}
			img, err := png.Decode(bytes.NewReader(shot.Data))
			if err != nil {
				t.Fatalf("%s: decode the settled shot: %v", tc.name, err)
			}
			for i, b := range bursts {
				r, g, bl, _ := img.At(b.x+b.w/2, b.y+b.h/2).RGBA()
				if got := (r>>8)<<16 | (g>>8)<<8 | bl>>8; got != b.rgb {
					t.Errorf("%s (round %d): the settled shot (after %s) misses burst %d: pixel %06x, want %06x", tc.name, round, waited, i, got, b.rgb)
				}
			}
			// From damage: a capture ahead per quiet spell at most (one
			// after each burst) and the final one, where sampling makes one
			// every 10 ms.
			if !tc.poll && captures > int64(len(bursts))+1 {
				t.Errorf("%s: the settle from damage captured the screen %d times, want %d at most", tc.name, captures, len(bursts)+1)
			}
			if tc.poll && captures < 2 {
				t.Errorf("%s: polling captured the screen %d times: it did not sample", tc.name, captures)
			}
		}
	}
}

// TestSettleStillScreen: a still screen settles after the quiet period
// without a single capture (Settle) or with one (SettleShot), and the shot
// of an unchanged screen is the cached one.
func TestSettleStillScreen(t *testing.T) {
	d := startDisplay(t, 320, 240)
	paint(t, d, 0x203040)
	c, err := NewCapturer(d)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := NewShooter(c, ShooterOptions{})
	ctx := testrig.Context(t, 30*time.Second)
	first, err := s.Shot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	opt := SettleOptions{Quiet: 30 * time.Millisecond, Max: 10 * time.Second}

	before := c.captures.Load()
	settled, waited, err := c.Settle(ctx, opt)
	if err != nil || !settled {
		t.Fatalf("a still screen did not settle: settled %v after %s: %v", settled, waited, err)
	}
	if n := c.captures.Load() - before; n != 0 {
		t.Errorf("settling a still screen from damage captured it %d times, want none", n)
	}

	before = c.captures.Load()
	shot, settled, waited, err := s.SettleShot(ctx, opt)
	if err != nil || !settled {
		t.Fatalf("a still screen did not settle for its shot: settled %v after %s: %v", settled, waited, err)
	}
	if n := c.captures.Load() - before; n != 1 {
		t.Errorf("SettleShot of a still screen captured it %d times, want once", n)
	}
	if shot.Changed || shot.Hash != first.Hash || &shot.Data[0] != &first.Data[0] {
		t.Errorf("SettleShot of an unchanged screen: Changed %v, hash %x (first %x): want the cached shot", shot.Changed, shot.Hash, first.Hash)
	}
}

// TestSettleIgnoresPointer: Xvfb draws the pointer in software, yet moving
// it is not damage on the screen's contents (captures do not show it
// either), so an agent's pointer moves do not stretch a settle.
func TestSettleIgnoresPointer(t *testing.T) {
	d := startDisplay(t, 320, 240)
	paint(t, d, 0x000000)
	c, err := NewCapturer(d)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := testrig.Context(t, 30*time.Second)
	conn, err := display.DialContext(ctx, d.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	root := xproto.Setup(conn).DefaultScreen(conn).Root

	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(3 * time.Millisecond):
			}
			xproto.WarpPointerChecked(conn, 0, root, 0, 0, 0, 0, int16(20+i%200), int16(20+i%150)).Check()
		}
	}()
	settled, waited, err := c.Settle(ctx, SettleOptions{Quiet: 50 * time.Millisecond, Max: 5 * time.Second})
	close(stop)
	<-done
	if err != nil || !settled {
		t.Fatalf("a screen whose pointer moves did not settle (after %s): %v", waited, err)
	}
}

// TestSettleKeepsChanging: a screen drawn on every 5 ms never settles,
// from damage or by sampling; the wait ends at Max with settled false.
func TestSettleKeepsChanging(t *testing.T) {
	d := startDisplay(t, 320, 240)
	p := paint(t, d, 0x000000)
	c, err := NewCapturer(d)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := testrig.Context(t, 30*time.Second)
	for _, poll := range []bool{false, true} {
		stop, done := make(chan struct{}), make(chan struct{})
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
		settled, waited, err := c.Settle(ctx, SettleOptions{Quiet: 60 * time.Millisecond, Max: 300 * time.Millisecond, Poll: poll})
		close(stop)
		<-done
		if err != nil || settled {
			t.Fatalf("poll %v: a screen that kept changing settled (after %s): %v", poll, waited, err)
		}
		if waited < 300*time.Millisecond {
			t.Fatalf("poll %v: gave up after %s, before Max", poll, waited)
		}
	}
}

// TestSettleFollowsRestart: after the X server restarts, settling learns of
// drawing from damage again (no sampling), and in between it samples
// rather than failing for want of damage.
func TestSettleFollowsRestart(t *testing.T) {
	d := startDisplay(t, 320, 240)
	c, err := NewCapturer(d)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := NewShooter(c, ShooterOptions{})
	ctx := testrig.Context(t, 60*time.Second)
	opt := SettleOptions{Quiet: 30 * time.Millisecond, Max: 10 * time.Second}
	if _, _, err := c.Settle(ctx, opt); err != nil {
		t.Fatal(err)
	}
	w := c.damage()
	oldGen := liveGen(w)
	if oldGen == 0 {
		t.Fatal("no damage subscription after the first settle")
	}

	changed := d.Changed()
	syscall.Kill(d.ServerPID(), syscall.SIGKILL)
	<-changed
	testrig.WaitWithin(t, 20*time.Second, "a damage subscription on the new X server", func() bool {
		g := liveGen(w)
		return g != 0 && g != oldGen
	})
	p := paint(t, d, 0x000000)
	before := c.captures.Load()
	done := drawBursts(t, p, 40*time.Millisecond)
	shot, settled, waited, err := s.SettleShot(ctx, SettleOptions{Quiet: 80 * time.Millisecond, Max: 10 * time.Second})
	<-done
	if err != nil || !settled {
		t.Fatalf("settle after the restart: settled %v after %s: %v", settled, waited, err)
	}
	if n := c.captures.Load() - before; n > int64(len(bursts))+1 {
		t.Errorf("settle after the restart captured %d times: want %d at most, from damage", n, len(bursts)+1)
	}
	img, err := png.Decode(bytes.NewReader(shot.Data))
	if err != nil {
		t.Fatal(err)
	}
	b := bursts[len(bursts)-1]
	if r, _, _, _ := img.At(b.x+1, b.y+1).RGBA(); r>>8 != 0 || !shot.Changed {
		t.Errorf("the settled shot after the restart misses the last burst")
	}
	if _, _, bl, _ := img.At(b.x+1, b.y+1).RGBA(); bl>>8 != 0xff {
		t.Errorf("the settled shot after the restart misses the last burst (blue %x)", bl>>8)
	}
}

// liveGen is the connection generation of w's subscription, 0 when none.
func liveGen(w *damageWatch) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.x == nil {
		return 0
	}
	return w.x.gen
}

// TestSettleShotPointerMovedAfterAhead: moving the pointer is no damage, so
// a shot made ahead in the quiet period may show it where it was; the
// settled shot must show it where it is (the shot taken right after is the
// same one, unchanged).
func TestSettleShotPointerMovedAfterAhead(t *testing.T) {
	d := startDisplay(t, 320, 240)
	paint(t, d, 0x000000)
	c, err := NewCapturer(d)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := NewShooter(c, ShooterOptions{Pointer: true})
	ctx := testrig.Context(t, 30*time.Second)
	conn, err := display.DialContext(ctx, d.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	root := xproto.Setup(conn).DefaultScreen(conn).Root
	warp := func(x, y int16) {
		if err := xproto.WarpPointerChecked(conn, 0, root, 0, 0, 0, 0, x, y).Check(); err != nil {
			t.Error(err)
		}
	}
	for i := range 3 {
		warp(50, 50)
		done := make(chan struct{})
		go func() {
			defer close(done)
			time.Sleep(55 * time.Millisecond) // after the shot ahead, at 40 ms
			warp(int16(150+20*i), 120)
		}()
		_, settled, _, err := s.SettleShot(ctx, SettleOptions{Quiet: 80 * time.Millisecond, Max: 10 * time.Second})
		<-done
		if err != nil {
			t.Fatal(err)
		}
		if !settled {
			t.Fatal("a still screen did not settle")
		}
		after, err := s.Shot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if after.Changed {
			t.Errorf("round %d: the shot right after the settled one differs: the settled shot showed the pointer where it was", i)
		}
	}
}
