package task

import (
	"encoding/json"
	"errors"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestLoadExamples(t *testing.T) {
	all, err := Load("../tasks")
	if err != nil {
		t.Fatal(err)
	}
	// The suite: a hundred tasks or more over at least eight applications,
	// each tagged with its applications and a difficulty, bounded in steps
	// and time, with a solution and a setup.
	apps := []string{"terminal", "editor", "files", "calculator", "pdf", "browser", "calc", "writer"}
	seen := map[string]int{}
	for _, tk := range all {
		if len(tk.Solution) == 0 {
			t.Errorf("%s: no solution", tk.Path)
		}
		if len(tk.Setup) == 0 {
			t.Errorf("%s: no setup", tk.Path)
		}
		if !strings.HasSuffix(tk.Path, tk.ID+".json") {
			t.Errorf("%s: id %q does not match the file name", tk.Path, tk.ID)
		}
		if tk.MaxSteps == 0 || tk.Timeout == 0 {
			t.Errorf("%s: no max_steps or timeout", tk.Path)
		}
		var app, level bool
		for _, tag := range tk.Tags {
			if slices.Contains(apps, tag) {
				app = true
				seen[tag]++
			}
			level = level || tag == "easy" || tag == "medium" || tag == "hard"
		}
		if !app || !level {
			t.Errorf("%s: tags %v: want an application (%s) and a difficulty (easy, medium, hard)", tk.Path, tk.Tags, strings.Join(apps, ", "))
		}
	}
	if len(all) < 100 {
		t.Errorf("the suite has %d tasks, want at least 100", len(all))
	}
	for _, a := range apps {
		if seen[a] == 0 {
			t.Errorf("no task for the application %q", a)
		}
	}

	// The six examples at the top are the ones the control tests replay
	// with a keyboard-only agent.
	ex := exampleTasks(t)
	if len(ex) < 4 || len(ex) > 6 {
		t.Fatalf("the example set has %d tasks, want 4 to 6", len(ex))
	}
	for _, tk := range ex {
		for i, raw := range tk.Solution {
			var a struct {
				Action string `json:"action"`
			}
			if err := json.Unmarshal(raw, &a); err != nil {
				t.Errorf("%s: solution[%d]: %v", tk.Path, i, err)
			}
			switch a.Action {
			case "type", "key", "wait":
			default:
				t.Errorf("%s: solution[%d]: action %q is not keyboard-only", tk.Path, i, a.Action)
			}
		}
	}
}

// exampleTasks are the example tasks: the files at the top of tasks/, not
// the suite in its subdirectories.
func exampleTasks(t *testing.T) []*Task {
	t.Helper()
	all, err := Load("../tasks")
	if err != nil {
		t.Fatal(err)
	}
	var ex []*Task
	for _, tk := range all {
		if filepath.Dir(tk.Path) == filepath.Join("..", "tasks") {
			ex = append(ex, tk)
		}
	}
	return ex
}

// TestRoundTrip checks that json.Marshal of a Task gives a file Parse reads
// back to the same Task.
func TestRoundTrip(t *testing.T) {
	tasks, err := Load("../tasks")
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range tasks {
		data, err := json.MarshalIndent(tk, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		back, err := Parse(data, tk.Path)
		if err != nil {
			t.Fatalf("%s: re-parse of its JSON: %v\n%s", tk.ID, err, data)
		}
		a, _ := json.Marshal(tk)
		b, _ := json.Marshal(back)
		if string(a) != string(b) {
			t.Errorf("%s: round trip changed the task:\n%s\n%s", tk.ID, a, b)
		}
	}
}

const okEvaluator = `"evaluator": {"type": "file_exists", "path": "~/x"}`

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		file string
		want []string // substrings of the error, in order
	}{
		{"bad JSON", "{\n  \"id\": \"a\",\n  \"instruction\": \"do\" \n  \"evaluator\": {}\n}", []string{"t.json:4:3:", "invalid JSON", "after object key:value pair"}},
		{"bad literal", "{\"id\": tru, \"instruction\": \"do\"}", []string{"t.json:1:11:", "invalid character ','"}},
		{"truncated", `{"id": "a", "instruction": "do"`, []string{"t.json:1:", "ends in the middle"}},
		{"trailing data", `{"id": "a", "instruction": "do", ` + okEvaluator + `} {}`, []string{"t.json:1:", "unexpected data after the task object"}},
		{"not an object", `[1, 2]`, []string{"t.json:1:1:", "must be a task, got an array"}},
		{"unknown top-level field", "{\"id\": \"a\", \"instruction\": \"do\", " + okEvaluator + ",\n \"intsruction\": 1}", []string{"t.json:2:2: intsruction: unknown field in a task", `did you mean "instruction"?`, "allowed fields are id, instruction"}},
		{"unknown nested field", `{"id": "a", "instruction": "do", "evaluator": {"type": "and", "checks": [{"type": "file_exists", "path": "~/x"}, {"type": "file_contains", "pth": "~/y", "contains": "z"}]}}`,
			[]string{"evaluator.checks[1].pth: unknown field in a check", `did you mean "path"?`}},
		{"field of another type", `{"id": "a", "instruction": "do", "evaluator": {"type": "file_contains", "path": "~/x", "contains": "z", "matches": "y"}}`,
			[]string{`evaluator.matches: not used by "file_contains" checks (they use path, contains, ignore_case)`}},
		{"missing id", `{"instruction": "do", ` + okEvaluator + `}`, []string{"t.json:1:1: id: required"}},
		{"empty id", `{"id": "", "instruction": "do", ` + okEvaluator + `}`, []string{"id: must not be empty"}},
		{"bad id", `{"id": "a b", "instruction": "do", ` + okEvaluator + `}`, []string{`id: "a b" may contain only`}},
		{"wrong type", `{"id": 7, "instruction": "do", ` + okEvaluator + `}`, []string{"t.json:1:8: id: must be a string, got a number"}},
		{"missing instruction and evaluator", `{"id": "a"}`, []string{"instruction: required", "evaluator: required"}},
		{"duplicate field", `{"id": "a", "id": "b", "instruction": "do", ` + okEvaluator + `}`, []string{"t.json:1:13: id: given twice"}},
		{"bad step type", `{"id": "a", "instruction": "do", "setup": [{"type": "command", "command": "true"}, {"type": "lanch", "argv": ["xterm"]}], ` + okEvaluator + `}`,
			[]string{`setup[1].type: unknown step type "lanch" (did you mean "launch"?); step types are launch, command, write_file, open, wait_window, sleep`}},
		{"step missing type", `{"id": "a", "instruction": "do", "setup": [{"command": "true"}], ` + okEvaluator + `}`, []string{"setup[0].type: required: one of launch"}},
		{"launch with both", `{"id": "a", "instruction": "do", "setup": [{"type": "launch", "argv": ["x"], "command": "x"}], ` + okEvaluator + `}`,
			[]string{`setup[0].command: give either "argv" or "command", not both`}},
		{"wait_window without title", `{"id": "a", "instruction": "do", "setup": [{"type": "wait_window", "timeout": "5s"}], ` + okEvaluator + `}`,
			[]string{`setup[0].contains: required: give "contains" or "matches"`}},
		{"bad duration", `{"id": "a", "instruction": "do", "setup": [{"type": "sleep", "duration": "5 seconds"}], ` + okEvaluator + `}`,
			[]string{`setup[0].duration: "5 seconds" is not a duration`}},
		{"zero timeout", `{"id": "a", "instruction": "do", "setup": [{"type": "command", "command": "true", "timeout": 0}], ` + okEvaluator + `}`,
			[]string{`setup[0].timeout: must be more than 0`}},
		{"bad mode", `{"id": "a", "instruction": "do", "setup": [{"type": "write_file", "path": "~/x", "mode": "rwx"}], ` + okEvaluator + `}`,
			[]string{`setup[0].mode: "rwx" is not a file mode`}},
		{"bad regexp", "{\"id\": \"a\", \"instruction\": \"do\",\n\"evaluator\": {\"type\": \"file_matches\", \"path\": \"~/x\", \"matches\": \"(unclosed\"}}",
			[]string{"t.json:2:65: evaluator.matches: invalid regular expression (Go RE2 syntax): missing closing )"}},
		{"unknown check type", `{"id": "a", "instruction": "do", "evaluator": {"type": "file_exist", "path": "~/x"}}`,
			[]string{`evaluator.type: unknown check type "file_exist" (did you mean "file_exists"?)`}},
		{"missing path", `{"id": "a", "instruction": "do", "evaluator": {"type": "or", "checks": [{"type": "file_contains", "contains": "x"}]}}`,
			[]string{`evaluator.checks[0].path: required`}},
		{"not with two", `{"id": "a", "instruction": "do", "evaluator": {"type": "not", "checks": [` + `{"type": "file_exists", "path": "~/x"}, {"type": "file_exists", "path": "~/y"}]}}`,
			[]string{`evaluator.checks: "not" takes exactly one check, got 2`}},
		{"empty and", `{"id": "a", "instruction": "do", "evaluator": {"type": "and", "checks": []}}`, []string{"evaluator.checks: must hold at least one check"}},
		{"bad exit code", `{"id": "a", "instruction": "do", "evaluator": {"type": "command", "command": "true", "exit_code": 300}}`, []string{"evaluator.exit_code: must be an exit status between 0 and 255"}},
		{"negative weight", `{"id": "a", "instruction": "do", "evaluator": {"type": "and", "partial": true, "checks": [{"type": "file_exists", "path": "~/x", "weight": -1}]}}`,
			[]string{"evaluator.checks[0].weight: must not be negative"}},
		{"bad selection", `{"id": "a", "instruction": "do", "evaluator": {"type": "clipboard_contains", "contains": "x", "selection": "secondary"}}`, []string{`evaluator.selection: must be "clipboard" or "primary"`}},
		{"missing reference", `{"id": "a", "instruction": "do", "evaluator": {"type": "screen_region", "region": [0, 0, 2, 2], "reference": "nope.png"}}`,
			[]string{"evaluator.reference: reference image", "nope.png does not exist (the path is relative to the task file)"}},
		{"region size", `{"id": "a", "instruction": "do", "evaluator": {"type": "screen_region", "region": [0, 0, 3, 2], "reference": "ref.png"}}`,
			[]string{"evaluator.region: is 3x2 but the reference image is 2x2"}},
		{"region shape", `{"id": "a", "instruction": "do", "evaluator": {"type": "screen_region", "region": [0, 0, 2], "reference": "ref.png"}}`,
			[]string{"evaluator.region: must be [x, y, width, height] in screen pixels, got 3 numbers"}},
		{"solution not actions", `{"id": "a", "instruction": "do", ` + okEvaluator + `, "solution": [{"action": "key", "text": "a"}, {"text": "b"}, 3]}`,
			[]string{"solution[1].action: required", "solution[2]: must be a computer tool action object"}},
		{"several problems", `{"id": "a", "instruction": "", "max_steps": -1, ` + okEvaluator + `}`, []string{"instruction: must not be empty", "max_steps: must be between 0"}},
	}
	dir := t.TempDir()
	writeRefPNG(t, filepath.Join(dir, "ref.png"), 2, 2, color.NRGBA{1, 2, 3, 255})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.file), filepath.Join(dir, "t.json"))
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, filepath.Join(dir, "t.json")) {
				t.Errorf("error does not start with the file name: %s", msg)
			}
			rest := msg
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("error lacks %q (in order):\n%s", w, msg)
				}
				rest = rest[i+len(w):]
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Errorf("error is not a *FieldError: %T", err)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	good := func(id string) string {
		return `{"id": "` + id + `", "instruction": "do", ` + okEvaluator + `}`
	}
	tests := []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{"duplicate ids", map[string]string{"a.json": good("same"), "sub/b.json": "\n" + good("same")},
			[]string{"sub/b.json:2:8: id: \"same\" is already the id of ", "a.json; ids must be unique"}},
		{"errors in two files", map[string]string{"a.json": `{"id": "a"`, "b.json": good("b"), "c.json": `{"id": "c", "instruction": "x", "evaluator": {"type": "nope"}}`},
			[]string{"a.json:1:", "ends in the middle", "c.json:1:", `evaluator.type: unknown check type "nope"`}},
		{"no task files", map[string]string{"README.md": "hi"}, []string{"has no *.json task files"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tc.files {
				p := filepath.Join(dir, name)
				os.MkdirAll(filepath.Dir(p), 0o755)
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			tasks, err := Load(dir)
			if err == nil {
				t.Fatalf("no error; loaded %d tasks", len(tasks))
			}
			if tasks != nil {
				t.Errorf("tasks returned along with an error: %v", tasks)
			}
			rest := err.Error()
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("error lacks %q (in order):\n%s", w, err)
				}
				rest = rest[i+len(w):]
			}
		})
	}
}

func TestParseFields(t *testing.T) {
	dir := t.TempDir()
	writeRefPNG(t, filepath.Join(dir, "refs", "ok.png"), 4, 3, color.NRGBA{10, 20, 30, 255})
	file := `{
	  "id": "all-fields",
	  "instruction": "everything",
	  "max_steps": 9,
	  "timeout": 90,
	  "tags": ["a", "b"],
	  "setup": [
	    {"type": "launch", "argv": ["xterm", "-T", "t"]},
	    {"type": "launch", "command": "xterm &"},
	    {"type": "command", "command": "true", "timeout": "1.5s"},
	    {"type": "write_file", "path": "~/f", "content": "", "mode": "0600"},
	    {"type": "open", "url": "https://example.com", "with": ["chromium"]},
	    {"type": "open", "path": "~/f"},
	    {"type": "wait_window", "matches": "^x", "ignore_case": true, "timeout": 2},
	    {"type": "sleep", "duration": "250ms"}
	  ],
	  "evaluator": {"type": "and", "partial": true, "checks": [
	    {"type": "command", "command": "echo hi", "exit_code": 0, "contains": "hi", "matches": "h.", "timeout": "2s", "weight": 2},
	    {"type": "screen_region", "region": [1, 2, 4, 3], "reference": "refs/ok.png", "tolerance": 0.5},
	    {"type": "clipboard_matches", "matches": "x+", "selection": "primary", "name": "clip"},
	    {"type": "not", "checks": [{"type": "window_title", "contains": "Error", "ignore_case": true}]}
	  ]},
	  "solution": [{"action": "key", "text": "Return"}]
	}`
	tk, err := Parse([]byte(file), filepath.Join(dir, "all.json"))
	if err != nil {
		t.Fatal(err)
	}
	two := 2.0
	half := 0.5
	zero := 0
	want := &Task{
		ID: "all-fields", Instruction: "everything", MaxSteps: 9, Timeout: Duration(90e9), Tags: []string{"a", "b"},
		Setup: []Step{
			{Type: "launch", Argv: []string{"xterm", "-T", "t"}},
			{Type: "launch", Command: "xterm &"},
			{Type: "command", Command: "true", Timeout: Duration(1.5e9)},
			{Type: "write_file", Path: "~/f", Mode: "0600"},
			{Type: "open", URL: "https://example.com", With: []string{"chromium"}},
			{Type: "open", Path: "~/f"},
			{Type: "wait_window", Matches: "^x", IgnoreCase: true, Timeout: Duration(2e9)},
			{Type: "sleep", Duration: Duration(250e6)},
		},
		Evaluator: Check{Type: "and", Partial: true, Checks: []Check{
			{Type: "command", Command: "echo hi", ExitCode: &zero, Contains: "hi", Matches: "h.", Timeout: Duration(2e9), Weight: &two},
			{Type: "screen_region", Region: []int{1, 2, 4, 3}, Reference: "refs/ok.png", Tolerance: &half},
			{Type: "clipboard_matches", Matches: "x+", Selection: "primary", Name: "clip"},
			{Type: "not", Checks: []Check{{Type: "window_title", Contains: "Error", IgnoreCase: true}}},
		}},
		Solution: []json.RawMessage{json.RawMessage(`{"action": "key", "text": "Return"}`)},
		Path:     filepath.Join(dir, "all.json"),
	}
	// Compiled regexps and the decoded reference are internal; compare them apart.
	if tk.Setup[6].re == nil || !tk.Setup[6].re.MatchString("Xyz") {
		t.Errorf("wait_window regexp not compiled case-insensitively: %v", tk.Setup[6].re)
	}
	ref := tk.Evaluator.Checks[1].ref
	if ref == nil || ref.Bounds().Dx() != 4 || ref.NRGBAAt(3, 2) != (color.NRGBA{10, 20, 30, 255}) {
		t.Errorf("reference not loaded: %v", ref)
	}
	// So is the kind each step and check was parsed as: it must be its type's.
	clear := func(tk *Task) {
		for i := range tk.Setup {
			if k := tk.Setup[i].kind; k == nil || k.name != tk.Setup[i].Type {
				t.Errorf("setup[%d] parsed as kind %v, want %q", i, k, tk.Setup[i].Type)
			}
			tk.Setup[i].re, tk.Setup[i].kind = nil, nil
		}
		var walk func(c *Check)
		walk = func(c *Check) {
			if c.kind == nil || c.kind.Name != c.Type {
				t.Errorf("check %q parsed as kind %v", c.Type, c.kind)
			}
			c.re, c.ref, c.kind = nil, nil, nil
			for i := range c.Checks {
				walk(&c.Checks[i])
			}
		}
		walk(&tk.Evaluator)
	}
	clear(tk)
	if !reflect.DeepEqual(tk, want) {
		a, _ := json.MarshalIndent(tk, "", " ")
		b, _ := json.MarshalIndent(want, "", " ")
		t.Fatalf("parsed\n%s\nwant\n%s", a, b)
	}
}

func TestDuration(t *testing.T) {
	tests := []struct {
		in   string
		want Duration
		err  string
	}{
		{`"1m30s"`, Duration(90e9), ""},
		{`2.5`, Duration(2.5e9), ""},
		{`"soon"`, 0, "not a duration"},
		{`true`, 0, "must be a duration"},
	}
	for _, tc := range tests {
		var d Duration
		err := json.Unmarshal([]byte(tc.in), &d)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want one containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || d != tc.want {
			t.Errorf("%s: got %v, %v; want %v", tc.in, d, err, tc.want)
		}
		out, _ := json.Marshal(d)
		var back Duration
		if err := json.Unmarshal(out, &back); err != nil || back != d {
			t.Errorf("%s: marshal round trip gave %s -> %v, %v", tc.in, out, back, err)
		}
	}
}

func writeRefPNG(t *testing.T, path string, w, h int, c color.NRGBA) {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.SetNRGBA(x, y, c)
		}
	}
	writePNG(t, path, img)
}

func writePNG(t *testing.T, path string, img image.Image) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := png.Encode(f, img); err != nil {
		t.Fatal(err)
	}
}
