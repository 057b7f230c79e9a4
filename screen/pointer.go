package screen

import (
	"context"
	"fmt"
	"hash/maphash"

	"github.com/jezek/xgb/xfixes"

	"github.com/deskenv/deskenv/internal/xext"
)

// Pointer is the mouse pointer as the X server shows it: its image, its
// hot spot, and where the hot spot is on the screen. An X screen capture
// leaves the pointer out (the server draws it on the glass, not in the
// framebuffer); Anthropic's reference tool takes its screenshots with
// `scrot -p`, which draws it in, and models are trained on that.
type Pointer struct {
	X, Y       int // the hot spot on the screen
	XHot, YHot int // the hot spot in the image
	W, H       int
	ARGB       []uint32 // premultiplied, as XFIXES gives it
	Serial     uint32   // changes when the image does
}

// Pointer reads the pointer's image and position (XFIXES GetCursorImage)
// on the capturer's connection.
func (c *Capturer) Pointer(ctx context.Context) (Pointer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.prepare(ctx); err != nil {
		return Pointer{}, err
	}
	if c.fixesGen != c.gen {
		if err := xext.Init(c.conn, "XFIXES", xfixes.Init); err != nil {
			return Pointer{}, fmt.Errorf("read the pointer: %w", err)
		}
		// The server answers GetCursorImage only to a client that said
		// which version it speaks.
		if _, err := xfixes.QueryVersion(c.conn, 4, 0).Reply(); err != nil {
			return Pointer{}, fmt.Errorf("read the pointer: XFIXES version: %w", err)
		}
		c.fixesGen = c.gen
	}
	r, err := xfixes.GetCursorImage(c.conn).Reply()
	if err != nil {
		return Pointer{}, fmt.Errorf("read the pointer: %w", err)
	}
	return Pointer{X: int(r.X), Y: int(r.Y), XHot: int(r.Xhot), YHot: int(r.Yhot), W: int(r.Width), H: int(r.Height),
		ARGB: r.CursorImage, Serial: r.CursorSerial}, nil
}

// DrawOn blends the pointer onto a captured frame (BGRX) at its position,
// clipped to the frame.
func (p Pointer) DrawOn(f *Frame) {
	x0, y0 := p.X-p.XHot, p.Y-p.YHot
	for j := max(0, -y0); j < p.H && y0+j < f.Height; j++ {
		for i := max(0, -x0); i < p.W && x0+i < f.Width; i++ {
			px := p.ARGB[j*p.W+i]
			a := px >> 24
			if a == 0 {
				continue
			}
			o := (y0+j)*f.Stride + (x0+i)*4
			inv := 255 - a
			// Premultiplied: out = src + dst * (1 - alpha).
			f.Pix[o+0] = byte(px&0xff + (uint32(f.Pix[o+0])*inv+127)/255)
			f.Pix[o+1] = byte(px>>8&0xff + (uint32(f.Pix[o+1])*inv+127)/255)
			f.Pix[o+2] = byte(px>>16&0xff + (uint32(f.Pix[o+2])*inv+127)/255)
		}
	}
}

// mix folds the pointer into a frame's hash, so a screenshot with the
// pointer elsewhere (or another pointer) is not mistaken for the last one.
func (p Pointer) mix(seed maphash.Seed, h uint64) uint64 {
	var m maphash.Hash
	m.SetSeed(seed)
	var b [24]byte
	for i, v := range []uint64{h, uint64(uint32(p.X))<<32 | uint64(uint32(p.Y)), uint64(p.Serial)} {
		for k := 0; k < 8; k++ {
			b[i*8+k] = byte(v >> (8 * k))
		}
	}
	m.Write(b[:])
	return m.Sum64()
}
