package stream

// The pointer is drawn into the video, since the X server never draws it into
// captured pixels. It is blended straight into the I420 planes after colour
// conversion, so the captured frame stays pristine for change detection, and
// a pointer that moves over an unchanged screen costs only restoring the
// pixels under its old place (save-under) and drawing it at the new one.

// planes is a view of an I420 picture.
type planes struct {
	y, u, v    []byte
	sy, su, sv int // strides
	w, h       int
}

// cursorImage is the pointer's picture as BT.601 contributions, computed once
// per shape: for each pixel its alpha and the premultiplied Y, U, V terms.
type cursorImage struct {
	w, h, xhot, yhot int
	a                []uint16 // alpha 0..255
	yc               []int32  // 16*a + (66r+129g+25b)/256, premultiplied
	uc, vc           []int32  // (-38r-74g+112b)*256/256 etc, times 1 (scaled by 256)
}

// newCursorImage converts premultiplied ARGB (XFIXES) to blend terms.
func newCursorImage(w, h, xhot, yhot int, argb []uint32) *cursorImage {
	ci := &cursorImage{w: w, h: h, xhot: xhot, yhot: yhot,
		a: make([]uint16, w*h), yc: make([]int32, w*h), uc: make([]int32, w*h), vc: make([]int32, w*h)}
	for i, p := range argb[:w*h] {
		a := int32(p >> 24)
		r, g, b := int32(p>>16&0xff), int32(p>>8&0xff), int32(p&0xff)
		// XFIXES images are premultiplied; guard against malformed ones.
		r, g, b = min(r, a), min(g, a), min(b, a)
		ci.a[i] = uint16(a)
		// Scaled by 256 so the blend keeps precision until the end.
		ci.yc[i] = 16*256*a/255 + 66*r + 129*g + 25*b
		ci.uc[i] = -38*r - 74*g + 112*b
		ci.vc[i] = 112*r - 94*g - 18*b
	}
	return ci
}

// saveUnder remembers the pixels a drawn cursor covers, to put them back.
type saveUnder struct {
	x0, y0, x1, y1 int // even-aligned rectangle in luma pixels; empty when nothing is saved
	y, u, v        []byte
}

func (s *saveUnder) empty() bool { return s.x1 <= s.x0 || s.y1 <= s.y0 }

// restore puts back the pixels under the last drawn cursor.
func (s *saveUnder) restore(p planes) {
	if s.empty() {
		return
	}
	w := s.x1 - s.x0
	for j := s.y0; j < s.y1; j++ {
		copy(p.y[j*p.sy+s.x0:j*p.sy+s.x1], s.y[(j-s.y0)*w:])
	}
	cw := w / 2
	for j := s.y0 / 2; j < s.y1/2; j++ {
		k := (j - s.y0/2) * cw
		copy(p.u[j*p.su+s.x0/2:j*p.su+s.x1/2], s.u[k:k+cw])
		copy(p.v[j*p.sv+s.x0/2:j*p.sv+s.x1/2], s.v[k:k+cw])
	}
	s.x0, s.y0, s.x1, s.y1 = 0, 0, 0, 0
}

// draw blends ci with its hotspot at (hx, hy) in video pixels, saving what it
// covers into su first.
func (ci *cursorImage) draw(p planes, hx, hy int, su *saveUnder) {
	ox, oy := hx-ci.xhot, hy-ci.yhot
	x0, y0 := max(ox, 0)&^1, max(oy, 0)&^1
	x1, y1 := min(ox+ci.w, p.w), min(oy+ci.h, p.h)
	x1, y1 = min((x1+1)&^1, p.w&^1), min((y1+1)&^1, p.h&^1)
	if x1 <= x0 || y1 <= y0 {
		return
	}
	w, h := x1-x0, y1-y0
	su.x0, su.y0, su.x1, su.y1 = x0, y0, x1, y1
	su.y = grow(su.y, w*h)
	su.u = grow(su.u, w*h/4)
	su.v = grow(su.v, w*h/4)
	for j := y0; j < y1; j++ {
		copy(su.y[(j-y0)*w:], p.y[j*p.sy+x0:j*p.sy+x1])
	}
	for j := y0 / 2; j < y1/2; j++ {
		k := (j - y0/2) * (w / 2)
		copy(su.u[k:], p.u[j*p.su+x0/2:j*p.su+x1/2])
		copy(su.v[k:], p.v[j*p.sv+x0/2:j*p.sv+x1/2])
	}
	at := func(x, y int) int {
		cx, cy := x-ox, y-oy
		if cx < 0 || cy < 0 || cx >= ci.w || cy >= ci.h {
			return -1
		}
		return cy*ci.w + cx
	}
	// Luma, per pixel: out = dst*(1-a) + src (premultiplied).
	for y := y0; y < y1; y++ {
		row := p.y[y*p.sy:]
		for x := x0; x < x1; x++ {
			i := at(x, y)
			if i < 0 || ci.a[i] == 0 {
				continue
			}
			v := (int32(row[x])*int32(255-ci.a[i])*256/255 + ci.yc[i] + 128) >> 8
			row[x] = clamp8(v)
		}
	}
	// Chroma, per 2x2 block: the blend is linear, so averaging the four
	// pixels' terms is exact.
	for cy := y0 / 2; cy < y1/2; cy++ {
		for cx := x0 / 2; cx < x1/2; cx++ {
			var asum, usum, vsum int32
			for _, d := range [4][2]int{{0, 0}, {1, 0}, {0, 1}, {1, 1}} {
				if i := at(2*cx+d[0], 2*cy+d[1]); i >= 0 {
					asum += int32(ci.a[i])
					usum += ci.uc[i]
					vsum += ci.vc[i]
				}
			}
			if asum == 0 {
				continue
			}
			// out = dst*(1-A) + 128*A + term/256, A = asum/(4*255), term averaged.
			inv := 4*255 - asum
			uo := &p.u[cy*p.su+cx]
			vo := &p.v[cy*p.sv+cx]
			*uo = clamp8((int32(*uo)*inv*256/(4*255) + 128*256*asum/(4*255) + usum/4 + 128) >> 8)
			*vo = clamp8((int32(*vo)*inv*256/(4*255) + 128*256*asum/(4*255) + vsum/4 + 128) >> 8)
		}
	}
}

func clamp8(v int32) byte {
	if v < 0 {
		return 0
	}
	if v > 255 {
		return 255
	}
	return byte(v)
}

func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}
