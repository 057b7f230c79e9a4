package screen

import (
	"bytes"
	"image/png"
	"math/rand/v2"
	"testing"
)

// frameOf is a w x h BGRX frame of text-like noise: runs of background with
// short strokes, so deflate has both to do.
func frameOf(w, h int, seed uint64) *Frame {
	f := &Frame{Pix: make([]byte, w*h*4), Stride: w * 4, Width: w, Height: h}
	r := rand.New(rand.NewPCG(seed, 1))
	for i := 0; i < len(f.Pix); i += 4 {
		if r.IntN(9) == 0 {
			f.Pix[i], f.Pix[i+1], f.Pix[i+2] = byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))
		} else {
			f.Pix[i], f.Pix[i+1], f.Pix[i+2] = 0xf0, 0xf0, 0xf0
		}
	}
	return f
}

// decodeSame fails unless data is a PNG of exactly f's pixels.
func decodeSame(t *testing.T, what string, data []byte, f *Frame) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: the PNG does not decode: %v", what, err)
	}
	if b := img.Bounds(); b.Dx() != f.Width || b.Dy() != f.Height {
		t.Fatalf("%s: PNG is %dx%d, want %dx%d", what, b.Dx(), b.Dy(), f.Width, f.Height)
	}
	for y := 0; y < f.Height; y++ {
		for x := 0; x < f.Width; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			got := (r>>8)<<16 | (g>>8)<<8 | b>>8
			if want := pixel(f, x, y); got != want {
				t.Fatalf("%s: pixel %d,%d = %06x, want %06x", what, x, y, got, want)
			}
		}
	}
}

// TestPNGReencodesChangedBands: one encoder over a sequence of frames gives
// PNGs that decode to each frame exactly (Go's decoder checks the zlib
// stream's Adler-32 and every chunk's CRC), re-deflating only the bands the
// change touched: a change in a band's first row also re-deflates nothing
// else, a change in the last row of a band also the band below (its first
// row is filtered against it), a frame of another size starts over.
func TestPNGReencodesChangedBands(t *testing.T) {
	redone := func(e *pngEncoder) (n int) {
		for _, b := range e.bands {
			if b.redo {
				n++
			}
		}
		return n
	}
	var e pngEncoder
	encode := func(f *Frame) []byte {
		var buf bytes.Buffer
		if err := e.encode(&buf, f); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	const w, h = 200, 5*bandRows - 10 // 5 bands, the last one short
	B := bandRows
	f := frameOf(w, h, 1)
	flip := func(f *Frame, y, x int) *Frame { f.Pix[y*f.Stride+x] ^= 0xff; return f }
	steps := []struct {
		name   string
		change func(f *Frame) *Frame
		redone int
	}{
		{"first encode", func(f *Frame) *Frame { return f }, 5},
		{"unchanged", func(f *Frame) *Frame { return f }, 0},
		{"a pixel in band 2's first row", func(f *Frame) *Frame { return flip(f, 2*B, 40) }, 1},
		{"a pixel in band 1's last row", func(f *Frame) *Frame { return flip(f, 2*B-1, 40) }, 2},
		{"a pixel in the short last band", func(f *Frame) *Frame { return flip(f, h-1, 4) }, 1},
		{"the whole screen", func(*Frame) *Frame { return frameOf(w, h, 2) }, 5},
		{"band 0 and band 3 swapped content", func(f *Frame) *Frame {
			g := &Frame{Pix: bytes.Clone(f.Pix), Stride: f.Stride, Width: f.Width, Height: f.Height}
			copy(g.Pix[0:B*f.Stride], f.Pix[3*B*f.Stride:4*B*f.Stride])
			copy(g.Pix[3*B*f.Stride:4*B*f.Stride], f.Pix[0:B*f.Stride])
			return g
		}, 4}, // bands 1 and 4 too: the rows above them changed
		{"another width", func(*Frame) *Frame { return frameOf(120, h, 3) }, 5},
		{"another height", func(*Frame) *Frame { return frameOf(120, 2*B+5, 4) }, 3},
		{"one row", func(*Frame) *Frame { return frameOf(9, 1, 5) }, 1},
	}
	for _, st := range steps {
		f = st.change(f)
		data := encode(f)
		decodeSame(t, st.name, data, f)
		if got := redone(&e); got != st.redone {
			t.Errorf("%s: %d bands deflated again, want %d", st.name, got, st.redone)
		}
		var fresh pngEncoder
		var buf bytes.Buffer
		if err := fresh.encode(&buf, f); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), data) {
			t.Errorf("%s: the PNG differs from a fresh encoder's: the cached bands are not what deflating them again gives", st.name)
		}
	}
}
