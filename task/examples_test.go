package task

import (
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/deskenv/deskenv/internal/testrig"
)

// TestExamples runs every example task (the six at the top of tasks/) on a
// real desktop (Xvfb + openbox): after setup the evaluator gives 0 with a
// reason for every check; after its solution is replayed (keyboard only,
// with xdotool standing in for the computer tool) it gives 1. The browser
// task is skipped with -short. The suite in tasks/' subdirectories, with
// seeded parameters and clicks, is proven by `deskenv tasks check`, through
// the executor an agent uses.
func TestExamples(t *testing.T) {
	tasks := exampleTasks(t)
	testrig.NeedTools(t, "xdotool", "mousepad")
	k := startDesk(t, true)
	for _, tk := range tasks {
		t.Run(tk.ID, func(t *testing.T) {
			if testing.Short() && slices.Contains(tk.Tags, "slow") {
				t.Skip("a slow task (it starts a browser); run without -short")
			}
			ctx := testrig.Context(t, 3*time.Minute)
			defer k.env.CloseLaunched(ctx)
			if err := tk.RunSetup(ctx, k.env); err != nil {
				t.Fatal(err)
			}
			undone, err := tk.Evaluate(ctx, k.env)
			if err != nil {
				t.Fatal(err)
			}
			if undone.Reward != 0 || undone.Success {
				t.Fatalf("before the solution: reward %v, want 0; reasons %+v", undone.Reward, undone.Reasons)
			}
			for _, r := range undone.Reasons {
				if r.Detail == "" || r.Check == "" {
					t.Errorf("reason without detail: %+v", r)
				}
			}
			if undone.Reasons[0].Passed {
				t.Errorf("the root check passed before the solution: %+v", undone.Reasons[0])
			}
			replay(t, k, tk.Solution)
			done, err := tk.Evaluate(ctx, k.env)
			if err != nil {
				t.Fatal(err)
			}
			if done.Reward != 1 || !done.Success {
				t.Fatalf("after the solution: reward %v, want 1; reasons %+v", done.Reward, done.Reasons)
			}
		})
	}
}

// replay performs keyboard-only computer tool actions with xdotool.
func replay(t *testing.T, k *desk, actions []json.RawMessage) {
	t.Helper()
	for i, raw := range actions {
		var a struct {
			Action   string  `json:"action"`
			Text     string  `json:"text"`
			Duration float64 `json:"duration"`
		}
		if err := json.Unmarshal(raw, &a); err != nil {
			t.Fatalf("solution[%d]: %v", i, err)
		}
		var args []string
		switch a.Action {
		case "type":
			args = []string{"type", "--delay", "12", "--", a.Text}
		case "key":
			args = []string{"key", "--", a.Text}
		case "wait":
			time.Sleep(time.Duration(a.Duration * float64(time.Second)))
			continue
		default:
			t.Fatalf("solution[%d]: action %q cannot be replayed here", i, a.Action)
		}
		cmd := exec.Command("xdotool", args...)
		cmd.Env = append(os.Environ(), "DISPLAY="+k.d.Name())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("solution[%d]: xdotool %s: %v: %s", i, strings.Join(args, " "), err, out)
		}
	}
}
