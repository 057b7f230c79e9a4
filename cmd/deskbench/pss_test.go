package main

import (
	"os"
	"os/exec"
	"testing"
)

// TestPSSTree measures this test process and a child it starts: both have
// memory of their own, and a process with no children has none below it.
func TestPSSTree(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatalf("this test needs sleep(1): %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	cases := []struct {
		name     string
		pid      int
		children bool
	}{
		{"this process, parent of sleep", os.Getpid(), true},
		{"sleep, no children", cmd.Process.Pid, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			self, desc := pssTree(c.pid)
			if self <= 0 {
				t.Errorf("pssTree(%d): own PSS %v, want some memory", c.pid, self)
			}
			if (desc > 0) != c.children {
				t.Errorf("pssTree(%d): descendants' PSS %v, want positive=%v", c.pid, desc, c.children)
			}
		})
	}
}
