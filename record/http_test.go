package record

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/deskenv/deskenv/lifecycle"
)

func TestHTTP(t *testing.T) {
	r := newRig(t, 640, 480, "")
	lc := lifecycle.NewBus()
	t.Cleanup(func() { lc.Close() })
	plane := fakePlane(t, lc, 0.5)
	rec := r.recorder(t, t.TempDir(), Options{FPS: -1, Lifecycle: lc})
	lc.Publish(lifecycle.Event{Kind: lifecycle.EpisodeStarted, Episode: lifecycle.Episode{ID: "ep-7", TaskID: "hello-file", Instruction: "make hello.txt"}})
	// No wait for the bus: starting a recording catches up with it first.
	srv := httptest.NewServer(rec.Handler())
	defer srv.Close()
	call := func(method, path, body string, hdr ...string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var v map[string]any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s %s: not JSON: %s", method, path, b)
		}
		return resp.StatusCode, v
	}
	tests := []struct {
		name, method, path, body string
		hdr                      []string
		status                   int
		check                    func(map[string]any) bool
	}{
		{"status idle", "GET", "/api/recording", "", nil, 200, func(v map[string]any) bool { return v["recording"] == false }},
		{"stop idle", "POST", "/api/recording/stop", "", nil, 409, func(v map[string]any) bool { return strings.Contains(v["error"].(string), "not recording") }},
		{"bad body", "POST", "/api/recording/start", `{"tasks":"x"}`, nil, 400, func(v map[string]any) bool { return strings.Contains(v["error"].(string), "unknown field") }},
		{"bad source", "POST", "/api/recording/start", `{"source":"cat"}`, nil, 400, func(v map[string]any) bool { return strings.Contains(v["error"].(string), "not known") }},
		{"cross origin", "POST", "/api/recording/start", "", []string{"Origin", "http://evil.example"}, 403, func(v map[string]any) bool { return v["error"] != nil }},
		{"start another episode's id", "POST", "/api/recording/start", `{"episode_id":"ep-6"}`, nil, 400, func(v map[string]any) bool {
			return strings.Contains(v["error"].(string), `is not the running episode "ep-7"`)
		}},
		{"start the running episode's id under another task", "POST", "/api/recording/start", `{"episode_id":"ep-7","task_id":"other"}`, nil, 400, func(v map[string]any) bool {
			return strings.Contains(v["error"].(string), `runs task "hello-file"`)
		}},
		{"start takes the control plane's episode", "POST", "/api/recording/start", "", nil, 201, func(v map[string]any) bool {
			ep, _ := v["episode"].(map[string]any)
			return v["recording"] == true && ep["episode_id"] == "ep-7" && ep["task_id"] == "hello-file"
		}},
		{"start again", "POST", "/api/recording/start", "", nil, 409, func(v map[string]any) bool { return strings.Contains(v["error"].(string), "already recording") }},
		{"pause", "POST", "/api/recording/pause", "", nil, 200, func(v map[string]any) bool { return v["paused"] == true }},
		{"resume", "POST", "/api/recording/resume", "", nil, 200, func(v map[string]any) bool { return v["paused"] == false }},
		{"bad reward", "POST", "/api/recording/stop", `{"reward":2}`, nil, 400, func(v map[string]any) bool { return strings.Contains(v["error"].(string), "between 0 and 1") }},
		{"stop ending the episode", "POST", "/api/recording/stop", `{"end_episode":true}`, nil, 200, func(v map[string]any) bool {
			last, _ := v["last"].(map[string]any)
			out, _ := last["outcome"].(map[string]any)
			return v["recording"] == false && last["status"] == "complete" && out["reward"] == 0.5 && out["done"] == true
		}},
		{"start an ended episode", "POST", "/api/recording/start", `{"episode_id":"ep-7"}`, nil, 400, func(v map[string]any) bool {
			return strings.Contains(v["error"].(string), `episode "ep-7" has ended`)
		}},
		{"unknown endpoint", "POST", "/api/recording/rewind", "", nil, 404, func(v map[string]any) bool { return v["error"] != nil }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, v := call(tc.method, tc.path, tc.body, tc.hdr...)
			if status != tc.status || !tc.check(v) {
				t.Errorf("%s %s: %d %v; want %d", tc.method, tc.path, status, v, tc.status)
			}
		})
	}
	if got := plane.ended(); len(got) != 1 || got[0] != "ep-7" {
		t.Errorf("the control plane was asked to end %v, want [ep-7]", got)
	}
}

// plane stands in for the control plane on the lifecycle bus: it ends
// every episode it is asked to end with one reward and a reason.
type plane struct {
	mu   sync.Mutex
	ends []string
}

func (p *plane) ended() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.ends...)
}

func fakePlane(t *testing.T, lc *lifecycle.Bus, reward float64) *plane {
	p := &plane{}
	ch, cancel := lc.Subscribe(16)
	t.Cleanup(cancel)
	go func() {
		for ev := range ch {
			if ev.Kind != lifecycle.EndRequested {
				continue
			}
			p.mu.Lock()
			p.ends = append(p.ends, ev.Episode.ID)
			p.mu.Unlock()
			if ev.Episode.ID == "no-such" {
				lc.Publish(lifecycle.Event{Kind: lifecycle.EndFailed, Episode: ev.Episode, Err: "no episode no-such"})
				continue
			}
			success := false
			lc.Publish(lifecycle.Event{Kind: lifecycle.EpisodeEnded, Episode: ev.Episode,
				Outcome: &lifecycle.Outcome{Reward: &reward, Success: &success, Done: true, Reasons: []string{"file_exists: false"}}})
		}
	}()
	return p
}

// TestStopOverridesTheChecker: a reward given beside end_episode is what
// episode.json keeps (issue 13: the episode-end hook used to stop the
// recording first and swallow it); the checker's reasons stay unless
// replaced.
func TestStopOverridesTheChecker(t *testing.T) {
	r := newRig(t, 320, 240, "")
	lc := lifecycle.NewBus()
	t.Cleanup(func() { lc.Close() })
	fakePlane(t, lc, 0)
	rec := r.recorder(t, t.TempDir(), Options{FPS: -1, Lifecycle: lc})
	lc.Publish(lifecycle.Event{Kind: lifecycle.EpisodeStarted, Episode: lifecycle.Episode{ID: "ep-1", TaskID: "t"}})
	srv := httptest.NewServer(rec.Handler())
	defer srv.Close()
	post := func(path, body string) (int, string) {
		resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if s, b := post("/api/recording/start", `{"episode_id":"ep-1"}`); s != 201 || !strings.Contains(b, `"task_id": "t"`) {
		t.Fatalf("start with the running episode's id: %d %s (want its task)", s, b)
	}
	if s, b := post("/api/recording/stop", `{"end_episode":true,"reward":1,"success":true}`); s != 200 {
		t.Fatalf("stop: %d %s", s, b)
	}
	m := rec.Status().Last
	if m == nil || m.Outcome == nil || m.Outcome.Reward == nil || *m.Outcome.Reward != 1 || m.Outcome.Success == nil || !*m.Outcome.Success ||
		!m.Outcome.Done || len(m.Outcome.Reasons) != 1 {
		t.Fatalf("episode.json's outcome = %+v, want reward 1, success, done, the checker's reason", m)
	}

	// Without a running episode there is nothing to end: 409, and the
	// recording goes on.
	if s, b := post("/api/recording/start", `{"episode_id":"mine"}`); s != 201 {
		t.Fatalf("start a recording of its own: %d %s", s, b)
	}
	if s, b := post("/api/recording/stop", `{"end_episode":true}`); s != 409 || !strings.Contains(b, "not the control plane's running episode") {
		t.Errorf("end_episode without a control-plane episode: %d %s", s, b)
	}
	if !rec.Status().Recording {
		t.Error("a refused stop stopped the recording")
	}
}

// TestStartCatchesUpWithTheBus: a recording started the moment after the
// control plane published its episode (POST /api/reset, then at once POST
// /api/recording/start) records that episode with its task, and the
// episode's end stops it, however late the bus delivers.
func TestStartCatchesUpWithTheBus(t *testing.T) {
	r := newRig(t, 320, 240, "")
	lc := lifecycle.NewBus()
	t.Cleanup(func() { lc.Close() })
	rec := r.recorder(t, t.TempDir(), Options{FPS: -1, Lifecycle: lc})
	ctx := t.Context()
	for i := range 50 {
		id, taskID := fmt.Sprintf("ep-%d", i), fmt.Sprintf("task-%d", i)
		lc.Publish(lifecycle.Event{Kind: lifecycle.EpisodeStarted, Episode: lifecycle.Episode{ID: id, TaskID: taskID}})
		ep, err := rec.Start(ctx, EpisodeInfo{})
		if err != nil {
			t.Fatalf("start %d: %v", i, err)
		}
		if ep.ID() != id {
			t.Fatalf("the recording started after %s began is %s", id, ep.ID())
		}
		if st := rec.Status(); st.Episode == nil || st.Episode.TaskID != taskID {
			t.Fatalf("recording %s: status %+v, want task %s", id, st.Episode, taskID)
		}
		lc.Publish(lifecycle.Event{Kind: lifecycle.EpisodeEnded, Episode: lifecycle.Episode{ID: id, TaskID: taskID},
			Outcome: &lifecycle.Outcome{Done: true}})
	}
	// The last end is handled before the next start, as every other was.
	if err := rec.caughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	if st := rec.Status(); st.Recording {
		t.Fatalf("still recording %+v after its episode ended", st.Episode)
	}
}
