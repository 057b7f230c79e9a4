package display

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestProcessUnfit reads real processes' states: one that runs is fit, one
// stopped, a zombie and one reaped are not, each with its reason.
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
