package testrig

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/internal/proc"
)

// WaitShellReady waits until the shell in the terminal titled title has
// started and sits waiting for input: a child of the terminal, asleep, its
// CPU time unchanged for 300 ms. Typing before that can be lost: the shell
// sets up the terminal when it starts, and on a loaded machine that may be
// after the window is up and the first keys were typed (a whole make test
// once lost "echo hello" that way).
func WaitShellReady(ctx context.Context, t *testing.T, d *display.Display, title string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, "xdotool", "search", "--name", title, "getwindowpid")
	cmd.Env = append(os.Environ(), d.Env()...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("xdotool getwindowpid: %v", err)
	}
	var term int
	if _, err := fmt.Sscan(string(out), &term); err != nil {
		t.Fatalf("the pid of %q: %q: %v", title, out, err)
	}
	fs := proc.Default()
	shell := func() (proc.Stat, bool) {
		pids, _ := fs.PIDs(ctx)
		for _, pid := range pids {
			if st, err := fs.Stat(pid); err == nil && st.PPID == term {
				return st, true
			}
		}
		return proc.Stat{}, false
	}
	var last uint64
	quietSince := time.Time{}
	WaitWithin(t, 20*time.Second, "the terminal's shell waiting for input", func() bool {
		st, ok := shell()
		if !ok || st.State != 'S' {
			quietSince = time.Time{}
			return false
		}
		if cpu := st.UTime + st.STime; cpu != last || quietSince.IsZero() {
			last, quietSince = cpu, time.Now()
			return false
		}
		return time.Since(quietSince) >= 300*time.Millisecond
	})
}
