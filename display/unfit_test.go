package display

import (
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// TestProcessUnfit reads real processes' states: one that runs is fit, one
// stopped, a zombie and one reaped are not, each with its reason. The
// traced case is TestProcessUnfitTraced.
func TestProcessUnfit(t *testing.T) {
	cases := []struct {
		name string
		do   func(cmd *exec.Cmd)
		want string
	}{
		{"running", func(*exec.Cmd) {}, ""},
		{"stopped", func(c *exec.Cmd) { syscall.Kill(c.Process.Pid, syscall.SIGSTOP) }, "it is stopped"},
		{"zombie", func(c *exec.Cmd) {
			// Killed, not yet waited for: a zombie until Wait reaps it.
			syscall.Kill(c.Process.Pid, syscall.SIGKILL)
		}, "it has exited"},
		{"reaped", func(c *exec.Cmd) { c.Process.Kill(); c.Wait() }, "it has exited"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command("sleep", "60")
			if err := cmd.Start(); err != nil {
				t.Fatalf("this test needs sleep(1): %v", err)
			}
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
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
