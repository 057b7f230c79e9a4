package control

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"syscall"
	"time"

	"github.com/deskenv/deskenv/display"
	"github.com/jezek/xgb/xproto"
)

// desk puts one display back into its baseline state: no process of the
// session or of a task left, no window but the session's, the baseline home,
// empty selections.
type desk struct {
	d       *display.Display
	home    *Baseline // nil: home is not restored
	log     *slog.Logger
	windows []Window // the session's windows right after start
	// rootProps and pointer are the root window's properties and the
	// pointer position at the baseline.
	rootProps          map[xproto.Atom]rootProp
	pointerX, pointerY int16
	// windowWait bounds the wait for the session's windows to come back.
	windowWait time.Duration
}

// CleanStats says what one clean-up did and how long each part took.
type CleanStats struct {
	Kill             time.Duration `json:"kill_ns"`
	Home             time.Duration `json:"home_ns"`
	Clipboard        time.Duration `json:"clipboard_ns"`
	Session          time.Duration `json:"session_ns"`
	Windows          time.Duration `json:"windows_ns"`
	Touchup          time.Duration `json:"touchup_ns"`
	KilledProcesses  int           `json:"killed_processes"`
	KilledClients    int           `json:"killed_clients"`
	RootProps        int           `json:"root_props_restored"`
	HomeRestore      RestoreStats  `json:"home_restore"`
	TouchedUp        int           `json:"touched_up"`              // files the session rewrote unchanged at start, times put back
	SessionWrote     []string      `json:"session_wrote,omitempty"` // home entries the starting session changed or created
	WindowsMatched   bool          `json:"windows_matched"`
	WindowsAfter     []Window      `json:"windows_after,omitempty"`
	BaselineWindows  []Window      `json:"-"`
	SessionRestarted bool          `json:"session_restarted"`
}

// recordBaselineWindows waits for the session's windows to appear after
// start (at least one per configured app, then no change for a moment) and
// keeps them as what every reset must bring back.
func (k *desk) recordBaselineWindows(ctx context.Context) error {
	apps := 0
	for _, a := range k.d.Config().Apps {
		if len(a) > 0 {
			apps++
		}
	}
	if !k.d.Owned() {
		apps = 0
	}
	x, err := openX(k.d.Name())
	if err != nil {
		return err
	}
	defer x.Close()
	deadline := time.Now().Add(k.windowWait)
	const quiet = 300 * time.Millisecond
	var last string
	lastChange := time.Now()
	for {
		ws, err := x.windows()
		if err != nil {
			return err
		}
		key := classKey(ws)
		if key != last {
			last, lastChange = key, time.Now()
		}
		done := len(ws) >= apps && time.Since(lastChange) >= quiet
		if !done && time.Now().After(deadline) {
			k.log.Warn("the session's windows did not settle; keeping what is there as the baseline", "windows", key, "apps", apps)
			done = true
		}
		if done {
			k.windows = ws
			if k.rootProps, err = x.rootProps(); err != nil {
				return err
			}
			k.pointerX, k.pointerY, err = x.pointer()
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// clean kills everything that runs on the desktop, restores home, empties
// the selections, starts the session again and waits for its windows.
func (k *desk) clean(ctx context.Context) (CleanStats, error) {
	st := CleanStats{BaselineWindows: k.windows}
	t := time.Now()
	if err := k.kill(ctx, &st); err != nil {
		return st, err
	}
	st.Kill = time.Since(t)

	if k.home != nil {
		t = time.Now()
		rs, err := k.home.Restore(ctx)
		st.HomeRestore = rs
		st.Home = time.Since(t)
		if err != nil {
			return st, fmt.Errorf("restore home: %w", err)
		}
	}

	t = time.Now()
	x, err := openX(k.d.Name())
	if err != nil {
		return st, err
	}
	defer x.Close()
	if err := x.clearSelections(); err != nil {
		return st, err
	}
	// Before the session starts again, so the window manager finds its
	// baseline state (current desktop and so on) and apps the baseline X
	// resources.
	if k.rootProps != nil {
		n, err := x.restoreRootProps(k.rootProps)
		if err != nil {
			return st, fmt.Errorf("restore the root window's properties: %w", err)
		}
		st.RootProps = n
	}
	x.warp(k.pointerX, k.pointerY)
	st.Clipboard = time.Since(t)

	if k.d.Owned() {
		t = time.Now()
		if err := k.d.RestartSession(ctx); err != nil {
			return st, fmt.Errorf("restart the session: %w", err)
		}
		st.SessionRestarted = true
		st.Session = time.Since(t)
	}

	t = time.Now()
	ws, matched, err := k.waitWindows(ctx, x)
	st.Windows = time.Since(t)
	st.WindowsAfter, st.WindowsMatched = ws, matched
	if err != nil {
		return st, err
	}
	if !matched {
		k.log.Warn("after the reset the windows differ from the session's baseline", "want", classKey(k.windows), "got", classKey(ws))
	}
	if k.home != nil && st.SessionRestarted {
		t = time.Now()
		n, differ, err := k.home.Touchup(ctx)
		st.Touchup = time.Since(t)
		st.TouchedUp, st.SessionWrote = n, differ
		if err != nil {
			return st, fmt.Errorf("restore home after the session started: %w", err)
		}
	}
	return st, nil
}

// kill ends the session's process groups, every other process of this user
// running on the display, and every X client not in this process.
func (k *desk) kill(ctx context.Context, st *CleanStats) error {
	owned := k.d.Owned()
	self := os.Getpid()
	var killed []int
	if owned {
		// Through the display, so its supervision knows these deaths are
		// the reset's and does not restart them.
		killed = append(killed, k.d.KillSession()...)
	}
	skip := map[int]bool{}
	if sp := k.d.ServerPID(); sp > 0 {
		// The X server, and the xkbcomp it runs now and then.
		skip[sp] = true
		for p := range descendants(sp) {
			skip[p] = true
		}
	}
	var mine map[int]bool
	if !owned {
		// On a display someone else runs, only what we started goes.
		mine = descendants(self)
	}
	sessionUID := -1
	if c := k.d.Credential(); c != nil {
		sessionUID = int(c.Uid)
	}
	for _, pid := range desktopProcesses(k.d.Name(), sessionUID, skip) {
		if mine != nil && !mine[pid] {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed = append(killed, pid)
		}
	}
	st.KilledProcesses = len(killed)

	x, err := openX(k.d.Name())
	if err != nil {
		return err
	}
	defer x.Close()
	keep := func(pid int) bool {
		if pid == self {
			return true
		}
		if owned {
			return false
		}
		return pid == 0 || !mine[pid]
	}
	n, err := x.killClients(keep)
	if err != nil {
		k.log.Warn("cannot list X clients; windows of processes not found by their environment may survive the reset", "err", err)
	}
	st.KilledClients += n

	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := waitGone(wctx, killed); err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			return ctx.Err()
		}
		k.log.Warn("reset: processes survive SIGKILL", "err", err)
	}
	// Anything that connected while the others were dying.
	if n, err := x.killClients(keep); err == nil {
		st.KilledClients += n
	}
	return nil
}

// waitWindows waits until the top-level windows are the baseline's again
// (same WM_CLASS multiset), up to windowWait.
func (k *desk) waitWindows(ctx context.Context, x *xsession) ([]Window, bool, error) {
	want := classKey(k.windows)
	deadline := time.Now().Add(k.windowWait)
	for {
		ws, err := x.windows()
		if err != nil {
			return nil, false, err
		}
		if classKey(ws) == want {
			return ws, true, nil
		}
		if time.Now().After(deadline) {
			return ws, false, nil
		}
		select {
		case <-ctx.Done():
			return ws, false, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}
