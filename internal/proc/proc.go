// Package proc reads Linux's process file system: the pids it lists and the
// stat, status, environ, cmdline, comm and smaps_rollup files of each. It is
// the one parser of these files, so that the comm field's quirks (anything
// may be in it, ')' and spaces too) are handled once; and the process tree
// they make (Tree, FS.Under), so that the walk up through parents is written
// once.
package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrGone is wrapped by the errors of a process that has exited (or never
// was): listing /proc and reading a pid's files race with exits, and the
// callers skip such a process rather than fail.
var ErrGone = errors.New("process has exited")

// FS is a process file system mounted at Root; tests point Root at a
// directory of their own.
type FS struct{ Root string }

// Default is the system's /proc.
func Default() FS { return FS{Root: "/proc"} }

// PIDs lists the process ids under the root, in directory order.
func (p FS) PIDs(ctx context.Context) ([]int, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list processes in %s: %w", p.Root, err)
	}
	dir, err := os.Open(p.Root)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("list processes in %s: %w", p.Root, err)
	}
	out := make([]int, 0, len(names))
	for _, n := range names {
		// Only the numeric entries are processes; "self", "sys" and the
		// rest are not.
		if pid, err := strconv.Atoi(n); err == nil && pid > 0 {
			out = append(out, pid)
		}
	}
	return out, nil
}

// Stat is what /proc/PID/stat says of a process (see proc(5)); the fields
// deskenv uses.
type Stat struct {
	PID int
	// Comm is the kernel's name for the process, at most 15 bytes, which
	// may hold spaces and parentheses.
	Comm string
	// State is the state letter: R, S, D, Z (zombie), T (stopped),
	// t (traced), X (dead)...
	State   byte
	PPID    int
	PGRP    int
	Session int
	// UTime and STime are the user and system CPU time in clock ticks
	// (USER_HZ, 100 a second on Linux).
	UTime, STime uint64
	// StartTime is when the process started, in clock ticks after boot.
	StartTime uint64
	// Flags are the kernel's PF_* flags of the process.
	Flags uint64
}

// pfExiting is the kernel's PF_EXITING: set when a process starts to
// exit, before it closes its files and turns into a zombie.
const pfExiting = 0x4

// Exiting reports whether the process has begun to exit (it may still be
// running its exit, with its files and connections open).
func (s Stat) Exiting() bool { return s.Flags&pfExiting != 0 }

// Dead reports whether the process is a zombie or dead: it has exited and
// only waits to be reaped.
func (s Stat) Dead() bool { return s.State == 'Z' || s.State == 'X' }

// Stopped reports whether the process is stopped by a signal or a tracer.
func (s Stat) Stopped() bool { return s.State == 'T' || s.State == 't' }

// ParseStat parses the text of a /proc/PID/stat file.
func ParseStat(b []byte) (Stat, error) {
	var s Stat
	// "pid (comm) state ppid ...": comm may itself hold ") " (a program
	// may name itself anything), so it ends at the LAST ')'.
	open := bytes.IndexByte(b, '(')
	end := bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return s, fmt.Errorf("process stat %q: no command name in parentheses", head(b))
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:open])))
	if err != nil {
		return s, fmt.Errorf("process stat %q: process id: %w", head(b), err)
	}
	s.PID, s.Comm = pid, string(b[open+1:end])
	f := strings.Fields(string(b[end+1:]))
	// After comm: state(0) ppid(1) pgrp(2) session(3) tty_nr tpgid flags
	// minflt cminflt majflt cmajflt utime(11) stime(12) cutime cstime
	// priority nice num_threads itrealvalue starttime(19).
	if len(f) < 20 || len(f[0]) != 1 {
		return s, fmt.Errorf("process stat %q: %d fields after the command name, want at least 20", head(b), len(f))
	}
	s.State = f[0][0]
	ints := []struct {
		dst *int
		i   int
	}{{&s.PPID, 1}, {&s.PGRP, 2}, {&s.Session, 3}}
	for _, x := range ints {
		if *x.dst, err = strconv.Atoi(f[x.i]); err != nil {
			return s, fmt.Errorf("process stat %q: field %d: %w", head(b), x.i+3, err)
		}
	}
	uints := []struct {
		dst *uint64
		i   int
	}{{&s.Flags, 6}, {&s.UTime, 11}, {&s.STime, 12}, {&s.StartTime, 19}}
	for _, x := range uints {
		if *x.dst, err = strconv.ParseUint(f[x.i], 10, 64); err != nil {
			return s, fmt.Errorf("process stat %q: field %d: %w", head(b), x.i+3, err)
		}
	}
	return s, nil
}

// Stat reads /proc/PID/stat.
func (p FS) Stat(pid int) (Stat, error) {
	b, err := p.read(pid, "stat", 4096)
	if err != nil {
		return Stat{}, err
	}
	s, err := ParseStat(b)
	if err != nil {
		return Stat{}, fmt.Errorf("process %d: %w", pid, err)
	}
	return s, nil
}

// Status is what /proc/PID/status says of a process; the fields deskenv
// uses.
type Status struct {
	// RealUID and EffectiveUID are the first two ids of the Uid line.
	RealUID, EffectiveUID int
	// TracerPID is the process tracing this one (a debugger), 0 if none.
	TracerPID int
	// Pending are the signals sent to the process and not yet delivered,
	// to the process or its main thread (SigPnd | ShdPnd): bit n-1 for
	// signal n.
	Pending uint64
}

// SignalPending reports whether sig is pending for the process.
func (s Status) SignalPending(sig syscall.Signal) bool {
	return sig > 0 && sig <= 64 && s.Pending&(1<<(uint(sig)-1)) != 0
}

// ParseStatus parses the text of a /proc/PID/status file.
func ParseStatus(b []byte) (Status, error) {
	var s Status
	var seenUID, seenTracer bool
	for _, line := range strings.Split(string(b), "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(val)
		switch key {
		case "Uid":
			if len(f) < 2 {
				return s, fmt.Errorf("process status: Uid line %q: want real and effective ids", head([]byte(line)))
			}
			r, err1 := strconv.Atoi(f[0])
			e, err2 := strconv.Atoi(f[1])
			if err := errors.Join(err1, err2); err != nil {
				return s, fmt.Errorf("process status: Uid line %q: %w", head([]byte(line)), err)
			}
			s.RealUID, s.EffectiveUID, seenUID = r, e, true
		case "TracerPid":
			if len(f) < 1 {
				return s, fmt.Errorf("process status: empty TracerPid line")
			}
			t, err := strconv.Atoi(f[0])
			if err != nil {
				return s, fmt.Errorf("process status: TracerPid line %q: %w", head([]byte(line)), err)
			}
			s.TracerPID, seenTracer = t, true
		case "SigPnd", "ShdPnd":
			if len(f) < 1 {
				return s, fmt.Errorf("process status: empty %s line", key)
			}
			m, err := strconv.ParseUint(f[0], 16, 64)
			if err != nil {
				return s, fmt.Errorf("process status: %s line %q: %w", key, head([]byte(line)), err)
			}
			s.Pending |= m
		}
	}
	if !seenUID || !seenTracer {
		return s, fmt.Errorf("process status: no Uid or TracerPid line")
	}
	return s, nil
}

// Status reads /proc/PID/status.
func (p FS) Status(pid int) (Status, error) {
	b, err := p.read(pid, "status", 64<<10)
	if err != nil {
		return Status{}, err
	}
	s, err := ParseStatus(b)
	if err != nil {
		return Status{}, fmt.Errorf("process %d: %w", pid, err)
	}
	return s, nil
}

// Environ reads /proc/PID/environ as its NUL-terminated "KEY=value"
// entries, at most max bytes of them. A zombie's (and a kernel thread's) is
// empty. Reading another user's needs CAP_SYS_PTRACE: that error is not
// ErrGone.
func (p FS) Environ(pid, max int) ([]string, error) {
	b, err := p.read(pid, "environ", max)
	if err != nil {
		return nil, err
	}
	return split0(b), nil
}

// Cmdline reads /proc/PID/cmdline as its arguments, at most max bytes of
// them; a zombie's and a kernel thread's is empty (no arguments).
func (p FS) Cmdline(pid, max int) ([]string, error) {
	b, err := p.read(pid, "cmdline", max)
	if err != nil {
		return nil, err
	}
	return split0(b), nil
}

// Comm reads /proc/PID/comm, the kernel's name for the process.
func (p FS) Comm(pid int) (string, error) {
	b, err := p.read(pid, "comm", 256)
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(string(b), "\n"), nil
}

// Owner is the user owning /proc/PID: the process's effective user (or
// root, for one that made itself undumpable).
func (p FS) Owner(pid int) (int, error) {
	var st syscall.Stat_t
	path := filepath.Join(p.Root, strconv.Itoa(pid))
	if err := syscall.Stat(path, &st); err != nil {
		return -1, p.wrap(pid, "owner", err)
	}
	return int(st.Uid), nil
}

// PSS is the process's proportional set size in bytes, from
// /proc/PID/smaps_rollup: its memory with each shared page divided among
// the processes sharing it.
func (p FS) PSS(pid int) (uint64, error) {
	b, err := p.read(pid, "smaps_rollup", 64<<10)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		v, ok := strings.CutPrefix(line, "Pss:")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("process %d: smaps_rollup Pss line %q: want a number of kB", pid, head([]byte(line)))
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("process %d: smaps_rollup Pss line %q: %w", pid, head([]byte(line)), err)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("process %d: smaps_rollup has no Pss line", pid)
}

// read reads at most max bytes of /proc/PID/name.
func (p FS) read(pid int, name string, max int) ([]byte, error) {
	f, err := os.Open(filepath.Join(p.Root, strconv.Itoa(pid), name))
	if err != nil {
		return nil, p.wrap(pid, name, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, int64(max)))
	if err != nil {
		return nil, p.wrap(pid, name, err)
	}
	return b, nil
}

// wrap words err for a person and marks a vanished process with ErrGone:
// the file is missing (ENOENT) or the process exited between open and
// read (ESRCH).
func (p FS) wrap(pid int, name string, err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("process %d: read %s: %w (%w)", pid, name, ErrGone, err)
	}
	return fmt.Errorf("process %d: read %s: %w", pid, name, err)
}

// split0 splits NUL-terminated strings; no data is no strings.
func split0(b []byte) []string {
	b = bytes.TrimRight(b, "\x00")
	if len(b) == 0 {
		return nil
	}
	return strings.Split(string(b), "\x00")
}

// head quotes at most 80 bytes of b in errors: a corrupt file is no reason
// to print a page.
func head(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "..."
	}
	return string(b)
}

// Threads lists the thread ids of process pid (/proc/PID/task).
func (p FS) Threads(pid int) ([]int, error) {
	dir, err := os.Open(filepath.Join(p.Root, strconv.Itoa(pid), "task"))
	if err != nil {
		return nil, p.wrap(pid, "task", err)
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return nil, p.wrap(pid, "task", err)
	}
	out := make([]int, 0, len(names))
	for _, n := range names {
		if tid, err := strconv.Atoi(n); err == nil && tid > 0 {
			out = append(out, tid)
		}
	}
	return out, nil
}

// Runtime is how long thread tid of process pid has run on a CPU, from the
// first field of /proc/PID/task/TID/schedstat: nanoseconds, where stat's
// utime and stime count 10 ms ticks, too coarse to tell whether a program
// did anything in the last 20 ms.
func (p FS) Runtime(pid, tid int) (time.Duration, error) {
	name := "task/" + strconv.Itoa(tid) + "/schedstat"
	b, err := p.read(pid, name, 256)
	if err != nil {
		return 0, err
	}
	f, _, _ := strings.Cut(string(b), " ")
	ns, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
	if err != nil || ns < 0 {
		return 0, fmt.Errorf("process %d: %s %q: want nanoseconds first", pid, name, head(b))
	}
	return time.Duration(ns), nil
}

// LastPID is the process id the kernel handed out last, from
// /proc/loadavg: while it stays the same, no process or thread was created.
func (p FS) LastPID() (int, error) {
	b, err := os.ReadFile(filepath.Join(p.Root, "loadavg"))
	if err != nil {
		return 0, fmt.Errorf("read %s/loadavg: %w", p.Root, err)
	}
	f := strings.Fields(string(b))
	if len(f) < 5 {
		return 0, fmt.Errorf("%s/loadavg %q: want five fields", p.Root, head(b))
	}
	pid, err := strconv.Atoi(f[4])
	if err != nil {
		return 0, fmt.Errorf("%s/loadavg %q: last process id: %w", p.Root, head(b), err)
	}
	return pid, nil
}

// ThreadStat reads /proc/PID/task/TID/stat: one thread's state, where the
// process's stat tells only its main thread's.
func (p FS) ThreadStat(pid, tid int) (Stat, error) {
	b, err := p.read(pid, "task/"+strconv.Itoa(tid)+"/stat", 4096)
	if err != nil {
		return Stat{}, err
	}
	s, err := ParseStat(b)
	if err != nil {
		return Stat{}, fmt.Errorf("process %d thread %d: %w", pid, tid, err)
	}
	return s, nil
}
