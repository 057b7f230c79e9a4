package mcpserver

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/deskenv/deskenv/internal/xprobe"
)

func TestFindTools(t *testing.T) {
	r := newRig(t, rigConfig{w: 1280, h: 800, model: "auto", modes: []Mode{ModeTools}, noProbe: true})
	home := t.TempDir()
	srv, err := New(r.exec, r.shoot, r.capt, Config{Modes: []Mode{ModeTools, ModeCodeAct}, FindTools: true,
		Traits: []Trait{BashTrait{Dir: home}, FilesTrait{Home: home}}})
	if err != nil {
		t.Fatal(err)
	}
	r.srv = srv
	c := r.connect(t, "http")
	tests := []struct {
		query string
		first string   // the best match
		has   []string // must be among the matches
		none  bool
	}{
		{query: "double_click", first: "double_click"},
		{query: "scroll", first: "scroll"},
		{query: "keyboard text", first: "type", has: []string{"type"}},
		{query: "script", first: "run_script"},
		{query: "click", has: []string{"left_click", "right_click", "middle_click", "triple_click"}},
		{query: "zoom region", first: "zoom"},
		{query: "shell command", first: "bash"},
		{query: "file", has: []string{"read_file", "write_file", "list_files"}},
		{query: "list directory", first: "list_files"},
		{query: "clipboard", none: true}, // the trait is off here
		{query: "xyzzy", none: true},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			res := call(t, c, "find_tools", map[string]any{"query": tc.query})
			txt := resultText(res)
			if res.IsError {
				t.Fatal(txt)
			}
			if tc.none {
				if !strings.Contains(txt, "no tool matches") {
					t.Errorf("got %s, want no match", txt)
				}
				return
			}
			var list []mcp.Tool
			if err := json.Unmarshal([]byte(txt), &list); err != nil {
				t.Fatalf("not a JSON tool list: %v: %s", err, txt)
			}
			names := map[string]bool{}
			for _, tl := range list {
				names[tl.Name] = true
				if tl.Name == "find_tools" {
					t.Errorf("find_tools found itself")
				}
			}
			if tc.first != "" && (len(list) == 0 || list[0].Name != tc.first) {
				t.Errorf("first match %v, want %s", list, tc.first)
			}
			for _, h := range tc.has {
				if !names[h] {
					t.Errorf("%s not found", h)
				}
			}
			if len(list) > 0 && list[0].InputSchema.Type != "object" {
				t.Errorf("no full schema: %+v", list[0])
			}
		})
	}
	if res := call(t, c, "find_tools", map[string]any{}); !res.IsError {
		t.Errorf("no query: not an error")
	}
}

// TestDeferTools: with DeferTools, tools/list is short, find_tools still
// finds every tool with its schema, and a tool found that way runs through
// call_tool and acts.
func TestDeferTools(t *testing.T) {
	home := t.TempDir()
	r := newRig(t, rigConfig{w: 1280, h: 800, model: "auto", modes: []Mode{ModeTools, ModeCodeAct},
		findTools: true, deferTools: true, traits: []Trait{BashTrait{Dir: home}, FilesTrait{Home: home}}})
	for _, kind := range []string{"http", "stdio"} {
		t.Run(kind, func(t *testing.T) {
			c := r.connect(t, kind)
			list, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tl := range list.Tools {
				names = append(names, tl.Name)
			}
			slices.Sort(names)
			if strings.Join(names, ",") != "call_tool,find_tools,run_script,screenshot" {
				t.Fatalf("tools/list %v, want call_tool, find_tools, run_script and screenshot only", names)
			}
			res := call(t, c, "find_tools", map[string]any{"query": "left click"})
			var found []mcp.Tool
			if err := json.Unmarshal([]byte(resultText(res)), &found); err != nil || len(found) == 0 || found[0].Name != "left_click" {
				t.Fatalf("find_tools(left click): %v %s", err, resultText(res))
			}
			if _, ok := found[0].InputSchema.Properties["coordinate"]; !ok {
				t.Errorf("left_click's schema has no coordinate: %+v", found[0].InputSchema)
			}
			res = call(t, c, "find_tools", map[string]any{"query": "write file"})
			if !strings.Contains(resultText(res), `"write_file"`) {
				t.Errorf("find_tools(write file) misses the trait: %s", resultText(res))
			}
			if err := r.probe.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			r.probe.Take()
			if res := call(t, c, "call_tool", map[string]any{"name": "left_click",
				"arguments": map[string]any{"coordinate": []int{321, 123}, "screenshot": false}}); res.IsError {
				t.Fatalf("call_tool left_click: %s", resultText(res))
			}
			if err := r.probe.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			clicked := false
			for _, e := range r.probe.Take() {
				if e.Kind == xprobe.ButtonPress && e.X == 321 && e.Y == 123 {
					clicked = true
				}
			}
			if !clicked {
				t.Errorf("the unlisted left_click did not reach the X server")
			}
			for _, bad := range []struct {
				args map[string]any
				want string
			}{
				{map[string]any{"name": "fly"}, `there is no tool "fly"; the tools are screenshot, left_click`},
				{map[string]any{"name": "left_click", "arguments": []int{1}}, "must be a JSON object"},
				{map[string]any{"arguments": map[string]any{}}, `call_tool takes "name"`},
				{map[string]any{"name": "left_click", "arguments": map[string]any{"coordinate": []int{-1, 5}}}, "coordinate"},
				// As strict as a direct call: the arguments reach the tool as sent.
				{map[string]any{"name": "bash", "arguments": json.RawMessage(`{"command":"true","timeout":5.0}`)}, `"timeout" must be an integer`},
			} {
				res := call(t, c, "call_tool", bad.args)
				if !res.IsError || !strings.Contains(resultText(res), bad.want) {
					t.Errorf("call_tool %v: %q, want an error with %q", bad.args, resultText(res), bad.want)
				}
			}
		})
	}
}
