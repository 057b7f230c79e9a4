package appliance

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/internal/xwin"
)

// warmTaskJSON is the task warm desktops are reset into in these tests: a
// file in the home and an xterm whose title is the episode's id, both made
// by the setup, so a lease can check that the setup ran before it asked
// and for its own episode.
const warmTaskJSON = `{
  "id": "warm-term",
  "instruction": "Type exit in the terminal.",
  "setup": [
    {"type": "write_file", "path": "~/warm.txt", "content": "warmed\n"},
    {"type": "command", "command": "xterm -title \"warm-$DESKENV_EPISODE_ID\" >/dev/null 2>&1 &"},
    {"type": "wait_window", "contains": "warm-", "timeout": "20s"}
  ],
  "evaluator": {"type": "file_exists", "path": "~/warm.txt"}
}`

// startWarmPool starts a pool of n bare desktops keeping warm of them warm
// (into task when not empty, from a task directory holding warmTaskJSON),
// as startPool does.
func startWarmPool(t testing.TB, n, warm int, task string) (*Pool, string) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Desktops, cfg.NoStream, cfg.WM, cfg.Apps = n, true, "", ""
	cfg.Warm, cfg.WarmTask = warm, task
	cfg.OperatorToken = testOperator
	cfg.Home, cfg.Episodes = reachableDir(t), t.TempDir()
	cfg.Tasks = t.TempDir()
	if err := os.WriteFile(filepath.Join(cfg.Tasks, "warm-term.json"), []byte(warmTaskJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	p, err := NewPool(context.Background(), cfg, testrig.Logger(t))
	if err != nil {
		t.Fatalf("start a pool of %d desktops, %d warm: %v", n, warm, err)
	}
	t.Cleanup(func() { p.Close() })
	srv := httptest.NewUnstartedServer(p.Handler())
	srv.Config.ConnContext = ConnContext
	srv.Start()
	t.Cleanup(srv.Close)
	return p, srv.URL
}

// warmLease is a lease's answer, with what warm leases add.
type warmLease struct {
	ID         string `json:"lease_id"`
	Desktop    int    `json:"desktop"`
	AgentToken string `json:"agent_token"`
	Warm       bool   `json:"warm"`
	Episode    struct {
		ID     string `json:"episode_id"`
		TaskID string `json:"task_id"`
		Status string `json:"status"`
	} `json:"episode"`
}

type warmHealth struct {
	Status string `json:"status"`
	Warm   struct {
		Ready   int `json:"ready"`
		Warming int `json:"warming"`
		Target  int `json:"target"`
	} `json:"warm"`
}

// waitWarm waits until want desktops are warm, as /health reports.
func waitWarm(t testing.TB, base string, want int) {
	t.Helper()
	testrig.WaitState(t, time.Minute, "warm desktops ready", func() (bool, string) {
		var h warmHealth
		doJSON(t, "GET", base+"/health", "", nil, &h)
		return h.Warm.Ready == want, strings.Join([]string{h.Status, "ready", strconv.Itoa(h.Warm.Ready), "warming", strconv.Itoa(h.Warm.Warming)}, " ")
	})
}

// windowTitles lists the top-level window titles desktop idx's X server has.
func windowTitles(t testing.TB, p *Pool, idx int) []string {
	t.Helper()
	c, err := p.apps[idx].display.Dial()
	if err != nil {
		t.Fatalf("connect to desktop %d's display: %v", idx, err)
	}
	defer c.Close()
	l, err := xwin.NewLister(c)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := l.Windows()
	if err != nil {
		t.Fatal(err)
	}
	var titles []string
	for _, w := range ws {
		titles = append(titles, w.Title)
	}
	return titles
}

// TestWarmLeases: with --warm 2 --warm-task, a lease naming the task gets a
// warm desktop whose task setup already ran (its file in the home, its
// window on the X server, titled with the lease's episode), while a lease
// for no task or with a seed is reset on its own time; releasing a warm
// lease refills the pool in the background; /desktops and /metrics tell.
func TestWarmLeases(t *testing.T) {
	p, base := startWarmPool(t, 3, 2, "warm-term")
	waitWarm(t, base, 2)

	tests := []struct {
		name     string
		body     map[string]any
		wantWarm bool
		wantTask string
	}{
		{"the warm task", map[string]any{"task_id": "warm-term"}, true, "warm-term"},
		{"no task", nil, false, ""},
		{"the warm task with a seed", map[string]any{"task_id": "warm-term", "seed": 3}, false, "warm-term"},
	}
	var leases []warmLease
	for _, tc := range tests {
		var l warmLease
		if code := doJSON(t, "POST", base+"/leases", testOperator, tc.body, &l); code != http.StatusCreated {
			t.Fatalf("%s: lease: %d", tc.name, code)
		}
		leases = append(leases, l)
		if l.Warm != tc.wantWarm || l.Episode.TaskID != tc.wantTask || l.Episode.Status != "running" || l.AgentToken == "" {
			t.Errorf("%s: lease %+v, want warm %v, task %q, a running episode and a token", tc.name, l, tc.wantWarm, tc.wantTask)
		}
		// The episode handed out is the one running on the desktop.
		if cur := p.apps[l.Desktop].control.Current(); cur == nil || cur.ID != l.Episode.ID {
			t.Errorf("%s: desktop %d runs episode %v, the lease says %s", tc.name, l.Desktop, cur, l.Episode.ID)
		}
		if tc.wantTask == "" {
			continue
		}
		// The setup ran on this desktop for this episode, warm or not.
		titles := windowTitles(t, p, l.Desktop)
		if !contains(titles, "warm-"+l.Episode.ID) {
			t.Errorf("%s: desktop %d's windows %q, want one titled warm-%s", tc.name, l.Desktop, titles, l.Episode.ID)
		}
		if b, err := os.ReadFile(filepath.Join(p.apps[l.Desktop].home, "warm.txt")); err != nil || string(b) != "warmed\n" {
			t.Errorf("%s: warm.txt in desktop %d's home: %q %v", tc.name, l.Desktop, b, err)
		}
	}
	if seen := map[int]bool{leases[0].Desktop: true, leases[1].Desktop: true, leases[2].Desktop: true}; len(seen) != 3 {
		t.Errorf("three leases on desktops %d, %d, %d: one handed out twice", leases[0].Desktop, leases[1].Desktop, leases[2].Desktop)
	}

	// Every desktop leased: a warm request is refused like any other.
	if code := doJSON(t, "POST", base+"/leases", testOperator, map[string]any{"task_id": "warm-term"}, nil); code != http.StatusServiceUnavailable {
		t.Errorf("fourth lease of three desktops: %d, want 503", code)
	}
	// An unknown task is refused before any desktop is touched.
	if code := doJSON(t, "DELETE", base+"/leases/"+leases[1].ID, testOperator, nil, nil); code != http.StatusNoContent {
		t.Fatalf("release: %d", code)
	}
	var e struct{ Error string }
	if code := doJSON(t, "POST", base+"/leases", testOperator, map[string]any{"task_id": "nope"}, &e); code != http.StatusNotFound || !strings.Contains(e.Error, "warm-term") {
		t.Errorf("lease of an unknown task: %d %q, want 404 naming the known ones", code, e.Error)
	}

	// Releasing answers at once; the refiller resets in the background,
	// into the warm task, until two desktops are warm again.
	for _, l := range []warmLease{leases[0], leases[2]} {
		if code := doJSON(t, "DELETE", base+"/leases/"+l.ID, testOperator, nil, nil); code != http.StatusNoContent {
			t.Fatalf("release %s: %d", l.ID, code)
		}
	}
	waitWarm(t, base, 2)
	// The released warm lease's episode was ended by the refill's reset.
	ep, err := p.apps[leases[0].Desktop].control.Episode(leases[0].Episode.ID)
	if err != nil || ep.Status != "ended" || ep.EndReason != "next_reset" {
		t.Errorf("the released lease's episode: %+v %v, want ended by the next reset", ep, err)
	}

	var desks struct {
		Desktops []struct {
			State       string `json:"state"`
			WarmEpisode string `json:"warm_episode"`
		} `json:"desktops"`
	}
	doJSON(t, "GET", base+"/desktops", testOperator, nil, &desks)
	states := map[string]int{}
	for _, d := range desks.Desktops {
		states[d.State]++
		if (d.State == "warm") != (d.WarmEpisode != "") {
			t.Errorf("/desktops: %+v: a warm desktop names its episode, others none", d)
		}
	}
	if states["warm"] != 2 || states["idle"] != 1 {
		t.Errorf("/desktops states %v, want 2 warm and 1 idle", states)
	}
	metrics := get(t, base+"/metrics", testOperator)
	for _, want := range []string{
		"deskenv_pool_warm_desktops 2",
		"deskenv_pool_warm_target 2",
		`deskenv_pool_leases_total{warm="true"} 1`,
		`deskenv_pool_leases_total{warm="false"} 2`,
		`deskenv_pool_desktops{state="warm"} 2`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, metrics)
		}
	}
	if code := doJSON(t, "GET", base+"/metrics", "", nil, nil); code != http.StatusUnauthorized {
		t.Errorf("the pool's /metrics without a token: %d, want 401", code)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func get(t testing.TB, url, token string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %s", url, resp.Status, b)
	}
	return string(b)
}
