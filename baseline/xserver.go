package baseline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/res"
	"github.com/jezek/xgb/xproto"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/internal/xext"
	"github.com/deskenv/deskenv/internal/xwin"
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
	conn   *xgb.Conn
	root   xproto.Window
	atoms  map[string]xproto.Atom
	xres   bool
	lister *xwin.Lister // made on the first windows
}

// dialLimit bounds connecting to the X server: one that is stopped accepts
// the socket and then never finishes the handshake.
const dialLimit = 10 * time.Second

func openX(name string) (*xsession, error) {
	ctx, cancel := context.WithTimeout(context.Background(), dialLimit)
	defer cancel()
	conn, err := display.DialContext(ctx, name)
	if err != nil {
		return nil, err
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
		return nil, errors.New("list X clients: the X server has no X-Resource extension (1.2 or later), so its clients' processes cannot be found")
	}
	byBase, err := s.clientPIDs()
	if err != nil {
		return nil, err
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
		out = append(out, xclient{base: c.ResourceBase, pid: pidOf(byBase, c)})
	}
	return out, nil
}

// clientPIDs are the process ids of the clients the server knows one of,
// by the client's resource base.
func (s *xsession) clientPIDs() (map[uint32]int, error) {
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
	return byBase, nil
}

// pidOf is client c's process id in byBase, 0 if unknown. Some servers key
// ids by any XID of the client, not its resource base.
func pidOf(byBase map[uint32]int, c res.Client) int {
	if pid := byBase[c.ResourceBase]; pid != 0 {
		return pid
	}
	pid := 0
	for base, p := range byBase {
		if base&^c.ResourceMask == c.ResourceBase {
			pid = p
		}
	}
	return pid
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
// properties want lacks are deleted, changed ones written back; those in
// skip are left alone.
func (s *xsession) restoreRootProps(want map[xproto.Atom]rootProp, skip map[xproto.Atom]bool) (int, error) {
	have, err := s.rootProps()
	if err != nil {
		return 0, err
	}
	n := 0
	for a := range have {
		if _, ok := want[a]; !ok && !skip[a] {
			xproto.DeleteProperty(s.conn, s.root, a)
			n++
		}
	}
	for a, w := range want {
		if !skip[a] && s.putRootProp(a, have[a], w) {
			n++
		}
	}
	_, err = xproto.GetInputFocus(s.conn).Reply()
	return n, err
}

// putRootProp writes w back as property a of the root window unless it is
// what the window has; it reports whether it wrote.
func (s *xsession) putRootProp(a xproto.Atom, have, w rootProp) bool {
	if have.typ == w.typ && have.format == w.format && bytes.Equal(have.data, w.data) {
		return false
	}
	unit := uint32(w.format / 8)
	if unit == 0 {
		return false
	}
	xproto.ChangeProperty(s.conn, xproto.PropModeReplace, s.root, a, w.typ, w.format, uint32(len(w.data))/unit, w.data)
	return true
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
// WM_CLASS, found under the root or inside a window manager's frame, as
// internal/xwin finds them for task checks too), sorted by class, instance
// and title.
func (s *xsession) windows() ([]Window, error) {
	if s.lister == nil {
		l, err := xwin.NewLister(s.conn)
		if err != nil {
			return nil, fmt.Errorf("list windows: %w", err)
		}
		s.lister = l
	}
	ws, err := s.lister.Windows()
	if err != nil {
		return nil, fmt.Errorf("list windows: %w", err)
	}
	var out []Window
	for _, w := range ws {
		if w.Viewable && (w.Instance != "" || w.Class != "") {
			out = append(out, Window{ID: w.ID, Instance: w.Instance, Class: w.Class, Title: w.Title, PID: w.PID})
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

// ClassKey is a window list reduced to what a reset must reproduce: the
// multiset of WM_CLASS pairs, as "instance/Class" joined by commas.
func ClassKey(ws []Window) string {
	keys := make([]string, len(ws))
	for i, w := range ws {
		keys[i] = w.Instance + "/" + w.Class
	}
	sort.Strings(keys)
	return strings.Join(keys, ",")
}

// ListWindows lists the viewable top-level client windows of display name,
// as a restore compares them.
func ListWindows(name string) ([]Window, error) {
	x, err := openX(name)
	if err != nil {
		return nil, err
	}
	defer x.Close()
	return x.windows()
}

// WaitWindows waits until the top-level windows of display name are want's
// again (same WM_CLASS multiset), up to limit. It returns the windows last
// seen and whether they matched; only a failure to list them, or ctx's end,
// is an error.
func WaitWindows(ctx context.Context, name string, want []Window, limit time.Duration) ([]Window, bool, error) {
	x, err := openX(name)
	if err != nil {
		return nil, false, err
	}
	defer x.Close()
	return x.waitWindows(ctx, want, limit)
}

// waitWindows is WaitWindows on s's connection.
func (s *xsession) waitWindows(ctx context.Context, want []Window, limit time.Duration) ([]Window, bool, error) {
	x := s
	changed := x.rootChanges()
	key := ClassKey(want)
	deadline := time.Now().Add(limit)
	for {
		ws, err := x.windows()
		if err != nil {
			return nil, false, err
		}
		if ClassKey(ws) == key {
			return ws, true, nil
		}
		if time.Now().After(deadline) {
			return ws, false, nil
		}
		// The next change under the root window (a frame or a window
		// mapped, the window manager's client list updated) rather than a
		// polling interval; the timeout covers what no such event shows.
		select {
		case <-ctx.Done():
			return ws, false, ctx.Err()
		case <-changed:
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// rootChanges selects the changes of the root window's children and
// properties on s's connection and returns a channel that receives
// (without blocking the reader) once after each batch of them; it stops
// when the connection closes.
func (s *xsession) rootChanges() <-chan struct{} {
	ch := make(chan struct{}, 1)
	err := xproto.ChangeWindowAttributesChecked(s.conn, s.root, xproto.CwEventMask,
		[]uint32{xproto.EventMaskSubstructureNotify | xproto.EventMaskPropertyChange}).Check()
	if err != nil {
		return ch // the timeout alone, as polling did
	}
	go func() {
		for {
			ev, err := s.conn.WaitForEvent()
			if ev == nil && err == nil {
				return
			}
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}()
	return ch
}
