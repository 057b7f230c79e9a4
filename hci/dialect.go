package hci

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Canonical actions said in other models' dialects (docs/DIALECTS.md): the
// other direction of mcpserver's dialect tools, so a recorded episode can be
// exported, and re-run, in the dialect of another model. It lives here,
// beside the grid and fraction conversions it uses, so that record (which
// writes exports) and mcpserver (which reads the dialects) share one
// vocabulary without importing each other.

// The dialects, as --mcp-tools and deskenv export --dialect name them.
const (
	DialectOpenAI    = "openai"
	DialectGemini    = "gemini"
	DialectPyAutoGUI = "pyautogui"
)

// Dialects are the dialect names, in the order the docs list them.
func Dialects() []string { return []string{DialectOpenAI, DialectGemini, DialectPyAutoGUI} }

// GeminiGrid is the size of Gemini's grid: points are cells 0..999 each way.
const GeminiGrid = 1000

// Dialect timings: OpenAI's wait and Gemini's wait_5_seconds carry no
// duration, so a canonical wait is said as as many of them as cover it.
const (
	OpenAIWaitSeconds = 2.0
	GeminiWaitSeconds = 5.0
)

// ScrollPixelsPerNotch turns the pixel distances OpenAI's scroll and
// Gemini's scroll_at give into wheel notches (rounded up), and back.
const ScrollPixelsPerNotch = 100

// GeminiCall is one Gemini function call: the function's name and its args.
type GeminiCall struct {
	Name string         `json:"name"`
	Args map[string]any `json:"args"`
}

// Said is what a dialect says for the canonical actions First..Last of a
// sequence (indices, inclusive): usually one action, several where the
// dialect's one call does several (Gemini's type_text_at is a click, the
// typing and Return; an OpenAI drag along a path is a press, moves and a
// release). Calls are OpenAI action objects (map[string]any), Gemini
// function calls (GeminiCall) or lines of pyautogui code (string), in
// order; Err says why the dialect cannot say the actions, and Calls is
// then empty.
type Said struct {
	First, Last int
	Calls       []any
	Err         error
}

// SayOptions change how a dialect is written.
type SayOptions struct {
	// Fractions writes pyautogui points as fractions of the model space at
	// the pixel's centre (ToFraction), as AgentNet and OpenCUA do, rather
	// than as pixels. Both read back to the same pixel.
	Fractions bool
}

// Say writes the canonical actions acts, taken in model space s, in
// dialect: one Said per group of actions the dialect says in one go, in
// order, covering every action. An action the dialect cannot say has a
// Said of its own with Err set; the others are still said.
func (s Space) Say(dialect string, acts []Action, opt SayOptions) ([]Said, error) {
	var say func(acts []Action, i int) (int, []any, error)
	switch dialect {
	case DialectOpenAI:
		say = s.sayOpenAI
	case DialectGemini:
		say = s.sayGemini
	case DialectPyAutoGUI:
		say = func(acts []Action, i int) (int, []any, error) { return s.sayPyAutoGUI(acts[i], opt) }
	default:
		return nil, fmt.Errorf("dialect %q is not known: use %s", dialect, strings.Join(Dialects(), ", "))
	}
	// A recorded step is checked as the executor would check it: an export
	// reads steps from disk, and a step that is not a valid action in its
	// model space is said by no dialect. It is blanked in the copy the
	// sayers see, so no group reaches across it.
	checked := make([]Action, len(acts))
	bad := make([]error, len(acts))
	for i, a := range acts {
		if bad[i] = a.Validate(s); bad[i] == nil {
			checked[i] = a
		}
	}
	var out []Said
	for i := 0; i < len(acts); {
		if bad[i] != nil {
			out = append(out, Said{First: i, Last: i, Err: fmt.Errorf("not a valid action, so not said in %s: %w", dialect, bad[i])})
			i++
			continue
		}
		n, calls, err := say(checked, i)
		if err != nil {
			n, calls = 1, nil
		}
		out = append(out, Said{First: i, Last: i + n - 1, Calls: calls, Err: err})
		i += n
	}
	return out, nil
}

// cannot is the error for an action a dialect has no way to say.
func cannot(dialect string, a Action, why string) error {
	return fmt.Errorf("%s cannot be said in %s: %s", a.Action, dialect, why)
}

// modifiers are the keys a click, drag or scroll holds: text, or key in the
// quickstart demo's spelling.
func modifiers(a Action) string {
	if a.Text != "" {
		return a.Text
	}
	return a.Key
}

// waits is how many waits of each seconds cover d seconds (at least one).
func waits(d *float64, each float64) int {
	if d == nil || *d <= 0 {
		return 1
	}
	return max(1, int(math.Ceil(*d/each-1e-9)))
}

// notchesOf is a scroll's effective number of notches.
func notchesOf(a Action) int {
	if a.ScrollAmount != nil {
		return *a.ScrollAmount
	}
	return DefaultScrollNotch
}

// --- OpenAI: computer-use action objects, pixels of model space ---

func (s Space) sayOpenAI(acts []Action, i int) (int, []any, error) {
	a := acts[i]
	obj := func(typ string) map[string]any { return map[string]any{"type": typ} }
	at := func(typ string) (map[string]any, error) {
		if len(a.Coordinate) != 2 {
			return nil, cannot(DialectOpenAI, a, "its actions name a point, and this one has none (it acted where the pointer was)")
		}
		o := obj(typ)
		o["x"], o["y"] = a.Coordinate[0], a.Coordinate[1]
		if m := modifiers(a); m != "" && a.Action != ActMouseMove {
			keys, err := chordKeys(DialectOpenAI, m)
			if err != nil {
				return nil, err
			}
			o["keys"] = keys
		}
		return o, nil
	}
	one := func(o map[string]any, err error) (int, []any, error) {
		if err != nil {
			return 0, nil, err
		}
		return 1, []any{o}, nil
	}
	switch a.Action {
	case ActScreenshot:
		return 1, []any{obj("screenshot")}, nil
	case ActLeftClick, ActRightClick, ActMiddleClick:
		o, err := at("click")
		if err == nil {
			o["button"] = map[string]string{ActLeftClick: "left", ActRightClick: "right", ActMiddleClick: "wheel"}[a.Action]
		}
		return one(o, err)
	case ActDoubleClick:
		return one(at("double_click"))
	case ActMouseMove:
		return one(at("move"))
	case ActLeftClickDrag:
		o, err := at("drag")
		if err == nil {
			delete(o, "x")
			delete(o, "y")
			o["path"] = []map[string]int{{"x": a.StartCoordinate[0], "y": a.StartCoordinate[1]}, {"x": a.Coordinate[0], "y": a.Coordinate[1]}}
		}
		return one(o, err)
	case ActLeftMouseDown:
		return s.openAIPath(acts, i)
	case ActScroll:
		o, err := at("scroll")
		if err == nil {
			px := notchesOf(a) * ScrollPixelsPerNotch
			o["scroll_x"], o["scroll_y"] = 0, 0
			switch a.ScrollDirection {
			case "up":
				o["scroll_y"] = -px
			case "down":
				o["scroll_y"] = px
			case "left":
				o["scroll_x"] = -px
			case "right":
				o["scroll_x"] = px
			}
		}
		return one(o, err)
	case ActType:
		o := obj("type")
		o["text"] = a.Text
		return 1, []any{o}, nil
	case ActKey:
		var calls []any
		for _, c := range strings.Fields(a.Text) {
			keys, err := chordKeys(DialectOpenAI, c)
			if err != nil {
				return 0, nil, err
			}
			o := obj("keypress")
			o["keys"] = keys
			calls = append(calls, o)
		}
		if len(calls) == 0 {
			return 0, nil, cannot(DialectOpenAI, a, "no keys")
		}
		return 1, calls, nil
	case ActWait:
		calls := make([]any, waits(a.Duration, OpenAIWaitSeconds))
		for j := range calls {
			calls[j] = obj("wait")
		}
		return 1, calls, nil
	case ActTripleClick:
		return 0, nil, cannot(DialectOpenAI, a, "OpenAI's actions click once (click) or twice (double_click)")
	case ActLeftMouseUp:
		return 0, nil, cannot(DialectOpenAI, a, "a release is said only as the end of a drag's path, after a press and a move")
	case ActHoldKey:
		return 0, nil, cannot(DialectOpenAI, a, "OpenAI's actions hold keys only during a click, drag, move or scroll")
	}
	return 0, nil, cannot(DialectOpenAI, a, "it only observes, and OpenAI's one observing action is screenshot")
}

// openAIPath says a press, at least one move and a release, each at a
// point, as one drag along their points: the only way OpenAI's actions
// press and release the button apart.
func (s Space) openAIPath(acts []Action, i int) (int, []any, error) {
	var path []map[string]int
	for j := i; j < len(acts); j++ {
		a := acts[j]
		if len(a.Coordinate) != 2 || modifiers(a) != "" {
			break
		}
		want := ActMouseMove
		if j == i {
			want = ActLeftMouseDown
		}
		if a.Action == ActLeftMouseUp && len(path) >= 2 {
			path = append(path, map[string]int{"x": a.Coordinate[0], "y": a.Coordinate[1]})
			return j - i + 1, []any{map[string]any{"type": "drag", "path": path}}, nil
		}
		if a.Action != want {
			break
		}
		path = append(path, map[string]int{"x": a.Coordinate[0], "y": a.Coordinate[1]})
	}
	return 0, nil, cannot(DialectOpenAI, acts[i], "a press is said only as the start of a drag's path: a press, moves and a release, each at a point")
}

// --- Gemini: function calls, points on the 0..999 grid ---

func (s Space) sayGemini(acts []Action, i int) (int, []any, error) {
	a := acts[i]
	call := func(name string, args map[string]any) []any {
		if args == nil {
			args = map[string]any{}
		}
		return []any{GeminiCall{Name: name, Args: args}}
	}
	at := func() (map[string]any, error) {
		if len(a.Coordinate) != 2 {
			return nil, cannot(DialectGemini, a, "its functions name a point, and this one has none")
		}
		if modifiers(a) != "" {
			return nil, cannot(DialectGemini, a, "its functions hold no keys while clicking, dragging or scrolling")
		}
		gx, gy := s.ToGrid(a.Coordinate[0], a.Coordinate[1], GeminiGrid)
		return map[string]any{"x": gx, "y": gy}, nil
	}
	switch a.Action {
	case ActScreenshot:
		return 1, call("open_web_browser", nil), nil
	case ActLeftClick:
		args, err := at()
		if err != nil {
			return 0, nil, err
		}
		if n, typed := geminiTypeAt(acts, i, args); n > 0 {
			return n, call("type_text_at", typed), nil
		}
		return 1, call("click_at", args), nil
	case ActMouseMove:
		args, err := at()
		if err != nil {
			return 0, nil, err
		}
		return 1, call("hover_at", args), nil
	case ActLeftClickDrag:
		args, err := at()
		if err != nil {
			return 0, nil, err
		}
		gx, gy := s.ToGrid(a.StartCoordinate[0], a.StartCoordinate[1], GeminiGrid)
		args["destination_x"], args["destination_y"] = args["x"], args["y"]
		args["x"], args["y"] = gx, gy
		return 1, call("drag_and_drop", args), nil
	case ActScroll:
		args, err := at()
		if err != nil {
			return 0, nil, err
		}
		m, err := s.geminiMagnitude(a)
		if err != nil {
			return 0, nil, err
		}
		args["direction"], args["magnitude"] = a.ScrollDirection, m
		return 1, call("scroll_at", args), nil
	case ActKey:
		return geminiKeys(acts, i)
	case ActWait:
		calls := make([]any, waits(a.Duration, GeminiWaitSeconds))
		for j := range calls {
			calls[j] = GeminiCall{Name: "wait_5_seconds", Args: map[string]any{}}
		}
		return 1, calls, nil
	case ActType:
		return 0, nil, cannot(DialectGemini, a, "Gemini types only at a point it clicks first (type_text_at), and the step before this one is not such a click")
	case ActRightClick, ActMiddleClick, ActDoubleClick, ActTripleClick:
		return 0, nil, cannot(DialectGemini, a, "its one click is click_at, a single left click")
	case ActLeftMouseDown, ActLeftMouseUp:
		return 0, nil, cannot(DialectGemini, a, "it presses and releases the button only together, in drag_and_drop")
	case ActHoldKey:
		return 0, nil, cannot(DialectGemini, a, "key_combination presses keys and lets them go")
	}
	return 0, nil, cannot(DialectGemini, a, "it only observes, and Gemini's functions all answer with a screenshot")
}

// geminiTypeAt finds type_text_at's shape from acts[i], a left click at
// args: the click, then ctrl+a and Delete (clear_before_typing), the
// typing, and Return (press_enter) if one follows; n is how many actions
// it covers, 0 if they are not that shape.
func geminiTypeAt(acts []Action, i int, args map[string]any) (int, map[string]any) {
	key := func(j int, text string) bool {
		return j < len(acts) && acts[j].Action == ActKey && acts[j].Text == text
	}
	j, clear := i+1, false
	if key(j, "ctrl+a") && key(j+1, "Delete") {
		j, clear = j+2, true
	}
	if j >= len(acts) || acts[j].Action != ActType {
		return 0, nil
	}
	out := map[string]any{"x": args["x"], "y": args["y"], "text": acts[j].Text, "clear_before_typing": clear, "press_enter": false}
	j++
	if key(j, "Return") {
		out["press_enter"] = true
		j++
	}
	return j - i, out
}

// geminiKeys says a key action: navigate when it is ctrl+l, a URL typed
// and Return (what navigate does); go_back and go_forward for their keys;
// key_combination for any other chord, one call per chord of a sequence.
func geminiKeys(acts []Action, i int) (int, []any, error) {
	a := acts[i]
	if a.Text == "ctrl+l" && i+2 < len(acts) && acts[i+1].Action == ActType && acts[i+2].Action == ActKey && acts[i+2].Text == "Return" &&
		strings.TrimSpace(acts[i+1].Text) != "" && !strings.ContainsAny(acts[i+1].Text, "\r\n\t") {
		return 3, []any{GeminiCall{Name: "navigate", Args: map[string]any{"url": acts[i+1].Text}}}, nil
	}
	switch a.Text {
	case "alt+Left":
		return 1, []any{GeminiCall{Name: "go_back", Args: map[string]any{}}}, nil
	case "alt+Right":
		return 1, []any{GeminiCall{Name: "go_forward", Args: map[string]any{}}}, nil
	}
	var calls []any
	for _, c := range strings.Fields(a.Text) {
		keys, err := chordKeys(DialectGemini, c)
		if err != nil {
			return 0, nil, err
		}
		calls = append(calls, GeminiCall{Name: "key_combination", Args: map[string]any{"keys": strings.Join(keys, "+")}})
	}
	if len(calls) == 0 {
		return 0, nil, cannot(DialectGemini, a, "no keys")
	}
	return 1, calls, nil
}

// geminiMagnitude is the scroll_at magnitude, in grid units along the
// scroll's axis, that mcpserver turns back into the same notches:
// ceil(floor(m·axis/1000) / 100) == n.
func (s Space) geminiMagnitude(a Action) (int, error) {
	n := notchesOf(a)
	axis := s.ModelH
	if a.ScrollDirection == "left" || a.ScrollDirection == "right" {
		axis = s.ModelW
	}
	m := n * ScrollPixelsPerNotch * GeminiGrid / axis
	if m > GeminiGrid {
		return 0, cannot(DialectGemini, a, fmt.Sprintf("%d notches is more than scroll_at's longest scroll, the whole screen (%d pixels, %d notches)",
			n, axis, axis/ScrollPixelsPerNotch))
	}
	return m, nil
}

// --- pyautogui: Python code, pixels or fractions of model space ---

func (s Space) sayPyAutoGUI(a Action, opt SayOptions) (int, []any, error) {
	pt := func(c []int) string {
		if opt.Fractions {
			fx, fy := s.ToFraction(c[0], c[1])
			return fmt.Sprintf("x=%.6f, y=%.6f", fx, fy)
		}
		return fmt.Sprintf("%d, %d", c[0], c[1])
	}
	atOpt := func(fn string) string {
		if len(a.Coordinate) != 2 {
			return "pyautogui." + fn + "()"
		}
		return "pyautogui." + fn + "(" + pt(a.Coordinate) + ")"
	}
	var lines []string
	switch a.Action {
	case ActLeftClick:
		lines = []string{atOpt("click")}
	case ActRightClick:
		lines = []string{atOpt("rightClick")}
	case ActMiddleClick:
		lines = []string{atOpt("middleClick")}
	case ActDoubleClick:
		lines = []string{atOpt("doubleClick")}
	case ActTripleClick:
		lines = []string{atOpt("tripleClick")}
	case ActMouseMove:
		if len(a.Coordinate) != 2 {
			return 0, nil, cannot(DialectPyAutoGUI, a, "a move needs a point")
		}
		lines = []string{atOpt("moveTo")}
	case ActLeftClickDrag:
		// pyautogui drags from the pointer: move to the start first.
		lines = []string{"pyautogui.moveTo(" + pt(a.StartCoordinate) + ")", "pyautogui.dragTo(" + pt(a.Coordinate) + ", button='left')"}
	case ActLeftMouseDown:
		lines = []string{atOpt("mouseDown")}
	case ActLeftMouseUp:
		lines = []string{atOpt("mouseUp")}
	case ActScroll:
		lines = []string{pyScroll(a, pt)}
	case ActType:
		lines = []string{"pyautogui.write(" + PyString(a.Text) + ")"}
	case ActKey:
		var err error
		if lines, err = pyKeys(a); err != nil {
			return 0, nil, err
		}
	case ActWait:
		d := 0.0
		if a.Duration != nil {
			d = *a.Duration
		}
		lines = []string{"time.sleep(" + strconv.FormatFloat(d, 'f', -1, 64) + ")"}
	case ActHoldKey:
		return 0, nil, cannot(DialectPyAutoGUI, a, "keyDown holds a key for the calls after it, and a key held through a sleep alone is pressed when let go")
	default:
		return 0, nil, cannot(DialectPyAutoGUI, a, "it only observes, and the pyautogui tool answers every call with a screenshot")
	}
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
func pyScroll(a Action, pt func([]int) string) string {
	n, fn := notchesOf(a), "scroll"
	switch a.ScrollDirection {
	case "down":
		n = -n
	case "left":
		fn, n = "hscroll", -n
	case "right":
		fn = "hscroll"
	}
	if len(a.Coordinate) == 2 {
		return fmt.Sprintf("pyautogui.%s(%d, %s)", fn, n, pt(a.Coordinate))
	}
	return fmt.Sprintf("pyautogui.%s(%d)", fn, n)
}

// pyKeys: a chord is hotkey, one key press; a sequence of single keys one
// press of the list, any other sequence one call per chord.
func pyKeys(a Action) ([]string, error) {
	chords := strings.Fields(a.Text)
	if len(chords) == 0 {
		return nil, cannot(DialectPyAutoGUI, a, "no keys")
	}
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
