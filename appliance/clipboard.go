package appliance

import (
	"fmt"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/internal/xsel"
)

// maxClipboardRead bounds what clipboard_get hands a model: more than this
// is a file's worth, better read with the files trait.
const maxClipboardRead = 1 << 20

// newDeskClipboard is the clipboard trait over the desktop's CLIPBOARD: an
// xsel.Clipboard of its own rather than the stream's, so the trait works
// with --no-stream; when both run, the stream sees the owner change and
// sends the text to its viewers like any app's copy.
func newDeskClipboard(d *display.Display, a *Desktop) (*xsel.Clipboard, error) {
	c, err := xsel.NewClipboard(d.Name(), maxClipboardRead, a.log)
	if err != nil {
		return nil, fmt.Errorf("--mcp-traits clipboard: %w", err)
	}
	a.closers = append(a.closers, c.Close)
	return c, nil
}
