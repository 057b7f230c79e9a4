package proc

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tail is the part of a real stat line after the state, ppid, pgrp and
// session: tty_nr tpgid flags minflt cminflt majflt cmajflt utime stime
// cutime cstime priority nice num_threads itrealvalue starttime vsize ...
const tail = " 0 -1 4194560 120 0 0 0 7 3 0 0 20 0 1 0 98765 8192000 200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0"

func TestParseStat(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want Stat
		err  string
	}{
		{name: "plain", in: "42 (sleep) S 1 42 40" + tail,
			want: Stat{PID: 42, Comm: "sleep", State: 'S', PPID: 1, PGRP: 42, Session: 40, UTime: 7, STime: 3, StartTime: 98765, Flags: 4194560}},
		{name: "comm with space and paren", in: "7 (a) b) Z 5 6 7" + tail,
			want: Stat{PID: 7, Comm: "a) b", State: 'Z', PPID: 5, PGRP: 6, Session: 7, UTime: 7, STime: 3, StartTime: 98765, Flags: 4194560}},
		{name: "comm that looks like fields", in: "8 () R 1 2 3 ) T 9 9 9" + tail,
			want: Stat{PID: 8, Comm: ") R 1 2 3 ", State: 'T', PPID: 9, PGRP: 9, Session: 9, UTime: 7, STime: 3, StartTime: 98765, Flags: 4194560}},
		{name: "empty comm", in: "9 () t 2 3 4" + tail,
			want: Stat{PID: 9, Comm: "", State: 't', PPID: 2, PGRP: 3, Session: 4, UTime: 7, STime: 3, StartTime: 98765, Flags: 4194560}},
		{name: "no parentheses", in: "9 sleep S 1 2 3" + tail, err: "no command name"},
		{name: "empty", in: "", err: "no command name"},
		{name: "truncated", in: "9 (x) S 1 2 3 0", err: "want at least 20"},
		{name: "bad pid", in: "x9 (x) S 1 2 3" + tail, err: "process id"},
		{name: "bad ppid", in: "9 (x) S one 2 3" + tail, err: "field 4"},
		{name: "bad flags", in: "9 (x) S 1 2 3 0 -1 x" + tail[len(" 0 -1 4194560"):], err: "field 9"},
		{name: "long state", in: "9 (x) SS 1 2 3" + tail, err: "fields after"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseStat([]byte(c.in))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("ParseStat(%q) error %v, want one saying %q", c.in, err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseStat(%q): %v", c.in, err)
			}
			if got != c.want {
				t.Errorf("ParseStat(%q) = %+v, want %+v", c.in, got, c.want)
			}
		})
	}
}

func TestParseStatus(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want Status
		err  string
	}{
		{name: "plain", in: "Name:\tbash\nState:\tS (sleeping)\nTracerPid:\t0\nUid:\t1000\t1001\t1000\t1000\n",
			want: Status{RealUID: 1000, EffectiveUID: 1001}},
		{name: "traced", in: "Name:\tx\nTracerPid:\t321\nUid:\t0\t0\t0\t0\n", want: Status{TracerPID: 321}},
		// A name is the process's to choose: a forged line in it must not
		// count (the kernel escapes newlines in Name, so it cannot start
		// a line, but it can carry the text).
		{name: "forged name", in: "Name:\tTracerPid: 9\nTracerPid:\t0\nUid:\t5\t5\t5\t5\n", want: Status{RealUID: 5, EffectiveUID: 5}},
		{name: "no tracer line", in: "Uid:\t1\t1\t1\t1\n", err: "no Uid or TracerPid"},
		{name: "short uid", in: "TracerPid:\t0\nUid:\t1\n", err: "real and effective"},
		{name: "bad tracer", in: "TracerPid:\tx\nUid:\t1\t1\t1\t1\n", err: "TracerPid line"},
		// SIGKILL (9) sent to the process, SIGUSR1 (10) to its thread.
		{name: "pending", in: "TracerPid:\t0\nUid:\t1\t1\t1\t1\nSigPnd:\t0000000000000200\nShdPnd:\t0000000000000100\n",
			want: Status{RealUID: 1, EffectiveUID: 1, Pending: 0x300}},
		{name: "bad pending", in: "TracerPid:\t0\nUid:\t1\t1\t1\t1\nShdPnd:\tzz\n", err: "ShdPnd line"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseStatus([]byte(c.in))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("ParseStatus error %v, want one saying %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseStatus: %v", err)
			}
			if got != c.want {
				t.Errorf("ParseStatus = %+v, want %+v", got, c.want)
			}
		})
	}
}

// fakeProc writes a procfs of one process 42 under a temporary directory.
func fakeProc(t *testing.T, files map[string]string) FS {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"42", "self", "sys"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(root, "42", name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return FS{Root: root}
}

func TestFakeProcFiles(t *testing.T) {
	p := fakeProc(t, map[string]string{
		"stat":         "42 (a) b) S 1 42 42" + tail,
		"cmdline":      "/bin/a) b\x00-x\x00\x00",
		"environ":      "DISPLAY=:3\x00HOME=/h\x00",
		"comm":         "a) b\n",
		"smaps_rollup": "00400000-7fff [rollup]\nRss:  100 kB\nPss:  12 kB\n",
		"status":       "Name:\ta) b\nUid:\t1\n",
	})
	pids, err := p.PIDs(context.Background())
	if err != nil || !slices.Equal(pids, []int{42}) {
		t.Fatalf("PIDs = %v, %v; want [42]", pids, err)
	}
	st, err := p.Stat(42)
	if err != nil || st.Comm != "a) b" || st.PPID != 1 {
		t.Errorf("Stat = %+v, %v; want comm \"a) b\", parent 1", st, err)
	}
	args, err := p.Cmdline(42, 1<<10)
	if err != nil || !slices.Equal(args, []string{"/bin/a) b", "-x"}) {
		t.Errorf("Cmdline = %q, %v", args, err)
	}
	env, err := p.Environ(42, 1<<10)
	if err != nil || !slices.Equal(env, []string{"DISPLAY=:3", "HOME=/h"}) {
		t.Errorf("Environ = %q, %v", env, err)
	}
	comm, err := p.Comm(42)
	if err != nil || comm != "a) b" {
		t.Errorf("Comm = %q, %v", comm, err)
	}
	pss, err := p.PSS(42)
	if err != nil || pss != 12*1024 {
		t.Errorf("PSS = %d, %v; want %d", pss, err, 12*1024)
	}
	// A limit cuts a file short rather than reading a huge one whole.
	if args, _ := p.Cmdline(42, 4); !slices.Equal(args, []string{"/bin"}) {
		t.Errorf("Cmdline limited to 4 bytes = %q, want [/bin]", args)
	}
	// A malformed file is an error that names the process, not ErrGone.
	if _, err := p.Status(42); err == nil || errors.Is(err, ErrGone) || !strings.Contains(err.Error(), "process 42") {
		t.Errorf("Status of a malformed status file: %v, want an error naming process 42, not ErrGone", err)
	}
}

func TestGone(t *testing.T) {
	p := fakeProc(t, nil)
	for name, read := range map[string]func() error{
		"stat":    func() error { _, err := p.Stat(7); return err },
		"status":  func() error { _, err := p.Status(7); return err },
		"environ": func() error { _, err := p.Environ(7, 10); return err },
		"cmdline": func() error { _, err := p.Cmdline(7, 10); return err },
		"comm":    func() error { _, err := p.Comm(7); return err },
		"owner":   func() error { _, err := p.Owner(7); return err },
		"pss":     func() error { _, err := p.PSS(7); return err },
		"threads": func() error { _, err := p.Threads(7); return err },
		"runtime": func() error { _, err := p.Runtime(7, 7); return err },
	} {
		if err := read(); !errors.Is(err, ErrGone) || !strings.Contains(err.Error(), "process 7") {
			t.Errorf("%s of a missing process: %v, want ErrGone naming process 7", name, err)
		}
	}
	if _, err := (FS{Root: filepath.Join(t.TempDir(), "none")}).PIDs(context.Background()); err == nil {
		t.Error("PIDs of a missing root: no error")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.PIDs(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("PIDs with a cancelled context: %v, want context.Canceled", err)
	}
}

// TestRealProcess reads the real /proc for a child whose executable is
// named "a) b", so that its kernel name holds both a space and a ')'.
func TestRealProcess(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatalf("this test needs sleep(1): %v", err)
	}
	b, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(t.TempDir(), "a) b")
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "60")
	cmd.Env = []string{"DESKENV_PROC_TEST=1"}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := cmd.Process.Pid
	p := Default()

	pids, err := p.PIDs(context.Background())
	if err != nil || !slices.Contains(pids, pid) || !slices.Contains(pids, os.Getpid()) {
		t.Fatalf("PIDs: %v; want this process and child %d listed", err, pid)
	}
	st, err := p.Stat(pid)
	if err != nil {
		t.Fatal(err)
	}
	if st.PID != pid || st.Comm != "a) b" || st.PPID != os.Getpid() || st.Dead() {
		t.Errorf("Stat(child) = %+v, want pid %d, comm \"a) b\", parent %d, alive", st, pid, os.Getpid())
	}
	self, err := p.Stat(os.Getpid())
	if err != nil || self.PGRP != st.PGRP || self.Session != st.Session {
		t.Errorf("Stat(self) = %+v, %v; want the child's group %d and session %d", self, err, st.PGRP, st.Session)
	}
	comm, err := p.Comm(pid)
	if err != nil || comm != "a) b" {
		t.Errorf("Comm(child) = %q, %v", comm, err)
	}
	args, err := p.Cmdline(pid, 1<<10)
	if err != nil || !slices.Equal(args, []string{exe, "60"}) {
		t.Errorf("Cmdline(child) = %q, %v", args, err)
	}
	env, err := p.Environ(pid, 1<<10)
	if err != nil || !slices.Equal(env, []string{"DESKENV_PROC_TEST=1"}) {
		t.Errorf("Environ(child) = %q, %v", env, err)
	}
	status, err := p.Status(pid)
	if err != nil || status.RealUID != os.Getuid() || status.EffectiveUID != os.Geteuid() || status.TracerPID != 0 {
		t.Errorf("Status(child) = %+v, %v; want uid %d, untraced", status, err, os.Getuid())
	}
	if owner, err := p.Owner(pid); err != nil || owner != os.Geteuid() {
		t.Errorf("Owner(child) = %d, %v; want %d", owner, err, os.Geteuid())
	}
	if pss, err := p.PSS(pid); err != nil || pss == 0 {
		t.Errorf("PSS(child) = %d, %v; want some memory", pss, err)
	}
	if st.Exiting() || status.SignalPending(syscall.SIGTERM) {
		t.Errorf("a sleeping child reads as exiting (%v) or with SIGTERM pending (%#x)", st.Exiting(), status.Pending)
	}

	// A stopped process keeps a signal sent to it pending until it goes on.
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	for st.State != 'T' {
		if st, err = p.Stat(pid); err != nil {
			t.Fatal(err)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if status, err := p.Status(pid); err != nil || !status.SignalPending(syscall.SIGTERM) || status.SignalPending(syscall.SIGKILL) {
		t.Errorf("Status(child stopped, sent SIGTERM) = %+v, %v; want SIGTERM pending and only it", status, err)
	}

	// Once reaped, the child is gone: every read says so with ErrGone.
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if _, err := p.Stat(pid); !errors.Is(err, ErrGone) || !strings.Contains(err.Error(), "process "+strconv.Itoa(pid)) {
		t.Errorf("Stat of reaped child %d: %v, want ErrGone naming it", pid, err)
	}
}

// TestRuntimeFiles: the thread listing, a thread's runtime and the last pid
// from a made-up process file system, well-formed and not.
func TestRuntimeFiles(t *testing.T) {
	p := fakeProc(t, nil)
	for _, tid := range []string{"42", "43"} {
		if err := os.MkdirAll(filepath.Join(p.Root, "42", "task", tid), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(p.Root, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("42/task/42/schedstat", "1500000 200 7\n")
	write("42/task/43/schedstat", "junk 1 2\n")
	write("loadavg", "0.03 0.74 1.18 1/82 14761\n")
	tids, err := p.Threads(42)
	slices.Sort(tids)
	if err != nil || !slices.Equal(tids, []int{42, 43}) {
		t.Errorf("Threads(42) = %v, %v; want [42 43]", tids, err)
	}
	if d, err := p.Runtime(42, 42); err != nil || d != 1500*time.Microsecond {
		t.Errorf("Runtime(42, 42) = %s, %v; want 1.5ms", d, err)
	}
	if _, err := p.Runtime(42, 43); err == nil || errors.Is(err, ErrGone) || !strings.Contains(err.Error(), "process 42") {
		t.Errorf("Runtime of a malformed schedstat: %v, want an error naming process 42, not ErrGone", err)
	}
	if pid, err := p.LastPID(); err != nil || pid != 14761 {
		t.Errorf("LastPID = %d, %v; want 14761", pid, err)
	}
	write("loadavg", "0.03 0.74\n")
	if _, err := p.LastPID(); err == nil {
		t.Error("LastPID of a short loadavg: no error")
	}
}

// TestRuntimeReal: this process's threads are listed and its main thread
// has run.
func TestRuntimeReal(t *testing.T) {
	p := Default()
	tids, err := p.Threads(os.Getpid())
	if err != nil || !slices.Contains(tids, os.Getpid()) {
		t.Fatalf("Threads(self) = %v, %v; want the main thread %d among them", tids, err, os.Getpid())
	}
	if d, err := p.Runtime(os.Getpid(), os.Getpid()); err != nil || d <= 0 {
		t.Errorf("Runtime(self) = %s, %v; want a positive time", d, err)
	}
	if pid, err := p.LastPID(); err != nil || pid <= 0 {
		t.Errorf("LastPID = %d, %v", pid, err)
	}
}
