package appliance

import (
	"context"
	"fmt"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/internal/xsel"
)

// maxClipboardRead bounds what clipboard_get hands a model: more than this
// is a file's worth, better read with the files trait.
const maxClipboardRead = 1 << 20

// deskClipboard is the clipboard trait over one desktop's CLIPBOARD
// selection. It holds an owner of its own rather than borrowing the stream's,
// so the trait works with --no-stream; when both run, the stream sees the
// owner change and sends the text to its viewers like any app's copy.
type deskClipboard struct {
	d     *display.Display
	owner *xsel.Owner
}

func newDeskClipboard(d *display.Display, a *Desktop) (*deskClipboard, error) {
	o, err := xsel.NewOwner(d.Name(), "CLIPBOARD", a.log)
	if err != nil {
		return nil, fmt.Errorf("--mcp-traits clipboard: %w", err)
	}
	a.closers = append(a.closers, o.Close)
	return &deskClipboard{d: d, owner: o}, nil
}

func (c *deskClipboard) ReadClipboard(ctx context.Context) (string, error) {
	return xsel.Read(ctx, c.d.Name(), "CLIPBOARD", maxClipboardRead)
}

func (c *deskClipboard) WriteClipboard(ctx context.Context, text string) error {
	return c.owner.Set(ctx, text)
}
