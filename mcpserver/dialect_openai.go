package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/internal/wire"
)

// OpenAI's computer-use tool: the action objects of a computer_call
// (openai-python's types/responses/computer_action.py, the Responses API's
// ComputerAction; OpenAI's computer-use guide, read 2026-11-26), one per call
// or a batch. Coordinates are pixels of the screenshot the model saw, the
// model space, as in the computer tool.

// openAITool is the tool's name: OpenAI's own tool type, since "computer" is
// the Anthropic-shaped tool's.
const openAITool = "computer_use_preview"

// openAIWait is how long OpenAI's wait, which has no duration, waits: the
// two seconds OpenAI's sample harnesses sleep.
const openAIWait = hci.OpenAIWaitSeconds

// openAIAction is one action object. Pointers tell a missing field from a
// zero.
type openAIAction struct {
	Type    string        `json:"type"`
	X       *int          `json:"x"`
	Y       *int          `json:"y"`
	Button  string        `json:"button"`
	Keys    []string      `json:"keys"`
	Path    []openAIPoint `json:"path"`
	ScrollX *int          `json:"scroll_x"`
	ScrollY *int          `json:"scroll_y"`
	Text    *string       `json:"text"`
}

type openAIPoint struct {
	X *int `json:"x"`
	Y *int `json:"y"`
}

// openAIFields are the fields each action type takes besides type.
var openAIFields = map[string][]string{
	"screenshot":   nil,
	"click":        {"x", "y", "button", "keys"},
	"double_click": {"x", "y", "button", "keys"},
	"drag":         {"path", "keys"},
	"keypress":     {"keys"},
	"move":         {"x", "y", "keys"},
	"scroll":       {"x", "y", "scroll_x", "scroll_y", "keys"},
	"type":         {"text"},
	"wait":         nil,
}

// openAIBatchMax bounds the actions of one batch.
const openAIBatchMax = 100

func (s *Server) openAISpec() Tool {
	w, h := s.space.ModelW, s.space.ModelH
	point := map[string]any{"type": "object", "properties": map[string]any{
		"x": map[string]any{"type": "integer", "minimum": 0, "maximum": w - 1},
		"y": map[string]any{"type": "integer", "minimum": 0, "maximum": h - 1},
	}, "required": []string{"x", "y"}, "additionalProperties": false}
	action := map[string]any{
		"type":        "object",
		"description": "One OpenAI computer-use action object.",
		"properties": map[string]any{
			"type":     map[string]any{"type": "string", "enum": slices.Sorted(mapsKeys(openAIFields))},
			"x":        map[string]any{"type": "integer", "minimum": 0, "maximum": w - 1},
			"y":        map[string]any{"type": "integer", "minimum": 0, "maximum": h - 1},
			"button":   map[string]any{"type": "string", "enum": []string{"left", "right", "wheel", "back", "forward"}},
			"keys":     map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
			"path":     map[string]any{"type": "array", "items": point, "minItems": 2},
			"scroll_x": map[string]any{"type": "integer"},
			"scroll_y": map[string]any{"type": "integer"},
			"text":     map[string]any{"type": "string"},
		},
		"required":             []string{"type"},
		"additionalProperties": false,
	}
	return Tool{
		Name:  openAITool,
		Title: "Computer (OpenAI computer use)",
		Description: fmt.Sprintf("Use a mouse and keyboard on a Linux desktop of %d x %d pixels, in OpenAI's computer-use actions: "+
			"click {x, y, button, keys}, double_click, drag {path: [{x, y}, ...]}, keypress {keys: [\"CTRL\", \"L\"]}, move, "+
			"scroll {x, y, scroll_x, scroll_y} (pixels), type {text}, wait, screenshot. Give one as action, or several as actions, "+
			"run in order. Coordinates are pixels of the screenshot, origin top-left. Answers with a screenshot taken once the screen has settled.", w, h),
		Schema: mcp.ToolInputSchema{
			Type:       "object",
			Properties: openAIProperties(action),
			// A computer_call item forwarded whole is accepted, its own
			// fields listed; anything else is an error.
			AdditionalProperties: false,
		},
		Annotations: annotations(false, true, false),
		Handler:     s.handleOpenAI,
	}
}

// openAIProperties are the tool's input: action or actions, and the
// fields of a computer_call item, which say nothing about what to do.
func openAIProperties(action map[string]any) map[string]any {
	props := map[string]any{
		"action": action,
		"actions": map[string]any{"type": "array", "items": action, "minItems": 1, "maxItems": openAIBatchMax,
			"description": "Several action objects, run in order; if one is invalid none runs."},
		"pending_safety_checks": map[string]any{"type": "array", "description": "Part of a computer_call item: the host acknowledges them; ignored here."},
	}
	for _, f := range []string{"type", "id", "call_id", "status"} {
		props[f] = map[string]any{"type": "string", "description": "Part of a computer_call item; ignored here."}
	}
	return props
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func (s *Server) handleOpenAI(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	raw, err := rawArguments(req)
	if err != nil {
		return toolError(fmt.Errorf("%s: %w", openAITool, err)), nil
	}
	steps, err := openAISteps(raw)
	if err != nil {
		return toolError(fmt.Errorf("%s: %w", openAITool, err)), nil
	}
	return s.runSteps(ctx, ModeOpenAI, openAITool, steps), nil
}

// openAIIgnored are the fields of a computer_call item that may come with
// its action(s) when a host forwards the item whole.
var openAIIgnored = []string{"type", "id", "call_id", "status", "pending_safety_checks"}

// openAISteps reads the tool's input, {"action": {...}} or
// {"actions": [...]}, into canonical steps.
func openAISteps(raw json.RawMessage) ([]step, error) {
	objs, err := openAIObjects(raw)
	if err != nil {
		return nil, err
	}
	var steps []step
	for i, o := range objs {
		st, err := openAIAction{}.parse(o)
		if err != nil {
			if len(objs) > 1 {
				return nil, fmt.Errorf("action %d of %d: %w; nothing was done", i+1, len(objs), err)
			}
			return nil, err
		}
		steps = append(steps, st...)
	}
	return steps, nil
}

// openAIObjects are the action objects of the tool's input, one or a batch.
func openAIObjects(raw json.RawMessage) ([]json.RawMessage, error) {
	// rawArguments checked the call's arguments already; checked here too
	// so that no caller can put invalid UTF-8 into an error message.
	if err := wire.CheckJSON(raw); err != nil {
		return nil, err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil || top == nil {
		return nil, errors.New(`the arguments must be a JSON object: {"action": {"type": "click", "x": 10, "y": 20}} or {"actions": [...]}`)
	}
	if err := openAITopFields(top); err != nil {
		return nil, err
	}
	one, hasOne := top["action"]
	many, hasMany := top["actions"]
	switch {
	case hasOne && hasMany:
		return nil, errors.New("give action or actions, not both")
	case hasOne:
		return []json.RawMessage{one}, nil
	case !hasMany:
		return nil, errors.New(`no action: give {"action": {"type": "screenshot"}} or {"actions": [...]}`)
	}
	var objs []json.RawMessage
	if err := json.Unmarshal(many, &objs); err != nil || len(objs) == 0 {
		return nil, errors.New("actions must be a non-empty list of action objects")
	}
	if len(objs) > openAIBatchMax {
		return nil, fmt.Errorf("%d actions in one batch; at most %d", len(objs), openAIBatchMax)
	}
	return objs, nil
}

// openAITopFields refuses fields beside action and actions other than a
// computer_call item's own.
func openAITopFields(top map[string]json.RawMessage) error {
	for k := range top {
		if k != "action" && k != "actions" && !slices.Contains(openAIIgnored, k) {
			return fmt.Errorf("unknown field %s: give action (one action object) or actions (a list of them)", wire.Quote(k))
		}
	}
	if t, ok := top["type"]; ok && !bytes.Equal(bytes.TrimSpace(t), []byte(`"computer_call"`)) {
		return errors.New(`the arguments are a computer_call item or {"action": ...}: put the action object under "action", not at the top`)
	}
	return nil
}

// parse reads one action object strictly and translates it.
func (openAIAction) parse(raw json.RawMessage) ([]step, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return nil, fmt.Errorf("an action must be a JSON object, got %s", truncateJSON(raw))
	}
	var a openAIAction
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, fieldTypeError(raw, err)
	}
	allowed, ok := openAIFields[a.Type]
	if !ok {
		return nil, fmt.Errorf("unknown action type %s: use one of %s", wire.Quote(a.Type), strings.Join(slices.Sorted(mapsKeys(openAIFields)), ", "))
	}
	var extra []string
	for k, v := range fields {
		if k != "type" && !slices.Contains(allowed, k) && !bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			extra = append(extra, k)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		takes := "only type"
		if len(allowed) > 0 {
			takes = strings.Join(allowed, ", ")
		}
		return nil, fmt.Errorf("%s does not take %s; it takes %s", a.Type, strings.Join(extra, ", "), takes)
	}
	return openAITranslate[a.Type](a)
}

// openAITranslate turns each action type into canonical steps.
var openAITranslate = map[string]func(openAIAction) ([]step, error){
	"screenshot": func(openAIAction) ([]step, error) { return []step{{fAction: hci.ActScreenshot}}, nil },
	"click":      openAIClick,
	"double_click": func(a openAIAction) ([]step, error) {
		if a.Button != "" && a.Button != "left" {
			return nil, fmt.Errorf("double_click with the %s button: only the left button double-clicks here", a.Button)
		}
		return a.pointer(hci.ActDoubleClick)
	},
	"drag":     openAIDrag,
	"keypress": openAIKeypress,
	"move": func(a openAIAction) ([]step, error) {
		if len(a.Keys) > 0 {
			return nil, errors.New("move with keys held: moving does not hold keys here; press them with keypress, or hold them on the click or drag")
		}
		return a.pointer(hci.ActMouseMove)
	},
	"scroll": openAIScroll,
	"type": func(a openAIAction) ([]step, error) {
		if a.Text == nil {
			return nil, errors.New("type needs text")
		}
		return []step{{fAction: hci.ActType, fText: *a.Text}}, nil
	},
	"wait": func(openAIAction) ([]step, error) { return []step{{fAction: hci.ActWait, fDuration: openAIWait}}, nil },
}

// openAIButtons are the click buttons that are clicks here. back and
// forward, a mouse's side buttons, are the browser's history keys instead
// (X's buttons 8 and 9 have no canonical action).
var openAIButtons = map[string]string{
	"": hci.ActLeftClick, "left": hci.ActLeftClick, "right": hci.ActRightClick, "wheel": hci.ActMiddleClick,
}

func openAIClick(a openAIAction) ([]step, error) {
	if name, ok := openAIButtons[a.Button]; ok {
		return a.pointer(name)
	}
	keys := map[string]string{"back": "alt+Left", "forward": "alt+Right"}[a.Button]
	if keys == "" {
		return nil, fmt.Errorf("click button %s: use left, right, wheel, back or forward", wire.Quote(a.Button))
	}
	if len(a.Keys) > 0 {
		return nil, fmt.Errorf("click with the %s button and keys held: the %s button is the browser's %s here and holds no keys", a.Button, a.Button, keys)
	}
	move, err := a.pointer(hci.ActMouseMove)
	if err != nil {
		return nil, err
	}
	return append(move, step{fAction: hci.ActKey, fText: keys}), nil
}

// pointer is an action at (x, y) with the keys held as modifiers.
func (a openAIAction) pointer(name string) ([]step, error) {
	if a.X == nil || a.Y == nil {
		return nil, fmt.Errorf("%s needs x and y", a.Type)
	}
	st := step{fAction: name, fCoordinate: []int{*a.X, *a.Y}}
	if err := a.modifiers(st); err != nil {
		return nil, err
	}
	return []step{st}, nil
}

// modifiers puts the keys an action holds into the step's modifiers.
func (a openAIAction) modifiers(st step) error {
	if len(a.Keys) == 0 {
		return nil
	}
	c, err := chord(a.Type, a.Keys, true)
	if err != nil {
		return err
	}
	st[fText] = c
	return nil
}

func openAIKeypress(a openAIAction) ([]step, error) {
	c, err := chord("keypress", a.Keys, true)
	if err != nil {
		return nil, err
	}
	return []step{{fAction: hci.ActKey, fText: c}}, nil
}

// openAIDrag is left_click_drag for a path of two points, and press, moves
// and release along a longer one.
func openAIDrag(a openAIAction) ([]step, error) {
	if len(a.Path) < 2 {
		return nil, fmt.Errorf("drag needs a path of at least two points, got %d", len(a.Path))
	}
	pts := make([][]int, len(a.Path))
	for i, p := range a.Path {
		if p.X == nil || p.Y == nil {
			return nil, fmt.Errorf("drag: point %d of the path needs x and y", i+1)
		}
		pts[i] = []int{*p.X, *p.Y}
	}
	if len(pts) == 2 {
		st := step{fAction: hci.ActLeftClickDrag, fStart: pts[0], fCoordinate: pts[1]}
		return []step{st}, a.modifiers(st)
	}
	if len(a.Keys) > 0 {
		return nil, fmt.Errorf("drag along %d points with keys held: keys are held on a two-point drag only here", len(pts))
	}
	steps := []step{{fAction: hci.ActLeftMouseDown, fCoordinate: pts[0]}}
	for _, p := range pts[1 : len(pts)-1] {
		steps = append(steps, step{fAction: hci.ActMouseMove, fCoordinate: p})
	}
	return append(steps, step{fAction: hci.ActLeftMouseUp, fCoordinate: pts[len(pts)-1]}), nil
}

// openAIScroll turns a scroll of pixels into wheel notches at (x, y):
// vertical first, then horizontal; no distance at all only moves there.
func openAIScroll(a openAIAction) ([]step, error) {
	if a.X == nil || a.Y == nil || a.ScrollX == nil || a.ScrollY == nil {
		return nil, errors.New("scroll needs x, y, scroll_x and scroll_y")
	}
	at := []int{*a.X, *a.Y}
	var steps []step
	add := func(px int, neg, pos string) {
		if px == 0 {
			return
		}
		dir := pos
		if px < 0 {
			dir = neg
		}
		steps = append(steps, step{fAction: hci.ActScroll, fCoordinate: at, fDirection: dir, fAmount: notches(px)})
	}
	add(*a.ScrollY, "up", "down")
	add(*a.ScrollX, "left", "right")
	if len(steps) == 0 {
		steps = append(steps, step{fAction: hci.ActScroll, fCoordinate: at, fDirection: "down", fAmount: 0})
	}
	for _, st := range steps {
		if err := a.modifiers(st); err != nil {
			return nil, err
		}
	}
	return steps, nil
}
