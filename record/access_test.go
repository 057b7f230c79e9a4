package record

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/deskenv/deskenv/auth"
	"github.com/deskenv/deskenv/lifecycle"
)

// TestAnnotatorAccess: through a door with tokens, an annotator records,
// pauses and stops its own recording, sees and reviews its own episodes
// only, may not give itself a reward, gives up with reward 0, and discards
// its own episode so nothing of it is left on disk; another annotator is
// refused each of those (403), and an operator may do all of them.
func TestAnnotatorAccess(t *testing.T) {
	const (
		annA = "annotator-a-0123456789abcdef"
		annB = "annotator-b-0123456789abcdef"
		oper = "operator-0123456789abcdef"
		view = "viewer-0123456789abcdef"
	)
	a, err := auth.New(auth.Config{OperatorToken: oper, ViewerToken: view, Tokens: []auth.Token{
		{Role: auth.RoleAnnotator, Value: annA}, {Role: auth.RoleAnnotator, Value: annB}}})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, 320, 240, "")
	dir := t.TempDir()
	rec := r.recorder(t, dir, Options{FPS: -1})
	d := auth.NewDoor(a, auth.Limits{})
	rec.Register(d)
	// What the control plane asks before a reset (control.Config.ResetGuard).
	d.Handle("POST /reset-guard", auth.Policy{Roles: []auth.Role{auth.RoleAnnotator}}, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if err := rec.ResetGuard(req.Context()); err != nil {
			auth.WriteError(w, http.StatusConflict, err.Error())
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	srv := httptest.NewServer(d)
	defer srv.Close()
	call := func(tok, method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	whoA := "annotator:" + auth.TokenID(annA)

	steps := []struct {
		name, tok, method, path, body string
		status                        int
		has                           string
	}{
		{"viewer may not record", view, "POST", "/api/recording/start", `{}`, 403, "annotator or operator token"},
		{"A starts", annA, "POST", "/api/recording/start", `{"episode_id":"a1","task_id":"t","source":"human"}`, 201, `"recorded_by": "` + whoA + `"`},
		{"recorded_by is not the client's", annA, "POST", "/api/recording/start", `{"recorded_by":"operator"}`, 400, "unknown field"},
		{"B may not pause A's", annB, "POST", "/api/recording/pause", ``, 403, "may touch only the episodes it recorded"},
		{"B may not stop A's", annB, "POST", "/api/recording/stop", `{}`, 403, "may touch only"},
		{"B may not reset under A's", annB, "POST", "/reset-guard", ``, 409, "being recorded by someone else"},
		{"A may reset under its own", annA, "POST", "/reset-guard", ``, 204, ""},
		{"the operator may reset", oper, "POST", "/reset-guard", ``, 204, ""},
		{"A pauses", annA, "POST", "/api/recording/pause", ``, 200, `"paused": true`},
		{"A resumes", annA, "POST", "/api/recording/resume", ``, 200, `"paused": false`},
		{"no paths for annotators", annA, "GET", "/api/recording", ``, 200, `!"dir"`},
		{"paths for operators", oper, "GET", "/api/recording", ``, 200, `"dir": "` + dir},
		{"A may not set a reward", annA, "POST", "/api/recording/stop", `{"reward":1,"done":true}`, 403, "may not set reward"},
		{"give up with a reward", oper, "POST", "/api/recording/stop", `{"give_up":true,"reward":1}`, 400, "leave reward"},
		{"A gives up", annA, "POST", "/api/recording/stop", `{"give_up":true}`, 200, `"reward": 0`},
		{"B does not see A's last", annB, "GET", "/api/recording", ``, 200, `"recording": false`},
		{"A lists its own", annA, "GET", "/api/recording/episodes", ``, 200, `"recorded_by": "` + whoA + `"`},
		{"B may not read A's review", annB, "GET", "/api/recording/episodes/a1/review", ``, 403, "may touch only"},
		{"B may not review A's", annB, "PUT", "/api/recording/episodes/a1/review", `{"status":"rejected"}`, 403, "may touch only"},
		{"B may not discard A's", annB, "DELETE", "/api/recording/episodes/a1", ``, 403, "may touch only"},
		{"A reviews its own", annA, "PUT", "/api/recording/episodes/a1/review", `{"status":"accepted"}`, 200, `"by": "` + whoA + `"`},
		{"operator reads it", oper, "GET", "/api/recording/episodes/a1/review", ``, 200, `"status": "accepted"`},
		{"operator starts one", oper, "POST", "/api/recording/start", `{"episode_id":"o1"}`, 201, `"recorded_by": "operator:`},
		{"A may not stop the operator's", annA, "POST", "/api/recording/stop", `{}`, 403, "may touch only"},
		{"A may not reset under the operator's", annA, "POST", "/reset-guard", ``, 409, "being recorded by someone else"},
		{"A may not discard the operator's live one", annA, "DELETE", "/api/recording/episodes/o1", ``, 403, "may touch only"},
		{"operator stops with a reward", oper, "POST", "/api/recording/stop", `{"reward":1,"done":true}`, 200, `"reward": 1`},
		{"A may not read the operator's", annA, "GET", "/api/recording/episodes/o1/review", ``, 403, "may touch only"},
		{"unknown episode", annA, "DELETE", "/api/recording/episodes/nope", ``, 404, "no recorded episode"},
		{"A starts another", annA, "POST", "/api/recording/start", `{"episode_id":"a2"}`, 201, `"recording": true`},
		{"A discards it live", annA, "DELETE", "/api/recording/episodes/a2", ``, 200, `"discarded": "a2"`},
		{"nothing is recording", annA, "GET", "/api/recording", ``, 200, `"recording": false`},
		{"B may reset now", annB, "POST", "/reset-guard", ``, 204, ""},
		{"A discards its first", annA, "DELETE", "/api/recording/episodes/a1", ``, 200, `"discarded": "a1"`},
		{"gone", annA, "GET", "/api/recording/episodes/a1/review", ``, 404, "no recorded episode"},
	}
	for _, s := range steps {
		code, body := call(s.tok, s.method, s.path, s.body)
		// has is what the answer must say; "!x" what it must not.
		lacks, ok := strings.CutPrefix(s.has, "!")
		if code != s.status || (ok && strings.Contains(body, lacks)) || (!ok && !strings.Contains(body, s.has)) {
			t.Errorf("%s: %s %s: %d %s; want %d with %q", s.name, s.method, s.path, code, body, s.status, s.has)
		}
	}
	// The operator sees every episode; only its own is left.
	_, body := call(oper, "GET", "/api/recording/episodes", "")
	var list struct{ Episodes []EpisodeSummary }
	if err := json.Unmarshal([]byte(body), &list); err != nil || len(list.Episodes) != 1 || list.Episodes[0].ID != "o1" {
		t.Errorf("the operator's list after the discards: %s", body)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range ents {
		left = append(left, e.Name())
	}
	if len(left) != 1 || left[0] != "o1" {
		t.Errorf("the episodes directory holds %v after the discards; want o1 alone", left)
	}
	m, err := openMeta(filepath.Join(dir, "o1"))
	if err != nil || !strings.HasPrefix(m.Meta.RecordedBy, "operator:") || strings.Contains(m.Meta.RecordedBy, oper) {
		t.Errorf("o1's episode.json recorded_by = %q (%v): want operator:<token id>, never the token", m.Meta.RecordedBy, err)
	}
}

// TestGiveUpEndsTheEpisode: give_up on a recording of the control plane's
// running episode ends that episode too (the fake plane answers the end
// request as control does), and the outcome is a failure whatever the
// checker said.
func TestGiveUpEndsTheEpisode(t *testing.T) {
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
	if s, b := post("/api/recording/start", `{}`); s != 201 || !strings.Contains(b, `"episode_id": "ep-1"`) {
		t.Fatalf("start: %d %s (want the running episode)", s, b)
	}
	if s, b := post("/api/recording/stop", `{"give_up":true}`); s != 200 {
		t.Fatalf("give up: %d %s", s, b)
	}
	m := rec.Status().Last
	if m == nil || m.Outcome == nil || m.Outcome.Reward == nil || *m.Outcome.Reward != 0 || m.Outcome.Success == nil || *m.Outcome.Success ||
		!m.Outcome.Done || len(m.Outcome.Reasons) != 1 || !strings.HasPrefix(m.Outcome.Reasons[0], "gave up") {
		t.Fatalf("episode.json's outcome = %+v, want reward 0, no success, done, gave up", m)
	}
	if s, b := post("/api/recording/start", `{"episode_id":"ep-1"}`); s != 400 || !strings.Contains(b, "has ended") {
		t.Errorf("the given-up episode is not ended in the control plane: start again %d %s", s, b)
	}
}
