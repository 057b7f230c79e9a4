package task

import (
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/internal/xprobe"
)

func TestCombine(t *testing.T) {
	tests := []struct {
		typ     string
		partial bool
		rewards []float64
		weights []float64
		want    float64
	}{
		{CheckAnd, false, []float64{1, 1, 1}, nil, 1},
		{CheckAnd, false, []float64{1, 0, 1}, nil, 0},
		{CheckAnd, false, []float64{1, 0.5}, nil, 0.5},
		{CheckAnd, true, []float64{1, 0, 1, 0}, nil, 0.5},
		{CheckAnd, true, []float64{1, 0}, []float64{3, 1}, 0.75},
		{CheckAnd, true, []float64{0, 1}, []float64{0, 2}, 1}, // a 0-weight check is informational
		{CheckAnd, true, []float64{0.5, 1}, []float64{1, 1}, 0.75},
		{CheckAnd, true, []float64{1}, []float64{0}, 0},
		{CheckOr, false, []float64{0, 0, 1}, nil, 1},
		{CheckOr, false, []float64{0, 0.25, 0}, nil, 0.25},
		{CheckOr, false, []float64{0, 0}, nil, 0},
		{CheckNot, false, []float64{1}, nil, 0},
		{CheckNot, false, []float64{0}, nil, 1},
		{CheckNot, false, []float64{0.25}, nil, 0.75},
		{CheckAnd, false, nil, nil, 0},
	}
	for _, tc := range tests {
		w := tc.weights
		if w == nil {
			w = make([]float64, len(tc.rewards))
			for i := range w {
				w[i] = 1
			}
		}
		if got := combine(tc.typ, tc.partial, tc.rewards, w); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s partial=%v rewards %v weights %v = %v, want %v", tc.typ, tc.partial, tc.rewards, w, got, tc.want)
		}
	}
}

// TestRewardTree evaluates nested and/or/not trees over file_exists checks
// on a real directory: yes exists, no does not.
func TestRewardTree(t *testing.T) {
	env := NewEnv(nil, t.TempDir(), nil)
	if err := os.WriteFile(filepath.Join(env.Home(), "yes"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	yes := `{"type": "file_exists", "path": "~/yes"}`
	no := `{"type": "file_exists", "path": "~/no"}`
	weighted := func(check string, w float64) string {
		return strings.Replace(check, `{"type"`, fmt.Sprintf(`{"weight": %v, "type"`, w), 1)
	}
	tests := []struct {
		name      string
		evaluator string
		reward    float64
		passed    []bool // Reasons[i].Passed, root first
	}{
		{"leaf passes", yes, 1, []bool{true}},
		{"leaf fails", no, 0, []bool{false}},
		{"and all", `{"type": "and", "checks": [` + yes + `,` + yes + `]}`, 1, []bool{true, true, true}},
		{"and one missing", `{"type": "and", "checks": [` + yes + `,` + no + `]}`, 0, []bool{false, true, false}},
		{"partial and", `{"type": "and", "partial": true, "checks": [` + yes + `,` + no + `,` + yes + `,` + no + `]}`, 0.5, []bool{false, true, false, true, false}},
		{"weighted partial and", `{"type": "and", "partial": true, "checks": [` + weighted(yes, 3) + `,` + no + `]}`, 0.75, []bool{false, true, false}},
		{"or", `{"type": "or", "checks": [` + no + `,` + yes + `]}`, 1, []bool{true, false, true}},
		{"not", `{"type": "not", "checks": [` + no + `]}`, 1, []bool{true, false}},
		{"or of partial ands", `{"type": "or", "checks": [{"type": "and", "partial": true, "checks": [` + yes + `,` + no + `]}, ` + no + `]}`,
			0.5, []bool{false, false, true, false, false}},
		{"not of a partial and", `{"type": "not", "checks": [{"type": "and", "partial": true, "checks": [` + yes + `,` + no + `,` + no + `,` + no + `]}]}`,
			0.75, []bool{false, false, true, false, false, false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tk := parseTask(t, `"evaluator": `+tc.evaluator)
			out, err := tk.Evaluate(context.Background(), env)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(out.Reward-tc.reward) > 1e-9 || out.Success != (tc.reward == 1) {
				t.Errorf("reward %v success %v, want %v", out.Reward, out.Success, tc.reward)
			}
			if len(out.Reasons) != len(tc.passed) {
				t.Fatalf("%d reasons, want %d: %+v", len(out.Reasons), len(tc.passed), out.Reasons)
			}
			for i, r := range out.Reasons {
				if r.Passed != tc.passed[i] || r.Detail == "" || r.Check == "" || r.Path == "" {
					t.Errorf("reason %d = %+v, want passed=%v with check, path and detail", i, r, tc.passed[i])
				}
			}
			if out.Reasons[0].Path != "evaluator" || out.Reasons[0].Reward != out.Reward {
				t.Errorf("first reason %+v is not the root's", out.Reasons[0])
			}
		})
	}
}

// TestChecks runs every leaf check type, holding and not, on a real display
// (with openbox) and file system.
func TestChecks(t *testing.T) {
	k := startDesk(t, true)
	ctx := testrig.Context(t, 2*time.Minute)
	if err := os.WriteFile(filepath.Join(k.home, "notes.txt"), []byte("Hello World\nsecond line 42\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(k.home, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	k.launchXterm(t, "deskenv-check build 7")
	xclip("clipboard", "copied text ✓")(t, k)
	xclip("primary", "selected words")(t, k)

	// A probe window painted with known colours, and references made from
	// the same colours (and one that differs).
	probe := testrig.Probe(t, k.d, xprobe.Options{X: 100, Y: 200, Width: 60, Height: 40, Background: 0x204080})
	if err := probe.Fill(10, 10, 20, 10, 0xffcc00); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	painted := image.NewNRGBA(image.Rect(0, 0, 60, 40))
	masked := image.NewNRGBA(image.Rect(0, 0, 60, 40)) // only the yellow bar is opaque
	off := image.NewNRGBA(image.Rect(0, 0, 60, 40))    // every channel 3 off
	for y := 0; y < 40; y++ {
		for x := 0; x < 60; x++ {
			c := color.NRGBA{0x20, 0x40, 0x80, 0xff}
			if x >= 10 && x < 30 && y >= 10 && y < 20 {
				c = color.NRGBA{0xff, 0xcc, 0x00, 0xff}
				masked.SetNRGBA(x, y, c)
			}
			painted.SetNRGBA(x, y, c)
			off.SetNRGBA(x, y, color.NRGBA{c.R - 3, c.G - 3, c.B + 3, 0xff})
		}
	}
	writePNG(t, filepath.Join(dir, "painted.png"), painted)
	writePNG(t, filepath.Join(dir, "masked.png"), masked)
	writePNG(t, filepath.Join(dir, "off.png"), off)
	if err := probe.Sync(ctx); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name   string
		check  string
		passed bool
		detail string // substring of the reason's detail
	}{
		{"file_exists file", `{"type": "file_exists", "path": "~/notes.txt"}`, true, "exists (27 bytes)"},
		{"file_exists dir, relative", `{"type": "file_exists", "path": "dir"}`, true, "exists (a directory)"},
		{"file_exists absent", `{"type": "file_exists", "path": "~/absent"}`, false, "does not exist"},
		{"file_contains", `{"type": "file_contains", "path": "~/notes.txt", "contains": "line 42"}`, true, `file contains "line 42" at line 2`},
		{"file_contains ignoring case", `{"type": "file_contains", "path": "~/notes.txt", "contains": "hello world", "ignore_case": true}`, true, "at line 1"},
		{"file_contains wrong case", `{"type": "file_contains", "path": "~/notes.txt", "contains": "hello world"}`, false, `file does not contain "hello world" (it has 27 bytes: "Hello World\nsecond line 42\n")`},
		{"file_contains absent", `{"type": "file_contains", "path": "~/absent", "contains": "x"}`, false, "file does not exist"},
		{"file_contains directory", `{"type": "file_contains", "path": "~/dir", "contains": "x"}`, false, "is a directory"},
		{"file_matches", `{"type": "file_matches", "path": "~/notes.txt", "matches": "(?m)^second line \\d+$"}`, true, `file matches: "second line 42" at line 2`},
		{"file_matches fails", `{"type": "file_matches", "path": "~/notes.txt", "matches": "^second"}`, false, "file does not match /^second/"},
		{"command exit 0", `{"type": "command", "command": "test -d ~/dir"}`, true, "exited with status 0"},
		{"command exit 1", `{"type": "command", "command": "echo nope >&2; test -d ~/absent"}`, false, `exited with status 1, want 0; stderr: "nope"`},
		{"command wanted exit", `{"type": "command", "command": "exit 3", "exit_code": 3}`, true, "exited with status 3"},
		{"command stdout contains", `{"type": "command", "command": "ls ~", "contains": "notes.txt"}`, true, `stdout contains "notes.txt"`},
		{"command stdout matches fails", `{"type": "command", "command": "echo abc", "matches": "^x"}`, false, "stdout does not match /^x/"},
		{"command timeout", `{"type": "command", "command": "sleep 30", "timeout": "200ms"}`, false, "did not finish within 200ms"},
		{"window_title contains", `{"type": "window_title", "contains": "build 7"}`, true, `is titled "deskenv-check build 7"`},
		{"window_title matches", `{"type": "window_title", "matches": "^deskenv-check build \\d$"}`, true, "is titled"},
		{"window_title absent", `{"type": "window_title", "contains": "Mousepad"}`, false, `no window title contains "Mousepad"; windows: "deskenv-check build 7"`},
		{"clipboard_contains", `{"type": "clipboard_contains", "contains": "text ✓"}`, true, `clipboard contains "text ✓"`},
		{"clipboard_contains fails", `{"type": "clipboard_contains", "contains": "selected"}`, false, `clipboard does not contain "selected" (it has 15 bytes: "copied text ✓")`},
		{"clipboard_matches primary", `{"type": "clipboard_matches", "matches": "^selected \\w+$", "selection": "primary"}`, true, "primary selection matches"},
		{"screen_region equal", `{"type": "screen_region", "region": [100, 200, 60, 40], "reference": "painted.png", "tolerance": 0}`, true, "mean difference 0.00"},
		{"screen_region masked", `{"type": "screen_region", "region": [100, 200, 60, 40], "reference": "masked.png", "tolerance": 0}`, true, "of 200 pixels"},
		{"screen_region within tolerance", `{"type": "screen_region", "region": [100, 200, 60, 40], "reference": "off.png"}`, true, "mean difference 3.00 per channel (tolerance 4)"},
		{"screen_region beyond tolerance", `{"type": "screen_region", "region": [100, 200, 60, 40], "reference": "off.png", "tolerance": 2}`, false, "mean difference 3.00 per channel (tolerance 2)"},
		{"screen_region elsewhere", `{"type": "screen_region", "region": [130, 215, 60, 40], "reference": "painted.png"}`, false, "of 2400 pixels differ clearly"},
		{"screen_region off screen", `{"type": "screen_region", "region": [1250, 200, 60, 40], "reference": "painted.png"}`, false, "lies outside the 1280x800 screen"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tk, err := Parse([]byte(`{"id": "c", "instruction": "check", "evaluator": `+tc.check+`}`), filepath.Join(dir, "c.json"))
			if err != nil {
				t.Fatal(err)
			}
			out, err := tk.Evaluate(ctx, k.env)
			if err != nil {
				t.Fatal(err)
			}
			r := out.Reasons[0]
			if r.Passed != tc.passed || out.Success != tc.passed || (out.Reward == 1) != tc.passed {
				t.Errorf("passed %v (reward %v), want %v: %+v", r.Passed, out.Reward, tc.passed, r)
			}
			if !strings.Contains(r.Detail, tc.detail) {
				t.Errorf("detail %q lacks %q", r.Detail, tc.detail)
			}
		})
	}
}

// TestScreenshotFunc checks that the screenshot function given to NewEnv is
// the one screen_region uses.
func TestScreenshotFunc(t *testing.T) {
	dir := t.TempDir()
	writeRefPNG(t, filepath.Join(dir, "red.png"), 2, 2, color.NRGBA{255, 0, 0, 255})
	shot := image.NewRGBA(image.Rect(0, 0, 8, 8))
	for i := range shot.Pix {
		shot.Pix[i] = 0xff
	}
	shot.SetRGBA(4, 4, color.RGBA{255, 0, 0, 255})
	shot.SetRGBA(5, 4, color.RGBA{255, 0, 0, 255})
	shot.SetRGBA(4, 5, color.RGBA{255, 0, 0, 255})
	shot.SetRGBA(5, 5, color.RGBA{255, 0, 0, 255})
	calls := 0
	env := NewEnv(nil, dir, func(context.Context) (*image.RGBA, error) {
		calls++
		return shot, nil
	})
	tk, err := Parse([]byte(`{"id": "s", "instruction": "x", "evaluator": {"type": "screen_region", "region": [4, 4, 2, 2], "reference": "red.png", "tolerance": 0}}`), filepath.Join(dir, "s.json"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := tk.Evaluate(context.Background(), env)
	if err != nil || !out.Success || calls != 1 {
		t.Fatalf("Evaluate = %+v, %v after %d screenshot calls; want success from one call", out, err, calls)
	}
}

// TestEvaluateCannotLook checks that a check that could not look fails with
// a reason and also makes Evaluate return an error naming it.
func TestEvaluateCannotLook(t *testing.T) {
	env := NewEnv(nil, t.TempDir(), nil)
	tk := parseTask(t, `"evaluator": {"type": "or", "checks": [{"type": "window_title", "contains": "x"}, {"type": "file_exists", "path": "~"}]}`)
	out, err := tk.Evaluate(context.Background(), env)
	if err == nil || !errors.Is(err, ErrNoDisplay) || !strings.Contains(err.Error(), `evaluator.checks[0] (window_title contains "x")`) {
		t.Fatalf("error %v, want one naming evaluator.checks[0] and ErrNoDisplay", err)
	}
	if out.Reward != 1 || len(out.Reasons) != 3 || out.Reasons[1].Passed || !strings.HasPrefix(out.Reasons[1].Detail, "could not check: ") {
		t.Fatalf("outcome %+v, want reward 1 from the or, and a failed reason saying it could not check", out)
	}
}

// TestTaskBuiltInCode checks that a Task made in Go rather than parsed still
// honours its regular expressions (Parse normally compiles them).
func TestTaskBuiltInCode(t *testing.T) {
	env := NewEnv(nil, t.TempDir(), nil)
	if err := os.WriteFile(filepath.Join(env.Home(), "f"), []byte("Version 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		check   Check
		success bool
		err     string
	}{
		{Check{Type: CheckFileMatches, Path: "~/f", Matches: `^Version \d$`}, false, ""},
		{Check{Type: CheckFileMatches, Path: "~/f", Matches: `(?m)^Version \d$`}, true, ""},
		{Check{Type: CheckFileMatches, Path: "~/f", Matches: `^version`, IgnoreCase: true}, true, ""},
		{Check{Type: CheckCommand, Command: "cat ~/f", Matches: `^3`}, false, ""},
		{Check{Type: CheckFileMatches, Path: "~/f", Matches: `(`}, false, "invalid regular expression"},
		{Check{Type: "file_size"}, false, `unknown check type "file_size"`},
	}
	for _, tc := range tests {
		tk := &Task{ID: "code", Instruction: "x", Evaluator: tc.check}
		out, err := tk.Evaluate(context.Background(), env)
		if out.Success != tc.success {
			t.Errorf("%+v: success %v, want %v; %+v", tc.check, out.Success, tc.success, out.Reasons)
		}
		if (tc.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%+v: error %v, want %q", tc.check, err, tc.err)
		}
	}
}
