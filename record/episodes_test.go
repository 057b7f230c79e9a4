package record

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestReviewAPI: the recorded episodes are listed, and an operator reviews
// one through the control plane's door; bad reviews, unknown or path-like
// ids and a live episode are refused with the reason.
func TestReviewAPI(t *testing.T) {
	r := newRig(t, 320, 240, "")
	rec := r.recorder(t, t.TempDir(), Options{FPS: -1})
	srv := httptest.NewServer(rec.Handler())
	defer srv.Close()
	call := func(method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	ctx := context.Background()
	if _, err := rec.Start(ctx, EpisodeInfo{ID: "demo/1", TaskID: "t"}); err != nil {
		t.Fatal(err)
	}
	if s, b := call("PUT", "/api/recording/episodes/demo%2F1/review", `{"status":"accepted"}`); s != 400 || !strings.Contains(b, "still being recorded") {
		t.Errorf("review of a live episode: %d %s", s, b)
	}
	if _, err := rec.Stop(ctx, nil); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, method, path, body string
		status                   int
		has                      string
	}{
		{"list", "GET", "/api/recording/episodes", "", 200, `"episode_id": "demo/1"`},
		{"unreviewed", "GET", "/api/recording/episodes/demo%2F1/review", "", 200, `"status": "unreviewed"`},
		{"accept", "PUT", "/api/recording/episodes/demo%2F1/review", `{"status":"accepted","note":"clean <demo> & fast"}`, 200, `"note": "clean <demo> & fast"`},
		{"read back", "GET", "/api/recording/episodes/demo%2F1/review", "", 200, `"by": "local"`},
		{"listed with it", "GET", "/api/recording/episodes", "", 200, `"status": "accepted"`},
		{"bad status", "PUT", "/api/recording/episodes/demo%2F1/review", `{"status":"great"}`, 400, "not known"},
		{"by is the recorder's", "PUT", "/api/recording/episodes/demo%2F1/review", `{"status":"rejected","by":"someone else"}`, 400, "set by the recorder"},
		{"unknown field", "PUT", "/api/recording/episodes/demo%2F1/review", `{"status":"rejected","score":1}`, 400, "unknown field"},
		{"unknown id", "PUT", "/api/recording/episodes/nope/review", `{"status":"rejected"}`, 404, `no recorded episode \"nope\"`},
		{"a path is not an id", "GET", "/api/recording/episodes/..%2F..%2Fetc/review", "", 404, "no recorded episode"},
		{"cross origin", "PUT", "/api/recording/episodes/demo%2F1/review", `{"status":"rejected"}`, 0, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.status == 0 {
				req, _ := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader(c.body))
				req.Header.Set("Origin", "http://evil.example")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != 403 {
					t.Errorf("a review from another origin: %d, want 403", resp.StatusCode)
				}
				return
			}
			s, b := call(c.method, c.path, c.body)
			if s != c.status || !strings.Contains(b, c.has) {
				t.Errorf("%s %s: %d %s; want %d with %q", c.method, c.path, s, b, c.status, c.has)
			}
		})
	}
	rev, err := ReadReview(rec.Status().Last.dirOf(t, rec))
	if err != nil || rev.Status != ReviewAccepted {
		t.Errorf("review.json holds %+v, %v; want accepted (refused reviews change nothing)", rev, err)
	}
	var list struct{ Episodes []EpisodeSummary }
	_, b := call("GET", "/api/recording/episodes", "")
	if err := json.Unmarshal([]byte(b), &list); err != nil || len(list.Episodes) != 1 || list.Episodes[0].TaskID != "t" {
		t.Errorf("episodes: %s", b)
	}
}

// dirOf is the directory of a recorded episode, found by id.
func (m *Meta) dirOf(t *testing.T, r *Recorder) string {
	t.Helper()
	dir, err := r.find(m.ID)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}
