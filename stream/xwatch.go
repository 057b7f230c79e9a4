package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xfixes"
	"github.com/jezek/xgb/xproto"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/internal/xext"
	"github.com/deskenv/deskenv/internal/xsel"
)

// maxClipBytes bounds clipboard text in either direction. One X property
// request holds at most 256 kB without BIG-REQUESTS, and larger transfers
// would need the INCR protocol; people paste text, not files.
const maxClipBytes = 200 << 10

// xwatch is the stream's own X connection (a display.Follower): it tells the
// video loop where the pointer is and what it looks like (XFIXES), and it
// watches who owns the CLIPBOARD selection. When the screen was drawn on
// comes from the capturer's damage subscription (screen.DamageFeed), the one
// settles use too. It is a connection of its own because it reads events, which
// must not be stolen from other users of the display's connection. The
// clipboard itself is set and read through internal/xsel, like every other
// clipboard user of the appliance.
type xwatch struct {
	s   *Server
	log *slog.Logger
	f   *display.Follower

	clip     *xsel.Owner   // the viewers' copies
	clipWant chan struct{} // the desktop's clipboard changed: fetch it for the viewers

	mu     sync.Mutex
	x      *xstate // nil while the display is down
	closed bool

	ctx  context.Context // ends at close
	stop context.CancelFunc
	done chan struct{}
}

// xstate is one connection to one X server generation.
type xstate struct {
	c          *xgb.Conn
	gen        uint64
	root       xproto.Window
	hasFixes   bool
	aClipboard xproto.Atom
}

func newXWatch(s *Server) *xwatch {
	w := &xwatch{s: s, log: s.log.With("part", "xwatch"), f: s.d.Follow(display.ReadEvents),
		clipWant: make(chan struct{}, 1), done: make(chan struct{})}
	w.ctx, w.stop = context.WithCancel(context.Background())
	owner, err := xsel.NewOwner(s.d.Name(), "CLIPBOARD", w.log)
	if err != nil {
		w.log.Warn("viewers cannot set the desktop's clipboard", "err", err)
	}
	w.clip = owner
	// The first connection is made here, not in the goroutine: setting up
	// extensions races with other connections' event readers in xgb (it
	// writes package-level maps), so it belongs to start-up.
	changed := s.d.Changed()
	x, err := w.connect()
	if err != nil {
		w.cannotWatch(err)
	}
	go func() {
		defer close(w.done)
		display.Reconnect(w.ctx, s.d, changed, x, err, w.connect, w.watch, w.cannotWatch)
	}()
	go w.fetchClipboard()
	return w
}

func (w *xwatch) close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	w.mu.Unlock()
	w.stop()
	w.f.Close() // ends events
	<-w.done
	if w.clip != nil {
		w.clip.Close()
	}
}

// cannotWatch says the display cannot be watched (for now).
func (w *xwatch) cannotWatch(err error) {
	w.log.Warn("cannot watch the display for changes and the clipboard; retrying", "err", err)
}

// watch makes x the current connection and reads its events until it
// closes, which happens when its server dies or at close.
func (w *xwatch) watch(x *xstate) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.x = x
	w.mu.Unlock()
	w.events(x)
	w.mu.Lock()
	if w.x == x {
		w.x = nil
	}
	w.mu.Unlock()
	w.f.Drop(x.gen)
}

func (w *xwatch) connect() (*xstate, error) {
	ctx, cancel := context.WithTimeout(w.ctx, 5*time.Second)
	defer cancel()
	c, gen, err := w.f.Get(ctx)
	if err != nil {
		return nil, err
	}
	x := &xstate{c: c, gen: gen, root: xproto.Setup(c).DefaultScreen(c).Root}
	x.hasFixes = xext.Init(c, "XFIXES", xfixes.Init) == nil && replied(xfixes.QueryVersion(c, 5, 0).Reply())
	if !x.hasFixes {
		w.log.Warn("the X server has no XFIXES: no pointer in the video, no clipboard changes from the desktop")
	}
	r, err := xproto.InternAtom(c, false, uint16(len("CLIPBOARD")), "CLIPBOARD").Reply()
	if err != nil {
		w.f.Drop(gen)
		return nil, fmt.Errorf("stream: intern atom CLIPBOARD: %w", err)
	}
	x.aClipboard = r.Atom
	if x.hasFixes {
		if err := xfixes.SelectSelectionInputChecked(c, x.root, x.aClipboard, xfixes.SelectionEventMaskSetSelectionOwner).Check(); err != nil {
			w.log.Warn("cannot watch the clipboard", "err", err)
		}
	}
	return x, nil
}

// replied reports whether an extension's version query was answered.
func replied[T any](_ T, err error) bool { return err == nil }

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
		if e, ok := ev.(xfixes.SelectionNotifyEvent); ok {
			w.ownerChanged(x, e)
		}
	}
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

// setClipboard makes text the desktop's CLIPBOARD and tells the other
// viewers; by is the viewer that set it, which is not sent it back.
func (w *xwatch) setClipboard(ctx context.Context, text, by string) error {
	if len(text) > maxClipBytes {
		return fmt.Errorf("clipboard text of %d bytes is too large: at most %d", len(text), maxClipBytes)
	}
	if w.clip == nil {
		return errors.New("the desktop's clipboard cannot be set")
	}
	if err := w.clip.Set(ctx, text); err != nil {
		return fmt.Errorf("set the desktop clipboard: %w", err)
	}
	w.s.broadcastClip(text, by)
	return nil
}

// ownerChanged reacts to a new CLIPBOARD owner: another program copied, so
// its text is fetched for the viewers. A viewer's own copy was sent to the
// others when it was set.
func (w *xwatch) ownerChanged(x *xstate, e xfixes.SelectionNotifyEvent) {
	if e.Selection != x.aClipboard || e.Owner == xproto.WindowNone {
		return
	}
	if w.clip != nil && w.clip.Holds(e.Owner) {
		return
	}
	if w.s.clipAudience() == 0 {
		return // nobody to tell: do not fetch it at all
	}
	select {
	case w.clipWant <- struct{}{}:
	default: // a fetch is pending; it reads the newest text
	}
}

// fetchClipboard reads the desktop's clipboard each time ownerChanged asks,
// aside from the event loop: the owner answers a paste request on its own
// time, while damage and cursor events must keep flowing.
func (w *xwatch) fetchClipboard() {
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-w.clipWant:
		}
		ctx, cancel := context.WithTimeout(w.ctx, xsel.DefaultTimeout)
		text, err := xsel.Read(ctx, w.s.d.Name(), "CLIPBOARD", maxClipBytes)
		cancel()
		if err != nil {
			w.log.Debug("cannot read the desktop clipboard for the viewers", "err", err, "limit", maxClipBytes)
			continue
		}
		w.s.broadcastClip(text, "")
	}
}
