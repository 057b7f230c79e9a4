// Package baseline is the desktop's clean state, captured once and restored
// on every reset: the session's windows, the root window's properties and the
// pointer (X state), and a copy of the desktop user's home. Restore puts a
// display back into it: it kills the processes and X clients of the session
// and of whatever a task or an agent started, restores home, empties the
// selections, puts the root window's properties and the pointer back,
// restarts the session and waits for its windows, and reports what it did
// and how long each part took.
//
// The control plane (package control) calls it on every reset; it knows
// nothing of episodes or tasks.
//
// Errors follow one rule, as in package control: an error that wraps another
// starts with the operation that failed, in lower case ("restore home: ...",
// "list X clients: ..."); the innermost says what is wrong and, where it
// helps, what to do ("home directory is empty: set the desktop user's home
// (--home)"); none ends with a period.
package baseline

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/jezek/xgb/xproto"

	"github.com/deskenv/deskenv/display"
)

// Config says what a baseline covers.
type Config struct {
	// Home is the desktop user's home directory, restored on every reset;
	// empty means the display's Config().Home.
	Home string
	// Dir holds the copy of Home; empty means a temporary directory removed
	// by Close. When it already holds files they are the baseline (an image
	// can ship one).
	Dir string
	// NoHome leaves home alone on restore.
	NoHome bool
	// WindowWait bounds the wait for the session's windows, at capture and
	// after every restore (default 10s).
	WindowWait time.Duration
	Logger     *slog.Logger
}

// Desktop is one display's clean state and what restoring it takes: no
// process of the session or of a task left, no window but the session's, the
// baseline home, empty selections, the root window's properties and the
// pointer as they were.
type Desktop struct {
	d       *display.Display
	home    *Home // nil: home is not restored
	tmpDir  string
	log     *slog.Logger
	windows []Window // the session's windows right after start
	// rootProps and pointer are the root window's properties and the
	// pointer position at capture.
	rootProps          map[xproto.Atom]rootProp
	pointerX, pointerY int16
	// windowWait bounds the wait for the session's windows to come back.
	windowWait time.Duration
}

// Report says what one restore did and how long each part took.
type Report struct {
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
	// WindowManagerKept: the window manager ran on, checked, instead of
	// being restarted; WindowManagerWhy says why it was not (empty when
	// kept or when there is none to keep). WindowManagerReconfigure: the
	// agent made it reread its configuration, so the reset did again
	// after restoring home.
	WindowManagerKept        bool   `json:"window_manager_kept"`
	WindowManagerWhy         string `json:"window_manager_restarted_because,omitempty"`
	WindowManagerReconfigure bool   `json:"window_manager_reconfigured,omitempty"`
	// WindowManagerState counts the EWMH requests (number of desktops,
	// current desktop, showing the desktop) that put a kept window
	// manager's state back.
	WindowManagerState int `json:"window_manager_state_restored,omitempty"`
	// wmWindow is the window with which the kept window manager owns its
	// selection.
	wmWindow xproto.Window
}

// Capture records the clean state of d: it waits for the session's windows
// (so call it once the desktop has started), keeps them, the root window's
// properties and the pointer, then takes the home baseline unless
// cfg.NoHome.
func Capture(ctx context.Context, d *display.Display, cfg Config) (*Desktop, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.WindowWait <= 0 {
		cfg.WindowWait = 10 * time.Second
	}
	if cfg.Home == "" {
		cfg.Home = d.Config().Home
	}
	b := &Desktop{d: d, log: cfg.Logger, windowWait: cfg.WindowWait}
	if err := b.captureX(ctx); err != nil {
		return nil, fmt.Errorf("record the session's windows: %w", err)
	}
	if cfg.NoHome {
		return b, nil
	}
	home, st, err := NewHome(ctx, cfg.Home, cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("home baseline: %w", err)
	}
	if cfg.Dir == "" {
		// The temporary directory the baseline sits in.
		b.tmpDir = filepath.Dir(home.Dir())
	}
	b.home = home
	b.log.Info("home baseline taken", "home", cfg.Home, "baseline", home.Dir(), "files", st.Files, "dirs", st.Dirs,
		"bytes", st.Bytes, "skipped", st.Skipped, "took", st.Took)
	return b, nil
}

// Home is the home baseline, nil when home is not restored.
func (b *Desktop) Home() *Home { return b.home }

// Windows are the session's windows that every restore brings back.
func (b *Desktop) Windows() []Window { return append([]Window(nil), b.windows...) }

// Close removes a baseline taken into a temporary directory. The desktop
// stays as it is.
func (b *Desktop) Close() error {
	if b.tmpDir == "" {
		return nil
	}
	if err := os.RemoveAll(b.tmpDir); err != nil {
		return fmt.Errorf("remove the home baseline: %w", err)
	}
	return nil
}

// captureX waits for the session's windows to appear after start (at least
// one per configured app, then no change for a moment) and keeps them, the
// root window's properties and the pointer as what every restore brings
// back.
func (b *Desktop) captureX(ctx context.Context) error {
	x, err := openX(b.d.Name())
	if err != nil {
		return err
	}
	defer x.Close()
	ws, err := b.settledWindows(ctx, x)
	if err != nil {
		return err
	}
	b.windows = ws
	if b.rootProps, err = x.rootProps(); err != nil {
		return err
	}
	b.pointerX, b.pointerY, err = x.pointer()
	return err
}

// settledWindows waits until there is a window per configured app and the
// list has not changed for a moment, or windowWait has passed.
func (b *Desktop) settledWindows(ctx context.Context, x *xsession) ([]Window, error) {
	apps := b.expectedApps()
	deadline := time.Now().Add(b.windowWait)
	const quiet = 300 * time.Millisecond
	var last string
	lastChange := time.Now()
	for {
		ws, err := x.windows()
		if err != nil {
			return nil, err
		}
		if key := ClassKey(ws); key != last {
			last, lastChange = key, time.Now()
		}
		if len(ws) >= apps && time.Since(lastChange) >= quiet {
			return ws, nil
		}
		if time.Now().After(deadline) {
			b.log.Warn("the session's windows did not settle; keeping what is there as the baseline", "windows", last, "apps", apps)
			return ws, nil
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// expectedApps is how many windows the session should have: one per
// configured app, none on a display someone else runs.
func (b *Desktop) expectedApps() int {
	if !b.d.Owned() {
		return 0
	}
	apps := 0
	for _, a := range b.d.Config().Apps {
		if len(a) > 0 {
			apps++
		}
	}
	if len(b.d.Config().Panel) > 0 {
		apps++ // the panel's window
	}
	return apps
}

// Restore kills everything that runs on the desktop, restores home, empties
// the selections, puts the root window's properties and the pointer back,
// starts the session again and waits for its windows.
func (b *Desktop) Restore(ctx context.Context) (Report, error) {
	rep := Report{BaselineWindows: b.windows}
	// One X connection for the whole restore: each dial costs a connection
	// set-up and a round trip per extension.
	start := time.Now()
	x, err := openX(b.d.Name())
	if err != nil {
		rep.Kill = time.Since(start)
		return rep, err
	}
	defer x.Close()
	steps := []struct {
		took *time.Duration
		run  func(context.Context, *xsession, *Report) error
	}{
		{&rep.Kill, b.kill},
		{&rep.Home, b.restoreHome},
		{&rep.Clipboard, b.restoreX},
		{&rep.Session, b.restartSession},
		{&rep.Windows, b.waitWindows},
		{&rep.Touchup, b.touchupHome},
	}
	for _, s := range steps {
		err := s.run(ctx, x, &rep)
		*s.took = time.Since(start)
		start = time.Now()
		if err != nil {
			return rep, err
		}
	}
	return rep, nil
}

func (b *Desktop) restoreHome(ctx context.Context, _ *xsession, rep *Report) error {
	if b.home == nil {
		return nil
	}
	rs, err := b.home.Restore(ctx)
	rep.HomeRestore = rs
	if err != nil {
		return fmt.Errorf("restore home: %w", err)
	}
	return nil
}

// restoreX empties the selections and puts the root window's properties and
// the pointer back. It runs before the session starts again, so a window
// manager that starts finds its baseline state (current desktop and so on)
// and apps the baseline X resources. A window manager that was kept is
// asked to put its own state back (restoreWM) instead, and its live
// properties are left to it.
func (b *Desktop) restoreX(ctx context.Context, x *xsession, rep *Report) error {
	if err := x.clearSelections(); err != nil {
		return err
	}
	want := b.rootProps
	var live map[xproto.Atom]bool
	if rep.WindowManagerKept && want != nil {
		n, err := b.restoreWM(ctx, x, rep.wmWindow)
		rep.WindowManagerState = n
		if err != nil {
			// Restart it as before; the properties it would have set
			// are written back below and read by the new one.
			rep.WindowManagerKept, rep.WindowManagerReconfigure, rep.WindowManagerWhy = false, false, err.Error()
			b.log.Info("reset: restarting the window manager", "why", err)
			if err := b.waitGone(ctx, b.d.KillSession(false)); err != nil {
				return err
			}
			x.killClients(keepClient(true, nil, b.d.PanelPIDs()))
		} else {
			live = x.liveAtoms()
		}
	}
	if want != nil {
		n, err := x.restoreRootProps(want, live)
		if err != nil {
			return fmt.Errorf("restore the root window's properties: %w", err)
		}
		rep.RootProps = n
	}
	x.warp(b.pointerX, b.pointerY)
	return nil
}

// restartSession starts the window manager (unless it was kept) and the
// session's apps again on a display deskenv runs; a kept window manager
// the agent had reconfigure reads its configuration again first, now that
// home is the baseline's.
func (b *Desktop) restartSession(ctx context.Context, _ *xsession, rep *Report) error {
	if !b.d.Owned() {
		return nil
	}
	if rep.WindowManagerReconfigure {
		if err := b.d.ReconfigureWindowManager(ctx); err != nil {
			rep.WindowManagerKept, rep.WindowManagerWhy = false, err.Error()
			b.log.Info("reset: restarting the window manager", "why", err)
			if err := b.waitGone(ctx, b.d.KillSession(false)); err != nil {
				return err
			}
		}
	}
	// KillSession left only what is kept; StartSession starts the rest.
	if err := b.d.StartSession(ctx); err != nil {
		return fmt.Errorf("restart the session: %w", err)
	}
	rep.SessionRestarted = true
	return nil
}

// waitWindows waits until the top-level windows are the baseline's again
// (same WM_CLASS multiset), up to windowWait; windows that differ then are
// logged, not an error.
func (b *Desktop) waitWindows(ctx context.Context, x *xsession, rep *Report) error {
	ws, matched, err := x.waitWindows(ctx, b.windows, b.windowWait)
	rep.WindowsAfter, rep.WindowsMatched = ws, matched
	if err != nil {
		return err
	}
	if !matched {
		b.log.Warn("after the reset the windows differ from the session's baseline", "want", ClassKey(b.windows), "got", ClassKey(ws))
	}
	return nil
}

// touchupHome puts back the times of files the restarted session rewrote
// unchanged.
func (b *Desktop) touchupHome(ctx context.Context, _ *xsession, rep *Report) error {
	if b.home == nil || !rep.SessionRestarted {
		return nil
	}
	n, differ, err := b.home.Touchup(ctx)
	rep.TouchedUp, rep.SessionWrote = n, differ
	if err != nil {
		return fmt.Errorf("restore home after the session started: %w", err)
	}
	return nil
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
