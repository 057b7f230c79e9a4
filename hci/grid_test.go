package hci

import (
	"math"
	"testing"
)

// TestGridRoundTrip holds FromGrid and ToGrid to the table in grid.go for
// every pixel and every cell of model spaces on both sides of the grid's
// size: coarser division -> finer -> back is the identity, and the other
// way round comes back within one cell.
func TestGridRoundTrip(t *testing.T) {
	const n = 1000 // Gemini's grid
	for _, m := range [][2]int{{1024, 768}, {1280, 800}, {1366, 768}, {1000, 1000}, {640, 480}, {999, 1001}, {1, 1}} {
		s := Space{ScreenW: 4000, ScreenH: 4000, ModelW: m[0], ModelH: m[1]}
		for _, axis := range []struct {
			name string
			w    int
			at   func(v int) (int, int) // v on this axis, 0 on the other
			pick func(x, y int) int
		}{
			{"x", m[0], func(v int) (int, int) { return v, 0 }, func(x, _ int) int { return x }},
			{"y", m[1], func(v int) (int, int) { return 0, v }, func(_, y int) int { return y }},
		} {
			if axis.w <= n {
				for p := 0; p < axis.w; p++ {
					px, py := axis.at(p)
					gx, gy := s.ToGrid(px, py, n)
					x, y, err := s.FromGrid(gx, gy, n)
					if err != nil || axis.pick(x, y) != p {
						t.Fatalf("%v %s: pixel %d -> cell (%d,%d) -> pixel (%d,%d) %v, want %d back", s, axis.name, p, gx, gy, x, y, err, p)
					}
				}
			}
			if axis.w >= n {
				for g := 0; g < n; g++ {
					gx, gy := axis.at(g)
					x, y, err := s.FromGrid(gx, gy, n)
					if err != nil {
						t.Fatal(err)
					}
					if bx, by := s.ToGrid(x, y, n); axis.pick(bx, by) != g {
						t.Fatalf("%v %s: cell %d -> pixel %d -> cell %d, want %d back", s, axis.name, g, axis.pick(x, y), axis.pick(bx, by), g)
					}
				}
				// The other way is as close as a cell allows.
				for p := 0; p < axis.w; p++ {
					px, py := axis.at(p)
					gx, gy := s.ToGrid(px, py, n)
					x, y, _ := s.FromGrid(gx, gy, n)
					if d := math.Abs(float64(axis.pick(x, y) - p)); d > float64(axis.w)/n {
						t.Fatalf("%v %s: pixel %d came back as %d, more than a cell (%g px) away", s, axis.name, p, axis.pick(x, y), float64(axis.w)/n)
					}
				}
			}
		}
	}
}

func TestGridRefused(t *testing.T) {
	s := Space{ScreenW: 1280, ScreenH: 800, ModelW: 1280, ModelH: 800}
	for _, c := range []struct{ x, y, n int }{{-1, 0, 1000}, {0, 1000, 1000}, {1000, 5, 1000}, {0, 0, 0}} {
		if x, y, err := s.FromGrid(c.x, c.y, c.n); err == nil {
			t.Errorf("FromGrid(%d, %d, %d) = %d, %d: want an error", c.x, c.y, c.n, x, y)
		}
	}
	// The corners are on the grid and land on the screen's corner pixels.
	if x, y, err := s.FromGrid(999, 999, 1000); err != nil || x != 1279 || y != 799 {
		t.Errorf("FromGrid(999, 999) = %d, %d, %v: want the last pixel 1279, 799", x, y, err)
	}
	if x, y, err := s.FromGrid(0, 0, 1000); err != nil || x != 0 || y != 0 {
		t.Errorf("FromGrid(0, 0) = %d, %d, %v: want 0, 0", x, y, err)
	}
}

func TestFractionRoundTrip(t *testing.T) {
	for _, m := range [][2]int{{1280, 800}, {1366, 768}, {1920, 1080}, {3, 7}} {
		s := Space{ScreenW: 4000, ScreenH: 4000, ModelW: m[0], ModelH: m[1]}
		for p := 0; p < max(m[0], m[1]); p++ {
			px, py := min(p, m[0]-1), min(p, m[1]-1)
			fx, fy := s.ToFraction(px, py)
			x, y, err := s.FromFraction(fx, fy)
			if err != nil || x != px || y != py {
				t.Fatalf("%v: pixel (%d,%d) -> (%g,%g) -> (%d,%d) %v", s, px, py, fx, fy, x, y, err)
			}
		}
		if x, y, err := s.FromFraction(1, 1); err != nil || x != m[0]-1 || y != m[1]-1 {
			t.Errorf("%v: FromFraction(1, 1) = %d, %d, %v: want the last pixel", s, x, y, err)
		}
	}
	s := Space{ScreenW: 100, ScreenH: 100, ModelW: 100, ModelH: 100}
	for _, f := range [][2]float64{{-0.01, 0}, {0, 1.01}, {math.NaN(), 0}, {math.Inf(1), 0}} {
		if _, _, err := s.FromFraction(f[0], f[1]); err == nil {
			t.Errorf("FromFraction(%g, %g): want an error", f[0], f[1])
		}
	}
}
