package record

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/internal/codec"
	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/internal/xprobe"
	"github.com/deskenv/deskenv/screen"
)

// rig is a real desktop with everything a recorder needs.
type rig struct {
	d       *display.Display
	exec    *hci.Executor
	capt    *screen.Capturer
	shooter *screen.Shooter
	probe   *xprobe.Probe
}

func newRig(t testing.TB, w, h int, attach string) *rig {
	t.Helper()
	d := testrig.Display(t, display.Config{Attach: attach, Width: w, Height: h})
	ex, err := hci.NewExecutor(d, hci.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	capt, err := screen.NewCapturer(d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { capt.Close() })
	sp := ex.Space()
	sh := screen.NewShooter(capt, screen.ShooterOptions{ModelW: sp.ModelW, ModelH: sp.ModelH})
	r := &rig{d: d, exec: ex, capt: capt, shooter: sh}
	if attach == "" {
		r.probe = testrig.Probe(t, d, xprobe.Options{Background: 0x203040})
	}
	return r
}

func (r *rig) recorder(t testing.TB, dir string, opt Options) *Recorder {
	t.Helper()
	rec, err := New(dir, r.exec, r.shooter, r.capt, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rec.Close() })
	return rec
}

func mustAction(t testing.TB, s string) hci.Action {
	t.Helper()
	a, err := hci.ParseAction([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// An agent's session over hci lands on disk as steps, events, observations
// and video, and opens again as it was written.
func TestRecordAgentSession(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := newRig(t, 1920, 1200, "") // scaled: the model sees 1280x800
	dir := t.TempDir()
	rec := r.recorder(t, dir, Options{FPS: 10, SegmentSeconds: 1})
	ep, err := rec.Start(ctx, EpisodeInfo{ID: "agent run/1", TaskID: "paint", Instruction: "paint the screen", Source: "agent"})
	if err != nil {
		t.Fatal(err)
	}
	if got := filepath.Base(ep.Dir()); got != "agent_run_1" {
		t.Errorf("episode directory %q, want the id made safe: agent_run_1", got)
	}
	if st := rec.Status(); !st.Recording || st.Episode == nil || st.Episode.ID != "agent run/1" || st.Episode.TaskID != "paint" {
		t.Errorf("status while recording: %+v", st)
	}
	script := []string{
		`{"action":"left_click","coordinate":[100,200]}`,
		`{"action":"type","text":"hello"}`,
		`{"action":"key","text":"ctrl+s"}`,
		`{"action":"scroll","coordinate":[640,400],"scroll_direction":"down","scroll_amount":2}`,
		`{"action":"screenshot"}`,
		`{"action":"left_click_drag","start_coordinate":[10,10],"coordinate":[300,200]}`,
	}
	for i, s := range script {
		// Change the screen between actions, as an application would.
		if err := r.probe.Fill(0, 0, 600, 400, uint32(0x400000+i*0x2010)); err != nil {
			t.Fatal(err)
		}
		if _, err := r.exec.Do(ctx, mustAction(t, s), hci.SourceAgent); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	// A failed action is a step too, with its error.
	if _, err := r.exec.Do(ctx, mustAction(t, `{"action":"key","text":"NoSuchKey"}`), hci.SourceAgent); err == nil {
		t.Fatal("an unknown key name did not fail")
	}
	reward := 1.0
	meta, err := rec.Stop(ctx, &Outcome{Reward: &reward, Done: true, Reasons: []string{"the screen is painted"}})
	if err != nil {
		t.Fatal(err)
	}
	if meta.Status != StatusComplete || meta.Source != "agent" || meta.Outcome == nil || *meta.Outcome.Reward != 1 {
		t.Errorf("episode.json after stop: status %s, source %s, outcome %+v", meta.Status, meta.Source, meta.Outcome)
	}
	if st := rec.Status(); st.Recording || st.Last == nil || st.Last.ID != "agent run/1" {
		t.Errorf("status after stop: %+v", st)
	}

	got, err := Open(ep.Dir())
	if err != nil {
		t.Fatal(err)
	}
	m := got.Meta
	if m.Screen != (Size{1920, 1200}) || m.Model != (Size{1280, 800}) || m.Task == nil || m.Task.ID != "paint" ||
		m.SchemaVersion != SchemaVersion || m.Clock.Wall.IsZero() || m.Clock.MonotonicNS == 0 || m.Clock.ExecutorNS == nil {
		t.Errorf("episode.json: %+v", m)
	}
	var want []string
	for _, s := range append(script, `{"action":"key","text":"NoSuchKey"}`) {
		want = append(want, mustAction(t, s).String())
	}
	var acts []string
	for _, s := range got.Steps {
		acts = append(acts, s.Action.String())
	}
	if !reflect.DeepEqual(acts, want) {
		t.Fatalf("steps.jsonl actions:\n%s\nwant\n%s", strings.Join(acts, "\n"), strings.Join(want, "\n"))
	}
	if len(got.Events) != len(want) || m.Counts.Events != len(want) || m.Counts.Steps != len(want) {
		t.Errorf("%d events (counted %d), %d steps counted; want %d", len(got.Events), m.Counts.Events, m.Counts.Steps, len(want))
	}
	prevEnd := -1.0
	for i, s := range got.Steps {
		if s.Step != i || s.Source != hci.SourceAgent || !reflect.DeepEqual(s.Events, []int{i, i}) {
			t.Errorf("step %d: number %d, source %s, events %v", i, s.Step, s.Source, s.Events)
		}
		if s.TStart < prevEnd || s.TEnd < s.TStart {
			t.Errorf("step %d times %g..%g out of order (previous ended %g)", i, s.TStart, s.TEnd, prevEnd)
		}
		prevEnd = s.TEnd
		if s.Before == "" || s.After == "" {
			t.Errorf("step %d has no observation before (%q) or after (%q)", i, s.Before, s.After)
			continue
		}
		for _, f := range []string{s.Before, s.After} {
			b, err := os.ReadFile(filepath.Join(ep.Dir(), f))
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := png.DecodeConfig(bytes.NewReader(b))
			if err != nil || cfg.Width != 1280 || cfg.Height != 800 {
				t.Errorf("step %d observation %s: %dx%d, %v; want a 1280x800 PNG (model space)", i, f, cfg.Width, cfg.Height, err)
			}
		}
	}
	if got.Steps[0].After == got.Steps[0].Before {
		t.Errorf("the first step's observations before and after are the same file %s although the screen changed", got.Steps[0].Before)
	}
	if got.Steps[len(got.Steps)-1].Err == "" {
		t.Error("the failed action's step has no error")
	}
	checkVideo(t, got)
}

// checkVideo checks the segments and the frame index: every segment starts
// with SPS, PPS and an IDR frame, frames are where the index says, and
// times only go forward.
func checkVideo(t *testing.T, got *Recording) {
	t.Helper()
	if len(got.Frames) == 0 || got.Meta.Counts.Segments == 0 {
		t.Fatalf("no video: %d frames, %d segments", len(got.Frames), got.Meta.Counts.Segments)
	}
	segs := map[int][]byte{}
	var last int64 = -1
	for i, f := range got.Frames {
		if f.N != i {
			t.Errorf("frame %d numbered %d", i, f.N)
		}
		if f.PTS <= last {
			t.Errorf("frame %d pts %d does not follow %d", i, f.PTS, last)
		}
		last = f.PTS
		b, ok := segs[f.Segment]
		if !ok {
			var err error
			if b, err = os.ReadFile(filepath.Join(got.Dir, VideoDir, fmt.Sprintf("%06d.h264", f.Segment))); err != nil {
				t.Fatal(err)
			}
			segs[f.Segment] = b
			if f.Index != 0 || !f.Key {
				t.Errorf("segment %d starts with frame index %d key %v; want a keyframe first", f.Segment, f.Index, f.Key)
			}
			nals := codec.SplitNALs(b)
			if len(nals) < 3 || codec.NALType(nals[0]) != 7 || codec.NALType(nals[1]) != 8 {
				t.Errorf("segment %d does not start with SPS and PPS", f.Segment)
			}
			idr := false
			for _, n := range nals {
				if codec.NALType(n) == 5 {
					idr = true
					break
				}
				if codec.NALType(n) == 1 {
					break
				}
			}
			if !idr {
				t.Errorf("segment %d: the first slice is not IDR", f.Segment)
			}
		}
		if f.Offset+int64(f.Size) > int64(len(b)) || !bytes.HasPrefix(b[f.Offset:], []byte{0, 0, 0, 1}) && !bytes.HasPrefix(b[f.Offset:], []byte{0, 0, 1}) {
			t.Errorf("frame %d: offset %d size %d does not point at an access unit in a %d-byte segment", i, f.Offset, f.Size, len(b))
		}
	}
	if len(segs) < 2 {
		t.Errorf("%d segment(s) in an episode longer than two segment lengths", len(segs))
	}
}

// A person's input through hci primitives is kept raw and reduced to steps,
// with coordinates in model space.
func TestRecordHumanInput(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := newRig(t, 1920, 1200, "")
	rec := r.recorder(t, t.TempDir(), Options{FPS: -1})
	ep, err := rec.Start(ctx, EpisodeInfo{ID: "person"})
	if err != nil {
		t.Fatal(err)
	}
	h := hci.SourceHuman
	key := func(name string) {
		k, err := hci.KeysymByName(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.exec.KeyDown(ctx, k, h); err != nil {
			t.Fatal(err)
		}
		if err := r.exec.KeyUp(ctx, k, h); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(r.exec.MoveTo(ctx, 300, 450, h))
	must(r.exec.ButtonDown(ctx, 1, h))
	must(r.exec.ButtonUp(ctx, 1, h))
	time.Sleep(700 * time.Millisecond)
	must(r.exec.KeyDown(ctx, hci.KeysymShiftL, h))
	key("H")
	must(r.exec.KeyUp(ctx, hci.KeysymShiftL, h))
	key("i")
	key("BackSpace")
	key("o")
	// Paused: none of this may be recorded.
	must(rec.Pause(ctx))
	key("s")
	key("e")
	key("c")
	must(rec.Resume(ctx))
	time.Sleep(600 * time.Millisecond)
	must(r.exec.Wheel(ctx, 0, 2, h))
	meta, err := rec.Stop(ctx, nil)
	must(err)
	got, err := Open(ep.Dir())
	must(err)
	want := []string{
		`{"action":"left_click","coordinate":[200,300]}`,
		`{"action":"type","text":"Hi"}`,
		`{"action":"key","text":"BackSpace"}`,
		`{"action":"type","text":"o"}`,
		`{"action":"scroll","coordinate":[200,300],"scroll_direction":"down","scroll_amount":2}`,
	}
	if acts := actions(got.Steps); !reflect.DeepEqual(acts, want) {
		t.Errorf("steps:\n%s\nwant\n%s", strings.Join(acts, "\n"), strings.Join(want, "\n"))
	}
	// Reducing input.jsonl again gives the same steps, links aside.
	again := Reduce(got.Events, hci.Space{ScreenW: 1920, ScreenH: 1200, ModelW: 1280, ModelH: 800})
	for i := range got.Steps {
		s := got.Steps[i]
		s.Before, s.After = "", ""
		if i >= len(again) || !reflect.DeepEqual(s, again[i]) {
			t.Errorf("re-reduced step %d differs:\n%+v\n%+v", i, s, again)
			break
		}
	}
	for _, ev := range got.Events {
		if ev.Key == "s" || ev.Key == "e" || ev.Key == "c" {
			t.Errorf("input while paused was recorded: %+v", ev)
		}
	}
	if len(meta.Pauses) != 1 || meta.Pauses[0].End == nil || meta.Source != "human" {
		t.Errorf("pauses %+v, source %s; want one closed pause, human", meta.Pauses, meta.Source)
	}
	markers := 0
	for _, ev := range got.Events {
		if ev.Kind == KindPause || ev.Kind == KindResume {
			markers++
		}
	}
	if markers != 2 {
		t.Errorf("%d pause/resume markers in input.jsonl, want 2", markers)
	}
}

func TestStartStopErrors(t *testing.T) {
	ctx := context.Background()
	r := newRig(t, 640, 480, "")
	rec := r.recorder(t, t.TempDir(), Options{FPS: -1})
	tests := []struct {
		name string
		do   func() error
		want string
	}{
		{"stop before start", func() error { _, err := rec.Stop(ctx, nil); return err }, "not recording"},
		{"pause before start", func() error { return rec.Pause(ctx) }, "not recording"},
		{"unknown source", func() error { _, err := rec.Start(ctx, EpisodeInfo{Source: "robot"}); return err }, `source "robot" is not known`},
		{"id too long", func() error { _, err := rec.Start(ctx, EpisodeInfo{ID: strings.Repeat("x", 300)}); return err }, "at most 255"},
		{"start twice", func() error {
			if _, err := rec.Start(ctx, EpisodeInfo{ID: "one"}); err != nil {
				return err
			}
			_, err := rec.Start(ctx, EpisodeInfo{ID: "two"})
			return err
		}, "already recording episode one"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if _, err := New("", r.exec, r.shooter, r.capt, Options{}); err == nil {
		t.Error("New without a directory did not fail")
	}
}

// The child side of TestKillDashNine: record an agent that acts until it is
// killed.
func TestMain(m *testing.M) {
	if dir := os.Getenv("DESKENV_RECORD_CHILD_DIR"); dir != "" {
		os.Exit(childRecorder(dir, os.Getenv("DESKENV_RECORD_CHILD_DISPLAY")))
	}
	os.Exit(m.Run())
}

func childRecorder(dir, disp string) int {
	ctx := context.Background()
	d, err := display.Start(ctx, display.Config{Attach: disp})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	ex, err := hci.NewExecutor(d, hci.Options{})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	capt, err := screen.NewCapturer(d)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	sp := ex.Space()
	sh := screen.NewShooter(capt, screen.ShooterOptions{ModelW: sp.ModelW, ModelH: sp.ModelH})
	rec, err := New(dir, ex, sh, capt, Options{FPS: 10, SegmentSeconds: 1, InputQuiet: 10 * time.Millisecond,
		Settle: screen.SettleOptions{Quiet: 10 * time.Millisecond, Max: 50 * time.Millisecond}})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	ep, err := rec.Start(ctx, EpisodeInfo{ID: "killed", TaskID: "t", Source: "agent"})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("dir", ep.Dir())
	for i := 0; ; i++ {
		a := hci.Action{Action: hci.ActMouseMove, Coordinate: []int{i % 600, (i * 7) % 400}}
		if _, err := ex.Do(ctx, a, hci.SourceAgent); err != nil {
			fmt.Println("error", err)
			return 1
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill -9 in the middle of an episode: what was written before stays, at most
// the last line of a file is lost, and the episode opens as incomplete.
func TestKillDashNine(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := newRig(t, 800, 600, "")
	dir := t.TempDir()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "DESKENV_RECORD_CHILD_DIR="+dir, "DESKENV_RECORD_CHILD_DISPLAY="+r.d.Name())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		t.Fatal("the child said nothing")
	}
	epDir, ok := strings.CutPrefix(sc.Text(), "dir ")
	if !ok {
		t.Fatalf("the child said %q", sc.Text())
	}
	// Let it record a few seconds: many steps, several segments.
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, _ := os.ReadFile(filepath.Join(epDir, StepsFile))
		if bytes.Count(b, []byte("\n")) >= 60 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond)
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	cmd.Wait()
	// What the files held at the moment of death.
	raw := map[string][]byte{}
	for _, f := range []string{InputFile, StepsFile, ShotsFile, FramesFile} {
		raw[f], _ = os.ReadFile(filepath.Join(epDir, f))
	}

	got, err := Open(epDir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Meta.Status != StatusIncomplete || got.Live {
		t.Errorf("status %q live %v after kill -9; want incomplete, not live", got.Meta.Status, got.Live)
	}
	if got.Torn > 4 {
		t.Errorf("%d torn lines; at most one per file", got.Torn)
	}
	for _, c := range []struct {
		file string
		n    int
	}{{InputFile, len(got.Events)}, {StepsFile, len(got.Steps)}, {ShotsFile, len(got.Shots)}, {FramesFile, len(got.Frames)}} {
		complete := bytes.Count(raw[c.file], []byte("\n"))
		if c.n != complete {
			t.Errorf("%s: opened %d lines, %d complete lines were on disk", c.file, c.n, complete)
		}
		if c.n == 0 {
			t.Errorf("%s is empty", c.file)
		}
	}
	if len(got.Steps) < 60 {
		t.Errorf("only %d steps survived", len(got.Steps))
	}
	for i, s := range got.Steps {
		if s.Step != i {
			t.Fatalf("step %d numbered %d: a line was lost in the middle", i, s.Step)
		}
	}
	// The index never points past what the segment holds.
	for _, f := range got.Frames {
		fi, err := os.Stat(filepath.Join(epDir, VideoDir, fmt.Sprintf("%06d.h264", f.Segment)))
		if err != nil || fi.Size() < f.Offset+int64(f.Size) {
			t.Fatalf("frame %d points past the end of segment %d: %v", f.N, f.Segment, err)
		}
	}
	// Repair writes it down; a new recorder in the same directory does so too.
	fixed, err := Repair(epDir)
	if err != nil || !fixed {
		t.Fatalf("Repair = %v, %v", fixed, err)
	}
	again, err := Open(epDir)
	if err != nil {
		t.Fatal(err)
	}
	// Repair keeps every step that was on disk and rebuilds those whose
	// action reached input.jsonl but whose after was never observed (the
	// action in flight at the kill), each marked after_missing.
	if again.Meta.Status != StatusIncomplete || again.Meta.Error == "" || again.Torn != 0 ||
		again.Meta.Counts.Steps != len(again.Steps) || len(again.Steps) < len(got.Steps) {
		t.Errorf("after Repair: status %s, error %q, torn %d, steps %d in episode.json, %d on disk (%d before)",
			again.Meta.Status, again.Meta.Error, again.Torn, again.Meta.Counts.Steps, len(again.Steps), len(got.Steps))
	}
	for i, s := range again.Steps {
		if rebuilt := i >= len(got.Steps); s.AfterMissing != rebuilt || s.Step != i {
			t.Errorf("step %d after Repair: numbered %d, after_missing %v, want %v", i, s.Step, s.AfterMissing, rebuilt)
		}
	}
	var m Meta
	b, _ := os.ReadFile(filepath.Join(epDir, MetaFile))
	if err := json.Unmarshal(b, &m); err != nil || m.Status != StatusIncomplete {
		t.Errorf("episode.json on disk after Repair: %s, %v", m.Status, err)
	}
}

// Decoding a recorded observation gives the model-space size; used by the
// export tests too.
func decodePNG(t testing.TB, b []byte) image.Image {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return img
}
