package hci

import (
	"fmt"
	"image"
	"math"
	"strconv"
	"strings"
)

// Space relates model space (the pixels of the screenshot the model was shown)
// to screen space (the X screen). All conversion between the two happens here,
// so a click lands on the pixel the model pointed at and a reported cursor
// position is the pixel the model would see it on.
//
// The mapping sends each model pixel to the screen pixel under its centre, and
// each screen pixel to the model pixel whose area contains its centre, so
// ToModel(ToScreen(p)) == p for every model pixel. That needs a model space no
// larger than the screen in either direction; Check enforces it.
type Space struct{ ScreenW, ScreenH, ModelW, ModelH int }

// scalingTargets are the model sizes "auto" chooses from, in order: the ones
// Anthropic's reference implementation scales to (XGA, WXGA, FWXGA).
var scalingTargets = [...]struct{ w, h int }{{1024, 768}, {1280, 800}, {1366, 768}}

// NewSpace returns the space for a screen of screenW x screenH and a model
// setting:
//
//   - "auto": the first of 1024x768, 1280x800 and 1366x768 whose aspect ratio
//     is within 0.02 of the screen's, if it is not larger than the screen;
//     otherwise the screen size (no scaling). This is the reference
//     implementation's rule, so models see what they were trained on.
//   - "off", "none" or "": the screen size.
//   - "WxH", such as "1280x800": that size, which must fit in the screen.
func NewSpace(screenW, screenH int, model string) (Space, error) {
	if screenW <= 0 || screenH <= 0 {
		return Space{}, fmt.Errorf("screen size %dx%d is not valid: width and height must be positive", screenW, screenH)
	}
	s := Space{ScreenW: screenW, ScreenH: screenH, ModelW: screenW, ModelH: screenH}
	m := strings.ToLower(strings.TrimSpace(model))
	switch m {
	case "", "off", "none", "screen":
		return s, nil
	case "auto":
		ratio := float64(screenW) / float64(screenH)
		for _, t := range scalingTargets {
			if math.Abs(float64(t.w)/float64(t.h)-ratio) < 0.02 {
				if t.w <= screenW && t.h <= screenH {
					s.ModelW, s.ModelH = t.w, t.h
				}
				break
			}
		}
		return s, nil
	}
	ws, hs, ok := strings.Cut(m, "x")
	w, err1 := strconv.Atoi(strings.TrimSpace(ws))
	h, err2 := strconv.Atoi(strings.TrimSpace(hs))
	if !ok || err1 != nil || err2 != nil {
		return Space{}, fmt.Errorf("model space %q is not valid: use \"auto\", \"off\" or a size such as \"1280x800\"", model)
	}
	s.ModelW, s.ModelH = w, h
	if err := s.Check(); err != nil {
		return Space{}, err
	}
	return s, nil
}

// Check reports whether the space is usable: positive sizes, and a model space
// that fits in the screen (a larger one could not map every model pixel to a
// distinct screen pixel).
func (s Space) Check() error {
	if s.ScreenW <= 0 || s.ScreenH <= 0 {
		return fmt.Errorf("screen size %dx%d is not valid: width and height must be positive", s.ScreenW, s.ScreenH)
	}
	if s.ModelW <= 0 || s.ModelH <= 0 {
		return fmt.Errorf("model space %dx%d is not valid: width and height must be positive", s.ModelW, s.ModelH)
	}
	if s.ModelW > s.ScreenW || s.ModelH > s.ScreenH {
		return fmt.Errorf("model space %dx%d is larger than the %dx%d screen: it must fit in the screen", s.ModelW, s.ModelH, s.ScreenW, s.ScreenH)
	}
	return nil
}

// Scaled reports whether model and screen space differ.
func (s Space) Scaled() bool { return s.ModelW != s.ScreenW || s.ModelH != s.ScreenH }

// String is "1280x800 on 1920x1200" or "1280x800" when unscaled.
func (s Space) String() string {
	if !s.Scaled() {
		return fmt.Sprintf("%dx%d", s.ModelW, s.ModelH)
	}
	return fmt.Sprintf("%dx%d on %dx%d", s.ModelW, s.ModelH, s.ScreenW, s.ScreenH)
}

// ToScreen maps a model pixel to the screen pixel under its centre.
func (s Space) ToScreen(x, y int) (int, int) {
	return toCentre(x, s.ModelW, s.ScreenW), toCentre(y, s.ModelH, s.ScreenH)
}

// ToModel maps a screen pixel to the model pixel that covers its centre.
func (s Space) ToModel(x, y int) (int, int) {
	return toCentre(x, s.ScreenW, s.ModelW), toCentre(y, s.ScreenH, s.ModelH)
}

// toCentre maps pixel v of an axis of n pixels to the pixel of an axis of m
// pixels that contains its centre: floor((v+0.5)*m/n), in integers so it is
// exact for any size.
func toCentre(v, n, m int) int {
	if n == m || n <= 0 {
		return v
	}
	num := (2*int64(v) + 1) * int64(m)
	den := 2 * int64(n)
	q := num / den
	if num < 0 && num%den != 0 {
		q-- // floor, for points left of or above the screen
	}
	return int(q)
}

// RegionToScreen maps a model-space rectangle [x0,y0,x1,y1) (pixel edges, as in
// zoom's region) to the smallest screen rectangle that covers it.
func (s Space) RegionToScreen(x0, y0, x1, y1 int) image.Rectangle {
	r := image.Rect(
		edgeFloor(x0, s.ModelW, s.ScreenW), edgeFloor(y0, s.ModelH, s.ScreenH),
		edgeCeil(x1, s.ModelW, s.ScreenW), edgeCeil(y1, s.ModelH, s.ScreenH),
	)
	return r.Intersect(image.Rect(0, 0, s.ScreenW, s.ScreenH))
}

func edgeFloor(v, n, m int) int {
	if n == m || n <= 0 {
		return v
	}
	return int(int64(v) * int64(m) / int64(n))
}

func edgeCeil(v, n, m int) int {
	if n == m || n <= 0 {
		return v
	}
	return int((int64(v)*int64(m) + int64(n) - 1) / int64(n))
}

// InModel reports whether (x, y) is a pixel of model space.
func (s Space) InModel(x, y int) bool { return x >= 0 && y >= 0 && x < s.ModelW && y < s.ModelH }

// InScreen reports whether (x, y) is a pixel of the screen.
func (s Space) InScreen(x, y int) bool { return x >= 0 && y >= 0 && x < s.ScreenW && y < s.ScreenH }
