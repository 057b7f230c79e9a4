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

func TestHTTP(t *testing.T) {
	r := newRig(t, 640, 480, "")
	finished := ""
	reward := 0.5
	rec := r.recorder(t, t.TempDir(), Options{FPS: -1,
		Current: func() (EpisodeInfo, bool) {
			return EpisodeInfo{ID: "ep-7", TaskID: "hello-file", Instruction: "make hello.txt"}, true
		},
		Finish: func(ctx context.Context, id string) (*Outcome, error) {
			finished = id
			return &Outcome{Reward: &reward, Done: true}, nil
		},
	})
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
	if finished != "ep-7" {
		t.Errorf("Finish was called for %q, want ep-7", finished)
	}
}
