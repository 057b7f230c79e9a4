package screen

import (
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
