package task

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"math/bits"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"

	"github.com/deskenv/deskenv/internal/xsel"
	"github.com/deskenv/deskenv/internal/xwin"
)

// xstate is the env's own X connection with the window lister on it.
type xstate struct {
	conn   *xgb.Conn
	gen    uint64 // the Follower's generation of conn
	lister *xwin.Lister
}

// xconn returns the env's X connection with its window lister, making a
// new lister when the Follower hands out a new connection (the server was
// restarted, or the last one broke).
func (e *DisplayEnv) xconn(ctx context.Context) (*xstate, error) {
	c, gen, err := e.f.Get(ctx)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.x != nil && e.x.gen == gen {
		return e.x, nil
	}
	l, err := xwin.NewLister(c)
	if err != nil {
		e.f.Drop(gen)
		return nil, err
	}
	e.x = &xstate{conn: c, gen: gen, lister: l}
	return e.x, nil
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
	x, err := e.xconn(ctx)
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

// dropX closes x's connection, which ends requests still waiting on it,
// so that the next xconn dials anew.
func (e *DisplayEnv) dropX(x *xstate) { e.f.Drop(x.gen) }

// Windows lists the top-level windows as internal/xwin does (the desktop's
// reset lists them the same way): those the window manager lists in
// _NET_CLIENT_LIST, and the viewable children of the root window that carry
// WM_CLASS or a title, or the named windows inside an unnamed one (the
// clients a window manager reparented into its frames).
func (e *DisplayEnv) Windows(ctx context.Context) ([]Window, error) {
	var out []Window
	err := e.withX(ctx, "list windows", func(x *xstate) error {
		ws, err := x.lister.Windows()
		out = make([]Window, len(ws))
		for i, w := range ws {
			out[i] = Window{ID: w.ID, Title: w.Title, Instance: w.Instance, Class: w.Class}
		}
		return err
	})
	return out, err
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
	pf, err := pixelFormatOf(setup, scr, r.Depth)
	if err != nil {
		return nil, err
	}
	stride := (w*pf.bpp + pf.pad - 1) / pf.pad * pf.pad / 8
	if len(r.Data) < stride*h {
		return nil, fmt.Errorf("GetImage returned %d bytes, want %d", len(r.Data), stride*h)
	}
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		pf.row(img.Pix[y*img.Stride:], r.Data[y*stride:], w)
	}
	return img, nil
}

// pixelFormat is how the server lays out the root window's pixels in a
// ZPixmap image.
type pixelFormat struct {
	bpp, pad   int // bits per pixel, scanline padding in bits
	order      binary.ByteOrder
	rs, gs, bs channelMask
}

// pixelFormatOf finds the pixmap format of depth and the root visual's colour
// masks in the server's setup.
func pixelFormatOf(setup *xproto.SetupInfo, scr *xproto.ScreenInfo, depth byte) (pixelFormat, error) {
	pf := pixelFormat{order: binary.LittleEndian}
	if setup.ImageByteOrder == xproto.ImageOrderMSBFirst {
		pf.order = binary.BigEndian
	}
	for _, f := range setup.PixmapFormats {
		if f.Depth == depth {
			pf.bpp, pf.pad = int(f.BitsPerPixel), int(f.ScanlinePad)
		}
	}
	vis := rootVisual(scr)
	if vis == nil || (pf.bpp != 32 && pf.bpp != 16) || pf.pad == 0 {
		return pixelFormat{}, fmt.Errorf("unsupported screen format (depth %d, %d bits per pixel)", depth, pf.bpp)
	}
	pf.rs, pf.gs, pf.bs = channel(vis.RedMask), channel(vis.GreenMask), channel(vis.BlueMask)
	return pf, nil
}

// rootVisual is the root window's visual, nil if the setup does not list it.
func rootVisual(scr *xproto.ScreenInfo) *xproto.VisualInfo {
	for _, d := range scr.AllowedDepths {
		for i := range d.Visuals {
			if d.Visuals[i].VisualId == scr.RootVisual {
				return &d.Visuals[i]
			}
		}
	}
	return nil
}

// row converts one row of w pixels from src into RGBA in dst.
func (pf pixelFormat) row(dst, src []byte, w int) {
	for x := 0; x < w; x++ {
		var p uint32
		if pf.bpp == 32 {
			p = pf.order.Uint32(src[x*4:])
		} else {
			p = uint32(pf.order.Uint16(src[x*2:]))
		}
		dst[x*4] = pf.rs.get(p)
		dst[x*4+1] = pf.gs.get(p)
		dst[x*4+2] = pf.bs.get(p)
		dst[x*4+3] = 0xff
	}
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
