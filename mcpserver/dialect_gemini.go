package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/internal/wire"
)

// Gemini's computer-use functions (the 13 predefined functions of Gemini's
// computer-use tool, named and handled as in google-gemini/computer-use-preview's
// agent.py and computers/playwright/playwright.py, read 2026-11-26), one MCP
// tool each. Points are cells of a 1000 x 1000 grid over the screenshot
// (0..999 each way), turned into model pixels by hci.Space.FromGrid, the one
// conversion. The browser verbs are done with the keyboard, as a person
// would (ctrl+l, the URL, Return; alt+Left; alt+Right), so they are recorded
// as the key and type actions that carried them out.

// geminiGrid is the size of Gemini's grid.
const geminiGrid = hci.GeminiGrid

// geminiSearchURL is where search goes, as in the reference implementation.
const geminiSearchURL = "https://www.google.com/"

// geminiMagnitude is scroll_at's distance when none is given, in grid units
// along the scroll's axis (the reference's 800).
const geminiMagnitude = 800

// maxURLBytes bounds navigate's URL.
const maxURLBytes = 8 << 10

type geminiKind int

const (
	gGrid geminiKind = iota // an integer cell of the grid, 0..999
	gInt                    // an integer
	gString
	gBool
	gDirection // up, down, left or right
)

type geminiParam struct {
	name     string
	kind     geminiKind
	required bool
	desc     string
}

// geminiArgs are a call's arguments, checked: grid cells and integers as
// int, strings, booleans.
type geminiArgs map[string]any

func (a geminiArgs) str(k string) string { s, _ := a[k].(string); return s }
func (a geminiArgs) num(k string) int    { n, _ := a[k].(int); return n }
func (a geminiArgs) flag(k string, def bool) bool {
	if b, ok := a[k].(bool); ok {
		return b
	}
	return def
}

type geminiFunc struct {
	name, title, desc string
	params            []geminiParam
	readOnly          bool
	steps             func(sp hci.Space, a geminiArgs) ([]step, error)
}

// geminiSafety is the argument a function call carries when the model asks
// for a person's confirmation: the host's business (it asks, or refuses);
// accepted and ignored here, so a host can forward the arguments as they are.
const geminiSafety = "safety_decision"

func geminiFuncs() []geminiFunc {
	gx := geminiParam{"x", gGrid, true, "x on the 0..999 grid over the screenshot (0 left, 999 right)."}
	gy := geminiParam{"y", gGrid, true, "y on the 0..999 grid over the screenshot (0 top, 999 bottom)."}
	gDir := geminiParam{"direction", gDirection, true, "up, down, left or right."}
	keys := func(k string) func(hci.Space, geminiArgs) ([]step, error) {
		return func(hci.Space, geminiArgs) ([]step, error) { return []step{{fAction: hci.ActKey, fText: k}}, nil }
	}
	return []geminiFunc{
		{name: "open_web_browser", title: "Open the web browser", readOnly: true,
			desc:  "Show the browser: answers with the screen as it is (the desktop's browser is already open where the task has one).",
			steps: func(hci.Space, geminiArgs) ([]step, error) { return []step{{fAction: hci.ActScreenshot}}, nil }},
		{name: "wait_5_seconds", title: "Wait 5 seconds", readOnly: true, desc: "Wait 5 seconds, then look.",
			steps: func(hci.Space, geminiArgs) ([]step, error) {
				return []step{{fAction: hci.ActWait, fDuration: hci.GeminiWaitSeconds}}, nil
			}},
		{name: "go_back", title: "Go back", desc: "Go back a page in the browser (alt+Left).", steps: keys("alt+Left")},
		{name: "go_forward", title: "Go forward", desc: "Go forward a page in the browser (alt+Right).", steps: keys("alt+Right")},
		{name: "search", title: "Search", desc: "Open the search engine's home page in the browser (" + geminiSearchURL + ").",
			steps: func(hci.Space, geminiArgs) ([]step, error) { return navigate(geminiSearchURL) }},
		{name: "navigate", title: "Navigate", desc: "Go to a URL in the browser: focus the address bar, type it, press Return.",
			params: []geminiParam{{"url", gString, true, "The URL."}},
			steps:  func(_ hci.Space, a geminiArgs) ([]step, error) { return navigate(a.str("url")) }},
		{name: "click_at", title: "Click", desc: "Click at a point.", params: []geminiParam{gx, gy},
			steps: func(sp hci.Space, a geminiArgs) ([]step, error) { return geminiAt(sp, a, hci.ActLeftClick, "x", "y") }},
		{name: "hover_at", title: "Hover", desc: "Move the pointer to a point without clicking.", params: []geminiParam{gx, gy},
			steps: func(sp hci.Space, a geminiArgs) ([]step, error) { return geminiAt(sp, a, hci.ActMouseMove, "x", "y") }},
		{name: "type_text_at", title: "Type at", desc: "Click at a point, clear the field (ctrl+a, Delete) unless told not to, type the text, and press Return if told to.",
			params: []geminiParam{gx, gy, {"text", gString, true, "The text to type."},
				{"press_enter", gBool, false, "Press Return after typing (default false)."},
				{"clear_before_typing", gBool, false, "Select all and delete first (default true)."}},
			steps: geminiTypeAt},
		{name: "key_combination", title: "Press keys", desc: "Press keys together, such as Control+C or Enter.",
			params: []geminiParam{{"keys", gString, true, "Key names joined by +: Control+A, Shift+Tab, Enter."}},
			steps:  geminiKeys},
		{name: "scroll_document", title: "Scroll the page", desc: "Scroll the whole page: up and down a page at a time (Page_Up, Page_Down), left and right by half the screen's width with the wheel.",
			params: []geminiParam{gDir}, steps: geminiScrollDocument},
		{name: "scroll_at", title: "Scroll at", desc: "Scroll at a point by a distance in grid units along the scroll's axis (default 800).",
			params: []geminiParam{gx, gy, gDir, {"magnitude", gInt, false, "How far, in grid units (0..999; default 800)."}},
			steps:  geminiScrollAt},
		{name: "drag_and_drop", title: "Drag and drop", desc: "Press at a point, move to a destination and release there.",
			params: []geminiParam{gx, gy, {"destination_x", gGrid, true, "The destination's x on the grid."}, {"destination_y", gGrid, true, "The destination's y on the grid."}},
			steps:  geminiDrag},
	}
}

// gridPoint converts the grid cell in fields kx, ky to model pixels.
func gridPoint(sp hci.Space, a geminiArgs, kx, ky string) ([]int, error) {
	x, y, err := sp.FromGrid(a.num(kx), a.num(ky), geminiGrid)
	if err != nil {
		return nil, err
	}
	return []int{x, y}, nil
}

func geminiAt(sp hci.Space, a geminiArgs, action, kx, ky string) ([]step, error) {
	p, err := gridPoint(sp, a, kx, ky)
	if err != nil {
		return nil, err
	}
	return []step{{fAction: action, fCoordinate: p}}, nil
}

// navigate goes to url as a person would: the address bar, the URL, Return.
func navigate(url string) ([]step, error) {
	switch {
	case strings.TrimSpace(url) == "":
		return nil, errors.New("navigate needs a url")
	case strings.ContainsAny(url, "\r\n\t"):
		return nil, errors.New("navigate: the url holds a newline or tab, which would press a key half way through")
	case len(url) > maxURLBytes:
		return nil, fmt.Errorf("navigate: the url is %d bytes, more than %d", len(url), maxURLBytes)
	}
	return []step{{fAction: hci.ActKey, fText: "ctrl+l"}, {fAction: hci.ActWait, fDuration: hci.GeminiAddressBarWait},
		{fAction: hci.ActType, fText: url}, {fAction: hci.ActKey, fText: "Return"}}, nil
}

func geminiTypeAt(sp hci.Space, a geminiArgs) ([]step, error) {
	steps, err := geminiAt(sp, a, hci.ActLeftClick, "x", "y")
	if err != nil {
		return nil, err
	}
	if a.flag("clear_before_typing", true) {
		steps = append(steps, step{fAction: hci.ActKey, fText: "ctrl+a"}, step{fAction: hci.ActKey, fText: "Delete"})
	}
	steps = append(steps, step{fAction: hci.ActType, fText: a.str("text")})
	if a.flag("press_enter", false) {
		steps = append(steps, step{fAction: hci.ActKey, fText: "Return"})
	}
	return steps, nil
}

func geminiKeys(_ hci.Space, a geminiArgs) ([]step, error) {
	k := a.str("keys")
	parts := strings.Split(k, "+")
	if strings.HasSuffix(k, "++") || k == "+" {
		// The plus key itself, last: "Control++".
		parts = append(strings.Split(strings.TrimSuffix(k, "++"), "+"), "+")
		if k == "+" {
			parts = []string{"+"}
		}
	}
	c, err := chord("", parts, true)
	if err != nil {
		return nil, err
	}
	return []step{{fAction: hci.ActKey, fText: c}}, nil
}

func geminiScrollDocument(sp hci.Space, a geminiArgs) ([]step, error) {
	switch d := a.str("direction"); d {
	case "up":
		return []step{{fAction: hci.ActKey, fText: "Page_Up"}}, nil
	case "down":
		return []step{{fAction: hci.ActKey, fText: "Page_Down"}}, nil
	default:
		return []step{{fAction: hci.ActScroll, fDirection: d, fAmount: notches(sp.ModelW / 2)}}, nil
	}
}

func geminiScrollAt(sp hci.Space, a geminiArgs) ([]step, error) {
	p, err := gridPoint(sp, a, "x", "y")
	if err != nil {
		return nil, err
	}
	m := geminiMagnitude
	if _, ok := a["magnitude"]; ok {
		m = a.num("magnitude")
	}
	if m < 0 || m > geminiGrid {
		return nil, fmt.Errorf("scroll_at: magnitude %d is off the grid: 0..%d", m, geminiGrid)
	}
	dir := a.str("direction")
	axis := sp.ModelH
	if dir == "left" || dir == "right" {
		axis = sp.ModelW
	}
	return []step{{fAction: hci.ActScroll, fCoordinate: p, fDirection: dir, fAmount: notches(m * axis / geminiGrid)}}, nil
}

func geminiDrag(sp hci.Space, a geminiArgs) ([]step, error) {
	from, err := gridPoint(sp, a, "x", "y")
	if err != nil {
		return nil, err
	}
	to, err := gridPoint(sp, a, "destination_x", "destination_y")
	if err != nil {
		return nil, err
	}
	return []step{{fAction: hci.ActLeftClickDrag, fStart: from, fCoordinate: to}}, nil
}

// geminiTools are the functions as MCP tools.
func (s *Server) geminiTools() []Tool {
	fns := geminiFuncs()
	tools := make([]Tool, 0, len(fns))
	for _, fn := range fns {
		props := map[string]any{}
		var req, order []string
		for _, p := range fn.params {
			props[p.name] = p.schema()
			order = append(order, p.name)
			if p.required {
				req = append(req, p.name)
			}
		}
		props[geminiSafety] = map[string]any{"type": "object", "description": "Gemini's safety decision, if the model sent one: the host confirms it; ignored here."}
		tools = append(tools, Tool{
			Name:  fn.name,
			Title: fn.title,
			Description: fmt.Sprintf("%s Gemini computer use; points are on a 1000 x 1000 grid over the %d x %d screenshot. Answers with a screenshot.",
				fn.desc, s.space.ModelW, s.space.ModelH),
			Schema:      mcp.ToolInputSchema{Type: "object", Properties: props, Required: req, AdditionalProperties: false, PropertyOrder: order},
			Annotations: annotations(fn.readOnly, !fn.readOnly, fn.readOnly),
			Handler:     s.geminiHandler(fn),
		})
	}
	return tools
}

func (p geminiParam) schema() map[string]any {
	switch p.kind {
	case gGrid:
		return map[string]any{"type": "integer", "minimum": 0, "maximum": geminiGrid - 1, "description": p.desc}
	case gInt:
		return map[string]any{"type": "integer", "description": p.desc}
	case gBool:
		return map[string]any{"type": "boolean", "description": p.desc}
	case gDirection:
		return map[string]any{"type": "string", "enum": []string{"up", "down", "left", "right"}, "description": p.desc}
	}
	return map[string]any{"type": "string", "description": p.desc}
}

func (s *Server) geminiHandler(fn geminiFunc) func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		raw, err := rawArguments(req)
		if err != nil {
			return toolError(fmt.Errorf("%s: %w", fn.name, err)), nil
		}
		args, err := fn.parse(raw)
		if err != nil {
			return toolError(fmt.Errorf("%s: %w", fn.name, err)), nil
		}
		steps, err := fn.steps(s.exec.Space(), args)
		if err != nil {
			return toolError(fmt.Errorf("%s: %w", fn.name, err)), nil
		}
		return s.runSteps(ctx, ModeGemini, fn.name, steps), nil
	}
}

// parse checks a call's arguments against the function's parameters.
func (fn geminiFunc) parse(raw json.RawMessage) (geminiArgs, error) {
	if err := wire.CheckJSON(raw); err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return nil, errors.New("the arguments must be a JSON object")
	}
	names := make([]string, len(fn.params))
	for i, p := range fn.params {
		names[i] = p.name
	}
	args := geminiArgs{}
	for k, v := range fields {
		i := slices.Index(names, k)
		if k == geminiSafety {
			continue
		}
		if i < 0 {
			return nil, fmt.Errorf("unknown argument %s; it takes %s", wire.Quote(k), takes(names))
		}
		val, err := fn.params[i].decode(v)
		if err != nil {
			return nil, err
		}
		if val != nil {
			args[k] = val
		}
	}
	for _, p := range fn.params {
		if _, ok := args[p.name]; p.required && !ok {
			return nil, fmt.Errorf("%s is required: %s", p.name, p.desc)
		}
	}
	return args, nil
}

// decode reads one argument; null is absent.
func (p geminiParam) decode(v json.RawMessage) (any, error) {
	var x any
	if err := json.Unmarshal(v, &x); err != nil {
		return nil, fmt.Errorf("%s: %w", p.name, err)
	}
	switch {
	case x == nil:
		return nil, nil
	case p.kind == gGrid || p.kind == gInt:
		return p.whole(x, v)
	case p.kind == gBool:
		if b, ok := x.(bool); ok {
			return b, nil
		}
		return nil, fmt.Errorf("%s must be true or false, got %s", p.name, truncateJSON(v))
	}
	str, ok := x.(string)
	if !ok {
		return nil, fmt.Errorf("%s must be a string, got %s", p.name, truncateJSON(v))
	}
	if p.kind == gDirection && !slices.Contains([]string{"up", "down", "left", "right"}, str) {
		return nil, fmt.Errorf("direction %s: use up, down, left or right", wire.Quote(str))
	}
	return str, nil
}

// whole reads a whole number. Function-call arguments travel as JSON
// numbers, 500 or 500.0: a whole number either way is an integer.
func (p geminiParam) whole(x any, v json.RawMessage) (any, error) {
	f, ok := x.(float64)
	if !ok || f != math.Trunc(f) || math.Abs(f) > math.MaxInt32 {
		return nil, fmt.Errorf("%s must be a whole number, got %s", p.name, truncateJSON(v))
	}
	if p.kind == gGrid && (f < 0 || f >= geminiGrid) {
		return nil, fmt.Errorf("%s is %g, off the grid: 0..%d", p.name, f, geminiGrid-1)
	}
	return int(f), nil
}

// takes lists the arguments a function takes, for an error.
func takes(names []string) string {
	if len(names) == 0 {
		return "no arguments"
	}
	sorted := slices.Clone(names)
	sort.Strings(sorted)
	return strings.Join(sorted, ", ")
}
