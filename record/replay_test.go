package record

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/screen"
)

// xterm starts a terminal at the top left running sh with a plain prompt,
// waits for it to draw and returns a function that kills it.
func xterm(t *testing.T, r *rig) func() {
	t.Helper()
	cmd := exec.Command("xterm", "-geometry", "60x10+0+0", "-fa", "", "-xrm", "XTerm*cursorBlink: false", "-e", "sh")
	cmd.Env = append(append(os.Environ(), r.d.Env()...), "PS1=$ ", "ENV=")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop := func() {
		cmd.Process.Kill()
		cmd.Wait()
	}
	t.Cleanup(stop)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first, err := r.capt.Capture(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for {
		f, err := r.capt.Capture(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if f.Hash != first.Hash {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, _, err := r.capt.Settle(ctx, screen.SettleOptions{Quiet: 300 * time.Millisecond, Max: 3 * time.Second}); err != nil {
		t.Fatal(err)
	}
	return stop
}

// A person's session in xterm replays onto a fresh xterm with the same
// screens; replayed onto a different state, it reports where it diverged.
func TestReplay(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := newRig(t, 1024, 768, "")
	r.probe.Close()
	stop := xterm(t, r)
	// xterm answers a key in a few milliseconds, but on a loaded machine
	// (make test runs packages side by side) it can take longer than the
	// default 80 ms quiet, and an observation of the screen before the
	// Return is not what this test is about: wait as xterm() does.
	settle := screen.SettleOptions{Quiet: 300 * time.Millisecond, Max: 3 * time.Second, Interval: 20 * time.Millisecond}
	rec := r.recorder(t, t.TempDir(), Options{FPS: -1, Settle: settle})
	ep, err := rec.Start(ctx, EpisodeInfo{ID: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	h := hci.SourceHuman
	typeKeys := func(names ...string) {
		for _, n := range names {
			k, err := hci.KeysymByName(n)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.exec.KeyDown(ctx, k, h); err != nil {
				t.Fatal(err)
			}
			if err := r.exec.KeyUp(ctx, k, h); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if err := r.exec.MoveTo(ctx, 100, 60, h); err != nil {
		t.Fatal(err)
	}
	time.Sleep(600 * time.Millisecond)
	typeKeys("e", "c", "h", "o", "space", "h", "i")
	time.Sleep(700 * time.Millisecond)
	typeKeys("Return")
	time.Sleep(700 * time.Millisecond)
	if _, err := rec.Stop(ctx, nil); err != nil {
		t.Fatal(err)
	}
	got, err := Open(ep.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if acts := actions(got.Steps); len(acts) != 3 || acts[1] != `{"action":"type","text":"echo hi"}` {
		t.Fatalf("recorded steps %v", acts)
	}

	tests := []struct {
		name    string
		prepare func()
		diverge bool
	}{
		{"fresh terminal", func() {}, false},
		{"terminal in another state", func() { typeKeys("x", "y", "z") }, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stop()
			stop = xterm(t, r)
			r.exec.MoveTo(ctx, 100, 60, hci.SourceScript)
			tc.prepare()
			var seen []StepResult
			rep, err := Replay(ctx, got, r.exec, r.shooter, r.capt, ReplayOptions{OutDir: t.TempDir(), Settle: settle, OnStep: func(s StepResult) { seen = append(seen, s) }})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Executed != 3 || rep.Failed != 0 || rep.Compared != 3 || len(seen) != 3 {
				t.Fatalf("report %+v", rep)
			}
			if tc.diverge != (rep.Diverged > 0) {
				t.Errorf("diverged %d steps (first %d), want divergence %v: %+v", rep.Diverged, rep.FirstDivergence, tc.diverge, rep.Steps)
			}
			if tc.diverge && rep.FirstDivergence != 0 {
				t.Errorf("first divergence at step %d, want 0", rep.FirstDivergence)
			}
		})
	}
}

func TestReplayRefusesAnotherModelSpace(t *testing.T) {
	r := newRig(t, 800, 600, "")
	rec := &Recording{Meta: Meta{Screen: Size{1920, 1200}, Model: Size{1280, 800}}}
	_, err := Replay(context.Background(), rec, r.exec, r.shooter, r.capt, ReplayOptions{})
	if err == nil {
		t.Fatal("replay into another model space did not fail")
	}
}

func TestCompare(t *testing.T) {
	r := newRig(t, 320, 240, "")
	ctx := context.Background()
	shoot := func(rgb uint32) []byte {
		r.probe.Fill(0, 0, 320, 240, rgb)
		r.probe.Sync(ctx)
		s, err := r.shooter.Shot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return s.Data
	}
	black, white := shoot(0x000000), shoot(0xffffff)
	tests := []struct {
		name          string
		a, b          []byte
		mean, changed float64
	}{
		{"same", black, black, 0, 0},
		{"black and white", black, white, 255, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, c, err := Compare(tc.a, tc.b)
			if err != nil || m != tc.mean || c != tc.changed {
				t.Errorf("Compare = %g, %g, %v; want %g, %g", m, c, err, tc.mean, tc.changed)
			}
		})
	}
	if _, _, err := Compare([]byte("not a png"), black); err == nil {
		t.Error("a broken PNG compared without error")
	}
}
