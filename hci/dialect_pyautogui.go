package hci

import (
	"fmt"
	"strconv"
	"strings"
)

// pyautogui code, one call a line, in pixels of the model space or (with
// SayOptions.Fractions) fractions of it at the pixel's centre: the other
// direction of mcpserver's dialect_pyautogui.go. Function names and
// arguments are pyautogui's own (pyautogui.readthedocs.io).

func pyautoguiSayer() sayer {
	// at is fn at the action's point, or where the pointer is without one.
	at := func(fn string) sayFunc {
		return func(r sayRun) (int, []any, error) {
			a := r.a()
			call := "pyautogui." + fn + "()"
			if len(a.Coordinate) == 2 {
				call = "pyautogui." + fn + "(" + r.pyPoint(a.Coordinate) + ")"
			}
			return pyLines(r, call)
		}
	}
	return sayer{
		name: DialectPyAutoGUI,
		say: map[string]sayFunc{
			ActLeftClick:     at("click"),
			ActRightClick:    at("rightClick"),
			ActMiddleClick:   at("middleClick"),
			ActDoubleClick:   at("doubleClick"),
			ActTripleClick:   at("tripleClick"),
			ActMouseMove:     at("moveTo"),
			ActLeftMouseDown: at("mouseDown"),
			ActLeftMouseUp:   at("mouseUp"),
			ActLeftClickDrag: func(r sayRun) (int, []any, error) {
				// pyautogui drags from the pointer: move to the start first.
				a := r.a()
				return pyLines(r, "pyautogui.moveTo("+r.pyPoint(a.StartCoordinate)+")", "pyautogui.dragTo("+r.pyPoint(a.Coordinate)+", button='left')")
			},
			ActScroll: func(r sayRun) (int, []any, error) { return pyLines(r, pyScroll(r)) },
			ActType:   func(r sayRun) (int, []any, error) { return pyLines(r, "pyautogui.write("+PyString(r.a().Text)+")") },
			ActKey: func(r sayRun) (int, []any, error) {
				lines, err := pyKeys(r.a())
				if err != nil {
					return 0, nil, err
				}
				return pyLines(r, lines...)
			},
			ActWait: func(r sayRun) (int, []any, error) {
				d := 0.0
				if r.a().Duration != nil {
					d = *r.a().Duration
				}
				return pyLines(r, "time.sleep("+strconv.FormatFloat(d, 'f', -1, 64)+")")
			},
		},
		cannot: map[string]string{
			ActHoldKey:        "keyDown holds a key for the calls after it, and a key held through a sleep alone is pressed when let go",
			ActScreenshot:     "it only observes, and the pyautogui tool answers every call with a screenshot",
			ActZoom:           "it only observes, and the pyautogui tool answers every call with a screenshot",
			ActCursorPosition: "it only observes, and the pyautogui tool answers every call with a screenshot",
		},
	}
}

// pyPoint is a point as pyautogui's arguments: pixels, or fractions.
func (r sayRun) pyPoint(c []int) string {
	if r.opt.Fractions {
		fx, fy := r.sp.ToFraction(c[0], c[1])
		return fmt.Sprintf("x=%.6f, y=%.6f", fx, fy)
	}
	return fmt.Sprintf("%d, %d", c[0], c[1])
}

// pyLines are the lines of one action, wrapped in keyDown and keyUp of the
// modifiers a click, drag or scroll holds.
func pyLines(r sayRun, lines ...string) (int, []any, error) {
	a := r.a()
	if m := modifiers(a); m != "" && pointerHolds(a.Action) {
		var down, up []string
		for _, k := range strings.Split(m, "+") {
			name, err := sayKey(DialectPyAutoGUI, k)
			if err != nil {
				return 0, nil, err
			}
			down = append(down, "pyautogui.keyDown("+PyString(name)+")")
			up = append([]string{"pyautogui.keyUp(" + PyString(name) + ")"}, up...)
		}
		lines = append(append(down, lines...), up...)
	}
	calls := make([]any, len(lines))
	for j, l := range lines {
		calls[j] = l
	}
	return 1, calls, nil
}

// pointerHolds reports whether an action holds its text as modifiers.
func pointerHolds(action string) bool {
	switch action {
	case ActLeftClick, ActRightClick, ActMiddleClick, ActDoubleClick, ActTripleClick, ActLeftClickDrag, ActScroll:
		return true
	}
	return false
}

// pyScroll: pyautogui's scroll turns up for positive clicks, hscroll right.
func pyScroll(r sayRun) string {
	a := r.a()
	n := notchesOf(a)
	fn := map[bool]string{true: "hscroll", false: "scroll"}[a.ScrollDirection == "left" || a.ScrollDirection == "right"]
	if a.ScrollDirection == "down" || a.ScrollDirection == "left" {
		n = -n
	}
	if len(a.Coordinate) == 2 {
		return fmt.Sprintf("pyautogui.%s(%d, %s)", fn, n, r.pyPoint(a.Coordinate))
	}
	return fmt.Sprintf("pyautogui.%s(%d)", fn, n)
}

// pyKeys: a chord is hotkey, one key press; a sequence of single keys one
// press of the list, any other sequence one call per chord.
func pyKeys(a Action) ([]string, error) {
	chords := strings.Fields(a.Text)
	var lines, singles []string
	for _, c := range chords {
		keys, err := chordKeys(DialectPyAutoGUI, c)
		if err != nil {
			return nil, err
		}
		quoted := make([]string, len(keys))
		for j, k := range keys {
			quoted[j] = PyString(k)
		}
		if len(keys) == 1 {
			singles = append(singles, quoted[0])
			lines = append(lines, "pyautogui.press("+quoted[0]+")")
		} else {
			lines = append(lines, "pyautogui.hotkey("+strings.Join(quoted, ", ")+")")
		}
	}
	if len(chords) > 1 && len(singles) == len(chords) {
		return []string{"pyautogui.press([" + strings.Join(singles, ", ") + "])"}, nil
	}
	return lines, nil
}

// PyString is s as a Python string literal in single quotes, which the
// Starlark interpreter of the pyautogui tool reads back as s.
func PyString(s string) string {
	var b strings.Builder
	b.WriteByte('\'')
	for _, r := range s {
		switch r {
		case '\\':
			b.WriteString(`\\`)
		case '\'':
			b.WriteString(`\'`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if r < 0x20 || r == 0x7f {
				fmt.Fprintf(&b, `\x%02x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('\'')
	return b.String()
}
