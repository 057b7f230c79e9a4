package task

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deskenv/deskenv/internal/testrig"
)

// noWindow is a checker this test adds: no window's title contains the text.
func noWindow(ctx context.Context, env Env, c *Check) (bool, string, error) {
	ws, err := env.Windows(ctx)
	if err != nil {
		return false, "", err
	}
	for _, w := range ws {
		if strings.Contains(w.Title, c.Contains) {
			return false, fmt.Sprintf("window 0x%x is titled %q", w.ID, w.Title), nil
		}
	}
	return true, "no such window", nil
}

// noWindowKind is the whole of the new checker: one entry.
var noWindowKind = CheckKind{
	Name:     "no_window",
	Fields:   []string{"contains"},
	Needs:    []Need{Required("contains", "a title substring")},
	Describe: func(c *Check) string { return fmt.Sprintf("no_window %q", c.Contains) },
	Evaluate: noWindow,
}

// TestNewCheckKind adds a checker with one entry and runs a task that uses
// it end to end: loaded from a task file, set up on a real Xvfb, evaluated
// to 0 while the window is there and to 1 once the reset closed it.
func TestNewCheckKind(t *testing.T) {
	kinds := DefaultKinds()
	if err := kinds.AddCheck(noWindowKind); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := `{"id": "close-it", "instruction": "Close the window titled doomed.",
  "setup": [
    {"type": "launch", "argv": ["xterm", "-T", "doomed", "-xrm", "XTerm*allowTitleOps: false"]},
    {"type": "wait_window", "contains": "doomed", "timeout": "15s"}
  ],
  "evaluator": {"type": "no_window", "contains": "doomed"}
}`
	if err := os.WriteFile(filepath.Join(dir, "close-it.json"), []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	tasks, err := kinds.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	tk := tasks[0]

	k := startDesk(t, false)
	ctx := testrig.Context(t, 60*time.Second)
	if err := tk.RunSetup(ctx, k.env); err != nil {
		t.Fatal(err)
	}
	out, err := tk.Evaluate(ctx, k.env)
	if err != nil {
		t.Fatal(err)
	}
	if out.Reward != 0 || out.Success || !strings.Contains(out.Reasons[0].Detail, `titled "doomed"`) {
		t.Fatalf("with the window open: %+v, want reward 0 naming the window", out)
	}
	if out.Reasons[0].Check != `no_window "doomed"` {
		t.Errorf("reason names the check %q, want its Describe", out.Reasons[0].Check)
	}

	k.env.CloseLaunched(ctx) // what a reset does
	testrig.WaitState(t, 10*time.Second, "the window to go", func() (bool, string) {
		out, err = tk.Evaluate(ctx, k.env)
		return err == nil && out.Reward == 1, fmt.Sprintf("%+v %v", out, err)
	})
	if !out.Success || out.Reasons[0].Detail != "no such window" {
		t.Errorf("after the reset: %+v", out)
	}
}

// TestNewCheckKindMessages checks that an added kind takes part in the
// messages for bad task files like a built-in one, and that only the Kinds
// it was added to know it.
func TestNewCheckKindMessages(t *testing.T) {
	kinds := DefaultKinds()
	if err := kinds.AddCheck(noWindowKind); err != nil {
		t.Fatal(err)
	}
	task := func(evaluator string) []byte {
		return []byte(`{"id": "a", "instruction": "do", "evaluator": ` + evaluator + `}`)
	}
	tests := []struct {
		name  string
		kinds *Kinds
		file  []byte
		want  string
	}{
		{"missing field", kinds, task(`{"type": "no_window"}`), "evaluator.contains: required: a title substring"},
		{"field it does not take", kinds, task(`{"type": "no_window", "contains": "x", "path": "~/x"}`),
			`evaluator.path: not used by "no_window" checks (they use contains)`},
		{"misspelt", kinds, task(`{"type": "no_windw", "contains": "x"}`),
			// The built-in types in table order (task/checks.go), then the added one.
			`unknown check type "no_windw" (did you mean "no_window"?); check types are ` + strings.Join(builtin.checkNames, ", ") + ", no_window"},
		{"built-in kinds", DefaultKinds(), task(`{"type": "no_window", "contains": "x"}`), `unknown check type "no_window"`},
		{"package Parse", nil, task(`{"type": "no_window", "contains": "x"}`), `unknown check type "no_window"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.kinds == nil {
				_, err = Parse(tc.file, "t.json")
			} else {
				_, err = tc.kinds.Parse(tc.file, "t.json")
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestAddCheckRejects checks that a kind that could not work is refused
// when it is added, not when a task uses it.
func TestAddCheckRejects(t *testing.T) {
	eval := noWindowKind.Evaluate
	tests := []struct {
		name string
		kind CheckKind
		want string
	}{
		{"no name", CheckKind{Evaluate: eval}, "has no name"},
		{"taken name", CheckKind{Name: CheckFileExists, Fields: []string{"path"}, Evaluate: eval}, "exists already"},
		{"no Evaluate", CheckKind{Name: "x", Fields: []string{"path"}}, "has no Evaluate"},
		{"unknown field", CheckKind{Name: "x", Fields: []string{"title"}, Evaluate: eval}, `"title" is not a field`},
		{"common field", CheckKind{Name: "x", Fields: []string{"weight"}, Evaluate: eval}, `"weight" is not a field`},
		{"need not taken", CheckKind{Name: "x", Fields: []string{"path"}, Needs: []Need{OneOf("path", "contains")}, Evaluate: eval}, "needs a field it does not take"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kinds := DefaultKinds()
			err := kinds.AddCheck(tc.kind)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("AddCheck = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	// Adding to one Kinds leaves the others, and the built-in set, alone.
	a := DefaultKinds()
	if err := a.AddCheck(noWindowKind); err != nil {
		t.Fatal(err)
	}
	if err := a.Clone().AddCheck(CheckKind{Name: "other", Fields: []string{"path"}, Evaluate: eval}); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.checks["other"]; ok {
		t.Error("adding to a clone changed the original")
	}
	if _, ok := DefaultKinds().checks["no_window"]; ok {
		t.Error("adding to a Kinds changed the built-in kinds")
	}
}
