package image

import (
	stdimage "image"
	"runtime"
	"sync"
)

// Scale returns f resized to w x h by area averaging: every destination pixel
// is the mean of the source pixels it covers, weighted by how much of each it
// covers. Downscaled text stays legible, which matters more to a model than
// speed at the edges. Same size returns f itself.
func Scale(f *Frame, w, h int) *Frame {
	if w == f.Width && h == f.Height {
		return f
	}
	xs := areaWeights(f.Width, w)
	ys := areaWeights(f.Height, h)
	dst := &Frame{Pix: make([]byte, w*h*4), Stride: w * 4, Width: w, Height: h, Time: f.Time}

	workers := runtime.GOMAXPROCS(0)
	per := (h + workers - 1) / workers
	var wg sync.WaitGroup
	for y0 := 0; y0 < h; y0 += per {
		wg.Add(1)
		go func(y0, y1 int) {
			defer wg.Done()
			acc := make([]uint32, f.Width*3) // one row of the vertical pass
			for y := y0; y < y1; y++ {
				clear(acc)
				for _, c := range ys[y] {
					row := f.Pix[c.i*f.Stride:]
					for x := 0; x < f.Width; x++ {
						acc[x*3] += uint32(row[x*4]) * c.w
						acc[x*3+1] += uint32(row[x*4+1]) * c.w
						acc[x*3+2] += uint32(row[x*4+2]) * c.w
					}
				}
				out := dst.Pix[y*dst.Stride:]
				for x := 0; x < w; x++ {
					var b, g, r uint64
					for _, c := range xs[x] {
						b += uint64(acc[c.i*3]) * uint64(c.w)
						g += uint64(acc[c.i*3+1]) * uint64(c.w)
						r += uint64(acc[c.i*3+2]) * uint64(c.w)
					}
					// Weights sum to 1<<weightBits on each axis.
					const round = 1 << (2*weightBits - 1)
					out[x*4] = byte((b + round) >> (2 * weightBits))
					out[x*4+1] = byte((g + round) >> (2 * weightBits))
					out[x*4+2] = byte((r + round) >> (2 * weightBits))
					out[x*4+3] = 0xff
				}
			}
		}(y0, min(y0+per, h))
	}
	wg.Wait()
	return dst
}

const weightBits = 12

type contrib struct {
	i int
	w uint32
}

// areaWeights gives, for every destination index, the source indices it
// covers and their weights in fixed point, summing to exactly 1<<weightBits.
func areaWeights(src, dst int) [][]contrib {
	out := make([][]contrib, dst)
	const one = 1 << weightBits
	for d := 0; d < dst; d++ {
		// Destination pixel d covers source span [d*src/dst, (d+1)*src/dst),
		// computed in units of 1/dst to stay exact.
		lo, hi := d*src, (d+1)*src
		var cs []contrib
		var sum uint32
		for s := lo / dst; s*dst < hi && s < src; s++ {
			a, b := max(lo, s*dst), min(hi, (s+1)*dst)
			if b <= a {
				continue
			}
			w := uint32((b - a) * one / src)
			cs = append(cs, contrib{s, w})
			sum += w
		}
		// Give the rounding loss to the largest contributor so weights sum to one.
		best := 0
		for i := range cs {
			if cs[i].w > cs[best].w {
				best = i
			}
		}
		cs[best].w += one - sum
		out[d] = cs
	}
	return out
}

// Crop returns the part of f inside r (clipped to the frame), sharing nothing
// with f.
func Crop(f *Frame, r stdimage.Rectangle) *Frame {
	r = r.Intersect(stdimage.Rect(0, 0, f.Width, f.Height))
	dst := &Frame{Pix: make([]byte, r.Dx()*r.Dy()*4), Stride: r.Dx() * 4, Width: r.Dx(), Height: r.Dy(), Time: f.Time}
	for y := 0; y < r.Dy(); y++ {
		src := f.Pix[(r.Min.Y+y)*f.Stride+r.Min.X*4:]
		copy(dst.Pix[y*dst.Stride:(y+1)*dst.Stride], src[:r.Dx()*4])
	}
	return dst
}

// RGBA converts the frame to a standard library image.
func (f *Frame) RGBA() *stdimage.RGBA {
	img := stdimage.NewRGBA(stdimage.Rect(0, 0, f.Width, f.Height))
	for y := 0; y < f.Height; y++ {
		src := f.Pix[y*f.Stride : y*f.Stride+f.Width*4]
		dst := img.Pix[y*img.Stride : y*img.Stride+f.Width*4]
		for x := 0; x < len(src); x += 4 {
			dst[x], dst[x+1], dst[x+2], dst[x+3] = src[x+2], src[x+1], src[x], 0xff
		}
	}
	return img
}
