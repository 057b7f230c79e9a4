// Package display owns one X display: it starts Xvfb, a window manager and the
// session apps as child processes (or attaches to a display that already runs),
// watches the server's health and brings it back when it dies. Other packages
// reach X through it: a Follower is a connection of their own that follows the
// server across restarts (input, capture, the stream, task checks), DialContext
// a short-lived one (a reset).
//
// Everything that touches X hangs off a *Display, so one process can serve many
// displays; there is no package-level state.
package display

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/randr"
	"github.com/jezek/xgb/xproto"

	"github.com/deskenv/deskenv/internal/xext"
)

// Config says which display to own and what runs on it. The zero value is
// usable: a 1280x800x24 Xvfb on the first free display number, openbox and an
// xterm.
type Config struct {
	// Attach names an existing display (":0", "localhost:1"). When set, no Xvfb,
	// window manager or apps are started and the geometry is the server's.
	Attach string

	// Width, Height and Depth of the Xvfb screen. Zero means 1280, 800, 24.
	Width, Height, Depth int

	// Number is the display number to use; zero or less lets Xvfb pick a free
	// one, so tests and pools never collide with each other or the user's desktop.
	Number int

	// Xvfb is the server binary; empty means "Xvfb" on $PATH.
	Xvfb string

	// WindowManager is the command line of the window manager. nil means
	// openbox; an empty non-nil slice means none.
	WindowManager []string

	// Apps are the session apps started after the window manager. nil means one
	// xterm; an empty non-nil slice means none.
	Apps [][]string

	// Session is SessionDesktop or SessionBare ("" is bare): the desktop
	// session adds a panel (Panel), a wallpaper and the home skeleton
	// (session.go) to the window manager and Apps.
	Session string

	// Panel is the command line of the desktop's panel. nil means tint2
	// with deskenv's configuration in the desktop session and none in the
	// bare one; an empty non-nil slice means none. The panel is part of the desktop itself: restarted
	// whenever it dies, and kept running across RestartSession and
	// KillSession (a reset), so it is one process for the desktop's life.
	Panel []string

	// Home is the desktop user's home directory, given to the session as $HOME.
	// Empty means the current $HOME.
	Home string

	// Env is added to the environment of the window manager and apps.
	Env []string

	// Animations lets GTK applications animate (fades, spinners, tabs
	// sliding open) and blink their text cursors. Off, the session is told
	// the desktop prefers neither (toolkit.go), so a settle is not
	// stretched by them and a screenshot is not taken halfway through one.
	Animations bool

	// Credential, when set, is the user the session runs as: the window
	// manager, the apps, and whatever Env and SysProcAttr are used for. It
	// keeps the session away from this process's own files and signals
	// (the user that owns deskenv's state must not be the session's). nil
	// means this process's user. Supplementary groups are those given:
	// none when Groups is empty.
	Credential *syscall.Credential

	// User is the session user's name, put in $USER and $LOGNAME; empty
	// leaves them as this process has them.
	User string

	// Logger receives lifecycle messages; nil means slog.Default().
	Logger *slog.Logger

	// RestartOnCrash brings Xvfb (and the session) back when it dies. Tests and
	// short-lived tools may leave it off; the appliance turns it on.
	RestartOnCrash bool
}

func (c *Config) defaults() {
	if c.Width <= 0 {
		c.Width = 1280
	}
	if c.Height <= 0 {
		c.Height = 800
	}
	if c.Depth <= 0 {
		c.Depth = 24
	}
	if c.Xvfb == "" {
		c.Xvfb = "Xvfb"
	}
	if c.WindowManager == nil {
		c.WindowManager = []string{"openbox"}
	}
	if c.Apps == nil {
		c.Apps = [][]string{{"xterm"}}
	}
	if c.Panel == nil && (c.Session != SessionDesktop || c.Attach != "") {
		c.Panel = []string{} // the desktop's tint2 is set up by Start
	}
	if c.Home == "" {
		c.Home = os.Getenv("HOME")
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Display is a handle on one X display. Its methods are safe for concurrent use.
type Display struct {
	cfg  Config
	name string
	log  *slog.Logger

	mu         sync.Mutex
	conn       *xgb.Conn
	screen     xproto.ScreenInfo
	generation uint64
	xvfb       *exec.Cmd
	xvfbDone   chan struct{}
	session    []*child
	lockFile   string
	closed     bool
	lastErr    error
	restarts   int
	changed    chan struct{}
	// auth is the display's X cookie and its files; nil on an attached
	// display, whose access control is its owner's business.
	auth *xauth
	num  int
	// sup logs the deaths of the server and the session (supervise.go).
	sup supervision
	// wmPinned: the window manager reads deskenv's configuration only
	// (wm.go), so a reset may keep it.
	wmPinned bool

	stop     chan struct{}
	watchers sync.WaitGroup
}

// Start starts (or attaches to) the display described by cfg and returns once
// an X connection is open and the session has been launched.
func Start(ctx context.Context, cfg Config) (*Display, error) {
	switch cfg.Session {
	case "", SessionBare, SessionDesktop:
	default:
		return nil, fmt.Errorf("unknown session %q: use %q or %q", cfg.Session, SessionDesktop, SessionBare)
	}
	// The skeleton goes only into a home that was named: never into the
	// $HOME of whoever runs this.
	if cfg.Session == SessionDesktop && cfg.Attach == "" && cfg.Home != "" {
		if err := writeSkeleton(cfg.Home, cfg.Credential); err != nil {
			return nil, err
		}
	}
	cfg.defaults()
	d := &Display{cfg: cfg, log: cfg.Logger, stop: make(chan struct{}), changed: make(chan struct{})}
	if cfg.Attach != "" {
		d.name = cfg.Attach
		conn, err := dialWait(ctx, d.name, 0, nil)
		if err != nil {
			return nil, fmt.Errorf("attach to display %s: %w", d.name, err)
		}
		d.setConn(conn)
		d.log = d.log.With("display", d.name)
		d.log.Info("attached to display", "width", d.screen.WidthInPixels, "height", d.screen.HeightInPixels)
		return d, nil
	}
	if cfg.Width < 64 || cfg.Height < 64 || cfg.Width > 8192 || cfg.Height > 8192 {
		return nil, fmt.Errorf("display size %dx%d is out of range: width and height must be between 64 and 8192", cfg.Width, cfg.Height)
	}
	switch cfg.Depth {
	case 16, 24:
	default:
		return nil, fmt.Errorf("display depth %d is not supported: use 24 (or 16)", cfg.Depth)
	}
	if _, err := exec.LookPath(cfg.Xvfb); err != nil {
		return nil, fmt.Errorf("cannot find the X server %q (install the xvfb package, or run scripts/install-deps.sh): %w", cfg.Xvfb, err)
	}
	auth, err := newXauth(cfg.Credential)
	if err != nil {
		return nil, err
	}
	d.auth, d.num = auth, -1
	if d.cfg.Panel == nil {
		if d.cfg.Panel, err = writePanel(auth.dir); err != nil {
			auth.close(d.num)
			return nil, err
		}
	}
	if !d.cfg.Animations {
		if err := writeToolkitSettings(auth.dir); err != nil {
			auth.close(d.num)
			return nil, err
		}
	}
	if len(d.cfg.WindowManager) == 1 && d.cfg.WindowManager[0] == "openbox" {
		if argv, err := pinWindowManager(auth.dir); err != nil {
			d.log.Warn("cannot pin the window manager's configuration; every reset restarts it", "err", err)
		} else {
			d.cfg.WindowManager, d.wmPinned = argv, true
		}
	}
	if err := d.startServer(ctx); err != nil {
		auth.close(d.num)
		return nil, err
	}
	d.log = d.log.With("display", d.name)
	if err := d.StartSession(ctx); err != nil {
		d.Close()
		return nil, err
	}
	d.log.Info("display started", "width", cfg.Width, "height", cfg.Height, "depth", cfg.Depth)
	return d, nil
}

// Name is the display name, such as ":51", as put in $DISPLAY.
func (d *Display) Name() string { return d.name }

// Config returns the configuration the display runs with, defaults filled in.
func (d *Display) Config() Config { return d.cfg }

// Logger is the display's logger, tagged with its name.
func (d *Display) Logger() *slog.Logger { return d.log }

// Conn is the display's shared X connection, for quick questions (health,
// geometry). It is replaced when the server is restarted; a package that reads
// events or keeps server-side resources (SHM segments, keymaps) uses a
// Follower of its own instead.
func (d *Display) Conn() *xgb.Conn {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.conn
}

// Generation counts X server (re)connections; it changes whenever Conn does.
func (d *Display) Generation() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.generation
}

// Changed returns a channel closed at the next change of Generation.
func (d *Display) Changed() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.changed
}

// Screen returns the root screen of the current connection.
func (d *Display) Screen() xproto.ScreenInfo {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.screen
}

// Root is the root window.
func (d *Display) Root() xproto.Window { return d.Screen().Root }

// Size is the screen size in pixels.
func (d *Display) Size() (width, height int) {
	s := d.Screen()
	return int(s.WidthInPixels), int(s.HeightInPixels)
}

// Env is the environment for a program that should run on this desktop: the
// process environment with DISPLAY and HOME set, plus Config.Env. DESKENV_*
// variables are left out: they configure the appliance and carry its tokens,
// which the agent, working in this session, must never see.
//
// On a display this handle started, XAUTHORITY names the session's own copy
// of the display's cookie. When the session runs as another user, the
// variables that describe this process's user (USER, LOGNAME, MAIL,
// XDG_RUNTIME_DIR) are replaced or left out.
func (d *Display) Env() []string {
	drop := []string{"DISPLAY", "HOME"}
	if d.auth != nil {
		drop = append(drop, "XAUTHORITY")
	}
	if d.cfg.Credential != nil || d.cfg.User != "" {
		drop = append(drop, "USER", "LOGNAME", "MAIL", "XDG_RUNTIME_DIR")
	}
	// toolkit: Start wrote the toolkit settings into the display's own
	// directory (only a display this handle started has one, and only when
	// animations are off). One test for both the drop and the set below, so
	// the inherited XDG_CONFIG_DIRS is left out exactly when ours replaces
	// it: never two of them in the environment, never the settings lost.
	toolkit := d.auth != nil && !d.cfg.Animations
	if toolkit {
		drop = append(drop, "XDG_CONFIG_DIRS")
	}
	base := envWithout(withoutDeskenv(os.Environ()), drop...)
	env := make([]string, 0, len(base)+len(d.cfg.Env)+6)
	env = append(env, base...)
	env = append(env, "DISPLAY="+d.name)
	if d.cfg.Home != "" {
		env = append(env, "HOME="+d.cfg.Home)
	}
	if d.auth != nil {
		env = append(env, "XAUTHORITY="+d.auth.sessionFile())
	}
	if d.cfg.User != "" {
		env = append(env, "USER="+d.cfg.User, "LOGNAME="+d.cfg.User)
	}
	if toolkit {
		env = append(env, "XDG_CONFIG_DIRS="+toolkitConfigDirs(d.auth.dir, os.Getenv("XDG_CONFIG_DIRS")))
	}
	return append(env, d.cfg.Env...)
}

// Credential is the user the session runs as, nil when it runs as this
// process's user. The caller must not modify it.
func (d *Display) Credential() *syscall.Credential { return d.cfg.Credential }

// SysProcAttr is how a program that belongs to the session is started: in a
// process group of its own (so stopping it stops what it started), killed
// when this process dies, and as the session's user.
func (d *Display) SysProcAttr() *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if c := d.cfg.Credential; c != nil {
		cc := *c
		cc.Groups = append([]uint32{}, c.Groups...)
		attr.Credential = &cc
	}
	return attr
}

// XAuthority is the file holding the session's copy of the display's X
// cookie (what $XAUTHORITY says in Env), or "" on an attached display.
func (d *Display) XAuthority() string {
	if d.auth == nil {
		return ""
	}
	return d.auth.sessionFile()
}

// withoutDeskenv is env without the appliance's DESKENV_* variables.
func withoutDeskenv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, "DESKENV_") {
			out = append(out, kv)
		}
	}
	return out
}

// Dial opens a new, separate connection to the display. The caller closes it.
// A connection that must outlive a restart of the server is a Follower's.
func (d *Display) Dial() (*xgb.Conn, error) {
	return DialContext(context.Background(), d.name)
}

// Health reports whether the X server answers a round trip within ctx.
func (d *Display) Health(ctx context.Context) error {
	d.mu.Lock()
	conn, closed, last := d.conn, d.closed, d.lastErr
	d.mu.Unlock()
	if closed {
		return errors.New("display is closed")
	}
	if conn == nil {
		if last != nil {
			return fmt.Errorf("display %s is down: %w", d.name, last)
		}
		return fmt.Errorf("display %s is down", d.name)
	}
	done := make(chan error, 1)
	go func() {
		_, err := xproto.GetInputFocus(conn).Reply()
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("display %s does not answer: %w", d.name, err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("display %s did not answer in time: %w", d.name, ctx.Err())
	}
}

// Restarts counts how often the X server was brought back after dying.
func (d *Display) Restarts() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.restarts
}

// Owned reports whether this handle started the X server (as opposed to
// attaching to one), and so may restart it and its session.
func (d *Display) Owned() bool { return d.cfg.Attach == "" }

func (d *Display) setConn(c *xgb.Conn) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.conn != nil {
		d.conn.Close()
	}
	d.conn = c
	if c != nil {
		d.screen = *xproto.Setup(c).DefaultScreen(c)
		d.lastErr = nil
		go d.drain(c)
	}
	d.generation++
	close(d.changed)
	d.changed = make(chan struct{})
}

// drain reads and drops the events and unchecked-request errors that arrive
// on the shared connection. Nobody selects input on it, but the server still
// sends every client MappingNotify on each keyboard-map change (hci makes one
// per character the layout lacks), and xgb stops delivering replies once
// about 5000 unread events are queued: captures and health checks would hang.
func (d *Display) drain(c *xgb.Conn) {
	for {
		ev, err := c.WaitForEvent()
		if ev == nil && err == nil {
			return // connection closed
		}
		if err != nil {
			d.log.Debug("X error on the shared connection", "err", err)
		}
	}
}

// startServer launches Xvfb and connects to it. Without a configured number
// Xvfb picks a free one itself (-displayfd), which is race-free when many
// processes (parallel tests, a pool) start displays at once.
func (d *Display) startServer(ctx context.Context) error {
	if err := d.launchXvfb(ctx, d.cfg.Number); err != nil {
		return fmt.Errorf("start Xvfb: %w", err)
	}
	return nil
}

// launchXvfb starts Xvfb on display num, or on a number of its choosing when
// num <= 0, and connects to it.
func (d *Display) launchXvfb(ctx context.Context, num int) error {
	screen := fmt.Sprintf("%dx%dx%d", d.cfg.Width, d.cfg.Height, d.cfg.Depth)
	// -noreset: without it Xvfb resets when its last client leaves, which
	// throws away the session between two agents' connections.
	args := []string{"-screen", "0", screen, "-noreset", "-nolisten", "tcp", "+extension", "XTEST", "+extension", "MIT-SHM", "-dpi", "96"}
	// Only clients that present the display's cookie get in.
	args = append(args, "-auth", d.auth.serverFile())
	var fdR, fdW *os.File
	if num > 0 {
		args = append([]string{":" + strconv.Itoa(num)}, args...)
	} else {
		var err error
		fdR, fdW, err = os.Pipe()
		if err != nil {
			return err
		}
		defer fdR.Close()
		args = append(args, "-displayfd", "3")
	}
	cmd := exec.Command(d.cfg.Xvfb, args...)
	// The server runs as the desktop's user too: no appliance variables.
	cmd.Env = withoutDeskenv(os.Environ())
	var stderr limitedBuffer
	cmd.Stderr = &stderr
	if fdW != nil {
		cmd.ExtraFiles = []*os.File{fdW}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	err := cmd.Start()
	if fdW != nil {
		fdW.Close()
	}
	if err != nil {
		return fmt.Errorf("run %s: %w", d.cfg.Xvfb, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	fail := func(err error) error {
		cmd.Process.Kill()
		<-done
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return fmt.Errorf("%w (Xvfb said: %s)", err, lastLines(msg, 3))
		}
		return err
	}

	if fdR != nil {
		n, err := readDisplayNumber(ctx, fdR, 10*time.Second)
		if err != nil {
			return fail(fmt.Errorf("the X server (Xvfb) did not report its display number: %w", err))
		}
		num = n
	}
	name := ":" + strconv.Itoa(num)
	d.mu.Lock()
	d.num = num // for Close to take the cookie back, even if the start fails
	d.mu.Unlock()
	if err := d.auth.publish(num); err != nil {
		return fail(err)
	}
	conn, err := dialWait(ctx, name, 10*time.Second, done)
	if err != nil {
		return fail(fmt.Errorf("the X server (Xvfb) on %s: %w", name, err))
	}
	d.mu.Lock()
	d.name = name
	d.num = num
	d.xvfb = cmd
	d.xvfbDone = done
	d.lockFile = fmt.Sprintf("/tmp/.X%d-lock", num)
	d.mu.Unlock()
	d.setConn(conn)

	d.watchers.Add(1)
	go d.watch(cmd, done)
	return nil
}

// readDisplayNumber reads the line Xvfb writes to its -displayfd once it is
// ready for connections.
func readDisplayNumber(ctx context.Context, r *os.File, limit time.Duration) (int, error) {
	type result struct {
		n   int
		err error
	}
	ch := make(chan result, 1)
	go func() {
		buf := make([]byte, 32)
		var got []byte
		for {
			n, err := r.Read(buf)
			got = append(got, buf[:n]...)
			if i := strings.IndexByte(string(got), '\n'); i >= 0 {
				v, perr := strconv.Atoi(strings.TrimSpace(string(got[:i])))
				ch <- result{v, perr}
				return
			}
			if err != nil {
				ch <- result{0, fmt.Errorf("server exited during start-up: %w", err)}
				return
			}
		}
	}()
	select {
	case res := <-ch:
		return res.n, res.err
	case <-time.After(limit):
		r.Close()
		return 0, fmt.Errorf("no answer within %s", limit)
	case <-ctx.Done():
		r.Close()
		return 0, ctx.Err()
	}
}

// watch waits for Xvfb to exit. An exit nobody asked for is logged as an error
// and, when configured, followed by a restart on the same display number.
func (d *Display) watch(cmd *exec.Cmd, done chan struct{}) {
	defer d.watchers.Done()
	select {
	case <-d.stop:
		return
	case <-done:
	}
	d.mu.Lock()
	if d.closed || d.xvfb != cmd {
		d.mu.Unlock()
		return
	}
	state := "unknown state"
	if cmd.ProcessState != nil {
		state = cmd.ProcessState.String()
	}
	d.lastErr = fmt.Errorf("the X server (Xvfb) exited unexpectedly (%s)", state)
	exit := d.noteServerExit(cmd.Process.Pid, state)
	conn := d.conn
	d.conn = nil
	d.mu.Unlock()
	if conn != nil {
		conn.Close()
	}
	d.log.Error("X server died", "state", state, "restart", d.cfg.RestartOnCrash)
	if !d.cfg.RestartOnCrash {
		d.noteServerRestart(exit, errors.New("restarting is off (RestartOnCrash)"))
		return
	}
	num, _ := strconv.Atoi(strings.TrimPrefix(d.name, ":"))
	for attempt := 1; ; attempt++ {
		d.stopSession(false)
		os.Remove(d.lockFile)
		os.Remove(fmt.Sprintf("/tmp/.X11-unix/X%d", num))
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		err := d.launchXvfb(ctx, num)
		if err == nil {
			err = d.StartSession(ctx)
		}
		cancel()
		d.noteServerRestart(exit, err)
		if err == nil {
			d.mu.Lock()
			d.restarts++
			d.mu.Unlock()
			d.log.Warn("X server restarted", "attempt", attempt)
			return
		}
		d.log.Error("X server restart failed", "attempt", attempt, "err", err)
		select {
		case <-d.stop:
			return
		case <-time.After(time.Duration(min(attempt, 10)) * time.Second):
		}
	}
}

// StartSession launches the window manager and the session apps. It is a no-op
// on an attached display.
func (d *Display) StartSession(ctx context.Context) error {
	if !d.Owned() {
		return nil
	}
	// The session's cookie file again, in case a program of the last
	// session made it unreadable: the new session could not connect.
	d.mu.Lock()
	num := d.num
	d.mu.Unlock()
	if err := d.auth.publish(num); err != nil {
		return err
	}
	var cmds []*child
	// Once in d.session, each process is watched and restarted should it
	// die (supervise.go).
	defer func() {
		for _, c := range cmds {
			go d.supervise(c)
		}
	}()
	// A window manager a reset kept (KillSession) runs on.
	if len(d.cfg.WindowManager) > 0 && !d.running(RoleWindowManager) {
		cmd, err := d.spawnSupervised(newSlot(RoleWindowManager, d.cfg.WindowManager))
		if err != nil {
			return fmt.Errorf("start window manager: %w", err)
		}
		cmds = append(cmds, cmd)
		// Apps mapped before the window manager selects SubstructureRedirect
		// come up undecorated and unmanaged; wait until it has.
		if err := d.waitWindowManager(ctx, 5*time.Second); err != nil {
			d.log.Warn("window manager did not come up in time", "err", err)
		} else {
			d.vouchWindowManager(ctx, cmd)
		}
	}
	if len(d.cfg.Panel) > 0 && !d.running(RolePanel) {
		cmd, err := d.spawnSupervised(newSlot(RolePanel, d.cfg.Panel))
		if err != nil {
			d.mu.Lock()
			d.session = append(d.session, cmds...)
			d.mu.Unlock()
			return fmt.Errorf("start the panel: %w", err)
		}
		cmds = append(cmds, cmd)
	}
	for _, argv := range d.cfg.Apps {
		if len(argv) == 0 {
			continue
		}
		cmd, err := d.spawnSupervised(newSlot(RoleApp, argv))
		if err != nil {
			d.mu.Lock()
			d.session = append(d.session, cmds...)
			d.mu.Unlock()
			return fmt.Errorf("start session app: %w", err)
		}
		cmds = append(cmds, cmd)
	}
	d.mu.Lock()
	d.session = append(d.session, cmds...)
	d.mu.Unlock()
	// After the apps are on their way: they take tens of milliseconds to
	// map a window, the wallpaper a few to paint, and the root is bare
	// until then either way.
	if d.cfg.Session == SessionDesktop {
		if conn := d.Conn(); conn != nil {
			if err := paintWallpaper(conn, d.Screen()); err != nil {
				d.log.Warn("cannot paint the wallpaper; the background stays as the server has it", "err", err)
			}
		}
	}
	return nil
}

// RestartSession stops the window manager and session apps and starts them
// again, leaving the X server (and everyone's connection) and the panel in
// place.
func (d *Display) RestartSession(ctx context.Context) error {
	d.stopSession(true)
	return d.StartSession(ctx)
}

// running reports whether the session's process of role (the panel, the
// window manager) runs, or waits for its restart: it is still in
// d.session.
func (d *Display) running(role string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.session {
		if c.role() == role {
			return true
		}
	}
	return false
}

// vouchWindowManager records, for the window manager c just started and
// seen managing a window, the window it owns the window manager selection
// with and starts watching it (wm.go): what lets a reset keep it. Without
// a pinned configuration there is nothing to vouch for.
func (d *Display) vouchWindowManager(ctx context.Context, c *child) {
	d.mu.Lock()
	pinned := d.wmPinned
	d.mu.Unlock()
	if !pinned {
		return
	}
	w, err := d.watchWindowManager(ctx, c)
	if err != nil {
		d.log.Warn("cannot watch the window manager; the next reset restarts it", "err", err)
		return
	}
	d.mu.Lock()
	c.owner, c.watch = w.selectionOwner, w
	d.mu.Unlock()
}

// PanelPIDs are the process ids of the running panel (none, or one): a
// reset, which kills every other process of the session, spares them.
func (d *Display) PanelPIDs() []int {
	d.mu.Lock()
	defer d.mu.Unlock()
	var pids []int
	for _, c := range d.session {
		if c.role() == RolePanel && !c.exited() {
			pids = append(pids, c.cmd.Process.Pid)
		}
	}
	return pids
}

// child is a session process and a channel closed when it has exited, so
// its state can be read without racing the goroutine that waits for it.
type child struct {
	cmd  *exec.Cmd
	done chan struct{}
	// Supervision (supervise.go): the child's place in the session, when
	// it started, and, under Display.mu, when it died and why its last
	// restart failed.
	slot    *slot
	started time.Time
	diedAt  time.Time
	lastErr string
	// For a window manager deskenv saw come up (wm.go): the window with
	// which it owns the window manager selection, and its watch.
	owner xproto.Window
	watch *wmWatch
}

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// SessionPIDs are the process ids of the running window manager and apps.
func (d *Display) SessionPIDs() []int {
	d.mu.Lock()
	defer d.mu.Unlock()
	var pids []int
	for _, c := range d.session {
		if !c.exited() {
			pids = append(pids, c.cmd.Process.Pid)
		}
	}
	return pids
}

// ServerPID is the process id of the Xvfb this handle started, or 0.
func (d *Display) ServerPID() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.xvfb == nil || d.xvfb.Process == nil {
		return 0
	}
	return d.xvfb.Process.Pid
}

func (d *Display) spawn(argv []string) (*child, error) {
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, fmt.Errorf("cannot find %q on PATH: %w", argv[0], err)
	}
	cmd := exec.Command(path, argv[1:]...)
	cmd.Env = d.Env()
	if d.cfg.Home != "" {
		if st, err := os.Stat(d.cfg.Home); err == nil && st.IsDir() {
			cmd.Dir = d.cfg.Home
		}
	}
	// Own process group, so stopping the session also stops what the app
	// started (a shell's children, a browser's helpers); as the session user.
	cmd.SysProcAttr = d.SysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("run %s: %w", filepath.Base(path), err)
	}
	c := &child{cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(c.done) }()
	d.log.Debug("session process started", "cmd", argv, "pid", cmd.Process.Pid)
	return c, nil
}

// stopSession stops the session's processes, all but the panel when
// keepPanel.
func (d *Display) stopSession(keepPanel bool) {
	keep := keepPanel && d.panelIntact()
	d.mu.Lock()
	cmds, kept := splitSession(d.session, keep, false)
	d.session = kept
	d.mu.Unlock()
	if !keepPanel {
		// What the panel's launchers started runs in process groups of
		// its own (tint2 puts each in a new session), which the group
		// kills below miss; a reset finds them by user and display, but
		// Close and a server restart would leave them behind.
		var pids []int
		for _, c := range cmds {
			pids = append(pids, c.cmd.Process.Pid)
		}
		for _, g := range descendantGroups(pids) {
			syscall.Kill(-g, syscall.SIGKILL)
		}
	}
	for _, c := range cmds {
		killGroup(c, syscall.SIGTERM)
		// A stopped process acts on SIGTERM only once continued.
		killGroup(c, syscall.SIGCONT)
	}
	deadline := time.Now().Add(2 * time.Second)
	for _, c := range cmds {
		for groupAlive(c) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		killGroup(c, syscall.SIGKILL)
	}
}

func killGroup(c *child, sig syscall.Signal) {
	syscall.Kill(-c.cmd.Process.Pid, sig)
}

// groupAlive reports whether anything of the child's process group is left.
// A group leader that has exited but not been reaped would keep the group
// "alive" forever, so the leader's own exit is checked first.
func groupAlive(c *child) bool {
	if !c.exited() {
		return true
	}
	return syscall.Kill(-c.cmd.Process.Pid, 0) == nil
}

// waitWindowManager polls until some client holds SubstructureRedirect on the
// root window, which is what a running window manager does.
func (d *Display) waitWindowManager(ctx context.Context, limit time.Duration) error {
	conn := d.Conn()
	if conn == nil {
		return errors.New("no X connection")
	}
	deadline := time.Now().Add(limit)
	for {
		attrs, err := xproto.GetWindowAttributes(conn, d.Root()).Reply()
		if err != nil {
			return err
		}
		if attrs.AllEventMasks&xproto.EventMaskSubstructureRedirect != 0 {
			return d.pingWindowManager(ctx, deadline)
		}
		if time.Now().After(deadline) {
			return errors.New("no client selected SubstructureRedirect on the root window")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// pingWindowManager maps a throw-away window until the window manager
// reparents it. Openbox selects SubstructureRedirect before its event loop
// runs and drops map requests that arrive in between; an xterm mapped then
// stays unmapped and waits 5 s for a manager that never answers.
func (d *Display) pingWindowManager(ctx context.Context, deadline time.Time) error {
	conn, err := d.Dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	root := xproto.Setup(conn).DefaultScreen(conn).Root
	win, err := xproto.NewWindowId(conn)
	if err != nil {
		return err
	}
	xproto.CreateWindow(conn, 0, win, root, -10, -10, 1, 1, 0, xproto.WindowClassInputOutput, 0,
		xproto.CwEventMask, []uint32{xproto.EventMaskStructureNotify})
	defer xproto.DestroyWindow(conn, win)
	for time.Now().Before(deadline) {
		xproto.UnmapWindow(conn, win)
		xproto.MapWindow(conn, win)
		retry := time.Now().Add(20 * time.Millisecond)
		for time.Now().Before(retry) {
			ev, err := conn.PollForEvent()
			if err != nil {
				return err
			}
			if ev == nil {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(2 * time.Millisecond):
				}
				continue
			}
			if r, ok := ev.(xproto.ReparentNotifyEvent); ok && r.Window == win {
				return nil
			}
		}
	}
	return errors.New("the window manager selected SubstructureRedirect but did not manage a test window")
}

// Close stops the session and the X server this handle started and closes the
// connection. No child process is left behind.
func (d *Display) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	close(d.stop)
	conn := d.conn
	d.conn = nil
	xvfb, done := d.xvfb, d.xvfbDone
	d.mu.Unlock()

	d.stopSession(false)
	if conn != nil {
		conn.Close()
	}
	if xvfb != nil && xvfb.Process != nil {
		xvfb.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			xvfb.Process.Kill()
			<-done
		}
	}
	d.watchers.Wait()
	if d.auth != nil {
		d.mu.Lock()
		num := d.num
		d.mu.Unlock()
		d.auth.close(num)
	}
	d.log.Info("display closed")
	return nil
}

// dialWait connects to name, retrying until the server accepts, limit passes
// (zero: one try), the server process exits (died non-nil) or ctx ends.
func dialWait(ctx context.Context, name string, limit time.Duration, died <-chan struct{}) (*xgb.Conn, error) {
	deadline := time.Now().Add(limit)
	for {
		conn, err := xext.Dial(ctx, name)
		if err == nil {
			return conn, nil
		}
		if limit == 0 {
			return nil, err
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("server did not accept connections within %s: %w", limit, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-died:
			return nil, errors.New("server exited during start-up")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// limitedBuffer keeps the last few KiB a child wrote to stderr, for error messages.
type limitedBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > 8192 {
		b.buf = b.buf[len(b.buf)-8192:]
	}
	return len(p), nil
}

func (b *limitedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// RestoreSize puts the screen back to the size it had when deskenv connected,
// if a program changed it through RandR (`xrandr --fb 1024x768` works on
// Xvfb). Everything downstream (captures, the model space, the video) is
// built for that size; a smaller root makes every capture fail. It reports
// whether the size had to be restored. A display deskenv only attached to is
// left alone: its size is its owner's business.
func (d *Display) RestoreSize(ctx context.Context) (bool, error) {
	if !d.Owned() {
		return false, nil
	}
	want := d.Screen()
	c, err := d.Dial()
	if err != nil {
		return false, err
	}
	defer c.Close()
	type result struct {
		restored bool
		err      error
	}
	done := make(chan result, 1)
	go func() {
		geo, err := xproto.GetGeometry(c, xproto.Drawable(want.Root)).Reply()
		if err != nil {
			done <- result{false, fmt.Errorf("read the screen size of %s: %w", d.name, err)}
			return
		}
		if geo.Width == want.WidthInPixels && geo.Height == want.HeightInPixels {
			done <- result{false, nil}
			return
		}
		if err := xext.Init(c, "RANDR", randr.Init); err != nil {
			done <- result{false, fmt.Errorf("restore the screen size of %s: %w", d.name, err)}
			return
		}
		err = randr.SetScreenSizeChecked(c, want.Root, want.WidthInPixels, want.HeightInPixels,
			uint32(want.WidthInMillimeters), uint32(want.HeightInMillimeters)).Check()
		if err != nil {
			done <- result{false, fmt.Errorf("restore the screen size of %s to %dx%d: %w", d.name, want.WidthInPixels, want.HeightInPixels, err)}
			return
		}
		d.log.Warn("a program changed the screen size; restored it",
			"was", fmt.Sprintf("%dx%d", geo.Width, geo.Height), "now", fmt.Sprintf("%dx%d", want.WidthInPixels, want.HeightInPixels))
		done <- result{true, nil}
	}()
	select {
	case r := <-done:
		return r.restored, r.err
	case <-ctx.Done():
		return false, ctx.Err()
	}
}
