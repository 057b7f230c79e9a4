package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/deskenv/deskenv/hci"
)

// wireTool is a tool as a client decodes it from tools/list JSON, so the
// checks see exactly what went over the wire, not mcp-go's structs.
type wireTool struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	InputSchema struct {
		Type                 string                    `json:"type"`
		Properties           map[string]map[string]any `json:"properties"`
		Required             []string                  `json:"required"`
		AdditionalProperties *bool                     `json:"additionalProperties"`
	} `json:"inputSchema"`
	Annotations struct {
		ReadOnly    *bool `json:"readOnlyHint"`
		Destructive *bool `json:"destructiveHint"`
		Idempotent  *bool `json:"idempotentHint"`
		OpenWorld   *bool `json:"openWorldHint"`
	} `json:"annotations"`
}

func listWire(t *testing.T, r *rig, kind string) map[string]wireTool {
	t.Helper()
	c := r.connect(t, kind)
	res, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list over %s: %v", kind, err)
	}
	raw, err := json.Marshal(res.Tools)
	if err != nil {
		t.Fatal(err)
	}
	var tools []wireTool
	if err := json.Unmarshal(raw, &tools); err != nil {
		t.Fatal(err)
	}
	out := map[string]wireTool{}
	for _, tl := range tools {
		if _, dup := out[tl.Name]; dup {
			t.Errorf("tool %s listed twice", tl.Name)
		}
		out[tl.Name] = tl
	}
	return out
}

func names(m map[string]wireTool) []string {
	var n []string
	for k := range m {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}

// TestToolsList checks tools/list in each mode over each transport: the
// schemas are non-empty with their required fields and enums, the
// annotations are right, and the model space is in the descriptions.
func TestToolsList(t *testing.T) {
	// A 1920x1200 screen scales to a 1280x800 model space ("auto").
	home := t.TempDir()
	allTraits := []Trait{BashTrait{Dir: home}, FilesTrait{Home: home}, ClipboardTrait{nopClipboard{}}}
	traitTools := []string{"bash", "read_file", "write_file", "list_files", "clipboard_get", "clipboard_set"}
	tests := []struct {
		modes     []Mode
		findTools bool
		traits    []Trait
		want      []string
	}{
		{[]Mode{ModeComputer}, false, nil, []string{"computer"}},
		{[]Mode{ModeTools}, false, nil, hci.Actions()},
		{nil, false, nil, append([]string{"computer"}, hci.Actions()...)},
		{[]Mode{ModeCodeAct}, false, nil, []string{"run_script"}},
		{[]Mode{ModeCodeAct}, true, allTraits, []string{"run_script", "find_tools"}},
		{[]Mode{ModeComputer, ModeCodeAct}, true, allTraits, append([]string{"computer", "run_script", "find_tools"}, traitTools...)},
	}
	for _, tc := range tests {
		r := newRig(t, rigConfig{w: 1920, h: 1200, model: "auto", modes: tc.modes, noProbe: true, findTools: tc.findTools, traits: tc.traits})
		for _, kind := range transports {
			t.Run(fmt.Sprintf("%v/%s", tc.modes, kind), func(t *testing.T) {
				tools := listWire(t, r, kind)
				if got, want := names(tools), sorted(tc.want); !slices.Equal(got, want) {
					t.Fatalf("tools %v, want %v", got, want)
				}
				for _, reserved := range []string{"reset", "step", "state", "close"} {
					if _, ok := tools[reserved]; ok {
						t.Errorf("tool %q is reserved by OpenEnv", reserved)
					}
				}
				for name, tl := range tools {
					checkCommon(t, name, tl)
					switch {
					case name == "computer":
						checkComputer(t, tl)
					case slices.Contains(hci.Actions(), name):
						checkGranular(t, name, tl)
					default:
						checkOther(t, name, tl)
					}
				}
			})
		}
	}
}

func checkCommon(t *testing.T, name string, tl wireTool) {
	t.Helper()
	s := tl.InputSchema
	if s.Type != "object" {
		t.Errorf("%s: inputSchema.type %q, want object", name, s.Type)
	}
	if s.AdditionalProperties == nil || *s.AdditionalProperties {
		t.Errorf("%s: additionalProperties should be false (unknown fields are errors)", name)
	}
	for _, req := range s.Required {
		if _, ok := s.Properties[req]; !ok {
			t.Errorf("%s: required %q is not a property", name, req)
		}
	}
	for pname, p := range s.Properties {
		if p["type"] == nil || p["description"] == nil || p["description"] == "" {
			t.Errorf("%s.%s: every property needs a type and a description, got %v", name, pname, p)
		}
		if p["type"] == "array" {
			items, _ := p["items"].(map[string]any)
			if items["type"] != "integer" || p["minItems"] == nil || p["minItems"] != p["maxItems"] {
				t.Errorf("%s.%s: arrays are fixed-length integer tuples, got %v", name, pname, p)
			}
		}
	}
	// Tools that take or return screen coordinates say the model space.
	screen := name == "computer" || name == "run_script" || slices.Contains(hci.Actions(), name)
	if screen && (!strings.Contains(tl.Description, "1280") || !strings.Contains(tl.Description, "800")) {
		t.Errorf("%s: description does not give the 1280x800 screenshot size: %q", name, tl.Description)
	}
	if a := tl.Annotations; a.ReadOnly == nil || a.Destructive == nil || a.Idempotent == nil || a.OpenWorld == nil || *a.OpenWorld {
		t.Errorf("%s: annotations must all be set and openWorldHint false, got %+v", name, a)
	}
}

func checkComputer(t *testing.T, tl wireTool) {
	t.Helper()
	p := tl.InputSchema.Properties
	want := []string{"action", "coordinate", "duration", "key", "region", "scroll_amount", "scroll_direction", "start_coordinate", "text"}
	var got []string
	for k := range p {
		got = append(got, k)
	}
	if !slices.Equal(sorted(got), want) {
		t.Errorf("computer properties %v, want exactly computer_20251124's %v", sorted(got), want)
	}
	if !slices.Equal(tl.InputSchema.Required, []string{"action"}) {
		t.Errorf("computer required %v, want [action]", tl.InputSchema.Required)
	}
	var enum []string
	for _, v := range p["action"]["enum"].([]any) {
		enum = append(enum, v.(string))
	}
	if !slices.Equal(sorted(enum), sorted(hci.Actions())) || len(enum) != 17 {
		t.Errorf("computer action enum %v, want the 17 actions", enum)
	}
	if d := p["scroll_direction"]["enum"]; fmt.Sprint(d) != "[up down left right]" {
		t.Errorf("scroll_direction enum %v", d)
	}
	if items := p["coordinate"]["items"].(map[string]any); items["maximum"] != float64(1279) || items["minimum"] != float64(0) {
		t.Errorf("coordinate items bounds %v, want 0..1279 (the larger model dimension)", items)
	}
	if d := p["coordinate"]["description"].(string); !strings.Contains(d, "0..1279") || !strings.Contains(d, "0..799") {
		t.Errorf("coordinate description does not give both bounds: %q", d)
	}
	if a := tl.Annotations; *a.ReadOnly || !*a.Destructive {
		t.Errorf("computer annotations %+v: it can change the desktop", a)
	}
}

func checkGranular(t *testing.T, name string, tl wireTool) {
	t.Helper()
	var spec actionSpec
	for _, sp := range actionSpecs() {
		if sp.name == name {
			spec = sp
		}
	}
	if spec.name == "" {
		t.Fatalf("tool %s is not in actionSpecs", name)
	}
	readOnly := map[string]bool{"screenshot": true, "cursor_position": true, "zoom": true, "wait": true}[name]
	a := tl.Annotations
	if *a.ReadOnly != readOnly {
		t.Errorf("%s: readOnlyHint %v, want %v", name, *a.ReadOnly, readOnly)
	}
	if readOnly && (*a.Destructive || !*a.Idempotent) {
		t.Errorf("%s: a read-only tool is idempotent and not destructive, got %+v", name, a)
	}
	switch name {
	case "left_click", "right_click", "middle_click", "double_click", "triple_click", "left_click_drag", "type", "key", "hold_key", "left_mouse_down", "left_mouse_up":
		if !*a.Destructive || *a.Idempotent {
			t.Errorf("%s: want destructiveHint true, idempotentHint false, got %+v", name, a)
		}
	case "mouse_move":
		if *a.Destructive || !*a.Idempotent {
			t.Errorf("%s: moving the pointer is idempotent and not destructive, got %+v", name, a)
		}
	}
	s := tl.InputSchema
	var wantReq []string
	for _, f := range spec.fields {
		if f.required {
			wantReq = append(wantReq, f.name)
		}
	}
	if !slices.Equal(sorted(s.Required), sorted(wantReq)) {
		t.Errorf("%s: required %v, want %v", name, s.Required, wantReq)
	}
	if len(spec.fields) > 0 && len(s.Properties) == 0 {
		t.Errorf("%s: empty properties", name)
	}
	_, hasShot := s.Properties["screenshot"]
	if hasShot == readOnly {
		t.Errorf("%s: the screenshot switch belongs to mutating tools only (has it: %v)", name, hasShot)
	}
	if p, ok := s.Properties["scroll_direction"]; ok && fmt.Sprint(p["enum"]) != "[up down left right]" {
		t.Errorf("%s: scroll_direction enum %v", name, p["enum"])
	}
	if p, ok := s.Properties["scroll_amount"]; ok && (p["minimum"] != float64(0) || p["maximum"] != float64(hci.MaxScrollAmount)) {
		t.Errorf("%s: scroll_amount bounds %v..%v", name, p["minimum"], p["maximum"])
	}
	if p, ok := s.Properties["duration"]; ok && (p["minimum"] != float64(0) || p["maximum"] != hci.MaxDuration) {
		t.Errorf("%s: duration bounds %v..%v", name, p["minimum"], p["maximum"])
	}
}

// checkOther checks run_script, find_tools and the trait tools: their
// arguments and required fields, and whether they say they change things.
func checkOther(t *testing.T, name string, tl wireTool) {
	t.Helper()
	want := map[string]struct {
		props, required []string
		readOnly        bool
		destructive     bool
	}{
		"run_script":    {[]string{"script"}, []string{"script"}, false, true},
		"find_tools":    {[]string{"query"}, []string{"query"}, true, false},
		"bash":          {[]string{"command", "timeout"}, []string{"command"}, false, true},
		"read_file":     {[]string{"path"}, []string{"path"}, true, false},
		"write_file":    {[]string{"append", "path", "text"}, []string{"path", "text"}, false, true},
		"list_files":    {[]string{"path"}, nil, true, false},
		"clipboard_get": {nil, nil, true, false},
		"clipboard_set": {[]string{"text"}, []string{"text"}, false, false},
	}
	w, ok := want[name]
	if !ok {
		t.Fatalf("unexpected tool %s", name)
	}
	var props []string
	for k := range tl.InputSchema.Properties {
		props = append(props, k)
	}
	if !slices.Equal(sorted(props), w.props) || !slices.Equal(sorted(tl.InputSchema.Required), sorted(w.required)) {
		t.Errorf("%s: properties %v required %v, want %v and %v", name, sorted(props), tl.InputSchema.Required, w.props, w.required)
	}
	if a := tl.Annotations; *a.ReadOnly != w.readOnly || *a.Destructive != w.destructive {
		t.Errorf("%s: readOnly %v destructive %v, want %v and %v", name, *a.ReadOnly, *a.Destructive, w.readOnly, w.destructive)
	}
}

// nopClipboard stands in where only the tool list is looked at.
type nopClipboard struct{}

func (nopClipboard) ReadClipboard(context.Context) (string, error) { return "", nil }
func (nopClipboard) WriteClipboard(context.Context, string) error  { return nil }

// TestSpecsMatchHCI holds the granular tools' field table to hci's rules:
// the required fields with sample values make a valid action, every field a
// tool offers is one hci accepts for that action, and leaving out a field
// hci requires fails validation.
func TestSpecsMatchHCI(t *testing.T) {
	space, err := hci.NewSpace(1920, 1200, "auto")
	if err != nil {
		t.Fatal(err)
	}
	sample := map[string]any{
		fCoordinate: []int{10, 20}, fStart: []int{30, 40}, fRegion: []int{0, 0, 100, 50},
		fDirection: "down", fAmount: 2, fDuration: 0.5,
	}
	text := map[string]string{hci.ActType: "hello", hci.ActKey: "ctrl+a", hci.ActHoldKey: "shift"}
	for _, sp := range actionSpecs() {
		t.Run(sp.name, func(t *testing.T) {
			build := func(include func(field) bool) (hci.Action, error) {
				m := map[string]any{"action": sp.name}
				for _, f := range sp.fields {
					if !include(f) {
						continue
					}
					if f.name == fText {
						m[f.name] = text[sp.name]
						if m[f.name] == "" {
							m[f.name] = "shift" // modifiers of a click, drag or scroll
						}
					} else {
						m[f.name] = sample[f.name]
					}
				}
				raw, _ := json.Marshal(m)
				a, err := hci.ParseAction(raw)
				if err != nil {
					return a, err
				}
				return a, a.Validate(space)
			}
			if _, err := build(func(f field) bool { return f.required }); err != nil {
				t.Errorf("required fields only: %v", err)
			}
			if _, err := build(func(field) bool { return true }); err != nil {
				t.Errorf("every field the tool offers: %v", err)
			}
			for _, f := range sp.fields {
				if !f.required {
					continue
				}
				if _, err := build(func(g field) bool { return g.required && g.name != f.name }); err == nil && !clickCoordinate(sp.name, f.name) {
					t.Errorf("%s required here, but hci accepts the action without it: make it optional", f.name)
				}
			}
		})
	}
}

// clickCoordinate: the granular click tools require a coordinate hci leaves
// optional (see actionSpecs).
func clickCoordinate(action, f string) bool {
	switch action {
	case hci.ActLeftClick, hci.ActRightClick, hci.ActMiddleClick, hci.ActDoubleClick, hci.ActTripleClick:
		return f == fCoordinate
	}
	return false
}

// TestSpaceChanged: after the model space changes, the tools describe the new
// one and screenshots and coordinates follow it.
func TestSpaceChanged(t *testing.T) {
	r := newRig(t, rigConfig{w: 1920, h: 1200, model: "auto", noProbe: true})
	c := r.connect(t, "http")
	sp, err := hci.NewSpace(1920, 1200, "off")
	if err != nil {
		t.Fatal(err)
	}
	r.exec.SetSpace(sp)
	r.shoot.SetModelSize(sp.ModelW, sp.ModelH)
	if err := r.srv.SpaceChanged(); err != nil {
		t.Fatal(err)
	}
	res, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range res.Tools {
		if !strings.Contains(tl.Description, "1920") {
			t.Errorf("%s still describes the old space: %q", tl.Name, tl.Description)
		}
	}
	shot := call(t, c, "computer", map[string]any{"action": "screenshot"})
	if got := resultImages(t, shot); fmt.Sprint(got) != "[[1920 1200]]" {
		t.Errorf("screenshot %v after the change, want 1920x1200", got)
	}
	if res := call(t, c, "left_click", map[string]any{"coordinate": []int{1900, 1100}, "screenshot": false}); res.IsError {
		t.Errorf("a coordinate valid only in the new space was refused: %s", resultText(res))
	}
}
