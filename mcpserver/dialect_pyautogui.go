package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"go.starlark.net/resolve"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/internal/wire"
)

// The pyautogui code that models trained on OSWorld and AgentNet data write
// (UI-TARS, OpenCUA, Agent-S): pyautogui.click(x=0.41, y=0.22),
// pyautogui.hotkey('ctrl', 'c'), pyautogui.write('...'), time.sleep(1).
// No Python runs: the code is run by the Starlark interpreter run_script
// uses, which reads this subset of Python as it is, with a pyautogui module
// and time.sleep bound. Each call becomes a canonical action run as the
// agent, at once, so a call after a failing one never runs. Function names
// and arguments follow pyautogui's documentation (pyautogui.readthedocs.io,
// read 2026-11-26).

const pyautoguiTool = "pyautogui"

// pyFunc is one function of the bound pyautogui module.
type pyFunc func(r *pyRun, fn string, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error)

// pyFuncs is the supported subset, by name.
func pyFuncs() map[string]pyFunc {
	click := func(name string, clicks int) pyFunc {
		return func(r *pyRun, fn string, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
			return r.click(fn, args, kw, name, clicks)
		}
	}
	return map[string]pyFunc{
		"click": click("", 1), "leftClick": click("left", 1), "rightClick": click("right", 1), "middleClick": click("middle", 1),
		"doubleClick": click("", 2), "tripleClick": click("", 3),
		"moveTo": (*pyRun).moveTo, "moveRel": (*pyRun).moveRel, "move": (*pyRun).moveRel,
		"dragTo": (*pyRun).dragTo, "dragRel": (*pyRun).dragRel, "drag": (*pyRun).dragRel,
		"mouseDown": (*pyRun).mouseButton, "mouseUp": (*pyRun).mouseButton,
		"scroll": (*pyRun).scroll, "vscroll": (*pyRun).scroll, "hscroll": (*pyRun).scroll,
		"hotkey": (*pyRun).hotkey, "press": (*pyRun).press, "keyDown": (*pyRun).keyDown, "keyUp": (*pyRun).keyUp,
		"write": (*pyRun).write, "typewrite": (*pyRun).write,
		"sleep": (*pyRun).sleep, "position": (*pyRun).position, "size": (*pyRun).size,
	}
}

func (s *Server) pyautoguiSpec() Tool {
	names := slices.Sorted(mapsKeys(pyFuncs()))
	return Tool{
		Name:  pyautoguiTool,
		Title: "Run pyautogui code",
		Description: fmt.Sprintf("Drive a Linux desktop of %d x %d pixels with Python pyautogui code, as in pyautogui.click(x=640, y=400) or "+
			"pyautogui.click(x=0.5, y=0.5). Coordinates are pixels of the screenshot, or fractions of it when given as floats from 0 to 1. "+
			"Supported: pyautogui.%s; time.sleep; print; loops and ifs. import pyautogui and import time are accepted; nothing else can be "+
			"imported, and no real Python runs (a Starlark interpreter reads the code). Timing arguments (duration, interval, tween) are accepted "+
			"and not waited out. Answers with a screenshot taken once the screen has settled.",
			s.space.ModelW, s.space.ModelH, strings.Join(names, ", pyautogui.")),
		Schema: mcp.ToolInputSchema{
			Type:                 "object",
			Properties:           map[string]any{"code": map[string]any{"type": "string", "description": "The Python code calling pyautogui."}},
			Required:             []string{"code"},
			AdditionalProperties: false,
		},
		Annotations: annotations(false, true, false),
		Handler:     s.handlePyAutoGUI,
	}
}

func (s *Server) handlePyAutoGUI(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	raw, err := rawArguments(req)
	if err != nil {
		return toolError(fmt.Errorf("%s: %w", pyautoguiTool, err)), nil
	}
	var args struct {
		Code *string `json:"code"`
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&args); err != nil || args.Code == nil {
		return toolError(errors.New(`pyautogui takes one argument, "code": the Python code as a string`)), nil
	}
	return s.RunPyAutoGUI(ctx, *args.Code), nil
}

// pyRun is the state of one pyautogui call.
type pyRun struct {
	s        *Server
	ctx      context.Context
	out      strings.Builder
	actions  []string // canonical actions run, in order
	settle   bool
	last     hci.Result
	held     []string // keys held with keyDown, canonical names, in order
	heldUsed bool     // an action used the held keys as modifiers
	cut      bool     // print output was cut at the limit
	lim      ScriptLimits
}

// RunPyAutoGUI runs pyautogui code (see the pyautogui tool) and answers
// with the screenshot after it, or an error naming the line and call that
// failed and what ran before it.
func (s *Server) RunPyAutoGUI(ctx context.Context, code string) (res *mcp.CallToolResult) {
	lim := s.cfg.Script.withDefaults()
	if len(code) > lim.MaxScriptBytes {
		return toolError(fmt.Errorf("pyautogui: the code is %d bytes, more than %d", len(code), lim.MaxScriptBytes))
	}
	src, err := stripImports(code)
	if err != nil {
		return toolError(fmt.Errorf("pyautogui: %w; nothing was run", err))
	}
	ctx, cancel := context.WithTimeout(hci.WithVia(ctx, string(ModePyAutoGUI)), lim.Timeout)
	defer cancel()
	r := &pyRun{s: s, ctx: ctx, lim: lim}
	th := &starlark.Thread{Name: pyautoguiTool}
	th.SetMaxExecutionSteps(lim.MaxSteps)
	th.Print = func(_ *starlark.Thread, msg string) {
		if r.out.Len()+len(msg) < lim.MaxOutputBytes {
			r.out.WriteString(msg + "\n")
		} else {
			r.cut = true
		}
	}
	th.Load = func(*starlark.Thread, string) (starlark.StringDict, error) {
		return nil, errors.New("load is not available: only pyautogui and time are bound")
	}
	stop := context.AfterFunc(ctx, func() { th.Cancel("wall time") })
	defer stop()
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("pyautogui panicked", "panic", p)
			res = toolError(fmt.Errorf("internal error in pyautogui: %v", p))
		}
	}()
	globals := starlark.StringDict{"pyautogui": &pyModule{r: r, funcs: pyFuncs()}, "time": &timeModule{r: r}}
	opts := &syntax.FileOptions{Set: true, While: true, TopLevelControl: true, GlobalReassign: true}
	_, err = starlark.ExecFileOptions(opts, th, pyautoguiTool, src, globals)
	if err != nil {
		return toolError(r.explain(err))
	}
	texts := []string{}
	if r.out.Len() > 0 {
		texts = append(texts, r.out.String())
	}
	if r.cut {
		texts = append(texts, fmt.Sprintf("note: printing stopped at %d bytes; the rest was left out", lim.MaxOutputBytes))
	}
	if len(r.held) > 0 {
		// Held keys are modifiers of the calls that used them, never left
		// down on the desktop: say so, in case the model meant them to stay.
		what := "the calls that used them held them; they are not held now"
		if !r.heldUsed {
			what = "nothing used them, so nothing was pressed"
		}
		texts = append(texts, fmt.Sprintf("note: keyDown(%s) had no keyUp: %s", strings.Join(r.held, ", "), what))
	}
	return s.answer(ctx, pyautoguiTool, texts, r.last, r.settle)
}

// explain words an error from the interpreter for the model: the line, the
// call, and what ran before it.
func (r *pyRun) explain(err error) error {
	ran := "nothing was run"
	if len(r.actions) > 0 {
		ran = fmt.Sprintf("the %d actions before it were done (%s)", len(r.actions), strings.Join(r.actions, ", "))
		if len(r.actions) == 1 {
			ran = fmt.Sprintf("the action before it was done (%s)", r.actions[0])
		}
	}
	var rl resolve.ErrorList
	var se syntax.Error
	var ee *starlark.EvalError
	switch {
	case errors.As(err, &rl) && len(rl) > 0:
		msg := rl[0].Msg
		if name, ok := strings.CutPrefix(msg, "undefined: "); ok {
			msg = fmt.Sprintf("%s is not available: only pyautogui.<function>, time.sleep, print and Python's built-ins such as range run here", name)
		}
		return fmt.Errorf("pyautogui: line %d: %s; nothing was run", rl[0].Pos.Line, msg)
	case errors.As(err, &se):
		return fmt.Errorf("pyautogui: line %d: %s (the code is read as the Python subset Starlark shares); nothing was run", se.Pos.Line, se.Msg)
	case r.ctx.Err() != nil:
		return fmt.Errorf("pyautogui: the code ran past its wall time of %s and was stopped; %s", r.lim.Timeout, ran)
	case strings.Contains(err.Error(), "too many steps"):
		return fmt.Errorf("pyautogui: the code ran more than %d steps and was stopped (an endless loop?); %s", r.lim.MaxSteps, ran)
	case errors.As(err, &ee):
		line := 0
		for _, fr := range ee.CallStack {
			if fr.Pos.Filename() == pyautoguiTool {
				line = int(fr.Pos.Line)
			}
		}
		return fmt.Errorf("pyautogui: line %d: %s; %s", line, ee.Msg, ran)
	}
	return fmt.Errorf("pyautogui: %w; %s", err, ran)
}

// importLine is a line that starts with an import statement; more
// statements may follow a semicolon (Agent-S writes
// "import pyautogui; pyautogui.click(...)").
var importLine = regexp.MustCompile(`^(\s*)((?:import|from)\s[^;#]*)(;?)(.*)$`)

// stripImports replaces "import pyautogui" and "import time" with pass, at
// the same indentation, so line numbers stay true, and refuses any other
// import, naming it. A Markdown code fence around the code is dropped too.
func stripImports(code string) (string, error) {
	if err := wire.CheckString(code); err != nil {
		return "", fmt.Errorf("the code: %w", err)
	}
	lines := unfence(strings.Split(code, "\n"))
	for i, line := range lines {
		for {
			m := importLine.FindStringSubmatch(line)
			if m == nil {
				break
			}
			if err := allowedImport(strings.TrimSpace(m[2])); err != nil {
				return "", fmt.Errorf("line %d: %w", i+1, err)
			}
			rest := strings.TrimSpace(m[4])
			if rest == "" || strings.HasPrefix(rest, "#") {
				line = m[1] + "pass"
				break
			}
			line = m[1] + rest
		}
		lines[i] = line
	}
	return strings.Join(lines, "\n"), nil
}

// unfence blanks a Markdown code fence around the code (```python ...
// ```), which models often write and hosts do not always strip.
func unfence(lines []string) []string {
	if len(lines) < 2 || !strings.HasPrefix(strings.TrimSpace(lines[0]), "```") {
		return lines
	}
	lines[0] = ""
	for i := len(lines) - 1; i > 0; i-- {
		if t := strings.TrimSpace(lines[i]); t != "" {
			if t == "```" {
				lines[i] = ""
			}
			break
		}
	}
	return lines
}

func allowedImport(stmt string) error {
	mods, ok := strings.CutPrefix(stmt, "import ")
	if ok {
		for _, m := range strings.Split(mods, ",") {
			if m = strings.TrimSpace(m); m != "pyautogui" && m != "time" {
				return fmt.Errorf("%s: only pyautogui and time can be imported here", wire.Prefix(stmt, 60))
			}
		}
		return nil
	}
	return fmt.Errorf("%s: only \"import pyautogui\" and \"import time\" are accepted", wire.Prefix(stmt, 60))
}

// pyModule is the bound pyautogui module: its functions, and a clear error
// for any other name.
type pyModule struct {
	r     *pyRun
	funcs map[string]pyFunc
}

func (m *pyModule) String() string        { return "<module pyautogui>" }
func (m *pyModule) Type() string          { return "module" }
func (m *pyModule) Freeze()               {}
func (m *pyModule) Truth() starlark.Bool  { return true }
func (m *pyModule) Hash() (uint32, error) { return 0, errors.New("module is not hashable") }
func (m *pyModule) AttrNames() []string   { return slices.Sorted(mapsKeys(m.funcs)) }
func (m *pyModule) Attr(name string) (starlark.Value, error) {
	f, ok := m.funcs[name]
	if !ok {
		return nil, fmt.Errorf("pyautogui.%s is not supported here; the supported calls are pyautogui.%s and time.sleep",
			name, strings.Join(m.AttrNames(), ", pyautogui."))
	}
	fn := "pyautogui." + name
	return starlark.NewBuiltin(fn, func(_ *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
		return f(m.r, fn, args, kw)
	}), nil
}

// timeModule is the bound time module: sleep only.
type timeModule struct{ r *pyRun }

func (m *timeModule) String() string        { return "<module time>" }
func (m *timeModule) Type() string          { return "module" }
func (m *timeModule) Freeze()               {}
func (m *timeModule) Truth() starlark.Bool  { return true }
func (m *timeModule) Hash() (uint32, error) { return 0, errors.New("module is not hashable") }
func (m *timeModule) AttrNames() []string   { return []string{"sleep"} }
func (m *timeModule) Attr(name string) (starlark.Value, error) {
	if name != "sleep" {
		return nil, fmt.Errorf("time.%s is not supported here; time.sleep is", name)
	}
	return starlark.NewBuiltin("time.sleep", func(_ *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
		return m.r.sleep("time.sleep", args, kw)
	}), nil
}

// act runs one canonical action as the agent, now.
func (r *pyRun) act(fn string, st step) error {
	if len(r.actions) >= maxSteps {
		return fmt.Errorf("%s: more than %d actions in one call (an endless loop?); split the work over several calls", fn, maxSteps)
	}
	a, err := r.s.checkStep(st)
	if err != nil {
		return fmt.Errorf("%s: %w", fn, err)
	}
	out, err := r.s.exec.Do(r.ctx, a, hci.SourceAgent)
	if err != nil {
		return fmt.Errorf("%s: %w", fn, err)
	}
	r.actions = append(r.actions, a.Action)
	r.settle = r.settle || a.Mutates()
	r.last = out
	return nil
}

// withHeld puts the keys held with keyDown on a click, drag or scroll.
func (r *pyRun) withHeld(st step) step {
	if len(r.held) > 0 {
		st[fText] = strings.Join(r.held, "+")
		r.heldUsed = true
	}
	return st
}

// ignored are pyautogui's timing and logging arguments: accepted, not
// waited out (the executor moves and types at its own pace).
var ignoredArgs = []string{"duration", "tween", "interval", "logScreenshot", "_pause", "mouseDownUp"}

// unpack binds a call's arguments by position or name to names, in
// pyautogui's order (a trailing ? marks an optional one), dropping the
// ignored timing arguments first; positional ones past the names are
// timing arguments too. The values are by name; nil is not given.
func unpack(fn string, args starlark.Tuple, kw []starlark.Tuple, names ...string) (map[string]starlark.Value, error) {
	var keep []starlark.Tuple
	for _, kv := range kw {
		if !slices.Contains(ignoredArgs, string(kv[0].(starlark.String))) {
			keep = append(keep, kv)
		}
	}
	plain := make([]string, len(names))
	for i, n := range names {
		plain[i] = strings.TrimSuffix(n, "?")
	}
	if len(args) > len(names) {
		args = args[:len(names)]
	}
	vals, err := bindArgs(fn+"("+strings.Join(plain, ", ")+")", plain, args, keep)
	if err != nil {
		return nil, err
	}
	out := make(map[string]starlark.Value, len(names))
	for i, n := range names {
		if !strings.HasSuffix(n, "?") && !given(vals[i]) {
			return nil, fmt.Errorf("%s: missing %s", fn, n)
		}
		if given(vals[i]) {
			out[plain[i]] = vals[i]
		}
	}
	return out, nil
}

func given(v starlark.Value) bool { return v != nil && v != starlark.None }

// point reads x and y as a model-space pixel: integers are pixels, floats
// from 0 to 1 fractions of the screenshot (hci.Space.FromFraction), larger
// floats pixels (cut to whole, as pyautogui does). x may be an (x, y)
// pair. Neither given is nil: where the pointer is.
func (r *pyRun) point(fn string, x, y starlark.Value) ([]int, error) {
	if t, ok := x.(starlark.Indexable); ok && !given(y) {
		if t.Len() != 2 {
			return nil, fmt.Errorf("%s: a point is (x, y), got %d numbers", fn, t.Len())
		}
		x, y = t.Index(0), t.Index(1)
	}
	if !given(x) && !given(y) {
		return nil, nil
	}
	if !given(x) || !given(y) {
		return nil, fmt.Errorf("%s: give both x and y, or neither", fn)
	}
	sp := r.s.exec.Space()
	px, err := axis(fn, "x", x, func(f float64) (int, error) { v, _, err := sp.FromFraction(f, 0); return v, err })
	if err != nil {
		return nil, err
	}
	py, err := axis(fn, "y", y, func(f float64) (int, error) { _, v, err := sp.FromFraction(0, f); return v, err })
	if err != nil {
		return nil, err
	}
	return []int{px, py}, nil
}

func axis(fn, name string, v starlark.Value, fraction func(float64) (int, error)) (int, error) {
	switch n := v.(type) {
	case starlark.Int:
		i, err := starlark.AsInt32(n)
		if err != nil {
			return 0, fmt.Errorf("%s: %s is %s, out of range", fn, name, wire.Prefix(n.String(), 20))
		}
		return i, nil
	case starlark.Float:
		f := float64(n)
		switch {
		case math.IsNaN(f) || math.IsInf(f, 0) || f < 0:
			return 0, fmt.Errorf("%s: %s is %v: give a pixel or a fraction from 0 to 1", fn, name, f)
		case f <= 1:
			return fraction(f)
		case f > math.MaxInt32:
			return 0, fmt.Errorf("%s: %s is %v, out of range", fn, name, f)
		}
		return int(f), nil
	}
	return 0, fmt.Errorf("%s: %s must be a number, got %s", fn, name, v.Type())
}

// pointer is where the pointer is now, in model space.
func (r *pyRun) pointer() ([]int, error) {
	x, y, err := r.s.exec.CursorPosition(r.ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the pointer's position: %w", err)
	}
	mx, my := r.s.exec.Space().ToModel(x, y)
	return []int{mx, my}, nil
}

func str(fn, name string, v starlark.Value, def string) (string, error) {
	if !given(v) {
		return def, nil
	}
	s, ok := starlark.AsString(v)
	if !ok {
		return "", fmt.Errorf("%s: %s must be a string, got %s", fn, name, v.Type())
	}
	if err := wire.CheckString(s); err != nil {
		return "", fmt.Errorf("%s: %s: %w", fn, name, err)
	}
	return s, nil
}

func integer(fn, name string, v starlark.Value, def int) (int, error) {
	if !given(v) {
		return def, nil
	}
	n, err := starlark.AsInt32(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %s must be an integer, got %s", fn, name, v.Type())
	}
	return n, nil
}

// pyButtons are pyautogui's button names.
var pyButtons = map[string]string{"left": "left", "primary": "left", "right": "right", "secondary": "right", "middle": "middle"}

// pyClicks are the canonical clicks by button and count.
var pyClicks = map[string]string{
	"left1": hci.ActLeftClick, "left2": hci.ActDoubleClick, "left3": hci.ActTripleClick,
	"right1": hci.ActRightClick, "middle1": hci.ActMiddleClick,
}

func (r *pyRun) click(fn string, args starlark.Tuple, kw []starlark.Tuple, button string, clicks int) (starlark.Value, error) {
	names := []string{"x?", "y?", "interval?"} // leftClick, rightClick, middleClick
	switch {
	case button == "" && clicks == 1:
		names = []string{"x?", "y?", "clicks?", "interval?", "button?"}
	case button == "":
		names = []string{"x?", "y?", "interval?", "button?"}
	}
	v, err := unpack(fn, args, kw, names...)
	if err != nil {
		return nil, err
	}
	p, err := r.point(fn, v["x"], v["y"])
	if err != nil {
		return nil, err
	}
	if clicks, err = integer(fn, "clicks", v["clicks"], clicks); err != nil {
		return nil, err
	}
	if button == "" {
		b, err := str(fn, "button", v["button"], "left")
		if err != nil {
			return nil, err
		}
		if button = pyButtons[b]; button == "" {
			return nil, fmt.Errorf("%s: button %s: use left, right or middle", fn, wire.Quote(b))
		}
	}
	name := pyClicks[fmt.Sprint(button, clicks)]
	if name == "" {
		return nil, fmt.Errorf("%s: %d clicks of the %s button: the left button clicks 1 to 3 times, the others once", fn, clicks, button)
	}
	st := step{fAction: name}
	if p != nil {
		st[fCoordinate] = p
	}
	return starlark.None, r.act(fn, r.withHeld(st))
}

func (r *pyRun) moveTo(fn string, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	v, err := unpack(fn, args, kw, "x", "y?")
	if err != nil {
		return nil, err
	}
	p, err := r.point(fn, v["x"], v["y"])
	if err != nil {
		return nil, err
	}
	return starlark.None, r.act(fn, step{fAction: hci.ActMouseMove, fCoordinate: p})
}

// offset is where (dx, dy) pixels from the pointer is.
func (r *pyRun) offset(fn string, dx, dy starlark.Value) ([]int, error) {
	x, err := integer(fn, "xOffset", dx, 0)
	if err != nil {
		return nil, err
	}
	y, err := integer(fn, "yOffset", dy, 0)
	if err != nil {
		return nil, err
	}
	p, err := r.pointer()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	return []int{p[0] + x, p[1] + y}, nil
}

func (r *pyRun) moveRel(fn string, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	v, err := unpack(fn, args, kw, "xOffset?", "yOffset?")
	if err != nil {
		return nil, err
	}
	p, err := r.offset(fn, v["xOffset"], v["yOffset"])
	if err != nil {
		return nil, err
	}
	return starlark.None, r.act(fn, step{fAction: hci.ActMouseMove, fCoordinate: p})
}

func (r *pyRun) drag(fn string, to []int, button starlark.Value) (starlark.Value, error) {
	b, err := str(fn, "button", button, "left")
	if err != nil {
		return nil, err
	}
	if pyButtons[b] != "left" {
		return nil, fmt.Errorf("%s: button %s: only the left button drags here", fn, wire.Quote(b))
	}
	from, err := r.pointer()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	return starlark.None, r.act(fn, r.withHeld(step{fAction: hci.ActLeftClickDrag, fStart: from, fCoordinate: to}))
}

func (r *pyRun) dragTo(fn string, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	v, err := unpack(fn, args, kw, "x", "y?", "duration?", "tween?", "button?")
	if err != nil {
		return nil, err
	}
	p, err := r.point(fn, v["x"], v["y"])
	if err != nil {
		return nil, err
	}
	return r.drag(fn, p, v["button"])
}

func (r *pyRun) dragRel(fn string, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	v, err := unpack(fn, args, kw, "xOffset?", "yOffset?", "duration?", "tween?", "button?")
	if err != nil {
		return nil, err
	}
	p, err := r.offset(fn, v["xOffset"], v["yOffset"])
	if err != nil {
		return nil, err
	}
	return r.drag(fn, p, v["button"])
}

func (r *pyRun) mouseButton(fn string, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	v, err := unpack(fn, args, kw, "x?", "y?", "button?")
	if err != nil {
		return nil, err
	}
	p, err := r.point(fn, v["x"], v["y"])
	if err != nil {
		return nil, err
	}
	b, err := str(fn, "button", v["button"], "left")
	if err != nil {
		return nil, err
	}
	if pyButtons[b] != "left" {
		return nil, fmt.Errorf("%s: button %s: only the left button is pressed and released on its own here", fn, wire.Quote(b))
	}
	st := step{fAction: hci.ActLeftMouseDown}
	if strings.HasSuffix(fn, "Up") {
		st[fAction] = hci.ActLeftMouseUp
	}
	if p != nil {
		st[fCoordinate] = p
	}
	return starlark.None, r.act(fn, st)
}

// scroll turns the wheel: scroll and vscroll up for positive clicks, hscroll
// right for positive (pyautogui's X11 buttons 4/5 and 7/6).
func (r *pyRun) scroll(fn string, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	v, err := unpack(fn, args, kw, "clicks", "x?", "y?")
	if err != nil {
		return nil, err
	}
	n, err := integer(fn, "clicks", v["clicks"], 0)
	if err != nil {
		return nil, err
	}
	p, err := r.point(fn, v["x"], v["y"])
	if err != nil {
		return nil, err
	}
	dir := map[bool]string{true: "up", false: "down"}[n > 0]
	if strings.HasSuffix(fn, "hscroll") {
		dir = map[bool]string{true: "right", false: "left"}[n > 0]
	}
	st := step{fAction: hci.ActScroll, fDirection: dir, fAmount: max(n, -n)}
	if p != nil {
		st[fCoordinate] = p
	}
	return starlark.None, r.act(fn, r.withHeld(st))
}

// keyList reads key names given one by one or as one list.
func keyList(fn string, args starlark.Tuple) ([]string, error) {
	if len(args) == 1 {
		if l, ok := args[0].(*starlark.List); ok {
			args = make(starlark.Tuple, l.Len())
			for i := range args {
				args[i] = l.Index(i)
			}
		}
	}
	keys := make([]string, len(args))
	for i, a := range args {
		k, err := str(fn, "key", a, "")
		if err != nil {
			return nil, err
		}
		keys[i] = k
	}
	return keys, nil
}

// heldChord is the chord of the held keys and keys.
func (r *pyRun) heldChord(fn string, keys []string) (string, error) {
	c, err := chord(fn, keys, false)
	if err != nil {
		return "", err
	}
	if len(r.held) > 0 {
		r.heldUsed = true
		c = strings.Join(r.held, "+") + "+" + c
	}
	return c, nil
}

func (r *pyRun) hotkey(fn string, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	if _, err := unpack(fn, nil, kw); err != nil {
		return nil, err
	}
	keys, err := keyList(fn, args)
	if err != nil {
		return nil, err
	}
	c, err := r.heldChord(fn, keys)
	if err != nil {
		return nil, err
	}
	return starlark.None, r.act(fn, step{fAction: hci.ActKey, fText: c})
}

// press presses each key in turn (a list is several), presses times.
func (r *pyRun) press(fn string, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	v, err := unpack(fn, args, kw, "keys", "presses?", "interval?")
	if err != nil {
		return nil, err
	}
	keys, err := keyList(fn, starlark.Tuple{v["keys"]})
	if err != nil {
		return nil, err
	}
	n, err := integer(fn, "presses", v["presses"], 1)
	if err != nil {
		return nil, err
	}
	if n < 1 || n > 100 {
		return nil, fmt.Errorf("%s: presses is %d: 1 to 100", fn, n)
	}
	var chords []string
	for _, k := range keys {
		c, err := r.heldChord(fn, []string{k})
		if err != nil {
			return nil, err
		}
		chords = append(chords, c)
	}
	if len(chords) == 0 {
		return nil, fmt.Errorf("%s: no keys given", fn)
	}
	text := strings.Repeat(strings.Join(chords, " ")+" ", n)
	return starlark.None, r.act(fn, step{fAction: hci.ActKey, fText: strings.TrimSpace(text)})
}

// keyDown holds a key for the calls after it: clicks, drags and scrolls
// hold it as a modifier, key presses as part of their chord. Pressed alone
// (keyDown, keyUp, nothing between) it is a key press of its own at keyUp.
func (r *pyRun) keyDown(fn string, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	v, err := unpack(fn, args, kw, "key")
	if err != nil {
		return nil, err
	}
	k, err := str(fn, "key", v["key"], "")
	if err != nil {
		return nil, err
	}
	name, err := keyName(fn, k, false)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(r.held, name) {
		r.held = append(r.held, name)
	}
	return starlark.None, nil
}

func (r *pyRun) keyUp(fn string, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	v, err := unpack(fn, args, kw, "key")
	if err != nil {
		return nil, err
	}
	k, err := str(fn, "key", v["key"], "")
	if err != nil {
		return nil, err
	}
	name, err := keyName(fn, k, false)
	if err != nil {
		return nil, err
	}
	i := slices.Index(r.held, name)
	if i < 0 {
		return nil, fmt.Errorf("%s: %s is not held (no keyDown(%s) before it)", fn, wire.Quote(k), wire.Quote(k))
	}
	var pressErr error
	if !r.heldUsed {
		// Nothing used the held keys: pressing and releasing them was the point.
		pressErr = r.act(fn, step{fAction: hci.ActKey, fText: strings.Join(r.held, "+")})
		r.heldUsed = true
	}
	r.held = slices.Delete(r.held, i, i+1)
	if len(r.held) == 0 {
		r.heldUsed = false
	}
	return starlark.None, pressErr
}

// write types text; typewrite's list of key names presses them in turn.
func (r *pyRun) write(fn string, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	v, err := unpack(fn, args, kw, "message", "interval?")
	if err != nil {
		return nil, err
	}
	if _, ok := v["message"].(*starlark.List); ok {
		return r.press(fn, starlark.Tuple{v["message"]}, nil)
	}
	text, err := str(fn, "message", v["message"], "")
	if err != nil {
		return nil, err
	}
	if len(r.held) > 0 {
		held := slices.Clone(r.held)
		sort.Strings(held)
		return nil, fmt.Errorf("%s with %s held down: type with nothing held, or press the chord with hotkey", fn, strings.Join(held, "+"))
	}
	return starlark.None, r.act(fn, step{fAction: hci.ActType, fText: text})
}

func (r *pyRun) sleep(fn string, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	v, err := unpack(fn, args, kw, "seconds")
	if err != nil {
		return nil, err
	}
	secs, ok := starlark.AsFloat(v["seconds"])
	if !ok || math.IsNaN(secs) || math.IsInf(secs, 0) {
		return nil, fmt.Errorf("%s: seconds must be a number, got %s", fn, v["seconds"].Type())
	}
	return starlark.None, r.act(fn, step{fAction: hci.ActWait, fDuration: secs})
}

func (r *pyRun) position(fn string, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	if _, err := unpack(fn, args, kw); err != nil {
		return nil, err
	}
	p, err := r.pointer()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	return starlark.Tuple{starlark.MakeInt(p[0]), starlark.MakeInt(p[1])}, nil
}

func (r *pyRun) size(fn string, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	if _, err := unpack(fn, args, kw); err != nil {
		return nil, err
	}
	sp := r.s.exec.Space()
	return starlark.Tuple{starlark.MakeInt(sp.ModelW), starlark.MakeInt(sp.ModelH)}, nil
}
