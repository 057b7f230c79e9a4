package mcpserver

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

func TestFindTools(t *testing.T) {
	r := newRig(t, rigConfig{w: 1280, h: 800, model: "auto", modes: []Mode{ModeTools}, noProbe: true})
	home := t.TempDir()
	srv, err := New(r.exec, r.shoot, r.capt, Config{Modes: []Mode{ModeTools, ModeCodeAct}, FindTools: true,
		Traits: Traits{Bash: &BashTrait{Dir: home}, Files: &FilesTrait{Home: home}}})
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
