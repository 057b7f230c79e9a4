package task

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"math/bits"
	"strings"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"

	"github.com/deskenv/deskenv/internal/xsel"
)

var envAtoms = []string{"_NET_CLIENT_LIST", "_NET_SUPPORTING_WM_CHECK", "_NET_WM_NAME", "UTF8_STRING"}

// xconn returns the env's X connection, dialling a new one after the server
// was restarted or the old one broke.
func (e *DisplayEnv) xconn() (*xstate, error) {
	gen := e.d.Generation()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.x != nil && e.x.gen == gen {
		return e.x, nil
	}
	if e.x != nil {
		e.x.conn.Close()
		e.x = nil
	}
	c, err := e.d.Dial()
	if err != nil {
		return nil, err
	}
	// Nothing here selects events, but X errors of unchecked requests still
	// arrive as events; read them so xgb's queue never fills up.
	go drainEvents(c)
	atoms, err := internAtoms(c, envAtoms...)
	if err != nil {
		c.Close()
		return nil, err
	}
	e.x = &xstate{conn: c, gen: gen, atoms: atoms}
	return e.x, nil
}

func drainEvents(c *xgb.Conn) {
	for {
		ev, err := c.WaitForEvent()
		if ev == nil && err == nil {
			return
		}
	}
}

// internAtoms interns names in one round trip.
func internAtoms(c *xgb.Conn, names ...string) (map[string]xproto.Atom, error) {
	return xsel.InternAtoms(c, names...)
}

// withX runs f on the env's connection, giving up when ctx ends (the
// connection is then closed, which unblocks f, and a new one dialled next time).
func (e *DisplayEnv) withX(ctx context.Context, what string, f func(x *xstate) error) error {
	if e.d == nil {
		return fmt.Errorf("%s: %w", what, ErrNoDisplay)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	x, err := e.xconn()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	done := make(chan error, 1)
	go func() { done <- f(x) }()
	select {
	case err := <-done:
		var xerr xgb.Error
		if err != nil && !errors.As(err, &xerr) {
			e.dropX(x)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	case <-ctx.Done():
		e.dropX(x)
		return fmt.Errorf("%s: the X server did not answer: %w", what, ctx.Err())
	}
}

func (e *DisplayEnv) dropX(x *xstate) {
	e.mu.Lock()
	if e.x == x {
		e.x = nil
	}
	e.mu.Unlock()
	x.conn.Close()
}

// Windows lists the top-level windows: those the window manager lists in
// _NET_CLIENT_LIST, and the mapped children of the root window that carry a
// title (every window when there is no window manager, and override-redirect
// ones when there is). Without a client list, titled children of untitled
// mapped root children count too (the clients a non-EWMH window manager
// reparented into its frames).
func (e *DisplayEnv) Windows(ctx context.Context) ([]Window, error) {
	var out []Window
	err := e.withX(ctx, "list windows", func(x *xstate) error {
		var err error
		out, err = x.windows()
		return err
	})
	return out, err
}

func (x *xstate) windows() ([]Window, error) {
	c := x.conn
	root := xproto.Setup(c).DefaultScreen(c).Root
	clientCk := xproto.GetProperty(c, false, root, x.atoms["_NET_CLIENT_LIST"], xproto.AtomWindow, 0, 1<<16)
	wmCheckCk := xproto.GetProperty(c, false, root, x.atoms["_NET_SUPPORTING_WM_CHECK"], xproto.AtomWindow, 0, 1)
	treeCk := xproto.QueryTree(c, root)

	var ids []xproto.Window
	seen := map[xproto.Window]bool{}
	add := func(w xproto.Window) {
		if !seen[w] {
			seen[w] = true
			ids = append(ids, w)
		}
	}
	clients, err := clientCk.Reply()
	if err != nil {
		return nil, err
	}
	haveClientList := clients.Type == xproto.AtomWindow && clients.Format == 32
	if haveClientList {
		for _, w := range windowList(clients.Value) {
			add(w)
		}
	}
	var wmCheck xproto.Window
	if r, err := wmCheckCk.Reply(); err == nil && r.Format == 32 && len(r.Value) >= 4 {
		wmCheck = windowList(r.Value)[0]
	}
	tree, err := treeCk.Reply()
	if err != nil {
		return nil, err
	}
	mapped := x.viewable(tree.Children)
	var top []xproto.Window
	for _, w := range mapped {
		if w != wmCheck {
			top = append(top, w)
		}
	}
	titles := x.titles(top)
	var untitled []xproto.Window
	for _, w := range top {
		if titles[w] != "" {
			add(w)
		} else {
			untitled = append(untitled, w)
		}
	}
	if !haveClientList && len(untitled) > 0 {
		trees := make([]xproto.QueryTreeCookie, len(untitled))
		for i, w := range untitled {
			trees[i] = xproto.QueryTree(c, w)
		}
		var inner []xproto.Window
		for _, ck := range trees {
			if r, err := ck.Reply(); err == nil {
				inner = append(inner, r.Children...)
			}
		}
		innerTitles := x.titles(inner)
		for _, w := range inner {
			if innerTitles[w] != "" {
				add(w)
				titles[w] = innerTitles[w]
			}
		}
	}
	// Titles already read above are kept; only the client list's windows
	// still need theirs (this runs on every poll of wait_window).
	var missing []xproto.Window
	for _, w := range ids {
		if _, ok := titles[w]; !ok {
			missing = append(missing, w)
		}
	}
	for w, t := range x.titles(missing) {
		titles[w] = t
	}
	classCks := make([]xproto.GetPropertyCookie, len(ids))
	for i, w := range ids {
		classCks[i] = xproto.GetProperty(c, false, w, xproto.AtomWmClass, xproto.AtomString, 0, 256)
	}
	out := make([]Window, 0, len(ids))
	for i, w := range ids {
		win := Window{ID: uint32(w), Title: titles[w]}
		r, err := classCks[i].Reply()
		if err != nil {
			continue // destroyed while we looked
		}
		parts := strings.Split(strings.TrimRight(string(r.Value), "\x00"), "\x00")
		win.Instance = parts[0]
		if len(parts) > 1 {
			win.Class = parts[1]
		}
		out = append(out, win)
	}
	return out, nil
}

func windowList(b []byte) []xproto.Window {
	out := make([]xproto.Window, 0, len(b)/4)
	for i := 0; i+4 <= len(b); i += 4 {
		out = append(out, xproto.Window(xgb.Get32(b[i:])))
	}
	return out
}

func (x *xstate) viewable(ws []xproto.Window) []xproto.Window {
	cks := make([]xproto.GetWindowAttributesCookie, len(ws))
	for i, w := range ws {
		cks[i] = xproto.GetWindowAttributes(x.conn, w)
	}
	var out []xproto.Window
	for i, ck := range cks {
		if r, err := ck.Reply(); err == nil && r.MapState == xproto.MapStateViewable {
			out = append(out, ws[i])
		}
	}
	return out
}

// titles reads _NET_WM_NAME, falling back to WM_NAME, of each window.
func (x *xstate) titles(ws []xproto.Window) map[xproto.Window]string {
	netName := x.atoms["_NET_WM_NAME"]
	utf8Atom := x.atoms["UTF8_STRING"]
	type pair struct{ net, wm xproto.GetPropertyCookie }
	cks := make([]pair, len(ws))
	for i, w := range ws {
		cks[i] = pair{
			xproto.GetProperty(x.conn, false, w, netName, xproto.GetPropertyTypeAny, 0, 1024),
			xproto.GetProperty(x.conn, false, w, xproto.AtomWmName, xproto.GetPropertyTypeAny, 0, 1024),
		}
	}
	out := make(map[xproto.Window]string, len(ws))
	for i, ck := range cks {
		nr, nerr := ck.net.Reply()
		wr, werr := ck.wm.Reply()
		switch {
		case nerr == nil && nr.Format == 8 && len(nr.Value) > 0:
			out[ws[i]] = xsel.DecodeText(nr.Value, nr.Type, utf8Atom)
		case werr == nil && wr.Format == 8 && len(wr.Value) > 0:
			out[ws[i]] = xsel.DecodeText(wr.Value, wr.Type, utf8Atom)
		}
	}
	return out
}

// Limits on reading a selection: xsel's defaults.
const (
	DefaultSelectionTimeout = xsel.DefaultTimeout
	MaxSelectionBytes       = xsel.DefaultMaxBytes
)

// Selection reads the text of an X selection ("CLIPBOARD", "PRIMARY" or
// "SECONDARY", any case) the way a pasting client does, with xsel.Read: on a
// connection of its own, following the INCR protocol for large text. No
// owner gives "". When ctx has no deadline, DefaultSelectionTimeout applies.
func (e *DisplayEnv) Selection(ctx context.Context, name string) (string, error) {
	if e.d == nil {
		return "", fmt.Errorf("read the %s selection: %w", name, ErrNoDisplay)
	}
	// xsel.Read applies DefaultSelectionTimeout (its DefaultTimeout) itself.
	return xsel.Read(ctx, e.d.Name(), name, MaxSelectionBytes)
}

// Screenshot captures the screen with the function given to NewEnv, or else
// with a GetImage of the root window.
func (e *DisplayEnv) Screenshot(ctx context.Context) (*image.RGBA, error) {
	if e.screenshot != nil {
		return e.screenshot(ctx)
	}
	var img *image.RGBA
	err := e.withX(ctx, "capture the screen", func(x *xstate) error {
		var err error
		img, err = getImage(x.conn)
		return err
	})
	return img, err
}

// getImage reads the root window with GetImage and converts it to RGBA using
// the root visual's colour masks.
func getImage(c *xgb.Conn) (*image.RGBA, error) {
	setup := xproto.Setup(c)
	scr := setup.DefaultScreen(c)
	w, h := int(scr.WidthInPixels), int(scr.HeightInPixels)
	r, err := xproto.GetImage(c, xproto.ImageFormatZPixmap, xproto.Drawable(scr.Root), 0, 0, uint16(w), uint16(h), 0xffffffff).Reply()
	if err != nil {
		return nil, err
	}
	var bpp, pad int
	for _, f := range setup.PixmapFormats {
		if f.Depth == r.Depth {
			bpp, pad = int(f.BitsPerPixel), int(f.ScanlinePad)
		}
	}
	var vis *xproto.VisualInfo
	for _, d := range scr.AllowedDepths {
		for i := range d.Visuals {
			if d.Visuals[i].VisualId == scr.RootVisual {
				vis = &d.Visuals[i]
			}
		}
	}
	if vis == nil || (bpp != 32 && bpp != 16) || pad == 0 {
		return nil, fmt.Errorf("unsupported screen format (depth %d, %d bits per pixel)", r.Depth, bpp)
	}
	stride := (w*bpp + pad - 1) / pad * pad / 8
	if len(r.Data) < stride*h {
		return nil, fmt.Errorf("GetImage returned %d bytes, want %d", len(r.Data), stride*h)
	}
	var order binary.ByteOrder = binary.LittleEndian
	if setup.ImageByteOrder == xproto.ImageOrderMSBFirst {
		order = binary.BigEndian
	}
	rs, gs, bs := channel(vis.RedMask), channel(vis.GreenMask), channel(vis.BlueMask)
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		row := r.Data[y*stride:]
		out := img.Pix[y*img.Stride:]
		for x := 0; x < w; x++ {
			var p uint32
			if bpp == 32 {
				p = order.Uint32(row[x*4:])
			} else {
				p = uint32(order.Uint16(row[x*2:]))
			}
			out[x*4] = rs.get(p)
			out[x*4+1] = gs.get(p)
			out[x*4+2] = bs.get(p)
			out[x*4+3] = 0xff
		}
	}
	return img, nil
}

type channelMask struct {
	mask  uint32
	shift int
	max   uint32
}

func channel(mask uint32) channelMask {
	if mask == 0 {
		return channelMask{}
	}
	shift := bits.TrailingZeros32(mask)
	return channelMask{mask: mask, shift: shift, max: mask >> shift}
}

func (c channelMask) get(p uint32) uint8 {
	if c.max == 0 {
		return 0
	}
	return uint8(((p & c.mask) >> c.shift) * 255 / c.max)
}
