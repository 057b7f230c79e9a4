package control

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/deskenv/deskenv/lifecycle"
	"github.com/deskenv/deskenv/task"
)

// TestResetRendersParams resets into a task with parameters: the seed
// chooses the values, the setup that runs and the evaluator that scores are
// the rendered ones, and the episode (its answer, the history and the
// lifecycle event a recording takes its metadata from) carries seed and
// values; a reset without a seed draws one and reports it.
func TestResetRendersParams(t *testing.T) {
	tk, err := task.Parse([]byte(`{"id":"variant",
"params": {"file": {"choices": ["alpha", "beta", "gamma", "delta"]}, "n": {"min": 10, "max": 99}},
"instruction": "Put {{n * 2}} into ~/{{file}}.txt",
"setup": [{"type": "write_file", "path": "~/{{file}}.txt", "content": "{{n * 2}}\n"}],
"evaluator": {"type": "file_contains", "path": "~/{{file}}.txt", "contains": "{{n * 2}}"}}`), "variant.json")
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, rigOptions{mode: ModeSim, tasks: []*task.Task{tk}})
	h := r.listen(t, lifecycle.EpisodeStarted)
	ctx := context.Background()
	for i, seed := range []int64{5, 6, 5} {
		ep, err := r.c.Reset(ctx, ResetRequest{TaskID: "variant", Seed: &seed})
		if err != nil {
			t.Fatal(err)
		}
		want := tk.Draw(seed)
		if ep.Seed == nil || *ep.Seed != seed || !reflect.DeepEqual(ep.Params, map[string]any(want)) {
			t.Fatalf("seed %d: episode seed %v params %v, want %v", seed, ep.Seed, ep.Params, want)
		}
		file, n := want["file"].(string), want["n"].(int64)
		if ep.Instruction != "Put "+itoa(n*2)+" into ~/"+file+".txt" {
			t.Errorf("seed %d: instruction %q is not the rendered one", seed, ep.Instruction)
		}
		b, err := os.ReadFile(filepath.Join(r.home, file+".txt"))
		if err != nil || string(b) != itoa(n*2)+"\n" {
			t.Errorf("seed %d: the rendered setup did not write ~/%s.txt: %q %v", seed, file, b, err)
		}
		end, err := r.c.End(ctx, ep.ID)
		if err != nil {
			t.Fatal(err)
		}
		if end.Reward == nil || *end.Reward != 1 || !reflect.DeepEqual(end.Params, ep.Params) {
			t.Errorf("seed %d: the rendered evaluator scored %v (%+v), params %v", seed, end.Reward, end.Reasons, end.Params)
		}
		evs := h.of(lifecycle.EpisodeStarted, i+1)
		if len(evs) < i+1 {
			t.Fatalf("heard %d EpisodeStarted events", len(evs))
		}
		if ev := evs[i].Episode; ev.Seed == nil || *ev.Seed != seed || !reflect.DeepEqual(ev.Params, ep.Params) {
			t.Errorf("seed %d: EpisodeStarted carries seed %v params %v", seed, ev.Seed, ev.Params)
		}
	}
	ep, err := r.c.Reset(ctx, ResetRequest{TaskID: "variant"})
	if err != nil {
		t.Fatal(err)
	}
	if ep.Seed == nil || *ep.Seed < 0 || !reflect.DeepEqual(ep.Params, map[string]any(tk.Draw(*ep.Seed))) {
		t.Errorf("a reset without a seed: seed %v params %v", ep.Seed, ep.Params)
	}
	if got, _ := r.c.Episode(ep.ID); got == nil || !reflect.DeepEqual(got.Params, ep.Params) {
		t.Errorf("GET the episode: %+v", got)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
