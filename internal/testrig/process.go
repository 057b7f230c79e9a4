package testrig

import (
	"context"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/deskenv/deskenv/display"
)

// Patience is how long WaitFor waits: ample for an X client to map a window
// or a process to start on a loaded machine, short enough that a test which
// waits for something that never comes fails in reasonable time.
const Patience = 10 * time.Second

// NeedTools fails the test unless Xvfb and every named program are on the
// PATH. The tests need them, so a missing one is a failure with the fix in
// its message, never a skip that hides a test.
func NeedTools(t testing.TB, tools ...string) {
	t.Helper()
	for _, tool := range append([]string{"Xvfb"}, tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is required for these tests (run scripts/install-deps.sh): %v", tool, err)
		}
	}
}

// SpawnDetached starts argv on d the way a task or an agent's shell might:
// in its own session, so killing the session's process groups misses it and
// only a reset that looks further finds it. It is killed when the test ends.
func SpawnDetached(t testing.TB, d *display.Display, argv ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = d.Env()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("testrig: start %v: %v", argv, err)
	}
	go cmd.Wait()
	t.Cleanup(func() { cmd.Process.Kill() })
	return cmd
}

// WaitFor polls cond until it holds, failing the test if it does not within
// Patience; what names the awaited thing in the failure.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	WaitWithin(t, Patience, what, cond)
}

// WaitWithin is WaitFor with its own limit, for what takes longer than
// Patience (a reset after a fault, a restarted session).
func WaitWithin(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitState is WaitWithin for a condition that can say what it saw: cond
// returns whether it holds and the state it found, and a timeout prints the
// last state, so a failure shows how far things got (who owned the
// selection, which windows were up) rather than only that they did not.
func WaitState(t testing.TB, limit time.Duration, what string, cond func() (ok bool, state string)) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within %s; last state: %s", what, limit, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Context is a context that ends after limit or when the test ends,
// whichever comes first: the bound for one blocking call in a test, so a
// hung X request or child fails the test instead of stalling the run.
func Context(t testing.TB, limit time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	t.Cleanup(cancel)
	return ctx
}
