package codec

import (
	"fmt"
	"image"
	"strings"
	"testing"
)

// bt601 is the reference conversion (BT.601, limited range, full precision)
// that libyuv's integer arithmetic approximates.
func bt601(r, g, b byte) (y, u, v float64) {
	R, G, B := float64(r), float64(g), float64(b)
	y = 16 + (65.481*R+128.553*G+24.966*B)/255
	u = 128 + (-37.797*R-74.203*G+112.0*B)/255
	v = 128 + (112.0*R-93.786*G-18.214*B)/255
	return
}

// solid is a w x h BGRX picture of one colour, rows padded to stride.
func solid(w, h, stride int, r, g, b byte) []byte {
	pix := make([]byte, stride*h)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			p := pix[y*stride+x*4:]
			p[0], p[1], p[2], p[3] = b, g, r, 0xa5 // X byte must be ignored
		}
	}
	return pix
}

func near(got byte, want float64, tol float64) bool {
	d := float64(got) - want
	return d >= -tol && d <= tol
}

// checkPlanes asserts every sample of p is the colour's Y, U and V.
func checkPlanes(t *testing.T, p *I420, r, g, b byte, tol float64) {
	t.Helper()
	wy, wu, wv := bt601(r, g, b)
	cw, ch := (p.Width+1)/2, (p.Height+1)/2
	for _, pl := range []struct {
		name   string
		b      []byte
		stride int
		w, h   int
		want   float64
	}{{"Y", p.Y, p.StrideY, p.Width, p.Height, wy}, {"U", p.U, p.StrideU, cw, ch, wu}, {"V", p.V, p.StrideV, cw, ch, wv}} {
		for y := 0; y < pl.h; y++ {
			for x := 0; x < pl.w; x++ {
				if got := pl.b[y*pl.stride+x]; !near(got, pl.want, tol) {
					t.Fatalf("%s(%d,%d) = %d, want %.1f±%.0f for RGB %d,%d,%d", pl.name, x, y, got, pl.want, tol, r, g, b)
				}
			}
		}
	}
}

func TestBGRXToI420Colours(t *testing.T) {
	tests := []struct {
		name    string
		r, g, b byte
		// Rounded textbook values, as a second opinion on bt601.
		y, u, v int
	}{
		{"white", 255, 255, 255, 235, 128, 128},
		{"black", 0, 0, 0, 16, 128, 128},
		{"red", 255, 0, 0, 81, 90, 240},
		{"green", 0, 255, 0, 145, 54, 34},
		{"blue", 0, 0, 255, 41, 240, 110},
		{"grey", 128, 128, 128, 126, 128, 128},
		{"teal", 0, 128, 128, 93, 147, 72},
	}
	sizes := []struct{ w, h, stride int }{{64, 32, 64 * 4}, {33, 17, 33*4 + 12}, {1, 1, 4}}
	for _, tc := range tests {
		ty, tu, tv := bt601(tc.r, tc.g, tc.b)
		if !near(byte(tc.y), ty, 1) || !near(byte(tc.u), tu, 1) || !near(byte(tc.v), tv, 1) {
			t.Fatalf("%s: reference formula gives %.1f,%.1f,%.1f, table says %d,%d,%d", tc.name, ty, tu, tv, tc.y, tc.u, tc.v)
		}
		for _, sz := range sizes {
			t.Run(fmt.Sprintf("%s/%dx%d", tc.name, sz.w, sz.h), func(t *testing.T) {
				dst := NewI420(sz.w, sz.h)
				if err := BGRXToI420(solid(sz.w, sz.h, sz.stride, tc.r, tc.g, tc.b), sz.stride, sz.w, sz.h, dst); err != nil {
					t.Fatal(err)
				}
				// libyuv uses 8-bit fixed-point coefficients: within 1.5 of exact.
				checkPlanes(t, dst, tc.r, tc.g, tc.b, 1.5)
			})
		}
	}
}

// TestBGRXToI420MatchesReference compares libyuv with the exact formula on
// busy content: every luma sample, and chroma as the formula applied to the
// 2x2 block's average colour.
func TestBGRXToI420MatchesReference(t *testing.T) {
	const w, h = 320, 200
	src := desktop(w, h, 7)
	dst := NewI420(w, h)
	if err := BGRXToI420(src, w*4, w, h, dst); err != nil {
		t.Fatal(err)
	}
	worst := 0.0
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			p := src[(y*w+x)*4:]
			wy, _, _ := bt601(p[2], p[1], p[0])
			worst = max(worst, abs(float64(dst.Y[y*dst.StrideY+x])-wy))
		}
	}
	for y := 0; y < h/2; y++ {
		for x := 0; x < w/2; x++ {
			var r, g, b float64
			for _, o := range [][2]int{{0, 0}, {1, 0}, {0, 1}, {1, 1}} {
				p := src[((2*y+o[1])*w+2*x+o[0])*4:]
				b, g, r = b+float64(p[0])/4, g+float64(p[1])/4, r+float64(p[2])/4
			}
			_, wu, wv := bt601(byte(r+0.5), byte(g+0.5), byte(b+0.5))
			worst = max(worst, abs(float64(dst.U[y*dst.StrideU+x])-wu), abs(float64(dst.V[y*dst.StrideV+x])-wv))
		}
	}
	if worst > 2 {
		t.Fatalf("libyuv differs from the BT.601 formula by up to %.1f levels, want at most 2", worst)
	}
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

func TestScaleBGRXToI420(t *testing.T) {
	// libyuv's box filter divides by multiplying with a truncated 16-bit
	// reciprocal when the ratio is not a whole number, so a colour can come
	// out up to 2 RGB levels darker (white 255 becomes 253, luma 233).
	const fractional = 2.5
	tests := []struct {
		name           string
		sw, sh, dw, dh int
		src            func(w, h int) []byte
		// check looks at the result.
		check func(t *testing.T, p *I420)
	}{
		{"halve a solid colour", 128, 64, 64, 32,
			func(w, h int) []byte { return solid(w, h, w*4, 200, 40, 90) },
			func(t *testing.T, p *I420) { checkPlanes(t, p, 200, 40, 90, 1.5) }},
		{"1920x1080 to 1280x720 keeps the colour", 1920, 1080, 1280, 720,
			func(w, h int) []byte { return solid(w, h, w*4, 0, 128, 128) },
			func(t *testing.T, p *I420) { checkPlanes(t, p, 0, 128, 128, fractional) }},
		{"odd sizes", 101, 51, 37, 19,
			func(w, h int) []byte { return solid(w, h, w*4, 255, 255, 255) },
			func(t *testing.T, p *I420) { checkPlanes(t, p, 255, 255, 255, fractional) }},
		{"upscale", 32, 16, 64, 32,
			func(w, h int) []byte { return solid(w, h, w*4, 10, 20, 30) },
			func(t *testing.T, p *I420) { checkPlanes(t, p, 10, 20, 30, 1.5) }},
		{"box filter averages a one-pixel checkerboard to grey", 128, 64, 64, 32,
			func(w, h int) []byte {
				pix := make([]byte, w*h*4)
				for i := 0; i < w*h; i++ {
					if (i%w+i/w)%2 == 0 {
						pix[i*4], pix[i*4+1], pix[i*4+2] = 255, 255, 255
					}
				}
				return pix
			},
			// Point sampling would give all black or all white; the box
			// average of black and white is 127.5, luma about 126.
			func(t *testing.T, p *I420) { checkPlanes(t, p, 128, 128, 128, 2) }},
		{"same size is a plain conversion", 64, 32, 64, 32,
			func(w, h int) []byte { return desktop(w, h, 3) },
			func(t *testing.T, p *I420) {
				want := NewI420(64, 32)
				if err := BGRXToI420(desktop(64, 32, 3), 64*4, 64, 32, want); err != nil {
					t.Fatal(err)
				}
				if string(p.Y) != string(want.Y) || string(p.U) != string(want.U) || string(p.V) != string(want.V) {
					t.Fatal("same-size scaling differs from BGRXToI420")
				}
			}},
	}
	var reused Scaler
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.src(tc.sw, tc.sh)
			for _, via := range []struct {
				name string
				f    func(*I420) error
			}{
				{"function", func(p *I420) error { return ScaleBGRXToI420(src, tc.sw*4, tc.sw, tc.sh, p) }},
				{"reused Scaler", func(p *I420) error { return reused.ScaleBGRXToI420(src, tc.sw*4, tc.sw, tc.sh, p) }},
			} {
				dst := NewI420(tc.dw, tc.dh)
				if err := via.f(dst); err != nil {
					t.Fatalf("%s: %v", via.name, err)
				}
				tc.check(t, dst)
			}
		})
	}
}

func TestConversionErrors(t *testing.T) {
	good := NewI420(64, 32)
	src := make([]byte, 64*32*4)
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"short source", BGRXToI420(make([]byte, 100), 256, 64, 32, good), "too small"},
		{"stride below width", BGRXToI420(src, 100, 64, 32, good), "stride 100"},
		{"size mismatch", BGRXToI420(make([]byte, 32*16*4), 128, 32, 16, good), "ScaleBGRXToI420"},
		{"empty source", BGRXToI420(nil, 0, 0, 0, good), "out of range"},
		{"negative size", BGRXToI420(src, 256, -64, 32, good), "out of range"},
		{"nil destination", BGRXToI420(src, 256, 64, 32, nil), "nil"},
		{"destination without planes", BGRXToI420(src, 256, 64, 32, &I420{Width: 64, Height: 32}), "stride 0"},
		{"negative-size I420", BGRXToI420(src, 256, 64, 32, NewI420(-1, 5)), "out of range"},
		{"negative destination stride", BGRXToI420(src, 256, 64, 32, func() *I420 {
			p := NewI420(64, 32)
			p.StrideU = -32
			return p
		}()), "U stride -32"},
		{"short V plane", BGRXToI420(src, 256, 64, 32, func() *I420 {
			p := NewI420(64, 32)
			p.V = p.V[:10]
			return p
		}()), "V plane has 10 bytes"},
		{"scale short source", ScaleBGRXToI420(src[:1000], 256, 64, 32, NewI420(32, 16)), "too small"},
		{"scale nil destination", ScaleBGRXToI420(src, 256, 64, 32, nil), "nil"},
	}
	for _, tc := range tests {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to mention %q", tc.name, tc.err, tc.want)
		}
	}
}

func TestNewI420(t *testing.T) {
	tests := []struct {
		w, h           int
		lenY, lenC, sc int
	}{
		{1280, 800, 1280 * 800, 640 * 400, 640},
		{33, 17, 33 * 17, 17 * 9, 17},
		{0, 10, 0, 0, 0},
		{-5, 10, 0, 0, 0},
	}
	for _, tc := range tests {
		p := NewI420(tc.w, tc.h)
		if len(p.Y) != tc.lenY || len(p.U) != tc.lenC || len(p.V) != tc.lenC || p.StrideU != tc.sc || p.Width != tc.w || p.Height != tc.h {
			t.Errorf("NewI420(%d,%d) = Y %d U %d V %d, stride U %d; want Y %d, chroma %d, stride %d",
				tc.w, tc.h, len(p.Y), len(p.U), len(p.V), p.StrideU, tc.lenY, tc.lenC, tc.sc)
		}
	}
}

// TestI420Area: converting a changed area into its Area of the picture gives
// the same planes as converting the whole changed picture, and areas that
// would split a chroma sample or leave the picture are refused.
func TestI420Area(t *testing.T) {
	const w, h = 64, 48
	stride := w * 4
	old := solid(w, h, stride, 10, 20, 30)
	pic := NewI420(w, h)
	if err := BGRXToI420(old, stride, w, h, pic); err != nil {
		t.Fatal(err)
	}
	// The screen changes in r.
	r := image.Rect(10, 6, 30, 20)
	now := append([]byte(nil), old...)
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			p := now[y*stride+x*4:]
			p[0], p[1], p[2] = byte(x*3), byte(y*5), byte(x+y)
		}
	}
	sub, err := pic.Area(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := BGRXToI420(now[r.Min.Y*stride+r.Min.X*4:], stride, r.Dx(), r.Dy(), sub); err != nil {
		t.Fatal(err)
	}
	want := NewI420(w, h)
	if err := BGRXToI420(now, stride, w, h, want); err != nil {
		t.Fatal(err)
	}
	for _, pl := range []struct {
		name      string
		got, want []byte
	}{{"Y", pic.Y, want.Y}, {"U", pic.U, want.U}, {"V", pic.V, want.V}} {
		if string(pl.got) != string(pl.want) {
			t.Errorf("plane %s after converting the area differs from converting the whole picture", pl.name)
		}
	}

	odd := NewI420(63, 47)
	tests := []struct {
		name string
		p    *I420
		r    image.Rectangle
		ok   bool
	}{
		{"even inside", pic, image.Rect(2, 2, 10, 10), true},
		{"the whole", pic, image.Rect(0, 0, w, h), true},
		{"odd picture's own odd edges", odd, image.Rect(60, 44, 63, 47), true},
		{"odd left edge", pic, image.Rect(1, 2, 10, 10), false},
		{"odd bottom inside", pic, image.Rect(2, 2, 10, 9), false},
		{"outside", pic, image.Rect(60, 40, 66, 50), false},
		{"empty", pic, image.Rect(4, 4, 4, 8), false},
	}
	for _, tt := range tests {
		_, err := tt.p.Area(tt.r)
		if (err == nil) != tt.ok {
			t.Errorf("%s: Area(%v) error %v, want ok=%v", tt.name, tt.r, err, tt.ok)
		}
	}
}
