// Package codec wraps the C libraries the video path needs: libyuv for colour
// conversion and scaling, libx264 for H.264. The wrappers are thin on purpose:
// buffers are Go memory, and nothing C-owned outlives a call.
package codec

/*
#cgo LDFLAGS: -lyuv
#include <stdint.h>
#include <libyuv/convert.h>
#include <libyuv/scale_argb.h>
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// I420 is a planar YUV 4:2:0 picture: full-size Y, quarter-size U and V.
type I420 struct {
	Y, U, V                   []byte
	StrideY, StrideU, StrideV int
	Width, Height             int
}

// NewI420 allocates a w x h picture. Odd sizes round the chroma planes up.
func NewI420(w, h int) *I420 {
	cw, ch := (w+1)/2, (h+1)/2
	return &I420{
		Y: make([]byte, w*h), U: make([]byte, cw*ch), V: make([]byte, cw*ch),
		StrideY: w, StrideU: cw, StrideV: cw, Width: w, Height: h,
	}
}

func checkBGRX(src []byte, stride, w, h int) error {
	if w <= 0 || h <= 0 {
		return fmt.Errorf("source size %dx%d is empty", w, h)
	}
	if stride < w*4 || len(src) < stride*(h-1)+w*4 {
		return fmt.Errorf("source buffer of %d bytes (stride %d) is too small for %dx%d BGRX", len(src), stride, w, h)
	}
	return nil
}

func (p *I420) check() error {
	cw, ch := (p.Width+1)/2, (p.Height+1)/2
	if p.Width <= 0 || p.Height <= 0 || len(p.Y) < p.StrideY*(p.Height-1)+p.Width ||
		len(p.U) < p.StrideU*(ch-1)+cw || len(p.V) < p.StrideV*(ch-1)+cw {
		return fmt.Errorf("I420 picture %dx%d has planes too small for its size", p.Width, p.Height)
	}
	return nil
}

// BGRXToI420 converts X's 32-bit pixels (B, G, R, X in memory, which libyuv
// calls ARGB) into dst, which must be the same size (BT.601, limited range).
func BGRXToI420(src []byte, srcStride, w, h int, dst *I420) error {
	if err := checkBGRX(src, srcStride, w, h); err != nil {
		return err
	}
	if err := dst.check(); err != nil {
		return err
	}
	if dst.Width != w || dst.Height != h {
		return fmt.Errorf("destination is %dx%d, source %dx%d: use ScaleBGRXToI420", dst.Width, dst.Height, w, h)
	}
	r := C.ARGBToI420((*C.uint8_t)(unsafe.Pointer(&src[0])), C.int(srcStride),
		(*C.uint8_t)(unsafe.Pointer(&dst.Y[0])), C.int(dst.StrideY),
		(*C.uint8_t)(unsafe.Pointer(&dst.U[0])), C.int(dst.StrideU),
		(*C.uint8_t)(unsafe.Pointer(&dst.V[0])), C.int(dst.StrideV),
		C.int(w), C.int(h))
	if r != 0 {
		return fmt.Errorf("libyuv ARGBToI420 failed (%d)", int(r))
	}
	return nil
}

// Scaler converts BGRX pictures of one size into I420 of another, keeping the
// intermediate buffer between calls. Not safe for concurrent use.
type Scaler struct {
	tmp []byte
}

// ScaleBGRXToI420 scales src to dst's size with a box filter, then converts.
func (s *Scaler) ScaleBGRXToI420(src []byte, srcStride, srcW, srcH int, dst *I420) error {
	if err := checkBGRX(src, srcStride, srcW, srcH); err != nil {
		return err
	}
	if err := dst.check(); err != nil {
		return err
	}
	if dst.Width == srcW && dst.Height == srcH {
		return BGRXToI420(src, srcStride, srcW, srcH, dst)
	}
	n := dst.Width * dst.Height * 4
	if cap(s.tmp) < n {
		s.tmp = make([]byte, n)
	}
	tmp := s.tmp[:n]
	r := C.ARGBScale((*C.uint8_t)(unsafe.Pointer(&src[0])), C.int(srcStride), C.int(srcW), C.int(srcH),
		(*C.uint8_t)(unsafe.Pointer(&tmp[0])), C.int(dst.Width*4), C.int(dst.Width), C.int(dst.Height),
		C.kFilterBox)
	if r != 0 {
		return fmt.Errorf("libyuv ARGBScale failed (%d)", int(r))
	}
	return BGRXToI420(tmp, dst.Width*4, dst.Width, dst.Height, dst)
}

// ScaleBGRXToI420 is Scaler.ScaleBGRXToI420 with a buffer of its own.
func ScaleBGRXToI420(src []byte, srcStride, srcW, srcH int, dst *I420) error {
	var s Scaler
	return s.ScaleBGRXToI420(src, srcStride, srcW, srcH, dst)
}
