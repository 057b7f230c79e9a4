package screen

import (
	"bytes"
	"encoding/binary"
	"github.com/klauspost/compress/flate"
	"hash/adler32"
	"hash/crc32"
	"io"
	"runtime"
	"sync"
)

// EncodePNG writes f as an 8-bit RGB PNG. It is a lossless encoder built for
// desktop screens: rows get the Up filter (long identical runs become zeros),
// and bands of rows are deflated in parallel at the fastest level, each band
// ending on a sync flush so the pieces join into one valid zlib stream (the
// way pigz parallelises gzip). The standard library's encoder takes several
// times longer on the same screen (see BenchmarkScreenshot).
func EncodePNG(w io.Writer, f *Frame) error {
	var e pngEncoder
	return e.encode(w, f)
}

// pngEncoder keeps the per-band compressors and buffers between encodes, so a
// Shooter encodes without allocating megabytes each time. Not safe for
// concurrent use.
type pngEncoder struct {
	bands []pngBand
	buf   bytes.Buffer
}

type pngBand struct {
	zw    *flate.Writer
	out   bytes.Buffer
	row   []byte
	adler uint32
	n     int // bytes of filtered rows
}

func (e *pngEncoder) encode(w io.Writer, f *Frame) error {
	e.buf.Reset()
	e.buf.WriteString("\x89PNG\r\n\x1a\n")
	var ihdr [13]byte
	binary.BigEndian.PutUint32(ihdr[0:], uint32(f.Width))
	binary.BigEndian.PutUint32(ihdr[4:], uint32(f.Height))
	ihdr[8] = 8 // bit depth
	ihdr[9] = 2 // colour type: RGB
	writeChunk(&e.buf, "IHDR", ihdr[:])
	writeChunk(&e.buf, "IDAT", e.deflateRows(f))
	writeChunk(&e.buf, "IEND", nil)
	_, err := w.Write(e.buf.Bytes())
	return err
}

func writeChunk(buf *bytes.Buffer, typ string, data []byte) {
	var hdr [8]byte
	binary.BigEndian.PutUint32(hdr[0:], uint32(len(data)))
	copy(hdr[4:], typ)
	buf.Write(hdr[:])
	buf.Write(data)
	crc := crc32.Update(crc32.ChecksumIEEE(hdr[4:8]), crc32.IEEETable, data)
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], crc)
	buf.Write(sum[:])
}

// deflateRows filters f's rows and returns their zlib stream.
func (e *pngEncoder) deflateRows(f *Frame) []byte {
	rowLen := 1 + f.Width*3
	n := 1
	if f.Height >= 64 {
		// Two bands a core keeps both cores busy when one band is all text
		// and the other all background.
		n = min(2*runtime.GOMAXPROCS(0), f.Height/32)
	}
	for len(e.bands) < n {
		zw, _ := flate.NewWriter(nil, flate.BestSpeed)
		e.bands = append(e.bands, pngBand{zw: zw})
	}
	per := (f.Height + n - 1) / n
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		y0, y1 := i*per, min((i+1)*per, f.Height)
		b := &e.bands[i]
		b.out.Reset()
		b.n = 0
		b.adler = 1
		if y0 >= y1 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if cap(b.row) < rowLen {
				b.row = make([]byte, rowLen)
			}
			row := b.row[:rowLen]
			b.zw.Reset(&b.out)
			sum := adler32.New()
			for y := y0; y < y1; y++ {
				filterRow(row, f, y)
				b.zw.Write(row)
				sum.Write(row)
			}
			if y1 == f.Height {
				b.zw.Close() // the final block
			} else {
				b.zw.Flush() // byte-aligned and not final: the next band continues the stream
			}
			b.adler = sum.Sum32()
			b.n = (y1 - y0) * rowLen
		}()
	}
	wg.Wait()

	total := 2 + 4
	for i := 0; i < n; i++ {
		total += e.bands[i].out.Len()
	}
	z := make([]byte, 0, total)
	z = append(z, 0x78, 0x01) // zlib header: deflate, 32K window, fastest
	sum := uint32(1)
	for i := 0; i < n; i++ {
		b := &e.bands[i]
		z = append(z, b.out.Bytes()...)
		sum = adler32Combine(sum, b.adler, b.n)
	}
	return binary.BigEndian.AppendUint32(z, sum)
}

// adler32Combine returns the Adler-32 of A followed by B from the sums of A
// and B and the length of B. s1 is 1 plus the sum of the bytes and s2 the sum
// of s1 after each byte, so appending B adds (s1(A)-1) to each of B's len(B)
// running s1 values: s1 = s1(A)+s1(B)-1, s2 = s2(A)+s2(B)+len(B)*(s1(A)-1).
func adler32Combine(a, b uint32, lenB int) uint32 {
	const mod = 65521
	a1, a2 := uint64(a&0xffff), uint64(a>>16)
	b1, b2 := uint64(b&0xffff), uint64(b>>16)
	n := uint64(lenB) % mod
	s1 := (a1 + b1 + mod - 1) % mod
	s2 := (a2 + b2 + n*((a1+mod-1)%mod)) % mod
	return uint32(s2<<16 | s1)
}

// filterRow writes row y of f into dst as PNG filter byte + RGB, using the Up
// filter against the row above (None for the first row).
func filterRow(dst []byte, f *Frame, y int) {
	src := f.Pix[y*f.Stride : y*f.Stride+f.Width*4]
	out := dst[1:]
	if y == 0 {
		dst[0] = 0
		for x, i := 0, 0; x < len(src); x, i = x+4, i+3 {
			out[i], out[i+1], out[i+2] = src[x+2], src[x+1], src[x]
		}
		return
	}
	dst[0] = 2
	up := f.Pix[(y-1)*f.Stride : (y-1)*f.Stride+f.Width*4]
	for x, i := 0, 0; x < len(src); x, i = x+4, i+3 {
		out[i] = src[x+2] - up[x+2]
		out[i+1] = src[x+1] - up[x+1]
		out[i+2] = src[x] - up[x]
	}
}
