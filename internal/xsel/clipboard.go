package xsel

import (
	"context"
	"log/slog"
)

// Clipboard is a desktop's CLIPBOARD as a program uses it: reading pastes
// the current owner's text, writing takes ownership with an Owner of its
// own. It is what the MCP clipboard trait is given (its methods are that
// trait's), so the appliance only composes it.
type Clipboard struct {
	display string
	maxRead int
	owner   *Owner
}

// NewClipboard makes a Clipboard on the X display named display. Reads take
// at most maxRead bytes (<= 0: DefaultMaxBytes); log (nil: slog.Default())
// receives what goes wrong while the owner answers other clients.
func NewClipboard(display string, maxRead int, log *slog.Logger) (*Clipboard, error) {
	o, err := NewOwner(display, "CLIPBOARD", log)
	if err != nil {
		return nil, err
	}
	return &Clipboard{display: display, maxRead: maxRead, owner: o}, nil
}

// ReadClipboard returns the clipboard's text, as Read does.
func (c *Clipboard) ReadClipboard(ctx context.Context) (string, error) {
	return Read(ctx, c.display, "CLIPBOARD", c.maxRead)
}

// WriteClipboard makes text the clipboard's, as Owner.Set does.
func (c *Clipboard) WriteClipboard(ctx context.Context, text string) error {
	return c.owner.Set(ctx, text)
}

// Close gives the clipboard up if this Clipboard still holds it.
func (c *Clipboard) Close() error { return c.owner.Close() }
