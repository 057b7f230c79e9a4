// Package xwin lists a display's top-level windows, the windows a person
// would call the desktop's: those the window manager lists as its clients
// (_NET_CLIENT_LIST), and the viewable children of the root window that
// carry a name (WM_CLASS or a title), or, for an unnamed one (a window
// manager's frame), the named windows inside it. Task checks (is a window
// open?) and the desktop's reset (are the session's windows back?) both ask
// it, so they agree on what a window is.
package xwin

import (
	"bytes"
	"slices"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"

	"github.com/deskenv/deskenv/internal/xsel"
)

// maxDepth is how deep inside an unnamed root child (a frame, a frame's
// border) a client window is looked for.
const maxDepth = 3

// Window is one top-level client window.
type Window struct {
	ID       uint32
	Instance string // WM_CLASS res_name, e.g. "xterm"
	Class    string // WM_CLASS res_class, e.g. "XTerm"
	Title    string // _NET_WM_NAME, or else WM_NAME
	PID      int    // _NET_WM_PID; 0 when the window does not say
	// Viewable says the window and its ancestors are mapped; a window the
	// window manager lists may be iconified or on another workspace.
	Viewable bool
}

// named reports whether w carries a name of a client: WM_CLASS or a title.
func (w Window) named() bool { return w.Instance != "" || w.Class != "" || w.Title != "" }

// Lister lists the top-level windows of the display a connection is to. It
// sends its requests in batches, one round trip per level of the tree, since
// task checks list the windows on every poll.
type Lister struct {
	c    *xgb.Conn
	root xproto.Window

	clientList, wmCheck, netName, utf8, pid xproto.Atom
}

// NewLister interns the atoms the Lister reads on c.
func NewLister(c *xgb.Conn) (*Lister, error) {
	atoms, err := xsel.InternAtoms(c, "_NET_CLIENT_LIST", "_NET_SUPPORTING_WM_CHECK", "_NET_WM_NAME", "UTF8_STRING", "_NET_WM_PID")
	if err != nil {
		return nil, err
	}
	return &Lister{
		c: c, root: xproto.Setup(c).DefaultScreen(c).Root,
		clientList: atoms["_NET_CLIENT_LIST"], wmCheck: atoms["_NET_SUPPORTING_WM_CHECK"],
		netName: atoms["_NET_WM_NAME"], utf8: atoms["UTF8_STRING"], pid: atoms["_NET_WM_PID"],
	}, nil
}

// Windows lists the top-level windows: the window manager's clients first,
// in its order, then the others in stacking order (bottom first). The window
// manager's own check window (_NET_SUPPORTING_WM_CHECK) is no window a person
// sees and is left out. Windows destroyed while it looks are left out too.
func (l *Lister) Windows() ([]Window, error) {
	clients, check, children, err := l.rootState()
	if err != nil {
		return nil, err
	}
	var out list
	known := l.describe(slices.Concat(clients, children))
	for _, w := range clients {
		if win, ok := known[w]; ok {
			out.add(win)
		}
	}
	level := without(children, check)
	for depth := 0; len(level) > 0 && depth <= maxDepth; depth++ {
		frames := out.addNamed(level, known)
		level = l.children(frames)
		for w, win := range l.describe(level) {
			known[w] = win
		}
	}
	return out.windows, nil
}

// rootState reads the window manager's client list and check window and the
// root window's children.
func (l *Lister) rootState() (clients []xproto.Window, check xproto.Window, children []xproto.Window, err error) {
	clientCk := xproto.GetProperty(l.c, false, l.root, l.clientList, xproto.AtomWindow, 0, 1<<16)
	checkCk := xproto.GetProperty(l.c, false, l.root, l.wmCheck, xproto.AtomWindow, 0, 1)
	treeCk := xproto.QueryTree(l.c, l.root)
	clients, err = windowsProp(clientCk)
	if err != nil {
		return nil, 0, nil, err
	}
	if ws, _ := windowsProp(checkCk); len(ws) > 0 {
		check = ws[0]
	}
	tree, err := treeCk.Reply()
	if err != nil {
		return nil, 0, nil, err
	}
	return clients, check, tree.Children, nil
}

// children lists the children of each of ws.
func (l *Lister) children(ws []xproto.Window) []xproto.Window {
	cks := make([]xproto.QueryTreeCookie, len(ws))
	for i, w := range ws {
		cks[i] = xproto.QueryTree(l.c, w)
	}
	var out []xproto.Window
	for _, ck := range cks {
		if r, err := ck.Reply(); err == nil {
			out = append(out, r.Children...)
		}
	}
	return out
}

// queries are the requests describe sends about one window.
type queries struct {
	attrs                xproto.GetWindowAttributesCookie
	class, net, wm, ppid xproto.GetPropertyCookie
}

// describe reads each window's map state, WM_CLASS, title and process id,
// all requests first and then all replies. A window that is gone is left out.
func (l *Lister) describe(ws []xproto.Window) map[xproto.Window]Window {
	cks := make([]queries, len(ws))
	for i, w := range ws {
		cks[i] = queries{
			attrs: xproto.GetWindowAttributes(l.c, w),
			class: xproto.GetProperty(l.c, false, w, xproto.AtomWmClass, xproto.AtomString, 0, 256),
			net:   xproto.GetProperty(l.c, false, w, l.netName, xproto.GetPropertyTypeAny, 0, 1024),
			wm:    xproto.GetProperty(l.c, false, w, xproto.AtomWmName, xproto.GetPropertyTypeAny, 0, 1024),
			ppid:  xproto.GetProperty(l.c, false, w, l.pid, xproto.AtomCardinal, 0, 1),
		}
	}
	out := make(map[xproto.Window]Window, len(ws))
	for i, ck := range cks {
		if win, ok := l.window(ws[i], ck); ok {
			out[ws[i]] = win
		}
	}
	return out
}

// window reads the replies of one window's queries.
func (l *Lister) window(w xproto.Window, ck queries) (Window, bool) {
	attrs, aerr := ck.attrs.Reply()
	class, cerr := ck.class.Reply()
	title := l.title(ck.net, ck.wm)
	pid := cardinal(ck.ppid)
	if aerr != nil || cerr != nil {
		return Window{}, false // destroyed while we looked
	}
	win := Window{ID: uint32(w), Title: title, PID: pid, Viewable: attrs.MapState == xproto.MapStateViewable}
	win.Instance, win.Class = wmClass(class)
	return win, true
}

// wmClass splits a WM_CLASS property into its instance and class.
func wmClass(r *xproto.GetPropertyReply) (instance, class string) {
	if r.Format != 8 || len(r.Value) == 0 {
		return "", ""
	}
	parts := bytes.Split(bytes.TrimRight(r.Value, "\x00"), []byte{0})
	if len(parts) > 1 {
		return string(parts[0]), string(parts[1])
	}
	return string(parts[0]), ""
}

// title is _NET_WM_NAME, or else WM_NAME, as text.
func (l *Lister) title(net, wm xproto.GetPropertyCookie) string {
	n, w := l.text(net), l.text(wm)
	if n != "" {
		return n
	}
	return w
}

// text is an 8-bit text property's value, "" when it has none.
func (l *Lister) text(ck xproto.GetPropertyCookie) string {
	r, err := ck.Reply()
	if err != nil || r.Format != 8 || len(r.Value) == 0 {
		return ""
	}
	return xsel.DecodeText(r.Value, r.Type, l.utf8)
}

// cardinal is a 32-bit CARDINAL property's value, 0 when it has none.
func cardinal(ck xproto.GetPropertyCookie) int {
	r, err := ck.Reply()
	if err != nil || r.Format != 32 || len(r.Value) < 4 {
		return 0
	}
	return int(xgb.Get32(r.Value))
}

// list is windows in the order they were added, each once.
type list struct {
	windows []Window
	seen    map[uint32]bool
}

// addNamed adds the viewable named windows of level and returns its
// viewable unnamed ones (frames) to look inside. A window missing from
// known is gone.
func (l *list) addNamed(level []xproto.Window, known map[xproto.Window]Window) (frames []xproto.Window) {
	for _, w := range level {
		win, ok := known[w]
		switch {
		case !ok || !win.Viewable:
		case win.named():
			l.add(win)
		default:
			frames = append(frames, w)
		}
	}
	return frames
}

func (l *list) add(w Window) {
	if l.seen == nil {
		l.seen = map[uint32]bool{}
	}
	if !l.seen[w.ID] {
		l.seen[w.ID] = true
		l.windows = append(l.windows, w)
	}
}

// windowsProp is a property of type WINDOW as a list; nil when the
// property is not set.
func windowsProp(ck xproto.GetPropertyCookie) ([]xproto.Window, error) {
	r, err := ck.Reply()
	if err != nil || r.Type != xproto.AtomWindow || r.Format != 32 {
		return nil, err
	}
	return windowList(r.Value), nil
}

func windowList(b []byte) []xproto.Window {
	out := make([]xproto.Window, 0, len(b)/4)
	for i := 0; i+4 <= len(b); i += 4 {
		out = append(out, xproto.Window(xgb.Get32(b[i:])))
	}
	return out
}

// without is ws less w.
func without(ws []xproto.Window, w xproto.Window) []xproto.Window {
	out := make([]xproto.Window, 0, len(ws))
	for _, x := range ws {
		if x != w {
			out = append(out, x)
		}
	}
	return out
}
