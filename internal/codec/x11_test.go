package codec

import (
	"testing"
	"time"

	"github.com/jezek/xgb/xproto"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/internal/xprobe"
)

// TestXPixelsToI420 paints known colours on a real Xvfb, reads them back the
// way capture does (a ZPixmap image of a 24-bit screen, 32 bits a pixel) and
// converts them: this is what checks that X's pixels really are B, G, R, X in
// memory, as BGRXToI420 assumes.
func TestXPixelsToI420(t *testing.T) {
	ctx := testrig.Context(t, 30*time.Second)
	d := testrig.Display(t, display.Config{})
	const w, h, band = 128, 32, 16 // 16-pixel bands: whole chroma blocks
	p := testrig.Probe(t, d, xprobe.Options{X: 0, Y: 0, Width: w, Height: h})
	colours := []struct {
		name    string
		rgb     uint32
		r, g, b byte
	}{
		{"red", 0xff0000, 255, 0, 0},
		{"green", 0x00ff00, 0, 255, 0},
		{"blue", 0x0000ff, 0, 0, 255},
		{"white", 0xffffff, 255, 255, 255},
		{"black", 0x000000, 0, 0, 0},
		{"orange", 0xff8000, 255, 128, 0},
		{"teal", 0x008080, 0, 128, 128},
		{"violet", 0x8000ff, 128, 0, 255},
	}
	for i, c := range colours {
		if err := p.Fill(i*band, 0, band, h, c.rgb); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	conn := d.Conn()
	img, err := xproto.GetImage(conn, xproto.ImageFormatZPixmap, xproto.Drawable(p.Window()), 0, 0, w, h, 0xffffffff).Reply()
	if err != nil {
		t.Fatal(err)
	}
	if img.Depth != 24 || len(img.Data) != w*h*4 {
		t.Fatalf("X image: depth %d, %d bytes; want a 24-bit screen at 32 bits a pixel (%d bytes)", img.Depth, len(img.Data), w*h*4)
	}
	pic := NewI420(w, h)
	if err := BGRXToI420(img.Data, w*4, w, h, pic); err != nil {
		t.Fatal(err)
	}
	for i, c := range colours {
		t.Run(c.name, func(t *testing.T) {
			// Cut the band out of the converted picture and check it whole.
			part := &I420{
				Y: pic.Y[i*band:], U: pic.U[i*band/2:], V: pic.V[i*band/2:],
				StrideY: pic.StrideY, StrideU: pic.StrideU, StrideV: pic.StrideV,
				Width: band, Height: h,
			}
			checkPlanes(t, part, c.r, c.g, c.b, 1.5)
		})
	}
}
