package codec

import (
	"testing"
	"time"
)

// goBGRXToI420 is the usual pure-Go alternative: per-pixel BT.601 arithmetic.
func goBGRXToI420(src []byte, w, h int, dst *I420) {
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			p := src[(y*w+x)*4:]
			b, g, r := int(p[0]), int(p[1]), int(p[2])
			dst.Y[y*dst.StrideY+x] = byte((66*r+129*g+25*b+128)>>8 + 16)
			if x%2 == 0 && y%2 == 0 {
				dst.U[(y/2)*dst.StrideU+x/2] = byte((-38*r-74*g+112*b+128)>>8 + 128)
				dst.V[(y/2)*dst.StrideV+x/2] = byte((112*r-94*g-18*b+128)>>8 + 128)
			}
		}
	}
}

func BenchmarkBGRXToI420(b *testing.B) {
	const w, h = 1280, 800
	src := moving(w, h, 3)
	dst := NewI420(w, h)
	b.Run("libyuv", func(b *testing.B) {
		for b.Loop() {
			BGRXToI420(src, w*4, w, h, dst)
		}
	})
	b.Run("pure_go", func(b *testing.B) {
		for b.Loop() {
			goBGRXToI420(src, w, h, dst)
		}
	})
}

func BenchmarkH264Encode(b *testing.B) {
	const w, h = 1280, 800
	frames := make([]*I420, 8)
	for i := range frames {
		frames[i] = NewI420(w, h)
		BGRXToI420(moving(w, h, i*3), w*4, w, h, frames[i])
	}
	for _, preset := range []string{"ultrafast", "superfast"} {
		b.Run(preset, func(b *testing.B) {
			enc, err := NewH264Encoder(H264Options{Width: w, Height: h, Preset: preset})
			if err != nil {
				b.Fatal(err)
			}
			defer enc.Close()
			i := 0
			for b.Loop() {
				if _, _, err := enc.Encode(frames[i%len(frames)], time.Duration(i)*33*time.Millisecond); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
