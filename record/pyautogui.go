package record

import (
	"fmt"
	"strings"

	"github.com/deskenv/deskenv/hci"
)

// pyautoguiCode renders one step's action as the Python that AgentNet
// (xlang-ai/OpenCUA) trajectories carry in their code field: pyautogui
// calls with coordinates normalised to 0..1 of the screenshot the action was
// taken on (model space here), four decimals, one call per line. Actions that
// only observe (screenshot, cursor_position, zoom) have no code: ok is false.
//
// The function names and arguments are pyautogui's own (its documentation:
// click, rightClick, middleClick, doubleClick, tripleClick, moveTo, dragTo,
// mouseDown, mouseUp, scroll, hscroll, write, press, hotkey, keyDown, keyUp)
// and time.sleep; key names are pyautogui's KEYBOARD_KEYS spelling.
func pyautoguiCode(a hci.Action, modelW, modelH int) (code string, ok bool) {
	at := func() string { return normXY(a.Coordinate, modelW, modelH) }
	var lines []string
	switch a.Action {
	case hci.ActLeftClick:
		lines = []string{"pyautogui.click(" + at() + ")"}
	case hci.ActRightClick:
		lines = []string{"pyautogui.rightClick(" + at() + ")"}
	case hci.ActMiddleClick:
		lines = []string{"pyautogui.middleClick(" + at() + ")"}
	case hci.ActDoubleClick:
		lines = []string{"pyautogui.doubleClick(" + at() + ")"}
	case hci.ActTripleClick:
		lines = []string{"pyautogui.tripleClick(" + at() + ")"}
	case hci.ActMouseMove:
		lines = []string{"pyautogui.moveTo(" + at() + ")"}
	case hci.ActLeftClickDrag:
		lines = []string{
			"pyautogui.moveTo(" + normXY(a.StartCoordinate, modelW, modelH) + ")",
			"pyautogui.dragTo(" + at() + ", button='left')",
		}
	case hci.ActLeftMouseDown, hci.ActLeftMouseUp:
		lines = mouseButton(a, modelW, modelH)
	case hci.ActScroll:
		lines = []string{scrollCall(a, modelW, modelH)}
	case hci.ActType:
		lines = []string{"pyautogui.write(" + hci.PyString(a.Text) + ")"}
	case hci.ActKey:
		lines = keyCalls(a.Text)
	case hci.ActHoldKey:
		lines = holdKey(a)
	case hci.ActWait:
		lines = []string{fmt.Sprintf("time.sleep(%s)", seconds(a.Duration))}
	default:
		return "", false
	}
	return strings.Join(withModifiers(a, lines), "\n"), true
}

// normXY is "x=0.4004, y=0.2506": a model-space point as AgentNet's 0..1
// fractions with its four decimals. The fraction is the pixel's centre
// (hci.Space.ToFraction), the rule the pyautogui tool reads fractions back
// with: four decimals are within 0.00005·W of the centre, under half a pixel
// on any axis narrower than 10,000 pixels, so the point comes back to the same
// pixel. Written as x/W it came back one pixel short whenever the rounding
// went down.
func normXY(c []int, w, h int) string {
	if len(c) != 2 || w <= 0 || h <= 0 {
		return ""
	}
	fx, fy := hci.Space{ModelW: w, ModelH: h}.ToFraction(c[0], c[1])
	return fmt.Sprintf("x=%.4f, y=%.4f", fx, fy)
}

func mouseButton(a hci.Action, w, h int) []string {
	call := "pyautogui.mouseDown(button='left')"
	if a.Action == hci.ActLeftMouseUp {
		call = "pyautogui.mouseUp(button='left')"
	}
	if len(a.Coordinate) == 2 {
		return []string{"pyautogui.moveTo(" + normXY(a.Coordinate, w, h) + ")", call}
	}
	return []string{call}
}

// scrollCall: pyautogui's scroll takes clicks, positive up; hscroll positive
// right. computer_20251124 gives a direction and a number of notches.
func scrollCall(a hci.Action, w, h int) string {
	n := 3 // the reference tool's default
	if a.ScrollAmount != nil {
		n = *a.ScrollAmount
	}
	fn := "scroll"
	switch a.ScrollDirection {
	case "down":
		n = -n
	case "left":
		fn, n = "hscroll", -n
	case "right":
		fn = "hscroll"
	}
	if xy := normXY(a.Coordinate, w, h); xy != "" {
		return fmt.Sprintf("pyautogui.%s(%d, %s)", fn, n, xy)
	}
	return fmt.Sprintf("pyautogui.%s(%d)", fn, n)
}

// keyCalls renders a key action's text: chords joined by + become hotkey,
// a single key press; a space-separated sequence ("Return Return", the
// reducer's repeated key) one call per key.
func keyCalls(text string) []string {
	var out []string
	for _, chord := range strings.Fields(text) {
		keys := strings.Split(chord, "+")
		names := make([]string, len(keys))
		for i, k := range keys {
			names[i] = hci.PyString(pyKey(k))
		}
		if len(names) == 1 {
			out = append(out, "pyautogui.press("+names[0]+")")
		} else {
			out = append(out, "pyautogui.hotkey("+strings.Join(names, ", ")+")")
		}
	}
	return out
}

func holdKey(a hci.Action) []string {
	keys := strings.Split(a.Text, "+")
	var down, up []string
	for i, k := range keys {
		down = append(down, "pyautogui.keyDown("+hci.PyString(pyKey(k))+")")
		up = append(up, "pyautogui.keyUp("+hci.PyString(pyKey(keys[len(keys)-1-i]))+")")
	}
	return append(append(down, fmt.Sprintf("time.sleep(%s)", seconds(a.Duration))), up...)
}

// withModifiers wraps a click or scroll that holds modifiers (its text, or
// key in the quickstart's spelling) in keyDown and keyUp.
func withModifiers(a hci.Action, lines []string) []string {
	mods := a.Text
	if mods == "" {
		mods = a.Key
	}
	switch a.Action {
	case hci.ActLeftClick, hci.ActRightClick, hci.ActMiddleClick, hci.ActDoubleClick, hci.ActTripleClick, hci.ActScroll:
	default:
		return lines
	}
	if mods == "" {
		return lines
	}
	keys := strings.Split(mods, "+")
	out := make([]string, 0, len(lines)+2*len(keys))
	for _, k := range keys {
		out = append(out, "pyautogui.keyDown("+hci.PyString(pyKey(k))+")")
	}
	out = append(out, lines...)
	for i := len(keys) - 1; i >= 0; i-- {
		out = append(out, "pyautogui.keyUp("+hci.PyString(pyKey(keys[i]))+")")
	}
	return out
}

// pyKey spells a recorded key name as pyautogui does, through the dialect
// writer's table (hci.SayKey), lower-cased as AgentNet's code is.
func pyKey(k string) string {
	n, err := hci.SayKey(hci.DialectPyAutoGUI, k)
	if err != nil {
		return strings.ToLower(k)
	}
	return strings.ToLower(n)
}

func seconds(d *float64) string {
	if d == nil {
		return "1"
	}
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.3f", *d), "0"), ".")
}
