package display

import (
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// TestProcessUnfit reads real processes' states: one that runs is fit, one
// stopped, a zombie, one reaped and one with a signal not yet delivered are
// not, each with its reason. The traced case is TestProcessUnfitTraced.
func TestProcessUnfit(t *testing.T) {
	// blocking sleeps with SIGTERM blocked (a mask survives exec), so a
	// SIGTERM sent to it stays pending as it would for a window manager
	// the machine has not run since the agent sent it.
	blocking := []string{"perl", "-e", `$| = 1; use POSIX; sigprocmask(SIG_BLOCK, POSIX::SigSet->new(SIGTERM)); print "\n"; sleep 60`}
	cases := []struct {
		name string
		argv []string
		do   func(cmd *exec.Cmd)
		want string
	}{
		{"running", nil, func(*exec.Cmd) {}, ""},
		{"stopped", nil, func(c *exec.Cmd) { syscall.Kill(c.Process.Pid, syscall.SIGSTOP) }, "it is stopped"},
		{"signal pending", blocking, func(c *exec.Cmd) { syscall.Kill(c.Process.Pid, syscall.SIGTERM) },
			"a signal sent to it is not yet delivered (terminated)"},
		{"harmless signal pending", blocking, func(c *exec.Cmd) { syscall.Kill(c.Process.Pid, syscall.SIGWINCH) }, ""},
		{"zombie", nil, func(c *exec.Cmd) {
			// Killed, not yet waited for: a zombie until Wait reaps it.
			syscall.Kill(c.Process.Pid, syscall.SIGKILL)
		}, "it has exited"},
		{"reaped", nil, func(c *exec.Cmd) { c.Process.Kill(); c.Wait() }, "it has exited"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			argv := c.argv
			if argv == nil {
				argv = []string{"sleep", "60"}
			}
			cmd := exec.Command(argv[0], argv[1:]...)
			ready, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatalf("this test needs %s: %v", argv[0], err)
			}
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			if c.argv != nil {
				// Its line says the mask is set.
				if _, err := ready.Read(make([]byte, 1)); err != nil {
					t.Fatalf("%s did not start: %v", argv[0], err)
				}
			}
			c.do(cmd)
			// A signal takes effect soon, not at once: look until the
			// answer settles (the deadline only bounds a broken run).
			var got string
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				if got = processUnfit(cmd.Process.Pid); got == c.want {
					break
				}
			}
			if got != c.want {
				t.Errorf("processUnfit(%s sleep) = %q, want %q", c.name, got, c.want)
			}
		})
	}
}

// TestProcessUnfitTraced runs a process under this test's ptrace (a
// debugger's hold on it) and lets it continue: it runs, but is traced.
func TestProcessUnfitTraced(t *testing.T) {
	// ptrace requests must come from the thread that attached.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Ptrace: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start sleep traced: %v", err)
	}
	pid := cmd.Process.Pid
	defer func() { syscall.Kill(pid, syscall.SIGKILL); cmd.Wait() }()
	// The child stops with SIGTRAP at its exec; wait for that, then let
	// it run on, still traced.
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil || !ws.Stopped() {
		t.Fatalf("traced sleep did not stop at exec: %v, status %v", err, ws)
	}
	if got := processUnfit(pid); got != "it is stopped" {
		t.Errorf("processUnfit(sleep stopped at exec under ptrace) = %q, want %q", got, "it is stopped")
	}
	if err := syscall.PtraceCont(pid, 0); err != nil {
		t.Fatalf("continue traced sleep: %v", err)
	}
	var got string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if got = processUnfit(pid); got == "it is being traced" {
			break
		}
	}
	if got != "it is being traced" {
		t.Errorf("processUnfit(running traced sleep) = %q, want %q", got, "it is being traced")
	}
}
