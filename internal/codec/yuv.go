// Package codec wraps the C libraries the video path needs: libyuv for colour
// conversion and scaling, libx264 for H.264, libvpx for VP8, each encoder behind
// one Encoder interface and one Codec descriptor. The wrappers are thin on purpose:
// pictures are Go memory handed to C only for the length of a call, and
// nothing C hands back outlives a call without being copied.
//
// Colour: X's 32-bit pixels are B, G, R, X bytes in memory (libyuv's "ARGB",
// named as a little-endian word). They become I420 in BT.601 limited range
// (Y 16..235, U and V 16..240), and the H.264 stream says so in its VUI, so
// decoders do not have to guess the matrix.
package codec

/*
#cgo LDFLAGS: -lyuv
#include <stdint.h>
#include <libyuv/convert_from_argb.h>
#include <libyuv/scale_argb.h>
*/
import "C"

import (
	"errors"
	"fmt"
	"image"
	"unsafe"
)

// I420 is a planar YUV 4:2:0 picture: a full-size Y plane and U and V planes
// of half the width and height, rounded up.
type I420 struct {
	Y, U, V                   []byte
	StrideY, StrideU, StrideV int
	Width, Height             int
}

// NewI420 allocates a w x h picture with tightly packed rows. Odd sizes round
// the chroma planes up. A size that is not positive gives a picture with no
// planes, which every function here rejects with an error naming the size.
func NewI420(w, h int) *I420 {
	if w <= 0 || h <= 0 || w > maxSide || h > maxSide {
		return &I420{Width: w, Height: h}
	}
	cw, ch := (w+1)/2, (h+1)/2
	return &I420{
		Y: make([]byte, w*h), U: make([]byte, cw*ch), V: make([]byte, cw*ch),
		StrideY: w, StrideU: cw, StrideV: cw, Width: w, Height: h,
	}
}

// maxSide bounds picture sides so size arithmetic can never overflow an int
// or a C int; it is far beyond any screen.
const maxSide = 1 << 14

func checkBGRX(src []byte, stride, w, h int) error {
	switch {
	case w <= 0 || h <= 0 || w > maxSide || h > maxSide:
		return fmt.Errorf("BGRX source size %dx%d is out of range: width and height must be 1 to %d", w, h, maxSide)
	case stride < w*4:
		return fmt.Errorf("BGRX source stride %d is less than 4 bytes times the width %d", stride, w)
	case len(src) < stride*(h-1)+w*4:
		return fmt.Errorf("BGRX source buffer of %d bytes is too small for %dx%d with stride %d (need %d)",
			len(src), w, h, stride, stride*(h-1)+w*4)
	}
	return nil
}

// check makes sure C can write or read every row of every plane without
// leaving the slices. Negative strides (libyuv's way of flipping) are refused:
// they would walk backwards out of the buffer.
func (p *I420) check() error {
	if p == nil {
		return errors.New("I420 picture is nil")
	}
	if p.Width <= 0 || p.Height <= 0 || p.Width > maxSide || p.Height > maxSide {
		return fmt.Errorf("I420 picture size %dx%d is out of range: width and height must be 1 to %d", p.Width, p.Height, maxSide)
	}
	cw, ch := (p.Width+1)/2, (p.Height+1)/2
	planes := []struct {
		name      string
		b         []byte
		stride    int
		w, h      int
		strideMin int
	}{
		{"Y", p.Y, p.StrideY, p.Width, p.Height, p.Width},
		{"U", p.U, p.StrideU, cw, ch, cw},
		{"V", p.V, p.StrideV, cw, ch, cw},
	}
	for _, pl := range planes {
		if pl.stride < pl.strideMin {
			return fmt.Errorf("I420 %dx%d: %s stride %d is less than the plane width %d", p.Width, p.Height, pl.name, pl.stride, pl.strideMin)
		}
		if need := pl.stride*(pl.h-1) + pl.w; len(pl.b) < need {
			return fmt.Errorf("I420 %dx%d: %s plane has %d bytes, needs %d for stride %d", p.Width, p.Height, pl.name, len(pl.b), need, pl.stride)
		}
	}
	return nil
}

func ptr(b []byte) *C.uint8_t { return (*C.uint8_t)(unsafe.Pointer(&b[0])) }

// Area is the part r of p, sharing p's planes, so a conversion into it
// writes only there (a stream converting what changed). r must lie inside p
// with even edges (a chroma sample covers 2x2 pixels), except that its right
// and bottom edges may be p's own odd ones.
func (p *I420) Area(r image.Rectangle) (*I420, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	whole := image.Rect(0, 0, p.Width, p.Height)
	oddEdge := func(v, limit int) bool { return v%2 != 0 && v != limit }
	if r.Empty() || !r.In(whole) || r.Min.X%2 != 0 || r.Min.Y%2 != 0 || oddEdge(r.Max.X, p.Width) || oddEdge(r.Max.Y, p.Height) {
		return nil, fmt.Errorf("area %v of a %dx%d picture: it must be inside it, not empty, with even edges", r, p.Width, p.Height)
	}
	cx, cy := r.Min.X/2, r.Min.Y/2
	return &I420{
		Y: p.Y[r.Min.Y*p.StrideY+r.Min.X:], U: p.U[cy*p.StrideU+cx:], V: p.V[cy*p.StrideV+cx:],
		StrideY: p.StrideY, StrideU: p.StrideU, StrideV: p.StrideV,
		Width: r.Dx(), Height: r.Dy(),
	}, nil
}

// BGRXToI420 converts a w x h picture of X's 32-bit pixels into dst, which
// must be the same size.
func BGRXToI420(src []byte, srcStride, w, h int, dst *I420) error {
	if err := checkBGRX(src, srcStride, w, h); err != nil {
		return err
	}
	if err := dst.check(); err != nil {
		return fmt.Errorf("destination: %w", err)
	}
	if dst.Width != w || dst.Height != h {
		return fmt.Errorf("destination is %dx%d but the source is %dx%d: use ScaleBGRXToI420 to change size", dst.Width, dst.Height, w, h)
	}
	if r := C.ARGBToI420(ptr(src), C.int(srcStride), ptr(dst.Y), C.int(dst.StrideY),
		ptr(dst.U), C.int(dst.StrideU), ptr(dst.V), C.int(dst.StrideV), C.int(w), C.int(h)); r != 0 {
		return fmt.Errorf("libyuv ARGBToI420 %dx%d failed (%d)", w, h, int(r))
	}
	return nil
}

// Scaler converts BGRX pictures into I420 pictures of another size and keeps
// its scratch buffer from call to call, so a stream does not allocate a
// frame's worth of memory per frame. Not safe for concurrent use; the zero
// value is ready.
type Scaler struct {
	tmp []byte
}

// ScaleBGRXToI420 fits src into dst's size with a box filter (every source
// pixel counts, so thin text lines fade rather than vanish when shrinking) and
// converts it. The same size is a plain conversion. At ratios that are not
// whole numbers libyuv's box filter rounds down: colours come out up to 2 of
// 255 darker (white becomes 253).
func (s *Scaler) ScaleBGRXToI420(src []byte, srcStride, srcW, srcH int, dst *I420) error {
	if err := checkBGRX(src, srcStride, srcW, srcH); err != nil {
		return err
	}
	if err := dst.check(); err != nil {
		return fmt.Errorf("destination: %w", err)
	}
	if dst.Width == srcW && dst.Height == srcH {
		return BGRXToI420(src, srcStride, srcW, srcH, dst)
	}
	// Scale in BGRX, then convert the small picture. Measured against the
	// other order (convert at full size, then I420Scale the planes) on this
	// machine: 1.2 vs 1.2 ms for 2560x1600->1280x800, 1.3 vs 2.0 ms for
	// 1920x1080->1280x720, 1.2 vs 1.8 ms for 1366x768->1280x720. Chroma is
	// also averaged in RGB before it is subsampled, not after.
	n := dst.Width * dst.Height * 4
	if cap(s.tmp) < n {
		s.tmp = make([]byte, n)
	}
	tmp := s.tmp[:n]
	if r := C.ARGBScale(ptr(src), C.int(srcStride), C.int(srcW), C.int(srcH),
		ptr(tmp), C.int(dst.Width*4), C.int(dst.Width), C.int(dst.Height), C.kFilterBox); r != 0 {
		return fmt.Errorf("libyuv ARGBScale %dx%d to %dx%d failed (%d)", srcW, srcH, dst.Width, dst.Height, int(r))
	}
	return BGRXToI420(tmp, dst.Width*4, dst.Width, dst.Height, dst)
}

// ScaleBGRXToI420 is Scaler.ScaleBGRXToI420 with a scratch buffer of its own
// (allocated per call: keep a Scaler for a stream).
func ScaleBGRXToI420(src []byte, srcStride, srcW, srcH int, dst *I420) error {
	var s Scaler
	return s.ScaleBGRXToI420(src, srcStride, srcW, srcH, dst)
}
