package screen

import (
	"image"
	"runtime"
	"sync"
)

// Scale returns f resized to w x h by area averaging: every destination pixel
// is the mean of the source pixels it covers, weighted by how much of each it
// covers. Downscaled text stays legible, which matters more to a model than
// speed at the edges. Same size returns f itself.
func Scale(f *Frame, w, h int) *Frame {
	var sc scaler
	return sc.scale(f, w, h)
}

// scaler is Scale keeping its weights for the sizes it last served and its
// output frame: a Shooter scales the same sizes for every screenshot, and
// the weights alone are thousands of small allocations. The returned frame
// is overwritten by the next call.
type scaler struct {
	srcW, srcH, w, h int
	xs               flatWeights
	ys               [][]contrib
	dst              Frame
}

func (sc *scaler) scale(f *Frame, w, h int) *Frame {
	if w == f.Width && h == f.Height {
		return f
	}
	if sc.srcW != f.Width || sc.srcH != f.Height || sc.w != w || sc.h != h {
		sc.srcW, sc.srcH, sc.w, sc.h = f.Width, f.Height, w, h
		sc.xs = flatten(areaWeights(f.Width, w))
		sc.ys = areaWeights(f.Height, h)
		sc.dst = Frame{Pix: make([]byte, w*h*4), Stride: w * 4, Width: w, Height: h}
	}
	xs, ys, dst := sc.xs, sc.ys, &sc.dst
	dst.Time = f.Time

	workers := runtime.GOMAXPROCS(0)
	per := (h + workers - 1) / workers
	var wg sync.WaitGroup
	for y0 := 0; y0 < h; y0 += per {
		wg.Add(1)
		go func(y0, y1 int) {
			defer wg.Done()
			acc := make([]uint32, f.Width*3) // one row of the vertical pass
			for y := y0; y < y1; y++ {
				for k, c := range ys[y] {
					verticalRow(acc, f.Pix[c.i*f.Stride:c.i*f.Stride+f.Width*4], c.w, k == 0)
				}
				horizontalRow(dst.Pix[y*dst.Stride:y*dst.Stride+w*4], acc, xs)
			}
		}(y0, min(y0+per, h))
	}
	wg.Wait()
	return dst
}

// verticalRow adds one source row (BGRA), weighted by wt, into acc (BGR);
// the first contributor of a row sets acc instead of adding, which saves
// clearing it. The slices are cut to their exact lengths so the compiler
// drops the bounds checks in the loop, the hot spot of a downscale.
func verticalRow(acc []uint32, row []byte, wt uint32, first bool) {
	n := len(row) / 4
	acc = acc[:n*3]
	row = row[:n*4]
	if first {
		for x := 0; x < n; x++ {
			p := row[x*4 : x*4+3 : x*4+3]
			a := acc[x*3 : x*3+3 : x*3+3]
			a[0] = uint32(p[0]) * wt
			a[1] = uint32(p[1]) * wt
			a[2] = uint32(p[2]) * wt
		}
		return
	}
	for x := 0; x < n; x++ {
		p := row[x*4 : x*4+3 : x*4+3]
		a := acc[x*3 : x*3+3 : x*3+3]
		a[0] += uint32(p[0]) * wt
		a[1] += uint32(p[1]) * wt
		a[2] += uint32(p[2]) * wt
	}
}

// horizontalRow writes one destination row (BGRA) from the vertical pass.
// uint32 is enough: a channel is at most 255 * 2^12 after the vertical pass,
// times weights summing to 2^12 is under 2^32 even with the rounding term.
func horizontalRow(out []byte, acc []uint32, xs flatWeights) {
	const round = 1 << (2*weightBits - 1)
	n := len(out) / 4
	for x := 0; x < n; x++ {
		var b, g, r uint32
		lo, hi := xs.start[x], xs.start[x+1]
		for k := lo; k < hi; k++ {
			i, wt := xs.index[k]*3, xs.weight[k]
			a := acc[i : i+3 : i+3]
			b += a[0] * wt
			g += a[1] * wt
			r += a[2] * wt
		}
		o := out[x*4 : x*4+4 : x*4+4]
		o[0] = byte((b + round) >> (2 * weightBits))
		o[1] = byte((g + round) >> (2 * weightBits))
		o[2] = byte((r + round) >> (2 * weightBits))
		o[3] = 0xff
	}
}

// flatWeights is areaWeights in three flat slices: destination x takes
// source index[k] with weight[k] for k in start[x]..start[x+1].
type flatWeights struct {
	start  []int
	index  []int
	weight []uint32
}

func flatten(ws [][]contrib) flatWeights {
	fw := flatWeights{start: make([]int, 0, len(ws)+1)}
	for _, cs := range ws {
		fw.start = append(fw.start, len(fw.index))
		for _, c := range cs {
			fw.index = append(fw.index, c.i)
			fw.weight = append(fw.weight, c.w)
		}
	}
	fw.start = append(fw.start, len(fw.index))
	return fw
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
func Crop(f *Frame, r image.Rectangle) *Frame {
	r = r.Intersect(image.Rect(0, 0, f.Width, f.Height))
	dst := &Frame{Pix: make([]byte, r.Dx()*r.Dy()*4), Stride: r.Dx() * 4, Width: r.Dx(), Height: r.Dy(), Time: f.Time}
	for y := 0; y < r.Dy(); y++ {
		src := f.Pix[(r.Min.Y+y)*f.Stride+r.Min.X*4:]
		copy(dst.Pix[y*dst.Stride:(y+1)*dst.Stride], src[:r.Dx()*4])
	}
	return dst
}

// RGBA converts the frame to a standard library image.
func (f *Frame) RGBA() *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, f.Width, f.Height))
	for y := 0; y < f.Height; y++ {
		src := f.Pix[y*f.Stride : y*f.Stride+f.Width*4]
		dst := img.Pix[y*img.Stride : y*img.Stride+f.Width*4]
		for x := 0; x < len(src); x += 4 {
			dst[x], dst[x+1], dst[x+2], dst[x+3] = src[x+2], src[x+1], src[x], 0xff
		}
	}
	return img
}
