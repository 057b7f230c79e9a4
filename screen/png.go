package screen

import (
	"bytes"
	"encoding/binary"
	"hash/adler32"
	"hash/crc32"
	"hash/maphash"
	"io"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/flate"
)

// EncodePNG writes f as an 8-bit RGB PNG. It is a lossless encoder built for
// desktop screens: rows get the Up filter (long identical runs become zeros),
// and bands of rows are deflated in parallel at the fastest level, each band
// ending on a sync flush so the pieces join into one valid zlib stream (the
// way pigz parallelises gzip). The standard library's encoder takes several
// times longer on the same screen (see BenchmarkScreenshot). A Shooter keeps
// its encoder, which re-deflates only the bands that changed.
func EncodePNG(w io.Writer, f *Frame) error {
	var e pngEncoder
	return e.encode(w, f)
}

// pngEncoder keeps, between encodes, each band's compressed rows with the
// hash of the pixels they came from, so a screen where a line of text
// changed re-deflates the band that holds it and copies the others: the
// zlib stream is bands joined at sync flushes (each band deflated on its
// own, with the Adler-32 combined), so an unchanged band's bytes are the
// same in any frame. Not safe for concurrent use.
type pngEncoder struct {
	bands []pngBand
	zws   []*flate.Writer // one per worker
	rows  [][]byte        // one filtered row per worker
	buf   bytes.Buffer
	seed  maphash.Seed
	width int // of the frame the bands were made for
}

type pngBand struct {
	out   bytes.Buffer
	key   uint64 // hash of the band's pixels and the row above it
	valid bool   // out holds the band of the pixels key names
	final bool   // out ends the stream (the last band)
	adler uint32
	n     int // bytes of filtered rows
	redo  bool
}

// bandRows is the height of a band. A change re-deflates the bands it
// touches, so small bands make small changes cheap; each band starts with
// an empty window and ends with a sync flush, which costs a few hundred
// bytes a band on a screen of text (measured: 64 KB -> 69 KB at 1280x800).
const bandRows = 64

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

// deflateRows filters f's rows and returns their zlib stream, deflating
// only the bands whose pixels changed since the last encode.
func (e *pngEncoder) deflateRows(f *Frame) []byte {
	rowLen := 1 + f.Width*3
	n := (f.Height + bandRows - 1) / bandRows
	if e.width != f.Width || len(e.bands) != n {
		e.bands, e.width = make([]pngBand, n), f.Width
	}
	if e.seed == (maphash.Seed{}) {
		e.seed = maphash.MakeSeed()
	}
	var redo []int
	for i := range e.bands {
		y0, y1 := i*bandRows, min((i+1)*bandRows, f.Height)
		b := &e.bands[i]
		key := e.bandKey(f, y0, y1)
		final := y1 == f.Height
		b.redo = !b.valid || b.key != key || b.final != final
		if b.redo {
			b.key, b.final, b.valid = key, final, false
			redo = append(redo, i)
		}
	}
	workers := min(runtime.GOMAXPROCS(0), len(redo))
	for len(e.zws) < workers {
		zw, _ := flate.NewWriter(nil, flate.BestSpeed)
		e.zws = append(e.zws, zw)
		e.rows = append(e.rows, nil)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for k := 0; k < workers; k++ {
		if cap(e.rows[k]) < rowLen {
			e.rows[k] = make([]byte, rowLen)
		}
		zw, row := e.zws[k], e.rows[k][:rowLen]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				j := int(next.Add(1)) - 1
				if j >= len(redo) {
					return
				}
				i := redo[j]
				e.deflateBand(&e.bands[i], zw, row, f, i*bandRows, min((i+1)*bandRows, f.Height))
			}
		}()
	}
	wg.Wait()

	total := 2 + 4
	for i := range e.bands {
		total += e.bands[i].out.Len()
	}
	z := make([]byte, 0, total)
	z = append(z, 0x78, 0x01) // zlib header: deflate, 32K window, fastest
	sum := uint32(1)
	for i := range e.bands {
		b := &e.bands[i]
		z = append(z, b.out.Bytes()...)
		sum = adler32Combine(sum, b.adler, b.n)
	}
	return binary.BigEndian.AppendUint32(z, sum)
}

// bandKey hashes the pixels of rows y0..y1-1 and of the row above them,
// which the Up filter of the band's first row reads.
func (e *pngEncoder) bandKey(f *Frame, y0, y1 int) uint64 {
	var h maphash.Hash
	h.SetSeed(e.seed)
	for y := max(y0-1, 0); y < y1; y++ {
		h.Write(f.Pix[y*f.Stride : y*f.Stride+f.Width*4])
	}
	// The same rows can open the stream or follow another band: the first
	// row's filter differs, so the position is part of the key.
	var pos [8]byte
	binary.LittleEndian.PutUint64(pos[:], uint64(y0))
	h.Write(pos[:])
	return h.Sum64()
}

// deflateBand deflates rows y0..y1-1 into b, ending on a sync flush (or,
// for the last band, the final block).
func (e *pngEncoder) deflateBand(b *pngBand, zw *flate.Writer, row []byte, f *Frame, y0, y1 int) {
	b.out.Reset()
	zw.Reset(&b.out)
	sum := adler32.New()
	for y := y0; y < y1; y++ {
		filterRow(row, f, y)
		zw.Write(row)
		sum.Write(row)
	}
	if b.final {
		zw.Close() // the final block
	} else {
		zw.Flush() // byte-aligned and not final: the next band continues the stream
	}
	b.adler = sum.Sum32()
	b.n = (y1 - y0) * len(row)
	b.valid = true
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
