package xwin_test

import (
	"slices"
	"testing"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/internal/xsel"
	"github.com/deskenv/deskenv/internal/xwin"
)

// desk is a bare Xvfb and a connection that makes the windows of a test
// the way a window manager and its clients would.
type desk struct {
	t    *testing.T
	c    *xgb.Conn
	root xproto.Window
}

func newDesk(t *testing.T) *desk {
	t.Helper()
	d := testrig.Display(t, display.Config{})
	c, err := d.Dial()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &desk{t: t, c: c, root: xproto.Setup(c).DefaultScreen(c).Root}
}

// window makes a child of parent with WM_CLASS (when class is not "") and
// WM_NAME (when title is not ""), mapped when mapped is set.
func (k *desk) window(parent xproto.Window, class, title string, mapped bool) xproto.Window {
	k.t.Helper()
	w, err := xproto.NewWindowId(k.c)
	if err != nil {
		k.t.Fatal(err)
	}
	if err := xproto.CreateWindowChecked(k.c, 0, w, parent, 0, 0, 10, 10, 0, xproto.WindowClassInputOutput, 0, 0, nil).Check(); err != nil {
		k.t.Fatal(err)
	}
	if class != "" {
		k.prop(w, xproto.AtomWmClass, xproto.AtomString, 8, []byte(class))
	}
	if title != "" {
		k.prop(w, xproto.AtomWmName, xproto.AtomString, 8, []byte(title))
	}
	if mapped {
		xproto.MapWindow(k.c, w)
	}
	return w
}

func (k *desk) prop(w xproto.Window, prop, typ xproto.Atom, format byte, data []byte) {
	k.t.Helper()
	n := uint32(len(data)) / uint32(format/8)
	if err := xproto.ChangePropertyChecked(k.c, xproto.PropModeReplace, w, prop, typ, format, n, data).Check(); err != nil {
		k.t.Fatal(err)
	}
}

func (k *desk) rootWindows(name string, ws ...xproto.Window) {
	k.t.Helper()
	a, err := xsel.InternAtoms(k.c, name)
	if err != nil {
		k.t.Fatal(err)
	}
	buf := make([]byte, 4*len(ws))
	for i, w := range ws {
		xgb.Put32(buf[4*i:], uint32(w))
	}
	k.prop(k.root, a[name], xproto.AtomWindow, 32, buf)
}

// TestWindows builds a desktop by hand and checks which windows are listed:
// named top-level windows and named windows inside unnamed frames when
// viewable, and the window manager's clients whatever their state, but
// neither unmapped windows nor the window manager's check window.
func TestWindows(t *testing.T) {
	k := newDesk(t)
	top := k.window(k.root, "xterm\x00XTerm\x00", "a shell", true)
	frame := k.window(k.root, "", "", true)
	border := k.window(frame, "", "", true)
	inFrame := k.window(border, "gedit\x00Gedit\x00", "", true)
	k.window(k.root, "hidden\x00Hidden\x00", "not mapped", false)
	k.window(k.root, "", "", true) // an unnamed, empty window: nothing
	iconified := k.window(k.root, "mail\x00Mail\x00", "inbox", false)
	check := k.window(k.root, "", "Openbox", true)
	k.rootWindows("_NET_CLIENT_LIST", iconified)
	k.rootWindows("_NET_SUPPORTING_WM_CHECK", check)

	l, err := xwin.NewLister(k.c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := l.Windows()
	if err != nil {
		t.Fatal(err)
	}
	want := []xwin.Window{
		{ID: uint32(iconified), Instance: "mail", Class: "Mail", Title: "inbox"},
		{ID: uint32(top), Instance: "xterm", Class: "XTerm", Title: "a shell", Viewable: true},
		{ID: uint32(inFrame), Instance: "gedit", Class: "Gedit", Viewable: true},
	}
	if !slices.Equal(got, want) {
		t.Errorf("Windows() =\n%+v\nwant\n%+v", got, want)
	}
}
