package baseline

import (
	"context"
	"fmt"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
)

// The window manager a reset keeps (display.CheckWindowManager) still has
// whatever state the agent gave it through X: more or fewer desktops,
// another current desktop, the desktop shown. Writing the root window's
// properties back, as for a window manager that restarts, would only make
// them disagree with it: it is asked instead, with the EWMH messages a
// pager sends, and the reset waits until its properties say it complied.

// wmStates are the window manager's root properties a reset asks it to
// put back, in the order it asks (the number of desktops before the
// current one, which must exist).
var wmStates = []string{"_NET_NUMBER_OF_DESKTOPS", "_NET_CURRENT_DESKTOP", "_NET_SHOWING_DESKTOP"}

// wmLive are the root properties of a kept window manager that describe
// its windows and itself as they are now: a reset neither writes nor
// deletes them (the baseline's name windows and processes long gone).
var wmLive = []string{"_NET_CLIENT_LIST", "_NET_CLIENT_LIST_STACKING", "_NET_ACTIVE_WINDOW",
	"_NET_SUPPORTING_WM_CHECK", "_OPENBOX_PID"}

// wmStateWait bounds the wait for the window manager to comply.
const wmStateWait = time.Second

// restoreWM asks the kept window manager to put its desktops back as the
// baseline has them and waits until it has; it returns how many requests
// it sent. An error means it did not comply, or the properties that say
// who it is were changed: the reset restarts it.
func (b *Desktop) restoreWM(ctx context.Context, x *xsession, window xproto.Window) (int, error) {
	if got := x.cardinal("_NET_SUPPORTING_WM_CHECK"); got != uint32(window) {
		return 0, fmt.Errorf("the root window names window %#x as the window manager's, not %#x", got, window)
	}
	sent := 0
	for _, name := range wmStates {
		want, ok := b.rootProps[x.atom(name)]
		if !ok || want.format != 32 || len(want.data) < 4 {
			continue
		}
		if x.cardinal(name) == xgb.Get32(want.data) {
			continue
		}
		if err := x.sendRoot(name, xgb.Get32(want.data)); err != nil {
			return sent, err
		}
		sent++
	}
	if sent == 0 {
		return 0, nil
	}
	deadline := time.Now().Add(wmStateWait)
	for {
		left := ""
		for _, name := range wmStates {
			if want, ok := b.rootProps[x.atom(name)]; ok && len(want.data) >= 4 && x.cardinal(name) != xgb.Get32(want.data) {
				left = name
			}
		}
		if left == "" {
			return sent, nil
		}
		if time.Now().After(deadline) {
			return sent, fmt.Errorf("the window manager did not put %s back within %s", left, wmStateWait)
		}
		if err := sleep(ctx, 2*time.Millisecond); err != nil {
			return sent, err
		}
	}
}

// cardinal is the first 32-bit value of root property name, or 1<<32-1
// when it is missing.
func (s *xsession) cardinal(name string) uint32 {
	r, err := xproto.GetProperty(s.conn, false, s.root, s.atom(name), xproto.GetPropertyTypeAny, 0, 1).Reply()
	if err != nil || r.Format != 32 || len(r.Value) < 4 {
		return ^uint32(0)
	}
	return xgb.Get32(r.Value)
}

// sendRoot sends the EWMH client message name with value v to the root
// window, as a pager asks the window manager.
func (s *xsession) sendRoot(name string, v uint32) error {
	ev := xproto.ClientMessageEvent{Format: 32, Window: s.root, Type: s.atom(name),
		Data: xproto.ClientMessageDataUnionData32New([]uint32{v, 0, 0, 0, 0})}
	err := xproto.SendEventChecked(s.conn, false, s.root,
		xproto.EventMaskSubstructureRedirect|xproto.EventMaskSubstructureNotify, string(ev.Bytes())).Check()
	if err != nil {
		return fmt.Errorf("ask the window manager to restore %s: %w", name, err)
	}
	return nil
}

// liveAtoms are the root properties a reset leaves to a kept window
// manager: wmLive and the states restoreWM asked it for.
func (s *xsession) liveAtoms() map[xproto.Atom]bool {
	out := map[xproto.Atom]bool{}
	for _, name := range append(append([]string{}, wmLive...), wmStates...) {
		if a := s.atom(name); a != 0 {
			out[a] = true
		}
	}
	return out
}

// grabbed names what of the keyboard and the pointer some client holds
// grabbed ("" when neither): with every other client gone, the window
// manager's.
func (s *xsession) grabbed() string {
	k, err := xproto.GrabKeyboard(s.conn, false, s.root, xproto.TimeCurrentTime,
		xproto.GrabModeAsync, xproto.GrabModeAsync).Reply()
	if err != nil {
		return "keyboard (its grab could not be tested)"
	}
	if k.Status != xproto.GrabStatusSuccess {
		return "keyboard"
	}
	xproto.UngrabKeyboard(s.conn, xproto.TimeCurrentTime)
	p, err := xproto.GrabPointer(s.conn, false, s.root, 0, xproto.GrabModeAsync, xproto.GrabModeAsync,
		xproto.WindowNone, xproto.CursorNone, xproto.TimeCurrentTime).Reply()
	if err != nil {
		return "pointer (its grab could not be tested)"
	}
	if p.Status != xproto.GrabStatusSuccess {
		return "pointer"
	}
	xproto.UngrabPointer(s.conn, xproto.TimeCurrentTime)
	return ""
}

// windowOf names a window the window manager manages that is its own ("" when
// there is none): a prompt (openbox asks before it exits), which carries no
// WM_CLASS or _NET_WM_PID. A window is the client's whose resource base it
// shares with own, the window that holds the window manager selection.
func (s *xsession) windowOf(own xproto.Window) string {
	mask := xproto.Setup(s.conn).ResourceIdMask
	r, err := xproto.GetProperty(s.conn, false, s.root, s.atom("_NET_CLIENT_LIST"), xproto.AtomWindow, 0, 1<<16).Reply()
	if err != nil {
		return "its windows could not be listed"
	}
	for i := 0; i+4 <= len(r.Value) && r.Format == 32; i += 4 {
		w := xproto.Window(xgb.Get32(r.Value[i:]))
		if uint32(w)&^mask == uint32(own)&^mask {
			return fmt.Sprintf("window %#x", uint32(w))
		}
	}
	return ""
}
