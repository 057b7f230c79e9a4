// Package studio_test tries the annotator's studio as an annotator does: the
// real deskenv binary on an X server the test owns, the page in Debian's
// headless Chromium, an annotator token and nothing else.
package studio_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/deskenv/deskenv/auth"
	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/e2e/browser"
	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/record"
)

const (
	annotatorA = "annotator-a-0123456789abcdef"
	annotatorB = "annotator-b-0123456789abcdef"
)

// errorTrap runs in the page before its scripts: every console error,
// uncaught exception and unhandled rejection is kept for the test to read.
const errorTrap = `(() => {
  window.__errors = [];
  addEventListener('error', (e) => window.__errors.push('error: ' + e.message));
  addEventListener('unhandledrejection', (e) => window.__errors.push('rejection: ' + String(e.reason)));
  const ce = console.error.bind(console);
  console.error = (...a) => { window.__errors.push('console: ' + a.join(' ')); ce(...a); };
})();`

// leaving asks the page whether it would stop a person leaving it: a
// cancelled beforeunload is what makes the browser ask.
const leaving = `(() => { const e = new Event('beforeunload', { cancelable: true }); dispatchEvent(e); return e.defaultPrevented; })()`

// TestAnnotatorDemonstrates: an annotator with only an annotator token opens
// the page, finds hello-file in the task panel, starts it with the keyboard,
// sees the instruction, types the solution into the desktop's terminal,
// presses Finish and sees reward 1 with the checker's reasons. The episode
// is its own in the episode list, with recorded_by; another annotator can
// neither see nor review it.
func TestAnnotatorDemonstrates(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	testrig.NeedTools(t, "openbox", "xterm", "xdotool")
	root := testrig.ModuleRoot(t)
	bin := testrig.BuildDeskenv(ctx, t)

	// The X server is the test's, so it can find the terminal with
	// xdotool; deskenv attaches to it (--display) as it would to a
	// person's.
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, ".bashrc"), []byte("PS1='$ '\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := testrig.Display(t, display.Config{Home: home, WindowManager: []string{"openbox"}, Apps: [][]string{}})
	episodes := t.TempDir()
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("annotator="+annotatorA+"\nannotator="+annotatorB+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := startDeskenv(t, bin, d, "--display", d.Name(), "--wm", "", "--apps", "", "--home", home,
		"--tasks", filepath.Join(root, "tasks"), "--episodes", episodes, "--tokens-file", tokens)

	var console syncBuffer
	drv := startDriverTo(ctx, t, &console)
	shots := t.TempDir()
	if dir := os.Getenv("DESKENV_STUDIO_SHOTS"); dir != "" {
		shots = dir // docs/STUDIO.md's images come from here
	}
	do(ctx, t, drv, "open", map[string]any{"page": "a", "url": base + "/?token=" + annotatorA, "initScript": errorTrap}, nil)
	waitFor(ctx, t, drv, "a", `deskenv.state === 'connected' && deskenv.video.videoWidth > 0`, "the page never showed video")
	waitFor(ctx, t, drv, "a", `!document.getElementById('studio').hidden && document.querySelectorAll('#task-list button').length > 1`,
		"the task panel never showed the tasks to the annotator")

	// Search, then Enter picks the match and moves to Start; Enter starts.
	do(ctx, t, drv, "focus", map[string]any{"page": "a", "selector": "#task-search"}, nil)
	do(ctx, t, drv, "type", map[string]any{"page": "a", "text": "hello-file"}, nil)
	var listed []string
	do(ctx, t, drv, "eval", map[string]any{"page": "a", "expr": `[...document.querySelectorAll('#task-list button')].map((b) => b.dataset.task + ':' + b.getAttribute('aria-pressed'))`}, &listed)
	if !reflect.DeepEqual(listed, []string{"hello-file:true"}) {
		t.Fatalf("the search for hello-file lists %v, want hello-file alone, chosen", listed)
	}
	do(ctx, t, drv, "screenshot", map[string]any{"page": "a", "path": filepath.Join(shots, "studio-search.png")}, nil)
	do(ctx, t, drv, "press", map[string]any{"page": "a", "key": "Enter"}, nil)
	var focused string
	do(ctx, t, drv, "eval", map[string]any{"page": "a", "expr": `document.activeElement.id`}, &focused)
	if focused != "task-start" {
		t.Fatalf("Enter in the search left the focus on %q, want the Start button", focused)
	}
	do(ctx, t, drv, "press", map[string]any{"page": "a", "key": "Enter"}, nil)
	waitFor(ctx, t, drv, "a", `!document.getElementById('studio-run').hidden`, "Start did not start the episode")
	var run struct {
		Task, Instruction, Seed string
	}
	do(ctx, t, drv, "eval", map[string]any{"page": "a", "expr": `({task: document.getElementById('run-task').textContent,
		instruction: document.getElementById('run-instruction').textContent, seed: document.getElementById('run-seed').textContent})`}, &run)
	if run.Task != "hello-file" || !strings.Contains(run.Instruction, "hello.txt") || !regexp.MustCompile(`^\d+$`).MatchString(run.Seed) {
		t.Fatalf("the panel shows %+v, want hello-file, its instruction and a seed", run)
	}
	// The panel asked for control on Start.
	waitFor(ctx, t, drv, "a", `deskenv.canAct`, "the annotator did not get control")
	var guards bool
	do(ctx, t, drv, "eval", map[string]any{"page": "a", "expr": leaving}, &guards)
	if !guards {
		t.Error("leaving the page mid-episode does not ask first (beforeunload not cancelled)")
	}

	cx, cy := windowCentre(ctx, t, d, "deskenv terminal")
	testrig.WaitShellReady(ctx, t, d, "deskenv terminal")
	const cmdline = "echo hello world > ~/hello.txt"
	do(ctx, t, drv, "click", map[string]any{"page": "a", "vx": cx, "vy": cy}, nil)
	do(ctx, t, drv, "type", map[string]any{"page": "a", "text": cmdline}, nil)
	do(ctx, t, drv, "press", map[string]any{"page": "a", "key": "Enter"}, nil)
	testrig.WaitFor(t, "the demonstration to write ~/hello.txt", func() bool {
		b, err := os.ReadFile(filepath.Join(home, "hello.txt"))
		return err == nil && string(b) == "hello world\n"
	})
	waitFor(ctx, t, drv, "a", `Number(document.getElementById('run-steps').textContent) >= 3`, "the step counter never reached 3")
	do(ctx, t, drv, "screenshot", map[string]any{"page": "a", "path": filepath.Join(shots, "studio-panel.png")}, nil)
	privacyKey(ctx, t, drv, base)

	// Finish, from the keyboard.
	do(ctx, t, drv, "focus", map[string]any{"page": "a", "selector": "#run-finish"}, nil)
	do(ctx, t, drv, "press", map[string]any{"page": "a", "key": "Enter"}, nil)
	waitFor(ctx, t, drv, "a", `!document.getElementById('studio-result').hidden`, "Finish did not show a result")
	var result struct {
		Reward  string
		Reasons []string
	}
	do(ctx, t, drv, "eval", map[string]any{"page": "a", "expr": `({reward: document.getElementById('result-reward').textContent,
		reasons: [...document.querySelectorAll('#result-reasons li')].map((li) => li.textContent)})`}, &result)
	if !strings.HasPrefix(result.Reward, "reward 1") || len(result.Reasons) == 0 {
		t.Fatalf("the result shows %+v, want reward 1 with the checker's reasons", result)
	}
	t.Logf("result: %s; reasons: %q", result.Reward, result.Reasons)
	do(ctx, t, drv, "eval", map[string]any{"page": "a", "expr": leaving}, &guards)
	if guards {
		t.Error("after Finish, leaving the page still asks (beforeunload cancelled)")
	}
	do(ctx, t, drv, "screenshot", map[string]any{"page": "a", "path": filepath.Join(shots, "studio-result.png")}, nil)
	var errs []string
	do(ctx, t, drv, "eval", map[string]any{"page": "a", "expr": `window.__errors`}, &errs)
	if len(errs) > 0 {
		t.Errorf("the page logged errors: %q", errs)
	}

	// The episode is the annotator's, in the list with its name.
	var list struct {
		Episodes []record.EpisodeSummary `json:"episodes"`
	}
	if code := getJSON(t, base+"/api/recording/episodes", annotatorA, &list); code != 200 || len(list.Episodes) != 1 {
		t.Fatalf("the annotator's episodes: %d %+v", code, list)
	}
	ep := list.Episodes[0]
	if ep.TaskID != "hello-file" || ep.RecordedBy != "annotator:"+auth.TokenID(annotatorA) || ep.Reward == nil || *ep.Reward != 1 {
		t.Errorf("the episode is listed as %+v, want hello-file, recorded by annotator:%s, reward 1", ep, auth.TokenID(annotatorA))
	}
	got, err := record.Open(filepath.Join(episodes, ep.Dir))
	if err != nil {
		t.Fatal(err)
	}
	var acts []string
	for _, s := range got.Steps {
		acts = append(acts, s.Action.String())
	}
	want := []string{
		fmt.Sprintf(`{"action":"left_click","coordinate":[%d,%d]}`, cx, cy),
		`{"action":"type","text":"echo hello world > ~/hello.txt"}`,
		`{"action":"key","text":"Return"}`,
	}
	if !reflect.DeepEqual(acts, want) {
		t.Errorf("the demonstration reduced to\n  %s\nwant\n  %s", strings.Join(acts, "\n  "), strings.Join(want, "\n  "))
	}

	// Another annotator neither sees nor reviews it.
	var other struct {
		Episodes []record.EpisodeSummary `json:"episodes"`
	}
	if code := getJSON(t, base+"/api/recording/episodes", annotatorB, &other); code != 200 || len(other.Episodes) != 0 {
		t.Errorf("another annotator's list: %d %+v, want 200 and empty", code, other)
	}
	req, _ := http.NewRequest("PUT", base+"/api/recording/episodes/"+ep.ID+"/review", strings.NewReader(`{"status":"rejected"}`))
	req.Header.Set("Authorization", "Bearer "+annotatorB)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Errorf("another annotator's review: %d %s, want 403", resp.StatusCode, b)
	}
	if rev, err := record.ReadReview(filepath.Join(episodes, ep.Dir)); err != nil || rev.Status != record.ReviewUnreviewed {
		t.Errorf("the refused review left %+v, %v", rev, err)
	}

	// Next task, then Start and Discard: nothing of that episode is left.
	do(ctx, t, drv, "eval", map[string]any{"page": "a", "expr": `document.getElementById('result-next').click(), true`}, nil)
	waitFor(ctx, t, drv, "a", `!document.getElementById('studio-pick').hidden && !document.getElementById('task-start').disabled`, "Next task did not bring back the list")
	do(ctx, t, drv, "eval", map[string]any{"page": "a", "expr": `document.getElementById('task-start').click(), true`}, nil)
	waitFor(ctx, t, drv, "a", `!document.getElementById('studio-run').hidden`, "the second Start did not start")
	var second string
	do(ctx, t, drv, "eval", map[string]any{"page": "a", "expr": `deskenv.studio.run.episode`}, &second)
	do(ctx, t, drv, "eval", map[string]any{"page": "a", "expr": `document.getElementById('run-discard').click(), true`}, nil)
	do(ctx, t, drv, "eval", map[string]any{"page": "a", "expr": `document.getElementById('run-discard').click(), true`}, nil)
	waitFor(ctx, t, drv, "a", `!document.getElementById('studio-pick').hidden && deskenv.studio.run === null`, "Discard did not end the episode")
	ents, err := os.ReadDir(episodes)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != ep.Dir {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("after discarding %s the episodes directory holds %v, want %s alone", second, names, ep.Dir)
	}
	do(ctx, t, drv, "eval", map[string]any{"page": "a", "expr": `window.__errors`}, &errs)
	if len(errs) > 0 {
		t.Errorf("the page logged errors: %q", errs)
	}
	if strings.Contains(console.String(), "[a error]") || strings.Contains(console.String(), "[a pageerror]") {
		t.Errorf("the annotator's page logged console errors:\n%s", console.String())
	}

	reviewEpisode(ctx, t, drv, &console, reviewCase{bin: bin, episodes: episodes, shots: shots, ep: ep, cx: cx, cy: cy})
}

// privacyKey: Ctrl+Alt+P on the desktop pauses the recording (the marker
// says so, the recorder agrees) and again resumes it; the page sends the
// desktop no P (the steps checked after Finish would hold a ctrl+alt+p, or
// a stray ctrl or alt, if it had); the Pause button's title names the key.
func privacyKey(ctx context.Context, t *testing.T, drv *browser.Driver, base string) {
	t.Helper()
	var title string
	do(ctx, t, drv, "eval", map[string]any{"page": "a", "expr": `document.getElementById('rec-pause').title`}, &title)
	if !strings.Contains(title, "Ctrl+Alt+P") {
		t.Errorf("the Pause button's title %q does not name the privacy key", title)
	}
	// Every input message the page sends, to look for a P.
	do(ctx, t, drv, "eval", map[string]any{"page": "a", "expr": `(() => { const s = deskenv.session, send = s.sendInput.bind(s);
		window.__sent = []; s.sendInput = (m) => { window.__sent.push(m); return send(m); }; return true; })()`}, nil)
	do(ctx, t, drv, "focus", map[string]any{"page": "a", "selector": "#stage"}, nil)
	for _, want := range []bool{true, false} {
		do(ctx, t, drv, "press", map[string]any{"page": "a", "key": "Control+Alt+KeyP"}, nil)
		// The marker follows the stream's push, which can come before the
		// page has its answer; the page's word comes after it (a press
		// while the first is under way is not another toggle).
		marker, said := "REC", "recording resumed"
		if want {
			marker, said = "REC paused", "privacy pause: nothing is recorded until Ctrl+Alt+P again"
		}
		if err := drv.Do(ctx, "waitFor", map[string]any{"page": "a", "timeoutMs": 20000, "pollMs": 50,
			"expr": fmt.Sprintf(`document.getElementById('rec').textContent === %q && !document.getElementById('rec').hidden &&
				document.getElementById('toast').textContent === %q`, marker, said)}, nil); err != nil {
			var said string
			do(ctx, t, drv, "eval", map[string]any{"page": "a", "expr": `document.getElementById('toast').textContent`}, &said)
			var st map[string]any
			getJSON(t, base+"/api/recording", annotatorA, &st)
			t.Logf("recorder: %v", st)
			t.Fatalf("the marker never read %s after Ctrl+Alt+P (the page said %q): %v", marker, said, err)
		}
		var st struct{ Paused bool }
		if code := getJSON(t, base+"/api/recording", annotatorA, &st); code != 200 || st.Paused != want {
			t.Fatalf("after Ctrl+Alt+P the recorder says paused=%v (%d), want %v", st.Paused, code, want)
		}
	}
	var sent []struct {
		T string `json:"t"`
		K int    `json:"k"`
	}
	do(ctx, t, drv, "eval", map[string]any{"page": "a", "expr": `window.__sent`}, &sent)
	var downs []int
	for _, m := range sent {
		if m.T == "kd" {
			downs = append(downs, m.K)
		}
		if m.T == "kd" && (m.K == 'p' || m.K == 'P') {
			t.Errorf("the page sent the desktop a P key down (%#x) for the privacy key: %+v", m.K, sent)
		}
	}
	t.Logf("the privacy key sent the desktop key downs %#x and nothing else", downs)
}

type reviewCase struct {
	bin, episodes, shots string
	ep                   record.EpisodeSummary
	cx, cy               int
}

// reviewEpisode: the review page, opened from the desktop page's link,
// lists the annotator's episode with its task, source, who, reward and
// review status; the filters hide it and bring it back; opened, it shows the
// three steps with both observations loaded and the click's marker where
// the click was; Accept with a note stores the review, and deskenv export
// --review accepted then includes the episode while --review rejected
// leaves it out.
func reviewEpisode(ctx context.Context, t *testing.T, drv *browser.Driver, console *syncBuffer, rc reviewCase) {
	t.Helper()
	var href string
	do(ctx, t, drv, "eval", map[string]any{"page": "a", "expr": `(() => { const l = document.getElementById('review-link'); return l.hidden ? '' : l.href; })()`}, &href)
	if !strings.Contains(href, "review.html?token="+annotatorA) {
		t.Fatalf("the desktop page's review link is %q, want review.html with the link's token", href)
	}
	do(ctx, t, drv, "open", map[string]any{"page": "r", "url": href, "initScript": errorTrap}, nil)
	waitFor(ctx, t, drv, "r", `document.querySelectorAll('#episode-rows tr').length === 1`, "the review page never listed the episode")
	var row []string
	do(ctx, t, drv, "eval", map[string]any{"page": "r", "expr": `[...document.querySelectorAll('#episode-rows tr td')].map((td) => td.textContent)`}, &row)
	who := "annotator:" + auth.TokenID(annotatorA)
	if len(row) != 7 || row[0] != "hello-file"+rc.ep.ID || row[1] != "human" || row[2] != who || row[4] != "3" || row[5] != "1" || row[6] != "unreviewed" {
		t.Errorf("the review list's row reads %q, want hello-file (%s), human, %s, 3 steps, reward 1, unreviewed", row, rc.ep.ID, who)
	}
	filter := func(id, value string) int {
		var n int
		do(ctx, t, drv, "eval", map[string]any{"page": "r", "expr": fmt.Sprintf(`(() => { const s = document.getElementById(%q); s.value = %q;
			s.dispatchEvent(new Event('change')); return document.querySelectorAll('#episode-rows tr').length; })()`, id, value)}, &n)
		return n
	}
	for _, f := range []struct {
		id, value string
		rows      int
	}{{"f-status", "accepted", 0}, {"f-status", "unreviewed", 1}, {"f-source", "agent", 0}, {"f-source", "human", 1}, {"f-task", "hello-file", 1}} {
		if n := filter(f.id, f.value); n != f.rows {
			t.Errorf("filter %s=%s shows %d episodes, want %d", f.id, f.value, n, f.rows)
		}
	}

	// Open it from the keyboard.
	do(ctx, t, drv, "focus", map[string]any{"page": "r", "selector": "#episode-rows button"}, nil)
	do(ctx, t, drv, "press", map[string]any{"page": "r", "key": "Enter"}, nil)
	waitFor(ctx, t, drv, "r", `document.querySelectorAll('#steps .step').length === 3 &&
		[...document.querySelectorAll('#steps img')].length === 6 &&
		[...document.querySelectorAll('#steps img')].every((i) => i.complete && i.naturalWidth > 0)`,
		"the episode's three steps never showed with their six observations loaded")
	var view struct {
		Actions []string
		Typed   string
		Mark    struct{ DataX, DataY, X, Y, NW float64 }
	}
	do(ctx, t, drv, "eval", map[string]any{"page": "r", "expr": `(() => {
		const first = document.querySelector('#step-0 .before');
		const img = first.querySelector('img'), c = first.querySelector('circle.mark');
		const ir = img.getBoundingClientRect(), cr = c.getBoundingClientRect();
		const k = img.naturalWidth / ir.width;
		return {
			actions: [...document.querySelectorAll('#steps .action')].map((p) => p.textContent),
			typed: document.querySelector('#step-1 .typed q').textContent,
			mark: { dataX: Number(c.dataset.x), dataY: Number(c.dataset.y), nw: img.naturalWidth,
				x: (cr.left + cr.width / 2 - ir.left) * k, y: (cr.top + cr.height / 2 - ir.top) * k },
		};
	})()`}, &view)
	want := []string{
		fmt.Sprintf(`{"action":"left_click","coordinate":[%d,%d]}`, rc.cx, rc.cy),
		`{"action":"type","text":"echo hello world > ~/hello.txt"}`,
		`{"action":"key","text":"Return"}`,
	}
	if !reflect.DeepEqual(view.Actions, want) || view.Typed != "echo hello world > ~/hello.txt" {
		t.Errorf("the step view shows actions %q and typed %q, want %q", view.Actions, view.Typed, want)
	}
	// Drawn where the click was, on the observation's own pixels (the
	// marker's centre is the pixel's centre; a CSS pixel is about two of
	// the observation's at this size).
	m := view.Mark
	if int(m.DataX) != rc.cx || int(m.DataY) != rc.cy || abs(m.X-float64(rc.cx)-0.5) > 2.5 || abs(m.Y-float64(rc.cy)-0.5) > 2.5 {
		t.Errorf("the click marker is at (%.1f, %.1f) of the observation (data %v,%v), want the click (%d, %d)", m.X, m.Y, m.DataX, m.DataY, rc.cx, rc.cy)
	}
	t.Logf("click marker drawn at (%.1f, %.1f) on a %v px wide observation, the click was (%d, %d)", m.X, m.Y, m.NW, rc.cx, rc.cy)

	// The recorded video plays in the page (WebCodecs on a canvas), and a
	// step's button shows the frame on screen when that step began.
	waitFor(ctx, t, drv, "r", `deskenvReview.state.player && document.getElementById('video-canvas').dataset.frame === '0'`,
		"the recorded video never showed its first frame (or the page said why not in #ep-video)")
	var video struct {
		Want, Frames int
		Got          string
		Colours      int
	}
	do(ctx, t, drv, "eval", map[string]any{"page": "r", "expr": `(async () => {
		const st = deskenvReview.state, fr = st.player.frames, t0 = st.episode.steps[2].t_start * 1e6;
		let want = 0;
		fr.forEach((f, i) => { if (f.pts_us <= t0) want = i; });
		document.querySelector('#step-2 .step-video').click();
		const c = document.getElementById('video-canvas');
		for (let i = 0; i < 200 && c.dataset.frame !== String(want); i++) await new Promise((r) => setTimeout(r, 25));
		const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data, seen = new Set();
		for (let i = 0; i < px.length; i += 4 * 97) seen.add((px[i] << 16) | (px[i + 1] << 8) | px[i + 2]);
		return { want, frames: fr.length, got: c.dataset.frame, colours: seen.size };
	})()`}, &video)
	if video.Got != fmt.Sprint(video.Want) || video.Colours < 2 {
		t.Errorf("the video at step 2 shows frame %s with %d colours, want frame %d of %d (a picture)", video.Got, video.Colours, video.Want, video.Frames)
	}
	t.Logf("video: step 2 shows frame %s of %d, %d colours sampled", video.Got, video.Frames, video.Colours)
	do(ctx, t, drv, "eval", map[string]any{"page": "r", "expr": `deskenvReview.state.player.seek(0).then(() => document.getElementById('v-play').click()), true`}, nil)
	waitFor(ctx, t, drv, "r", fmt.Sprintf(`document.getElementById('video-canvas').dataset.frame === '%d'`, video.Frames-1), "Play did not play the video to its last frame")

	// Accept with a note, from the keyboard.
	const note = "clean run <ok>"
	do(ctx, t, drv, "focus", map[string]any{"page": "r", "selector": "#rv-note"}, nil)
	do(ctx, t, drv, "type", map[string]any{"page": "r", "text": note}, nil)
	do(ctx, t, drv, "focus", map[string]any{"page": "r", "selector": "#rv-accept"}, nil)
	do(ctx, t, drv, "press", map[string]any{"page": "r", "key": "Enter"}, nil)
	waitFor(ctx, t, drv, "r", `document.getElementById('rv-status').textContent === 'accepted'`, "Accept did not mark the episode accepted")
	do(ctx, t, drv, "eval", map[string]any{"page": "r", "expr": `window.scrollTo(0, 0), true`}, nil)
	do(ctx, t, drv, "screenshot", map[string]any{"page": "r", "path": filepath.Join(rc.shots, "studio-review.png")}, nil)
	rev, err := record.ReadReview(filepath.Join(rc.episodes, rc.ep.Dir))
	if err != nil || rev.Status != record.ReviewAccepted || rev.Note != note || rev.By != who {
		t.Errorf("review.json after Accept: %+v %v, want accepted, %q, by %s", rev, err, note, who)
	}

	// The exports filter on it.
	for _, c := range []struct {
		review string
		rows   int
	}{{"accepted", 3}, {"rejected", 0}} {
		out := filepath.Join(t.TempDir(), "steps.jsonl")
		cmd := exec.CommandContext(ctx, rc.bin, "export", "--format", "jsonl", "--review", c.review, "--out", out, rc.episodes)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("deskenv export --review %s: %v\n%s", c.review, err, b)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var r struct {
				EpisodeID string `json:"episode_id"`
			}
			if line != "" && json.Unmarshal([]byte(line), &r) == nil {
				ids = append(ids, r.EpisodeID)
			}
		}
		if len(ids) != c.rows || (c.rows > 0 && ids[0] != rc.ep.ID) {
			t.Errorf("deskenv export --review %s wrote rows of %q, want %d rows of %s", c.review, ids, c.rows, rc.ep.ID)
		}
	}

	var errs []string
	do(ctx, t, drv, "eval", map[string]any{"page": "r", "expr": `window.__errors`}, &errs)
	if len(errs) > 0 {
		t.Errorf("the review page logged errors: %q", errs)
	}
	if strings.Contains(console.String(), "[r error]") || strings.Contains(console.String(), "[r pageerror]") {
		t.Errorf("the review page logged console errors:\n%s", console.String())
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// TestViewerSeesNoPanel: a viewer's page has no task panel (the task list
// answers it 403), and no console error either.
func TestViewerSeesNoPanel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root := testrig.ModuleRoot(t)
	bin := testrig.BuildDeskenv(ctx, t)
	d := testrig.Display(t, display.Config{})
	const viewer = "viewer-0123456789abcdef"
	base := startDeskenv(t, bin, d, "--display", d.Name(), "--wm", "", "--apps", "", "--home", t.TempDir(),
		"--tasks", filepath.Join(root, "tasks"), "--episodes", t.TempDir(), "--viewer-token", viewer)
	var console syncBuffer
	drv := startDriverTo(ctx, t, &console)
	do(ctx, t, drv, "open", map[string]any{"page": "v", "url": base + "/?token=" + viewer, "initScript": errorTrap}, nil)
	waitFor(ctx, t, drv, "v", `deskenv.state === 'connected' && deskenv.video.videoWidth > 0 && deskenv.role !== undefined`, "the page never showed video")
	time.Sleep(3 * time.Second) // two of the recorder's poll periods: a poll would have failed by now
	var seen struct {
		Role          string
		Panel, Record bool
		Errors        []string
	}
	do(ctx, t, drv, "eval", map[string]any{"page": "v", "expr": `({role: deskenv.role, panel: !document.getElementById('studio').hidden,
		record: !document.getElementById('rec-btn').hidden, errors: window.__errors})`}, &seen)
	if seen.Role != "viewer" || seen.Panel || seen.Record || len(seen.Errors) > 0 {
		t.Errorf("the viewer's page: %+v, want role viewer, no task panel, no Record button, no errors", seen)
	}
	if strings.Contains(console.String(), "[v error]") {
		t.Errorf("the viewer's page logged console errors:\n%s", console.String())
	}
}

// syncBuffer is the driver's console output, written from its goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}
func (b *syncBuffer) String() string { b.mu.Lock(); defer b.mu.Unlock(); return b.buf.String() }

// startDeskenv runs bin with args on 127.0.0.1's free port, attached to d,
// until the test ends (SIGTERM), and returns its base URL once it is ready.
func startDeskenv(t *testing.T, bin string, d *display.Display, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(append(os.Environ(), d.Env()...), "XDG_DATA_HOME="+t.TempDir())
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var (
		mu  sync.Mutex
		buf bytes.Buffer
	)
	logs := func() string { mu.Lock(); defer mu.Unlock(); return buf.String() }
	ready := regexp.MustCompile(`deskenv is ready" url=http://([^/ ]+)/`)
	addr := make(chan string, 1)
	exited := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			buf.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if m := ready.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
		cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			t.Error("deskenv did not stop within 20 s of SIGTERM")
		}
		if t.Failed() {
			t.Logf("deskenv's log:\n%s", logs())
		}
	})
	select {
	case a := <-addr:
		return "http://" + a
	case <-exited:
		t.Fatalf("deskenv exited before it was ready:\n%s", logs())
	case <-time.After(60 * time.Second):
		t.Fatalf("deskenv did not become ready:\n%s", logs())
	}
	return ""
}

// startDriverTo starts the browser with the pages' console going to w (and
// to stderr with -v).
func startDriverTo(ctx context.Context, t *testing.T, w io.Writer) *browser.Driver {
	t.Helper()
	opt := browser.Options{Stderr: w}
	if testing.Verbose() {
		opt.Stderr = io.MultiWriter(w, os.Stderr)
	}
	d, err := browser.Start(ctx, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func do(ctx context.Context, t *testing.T, d *browser.Driver, cmd string, args map[string]any, out any) {
	t.Helper()
	if err := d.Do(ctx, cmd, args, out); err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
}

func waitFor(ctx context.Context, t *testing.T, d *browser.Driver, page, expr, what string) {
	t.Helper()
	if err := d.Do(ctx, "waitFor", map[string]any{"page": page, "expr": expr, "timeoutMs": 20000, "pollMs": 50}, nil); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// getJSON GETs u with token and decodes the answer into out.
func getJSON(t *testing.T, u, token string, out any) int {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	return resp.StatusCode
}

// windowCentre finds a window by title with xdotool and returns its centre
// in screen pixels (the video is the screen's size).
func windowCentre(ctx context.Context, t *testing.T, d *display.Display, title string) (int, int) {
	t.Helper()
	var out []byte
	testrig.WaitFor(t, "the window "+title, func() bool {
		cmd := exec.CommandContext(ctx, "xdotool", "search", "--name", title, "getwindowgeometry", "--shell")
		cmd.Env = append(os.Environ(), d.Env()...)
		var err error
		out, err = cmd.Output()
		return err == nil && bytes.Contains(out, []byte("WIDTH="))
	})
	v := map[string]int{}
	for _, line := range strings.Split(string(out), "\n") {
		if k, val, ok := strings.Cut(line, "="); ok {
			var n int
			fmt.Sscan(val, &n)
			v[k] = n
		}
	}
	return v["X"] + v["WIDTH"]/2, v["Y"] + v["HEIGHT"]/2
}
