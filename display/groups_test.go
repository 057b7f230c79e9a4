package display

import (
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDescendantGroups: the groups of what a session process started in
// groups of its own (as tint2's launchers do) are found, the session
// process's own group is not.
func TestDescendantGroups(t *testing.T) {
	// The shell says the pids of its two children: one in its group, one
	// in a session (so a group) of its own.
	sh := exec.Command("sh", "-c", "sleep 60 & echo $!; setsid sleep 60 & echo $!; wait")
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := sh.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	var kids []int
	t.Cleanup(func() {
		for _, k := range kids {
			_ = syscall.Kill(k, syscall.SIGKILL)
		}
		_ = syscall.Kill(-sh.Process.Pid, syscall.SIGKILL)
		_ = sh.Wait()
	})
	buf := make([]byte, 64)
	var text string
	for strings.Count(text, "\n") < 2 {
		n, err := out.Read(buf)
		if err != nil {
			t.Fatalf("read the shell's children: %v (read %q)", err, text)
		}
		text += string(buf[:n])
	}
	for _, f := range strings.Fields(text) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("the shell said %q, want pids", text)
		}
		kids = append(kids, pid)
	}
	// setsid(1) forks when it is its group's leader; it is not here, so
	// the detached sleep's group is its pid once setsid has run.
	detached := kids[1]
	var got []int
	for deadline := time.Now().Add(10 * time.Second); !slices.Contains(got, detached); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("descendantGroups = %v, want the detached sleep's group %d", got, detached)
		}
		got = descendantGroups([]int{sh.Process.Pid})
	}
	if len(got) != 1 {
		t.Errorf("descendantGroups = %v, want the detached sleep's group %d alone (not the shell's own %d)", got, detached, sh.Process.Pid)
	}
	if g := descendantGroups(nil); len(g) != 0 {
		t.Errorf("descendantGroups(none) = %v, want none", g)
	}
}
