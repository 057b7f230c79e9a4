package baseline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/deskenv/deskenv/internal/proc"
)

// kill ends the session's process groups, every other process of the
// session's user running on the display, and every X client not in this
// process. The panel and the window manager are spared while the rest
// dies; then, with nothing of the agent's left to interfere, the window
// manager is checked and killed too unless it can be kept (keepWM).
func (b *Desktop) kill(ctx context.Context, x *xsession, rep *Report) error {
	owned := b.d.Owned()
	var mine map[int]bool
	if !owned {
		// On a display someone else runs, only what we started goes.
		mine = descendants(os.Getpid())
	}
	wm := 0
	if owned {
		wm = b.d.WindowManagerPID()
	}
	killed := b.killProcesses(mine, wm)
	rep.KilledProcesses = len(killed)

	spare := append(b.d.PanelPIDs(), wm)
	n, err := x.killClients(keepClient(owned, mine, spare))
	if err != nil {
		b.log.Warn("cannot list X clients; windows of processes not found by their environment may survive the reset", "err", err)
	}
	rep.KilledClients += n
	if err := b.waitGone(ctx, killed); err != nil {
		return err
	}
	if owned {
		if gone := b.keepWM(x, rep); len(gone) > 0 {
			rep.KilledProcesses += len(gone)
			if err := b.waitGone(ctx, gone); err != nil {
				return err
			}
		}
	}
	if !rep.WindowManagerKept {
		spare = b.d.PanelPIDs()
	}
	// Anything that connected while the others were dying, and the window
	// manager's connection when it was not kept.
	if n, err := x.killClients(keepClient(owned, mine, spare)); err == nil {
		rep.KilledClients += n
	}
	return nil
}

// waitGone waits up to 3 s for the killed processes to be gone; ones that
// survive SIGKILL (in uninterruptible sleep) are logged, not an error.
func (b *Desktop) waitGone(ctx context.Context, pids []int) error {
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := waitGone(wctx, pids); err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			return ctx.Err()
		}
		b.log.Warn("reset: processes survive SIGKILL", "err", err)
	}
	return nil
}

// keepWM decides, once everything else of the session is gone, whether the
// window manager stays (display.CheckWindowManager, and no grab of its
// own: an open menu, a move or a window switch in progress would hold the
// next episode's input); if not, it kills it and returns its process ids.
func (b *Desktop) keepWM(x *xsession, rep *Report) []int {
	chk := b.d.CheckWindowManager()
	if chk.Keep {
		if what := x.grabbed(); what != "" {
			chk.Keep, chk.Why = false, "it holds the "+what+" (a menu, a move or a window switch left open)"
		} else if w := x.windowOf(chk.Window); w != "" {
			chk.Keep, chk.Why = false, "it shows a window of its own ("+w+"), a prompt or a dialog the agent left open"
		}
	}
	rep.WindowManagerKept, rep.WindowManagerReconfigure, rep.wmWindow = chk.Keep, chk.Keep && chk.Reconfigure, chk.Window
	if chk.Keep {
		rep.WindowManagerWhy = ""
		return nil
	}
	rep.WindowManagerWhy = chk.Why
	if chk.PID != 0 {
		b.log.Info("reset: restarting the window manager", "pid", chk.PID, "why", chk.Why)
	}
	return b.d.KillSession(false)
}

// killProcesses sends SIGKILL to the session's processes (only those in
// mine, if not nil) but the panel and wm (0: none), and returns their ids.
func (b *Desktop) killProcesses(mine map[int]bool, wm int) []int {
	var killed []int
	if b.d.Owned() {
		// Through the display, so its supervision knows these deaths are
		// the reset's and does not restart them.
		killed = append(killed, b.d.KillSession(wm != 0)...)
	}
	sessionUID := -1
	if c := b.d.Credential(); c != nil {
		sessionUID = int(c.Uid)
	}
	skip := b.serverProcesses()
	if wm != 0 {
		skip[wm] = true
	}
	sp := b.d.ServerPID()
	for _, pid := range desktopProcesses(b.d.Name(), sessionUID, skip) {
		if (mine != nil && !mine[pid]) || underServer(pid, sp) {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed = append(killed, pid)
		}
	}
	return killed
}

// serverProcesses are the X server and the desktop's panel
// (display.Config.Panel): never the session's to kill. What the panel's
// launchers started is: only the panel's own process is spared. The
// xkbcomp the server runs now and then is spared by underServer.
func (b *Desktop) serverProcesses() map[int]bool {
	skip := map[int]bool{}
	for _, p := range b.d.PanelPIDs() {
		skip[p] = true
	}
	if sp := b.d.ServerPID(); sp > 0 {
		skip[sp] = true
	}
	return skip
}

// underServer reports whether pid runs below the X server sp (0: none) in
// the process tree. Walking up from the few processes found on the display
// (proc.FS.Under reads one stat per ancestor) costs a reset a handful of
// reads, where a proc.Tree, or listing the server's descendants, would
// read every process's stat.
func underServer(pid, sp int) bool {
	if sp <= 0 {
		return false
	}
	_, ok := proc.Default().Under(pid, map[int]bool{sp: true})
	return ok
}

// keepClient says which X clients survive a reset, by process id: this
// process and spare's (the panel's, the window manager's while it is
// kept) always; on a display someone else runs, also every client that is
// not ours (mine), and those whose process is unknown.
func keepClient(owned bool, mine map[int]bool, spare []int) func(pid int) bool {
	self := os.Getpid()
	return func(pid int) bool {
		if pid == self || (pid > 0 && slices.Contains(spare, pid)) {
			return true
		}
		if owned {
			return false
		}
		return pid == 0 || !mine[pid]
	}
}

// desktopProcesses are the processes of the session that run on display
// name, other than this process and the ones in skip. That finds what a
// session or a task started even after it detached itself (double fork,
// setsid), which a process-group kill misses.
//
// When the session runs as a user of its own (sessionUID, not this
// process's), that user is the desktop's alone, and every process of it is
// the session's: no environment needs reading (it may not be readable, and
// a program could drop DISPLAY from its own). Otherwise they are this
// user's processes whose environment says DISPLAY=name.
func desktopProcesses(name string, sessionUID int, skip map[int]bool) []int {
	uid := os.Getuid()
	byUID := sessionUID >= 0 && sessionUID != uid
	if byUID {
		uid = sessionUID
	}
	pfs := proc.Default()
	// Listing /proc does not block: the context only matters to callers
	// that list without end, which this one does not. Only the owner of
	// each process is read (no stat, no parent), and the environment of
	// the user's.
	pids, err := pfs.Owned(context.Background(), uid)
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var out []int
	for _, pid := range pids {
		if pid == self || skip[pid] {
			continue
		}
		env, err := pfs.Environ(pid, maxEnviron)
		if onDisplay(env, err, name, byUID) {
			out = append(out, pid)
		}
	}
	return out
}

// maxEnviron bounds how much of a process's environment is read: the
// kernel caps it at a quarter of the stack limit, which may be unlimited.
const maxEnviron = 16 << 20

// onDisplay says whether a process whose /proc/PID/environ reads env (or
// failed with err) runs on display name. byUID: the process belongs to the
// session's own user.
func onDisplay(env []string, err error, name string, byUID bool) bool {
	if byUID {
		// Unreadable (no CAP_SYS_PTRACE), no DISPLAY, or this display:
		// the session's. Only a process that names another display is
		// left, for a second deskenv that shares the user (a
		// misconfiguration, but not one to punish with kills).
		return err != nil || !slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, "DISPLAY=") }) || hasDisplay(env, name)
	}
	if err != nil || len(env) == 0 {
		return false // a zombie, or gone
	}
	return hasDisplay(env, name)
}

// hasDisplay reports whether an environment says DISPLAY=name.
func hasDisplay(env []string, name string) bool {
	return slices.Contains(env, "DISPLAY="+name) || slices.Contains(env, "DISPLAY="+name+".0")
}

// descendants are all processes below pid in the process tree.
func descendants(pid int) map[int]bool {
	pfs := proc.Default()
	children := map[int][]int{}
	all, _ := pfs.PIDs(context.Background())
	for _, p := range all {
		if st, err := pfs.Stat(p); err == nil && st.PPID > 0 {
			children[st.PPID] = append(children[st.PPID], p)
		}
	}
	out := map[int]bool{}
	var walk func(int)
	walk = func(p int) {
		for _, c := range children[p] {
			if !out[c] {
				out[c] = true
				walk(c)
			}
		}
	}
	walk(pid)
	return out
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	st, err := proc.Default().Stat(pid)
	return err == nil && !st.Dead()
}

// waitGone waits until none of pids is alive, or ctx ends. It sleeps in
// poll(2) on pidfds, which wake it when a process exits, rather than on a
// fixed interval; where pidfds are missing (before Linux 5.3) it looks again
// every 5 ms.
func waitGone(ctx context.Context, pids []int) error {
	var fds []unix.PollFd
	for _, p := range pids {
		fd, err := unix.PidfdOpen(p, 0)
		if err != nil {
			continue // gone already, or no pidfds: the interval covers it
		}
		defer unix.Close(fd)
		fds = append(fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
	}
	for {
		left := 0
		for _, p := range pids {
			if alive(p) {
				left++
			}
		}
		if left == 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("wait for the killed processes: %d still running after SIGKILL: %w", left, err)
		}
		wait := 5 * time.Millisecond
		if len(fds) == left {
			wait = 50 * time.Millisecond // each exit wakes the poll
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			wait = max(time.Until(dl), 0)
		}
		if len(fds) > 0 {
			unix.Poll(fds, int(wait/time.Millisecond)+1)
			// A pidfd stays readable once its process has exited: only
			// those still running are polled again.
			fds = slices.DeleteFunc(fds, func(f unix.PollFd) bool { return f.Revents != 0 })
		} else {
			time.Sleep(wait)
		}
	}
}
