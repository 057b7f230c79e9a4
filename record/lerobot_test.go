package record

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/deskenv/deskenv/hci"
)

// recordVideo records two episodes with video on a screen that changes
// with every action.
func recordVideo(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := newRig(t, 640, 480, "")
	dir := t.TempDir()
	rec := r.recorder(t, dir, Options{FPS: 10})
	one, zero := 1.0, 0.0
	for e, id := range []string{"v1", "v2"} {
		info := EpisodeInfo{ID: id, TaskID: "task-" + id, Instruction: "do <" + id + "> & more", Source: "agent"}
		if e == 0 {
			// v1 ran a variant of its task; v2 had none.
			seed := int64(5)
			info.Seed, info.Params = &seed, map[string]any{"n": 2}
		}
		if _, err := rec.Start(ctx, info); err != nil {
			t.Fatal(err)
		}
		for i, s := range []string{`{"action":"left_click","coordinate":[320,240]}`, `{"action":"type","text":"a <b> & c"}`,
			`{"action":"scroll","coordinate":[10,10],"scroll_direction":"up","scroll_amount":3}`} {
			r.probe.Fill(0, 0, 640, 480, uint32(0x203040*(i+1+e)))
			if _, err := r.exec.Do(ctx, mustAction(t, s), hci.SourceAgent); err != nil {
				t.Fatal(err)
			}
			time.Sleep(300 * time.Millisecond) // a few frames of each screen
		}
		reward := []float64{one, zero}[e]
		if _, err := rec.Stop(ctx, &Outcome{Reward: &reward, Done: true}); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestLeRobotExport exports two recorded episodes as a LeRobot v3 dataset
// and checks it as a reader would: info.json against the parquet files,
// the episodes' row spans, the action vector and its exact JSON, and the
// video decoded by ffmpeg with as many frames as the episodes recorded,
// each episode's span inside the file's duration.
func TestLeRobotExport(t *testing.T) {
	src := recordVideo(t)
	out := filepath.Join(t.TempDir(), "lerobot")
	st, err := Export(context.Background(), src, out, ExportOptions{Format: "lerobot"})
	if err != nil {
		t.Fatal(err)
	}
	if st.Episodes != 2 || st.Rows != 6 {
		t.Fatalf("stats %+v, want 2 episodes of 3 steps", st)
	}
	var info struct {
		Version   string         `json:"codebase_version"`
		Episodes  int            `json:"total_episodes"`
		Frames    int            `json:"total_frames"`
		Tasks     int            `json:"total_tasks"`
		FPS       int            `json:"fps"`
		DataPath  string         `json:"data_path"`
		VideoPath string         `json:"video_path"`
		Splits    map[string]any `json:"splits"`
		Features  map[string]map[string]any
	}
	b, err := os.ReadFile(filepath.Join(out, "meta", "info.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &info); err != nil {
		t.Fatal(err)
	}
	if info.Version != "v3.0" || info.Episodes != 2 || info.Frames != 6 || info.Tasks != 2 || info.FPS != 10 ||
		info.Splits["train"] != "0:2" || info.Features[leRobotVideoKey]["dtype"] != "video" || info.Features["action"]["dtype"] != "float32" {
		t.Errorf("info.json: %s", b)
	}

	rows, err := parquet.ReadFile[leRobotRow](filepath.Join(out, "data", "chunk-000", "file-000.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	eps, err := parquet.ReadFile[leRobotEpisode](filepath.Join(out, "meta", "episodes", "chunk-000", "file-000.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := parquet.ReadFile[leRobotTask](filepath.Join(out, "meta", "tasks.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != info.Frames || len(eps) != info.Episodes || len(tasks) != info.Tasks {
		t.Fatalf("%d rows, %d episodes, %d tasks; info.json says %d, %d, %d", len(rows), len(eps), len(tasks), info.Frames, info.Episodes, info.Tasks)
	}
	if tasks[0].Task != "do <v1> & more" || eps[0].Tasks[0] != tasks[0].Task {
		t.Errorf("tasks %+v, episode 0's %v", tasks, eps[0].Tasks)
	}
	if s, p := eps[0].DeskenvSeed, eps[0].DeskenvParams; s == nil || *s != 5 || p == nil || *p != `{"n":2}` {
		t.Errorf("episode 0's deskenv.seed %v, deskenv.params_json %v; want 5 and {\"n\":2}", s, p)
	}
	if eps[1].DeskenvSeed != nil || eps[1].DeskenvParams != nil {
		t.Errorf("episode 1 had no variant, has seed %v params %v", eps[1].DeskenvSeed, eps[1].DeskenvParams)
	}
	totalFrames := 0
	for i, ep := range eps {
		if ep.From != int64(3*i) || ep.To != int64(3*i+3) || ep.Length != 3 || ep.VideoFrom == nil || ep.VideoTo == nil || *ep.VideoTo <= *ep.VideoFrom {
			t.Errorf("episode %d: %+v", i, ep)
		}
		for j := ep.From; j < ep.To; j++ {
			r := rows[j]
			if r.EpisodeIndex != ep.EpisodeIndex || r.FrameIndex != j-ep.From || r.Index != j || r.TaskIndex != int64(i) {
				t.Errorf("row %d: %+v", j, r)
			}
			if j > ep.From && r.Timestamp < rows[j-1].Timestamp {
				t.Errorf("row %d goes back in time: %g after %g", j, r.Timestamp, rows[j-1].Timestamp)
			}
		}
		totalFrames += int(ep.DeskenvFrames)
	}
	if rows[1].ActionJSON != `{"action":"type","text":"a <b> & c"}` {
		t.Errorf("action.json %q keeps the action exactly", rows[1].ActionJSON)
	}
	if a := rows[0].Action; a[0] != 1 || a[1] != 0.5 || a[2] != 0.5 || a[3] != -1 {
		t.Errorf("left_click at the centre: action %v", a)
	}
	if a := rows[2].Action; a[5] != -3 {
		t.Errorf("scroll up 3: action %v", a)
	}
	if !rows[2].Done || rows[2].Reward != 1 || !rows[5].Done || rows[5].Reward != 0 || rows[0].Done {
		t.Errorf("rewards and done: %+v / %+v", rows[2], rows[5])
	}

	// The video, read by ffmpeg (not by this project): every recorded frame
	// decodes, and each episode's span lies inside the file.
	video := filepath.Join(out, "videos", leRobotVideoKey, "chunk-000", "file-000.mp4")
	decoded, duration := ffmpegCount(t, video)
	if decoded != totalFrames || totalFrames == 0 {
		t.Errorf("ffmpeg decoded %d frames; the episodes recorded %d", decoded, totalFrames)
	}
	if last := *eps[1].VideoTo; last > duration+0.2 || *eps[1].VideoFrom < *eps[0].VideoTo-1e-9 {
		t.Errorf("episode spans %g-%g and %g-%g, file duration %g", *eps[0].VideoFrom, *eps[0].VideoTo, *eps[1].VideoFrom, last, duration)
	}
	if _, err := os.Stat(filepath.Join(out, "README.md")); err != nil {
		t.Errorf("no dataset card: %v", err)
	}
	if _, err := Export(context.Background(), src, out, ExportOptions{Format: "lerobot"}); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("exporting into a dataset that exists: %v, want a refusal", err)
	}
}

// ffmpegCount decodes a video with ffmpeg and returns its frame count and
// its duration in seconds (ffprobe).
func ffmpegCount(t *testing.T, p string) (int, float64) {
	t.Helper()
	out, err := exec.Command("ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0",
		"-show_entries", "stream=nb_read_frames:format=duration", "-of", "default=noprint_wrappers=1", p).CombinedOutput()
	if err != nil {
		t.Fatalf("ffprobe %s: %v\n%s", p, err, out)
	}
	var frames int
	var duration float64
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "nb_read_frames="); ok {
			frames, _ = strconv.Atoi(v)
		}
		if v, ok := strings.CutPrefix(line, "duration="); ok {
			duration, _ = strconv.ParseFloat(v, 64)
		}
	}
	if dec, err := exec.Command("ffmpeg", "-v", "error", "-i", p, "-f", "null", "-").CombinedOutput(); err != nil || len(strings.TrimSpace(string(dec))) > 0 {
		t.Errorf("ffmpeg decoding %s: %v\n%s", p, err, dec)
	}
	return frames, duration
}
