package display_test

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/internal/testrig"
)

// roundTrip fails the test unless c answers a request.
func roundTrip(t *testing.T, c *xgb.Conn, what string) {
	t.Helper()
	if _, err := xproto.GetInputFocus(c).Reply(); err != nil {
		t.Fatalf("%s: the connection does not answer: %v", what, err)
	}
}

// TestFollowerFollowsRestarts kills the X server under a Follower: the
// connection it had is no longer Current, and Get dials the restarted
// server with a new generation. Drop makes Get dial anew on the same server.
func TestFollowerFollowsRestarts(t *testing.T) {
	testrig.NeedTools(t)
	ctx := testrig.Context(t, 30*time.Second)
	d := testrig.Display(t, display.Config{RestartOnCrash: true})
	f := d.Follow(display.DropEvents)
	defer f.Close()

	c1, g1, err := f.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g1 == 0 {
		t.Fatal("the first generation is 0; 0 must mean none")
	}
	roundTrip(t, c1, "first connection")
	if c, g, err := f.Get(ctx); err != nil || c != c1 || g != g1 {
		t.Fatalf("second Get = %p, %d, %v; want the same connection %p, %d", c, g, err, c1, g1)
	}

	f.Drop(g1 + 100) // not the current generation: nothing happens
	if c, _, ok := f.Current(); !ok || c != c1 {
		t.Fatal("Drop of another generation dropped the current connection")
	}
	f.Drop(g1)
	if _, _, ok := f.Current(); ok {
		t.Fatal("Current after Drop still reports a connection")
	}
	c2, g2, err := f.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c2 == c1 || g2 == g1 {
		t.Fatalf("Get after Drop returned generation %d again", g2)
	}
	roundTrip(t, c2, "connection after Drop")

	syscall.Kill(d.ServerPID(), syscall.SIGKILL)
	testrig.WaitWithin(t, patience, "the X server to be restarted", func() bool { return d.Restarts() == 1 })
	if _, _, ok := f.Current(); ok {
		t.Fatal("Current still reports the connection to the dead server")
	}
	c3, g3, err := f.Get(ctx)
	if err != nil {
		t.Fatalf("Get after the restart: %v", err)
	}
	if c3 == c2 || g3 == g2 {
		t.Fatalf("Get after the restart returned generation %d again", g3)
	}
	roundTrip(t, c3, "connection to the restarted server")

	f.Close()
	if _, _, err := f.Get(ctx); !errors.Is(err, display.ErrFollowerClosed) {
		t.Fatalf("Get after Close: %v, want ErrFollowerClosed", err)
	}
}

// TestDialContextStoppedServer dials a server that is stopped (SIGSTOP): the
// socket connects and the handshake never ends, so only ctx ends the dial.
func TestDialContextStoppedServer(t *testing.T) {
	testrig.NeedTools(t)
	d := testrig.Display(t, display.Config{})
	tests := []struct {
		name    string
		display string
		stop    bool
		want    error // nil: the dial succeeds
	}{
		{"running", d.Name(), false, nil},
		{"stopped", d.Name(), true, context.DeadlineExceeded},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.stop {
				syscall.Kill(d.ServerPID(), syscall.SIGSTOP)
				defer syscall.Kill(d.ServerPID(), syscall.SIGCONT)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			c, err := display.DialContext(ctx, tc.display)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				c.Close()
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("DialContext = %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := display.DialContext(context.Background(), ""); err == nil {
		t.Error("DialContext with no display name succeeded")
	}
}

// TestFollowerDropEvents changes the keyboard map far more often than xgb's
// event queue holds: a Follower that drops its events keeps answering, as
// the capturer and task checks, which read none, need it to.
func TestFollowerDropEvents(t *testing.T) {
	testrig.NeedTools(t)
	ctx := testrig.Context(t, 20*time.Second)
	d := testrig.Display(t, display.Config{})
	f := d.Follow(display.DropEvents)
	defer f.Close()
	c, _, err := f.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	code := xproto.Setup(c).MaxKeycode // the last keycode is unused on Xvfb's default map
	km, err := xproto.GetKeyboardMapping(c, code, 1).Reply()
	if err != nil {
		t.Fatal(err)
	}
	// Aside: with its events unread, the server stops reading the
	// connection too, and the requests themselves block.
	answered := make(chan error, 1)
	go func() {
		syms := make([]xproto.Keysym, km.KeysymsPerKeycode)
		for i := range 6000 {
			syms[0] = xproto.Keysym(0x1000000 + 0x4e00 + i%100)
			xproto.ChangeKeyboardMapping(c, 1, code, km.KeysymsPerKeycode, syms)
		}
		_, err := xproto.GetInputFocus(c).Reply()
		answered <- err
	}()
	select {
	case err := <-answered:
		if err != nil {
			t.Fatalf("the connection fails after 6000 keyboard-map changes: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the connection stopped answering after 6000 keyboard-map changes: its events were not drained")
	}
}

// TestReconnect: a watcher kept by Reconnect gets a connection to each X
// server the display runs, across two restarts, and Reconnect returns once
// its context ends and the Follower is closed.
func TestReconnect(t *testing.T) {
	testrig.NeedTools(t)
	ctx := testrig.Context(t, time.Minute)
	d := testrig.Display(t, display.Config{RestartOnCrash: true})
	f := d.Follow(display.ReadEvents)
	wctx, stop := context.WithCancel(ctx)
	connect := func() (uint64, error) {
		_, gen, err := f.Get(wctx)
		return gen, err
	}
	watched := make(chan uint64, 8)
	watch := func(gen uint64) {
		watched <- gen
		c, _, ok := f.Current()
		if !ok {
			return
		}
		// Read until the connection closes: its server died, or Close.
		for {
			ev, err := c.WaitForEvent()
			if ev == nil && err == nil {
				break
			}
		}
		f.Drop(gen)
	}
	changed := d.Changed()
	first, err := connect()
	done := make(chan struct{})
	go func() {
		defer close(done)
		display.Reconnect(wctx, d, changed, first, err, connect, watch, func(err error) { t.Logf("connect: %v", err) })
	}()
	var gens []uint64
	next := func(what string) {
		t.Helper()
		select {
		case g := <-watched:
			gens = append(gens, g)
		case <-ctx.Done():
			t.Fatalf("no watch of %s (watched generations %v)", what, gens)
		}
	}
	next("the first server")
	for i := range 2 {
		if err := syscall.Kill(d.ServerPID(), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		next("the server after restart " + string(rune('1'+i)))
	}
	if len(gens) != 3 || gens[0] == gens[1] || gens[1] == gens[2] {
		t.Errorf("watched generations %v, want three different", gens)
	}
	stop()
	f.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Reconnect did not return after its context ended and the Follower closed")
	}
}
