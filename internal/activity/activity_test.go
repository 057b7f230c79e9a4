package activity

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/deskenv/deskenv/internal/proc"
)

// spinner starts a shell that keeps a CPU busy, as cred's user when set,
// and returns it; it is killed when the test ends.
func spinner(t *testing.T, cred *syscall.Credential) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sh", "-c", "while :; do :; done")
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// sleeper starts a process that never runs once started, and returns when
// it is asleep: until then it runs (exec, the dynamic loader), which a
// loaded machine stretches past a measuring window (CI counted 0.2 ms of
// it once).
func sleeper(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	fs := proc.Default()
	for deadline := time.Now().Add(10 * time.Second); ; {
		st, err := fs.Stat(cmd.Process.Pid)
		if err == nil && st.Comm == "sleep" && st.State == 'S' {
			// Asleep in nanosleep, not in a page fault of its start:
			// its runtime stays put across a pause.
			a, err1 := fs.Runtime(cmd.Process.Pid, cmd.Process.Pid)
			time.Sleep(20 * time.Millisecond)
			b, err2 := fs.Runtime(cmd.Process.Pid, cmd.Process.Pid)
			if err1 == nil && err2 == nil && a == b {
				return cmd
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("sleep(1) did not fall asleep within 10 s: %+v, %v", st, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// usedOver is what m counts over d.
func usedOver(t *testing.T, m *Meter, d time.Duration) time.Duration {
	t.Helper()
	ctx := context.Background()
	a, err := m.Used(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(d)
	b, err := m.Used(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b < a {
		t.Fatalf("the running total went down: %s, then %s", a, b)
	}
	return b - a
}

// TestMeter: which processes count. Each case starts its processes, then
// reads the meter over 200 ms; a busy loop that counts shows at least
// 20 ms of it (a tenth, so a loaded machine's scheduling does not matter),
// one that does not shows none.
func TestMeter(t *testing.T) {
	// A user id of its own, no passwd entry needed: nobody (65534) runs
	// other packages' tests beside this one, whose work would count.
	const uid = 61999
	session := &syscall.Credential{Uid: uid, Gid: uid}
	tests := []struct {
		name string
		root bool // needs root, to run a process as another user
		// start starts the case's processes and returns the meter's
		// config.
		start func(t *testing.T) Config
		busy  bool
	}{
		{"a sleeping child", false, func(t *testing.T) Config {
			sleeper(t)
			return Config{UID: -1}
		}, false},
		{"a busy child", false, func(t *testing.T) Config {
			sleeper(t)
			spinner(t, nil)
			return Config{UID: -1}
		}, true},
		{"a busy child excluded", false, func(t *testing.T) Config {
			s := spinner(t, nil)
			return Config{UID: -1, Exclude: func() []int { return []int{s.Process.Pid} }}
		}, false},
		{"a busy grandchild of an excluded child", false, func(t *testing.T) Config {
			sh := exec.Command("sh", "-c", "sh -c 'while :; do :; done' & wait")
			sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // so the cleanup kills both
			if err := sh.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = syscall.Kill(-sh.Process.Pid, syscall.SIGKILL); _ = sh.Process.Kill(); _ = sh.Wait() })
			return Config{UID: -1, Exclude: func() []int { return []int{sh.Process.Pid} }}
		}, false},
		{"the session user's busy process", true, func(t *testing.T) Config {
			spinner(t, session)
			return Config{UID: uid}
		}, true},
		{"with a session user, a busy child of another user", true, func(t *testing.T) Config {
			spinner(t, nil)
			return Config{UID: uid}
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root && os.Geteuid() != 0 {
				t.Skip("needs root to start a process as another user")
			}
			m := New(tc.start(t))
			// The first reading takes stock; the spinner may not have
			// been listed yet, so read once before measuring.
			if _, err := m.Used(context.Background()); err != nil {
				t.Fatal(err)
			}
			got := usedOver(t, m, 200*time.Millisecond)
			if tc.busy && got < 20*time.Millisecond {
				t.Errorf("a busy loop of the desktop's ran %s in 200 ms by the meter, want at least 20 ms", got)
			}
			if !tc.busy && got != 0 {
				t.Errorf("the meter counted %s in 200 ms, want nothing: no busy process of the desktop", got)
			}
		})
	}
}

// TestMeterNewProcess: a process started between two readings counts with
// all it ran, and the total stays a running total when it exits.
func TestMeterNewProcess(t *testing.T) {
	m := New(Config{UID: -1})
	ctx := context.Background()
	a, err := m.Used(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := spinner(t, nil)
	time.Sleep(150 * time.Millisecond)
	b, err := m.Used(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b-a < 15*time.Millisecond {
		t.Errorf("a busy process started after the first reading counted %s over 150 ms, want at least 15 ms", b-a)
	}
	_ = s.Process.Kill()
	_ = s.Wait()
	c, err := m.Used(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c < b {
		t.Errorf("the total went down from %s to %s when the process exited", b, c)
	}
}

// TestMeterNoProc: an unreadable process file system is an error worded
// for a person, not a count of zero (which would read as idle).
func TestMeterNoProc(t *testing.T) {
	m := New(Config{UID: -1})
	m.cfg.FS.Root = t.TempDir()
	if _, err := m.Used(context.Background()); err == nil {
		t.Fatal("a meter over an empty directory said nothing was wrong")
	}
}

// TestMeterTooManyThreads: past its limit of threads a reading fails (so a
// settle waits its whole quiet period) instead of growing without bound,
// and readings work again once the threads are gone.
func TestMeterTooManyThreads(t *testing.T) {
	m := New(Config{UID: -1})
	m.limit = 2
	var kids []*exec.Cmd
	for range 3 {
		kids = append(kids, sleeper(t))
	}
	if _, err := m.Used(context.Background()); err == nil || !strings.Contains(err.Error(), "more than 2 threads") {
		t.Fatalf("a reading of 3 threads with a limit of 2: %v, want an error naming the limit", err)
	}
	for _, k := range kids {
		_ = k.Process.Kill()
		_ = k.Wait()
	}
	if _, err := m.Used(context.Background()); err != nil {
		t.Errorf("a reading once the threads are gone: %v", err)
	}
}

// madeUpProc is a directory to stand for /proc, and a function that writes
// a file of it.
func madeUpProc(t *testing.T) (string, func(name, body string)) {
	root := t.TempDir()
	return root, func(name, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMeterWaitingThread: a thread that has not run between two readings
// but is runnable at the second (waiting for a CPU on a loaded machine)
// makes the difference not zero; asleep, it stays zero. On a made-up
// /proc, since a thread kept waiting is hard to make on demand.
func TestMeterWaitingThread(t *testing.T) {
	root, write := madeUpProc(t)
	stat := func(state string) string {
		return fmt.Sprintf("500 (app) %s %d 500 500 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 100\n", state, os.Getpid())
	}
	write("loadavg", "0.00 0.00 0.00 1/1 500\n")
	write("500/stat", stat("S"))
	write("500/task/500/stat", stat("S"))
	write("500/task/500/schedstat", "1000000 0 3\n")
	m := New(Config{UID: -1, FS: proc.FS{Root: root}})
	ctx := context.Background()
	read := func() time.Duration {
		t.Helper()
		u, err := m.Used(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	a := read()
	b := read()
	if b != a {
		t.Errorf("asleep and not run: the total moved from %s to %s", a, b)
	}
	for _, state := range []string{"R", "D"} {
		write("500/task/500/stat", stat(state))
		c := read()
		if c <= b {
			t.Errorf("state %s, not run: the total stayed %s, want it moved", state, c)
		}
		b = c
	}
	write("500/task/500/stat", stat("S"))
	if d := read(); d != b {
		t.Errorf("asleep again: the total moved from %s to %s", b, d)
	}
}

// TestMeterAsInit: deskenv as a container's pid 1 without a session user
// measures every process but itself and the X server's subtree (a walk up
// never reports init, so it once measured nothing and took every desktop
// for idle). On a made-up /proc: 1 deskenv, 10 Xvfb and 11 its xkbcomp, 20
// an app and 21 its child, 30 an orphan reparented to init.
func TestMeterAsInit(t *testing.T) {
	root, write := madeUpProc(t)
	write("loadavg", "0.00 0.00 0.00 1/1 30\n")
	for _, p := range []struct{ pid, ppid int }{{1, 0}, {10, 1}, {11, 10}, {20, 1}, {21, 20}, {30, 1}} {
		st := fmt.Sprintf("%d (p) S %d %d %d 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 100\n", p.pid, p.ppid, p.pid, p.pid)
		write(fmt.Sprintf("%d/stat", p.pid), st)
		write(fmt.Sprintf("%d/task/%d/stat", p.pid, p.pid), st)
		write(fmt.Sprintf("%d/task/%d/schedstat", p.pid, p.pid), "1000000 0 3\n")
	}
	m := New(Config{UID: -1, FS: proc.FS{Root: root}, Exclude: func() []int { return []int{10} }})
	m.self = 1
	if _, err := m.Used(context.Background()); err != nil {
		t.Fatal(err)
	}
	if want := []int{20, 21, 30}; !slices.Equal(m.pids, want) {
		t.Errorf("as pid 1 the meter measures %v, want %v", m.pids, want)
	}
	// An app that runs moves the total.
	before, _ := m.Used(context.Background())
	write("21/task/21/schedstat", "9000000 0 4\n")
	if after, _ := m.Used(context.Background()); after <= before {
		t.Errorf("an app ran 8 ms and the total stayed %s", after)
	}
}

// fakeDisplay is the part of a display ForDisplay reads.
type fakeDisplay struct {
	cred   *syscall.Credential
	server int
}

func (f fakeDisplay) Credential() *syscall.Credential { return f.cred }
func (f fakeDisplay) ServerPID() int                  { return f.server }

// TestForDisplay: a display with a session user is measured by that user,
// one without by the process tree, and its X server is left out.
func TestForDisplay(t *testing.T) {
	tests := []struct {
		name    string
		d       fakeDisplay
		wantUID int
	}{
		{"a session user", fakeDisplay{&syscall.Credential{Uid: 61999, Gid: 61999}, 4242}, 61999},
		{"none", fakeDisplay{nil, 4242}, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := ForDisplay(tc.d)
			if m.cfg.UID != tc.wantUID {
				t.Errorf("UID = %d, want %d", m.cfg.UID, tc.wantUID)
			}
			if ex := m.cfg.Exclude(); len(ex) != 1 || ex[0] != 4242 {
				t.Errorf("Exclude() = %v, want the X server [4242]", ex)
			}
		})
	}
}
