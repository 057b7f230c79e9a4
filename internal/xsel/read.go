package xsel

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"

	"github.com/deskenv/deskenv/internal/xext"
)

// Read returns the text of selection sel ("CLIPBOARD", "PRIMARY" or
// "SECONDARY", any case) on the X display named display (such as ":5"), the
// way a pasting client gets it: on a connection of its own, it asks the owner
// to convert the selection to UTF8_STRING (then STRING) into a property of its
// own window, and follows the INCR protocol for large text. It takes at most
// maxBytes (<= 0: DefaultMaxBytes). No owner gives "", nil; an owner that
// offers no text gives ErrNoText. ctx bounds the whole exchange; without a
// deadline DefaultTimeout applies.
func Read(ctx context.Context, display, sel string, maxBytes int) (string, error) {
	name, err := selectionName(sel)
	if err != nil {
		return "", fmt.Errorf("read selection: %w", err)
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	c, err := xext.Dial(ctx, display)
	if err != nil {
		return "", fmt.Errorf("read the %s selection: %w", name, err)
	}
	quit := make(chan struct{})
	events := pump(c, quit)
	defer func() {
		// Not waiting for the pump: it ends once the connection has closed,
		// which a stopped server would delay for ever.
		close(quit)
		c.Close()
	}()
	r := reader{c: c, events: events, maxBytes: maxBytes}
	text, err := r.read(ctx, name)
	if err != nil {
		return "", fmt.Errorf("read the %s selection: %w", name, err)
	}
	return text, nil
}

// pump forwards c's events to the channel it returns, which it closes when
// c closes, until quit is closed.
func pump(c *xgb.Conn, quit <-chan struct{}) <-chan xgb.Event {
	events := make(chan xgb.Event, 16)
	go func() {
		for {
			ev, err := c.WaitForEvent()
			if ev == nil && err == nil {
				close(events)
				return
			}
			if ev == nil {
				continue // an X error of an unchecked request; the checked ones carry what matters
			}
			select {
			case events <- ev:
			case <-quit:
				return
			}
		}
	}()
	return events
}

// reader is one Read's connection and the events its window receives.
type reader struct {
	c        *xgb.Conn
	events   <-chan xgb.Event
	maxBytes int
	win      xproto.Window
	prop     xproto.Atom
}

func (r *reader) read(ctx context.Context, sel string) (string, error) {
	var text string
	// Requests block until a reply arrives; run them aside so that ctx
	// bounds a server that stopped answering too (Read then closes the
	// connection, which ends them).
	done := make(chan error, 1)
	go func() {
		var err error
		text, err = r.convert(ctx, sel)
		done <- err
	}()
	select {
	case err := <-done:
		return text, err
	case <-ctx.Done():
		// convert notices ctx too when it waits on the owner rather than
		// the server; its error says which of the two failed to answer.
		select {
		case err := <-done:
			return text, err
		case <-time.After(100 * time.Millisecond):
		}
		return "", fmt.Errorf("the X server did not answer: %w", ctx.Err())
	}
}

// selAtoms are the atoms one conversion uses.
type selAtoms struct{ sel, utf8, incr xproto.Atom }

func (r *reader) convert(ctx context.Context, sel string) (string, error) {
	c := r.c
	atoms, err := InternAtoms(c, sel, "UTF8_STRING", "INCR", "DESKENV_SELECTION")
	if err != nil {
		return "", err
	}
	a := selAtoms{sel: atoms[sel], utf8: atoms["UTF8_STRING"], incr: atoms["INCR"]}
	r.prop = atoms["DESKENV_SELECTION"]

	owner, err := xproto.GetSelectionOwner(c, a.sel).Reply()
	if err != nil {
		return "", fmt.Errorf("ask for the owner: %w", err)
	}
	if owner.Owner == xproto.WindowNone {
		return "", nil
	}
	if err := r.makeWindow(); err != nil {
		return "", err
	}
	defer xproto.DestroyWindow(c, r.win)
	for _, target := range []xproto.Atom{a.utf8, xproto.AtomString} {
		text, ok, err := r.fetch(ctx, a, owner.Owner, target)
		if err != nil || ok {
			return text, err
		}
	}
	return "", ErrNoText
}

// makeWindow creates the window the owner puts the text on.
func (r *reader) makeWindow() error {
	screen := xproto.Setup(r.c).DefaultScreen(r.c)
	var err error
	r.win, err = xproto.NewWindowId(r.c)
	if err != nil {
		return err
	}
	if err := xproto.CreateWindowChecked(r.c, 0, r.win, screen.Root, -10, -10, 1, 1, 0,
		xproto.WindowClassInputOnly, 0, xproto.CwEventMask, []uint32{xproto.EventMaskPropertyChange}).Check(); err != nil {
		return fmt.Errorf("create a window to receive the selection: %w", err)
	}
	return nil
}

// fetch asks owner to convert the selection to target and reads the
// answer; ok is false when the owner cannot convert to target.
func (r *reader) fetch(ctx context.Context, a selAtoms, owner xproto.Window, target xproto.Atom) (text string, ok bool, err error) {
	if err := xproto.ConvertSelectionChecked(r.c, r.win, a.sel, target, r.prop, xproto.TimeCurrentTime).Check(); err != nil {
		return "", false, fmt.Errorf("ask its owner (window 0x%x) for the text: %w", owner, err)
	}
	ev, err := r.waitSelectionNotify(ctx, a.sel)
	if err != nil {
		return "", false, fmt.Errorf("its owner (window 0x%x) did not answer: %w", owner, err)
	}
	if ev.Property == xproto.AtomNone {
		return "", false, nil
	}
	data, typ, err := r.readProperty(0)
	if err == nil && typ == a.incr {
		data, typ, err = r.readIncremental(ctx, owner)
	}
	if err != nil {
		return "", false, err
	}
	return DecodeText(data, typ, a.utf8), true, nil
}

func (r *reader) waitSelectionNotify(ctx context.Context, sel xproto.Atom) (xproto.SelectionNotifyEvent, error) {
	for {
		select {
		case ev, ok := <-r.events:
			if !ok {
				return xproto.SelectionNotifyEvent{}, errors.New("the X connection closed")
			}
			if n, ok := r.notified(ev, sel); ok {
				return n, nil
			}
		case <-ctx.Done():
			return xproto.SelectionNotifyEvent{}, ctx.Err()
		}
	}
}

// notified reports whether ev is the answer to this reader's conversion of
// selection sel.
func (r *reader) notified(ev xgb.Event, sel xproto.Atom) (xproto.SelectionNotifyEvent, bool) {
	n, ok := ev.(xproto.SelectionNotifyEvent)
	return n, ok && n.Requestor == r.win && n.Selection == sel
}

// readProperty reads the whole property in chunks and deletes it; have is
// how many bytes earlier INCR chunks brought, for the limit.
func (r *reader) readProperty(have int) ([]byte, xproto.Atom, error) {
	const chunk = 1 << 16 // 32-bit units per request
	var out []byte
	var offset uint32
	for {
		p, err := xproto.GetProperty(r.c, true, r.win, r.prop, xproto.GetPropertyTypeAny, offset, chunk).Reply()
		if err != nil {
			return nil, 0, fmt.Errorf("read the converted text: %w", err)
		}
		if p.Type == xproto.AtomNone {
			return nil, xproto.AtomNone, nil
		}
		out = append(out, p.Value...)
		if have+len(out) > r.maxBytes {
			return nil, 0, fmt.Errorf("the text is longer than the limit of %d bytes", r.maxBytes)
		}
		if p.BytesAfter == 0 {
			return out, p.Type, nil
		}
		offset += uint32(len(p.Value)) / 4
	}
}

// readIncremental follows ICCCM's INCR protocol: readProperty deleted the INCR
// property, which tells the owner to write the first chunk; each deletion asks
// for the next, and an empty chunk ends the transfer.
func (r *reader) readIncremental(ctx context.Context, owner xproto.Window) ([]byte, xproto.Atom, error) {
	var out []byte
	var typ xproto.Atom
	for {
		select {
		case ev, ok := <-r.events:
			if !ok {
				return nil, 0, fmt.Errorf("the X connection closed after %d bytes of an incremental transfer", len(out))
			}
			data, t, err := r.chunk(ev, len(out))
			if err != nil {
				return nil, 0, err
			}
			if t == xproto.AtomNone {
				continue
			}
			if len(data) == 0 {
				return out, typ, nil
			}
			typ = cmp.Or(typ, t)
			out = append(out, data...)
		case <-ctx.Done():
			return nil, 0, fmt.Errorf("its owner (window 0x%x) stopped sending after %d bytes of an incremental transfer: %w", owner, len(out), ctx.Err())
		}
	}
}

// chunk reads the chunk of an incremental transfer that ev announced; its
// type is None when ev announced none. have is how many bytes came before.
func (r *reader) chunk(ev xgb.Event, have int) ([]byte, xproto.Atom, error) {
	n, ok := ev.(xproto.PropertyNotifyEvent)
	if !ok || n.Window != r.win || n.Atom != r.prop || n.State != xproto.PropertyNewValue {
		return nil, xproto.AtomNone, nil
	}
	return r.readProperty(have)
}
