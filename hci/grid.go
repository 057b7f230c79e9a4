package hci

import (
	"fmt"
	"math"
)

// Other models' coordinates, converted to and from model space here, beside
// ToScreen and ToModel, so every dialect's point lands where the model meant
// and a recorded point can be written back in that dialect.
//
//	what the model sends        to model pixel (this file)           back (exact where stated)
//	grid cell g of n (Gemini:   FromGrid: the pixel under the        ToGrid: the cell whose area
//	  n = 1000, 0..999)           cell's centre, floor((g+½)·W/n)      holds the pixel's centre
//	fraction f in [0, 1]        FromFraction: floor(f·W), 1 is        ToFraction: (p+½)/W, the
//	  (OpenCUA, AgentNet)         the last pixel W-1                   pixel's centre
//
// The grid and the model space are two divisions of one axis, so the same
// centre rule as ToScreen/ToModel (toCentre) relates them, and the same
// property holds: going from the coarser division to the finer and back
// returns the start. With a model axis of W pixels and a grid of n cells:
//
//	W <= n (a 1000-cell grid on a 1000 x 800 model space or smaller):
//	  FromGrid(ToGrid(p)) == p for every pixel p
//	W >= n (1280 pixels on 1000 cells):
//	  ToGrid(FromGrid(g)) == g for every cell g; a pixel comes back to within
//	  one grid cell (W/n pixels), since n cells cannot name W > n pixels.
//
// A fraction is a real number, so FromFraction(ToFraction(p)) == p for every
// pixel, on any axis.

// FromGrid maps cell (gx, gy) of an n x n grid laid over the model space to
// the model pixel under the cell's centre. Cells outside 0..n-1 are an error:
// a click must never be clamped to somewhere the model did not mean.
func (s Space) FromGrid(gx, gy, n int) (int, int, error) {
	if n <= 0 {
		return 0, 0, fmt.Errorf("grid of %d cells: it must have at least one", n)
	}
	if gx < 0 || gy < 0 || gx >= n || gy >= n {
		return 0, 0, fmt.Errorf("grid point (%d, %d) is off the %d-cell grid: x and y go from 0 to %d", gx, gy, n, n-1)
	}
	return toCentre(gx, n, s.ModelW), toCentre(gy, n, s.ModelH), nil
}

// ToGrid maps model pixel (x, y) to the cell of an n x n grid whose area holds
// the pixel's centre: the inverse of FromGrid where the grid is the coarser
// division (see the table above).
func (s Space) ToGrid(x, y, n int) (int, int) {
	return toCentre(x, s.ModelW, n), toCentre(y, s.ModelH, n)
}

// FromFraction maps a point given as fractions of the model space's width and
// height (0 the left or top edge, 1 the right or bottom edge) to the model
// pixel it falls in; 1 is the last pixel. Anything outside [0, 1], NaN or
// infinite is an error.
func (s Space) FromFraction(fx, fy float64) (int, int, error) {
	for _, f := range []float64{fx, fy} {
		if math.IsNaN(f) || f < 0 || f > 1 {
			return 0, 0, fmt.Errorf("fractional point (%g, %g) is off the screen: fractions go from 0 to 1", fx, fy)
		}
	}
	return fromFraction(fx, s.ModelW), fromFraction(fy, s.ModelH), nil
}

func fromFraction(f float64, n int) int {
	return min(int(math.Floor(f*float64(n))), n-1)
}

// ToFraction maps model pixel (x, y) to the fractions of the model space at
// its centre, which FromFraction maps back to the same pixel.
func (s Space) ToFraction(x, y int) (float64, float64) {
	return (float64(x) + 0.5) / float64(s.ModelW), (float64(y) + 0.5) / float64(s.ModelH)
}
