package record

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/deskenv/deskenv/hci"
)

// recordTwo records an agent episode that succeeds and a person's that
// fails, and returns the directory holding them.
func recordTwo(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := newRig(t, 1920, 1200, "")
	dir := t.TempDir()
	rec := r.recorder(t, dir, Options{FPS: -1})
	one, zero, yes, no := 1.0, 0.0, true, false
	// a1 ran a variant of its task: a seed, and the values chosen for the
	// task's parameters (a name with a quote, a number).
	seed := int64(7)
	params := map[string]any{"name": `bo"b`, "n": 3}
	if _, err := rec.Start(ctx, EpisodeInfo{ID: "a1", TaskID: "task-a", Instruction: "do a", Source: "agent", Seed: &seed, Params: params}); err != nil {
		t.Fatal(err)
	}
	for i, s := range []string{`{"action":"left_click","coordinate":[10,20]}`, `{"action":"type","text":"a <b> & c"}`, `{"action":"key","text":"Return"}`} {
		r.probe.Fill(0, 0, 300, 300, uint32(0x102030*(i+1)))
		if _, err := r.exec.Do(ctx, mustAction(t, s), hci.SourceAgent); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rec.Stop(ctx, &Outcome{Reward: &one, Done: true, Success: &yes}); err != nil {
		t.Fatal(err)
	}
	if _, err := rec.Start(ctx, EpisodeInfo{ID: "h1", TaskID: "task-b", Instruction: "do b"}); err != nil {
		t.Fatal(err)
	}
	r.exec.MoveTo(ctx, 600, 300, hci.SourceHuman)
	r.exec.Wheel(ctx, 0, 3, hci.SourceHuman)
	if _, err := rec.Stop(ctx, &Outcome{Reward: &zero, Done: true, Success: &no}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestExport(t *testing.T) {
	dir := recordTwo(t)
	ctx := context.Background()
	tests := []struct {
		name     string
		opt      ExportOptions
		episodes []string
		rows     int
	}{
		{"all", ExportOptions{}, []string{"a1", "h1"}, 4},
		{"by task", ExportOptions{TaskID: "task-b"}, []string{"h1"}, 1},
		{"by source", ExportOptions{Source: "agent"}, []string{"a1"}, 3},
		{"by outcome", ExportOptions{Outcome: "failure"}, []string{"h1"}, 1},
		{"success only", ExportOptions{Outcome: "success", Source: "human"}, nil, 0},
		{"jsonl", ExportOptions{Format: "jsonl"}, []string{"a1", "h1"}, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "data", "train."+map[bool]string{true: "jsonl", false: "parquet"}[tc.opt.Format == "jsonl"])
			progress := 0
			tc.opt.Progress = func(done, total, rows int) { progress = done }
			st, err := Export(ctx, dir, out, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			if st.Rows != tc.rows || st.Episodes != len(tc.episodes) || progress != 2 {
				t.Errorf("stats %+v, progress %d; want %d rows from %v", st, progress, tc.rows, tc.episodes)
			}
			var rows []Row
			if tc.opt.Format == "jsonl" {
				f, err := os.Open(out)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				sc := bufio.NewScanner(f)
				for sc.Scan() {
					var r Row
					if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
						t.Fatal(err)
					}
					rows = append(rows, r)
				}
			} else {
				if rows, err = parquet.ReadFile[Row](out); err != nil {
					t.Fatal(err)
				}
			}
			if len(rows) != tc.rows {
				t.Fatalf("%d rows in the file, want %d", len(rows), tc.rows)
			}
			seen := map[string]bool{}
			for i, r := range rows {
				seen[r.EpisodeID] = true
				if r.ModelW != 1280 || r.ScreenW != 1920 || r.Action == "" || r.ActionJSON == "" || r.TaskID == nil {
					t.Errorf("row %d: %+v", i, r)
				}
				// The task's variant: a1's seed and parameters, none for h1.
				wantSeed, wantParams := r.EpisodeID == "a1", `{"n":3,"name":"bo\"b"}`
				if (r.Seed != nil) != wantSeed || wantSeed && *r.Seed != 7 || (r.ParamsJSON != nil) != wantSeed || wantSeed && *r.ParamsJSON != wantParams {
					t.Errorf("row %d of %s: seed %v, params_json %v; want %v and %s", i, r.EpisodeID, r.Seed, r.ParamsJSON, wantSeed, wantParams)
				}
				var a hci.Action
				// What was typed is kept byte for byte: a column holding
				// "\u003c" would teach a model to type it (issue 13).
				if r.Action == "type" && !strings.Contains(r.ActionJSON, `"text":"a <b> & c"`) {
					t.Errorf("row %d action_json %s lost the typed <, > or &", i, r.ActionJSON)
				}
				if err := json.Unmarshal([]byte(r.ActionJSON), &a); err != nil || a.Action != r.Action {
					t.Errorf("row %d action_json %s does not match action %s", i, r.ActionJSON, r.Action)
				}
				if tc.opt.Format == "jsonl" {
					if r.Image.Bytes != nil || r.Image.Path == "" {
						t.Errorf("row %d: jsonl image should be a path only: %q, %d bytes", i, r.Image.Path, len(r.Image.Bytes))
					}
					if _, err := os.Stat(filepath.Join(filepath.Dir(out), r.Image.Path)); err != nil {
						t.Errorf("row %d image path %s does not resolve from the output's directory: %v", i, r.Image.Path, err)
					}
				} else {
					img := decodePNG(t, r.Image.Bytes)
					if b := img.Bounds(); b.Dx() != 1280 || b.Dy() != 800 {
						t.Errorf("row %d image is %v, want 1280x800", i, b)
					}
				}
			}
			for _, id := range tc.episodes {
				if !seen[id] {
					t.Errorf("episode %s missing", id)
				}
			}
			card, err := os.ReadFile(filepath.Join(filepath.Dir(out), "README.md"))
			if err != nil || !strings.Contains(string(card), "load_dataset") || !strings.Contains(string(card), filepath.Base(out)) {
				t.Errorf("dataset card: %v\n%s", err, card)
			}
		})
	}
	// The last row of an episode carries its reward and done.
	rows, err := parquet.ReadFile[Row](mustExport(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rows {
		last := i == len(rows)-1 || rows[i+1].EpisodeID != r.EpisodeID
		if r.Done != last || r.Reward == nil || (last && *r.Reward != *r.EpisodeReward) || (!last && *r.Reward != 0) {
			t.Errorf("row %d (%s step %d): done %v reward %v episode reward %v", i, r.EpisodeID, r.Step, r.Done, r.Reward, r.EpisodeReward)
		}
	}
}

// An export into a directory whose README.md is someone else's leaves it
// alone; a card of its own is replaced.
func TestExportKeepsForeignReadme(t *testing.T) {
	dir := recordTwo(t)
	out := t.TempDir()
	readme := filepath.Join(out, "README.md")
	os.WriteFile(readme, []byte("# my project\n"), 0o644)
	st, err := Export(context.Background(), dir, filepath.Join(out, "train.parquet"), ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(readme); string(b) != "# my project\n" || filepath.Base(st.Card) != "DATASET_CARD.md" {
		t.Errorf("README.md now %q, card %s", b, st.Card)
	}
	os.Remove(readme)
	for i := 0; i < 2; i++ {
		if st, err = Export(context.Background(), dir, filepath.Join(out, "train.parquet"), ExportOptions{}); err != nil || filepath.Base(st.Card) != "README.md" {
			t.Errorf("export %d: card %s, %v; want README.md (its own card is replaced)", i, st.Card, err)
		}
	}
}

func mustExport(t *testing.T, dir string) string {
	out := filepath.Join(t.TempDir(), "x.parquet")
	if _, err := Export(context.Background(), dir, out, ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestExportErrors(t *testing.T) {
	ctx := context.Background()
	empty := t.TempDir()
	tests := []struct {
		name string
		root string
		opt  ExportOptions
		want string
	}{
		{"format", empty, ExportOptions{Format: "csv"}, `format "csv" is not known`},
		{"source", empty, ExportOptions{Source: "robots"}, `source "robots" is not known`},
		{"outcome", empty, ExportOptions{Outcome: "meh"}, `outcome "meh" is not known`},
		{"no episodes", empty, ExportOptions{}, "no episodes under"},
		{"missing dir", filepath.Join(empty, "nope"), ExportOptions{}, "look for episodes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Export(ctx, tc.root, filepath.Join(t.TempDir(), "o.parquet"), tc.opt)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}
