package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/damage"
	"github.com/jezek/xgb/xfixes"
	"github.com/jezek/xgb/xproto"

	"github.com/deskenv/deskenv/internal/xext"
)

// maxClipBytes bounds clipboard text in either direction. One X property
// request holds at most 256 kB without BIG-REQUESTS, and larger transfers
// would need the INCR protocol; people paste text, not files.
const maxClipBytes = 200 << 10

// xwatch is the stream's own X connection: it tells the video loop when the
// screen was drawn on (DAMAGE) and where the pointer is and what it looks
// like (XFIXES), and it owns and watches the CLIPBOARD selection. It is a
// connection of its own because it reads events, which must not be stolen
// from other users of the display's connection.
type xwatch struct {
	s   *Server
	log *slog.Logger

	mu      sync.Mutex
	x       *xstate // nil while the display is down
	closed  bool
	wantDmg bool   // the video loop runs and wants damage events
	clip    string // the text we serve while we own CLIPBOARD
	clipBy  string // viewer that set it

	dirty atomic.Bool   // damage seen since the last takeDamage
	wake  chan struct{} // signalled on damage, for the video loop

	stop chan struct{}
	done chan struct{}
}

// xstate is one connection to one X server generation.
type xstate struct {
	c         *xgb.Conn
	gen       uint64
	root, win xproto.Window
	hasDamage bool
	hasFixes  bool
	dmg       damage.Damage // 0 when not tracking

	aClipboard, aUTF8, aTargets, aText, aString, aIncr, aProp, aAtom xproto.Atom
}

func newXWatch(s *Server) *xwatch {
	w := &xwatch{s: s, log: s.log.With("part", "xwatch"), stop: make(chan struct{}), done: make(chan struct{}), wake: make(chan struct{}, 1)}
	// The first connection is made here, not in the goroutine: setting up
	// extensions races with other connections' event readers in xgb (it
	// writes package-level maps), so it belongs to start-up.
	changed := s.d.Changed()
	x, err := w.connect()
	if err != nil {
		w.log.Warn("cannot watch the display for changes and the clipboard; retrying", "err", err)
	}
	go w.run(x, changed)
	return w
}

func (w *xwatch) close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	x := w.x
	w.mu.Unlock()
	close(w.stop)
	if x != nil {
		x.c.Close()
	}
	<-w.done
}

// run keeps a connection to the current X server and reads its events. x is
// the first connection, or nil.
func (w *xwatch) run(x *xstate, changed <-chan struct{}) {
	defer close(w.done)
	for first := true; ; first = false {
		var err error
		if !first {
			changed = w.s.d.Changed()
			x, err = w.connect()
		}
		if err == nil && x != nil {
			w.mu.Lock()
			if w.closed {
				w.mu.Unlock()
				x.c.Close()
				return
			}
			w.x = x
			want := w.wantDmg
			w.mu.Unlock()
			if want {
				w.startDamage()
			}
			w.events(x)
			w.mu.Lock()
			if w.x == x {
				w.x = nil
			}
			w.mu.Unlock()
			x.c.Close()
		} else if err != nil {
			w.log.Warn("cannot watch the display for changes and the clipboard; retrying", "err", err)
		}
		// Wait for a new server, or retry a little later.
		select {
		case <-w.stop:
			return
		case <-changed:
		case <-time.After(2 * time.Second):
		}
	}
}

func (w *xwatch) connect() (*xstate, error) {
	gen := w.s.d.Generation()
	c, err := w.s.d.Dial()
	if err != nil {
		return nil, err
	}
	x := &xstate{c: c, gen: gen, root: xproto.Setup(c).DefaultScreen(c).Root}
	fail := func(err error) (*xstate, error) { c.Close(); return nil, err }
	if err := xext.Init(c, "XFIXES", xfixes.Init); err == nil {
		if _, err := xfixes.QueryVersion(c, 5, 0).Reply(); err == nil {
			x.hasFixes = true
		}
	}
	if x.hasFixes {
		if err := xext.Init(c, "DAMAGE", damage.Init); err == nil {
			if _, err := damage.QueryVersion(c, 1, 1).Reply(); err == nil {
				x.hasDamage = true
			}
		}
	}
	if !x.hasFixes {
		w.log.Warn("the X server has no XFIXES: no pointer in the video, no clipboard changes from the desktop")
	}
	if !x.hasDamage {
		w.log.Warn("the X server has no DAMAGE: the screen is captured on every tick to find changes")
	}
	for _, a := range []struct {
		name string
		dst  *xproto.Atom
	}{
		{"CLIPBOARD", &x.aClipboard}, {"UTF8_STRING", &x.aUTF8}, {"TARGETS", &x.aTargets},
		{"TEXT", &x.aText}, {"STRING", &x.aString}, {"INCR", &x.aIncr},
		{"DESKENV_CLIPBOARD", &x.aProp}, {"ATOM", &x.aAtom},
	} {
		r, err := xproto.InternAtom(c, false, uint16(len(a.name)), a.name).Reply()
		if err != nil {
			return fail(fmt.Errorf("stream: intern atom %s: %w", a.name, err))
		}
		*a.dst = r.Atom
	}
	win, err := xproto.NewWindowId(c)
	if err != nil {
		return fail(fmt.Errorf("stream: window id: %w", err))
	}
	// An unmapped 1x1 window: it only exists to own the selection and
	// receive its properties.
	if err := xproto.CreateWindowChecked(c, 0, win, x.root, -1, -1, 1, 1, 0, xproto.WindowClassInputOnly, 0,
		xproto.CwEventMask, []uint32{xproto.EventMaskPropertyChange}).Check(); err != nil {
		return fail(fmt.Errorf("stream: create the clipboard window: %w", err))
	}
	x.win = win
	if x.hasFixes {
		if err := xfixes.SelectSelectionInputChecked(c, win, x.aClipboard, xfixes.SelectionEventMaskSetSelectionOwner).Check(); err != nil {
			w.log.Warn("cannot watch the clipboard", "err", err)
		}
	}
	// After a server restart the clipboard we served is gone with it.
	w.mu.Lock()
	w.clip, w.clipBy = "", ""
	w.mu.Unlock()
	return x, nil
}

// events handles X events until the connection closes.
func (w *xwatch) events(x *xstate) {
	for {
		ev, err := x.c.WaitForEvent()
		if ev == nil && err == nil {
			return
		}
		if err != nil {
			w.log.Debug("X error on the stream connection", "err", err)
			continue
		}
		switch e := ev.(type) {
		case damage.NotifyEvent:
			w.dirty.Store(true)
			select {
			case w.wake <- struct{}{}:
			default:
			}
		case xproto.SelectionRequestEvent:
			w.serveSelection(x, e)
		case xproto.SelectionClearEvent:
			w.mu.Lock()
			w.clip, w.clipBy = "", ""
			w.mu.Unlock()
		case xfixes.SelectionNotifyEvent:
			w.ownerChanged(x, e)
		case xproto.SelectionNotifyEvent:
			w.converted(x, e)
		}
	}
}

// startDamage asks for damage events on the whole screen.
func (w *xwatch) startDamage() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.wantDmg = true
	x := w.x
	if x == nil || !x.hasDamage || x.dmg != 0 {
		return
	}
	id, err := damage.NewDamageId(x.c)
	if err != nil {
		w.log.Warn("damage id", "err", err)
		return
	}
	if err := damage.CreateChecked(x.c, id, xproto.Drawable(x.root), damage.ReportLevelNonEmpty).Check(); err != nil {
		w.log.Warn("cannot track screen damage", "err", err)
		return
	}
	x.dmg = id
	w.dirty.Store(true) // whatever happened before tracking began
}

// stopDamage ends damage events: with no viewer the X server sends nothing.
func (w *xwatch) stopDamage() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.wantDmg = false
	if x := w.x; x != nil && x.dmg != 0 {
		damage.Destroy(x.c, x.dmg)
		x.dmg = 0
	}
}

// takeDamage reports whether the screen may have changed since the last
// call. Without DAMAGE it always says yes. The damage is cleared with a round
// trip before it returns, so a capture taken afterwards includes everything
// reported, and a change after the clear raises a new event.
func (w *xwatch) takeDamage() bool {
	w.mu.Lock()
	x := w.x
	tracking := x != nil && x.dmg != 0
	w.mu.Unlock()
	if !tracking {
		return true
	}
	if !w.dirty.Swap(false) {
		return false
	}
	if err := damage.SubtractChecked(x.c, x.dmg, 0, 0).Check(); err != nil {
		w.dirty.Store(true)
		return true
	}
	return true
}

// cursor is the pointer's position and, when it changed shape, its image.
type cursorState struct {
	ok           bool
	x, y         int // hotspot position on the screen
	serial       uint32
	w, h         int
	xhot, yhot   int
	argb         []uint32 // premultiplied ARGB, w*h
	imageChanged bool
}

// cursor reads the pointer position and image (XFIXES). prevSerial avoids
// copying an unchanged image.
func (w *xwatch) cursor(prevSerial uint32) cursorState {
	w.mu.Lock()
	x := w.x
	w.mu.Unlock()
	if x == nil || !x.hasFixes {
		return cursorState{}
	}
	r, err := xfixes.GetCursorImage(x.c).Reply()
	if err != nil || r == nil {
		return cursorState{}
	}
	cs := cursorState{ok: true, x: int(r.X), y: int(r.Y), serial: r.CursorSerial, w: int(r.Width), h: int(r.Height), xhot: int(r.Xhot), yhot: int(r.Yhot)}
	if r.CursorSerial != prevSerial && len(r.CursorImage) >= cs.w*cs.h {
		cs.argb = r.CursorImage[:cs.w*cs.h]
		cs.imageChanged = true
	}
	return cs
}

// setClipboard makes text the desktop's CLIPBOARD; by is the viewer that set
// it, which is not sent the change back.
func (w *xwatch) setClipboard(ctx context.Context, text, by string) error {
	if len(text) > maxClipBytes {
		return fmt.Errorf("clipboard text of %d bytes is too large: at most %d", len(text), maxClipBytes)
	}
	w.mu.Lock()
	x := w.x
	if x == nil {
		w.mu.Unlock()
		return errors.New("the desktop is not reachable right now: try again")
	}
	w.clip, w.clipBy = text, by
	w.mu.Unlock()
	if err := xproto.SetSelectionOwnerChecked(x.c, x.win, x.aClipboard, xproto.TimeCurrentTime).Check(); err != nil {
		return fmt.Errorf("set the desktop clipboard: %w", err)
	}
	r, err := xproto.GetSelectionOwner(x.c, x.aClipboard).Reply()
	if err != nil {
		return fmt.Errorf("set the desktop clipboard: %w", err)
	}
	if r.Owner != x.win {
		return errors.New("set the desktop clipboard: another program took it at the same moment")
	}
	return ctx.Err()
}

// serveSelection answers a program pasting our clipboard.
func (w *xwatch) serveSelection(x *xstate, e xproto.SelectionRequestEvent) {
	w.mu.Lock()
	text := w.clip
	w.mu.Unlock()
	prop := e.Property
	if prop == xproto.AtomNone {
		prop = e.Target // obsolete clients: ICCCM says use the target as the property
	}
	ok := e.Selection == x.aClipboard
	if ok {
		switch e.Target {
		case x.aTargets:
			atoms := []xproto.Atom{x.aTargets, x.aUTF8, x.aText, x.aString}
			buf := make([]byte, 4*len(atoms))
			for i, a := range atoms {
				xgb.Put32(buf[4*i:], uint32(a))
			}
			xproto.ChangeProperty(x.c, xproto.PropModeReplace, e.Requestor, prop, x.aAtom, 32, uint32(len(atoms)), buf)
		case x.aUTF8, x.aText:
			xproto.ChangeProperty(x.c, xproto.PropModeReplace, e.Requestor, prop, x.aUTF8, 8, uint32(len(text)), []byte(text))
		case x.aString:
			b := latin1(text)
			xproto.ChangeProperty(x.c, xproto.PropModeReplace, e.Requestor, prop, x.aString, 8, uint32(len(b)), b)
		default:
			ok = false
		}
	}
	if !ok {
		prop = xproto.AtomNone
	}
	ev := xproto.SelectionNotifyEvent{Time: e.Time, Requestor: e.Requestor, Selection: e.Selection, Target: e.Target, Property: prop}
	xproto.SendEvent(x.c, false, e.Requestor, 0, string(ev.Bytes()))
}

// latin1 converts text for the STRING target; characters outside Latin-1
// become '?', as ICCCM STRING cannot carry them.
func latin1(s string) []byte {
	b := make([]byte, 0, len(s))
	for _, r := range s {
		if r < 256 {
			b = append(b, byte(r))
		} else {
			b = append(b, '?')
		}
	}
	return b
}

// ownerChanged reacts to a new CLIPBOARD owner: it fetches the text to send
// to viewers.
func (w *xwatch) ownerChanged(x *xstate, e xfixes.SelectionNotifyEvent) {
	if e.Selection != x.aClipboard || e.Owner == xproto.WindowNone {
		return
	}
	if e.Owner == x.win {
		// A viewer set it: tell the others.
		w.mu.Lock()
		text, by := w.clip, w.clipBy
		w.mu.Unlock()
		w.s.broadcastClip(text, by)
		return
	}
	if w.s.clipAudience() == 0 {
		return // nobody to tell: do not fetch it at all
	}
	xproto.ConvertSelection(x.c, x.win, x.aClipboard, x.aUTF8, x.aProp, e.SelectionTimestamp)
}

// converted reads the clipboard text a ConvertSelection produced.
func (w *xwatch) converted(x *xstate, e xproto.SelectionNotifyEvent) {
	if e.Selection != x.aClipboard || e.Property == xproto.AtomNone {
		return
	}
	r, err := xproto.GetProperty(x.c, true, x.win, e.Property, xproto.GetPropertyTypeAny, 0, maxClipBytes/4+1).Reply()
	if err != nil || r == nil {
		return
	}
	if r.Type == x.aIncr || r.BytesAfter > 0 {
		w.log.Debug("desktop clipboard too large to send to viewers", "limit", maxClipBytes)
		return
	}
	if r.Format != 8 {
		return
	}
	text := string(r.Value)
	if !utf8.ValidString(text) {
		text = string([]rune(string(latinRunes(r.Value))))
	}
	w.s.broadcastClip(text, "")
}

func latinRunes(b []byte) []rune {
	rs := make([]rune, len(b))
	for i, c := range b {
		rs[i] = rune(c)
	}
	return rs
}
