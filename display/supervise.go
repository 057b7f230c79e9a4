package display

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"syscall"
	"time"
)

// Supervision. The window manager and the session apps are restarted when
// they die on their own, with a backoff that grows while they keep dying
// soon after starting, and every such death (and every death of the X
// server) is kept in a short log that /health serves. A process this
// package stops itself (a reset restarting the session, an X server
// restart, Close) is not restarted and not logged: a process is restarted
// only while it is still part of d.session, and every way of stopping the
// session takes it out of there before signalling it.
//
// The window manager is restarted whatever its exit status: the desktop is
// unusable without it. An app is restarted when it fails (a signal, a
// non-zero status); one that exits with status 0 was closed (someone typed
// exit in the xterm) or was a one-shot, and stays closed until the next
// reset starts the session again.

// Roles of supervised processes, as Exit.Role and Process.Role say them.
const (
	RoleServer        = "x server"
	RoleWindowManager = "window manager"
	RoleApp           = "app"
)

const (
	// maxExits is how many deaths the log keeps, newest last.
	maxExits = 32
	// firstBackoff is the wait before the first restart; it doubles with
	// each further death soon after a start, up to maxBackoff.
	firstBackoff = 250 * time.Millisecond
	maxBackoff   = 30 * time.Second
	// stableRun is how long a process must have run for its death to
	// count as a new fault rather than one more of a crash loop.
	stableRun = 30 * time.Second
	// wmGrace is how long the window manager may be down (while it is
	// restarted) before the session counts as unhealthy.
	wmGrace = 2 * time.Second
	// crashLoop is how many deaths in a row soon after a start make the
	// window manager unhealthy even when it is up at the moment.
	crashLoop = 5
)

// Exit is one death of a supervised process: the X server, the window
// manager or a session app.
type Exit struct {
	// Process is the program's name, e.g. "openbox", "xterm", "Xvfb".
	Process string `json:"process"`
	// Role is RoleServer, RoleWindowManager or RoleApp.
	Role string `json:"role"`
	PID  int    `json:"pid"`
	// Exited is how it ended, as the OS tells it: "signal: killed",
	// "exit status 1".
	Exited string    `json:"exited"`
	At     time.Time `json:"at"`
	// Restarted says whether a new process took its place; NewPID is that
	// process, RestartedAt when it started.
	Restarted   bool       `json:"restarted"`
	NewPID      int        `json:"new_pid,omitempty"`
	RestartedAt *time.Time `json:"restarted_at,omitempty"`
	// Error says why it was not restarted, or why the restart failed.
	Error string `json:"error,omitempty"`
}

// Process is one supervised session process as it is now.
type Process struct {
	Process string    `json:"process"`
	Role    string    `json:"role"`
	PID     int       `json:"pid"`
	Running bool      `json:"running"`
	Since   time.Time `json:"since"` // when it started, or when it died
}

// supervision is the log of deaths; it lives in Display, under d.mu.
type supervision struct {
	exits []*Exit
}

// slot is one place in the session (the window manager, or one app) and
// how its restarts have gone; a process and its replacements share it.
type slot struct {
	role string
	argv []string
	// quickDeaths counts deaths in a row, each soon after a start.
	quickDeaths int
}

// note appends e to the log and returns it, for the caller to fill in
// once a restart has been tried. d.mu must be held.
func (s *supervision) note(e Exit) *Exit {
	p := &e
	s.exits = append(s.exits, p)
	if len(s.exits) > maxExits {
		s.exits = slices.Delete(s.exits, 0, len(s.exits)-maxExits)
	}
	return p
}

// Exits are the supervised processes' deaths (at most the last 32), oldest
// first: what died, when, how, and whether it came back.
func (d *Display) Exits() []Exit {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]Exit, len(d.sup.exits))
	for i, e := range d.sup.exits {
		out[i] = *e
	}
	return out
}

// LastServerExit is the X server's last death, or nil if it never died.
func (d *Display) LastServerExit() *Exit {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := len(d.sup.exits) - 1; i >= 0; i-- {
		if d.sup.exits[i].Role == RoleServer {
			e := *d.sup.exits[i]
			return &e
		}
	}
	return nil
}

// Processes lists the window manager and the session apps: which runs, and
// which is dead (waiting for its restart, or not restarted).
func (d *Display) Processes() []Process {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]Process, 0, len(d.session))
	for _, c := range d.session {
		p := Process{Process: c.name(), Role: c.role(), PID: c.cmd.Process.Pid, Running: !c.exited(), Since: c.started}
		if !p.Running && !c.diedAt.IsZero() {
			p.Since = c.diedAt
		}
		out = append(out, p)
	}
	return out
}

// SessionHealth is nil while the session's window manager is up. It is an
// error, saying what died and when, once the window manager has been down
// for longer than its restart takes, or keeps dying right after each
// restart. Apps that died are reported by Exits and Processes, not here:
// the desktop still works without them.
func (d *Display) SessionHealth() error {
	if !d.Owned() {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed || d.conn == nil {
		return nil // Health says what is wrong with the server
	}
	for _, c := range d.session {
		if c.role() != RoleWindowManager {
			continue
		}
		if c.exited() && !c.diedAt.IsZero() && time.Since(c.diedAt) > wmGrace {
			msg := fmt.Sprintf("the window manager %s (pid %d) died at %s (%s) and has not come back", c.name(), c.cmd.Process.Pid,
				c.diedAt.Format(time.RFC3339), exitState(c))
			if c.lastErr != "" {
				msg += ": " + c.lastErr
			}
			return errors.New(msg)
		}
		if c.slot.quickDeaths >= crashLoop {
			return fmt.Errorf("the window manager %s keeps dying right after it starts (%d times in a row); deskenv restarts it with a growing delay",
				c.name(), c.slot.quickDeaths)
		}
	}
	return nil
}

// spawnSupervised starts argv as part of the session in the given slot.
// The caller puts it into d.session and only then starts supervise, so a
// process that dies at once is not mistaken for one this package stopped.
func (d *Display) spawnSupervised(s *slot) (*child, error) {
	c, err := d.spawn(s.argv)
	if err != nil {
		return nil, err
	}
	c.slot = s
	c.started = time.Now()
	return c, nil
}

// newSlot is a fresh slot for a session process.
func newSlot(role string, argv []string) *slot {
	return &slot{role: role, argv: argv}
}

// supervise waits for c to exit and, when nobody asked it to, restarts it
// after a backoff, trying again (with a longer wait each time) while the
// restart fails.
func (d *Display) supervise(c *child) {
	select {
	case <-c.done:
	case <-d.stop:
		return
	}
	died := time.Now()
	s, ok := d.noteDeath(c, died)
	if !ok {
		return // stopped by this package
	}
	if s.role == RoleApp && c.cmd.ProcessState != nil && c.cmd.ProcessState.Success() {
		d.appClosed(c, died)
		return
	}
	d.restart(c, died)
}

// noteDeath records when c died and counts the deaths of its slot soon
// after a start; ok is false when c is no longer part of the session.
func (d *Display) noteDeath(c *child, died time.Time) (s *slot, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c.diedAt = died
	if !d.inSession(c) {
		return nil, false
	}
	s = c.slot
	if died.Sub(c.started) < stableRun {
		s.quickDeaths++
	} else {
		s.quickDeaths = 1
	}
	return s, true
}

// appClosed logs an app that exited with status 0: it was closed, and stays
// so until the next reset.
func (d *Display) appClosed(c *child, died time.Time) {
	pid := c.cmd.Process.Pid
	d.log.Info("session app exited", "process", c.name(), "pid", pid)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.inSession(c) {
		d.sup.note(Exit{Process: c.name(), Role: c.slot.role, PID: pid, Exited: exitState(c), At: died,
			Error: "exited normally (status 0): an app is restarted only when it fails; the next reset starts it again"})
	}
}

// restart brings a process of the session that died back, after a backoff,
// until a restart works or the process is no longer the session's.
func (d *Display) restart(c *child, died time.Time) {
	s, pid, state := c.slot, c.cmd.Process.Pid, exitState(c)
	var e *Exit
	for attempt := 0; ; attempt++ {
		d.mu.Lock()
		wait := min(firstBackoff<<min(s.quickDeaths-1, 8), maxBackoff)
		d.mu.Unlock()
		if attempt == 0 {
			d.log.Warn("session process died; restarting it", "process", c.name(), "role", s.role, "pid", pid, "state", state, "in", wait)
		}
		// The wait also lets an X server that died take its session down
		// first: then the server's restart brings the whole session back,
		// and this death is not the process's own.
		select {
		case <-time.After(wait):
		case <-d.stop:
			return
		}
		if e = d.noteRestart(c, e, died); e == nil {
			return
		}
		n, err := d.spawnSupervised(s)
		if err != nil {
			d.restartFailed(c, e, attempt, err)
			continue
		}
		d.replace(c, n, e)
		return
	}
}

// noteRestart logs c's death once a restart is about to be tried (e, when
// an earlier attempt logged it already). It returns nil when c is not to be
// restarted: it left the session, or the display or its server is gone.
func (d *Display) noteRestart(c *child, e *Exit, died time.Time) *Exit {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.inSession(c) || d.closed || d.conn == nil || d.serverExited() {
		return nil
	}
	if e == nil {
		e = d.sup.note(Exit{Process: c.name(), Role: c.slot.role, PID: c.cmd.Process.Pid, Exited: exitState(c), At: died})
	}
	return e
}

// restartFailed records why a restart of c failed.
func (d *Display) restartFailed(c *child, e *Exit, attempt int, err error) {
	d.mu.Lock()
	c.slot.quickDeaths++ // so the health check sees a window manager that cannot start
	e.Error = fmt.Sprintf("restart failed (attempt %d): %v", attempt+1, err)
	c.lastErr = e.Error
	d.mu.Unlock()
	d.log.Error("session process could not be restarted", "process", c.name(), "attempt", attempt+1, "err", err)
}

// replace puts n in c's place in the session and supervises it, unless the
// session was stopped while n started: then n is killed.
func (d *Display) replace(c, n *child, e *Exit) {
	d.mu.Lock()
	i := slices.Index(d.session, c)
	if i < 0 || d.closed {
		e.Error = "the session was stopped while the process restarted"
		d.mu.Unlock()
		killGroup(n, syscall.SIGKILL)
		return
	}
	d.session[i] = n
	now := time.Now()
	e.Restarted, e.NewPID, e.RestartedAt, e.Error = true, n.cmd.Process.Pid, &now, ""
	d.mu.Unlock()
	go d.supervise(n)
	d.log.Warn("session process restarted", "process", n.name(), "pid", n.cmd.Process.Pid, "was", c.cmd.Process.Pid)
}

// inSession reports whether c is still one of the session's processes.
// d.mu must be held.
func (d *Display) inSession(c *child) bool { return slices.Contains(d.session, c) }

// serverExited reports whether the X server process has exited. d.mu must
// be held.
func (d *Display) serverExited() bool {
	if d.xvfbDone == nil {
		return false
	}
	select {
	case <-d.xvfbDone:
		return true
	default:
		return false
	}
}

// noteServerExit logs the X server's death; the caller fills in the
// restart. d.mu must be held.
func (d *Display) noteServerExit(pid int, state string) *Exit {
	return d.sup.note(Exit{Process: filepath.Base(d.cfg.Xvfb), Role: RoleServer, PID: pid, Exited: state, At: time.Now()})
}

// noteServerRestart records how the X server's restart after e went.
func (d *Display) noteServerRestart(e *Exit, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		e.Error = fmt.Sprintf("restart failed: %v", err)
		return
	}
	now := time.Now()
	e.Restarted, e.RestartedAt, e.Error = true, &now, ""
	if d.xvfb != nil && d.xvfb.Process != nil {
		e.NewPID = d.xvfb.Process.Pid
	}
}

// KillSession kills the session apps at once (SIGKILL to each process
// group) and forgets them, so none is restarted; it returns their process
// ids. A reset uses it before it kills whatever else runs on the desktop,
// then starts the session again.
//
// The panel is not the session's to kill: it stays, and stays supervised,
// while it is intact. The window manager stays too when keepWM and deskenv
// vouches for it (it saw it start and watches it); a reset then checks it
// with CheckWindowManager, once everything else is gone, and calls
// KillSession(false) when it is unfit.
func (d *Display) KillSession(keepWM bool) []int {
	keepPanel := d.panelIntact()
	d.mu.Lock()
	cmds, kept := splitSession(d.session, keepPanel, keepWM)
	d.session = kept
	d.mu.Unlock()
	pids := make([]int, 0, len(cmds))
	for _, c := range cmds {
		killGroup(c, syscall.SIGKILL)
		pids = append(pids, c.cmd.Process.Pid)
	}
	return pids
}

// splitSession splits the session's processes into those to stop and
// those kept: the panel when keepPanel, the window manager when keepWM
// and deskenv vouched for it (it saw it start and watches it).
func splitSession(session []*child, keepPanel, keepWM bool) (stop, kept []*child) {
	for _, c := range session {
		switch {
		case keepPanel && c.role() == RolePanel,
			keepWM && c.role() == RoleWindowManager && c.watch != nil && !c.exited():
			kept = append(kept, c)
		default:
			stop = append(stop, c)
		}
	}
	return stop, kept
}

func (c *child) name() string {
	if c.slot != nil && len(c.slot.argv) > 0 {
		return filepath.Base(c.slot.argv[0])
	}
	return filepath.Base(c.cmd.Path)
}

func (c *child) role() string {
	if c.slot == nil {
		return RoleApp
	}
	return c.slot.role
}

// exitState is how c ended, once it has.
func exitState(c *child) string {
	if c.cmd.ProcessState == nil {
		return "unknown state"
	}
	return c.cmd.ProcessState.String()
}
