package control

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

func doJSON(t testing.TB, method, url, token string, body []byte, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && len(b) > 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: answer is not JSON (%v): %s", method, url, err, b)
		}
	}
	return resp.StatusCode
}

// controlRoutes is every route of the control plane with a request that is
// valid in sim mode.
var controlRoutes = []struct {
	method, path, body string
	simOnly            bool
}{
	{"POST", "/api/reset", `{}`, true},
	{"GET", "/api/state", "", true},
	{"GET", "/api/tasks", "", true},
	{"GET", "/api/tasks/hello-file", "", true},
	{"GET", "/api/episodes", "", false},
	{"GET", "/api/episodes/current", "", false},
	{"POST", "/api/episodes/current/end", "", true},
	{"GET", "/api/stats", "", false},
	{"GET", "/openapi.json", "", false},
	{"GET", "/metrics", "", false},
	{"GET", "/metadata", "", false},
	{"GET", "/schema", "", false},
	{"GET", "/state", "", true},
	{"POST", "/reset", `{}`, true},
	{"POST", "/step", `{"action":{"type":"list_tools"}}`, true},
	{"GET", "/ws", "", false},
}

func TestRoles(t *testing.T) {
	r := newRig(t, rigOptions{mode: ModeSim, auth: testAuth(t), tasks: loadExampleTasks(t), tools: true})
	for _, rt := range controlRoutes {
		for _, who := range []struct {
			name, token string
			status      int
			msg         string
		}{
			{"agent", agentTok, 403, "this token is for agents (MCP); the control plane needs an operator token"},
			{"viewer", viewerTok, 403, "viewers (watch only)"},
			{"no token", "", 401, "no bearer token"},
			{"bad token", "x-not-a-real-token-xxxxxxxx", 401, "not valid"},
		} {
			t.Run(rt.method+" "+rt.path+" as "+who.name, func(t *testing.T) {
				var body []byte
				if rt.body != "" {
					body = []byte(rt.body)
				}
				var out struct{ Error string }
				status := doJSON(t, rt.method, r.srv.URL+rt.path, who.token, body, &out)
				if status != who.status || !strings.Contains(out.Error, who.msg) {
					t.Fatalf("status %d %q, want %d saying %q", status, out.Error, who.status, who.msg)
				}
			})
		}
	}
	t.Run("annotator reaches the task panel's routes alone", func(t *testing.T) {
		panel := map[string]bool{"POST /api/reset": true, "GET /api/tasks": true}
		for _, rt := range controlRoutes {
			var body []byte
			if rt.body != "" {
				body = []byte(rt.body)
			}
			var out struct{ Error string }
			status := doJSON(t, rt.method, r.srv.URL+rt.path, annotTok, body, &out)
			switch {
			case panel[rt.method+" "+rt.path] && status != 200:
				t.Errorf("%s %s as annotator: %d %s, want 200", rt.method, rt.path, status, out.Error)
			case !panel[rt.method+" "+rt.path] && (status != 403 || !strings.Contains(out.Error, "annotators")):
				t.Errorf("%s %s as annotator: %d %q, want 403 saying the token is an annotator's", rt.method, rt.path, status, out.Error)
			}
		}
	})
	t.Run("operator reaches everything", func(t *testing.T) {
		for _, rt := range controlRoutes {
			if rt.path == "/ws" {
				continue // a plain GET is not an upgrade; TestWebSocket covers it
			}
			var body []byte
			if rt.body != "" {
				body = []byte(rt.body)
			}
			if status := doJSON(t, rt.method, r.srv.URL+rt.path, operatorTok, body, nil); status == 401 || status == 403 || status >= 500 {
				t.Errorf("%s %s as operator: status %d", rt.method, rt.path, status)
			}
		}
	})
	t.Run("health needs no token", func(t *testing.T) {
		var out map[string]any
		if status := getJSON(t, r.srv.URL+"/health", "", &out); status != 200 || out["status"] != "healthy" {
			t.Fatalf("/health: %d %v", status, out)
		}
	})
	t.Run("cross-origin POST refused", func(t *testing.T) {
		req, _ := http.NewRequest("POST", r.srv.URL+"/api/reset", strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer "+operatorTok)
		req.Header.Set("Origin", "https://evil.example")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 403 {
			t.Fatalf("cross-origin reset: status %d, want 403", resp.StatusCode)
		}
	})
}

func TestProdModeHasNoReset(t *testing.T) {
	r := newRig(t, rigOptions{mode: ModeProd, tools: true})
	for _, rt := range controlRoutes {
		if rt.path == "/ws" {
			continue
		}
		t.Run(rt.method+" "+rt.path, func(t *testing.T) {
			var body []byte
			if rt.body != "" {
				body = []byte(rt.body)
			}
			var out struct{ Error string }
			status := doJSON(t, rt.method, r.srv.URL+rt.path, "", body, &out)
			if rt.simOnly {
				if status != 404 || !strings.Contains(out.Error, "not available in prod mode") {
					t.Fatalf("status %d %q, want 404 saying it is off in prod mode", status, out.Error)
				}
			} else if status >= 500 || status == 401 || status == 403 || strings.Contains(out.Error, "prod mode") {
				t.Fatalf("status %d %q: this route is on in prod mode", status, out.Error)
			}
		})
	}
}

func TestAPIErrors(t *testing.T) {
	ts := loadExampleTasks(t)
	r := newRig(t, rigOptions{mode: ModeSim, tasks: ts})
	cases := []struct {
		name, method, path, body string
		status                   int
		msg                      string
	}{
		{"unknown task", "POST", "/api/reset", `{"task_id":"nope"}`, 404, `unknown task "nope": known tasks are ` + ts[0].ID + ", " + ts[1].ID},
		{"unknown field", "POST", "/api/reset", `{"task":"hello-file"}`, 400, `unknown field "task"`},
		{"negative seed", "POST", "/api/reset", `{"seed":-2}`, 400, "seed -2 is negative"},
		{"not JSON", "POST", "/api/reset", `{`, 400, "reset request"},
		{"unknown task file", "GET", "/api/tasks/nope", "", 404, `unknown task "nope"`},
		{"unknown episode", "GET", "/api/episodes/nope", "", 404, `unknown episode "nope"`},
		{"end unknown episode", "POST", "/api/episodes/nope/end", "", 404, `unknown episode "nope"`},
		{"end with nothing running", "POST", "/api/episodes/current/end", "", 404, "no episode is running"},
		{"bad limit", "GET", "/api/episodes?limit=x", "", 400, `limit "x"`},
		{"no such endpoint", "GET", "/api/nothing", "", 404, "see /openapi.json"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var body []byte
			if c.body != "" {
				body = []byte(c.body)
			}
			var out struct{ Error string }
			status := doJSON(t, c.method, r.srv.URL+c.path, "", body, &out)
			if status != c.status || !strings.Contains(out.Error, c.msg) {
				t.Fatalf("status %d %q, want %d with %q", status, out.Error, c.status, c.msg)
			}
		})
	}
}

func TestNativeAPIFlow(t *testing.T) {
	r := newRig(t, rigOptions{mode: ModeSim, tasks: loadExampleTasks(t)})
	var ep Episode
	if st := postJSON(t, r.srv.URL+"/api/reset", "", `{"task_id":"mkdir-project","seed":5}`, &ep); st != 200 {
		t.Fatalf("reset: %d", st)
	}
	if ep.TaskID != "mkdir-project" || ep.Observation == nil || len(ep.Observation.Data) == 0 || ep.Reset == nil || ep.Reset.Total <= 0 {
		t.Fatalf("reset answer %+v", ep)
	}
	var st State
	getJSON(t, r.srv.URL+"/api/state", "", &st)
	if st.Mode != ModeSim || st.Episode == nil || st.Episode.ID != ep.ID || !st.Desktop.Healthy || len(st.Desktop.Windows) < 2 {
		t.Errorf("state %+v", st)
	}
	var tasks struct{ Tasks []TaskSummary }
	getJSON(t, r.srv.URL+"/api/tasks", "", &tasks)
	if want := len(loadExampleTasks(t)); len(tasks.Tasks) != want {
		t.Errorf("GET /api/tasks lists %d tasks, want the %d loaded", len(tasks.Tasks), want)
	}
	var end Episode
	if s := postJSON(t, r.srv.URL+"/api/episodes/"+ep.ID+"/end", "", nil, &end); s != 200 || end.Reward == nil || *end.Reward != 0 {
		t.Fatalf("end: %d %+v", s, end)
	}
	var stats Stats
	getJSON(t, r.srv.URL+"/api/stats", "", &stats)
	if stats.Episodes != 1 || stats.MeanReward == nil || *stats.MeanReward != 0 {
		t.Errorf("stats %+v", stats)
	}
	resp, err := http.Get(r.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`deskenv_resets_total{result="ok"} 1`, `deskenv_episodes_total{outcome="failure"} 1`, "deskenv_reset_duration_seconds_count 1", `deskenv_screenshots_total{source="control"} 1`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	var doc map[string]any
	getJSON(t, r.srv.URL+"/openapi.json", "", &doc)
	if doc["openapi"] != "3.0.3" {
		t.Errorf("/openapi.json: %v", doc["openapi"])
	}
}
