package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// testTrait is a trait written outside this package's own three, the way a
// caller adds one: a type with a name, a check and its tools.
type testTrait struct {
	name     string
	checkErr error
	tools    []TraitTool
}

func (tr testTrait) Name() string       { return tr.name }
func (tr testTrait) Check() error       { return tr.checkErr }
func (tr testTrait) Tools() []TraitTool { return tr.tools }

// notes is the state behind the notes trait: text stored by key, so a test
// can see what a call changed apart from what the call answered.
type notes struct {
	mu sync.Mutex
	m  map[string]string
}

func (n *notes) get(k string) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	v, ok := n.m[k]
	return v, ok
}

// notesTrait keeps notes by key: note_put (a string, a string and an
// optional boolean) and note_get (a string, and an optional integer).
func notesTrait(n *notes) testTrait {
	return testTrait{name: "notes", tools: []TraitTool{
		{
			Name: "note_put", Title: "Keep a note", Idempotent: true,
			Description: "Keep a note under a key; an existing note is kept unless overwrite is true.",
			Params: []TraitParam{
				{Name: "key", Type: ParamString, Required: true, Description: "The note's key."},
				{Name: "text", Type: ParamString, Required: true, Description: "The note."},
				{Name: "overwrite", Type: ParamBoolean, Description: "Replace a note already kept."},
			},
			Returns: "-> int (notes kept)",
			Run: func(_ context.Context, a TraitArgs) (TraitResult, error) {
				n.mu.Lock()
				defer n.mu.Unlock()
				k := a.Str("key")
				if _, ok := n.m[k]; ok && !a.Bool("overwrite") {
					return TraitResult{}, fmt.Errorf("note_put: a note %q is kept already; pass overwrite=true to replace it", k)
				}
				n.m[k] = a.Str("text")
				return TraitResult{Value: int64(len(n.m)), Text: fmt.Sprintf("kept %d bytes under %s", len(a.Str("text")), k)}, nil
			},
		},
		{
			Name: "note_get", Title: "Read a note", ReadOnly: true, Idempotent: true,
			Description: "Read the note kept under a key, at most max_bytes of it.",
			Params: []TraitParam{
				{Name: "key", Type: ParamString, Required: true, Description: "The note's key."},
				{Name: "max_bytes", Type: ParamInteger, Description: "Cut the note to this many bytes."},
			},
			Returns: "-> str",
			Run: func(_ context.Context, a TraitArgs) (TraitResult, error) {
				v, ok := n.get(a.Str("key"))
				if !ok {
					return TraitResult{}, fmt.Errorf("note_get: no note %q", a.Str("key"))
				}
				if m, ok := a.Int("max_bytes"); ok && int(m) < len(v) {
					v = v[:m]
				}
				return TraitResult{Value: v, Text: v}, nil
			},
		},
	}}
}

// TestTraitOfOurOwn: a trait defined here, one type and two tools, is
// listed with its schema, called over every MCP transport with a real
// client, found by find_tools and bound in run_script, and its arguments
// are checked against its parameters on both faces before it runs.
func TestTraitOfOurOwn(t *testing.T) {
	r := newRig(t, rigConfig{w: 1024, h: 768, model: "auto", noProbe: true})
	n := &notes{m: map[string]string{}}
	srv, err := New(r.exec, r.shoot, r.capt, Config{Modes: []Mode{ModeComputer, ModeCodeAct}, FindTools: true,
		Traits: []Trait{notesTrait(n)}})
	if err != nil {
		t.Fatal(err)
	}
	r.srv = srv
	for _, kind := range transports {
		t.Run(kind, func(t *testing.T) {
			n.mu.Lock()
			clear(n.m)
			n.mu.Unlock()
			c := r.connect(t, kind)

			list, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tl := range list.Tools {
				names = append(names, tl.Name)
				if tl.Name != "note_put" {
					continue
				}
				if !slices.Equal(tl.InputSchema.Required, []string{"key", "text"}) {
					t.Errorf("note_put requires %v, want key and text", tl.InputSchema.Required)
				}
				schema, _ := json.Marshal(tl.InputSchema.Properties)
				if !strings.Contains(string(schema), `"overwrite":{"description":"Replace a note already kept.","type":"boolean"}`) {
					t.Errorf("note_put's schema: %s", schema)
				}
				if tl.Annotations.ReadOnlyHint == nil || *tl.Annotations.ReadOnlyHint {
					t.Errorf("note_put is marked read-only: %+v", tl.Annotations)
				}
			}
			// mcp-go lists tools by name.
			if want := []string{"computer", "find_tools", "note_get", "note_put", "run_script"}; !slices.Equal(names, want) {
				t.Errorf("tools/list: %v, want %v", names, want)
			}

			res := call(t, c, "note_put", map[string]any{"key": "a", "text": "héllo"})
			if res.IsError || resultText(res) != "kept 6 bytes under a" {
				t.Errorf("note_put: %q (error %v)", resultText(res), res.IsError)
			}
			if v, _ := n.get("a"); v != "héllo" {
				t.Errorf("after note_put the trait holds %q, want héllo", v)
			}
			res = call(t, c, "note_get", map[string]any{"key": "a", "max_bytes": 3})
			if res.IsError || resultText(res) != "hé" {
				t.Errorf("note_get: %q (error %v), want hé", resultText(res), res.IsError)
			}

			// Refused before Run: the note stays as it was.
			for _, bad := range []struct {
				tool string
				args map[string]any
				want string
			}{
				{"note_put", map[string]any{"key": "a", "text": 5, "overwrite": true}, `"text" must be a string`},
				{"note_put", map[string]any{"key": "a", "text": "x", "overwrite": "yes"}, `"overwrite" must be a boolean`},
				{"note_put", map[string]any{"key": "a", "txt": "x"}, `unknown argument "txt"; it takes key, text, overwrite`},
				{"note_put", map[string]any{"key": "a"}, `missing "text" (The note.)`},
				{"note_get", map[string]any{"key": "a", "max_bytes": 1.5}, `"max_bytes" must be an integer`},
				{"note_put", map[string]any{"key": "a", "text": "again"}, "pass overwrite=true"},
			} {
				res := call(t, c, bad.tool, bad.args)
				if !res.IsError || !strings.Contains(resultText(res), bad.want) {
					t.Errorf("%s %v: %q (error %v), want an error with %q", bad.tool, bad.args, resultText(res), res.IsError, bad.want)
				}
			}
			if v, _ := n.get("a"); v != "héllo" {
				t.Errorf("refused calls changed the note to %q", v)
			}

			res = call(t, c, "find_tools", map[string]any{"query": "note"})
			if txt := resultText(res); res.IsError || !strings.Contains(txt, `"name": "note_put"`) || !strings.Contains(txt, `"name": "note_get"`) {
				t.Errorf("find_tools note: %s", txt)
			}

			script := `print(note_put("b", text="from a script"))
print(note_get("b"))
print(note_put("b", "replaced", True))
print(note_get(key="b", max_bytes=3))
note_get("b", "three")`
			res = call(t, c, "run_script", map[string]any{"script": script})
			want := "2\nfrom a script\n2\nrep\n"
			if txt := resultText(res); !res.IsError || !strings.Contains(txt, want) || !strings.Contains(txt, "note_get(key, max_bytes=None): max_bytes must be an integer, got string") {
				t.Errorf("run_script: %q (error %v), want output %q then a type error", txt, res.IsError, want)
			}
			if v, _ := n.get("b"); v != "replaced" {
				t.Errorf("after the script the trait holds %q, want replaced", v)
			}
		})
	}
	var desc string
	for _, tl := range srv.Tools() {
		if tl.Name == "run_script" {
			desc = tl.Description
		}
	}
	for _, sig := range []string{"note_put(key, text, overwrite=None) -> int (notes kept): Keep a note", "note_get(key, max_bytes=None) -> str"} {
		if !strings.Contains(desc, sig) {
			t.Errorf("run_script's description lacks %s:\n%s", sig, desc)
		}
	}
}

// TestTraitsRefused: New refuses a trait list that would shadow, repeat or
// could not call a tool, naming the trait and the tool.
func TestTraitsRefused(t *testing.T) {
	r := newRig(t, rigConfig{w: 640, h: 480, model: "off", noProbe: true})
	run := func(context.Context, TraitArgs) (TraitResult, error) { return TraitResult{}, nil }
	one := func(trait, tool string, ps ...TraitParam) testTrait {
		return testTrait{name: trait, tools: []TraitTool{{Name: tool, Params: ps, Run: run}}}
	}
	str := func(name string) TraitParam { return TraitParam{Name: name, Type: ParamString} }
	tests := []struct {
		name   string
		traits []Trait
		want   string
	}{
		{"nil", []Trait{nil}, "trait 1 of 1 is nil"},
		{"a trait twice", []Trait{one("notes", "a"), one("notes", "b")}, "the notes trait is listed twice"},
		{"bash twice", []Trait{BashTrait{}, BashTrait{}}, "the bash trait is listed twice"},
		{"a tool twice", []Trait{one("x", "note"), one("y", "note")}, "the y trait's tool note: the x trait has a tool of that name"},
		{"a tool of bash's", []Trait{BashTrait{}, one("mine", "bash")}, "the mine trait's tool bash: the bash trait has a tool of that name"},
		{"an action's name", []Trait{one("mine", "left_click")}, "left_click: the server has a tool of that name"},
		{"the computer tool", []Trait{one("mine", "computer")}, "computer: the server has a tool of that name"},
		{"a script builtin", []Trait{one("mine", "show")}, "show: the server has a tool of that name"},
		{"a Starlark builtin", []Trait{one("mine", "len")}, "len: the server has a tool of that name"},
		{"OpenEnv's reset", []Trait{one("mine", "reset")}, "reset: the name is reserved by OpenEnv"},
		{"not an identifier", []Trait{one("mine", "my-tool")}, `tool "my-tool": a tool name is letters, digits and _`},
		{"bad trait name", []Trait{one("my trait", "t")}, `trait name "my trait"`},
		{"no run", []Trait{testTrait{name: "mine", tools: []TraitTool{{Name: "t"}}}}, "the mine trait's tool \"t\": it has no Run"},
		{"param twice", []Trait{one("mine", "t", str("a"), str("a"))}, "parameter a is given twice"},
		{"param type", []Trait{one("mine", "t", TraitParam{Name: "n", Type: "number"})}, `parameter n: type "number": use string, integer or boolean`},
		{"param name", []Trait{one("mine", "t", str("a b"))}, `parameter "a b"`},
		{"its check", []Trait{testTrait{name: "mine", checkErr: errors.New("mine: not ready")}}, "mine: not ready"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(r.exec, r.shoot, r.capt, Config{Modes: []Mode{ModeCodeAct}, Traits: tc.traits})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v, want an error with %q", err, tc.want)
			}
		})
	}
	// The same tools in one list, each once, are fine.
	if _, err := New(r.exec, r.shoot, r.capt, Config{Traits: []Trait{one("x", "a"), one("y", "b")}}); err != nil {
		t.Errorf("two traits with distinct tools: %v", err)
	}
}
