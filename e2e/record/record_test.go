// Package record_test checks recording end to end: an export read back by
// DuckDB (an independent Parquet reader, from npm), and a person's demo of an
// example task done in headless Chromium through the browser client, reduced
// to the expected actions and replayed by `deskenv replay` to the same
// reward.
package record_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/deskenv/deskenv/control"
	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/internal/xprobe"
	"github.com/deskenv/deskenv/record"
	"github.com/deskenv/deskenv/screen"
	"github.com/deskenv/deskenv/task"
)

// checkDuckDB fails the test, saying how to fix it, when the npm package is
// missing: `make test` installs it, so this is never a skip.
func checkDuckDB(t *testing.T, dir string) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is not installed: run scripts/install-deps.sh test")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@duckdb", "node-api", "package.json")); err != nil {
		t.Fatalf("@duckdb/node-api is missing from %s/node_modules: run `npm ci --prefix e2e/record` (or `make npm`)", dir)
	}
}

type duck struct {
	Columns [][2]string `json:"columns"`
	Rows    int         `json:"rows"`
	KV      []string    `json:"kv"`
	Images  []struct {
		EpisodeID  string   `json:"episode_id"`
		Step       int      `json:"step"`
		Action     string   `json:"action"`
		Coordinate []int    `json:"coordinate"`
		Path       string   `json:"path"`
		PNG        string   `json:"png"`
		ModelW     int      `json:"model_w"`
		ModelH     int      `json:"model_h"`
		Reward     *float64 `json:"reward"`
		Done       bool     `json:"done"`
	} `json:"images"`
}

func readWithDuckDB(t *testing.T, file string) duck {
	t.Helper()
	dir := filepath.Join(testrig.ModuleRoot(t), "e2e", "record")
	checkDuckDB(t, dir)
	cmd := exec.Command("node", filepath.Join(dir, "check.mjs"), file)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("DuckDB could not read %s: %v\n%s", file, err, stderr.String())
	}
	var d duck
	if err := json.Unmarshal(out, &d); err != nil {
		t.Fatalf("check.mjs printed %q: %v", out, err)
	}
	return d
}

// The exported Parquet file, read by DuckDB: the schema Hugging Face
// expects, every step a row, every image a PNG of the model's size.
func TestParquetReadByDuckDB(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d := testrig.Display(t, display.Config{Width: 1920, Height: 1200})
	ex, err := hci.NewExecutor(d, hci.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	capt, err := screen.NewCapturer(d)
	if err != nil {
		t.Fatal(err)
	}
	defer capt.Close()
	probe := testrig.Probe(t, d, xprobe.Options{Background: 0x336699})
	sp := ex.Space()
	shooter := screen.NewShooter(capt, screen.ShooterOptions{ModelW: sp.ModelW, ModelH: sp.ModelH})
	dir := t.TempDir()
	rec, err := record.New(dir, ex, shooter, capt, record.Options{FPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()

	one := 1.0
	wantSteps := 0
	for i, src := range []hci.Source{hci.SourceAgent, hci.SourceHuman} {
		if _, err := rec.Start(ctx, record.EpisodeInfo{ID: fmt.Sprintf("ep%d", i), TaskID: "demo", Instruction: "click and type"}); err != nil {
			t.Fatal(err)
		}
		probe.Fill(0, 0, 400, 300, uint32(0x202020*(i+1)))
		if src == hci.SourceAgent {
			for _, s := range []string{`{"action":"left_click","coordinate":[640,400]}`, `{"action":"type","text":"ok"}`} {
				a, _ := hci.ParseAction([]byte(s))
				if _, err := ex.Do(ctx, a, src); err != nil {
					t.Fatal(err)
				}
			}
			wantSteps += 2
		} else {
			ex.MoveTo(ctx, 960, 600, src)
			ex.ButtonDown(ctx, 1, src)
			ex.ButtonUp(ctx, 1, src)
			wantSteps++
		}
		if _, err := rec.Stop(ctx, &record.Outcome{Reward: &one, Done: true}); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "train.parquet")
	st, err := record.Export(ctx, dir, out, record.ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := readWithDuckDB(t, out)

	wantCols := map[string]string{
		"episode_id": "VARCHAR", "step": "INTEGER", "source": "VARCHAR", "task_id": "VARCHAR", "instruction": "VARCHAR",
		"seed": "BIGINT", "params_json": "VARCHAR",
		"image": "STRUCT(bytes BLOB, path VARCHAR)", "action_json": "VARCHAR", "action": "VARCHAR",
		"coordinate": "INTEGER[]", "start_coordinate": "INTEGER[]", "region": "INTEGER[]", "text": "VARCHAR",
		"key": "VARCHAR", "scroll_direction": "VARCHAR", "scroll_amount": "INTEGER", "duration": "DOUBLE",
		"t_start": "DOUBLE", "t_end": "DOUBLE", "screen_w": "INTEGER", "screen_h": "INTEGER", "model_w": "INTEGER",
		"model_h": "INTEGER", "reward": "DOUBLE", "episode_reward": "DOUBLE", "done": "BOOLEAN", "success": "BOOLEAN",
		"status": "VARCHAR", "error": "VARCHAR",
	}
	gotCols := map[string]string{}
	for _, c := range got.Columns {
		gotCols[c[0]] = c[1]
	}
	if !reflect.DeepEqual(gotCols, wantCols) {
		t.Errorf("schema as DuckDB reads it:\n%v\nwant\n%v", gotCols, wantCols)
	}
	if got.Rows != wantSteps || st.Rows != wantSteps || len(got.Images) != wantSteps {
		t.Errorf("DuckDB counts %d rows (%d images), the export wrote %d; want %d", got.Rows, len(got.Images), st.Rows, wantSteps)
	}
	if !reflect.DeepEqual(got.KV, []string{"huggingface"}) {
		t.Errorf("key-value metadata %v, want the huggingface features", got.KV)
	}
	for _, r := range got.Images {
		b, err := base64.StdEncoding.DecodeString(r.PNG)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Errorf("%s step %d: image bytes are not a PNG: %v", r.EpisodeID, r.Step, err)
			continue
		}
		if sz := img.Bounds().Size(); sz.X != r.ModelW || sz.Y != r.ModelH || sz.X != 1280 || sz.Y != 800 {
			t.Errorf("%s step %d: image %v, model %dx%d; want 1280x800", r.EpisodeID, r.Step, sz, r.ModelW, r.ModelH)
		}
		if !strings.HasPrefix(r.Path, r.EpisodeID+"/shots/") {
			t.Errorf("image path %q", r.Path)
		}
	}
	if r := got.Images[len(got.Images)-1]; !r.Done || r.Reward == nil || *r.Reward != 1 || r.Action != "left_click" ||
		!reflect.DeepEqual(r.Coordinate, []int{640, 400}) {
		t.Errorf("the human episode's click: %+v", r)
	}
}

// A person does an example task (hello-file) in the browser client, driven
// by Playwright in headless Chromium: the recording reduces to exactly the
// actions they took, and `deskenv replay` on a fresh desktop earns the same
// reward.
func TestBrowserDemoReplays(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	root := testrig.ModuleRoot(t)
	bin := testrig.BuildDeskenv(ctx, t)
	tasks, err := task.Load(filepath.Join(root, "tasks"))
	if err != nil {
		t.Fatal(err)
	}

	// The appliance's desktop: openbox and an xterm, a home of its own.
	home := testrig.SessionHome(t)
	st := startStack(ctx, t, home, tasks)
	episodes := t.TempDir()
	// The wiring the appliance does: the recorder follows the control
	// plane on the lifecycle bus, so the page's record button records the
	// running episode, and the episode's end stops its recording with the
	// task's reward.
	rec, err := record.New(episodes, st.exec, st.shooter, st.capt, record.Options{Lifecycle: st.lc, Session: display.SessionBare})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()

	ep, err := st.ctl.Reset(ctx, control.ResetRequest{TaskID: "hello-file"})
	if err != nil {
		t.Fatal(err)
	}
	recEp, err := rec.Start(ctx, record.EpisodeInfo{}) // the page's record button: the running episode
	if err != nil {
		t.Fatal(err)
	}
	if recEp.ID() != ep.ID {
		t.Fatalf("recording %s, want the running episode %s", recEp.ID(), ep.ID)
	}
	cx, cy := windowCentre(ctx, t, st.d, "deskenv terminal")
	testrig.WaitShellReady(ctx, t, st.d, "deskenv terminal")

	d := startDriver(ctx, t)
	do(ctx, t, d, "open", map[string]any{"page": "a", "url": st.base + "/"}, nil)
	waitFor(ctx, t, d, "a", `deskenv.state === 'connected' && deskenv.video.videoWidth > 0`, "the page never showed video")
	var can bool
	do(ctx, t, d, "eval", map[string]any{"page": "a", "expr": `deskenv.canAct`}, &can)
	if !can {
		do(ctx, t, d, "eval", map[string]any{"page": "a", "expr": `document.getElementById('control').click(), true`}, nil)
	}
	waitFor(ctx, t, d, "a", `deskenv.canAct`, "the person could not take control")

	const cmdline = "echo hello world > ~/hello.txt"
	do(ctx, t, d, "click", map[string]any{"page": "a", "vx": cx, "vy": cy}, nil)
	do(ctx, t, d, "type", map[string]any{"page": "a", "text": cmdline}, nil)
	do(ctx, t, d, "press", map[string]any{"page": "a", "key": "Enter"}, nil)
	// The shell writes the file; then the operator ends the episode.
	testrig.WaitFor(t, "the demo to make ~/hello.txt", func() bool {
		b, err := os.ReadFile(filepath.Join(home, "hello.txt"))
		return err == nil && string(b) == "hello world\n"
	})
	time.Sleep(500 * time.Millisecond)
	ended, err := st.ctl.End(ctx, ep.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ended.Reward == nil || *ended.Reward != 1 {
		t.Fatalf("the demo scored %v, want 1: %+v", ended.Reward, ended.Reasons)
	}
	// The recorder hears the end on the lifecycle bus and stops.
	testrig.WaitWithin(t, 30*time.Second, "the recording to stop when its episode ended", func() bool { return !rec.Status().Recording })

	got, err := record.Open(recEp.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if got.Meta.Status != record.StatusComplete || got.Meta.Source != "human" || got.Meta.Outcome == nil ||
		got.Meta.Outcome.Reward == nil || *got.Meta.Outcome.Reward != 1 || got.Meta.Task == nil || got.Meta.Task.ID != "hello-file" {
		t.Errorf("episode.json: %+v (outcome %+v)", got.Meta, got.Meta.Outcome)
	}
	want := []string{
		fmt.Sprintf(`{"action":"left_click","coordinate":[%d,%d]}`, cx, cy),
		`{"action":"type","text":"echo hello world > ~/hello.txt"}`,
		`{"action":"key","text":"Return"}`,
	}
	var acts []string
	for _, s := range got.Steps {
		acts = append(acts, s.Action.String())
	}
	if !reflect.DeepEqual(acts, want) {
		t.Fatalf("the demo reduced to\n  %s\nwant\n  %s", strings.Join(acts, "\n  "), strings.Join(want, "\n  "))
	}

	// deskenv export, read back by DuckDB: the demo as three rows.
	dataset := filepath.Join(t.TempDir(), "demo", "train.parquet")
	export := exec.CommandContext(ctx, bin, "export", "--out", dataset, "--task", "hello-file", "--source", "human", "--outcome", "success", episodes)
	if out, err := export.CombinedOutput(); err != nil || !strings.Contains(string(out), "3 rows from 1 episodes") {
		t.Fatalf("deskenv export: %v\n%s", err, out)
	}
	dk := readWithDuckDB(t, dataset)
	var exported []string
	for _, r := range dk.Images {
		exported = append(exported, r.Action)
	}
	if !reflect.DeepEqual(exported, []string{"left_click", "type", "key"}) || !dk.Images[2].Done || *dk.Images[2].Reward != 1 {
		t.Errorf("exported rows %v, last %+v", exported, dk.Images[2])
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dataset), "README.md")); err != nil {
		t.Errorf("no dataset card beside the export: %v", err)
	}

	// Replay on a fresh desktop of the appliance's own making.
	replay := exec.CommandContext(ctx, bin, "replay", "--tasks", filepath.Join(root, "tasks"), "--home", testrig.SessionHome(t),
		"--out", t.TempDir(), recEp.Dir())
	replay.Env = append(os.Environ(), "XDG_DATA_HOME="+t.TempDir())
	out, err := replay.CombinedOutput()
	t.Logf("deskenv replay:\n%s", out)
	if err != nil {
		t.Fatalf("deskenv replay failed: %v", err)
	}
	if !strings.Contains(string(out), "reward: 1 (recorded: 1)") {
		t.Errorf("replay did not report the same reward")
	}
	// The person's burst (click, type, Return within a fraction of a second)
	// was observed once, after Return: that screen must come back exactly.
	if strings.Contains(string(out), "DIVERGED") || !strings.Contains(string(out), "observations match") {
		t.Errorf("the replayed screens differ from the recorded ones")
	}
}

// windowCentre finds a window by title with xdotool and returns its centre
// in screen pixels (the video is the screen's size).
func windowCentre(ctx context.Context, t *testing.T, d *display.Display, title string) (int, int) {
	t.Helper()
	cmd := exec.CommandContext(ctx, "xdotool", "search", "--name", title, "getwindowgeometry", "--shell")
	cmd.Env = append(os.Environ(), d.Env()...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("xdotool: %v", err)
	}
	v := map[string]int{}
	for _, line := range strings.Split(string(out), "\n") {
		if k, val, ok := strings.Cut(line, "="); ok {
			var n int
			fmt.Sscan(val, &n)
			v[k] = n
		}
	}
	if v["WIDTH"] == 0 {
		t.Fatalf("no window %q: %s", title, out)
	}
	return v["X"] + v["WIDTH"]/2, v["Y"] + v["HEIGHT"]/2
}
