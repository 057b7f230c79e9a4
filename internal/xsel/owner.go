package xsel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"

	"github.com/deskenv/deskenv/internal/xext"
)

// closeWait bounds how long Close waits for the X server to release the
// selection and hang up.
const closeWait = 2 * time.Second

// Owner holds a selection with text and answers other clients' paste
// requests (SelectionRequest) for the targets TARGETS, UTF8_STRING, TEXT and
// STRING until Close, or until another client takes the selection. Its
// methods are safe for concurrent use.
type Owner struct {
	display string
	sel     string
	log     *slog.Logger

	setMu sync.Mutex // one Set at a time, so the text and ownership change together

	mu     sync.Mutex
	closed bool
	conn   *ownerConn // nil until the first Set, and after the connection broke
}

// NewOwner makes an Owner of selection sel ("CLIPBOARD", "PRIMARY" or
// "SECONDARY", any case) on the X display named display (such as ":5"). It
// connects on the first Set, and again after the X server went away; log
// (nil: slog.Default()) receives what goes wrong while answering.
func NewOwner(display, sel string, log *slog.Logger) (*Owner, error) {
	name, err := selectionName(sel)
	if err != nil {
		return nil, fmt.Errorf("own selection: %w", err)
	}
	if display == "" {
		return nil, fmt.Errorf("own the %s selection: no X display named (want one such as \":5\")", name)
	}
	if log == nil {
		log = slog.Default()
	}
	return &Owner{display: display, sel: name, log: log.With("display", display, "selection", name)}, nil
}

// Set takes ownership of the selection with text, which must be valid UTF-8
// of at most MaxSetBytes. It returns once the X server has confirmed the
// ownership, so a Read that starts afterwards gets text. ctx bounds the
// exchange; without a deadline DefaultTimeout applies.
func (o *Owner) Set(ctx context.Context, text string) error {
	if err := checkText(text); err != nil {
		return fmt.Errorf("set the %s selection: %w", o.sel, err)
	}
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	o.setMu.Lock()
	defer o.setMu.Unlock()
	oc, err := o.connection(ctx)
	if err != nil {
		return fmt.Errorf("set the %s selection: %w", o.sel, err)
	}
	if err := oc.takeWithin(ctx, []byte(text)); err != nil {
		var xerr xgb.Error
		if !errors.As(err, &xerr) {
			// A timeout or a broken connection: start afresh next time.
			o.drop(oc)
		}
		return fmt.Errorf("set the %s selection: %w", o.sel, err)
	}
	return nil
}

// checkText says why text cannot be a selection's, if it cannot.
func checkText(text string) error {
	if len(text) > MaxSetBytes {
		return fmt.Errorf("the text is %d bytes, more than the %d bytes (%d KiB) a selection can be set to",
			len(text), MaxSetBytes, MaxSetBytes>>10)
	}
	if !utf8.ValidString(text) {
		return errors.New("the text is not valid UTF-8")
	}
	return nil
}

// Close releases the selection if this Owner still holds it, closes the
// connection and ends the goroutine answering requests. Set fails with
// ErrClosed afterwards.
func (o *Owner) Close() error {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return nil
	}
	o.closed = true
	oc := o.conn
	o.conn = nil
	o.mu.Unlock()
	if oc == nil {
		return nil
	}
	if err := oc.close(true); err != nil {
		return fmt.Errorf("close the %s selection owner: %w", o.sel, err)
	}
	return nil
}

// Holds reports whether win is the window through which this Owner holds
// (or last held) the selection on its live connection, so a client watching
// the selection's owner (XFIXES) can tell its own Set from another
// program's.
func (o *Owner) Holds(win xproto.Window) bool {
	o.mu.Lock()
	oc := o.conn
	o.mu.Unlock()
	if oc == nil || win == xproto.WindowNone {
		return false
	}
	select {
	case <-oc.done:
		return false
	default:
		return oc.win == win
	}
}

// connection returns the live connection, dialling a new one when there is
// none or the last one broke (the X server restarted, say).
func (o *Owner) connection(ctx context.Context) (*ownerConn, error) {
	oc, err := o.live()
	if oc != nil || err != nil {
		return oc, err
	}
	c, err := xext.Dial(ctx, o.display)
	if err != nil {
		return nil, err
	}
	oc, err = newOwnerConn(ctx, c, o.sel, o.log)
	if err != nil {
		return nil, err
	}
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		oc.close(false)
		return nil, ErrClosed
	}
	o.conn = oc
	o.mu.Unlock()
	return oc, nil
}

// live returns the current connection while it lasts; nil, nil when there
// is none or it was lost (then it is dropped).
func (o *Owner) live() (*ownerConn, error) {
	o.mu.Lock()
	oc, closed := o.conn, o.closed
	o.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if oc == nil {
		return nil, nil
	}
	select {
	case <-oc.done:
		o.log.Info("X connection of the selection owner was lost; reconnecting")
		o.drop(oc)
		return nil, nil
	default:
		return oc, nil
	}
}

// drop forgets oc (if it is still the current connection) and closes it.
func (o *Owner) drop(oc *ownerConn) {
	o.mu.Lock()
	if o.conn == oc {
		o.conn = nil
	}
	o.mu.Unlock()
	oc.close(false)
}

// ownerConn is one X connection of an Owner, with its window and the
// goroutine (serve) that answers requests on it.
type ownerConn struct {
	c    *xgb.Conn
	win  xproto.Window
	log  *slog.Logger
	done chan struct{} // closed when serve has returned: the connection is gone

	sel, utf8, targets, text xproto.Atom

	closeOnce sync.Once

	mu     sync.Mutex
	data   []byte // the text, UTF-8; never modified in place
	owning bool
	since  uint16 // sequence number of the SetSelectionOwner that made this the owner
}

func newOwnerConn(ctx context.Context, c *xgb.Conn, sel string, log *slog.Logger) (*ownerConn, error) {
	oc := &ownerConn{c: c, log: log, done: make(chan struct{})}
	setup := make(chan error, 1)
	go func() { setup <- oc.setup(sel) }()
	select {
	case err := <-setup:
		if err != nil {
			c.Close()
			return nil, err
		}
	case <-ctx.Done():
		c.Close()
		return nil, fmt.Errorf("the X server did not answer: %w", ctx.Err())
	}
	go oc.serve()
	return oc, nil
}

// setup interns the atoms an owner answers with and creates its window.
func (oc *ownerConn) setup(sel string) error {
	c := oc.c
	atoms, err := InternAtoms(c, sel, "UTF8_STRING", "TARGETS", "TEXT")
	if err != nil {
		return err
	}
	oc.sel, oc.utf8, oc.targets, oc.text = atoms[sel], atoms["UTF8_STRING"], atoms["TARGETS"], atoms["TEXT"]
	if oc.win, err = xproto.NewWindowId(c); err != nil {
		return fmt.Errorf("allocate a window id: %w", err)
	}
	root := xproto.Setup(c).DefaultScreen(c).Root
	// An unmapped InputOnly window: an owner needs a window, never a
	// visible one.
	if err := xproto.CreateWindowChecked(c, 0, oc.win, root, -10, -10, 1, 1, 0,
		xproto.WindowClassInputOnly, 0, 0, nil).Check(); err != nil {
		return fmt.Errorf("create the window that owns the selection: %w", err)
	}
	return nil
}

// takeWithin is take, giving up when ctx ends.
func (oc *ownerConn) takeWithin(ctx context.Context, data []byte) error {
	done := make(chan error, 1)
	go func() { done <- oc.take(data) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("the X server did not answer: %w", ctx.Err())
	}
}

// take makes this connection's window the owner with data and checks that
// the server agrees.
func (oc *ownerConn) take(data []byte) error {
	oc.mu.Lock()
	oc.data, oc.owning = data, true
	// The cookie has its sequence number once the request is sent; a
	// SelectionClear numbered before it is about an earlier ownership.
	ck := xproto.SetSelectionOwner(oc.c, oc.win, oc.sel, xproto.TimeCurrentTime)
	oc.since = ck.Sequence
	oc.mu.Unlock()
	r, err := xproto.GetSelectionOwner(oc.c, oc.sel).Reply()
	if err != nil {
		oc.forget()
		return fmt.Errorf("check the new owner: %w", err)
	}
	switch r.Owner {
	case oc.win:
		return nil
	case xproto.WindowNone:
		oc.forget()
		return errors.New("the X server did not make this client the owner (was the owner closed meanwhile?)")
	default:
		oc.forget()
		return fmt.Errorf("another client (window 0x%x) took it at the same moment", r.Owner)
	}
}

func (oc *ownerConn) forget() {
	oc.mu.Lock()
	oc.data, oc.owning = nil, false
	oc.mu.Unlock()
}

// serve answers requests until the connection closes.
func (oc *ownerConn) serve() {
	defer close(oc.done)
	for {
		ev, xerr := oc.c.WaitForEvent()
		if ev == nil && xerr == nil {
			return
		}
		if xerr != nil {
			// Most likely a requestor that went away before its answer.
			oc.log.Debug("X error while owning the selection", "err", xerr)
			continue
		}
		switch e := ev.(type) {
		case xproto.SelectionRequestEvent:
			oc.answer(e)
		case xproto.SelectionClearEvent:
			oc.cleared(e)
		}
	}
}

// cleared forgets the text when another client took the selection after
// this connection's last SetSelectionOwner.
func (oc *ownerConn) cleared(e xproto.SelectionClearEvent) {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	if e.Selection == oc.sel && int16(e.Sequence-oc.since) >= 0 {
		oc.data, oc.owning = nil, false
		oc.log.Debug("another client took the selection")
	}
}

// answer converts the text to the requested target into the requestor's
// property, or refuses (property None), and tells the requestor.
func (oc *ownerConn) answer(e xproto.SelectionRequestEvent) {
	prop := e.Property
	if prop == xproto.AtomNone {
		prop = e.Target // ICCCM: an obsolete requestor; use the target as the property
	}
	oc.mu.Lock()
	data, owning := oc.data, oc.owning
	oc.mu.Unlock()
	ok := owning && e.Owner == oc.win && e.Selection == oc.sel && oc.put(e.Requestor, prop, e.Target, data)
	if !ok {
		prop = xproto.AtomNone
	}
	n := xproto.SelectionNotifyEvent{Time: e.Time, Requestor: e.Requestor, Selection: e.Selection, Target: e.Target, Property: prop}
	xproto.SendEvent(oc.c, false, e.Requestor, 0, string(n.Bytes()))
}

// destroyWindow destroys the owner window, which makes the server drop the
// selection if the window owns it, within ctx.
func (oc *ownerConn) destroyWindow(ctx context.Context) error {
	destroyed := make(chan error, 1)
	go func() { destroyed <- xproto.DestroyWindowChecked(oc.c, oc.win).Check() }()
	select {
	case err := <-destroyed:
		select {
		case <-oc.done:
			return nil // the connection was already gone, and the selection with it
		default:
		}
		if err != nil {
			return fmt.Errorf("destroy the owner window: %w", err)
		}
		return nil
	case <-ctx.Done():
		return errors.New("the X server did not answer")
	}
}

// put writes data converted to target into property prop of the
// requestor's window; it reports false for a target it does not offer
// (MULTIPLE, TIMESTAMP, images...: a requestor then tries another).
func (oc *ownerConn) put(requestor xproto.Window, prop, target xproto.Atom, data []byte) bool {
	switch target {
	case oc.targets:
		list := []xproto.Atom{oc.targets, oc.utf8, oc.text, xproto.AtomString}
		buf := make([]byte, 4*len(list))
		for i, a := range list {
			xgb.Put32(buf[4*i:], uint32(a))
		}
		xproto.ChangeProperty(oc.c, xproto.PropModeReplace, requestor, prop, xproto.AtomAtom, 32, uint32(len(list)), buf)
	case oc.utf8, oc.text:
		// TEXT lets the owner pick the encoding; UTF-8 loses nothing.
		xproto.ChangeProperty(oc.c, xproto.PropModeReplace, requestor, prop, oc.utf8, 8, uint32(len(data)), data)
	case xproto.AtomString:
		b := latin1(data)
		xproto.ChangeProperty(oc.c, xproto.PropModeReplace, requestor, prop, xproto.AtomString, 8, uint32(len(b)), b)
	default:
		return false
	}
	return true
}

// close ends the connection; with release it first destroys the window, which
// makes the server drop the selection if this window owns it, and waits for
// that so a Read right after Close finds no owner.
func (oc *ownerConn) close(release bool) error {
	var err error
	oc.closeOnce.Do(func() {
		wait, cancel := context.WithTimeout(context.Background(), closeWait)
		defer cancel()
		if release {
			err = oc.destroyWindow(wait)
		}
		oc.c.Close()
		select {
		case <-oc.done:
		case <-wait.Done():
			if err == nil {
				err = errors.New("the X server did not hang up")
			}
		}
	})
	return err
}
