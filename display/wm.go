package display

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xfixes"
	"github.com/jezek/xgb/xproto"

	"github.com/deskenv/deskenv/internal/proc"
	"github.com/deskenv/deskenv/internal/xext"
)

// The window manager across resets. A reset used to restart openbox every
// time (about 70 ms of a 250 ms reset). Now it keeps the one that runs when
// nothing the agent could do to it can carry over into the next episode:
//
//   - its configuration is deskenv's, read-only to the session's user
//     (pinWindowManager): openbox runs with --config-file, its theme and menu
//     named by absolute paths, so neither `openbox --reconfigure` nor a
//     restart reads anything the agent wrote into home;
//   - it runs (not stopped, not traced), is the process deskenv started and
//     still owns the window manager selection (WM_S<screen>) with the window
//     it took it with;
//   - a watcher (wmWatch) saw no new owner of that selection during the
//     episode: `openbox --restart` execs in place (same pid) and takes it
//     again, as does any window manager started with --replace.
//
// What the agent can change in a live openbox through X (the number of
// desktops, the current one, showing the desktop) the reset puts back
// with EWMH messages (package baseline). A reconfigure the agent asked for
// reread deskenv's configuration, but fonts and cursors may still come from
// the home of that moment, so the reset reconfigures once more after home
// is restored. Anything else, and any doubt, restarts the window manager as
// before.

// wmDir is the directory, beside the panel's, of the window manager's
// configuration.
const wmDir = "wm"

// pinWindowManager writes openbox's configuration into a directory wm
// under dir (this process's user's, readable by the session, like the
// panel's) and returns openbox's command line with --config-file. The
// configuration is the system's (what openbox read from /etc/xdg before),
// with the theme and the menu files named by absolute paths: openbox looks
// relative names up in the home's ~/.themes and ~/.config/openbox first,
// which the agent can write. An absolute menu path that does not exist is
// also looked up under ~/.config/openbox, so only a menu that exists is
// kept.
func pinWindowManager(dir string) ([]string, error) {
	rc, menu, err := systemOpenboxConfig()
	if err != nil {
		return nil, err
	}
	wdir := filepath.Join(dir, wmDir)
	if err := os.Mkdir(wdir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("write the window manager's configuration: %w", err)
	}
	menuPath := filepath.Join(wdir, "menu.xml")
	if err := os.WriteFile(menuPath, menu, 0o644); err != nil {
		return nil, fmt.Errorf("write the window manager's configuration: %w", err)
	}
	rcPath := filepath.Join(wdir, "rc.xml")
	if err := os.WriteFile(rcPath, pinOpenboxRC(rc, menuPath, themeDirs()), 0o644); err != nil {
		return nil, fmt.Errorf("write the window manager's configuration: %w", err)
	}
	return []string{"openbox", "--config-file", rcPath}, nil
}

// systemOpenboxConfig reads openbox's rc.xml and menu.xml from the system's
// configuration directories ($XDG_CONFIG_DIRS, else /etc/xdg).
func systemOpenboxConfig() (rc, menu []byte, err error) {
	dirs := filepath.SplitList(os.Getenv("XDG_CONFIG_DIRS"))
	dirs = append(dirs, "/etc/xdg")
	for _, d := range dirs {
		if d == "" || !filepath.IsAbs(d) {
			continue
		}
		rc, err = os.ReadFile(filepath.Join(d, "openbox", "rc.xml"))
		if err != nil {
			continue
		}
		menu, err = os.ReadFile(filepath.Join(d, "openbox", "menu.xml"))
		if err != nil {
			menu = []byte("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<openbox_menu xmlns=\"http://openbox.org/3.4/menu\">\n<menu id=\"root-menu\" label=\"Openbox 3\"></menu>\n</openbox_menu>\n")
		}
		return rc, menu, nil
	}
	return nil, nil, errors.New("no openbox rc.xml in the system's configuration directories (/etc/xdg/openbox)")
}

var (
	themeName = regexp.MustCompile(`(?s)(<theme>.*?<name>)([^<]*)(</name>)`)
	menuFiles = regexp.MustCompile(`(?s)(<menu>.*?)((?:\s*<file>[^<]*</file>)+)`)
)

// pinOpenboxRC rewrites an rc.xml so that openbox reads nothing from home:
// the theme by the absolute path of the first of themeDirs that has it (the
// name under /usr/share/themes when none does: openbox then falls back to
// its built-in theme), and menuPath as its only menu file.
func pinOpenboxRC(rc []byte, menuPath string, themeDirs []string) []byte {
	rc = themeName.ReplaceAllFunc(rc, func(m []byte) []byte {
		g := themeName.FindSubmatch(m)
		name := strings.TrimSpace(string(g[2]))
		if filepath.IsAbs(name) {
			return m
		}
		path := filepath.Join("/usr/share/themes", filepath.Base(name))
		for _, d := range themeDirs {
			if _, err := os.Stat(filepath.Join(d, name, "openbox-3", "themerc")); err == nil {
				path = filepath.Join(d, name)
				break
			}
		}
		return append(append(append([]byte{}, g[1]...), xmlEscape(path)...), g[3]...)
	})
	return menuFiles.ReplaceAllFunc(rc, func(m []byte) []byte {
		g := menuFiles.FindSubmatch(m)
		return append(append([]byte{}, g[1]...), "\n    <file>"+xmlEscape(menuPath)+"</file>"...)
	})
}

// themeDirs are the system's theme directories, as openbox searches them
// after the home's ($XDG_DATA_DIRS, else /usr/local/share and /usr/share).
func themeDirs() []string {
	dirs := filepath.SplitList(os.Getenv("XDG_DATA_DIRS"))
	if len(dirs) == 0 {
		dirs = []string{"/usr/local/share", "/usr/share"}
	}
	var out []string
	for _, d := range dirs {
		if filepath.IsAbs(d) {
			out = append(out, filepath.Join(d, "themes"))
		}
	}
	return out
}

func xmlEscape(s string) string {
	var b bytes.Buffer
	for _, r := range s {
		switch r {
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// wmWatch follows, on a connection of its own, what the window manager
// does that a reset cannot see afterwards: a new owner of the window
// manager selection (a restart in place, a replacement) and its rereading
// of its configuration (openbox sets _OB_CONFIG_FILE and _OB_THEME on the
// root window each time). Losing the connection (the agent can kill any X
// client) counts as a new owner: the watch can no longer vouch for the
// window manager.
type wmWatch struct {
	conn            *xgb.Conn
	confAtoms       [2]xproto.Atom
	mu              sync.Mutex
	replaced        bool
	reconfigured    bool
	closed          bool
	themeSet        chan struct{} // receives on every _OB_THEME change
	selectionOwner  xproto.Window // the owner when the watch began
	selectionAtomID xproto.Atom
}

// watchWindowManager starts a watch of the window manager, which owns the
// selection WM_S<screen> with window owner.
func (d *Display) watchWindowManager(ctx context.Context, c *child) (*wmWatch, error) {
	conn, err := xext.Dial(ctx, d.name)
	if err != nil {
		return nil, err
	}
	w, err := newWMWatch(conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	go w.read()
	go func() {
		select {
		case <-c.done:
		case <-d.stop:
		}
		w.close()
	}()
	return w, nil
}

func newWMWatch(conn *xgb.Conn) (*wmWatch, error) {
	screen := xproto.Setup(conn).DefaultScreen(conn)
	w := &wmWatch{conn: conn, themeSet: make(chan struct{}, 1)}
	intern := func(name string) (xproto.Atom, error) {
		r, err := xproto.InternAtom(conn, false, uint16(len(name)), name).Reply()
		if err != nil {
			return 0, fmt.Errorf("intern %s: %w", name, err)
		}
		return r.Atom, nil
	}
	var err error
	if w.selectionAtomID, err = intern("WM_S" + strconv.Itoa(conn.DefaultScreen)); err != nil {
		return nil, err
	}
	for i, name := range []string{"_OB_CONFIG_FILE", "_OB_THEME"} {
		if w.confAtoms[i], err = intern(name); err != nil {
			return nil, err
		}
	}
	if err := xext.Init(conn, "XFIXES", xfixes.Init); err != nil {
		return nil, fmt.Errorf("watch the window manager: %w", err)
	}
	if _, err := xfixes.QueryVersion(conn, 5, 0).Reply(); err != nil {
		return nil, fmt.Errorf("watch the window manager: %w", err)
	}
	if err := xproto.ChangeWindowAttributesChecked(conn, screen.Root, xproto.CwEventMask,
		[]uint32{xproto.EventMaskPropertyChange}).Check(); err != nil {
		return nil, fmt.Errorf("watch the root window's properties: %w", err)
	}
	mask := uint32(xfixes.SelectionEventMaskSetSelectionOwner | xfixes.SelectionEventMaskSelectionWindowDestroy |
		xfixes.SelectionEventMaskSelectionClientClose)
	if err := xfixes.SelectSelectionInputChecked(conn, screen.Root, w.selectionAtomID, mask).Check(); err != nil {
		return nil, fmt.Errorf("watch the window manager selection: %w", err)
	}
	o, err := xproto.GetSelectionOwner(conn, w.selectionAtomID).Reply()
	if err != nil {
		return nil, fmt.Errorf("read the window manager selection's owner: %w", err)
	}
	w.selectionOwner = o.Owner
	return w, nil
}

// read follows the watch's events until its connection closes.
func (w *wmWatch) read() {
	for {
		ev, err := w.conn.WaitForEvent()
		if ev == nil && err == nil {
			w.mu.Lock()
			if !w.closed {
				w.replaced = true // someone killed the watch's connection
			}
			w.mu.Unlock()
			return
		}
		switch e := ev.(type) {
		case xfixes.SelectionNotifyEvent:
			w.mu.Lock()
			w.replaced = true
			w.mu.Unlock()
		case xproto.PropertyNotifyEvent:
			if e.Atom != w.confAtoms[0] && e.Atom != w.confAtoms[1] {
				continue
			}
			w.mu.Lock()
			w.reconfigured = true
			w.mu.Unlock()
			if e.Atom == w.confAtoms[1] {
				select {
				case w.themeSet <- struct{}{}:
				default:
				}
			}
		}
	}
}

// state says whether the window manager was replaced or reconfigured since
// the watch began (or was last cleared).
func (w *wmWatch) state() (replaced, reconfigured bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.replaced || w.closed, w.reconfigured
}

func (w *wmWatch) close() {
	w.mu.Lock()
	already := w.closed
	w.closed = true
	w.mu.Unlock()
	if !already {
		w.conn.Close()
	}
}

// WMCheck is what a reset needs to know of the window manager before it
// kills the session: whether it may keep it.
type WMCheck struct {
	// Keep: the window manager is intact and may stay.
	Keep bool
	// Reconfigure: it reread its configuration during the episode; the
	// reset makes it read it again once home is restored.
	Reconfigure bool
	// PID is the window manager's process, Window the window with which it
	// owns the window manager selection (both 0 when none runs).
	PID    int
	Window xproto.Window
	// Why says why it cannot be kept.
	Why string
}

// CheckWindowManager says whether the window manager that runs may be kept
// across a reset (see the comment at the top of wm.go).
func (d *Display) CheckWindowManager() WMCheck {
	d.mu.Lock()
	var wm *child
	for _, c := range d.session {
		if c.role() == RoleWindowManager {
			wm = c
		}
	}
	pinned := d.wmPinned
	d.mu.Unlock()
	switch {
	case !d.Owned() || len(d.cfg.WindowManager) == 0:
		return WMCheck{Why: "no window manager of deskenv's"}
	case !pinned:
		return WMCheck{Why: "its configuration is not deskenv's (only openbox's is pinned), so it may have read the agent's"}
	case wm == nil || wm.exited():
		return WMCheck{Why: "it is not running"}
	}
	pid := wm.cmd.Process.Pid
	chk := WMCheck{PID: pid}
	d.mu.Lock()
	watch, owner := wm.watch, wm.owner
	d.mu.Unlock()
	if watch == nil || owner == 0 {
		chk.Why = "it was restarted during the episode (not by a reset), or its start was not confirmed"
		return chk
	}
	chk.Window = owner
	if why := processUnfit(pid); why != "" {
		chk.Why = why
		return chk
	}
	replaced, reconfigured := watch.state()
	if replaced {
		chk.Why = "the window manager selection changed hands during the episode (a restart or a replacement)"
		return chk
	}
	o, err := xproto.GetSelectionOwner(watch.conn, watch.selectionAtomID).Reply()
	if err != nil || o.Owner != owner {
		chk.Why = "it no longer owns the window manager selection"
		return chk
	}
	chk.Keep, chk.Reconfigure = true, reconfigured
	return chk
}

// processUnfit says why process pid cannot be trusted to stay ("" when it
// can): it is gone, a zombie, stopped (the agent, as the session's user,
// may SIGSTOP it) or traced (a debugger the agent attached).
func processUnfit(pid int) string {
	pfs := proc.Default()
	st, err := pfs.Stat(pid)
	switch {
	case errors.Is(err, proc.ErrGone) || err == nil && st.Dead():
		return "it has exited"
	case err != nil:
		return fmt.Sprintf("its state cannot be read: %v", err)
	case st.Stopped():
		return "it is stopped"
	case st.Exiting():
		return "it is exiting"
	}
	status, err := pfs.Status(pid)
	switch {
	case errors.Is(err, proc.ErrGone):
		return "it has exited"
	case err != nil:
		return fmt.Sprintf("its status cannot be read: %v", err)
	case status.TracerPID != 0:
		return "it is being traced"
	}
	// A signal the agent sent before the reset killed it may not have
	// been delivered yet (a loaded machine may not have run the window
	// manager since): the window manager would die, stop or restart
	// after it was judged fit. Only the signals whose default is to do
	// nothing may wait.
	for sig := syscall.Signal(1); sig <= 64; sig++ {
		if status.SignalPending(sig) && !harmlessSignal(sig) {
			return fmt.Sprintf("a signal sent to it is not yet delivered (%v)", sig)
		}
	}
	return ""
}

// harmlessSignal reports whether sig's default action is to do nothing
// (openbox handles none of these).
func harmlessSignal(sig syscall.Signal) bool {
	switch sig {
	case syscall.SIGCHLD, syscall.SIGCONT, syscall.SIGURG, syscall.SIGWINCH:
		return true
	}
	return false
}

// ReconfigureWindowManager makes the kept window manager read its
// configuration again (openbox's _OB_CONTROL message, what `openbox
// --reconfigure` sends) and waits until it has set its theme again.
func (d *Display) ReconfigureWindowManager(ctx context.Context) error {
	d.mu.Lock()
	var w *wmWatch
	for _, c := range d.session {
		if c.role() == RoleWindowManager && !c.exited() {
			w = c.watch
		}
	}
	d.mu.Unlock()
	if w == nil {
		return errors.New("no window manager of deskenv's runs")
	}
	select {
	case <-w.themeSet: // an old change: this wait is for the next
	default:
	}
	r, err := xproto.InternAtom(w.conn, false, uint16(len("_OB_CONTROL")), "_OB_CONTROL").Reply()
	if err != nil {
		return fmt.Errorf("reconfigure the window manager: %w", err)
	}
	root := xproto.Setup(w.conn).DefaultScreen(w.conn).Root
	ev := xproto.ClientMessageEvent{Format: 32, Window: root, Type: r.Atom,
		Data: xproto.ClientMessageDataUnionData32New([]uint32{1, 0, 0, 0, 0})} // 1: reconfigure
	if err := xproto.SendEventChecked(w.conn, false, root,
		xproto.EventMaskSubstructureRedirect|xproto.EventMaskSubstructureNotify, string(ev.Bytes())).Check(); err != nil {
		return fmt.Errorf("reconfigure the window manager: %w", err)
	}
	select {
	case <-w.themeSet:
	case <-time.After(2 * time.Second):
		return errors.New("reconfigure the window manager: it did not set its theme again within 2s")
	case <-ctx.Done():
		return ctx.Err()
	}
	w.mu.Lock()
	w.reconfigured = false
	w.mu.Unlock()
	return nil
}

// WindowManagerPID is the process id of the running window manager deskenv
// vouches for (it saw it start and watches it), or 0: what a reset spares
// while it checks whether to keep it.
func (d *Display) WindowManagerPID() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.session {
		if c.role() == RoleWindowManager && c.watch != nil && !c.exited() {
			return c.cmd.Process.Pid
		}
	}
	return 0
}
