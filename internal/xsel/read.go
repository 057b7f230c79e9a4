package xsel

import (
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

func (r *reader) convert(ctx context.Context, sel string) (string, error) {
	c := r.c
	atoms, err := InternAtoms(c, sel, "UTF8_STRING", "INCR", "DESKENV_SELECTION")
	if err != nil {
		return "", err
	}
	selAtom, utf8Atom, incr := atoms[sel], atoms["UTF8_STRING"], atoms["INCR"]
	r.prop = atoms["DESKENV_SELECTION"]

	owner, err := xproto.GetSelectionOwner(c, selAtom).Reply()
	if err != nil {
		return "", fmt.Errorf("ask for the owner: %w", err)
	}
	if owner.Owner == xproto.WindowNone {
		return "", nil
	}
	screen := xproto.Setup(c).DefaultScreen(c)
	r.win, err = xproto.NewWindowId(c)
	if err != nil {
		return "", err
	}
	if err := xproto.CreateWindowChecked(c, 0, r.win, screen.Root, -10, -10, 1, 1, 0,
		xproto.WindowClassInputOnly, 0, xproto.CwEventMask, []uint32{xproto.EventMaskPropertyChange}).Check(); err != nil {
		return "", fmt.Errorf("create a window to receive the selection: %w", err)
	}
	defer xproto.DestroyWindow(c, r.win)

	for _, target := range []xproto.Atom{utf8Atom, xproto.AtomString} {
		if err := xproto.ConvertSelectionChecked(c, r.win, selAtom, target, r.prop, xproto.TimeCurrentTime).Check(); err != nil {
			return "", fmt.Errorf("ask its owner (window 0x%x) for the text: %w", owner.Owner, err)
		}
		ev, err := r.waitSelectionNotify(ctx, selAtom)
		if err != nil {
			return "", fmt.Errorf("its owner (window 0x%x) did not answer: %w", owner.Owner, err)
		}
		if ev.Property == xproto.AtomNone {
			continue // the owner cannot convert to this target
		}
		data, typ, err := r.readProperty(0)
		if err != nil {
			return "", err
		}
		if typ == incr {
			data, typ, err = r.readIncremental(ctx, owner.Owner)
			if err != nil {
				return "", err
			}
		}
		return DecodeText(data, typ, utf8Atom), nil
	}
	return "", ErrNoText
}

func (r *reader) waitSelectionNotify(ctx context.Context, sel xproto.Atom) (xproto.SelectionNotifyEvent, error) {
	for {
		select {
		case ev, ok := <-r.events:
			if !ok {
				return xproto.SelectionNotifyEvent{}, errors.New("the X connection closed")
			}
			if n, ok := ev.(xproto.SelectionNotifyEvent); ok && n.Requestor == r.win && n.Selection == sel {
				return n, nil
			}
		case <-ctx.Done():
			return xproto.SelectionNotifyEvent{}, ctx.Err()
		}
	}
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
			n, ok := ev.(xproto.PropertyNotifyEvent)
			if !ok || n.Window != r.win || n.Atom != r.prop || n.State != xproto.PropertyNewValue {
				continue
			}
			data, t, err := r.readProperty(len(out))
			if err != nil {
				return nil, 0, err
			}
			if t == xproto.AtomNone {
				continue
			}
			if len(data) == 0 {
				return out, typ, nil
			}
			if typ == 0 {
				typ = t
			}
			out = append(out, data...)
		case <-ctx.Done():
			return nil, 0, fmt.Errorf("its owner (window 0x%x) stopped sending after %d bytes of an incremental transfer: %w", owner, len(out), ctx.Err())
		}
	}
}
