package mcpserver

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/deskenv/deskenv/hci"
)

// fuzzSpace is the scaled space the dialect targets translate into.
var fuzzSpace = hci.Space{ScreenW: 1920, ScreenH: 1200, ModelW: 1280, ModelH: 800}

// checkFuzzSteps holds a dialect's translation to what the computer tool
// would accept: every step is computer tool input that hci.ParseAction
// takes, and any point the step carries that validates is in model space.
func checkFuzzSteps(t *testing.T, steps []step) {
	t.Helper()
	for _, st := range steps {
		raw, err := json.Marshal(st)
		if err != nil {
			t.Fatalf("step %v does not encode: %v", st, err)
		}
		a, err := hci.ParseAction(raw)
		if err != nil {
			t.Fatalf("step %s is not computer tool input: %v", raw, err)
		}
		if a.Validate(fuzzSpace) == nil {
			for _, p := range [][]int{a.Coordinate, a.StartCoordinate} {
				if p != nil && !fuzzSpace.InModel(p[0], p[1]) {
					t.Fatalf("step %s validated with a point outside model space", raw)
				}
			}
		}
	}
}

// checkFuzzError holds an error to being short, readable and valid UTF-8.
func checkFuzzError(t *testing.T, err error) {
	t.Helper()
	if msg := err.Error(); len(msg) > 2000 || !utf8.ValidString(msg) {
		t.Fatalf("error is %d bytes or not UTF-8: %.200q", len(msg), msg)
	}
}

func FuzzDialectOpenAI(f *testing.F) {
	for _, tc := range openAICases() {
		b, _ := json.Marshal(tc.args)
		f.Add(string(b))
	}
	f.Add(`{"actions":[{"type":"drag","path":[{"x":1,"y":2},{"x":3}]}]}`)
	f.Add(`{"action":{"type":"keypress","keys":["CTRL","+"," ","\n"]}}`)
	f.Add(`{"action":{"type":"scroll","x":1,"y":1,"scroll_x":-2147483648,"scroll_y":2147483647}}`)
	f.Fuzz(func(t *testing.T, in string) {
		steps, err := openAISteps(json.RawMessage(in))
		if err != nil {
			checkFuzzError(t, err)
			return
		}
		if len(steps) == 0 {
			t.Fatalf("%q: no error and no steps", in)
		}
		checkFuzzSteps(t, steps)
	})
}

func FuzzDialectGemini(f *testing.F) {
	fns := geminiFuncs()
	for i, tc := range geminiCases() {
		b, _ := json.Marshal(tc.args)
		f.Add(uint8(i), string(b))
	}
	f.Add(uint8(9), `{"keys":"Control++"}`)
	f.Add(uint8(11), `{"x":999,"y":0,"direction":"left","magnitude":1000}`)
	f.Fuzz(func(t *testing.T, which uint8, in string) {
		fn := fns[int(which)%len(fns)]
		args, err := fn.parse(json.RawMessage(in))
		if err != nil {
			checkFuzzError(t, err)
			return
		}
		steps, err := fn.steps(fuzzSpace, args)
		if err != nil {
			checkFuzzError(t, err)
			return
		}
		checkFuzzSteps(t, steps)
	})
}

// importStatement is an import that survived stripImports.
var importStatement = regexp.MustCompile(`^\s*(import|from)\s`)

func FuzzPyAutoGUIImports(f *testing.F) {
	for _, tc := range pyautoguiCases() {
		f.Add(tc.args["code"].(string))
	}
	f.Add("import os")
	f.Add("  import pyautogui, time; import os")
	f.Add("import pyautogui;;import sys")
	f.Add("```\nimport time\n```")
	f.Fuzz(func(t *testing.T, code string) {
		out, err := stripImports(code)
		if err != nil {
			checkFuzzError(t, err)
			return
		}
		if got, want := strings.Count(out, "\n"), strings.Count(code, "\n"); got != want {
			t.Fatalf("%q became %q: %d lines, want %d (line numbers in errors must stay true)", code, out, got+1, want+1)
		}
		for _, line := range strings.Split(out, "\n") {
			if importStatement.MatchString(line) {
				t.Fatalf("%q became %q: an import statement is left", code, out)
			}
		}
	})
}
