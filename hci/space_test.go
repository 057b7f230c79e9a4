package hci

import (
	"image"
	"strings"
	"testing"
)

func TestNewSpace(t *testing.T) {
	tests := []struct {
		w, h   int
		model  string
		mw, mh int
		err    string
	}{
		{1920, 1200, "auto", 1280, 800, ""},
		{2560, 1600, "auto", 1280, 800, ""},
		{1280, 800, "auto", 1280, 800, ""},
		{1920, 1080, "auto", 1366, 768, ""},
		{3840, 2160, "auto", 1366, 768, ""},
		{1600, 1200, "auto", 1024, 768, ""},
		{1024, 768, "auto", 1024, 768, ""},
		{800, 600, "auto", 800, 600, ""},     // 4:3 but smaller than XGA: not scaled up
		{1280, 1024, "auto", 1280, 1024, ""}, // 5:4 matches no target
		{1366, 768, "AUTO", 1366, 768, ""},
		{1920, 1200, "off", 1920, 1200, ""},
		{1920, 1200, "", 1920, 1200, ""},
		{1920, 1200, "none", 1920, 1200, ""},
		{1920, 1200, "1000x700", 1000, 700, ""},
		{1920, 1200, " 1280 x 800 ", 1280, 800, ""},
		{1920, 1200, "1920x1200", 1920, 1200, ""},
		{1280, 800, "1920x1200", 0, 0, "larger than the 1280x800 screen"},
		{1280, 800, "0x800", 0, 0, "must be positive"},
		{1280, 800, "big", 0, 0, `model space "big" is not valid`},
		{1280, 800, "12x", 0, 0, "is not valid"},
		{0, 800, "auto", 0, 0, "screen size 0x800 is not valid"},
	}
	for _, tt := range tests {
		s, err := NewSpace(tt.w, tt.h, tt.model)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("NewSpace(%d, %d, %q) error = %v, want one containing %q", tt.w, tt.h, tt.model, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("NewSpace(%d, %d, %q): %v", tt.w, tt.h, tt.model, err)
			continue
		}
		want := Space{tt.w, tt.h, tt.mw, tt.mh}
		if s != want {
			t.Errorf("NewSpace(%d, %d, %q) = %+v, want %+v", tt.w, tt.h, tt.model, s, want)
		}
		if s.Scaled() != (tt.w != tt.mw || tt.h != tt.mh) {
			t.Errorf("%+v.Scaled() = %v", s, s.Scaled())
		}
	}
}

// TestSpaceRoundTrip checks every model pixel of many spaces: it maps to a
// screen pixel whose centre is inside the model pixel's area, back to itself, and the mapping
// is strictly increasing. Axes are independent, so checking each axis fully is
// checking every pixel of the grid.
func TestSpaceRoundTrip(t *testing.T) {
	spaces := []Space{
		{1920, 1200, 1280, 800}, {2560, 1600, 1280, 800}, {1920, 1080, 1366, 768},
		{3840, 2160, 1366, 768}, {1600, 1200, 1024, 768}, {1280, 800, 1280, 800},
		{1366, 768, 1024, 768}, {1000, 700, 999, 333}, {8192, 8192, 1, 1}, {7, 5, 3, 2},
		{1921, 1201, 1280, 800}, {4096, 2304, 1366, 768},
	}
	for _, s := range spaces {
		checkAxis(t, s, s.ModelW, s.ScreenW, func(v int) int { x, _ := s.ToScreen(v, 0); return x }, func(v int) int { x, _ := s.ToModel(v, 0); return x }, "x")
		checkAxis(t, s, s.ModelH, s.ScreenH, func(v int) int { _, y := s.ToScreen(0, v); return y }, func(v int) int { _, y := s.ToModel(0, v); return y }, "y")
	}
}

func checkAxis(t *testing.T, s Space, m, n int, toScreen, toModel func(int) int, axis string) {
	t.Helper()
	prev := -1
	for v := 0; v < m; v++ {
		sv := toScreen(v)
		if sv < 0 || sv >= n {
			t.Fatalf("%v: %s %d maps to %d, off the screen (0..%d)", s, axis, v, sv, n-1)
		}
		// The screen pixel's centre lies in the model pixel's area:
		// v <= (sv+0.5)*m/n < v+1.
		if c := (2*int64(sv) + 1) * int64(m); c < 2*int64(v)*int64(n) || c >= 2*int64(v+1)*int64(n) {
			t.Fatalf("%v: %s %d maps to %d, whose centre is outside its area", s, axis, v, sv)
		}
		if back := toModel(sv); back != v {
			t.Fatalf("%v: %s %d -> screen %d -> model %d", s, axis, v, sv, back)
		}
		if sv <= prev {
			t.Fatalf("%v: %s mapping not increasing at %d (%d after %d)", s, axis, v, sv, prev)
		}
		prev = sv
	}
	// Every screen pixel maps into model space.
	for sv := 0; sv < n; sv++ {
		if mv := toModel(sv); mv < 0 || mv >= m {
			t.Fatalf("%v: screen %s %d maps to model %d, outside 0..%d", s, axis, sv, mv, m-1)
		}
	}
}

func TestRegionToScreen(t *testing.T) {
	tests := []struct {
		s    Space
		r    [4]int
		want image.Rectangle
	}{
		{Space{1920, 1200, 1280, 800}, [4]int{0, 0, 1280, 800}, image.Rect(0, 0, 1920, 1200)},
		{Space{1920, 1200, 1280, 800}, [4]int{100, 50, 200, 150}, image.Rect(150, 75, 300, 225)},
		{Space{1920, 1200, 1280, 800}, [4]int{1, 1, 2, 2}, image.Rect(1, 1, 3, 3)},
		{Space{1280, 800, 1280, 800}, [4]int{10, 20, 30, 40}, image.Rect(10, 20, 30, 40)},
		{Space{1920, 1080, 1366, 768}, [4]int{0, 0, 1366, 768}, image.Rect(0, 0, 1920, 1080)},
	}
	for _, tt := range tests {
		got := tt.s.RegionToScreen(tt.r[0], tt.r[1], tt.r[2], tt.r[3])
		if got != tt.want {
			t.Errorf("%v.RegionToScreen(%v) = %v, want %v", tt.s, tt.r, got, tt.want)
		}
	}
}
