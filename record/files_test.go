package record

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// An episode's files are readable by other users (a training job under
// another account exports them), and its text keeps <, > and & as typed.
func TestEpisodeFilesReadableAndUnescaped(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	dir := t.TempDir()
	m := &Meta{ID: "e1", Task: &TaskInfo{ID: "t", Instruction: "write a <b> & c > f"}}
	if err := writeMeta(dir, m); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "shot.png")
	if err := writeFileAtomic(shot, []byte("png")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(dir, MetaFile), shot} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if mode := fi.Mode().Perm(); mode != 0o644 {
			t.Errorf("%s is %o, want 644", filepath.Base(p), mode)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, MetaFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"instruction": "write a <b> & c > f"`) {
		t.Errorf("%s does not hold the instruction as written:\n%s", MetaFile, b)
	}
}

// A recorder killed (kill -9) after two agent actions whose screens it had
// not yet observed leaves them in input.jsonl only: Repair rebuilds their
// steps, marked as having no observation after them, and the export has a
// row for each (issue 13).
func TestRepairRebuildsStepsOfActionsWithoutOne(t *testing.T) {
	dir := t.TempDir()
	input := `{"i":0,"t":0.5,"seq":1,"source":"agent","kind":"action","action":{"action":"left_click","coordinate":[10,20]},"dur":0.05}` + "\n" +
		`{"i":1,"t":0.6,"seq":2,"source":"agent","kind":"action","action":{"action":"type","text":"a <b> & c"},"dur":0.01}` + "\n" +
		`{"i":2,"t":0.7,"seq":3,"source":"agent","kind":"action","action":{"action":"key","text":"Return"},"dur":0.01}` + "\n"
	steps := `{"step":0,"source":"agent","action":{"action":"left_click","coordinate":[10,20]},"t_start":0.5,"t_end":0.55,"events":[0],"before":"shots/000000.png","after":"shots/000000.png"}` + "\n"
	for name, body := range map[string]string{MetaFile: seedMeta, InputFile: input, StepsFile: steps, ShotsFile: seedShots} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if changed, err := Repair(dir); err != nil || !changed {
		t.Fatalf("Repair = %v, %v; want a change", changed, err)
	}
	rec, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, st := range rec.Steps {
		got = append(got, fmt.Sprintf("%d %s before=%s after=%q missing=%v", st.Step, st.Action, st.Before, st.After, st.AfterMissing))
	}
	want := []string{
		`0 {"action":"left_click","coordinate":[10,20]} before=shots/000000.png after="shots/000000.png" missing=false`,
		`1 {"action":"type","text":"a <b> & c"} before=shots/000000.png after="" missing=true`,
		`2 {"action":"key","text":"Return"} before=shots/000000.png after="" missing=true`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("steps after Repair:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if rec.Meta.Status != StatusIncomplete || rec.Meta.Counts.Steps != 3 {
		t.Errorf("episode.json says status %q, %d steps; want incomplete, 3", rec.Meta.Status, rec.Meta.Counts.Steps)
	}
	// A second Repair adds nothing.
	if _, err := Repair(dir); err != nil {
		t.Fatal(err)
	}
	if again, err := Open(dir); err != nil || len(again.Steps) != 3 {
		t.Fatalf("after a second Repair: %v, %d steps; want 3", err, len(again.Steps))
	}
	out := filepath.Join(t.TempDir(), "train.jsonl")
	st, err := Export(context.Background(), dir, out, ExportOptions{Format: "jsonl"})
	if err != nil {
		t.Fatal(err)
	}
	if st.Rows != 3 {
		t.Errorf("the export has %d rows, want 3 (one per step)", st.Rows)
	}
}

func TestReviewAndExportFilter(t *testing.T) {
	root := t.TempDir()
	for _, id := range []string{"a", "b", "c"} {
		dir := filepath.Join(root, id)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		meta := strings.Replace(seedMeta, `"status":"recording"`, `"status":"complete"`, 1)
		meta = strings.Replace(meta, `"id":"ep-1"`, `"id":"`+id+`"`, 1)
		for name, body := range map[string]string{MetaFile: meta, StepsFile: strings.SplitAfter(seedSteps, "\n")[0]} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := SetReview(filepath.Join(root, "a"), Review{Status: ReviewAccepted, Note: "clean <demo> & fast", By: "operator"}); err != nil {
		t.Fatal(err)
	}
	if _, err := SetReview(filepath.Join(root, "b"), Review{Status: ReviewRejected, Note: "clicked the wrong file"}); err != nil {
		t.Fatal(err)
	}
	bad := []Review{{Status: "great"}, {Status: ReviewAccepted, Note: strings.Repeat("x", maxReviewNote+1)}, {Status: ReviewAccepted, Note: "\xff"}}
	for _, r := range bad {
		if _, err := SetReview(filepath.Join(root, "c"), r); err == nil {
			t.Errorf("SetReview(%+v) gave no error", r.Status)
		}
	}
	if r, err := ReadReview(filepath.Join(root, "a")); err != nil || r.Status != ReviewAccepted || r.Note != "clean <demo> & fast" || r.At.IsZero() {
		t.Errorf("ReadReview(a) = %+v, %v", r, err)
	}
	if r, err := ReadReview(filepath.Join(root, "c")); err != nil || r.Status != ReviewUnreviewed {
		t.Errorf("ReadReview(c) = %+v, %v; want unreviewed", r, err)
	}
	tests := []struct {
		review   string
		episodes int
	}{
		{"", 3}, {"accepted", 1}, {"rejected", 1}, {"unreviewed", 1}, {"accepted,unreviewed", 2},
	}
	for _, tt := range tests {
		out := filepath.Join(t.TempDir(), "train.jsonl")
		st, err := Export(context.Background(), root, out, ExportOptions{Format: "jsonl", Review: tt.review})
		if err != nil {
			t.Fatalf("review %q: %v", tt.review, err)
		}
		if st.Episodes != tt.episodes {
			t.Errorf("review %q exported %d episodes, want %d", tt.review, st.Episodes, tt.episodes)
		}
	}
	if _, err := Export(context.Background(), root, filepath.Join(t.TempDir(), "x.jsonl"), ExportOptions{Review: "maybe"}); err == nil || !strings.Contains(err.Error(), "accepted, rejected or unreviewed") {
		t.Errorf("an unknown review filter gave %v", err)
	}
}
