package control

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/res"
	"github.com/jezek/xgb/xproto"

	"github.com/deskenv/deskenv/internal/xext"
)

// Window is a top-level client window as a reset compares them: by WM_CLASS.
type Window struct {
	ID       uint32 `json:"id"`
	Instance string `json:"instance"` // WM_CLASS res_name, e.g. "xterm"
	Class    string `json:"class"`    // WM_CLASS res_class, e.g. "XTerm"
	Title    string `json:"title,omitempty"`
	PID      int    `json:"pid,omitempty"`
}

// xclient is one connection to the X server.
type xclient struct {
	base uint32 // resource base: any XID of the client's, for KillClient
	pid  int    // 0 when the server does not know (not a local client)
}

// xsession is one short-lived X connection used by a reset. A reset kills
// clients, so it uses its own connection rather than one shared with input
// or capture, and closes it when done.
type xsession struct {
	conn  *xgb.Conn
	root  xproto.Window
	atoms map[string]xproto.Atom
	xres  bool
}

func openX(name string) (*xsession, error) {
	conn, err := xgb.NewConnDisplay(name)
	if err != nil {
		return nil, fmt.Errorf("connect to display %s: %w", name, err)
	}
	s := &xsession{conn: conn, root: xproto.Setup(conn).DefaultScreen(conn).Root, atoms: map[string]xproto.Atom{}}
	if err := xext.Init(conn, "X-Resource", res.Init); err == nil {
		if _, err := res.QueryVersion(conn, 1, 2).Reply(); err == nil {
			s.xres = true
		}
	}
	return s, nil
}

func (s *xsession) Close() { s.conn.Close() }

func (s *xsession) atom(name string) xproto.Atom {
	if a, ok := s.atoms[name]; ok {
		return a
	}
	r, err := xproto.InternAtom(s.conn, false, uint16(len(name)), name).Reply()
	if err != nil {
		return 0
	}
	s.atoms[name] = r.Atom
	return r.Atom
}

// clients lists every client connected to the server with its process id,
// through the X-Resource extension.
func (s *xsession) clients() ([]xclient, error) {
	if !s.xres {
		return nil, errors.New("the X server has no X-Resource extension (1.2 or later), so its clients' processes cannot be found")
	}
	r, err := res.QueryClientIds(s.conn, 1, []res.ClientIdSpec{{Client: 0, Mask: res.ClientIdMaskLocalClientPID}}).Reply()
	if err != nil {
		return nil, fmt.Errorf("list X clients: %w", err)
	}
	byBase := map[uint32]int{}
	for _, id := range r.Ids {
		pid := 0
		if id.Spec.Mask&res.ClientIdMaskLocalClientPID != 0 && len(id.Value) > 0 {
			pid = int(id.Value[0])
		}
		byBase[id.Spec.Client] = pid
	}
	// QueryClientIds only names clients whose pid is known; QueryClients
	// names them all.
	all, err := res.QueryClients(s.conn).Reply()
	if err != nil {
		return nil, fmt.Errorf("list X clients: %w", err)
	}
	out := make([]xclient, 0, len(all.Clients))
	for _, c := range all.Clients {
		if c.ResourceBase == 0 {
			continue // the server itself
		}
		pid := byBase[c.ResourceBase]
		if pid == 0 {
			// Some servers key ids by any XID of the client.
			for base, p := range byBase {
				if base&^c.ResourceMask == c.ResourceBase {
					pid = p
				}
			}
		}
		out = append(out, xclient{base: c.ResourceBase, pid: pid})
	}
	return out, nil
}

// killClients closes the connection of every client keep rejects, which
// destroys its windows at once whatever its process does next.
func (s *xsession) killClients(keep func(pid int) bool) (int, error) {
	cs, err := s.clients()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, c := range cs {
		if keep(c.pid) {
			continue
		}
		xproto.KillClient(s.conn, c.base)
		n++
	}
	// A round trip makes sure the server has processed the kills.
	xproto.GetInputFocus(s.conn).Reply()
	return n, nil
}

// clearSelections leaves PRIMARY, SECONDARY and CLIPBOARD without an owner
// and empties the cut buffers: after a reset nothing can be pasted.
func (s *xsession) clearSelections() error {
	for _, name := range []string{"PRIMARY", "SECONDARY", "CLIPBOARD"} {
		a := s.atom(name)
		if a == 0 {
			continue
		}
		// Any client may set a selection's owner to None.
		if err := xproto.SetSelectionOwnerChecked(s.conn, xproto.WindowNone, a, xproto.TimeCurrentTime).Check(); err != nil {
			return fmt.Errorf("clear selection %s: %w", name, err)
		}
	}
	for i := 0; i < 8; i++ {
		xproto.DeleteProperty(s.conn, s.root, s.atom("CUT_BUFFER"+strconv.Itoa(i)))
	}
	_, err := xproto.GetInputFocus(s.conn).Reply()
	return err
}

// rootProp is one property of the root window.
type rootProp struct {
	typ    xproto.Atom
	format byte
	data   []byte
}

// rootProps reads every property of the root window: X resources (xrdb),
// the window manager's _NET_* state, cut buffers, anything a program set.
func (s *xsession) rootProps() (map[xproto.Atom]rootProp, error) {
	l, err := xproto.ListProperties(s.conn, s.root).Reply()
	if err != nil {
		return nil, fmt.Errorf("list root window properties: %w", err)
	}
	out := make(map[xproto.Atom]rootProp, len(l.Atoms))
	for _, a := range l.Atoms {
		r, err := xproto.GetProperty(s.conn, false, s.root, a, xproto.GetPropertyTypeAny, 0, 1<<22).Reply()
		if err != nil || r.Type == xproto.AtomNone {
			continue // deleted meanwhile
		}
		out[a] = rootProp{typ: r.Type, format: r.Format, data: r.Value}
	}
	return out, nil
}

// restoreRootProps makes the root window's properties those of want:
// properties want lacks are deleted, changed ones written back.
func (s *xsession) restoreRootProps(want map[xproto.Atom]rootProp) (int, error) {
	have, err := s.rootProps()
	if err != nil {
		return 0, err
	}
	n := 0
	for a := range have {
		if _, ok := want[a]; !ok {
			xproto.DeleteProperty(s.conn, s.root, a)
			n++
		}
	}
	for a, w := range want {
		h, ok := have[a]
		if ok && h.typ == w.typ && h.format == w.format && bytes.Equal(h.data, w.data) {
			continue
		}
		unit := uint32(w.format / 8)
		if unit == 0 {
			continue
		}
		xproto.ChangeProperty(s.conn, xproto.PropModeReplace, s.root, a, w.typ, w.format, uint32(len(w.data))/unit, w.data)
		n++
	}
	_, err = xproto.GetInputFocus(s.conn).Reply()
	return n, err
}

// pointer is where the pointer is, in screen coordinates.
func (s *xsession) pointer() (x, y int16, err error) {
	p, err := xproto.QueryPointer(s.conn, s.root).Reply()
	if err != nil {
		return 0, 0, err
	}
	return p.RootX, p.RootY, nil
}

// warp moves the pointer to (x, y) without any input event on the bus: it
// is the desktop's reset, nobody's action.
func (s *xsession) warp(x, y int16) {
	xproto.WarpPointer(s.conn, xproto.WindowNone, s.root, 0, 0, 0, 0, x, y)
}

// selectionOwner is the window owning a selection, or 0.
func (s *xsession) selectionOwner(name string) xproto.Window {
	r, err := xproto.GetSelectionOwner(s.conn, s.atom(name)).Reply()
	if err != nil {
		return 0
	}
	return r.Owner
}

// windows lists the viewable top-level client windows (those carrying
// WM_CLASS, found under the root or inside a window manager's frame), sorted
// by class, instance and title.
func (s *xsession) windows() ([]Window, error) {
	tree, err := xproto.QueryTree(s.conn, s.root).Reply()
	if err != nil {
		return nil, fmt.Errorf("list windows: %w", err)
	}
	var out []Window
	for _, top := range tree.Children {
		if w, ok := s.findClient(top, 3); ok {
			out = append(out, w)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Class != b.Class {
			return a.Class < b.Class
		}
		if a.Instance != b.Instance {
			return a.Instance < b.Instance
		}
		return a.Title < b.Title
	})
	return out, nil
}

func (s *xsession) findClient(w xproto.Window, depth int) (Window, bool) {
	attrs, err := xproto.GetWindowAttributes(s.conn, w).Reply()
	if err != nil || attrs.MapState != xproto.MapStateViewable {
		return Window{}, false
	}
	if inst, class, ok := s.wmClass(w); ok {
		return Window{ID: uint32(w), Instance: inst, Class: class, Title: s.title(w), PID: s.netPID(w)}, true
	}
	if depth == 0 {
		return Window{}, false
	}
	tree, err := xproto.QueryTree(s.conn, w).Reply()
	if err != nil {
		return Window{}, false
	}
	for _, c := range tree.Children {
		if cw, ok := s.findClient(c, depth-1); ok {
			return cw, true
		}
	}
	return Window{}, false
}

func (s *xsession) wmClass(w xproto.Window) (inst, class string, ok bool) {
	r, err := xproto.GetProperty(s.conn, false, w, xproto.AtomWmClass, xproto.AtomString, 0, 256).Reply()
	if err != nil || r.Format != 8 || len(r.Value) == 0 {
		return "", "", false
	}
	parts := bytes.Split(bytes.TrimRight(r.Value, "\x00"), []byte{0})
	inst = string(parts[0])
	if len(parts) > 1 {
		class = string(parts[1])
	}
	return inst, class, true
}

func (s *xsession) title(w xproto.Window) string {
	if a := s.atom("_NET_WM_NAME"); a != 0 {
		if r, err := xproto.GetProperty(s.conn, false, w, a, s.atom("UTF8_STRING"), 0, 1024).Reply(); err == nil && len(r.Value) > 0 {
			return string(r.Value)
		}
	}
	if r, err := xproto.GetProperty(s.conn, false, w, xproto.AtomWmName, xproto.GetPropertyTypeAny, 0, 1024).Reply(); err == nil {
		return string(r.Value)
	}
	return ""
}

func (s *xsession) netPID(w xproto.Window) int {
	a := s.atom("_NET_WM_PID")
	if a == 0 {
		return 0
	}
	r, err := xproto.GetProperty(s.conn, false, w, a, xproto.AtomCardinal, 0, 1).Reply()
	if err != nil || r.Format != 32 || len(r.Value) < 4 {
		return 0
	}
	return int(xgb.Get32(r.Value))
}

// classKey is a window list reduced to what a reset must reproduce: the
// multiset of WM_CLASS pairs.
func classKey(ws []Window) string {
	keys := make([]string, len(ws))
	for i, w := range ws {
		keys[i] = w.Instance + "/" + w.Class
	}
	sort.Strings(keys)
	return strings.Join(keys, ",")
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
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	uid := os.Getuid()
	byUID := sessionUID >= 0 && sessionUID != uid
	if byUID {
		uid = sessionUID
	}
	self := os.Getpid()
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self || skip[pid] {
			continue
		}
		fi, err := os.Stat(filepath.Join("/proc", e.Name()))
		if err != nil {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != uid {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if byUID {
			// Unreadable (no CAP_SYS_PTRACE), no DISPLAY, or this display:
			// the session's. Only a process that names another display is
			// left, for a second deskenv that shares the user (a
			// misconfiguration, but not one to punish with kills).
			if err != nil || !bytes.Contains(append([]byte{0}, env...), []byte("\x00DISPLAY=")) || hasDisplay(env, name) {
				out = append(out, pid)
			}
			continue
		}
		if err != nil || len(env) == 0 {
			continue // a zombie, or gone
		}
		if hasDisplay(env, name) {
			out = append(out, pid)
		}
	}
	return out
}

// hasDisplay reports whether a /proc/PID/environ says DISPLAY=name.
func hasDisplay(env []byte, name string) bool {
	env = append([]byte{0}, env...)
	for _, w := range []string{"DISPLAY=" + name + "\x00", "DISPLAY=" + name + ".0\x00"} {
		if bytes.Contains(env, append([]byte{0}, w...)) {
			return true
		}
	}
	return false
}

// descendants are all processes below pid in the process tree.
func descendants(pid int) map[int]bool {
	children := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp := parentOf(p); pp > 0 {
			children[pp] = append(children[pp], p)
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

// procStat returns the state letter and parent of pid from /proc/pid/stat.
func procStat(pid int) (state byte, ppid int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// The command name is in parentheses and may itself contain spaces or
	// parentheses; the fields after the last ')' are fixed.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, 0, false
	}
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 2 {
		return 0, 0, false
	}
	pp, _ := strconv.Atoi(f[1])
	return f[0][0], pp, true
}

func parentOf(pid int) int {
	_, pp, _ := procStat(pid)
	return pp
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	st, _, ok := procStat(pid)
	return ok && st != 'Z' && st != 'X'
}

// waitGone waits until none of pids is alive, or ctx ends.
func waitGone(ctx context.Context, pids []int) error {
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
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d desktop processes still running after SIGKILL: %w", left, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}
