package task

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/deskenv/deskenv/internal/proc"
)

// maxProcesses is the most processes process_running looks at; a fork
// bomb's thousands are no reason to read /proc without end.
const maxProcesses = 32768

// ProcessInfo is a running process of the desktop's user.
type ProcessInfo struct {
	PID int
	// Name is the executable's base name: argv[0]'s, or /proc's comm
	// (15 bytes at most) when the command line is empty.
	Name string
	// Comm is the kernel's name for it (/proc/PID/comm).
	Comm string
	// Cmdline is the command line, arguments joined by spaces.
	Cmdline string
}

// ProcessLister is an Env that can list the desktop user's processes;
// DisplayEnv is one.
type ProcessLister interface {
	Processes(ctx context.Context) ([]ProcessInfo, error)
}

// Processes lists the running processes (not zombies) whose real user is
// the desktop's: the session's user when the display runs programs as
// another user, else this process's, less this process itself (a deskenv
// running as the desktop's user is not one of its programs).
func (e *DisplayEnv) Processes(ctx context.Context) ([]ProcessInfo, error) {
	return listProcesses(ctx, "/proc", e.sessionUID(), os.Getpid())
}

// listProcesses reads the processes of uid under procfs, skipping self.
func listProcesses(ctx context.Context, procfs string, uid uint32, self int) ([]ProcessInfo, error) {
	pfs := proc.FS{Root: procfs}
	pids, err := pfs.PIDs(ctx)
	if err != nil {
		return nil, err
	}
	var out []ProcessInfo
	n := 0
	for _, pid := range pids {
		if pid == self {
			continue
		}
		if n++; n > maxProcesses {
			break
		}
		if n%256 == 0 && ctx.Err() != nil {
			return nil, fmt.Errorf("list processes: %w", ctx.Err())
		}
		// /proc/PID belongs to the process's effective user; the status
		// file's Uid line would give the real one too, but a setuid program
		// of the desktop's is no concern here.
		if owner, err := pfs.Owner(pid); err != nil || owner != int(uid) {
			continue
		}
		if st, err := pfs.Stat(pid); err != nil || st.Dead() {
			continue // gone since the listing, or dead and not yet reaped
		}
		p := ProcessInfo{PID: pid}
		if comm, err := pfs.Comm(pid); err == nil {
			p.Comm = comm
		}
		if args, err := pfs.Cmdline(pid, 64<<10); err == nil {
			p.Cmdline = strings.Join(args, " ")
			if len(args) > 0 && args[0] != "" {
				// argv[0] may carry arguments of its own when a program
				// rewrote it (Chromium's helpers): the first word is the name.
				first, _, _ := strings.Cut(args[0], " ")
				p.Name = filepath.Base(first)
			}
		}
		if p.Name == "" {
			p.Name = p.Comm
		}
		out = append(out, p)
	}
	return out, nil
}

func describeProcess(c *Check) string {
	if c.Process != "" {
		return "process_running " + c.Process
	}
	m, err := c.matcher()
	if err != nil {
		return "process_running"
	}
	return "process_running, command line " + m.String()
}

// processRunning is process_running: a process of the desktop's user is
// named process (argv[0]'s base name, or the kernel's comm), and its
// command line satisfies contains / matches when given.
func processRunning(ctx context.Context, env Env, c *Check) (bool, string, error) {
	pl, ok := env.(ProcessLister)
	if !ok {
		return false, "", errors.New("this environment cannot list processes")
	}
	procs, err := pl.Processes(ctx)
	if err != nil {
		return false, "", err
	}
	m, err := c.matcher()
	if err != nil {
		return false, "", err
	}
	hasText := c.Contains != "" || c.Matches != ""
	var named []string
	for _, p := range procs {
		if c.Process != "" && p.Name != c.Process && p.Comm != c.Process {
			continue
		}
		if hasText && !m.match(p.Cmdline) {
			if len(named) < 10 {
				named = append(named, fmt.Sprintf("%d %s", p.PID, quoteHead(p.Cmdline, 100)))
			}
			continue
		}
		return true, fmt.Sprintf("process %d is running: %s", p.PID, quoteHead(p.Cmdline, 160)), nil
	}
	if c.Process != "" && len(named) > 0 {
		return false, fmt.Sprintf("%s runs, but no command line %s: %s", c.Process, m, strings.Join(named, "; ")), nil
	}
	what := fmt.Sprintf("named %q", c.Process)
	if c.Process == "" {
		what = "whose command line " + m.String()
	}
	return false, fmt.Sprintf("no process of the desktop's user %s (%d of its processes run)", what, len(procs)), nil
}

func validateProcess(d *decoder, at site, c *Check) {
	if v, ok := at.f["process"]; ok && v.kind == jString && strings.Contains(c.Process, "/") {
		d.fail(v, join(at.path, "process"), "%q: give the program's name without a folder, such as \"galculator\"", c.Process)
	}
	needCondition(d, at, "process", "contains", "matches")
}
