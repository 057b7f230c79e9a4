package appliance

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
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

// warmWebJSON is a task whose setup opens a local page in Chromium, as the
// example browser tasks do: the lease benchmark's browser case.
const warmWebJSON = `{
  "id": "warm-web",
  "instruction": "Follow the link.",
  "setup": [
    {"type": "write_file", "path": "~/web/index.html", "content": "<title>Warm</title><a href=\"two.html\">two</a>"},
    {"type": "browser", "path": "~/web/index.html"}
  ],
  "evaluator": {"type": "browser_url", "contains": "two.html"}
}`

// startWarmPool starts a pool of n bare desktops keeping warm of them warm
// (into task when not empty), as startPool does.
func startWarmPool(t testing.TB, n, warm int, task string) (*Pool, string) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Desktops, cfg.NoStream, cfg.WM, cfg.Apps = n, true, "", ""
	cfg.Warm, cfg.WarmTask = warm, task
	return servePool(t, cfg)
}

// servePool starts the pool cfg describes, with the operator token, homes
// the session users can reach, and a task directory holding warmTaskJSON and
// warmWebJSON,
// behind its door on a free port.
func servePool(t testing.TB, cfg Config) (*Pool, string) {
	t.Helper()
	return servePoolWith(t, cfg, nil)
}

// servePoolWith is servePool with more tasks in its directory (file name:
// JSON).
func servePoolWith(t testing.TB, cfg Config, tasks map[string]string) (*Pool, string) {
	t.Helper()
	cfg.OperatorToken = testOperator
	cfg.Home, cfg.Episodes, cfg.Tasks = reachableDir(t), t.TempDir(), t.TempDir()
	all := map[string]string{"warm-term.json": warmTaskJSON, "warm-web.json": warmWebJSON}
	maps.Copy(all, tasks)
	for name, task := range all {
		if err := os.WriteFile(filepath.Join(cfg.Tasks, name), []byte(task), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	p, err := NewPool(context.Background(), cfg, testrig.Logger(t))
	if err != nil {
		t.Fatalf("start a pool of %d desktops, %d warm: %v", cfg.Desktops, cfg.Warm, err)
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

// TestWarmConfig: --warm and --warm-task that cannot work are refused
// with the flag named, before anything starts.
func TestWarmConfig(t *testing.T) {
	tests := []struct {
		name     string
		desktops int
		warm     int
		task     string
		mode     string
		wantErr  string
	}{
		{"off", 1, 0, "", "sim", ""},
		{"some of the pool", 4, 2, "", "sim", ""},
		{"all of the pool, into a task", 4, 4, "hello", "sim", ""},
		{"negative", 4, -1, "", "sim", "--warm -1: must be 0"},
		{"more than the pool", 4, 5, "", "sim", "--warm 5 with --desktops 4"},
		{"no pool", 1, 1, "", "sim", "add --desktops 2 or more"},
		{"prod mode", 4, 2, "", "prod", "only --mode sim"},
		{"a task but no warm desktops", 4, 0, "hello", "sim", "--warm-task \"hello\" without --warm"},
	}
	for _, tc := range tests {
		cfg := DefaultConfig()
		cfg.Desktops, cfg.Warm, cfg.WarmTask, cfg.Mode = tc.desktops, tc.warm, tc.task, tc.mode
		err := cfg.Validate()
		if tc.wantErr == "" && err != nil {
			t.Errorf("%s: %v, want no error", tc.name, err)
		}
		if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: %v, want an error mentioning %q", tc.name, err, tc.wantErr)
		}
	}
}

// TestWarmTaskUnknown: a --warm-task that names no loaded task stops the
// pool before any desktop starts, naming the tasks there are.
func TestWarmTaskUnknown(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "warm-term.json"), []byte(warmTaskJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ tasks, wantErr string }{
		{dir, `--warm-task "nope": no such task among --tasks ` + dir + ` (known: [warm-term])`},
		{"", `--warm-task "nope": no tasks are loaded`},
	}
	for _, tc := range tests {
		cfg := DefaultConfig()
		cfg.Desktops, cfg.Warm, cfg.WarmTask, cfg.Tasks = 2, 1, "nope", tc.tasks
		cfg.OperatorToken = testOperator
		p, err := NewPool(context.Background(), cfg, testrig.Logger(t))
		if err == nil {
			p.Close()
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("tasks %q: %v, want %q", tc.tasks, err, tc.wantErr)
		}
	}
}

// TestWarmLeaseOnce: many lessees at once, leasing and releasing over and
// over while the refiller resets released desktops in the background, never
// hold the same desktop at the same time; a burst of lease requests on a
// full pool of warm desktops grants each desktop once. Run with -race.
func TestWarmLeaseOnce(t *testing.T) {
	const n = 3
	_, base := startWarmPool(t, n, n, "")
	waitWarm(t, base, n)

	// A burst: 4n requests at once for n desktops.
	var mu sync.Mutex
	granted := map[int]string{}
	var refused int
	var wg sync.WaitGroup
	for range 4 * n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var l warmLease
			code := doJSON(t, "POST", base+"/leases", testOperator, nil, &l)
			mu.Lock()
			defer mu.Unlock()
			switch code {
			case http.StatusCreated:
				if other, ok := granted[l.Desktop]; ok {
					t.Errorf("desktop %d leased twice: %s and %s", l.Desktop, other, l.ID)
				}
				granted[l.Desktop] = l.ID
			case http.StatusServiceUnavailable:
				refused++
			default:
				t.Errorf("lease: status %d", code)
			}
		}()
	}
	wg.Wait()
	if len(granted) != n || refused != 3*n {
		t.Fatalf("a burst of %d requests on %d warm desktops: %d granted, %d refused", 4*n, n, len(granted), refused)
	}
	for _, id := range granted {
		if code := doJSON(t, "DELETE", base+"/leases/"+id, testOperator, nil, nil); code != http.StatusNoContent {
			t.Fatalf("release %s: %d", id, code)
		}
	}

	// Churn: 2n lessees, each leasing and releasing in a loop; a desktop
	// must never be held by two of them.
	held := map[int]string{}
	var warmLeases, coldLeases int
	for w := range 2 * n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 4 {
				var l warmLease
				code := doJSON(t, "POST", base+"/leases", testOperator, nil, &l)
				if code == http.StatusServiceUnavailable {
					continue // all held by the others right now
				}
				if code != http.StatusCreated {
					t.Errorf("lessee %d: lease: %d", w, code)
					return
				}
				mu.Lock()
				if other, ok := held[l.Desktop]; ok {
					t.Errorf("desktop %d handed to lease %s while lease %s holds it", l.Desktop, l.ID, other)
				}
				held[l.Desktop] = l.ID
				if l.Warm {
					warmLeases++
				} else {
					coldLeases++
				}
				mu.Unlock()
				time.Sleep(10 * time.Millisecond) // hold it a moment
				mu.Lock()
				delete(held, l.Desktop)
				mu.Unlock()
				if code := doJSON(t, "DELETE", base+"/leases/"+l.ID, testOperator, nil, nil); code != http.StatusNoContent {
					t.Errorf("lessee %d: release %s: %d", w, l.ID, code)
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("churn: %d warm leases, %d cold", warmLeases, coldLeases)
	if warmLeases == 0 {
		t.Errorf("no lease of the churn was warm")
	}
	waitWarm(t, base, n)
}

// TestWarmDeadDesktop: a warm desktop whose X server is killed while it
// waits, or whose episode an operator replaced, is not handed out: it is
// reset again and the lease gets a desktop that is what it says.
func TestWarmDeadDesktop(t *testing.T) {
	p, base := startWarmPool(t, 2, 2, "warm-term")
	waitWarm(t, base, 2)
	stale := map[string]bool{}
	for _, a := range p.apps {
		stale[a.control.Current().ID] = true
	}
	// Desktop 0's X server dies; desktop 1's episode is replaced by an
	// operator's reset through the desktop's own control plane.
	gen := p.apps[0].display.Generation()
	if err := syscall.Kill(p.apps[0].display.ServerPID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The display brings its server back (a fresh session, without the
	// task's window): the desktop is healthy again, but not warm.
	testrig.WaitWithin(t, time.Minute, "desktop 0's X server restarted", func() bool {
		_, err := p.apps[0].control.Health(context.Background())
		return p.apps[0].display.Generation() != gen && err == nil
	})
	var ep struct {
		ID string `json:"episode_id"`
	}
	if code := doJSON(t, "POST", base+"/d/1/api/reset", testOperator, map[string]any{}, &ep); code != http.StatusOK {
		t.Fatalf("reset desktop 1 behind the pool's back: %d", code)
	}
	stale[ep.ID] = true

	for i := range 2 {
		var l warmLease
		if code := doJSON(t, "POST", base+"/leases", testOperator, map[string]any{"task_id": "warm-term"}, &l); code != http.StatusCreated {
			t.Fatalf("lease %d: %d", i, code)
		}
		if stale[l.Episode.ID] {
			t.Errorf("lease %d handed out desktop %d's stale episode %s (warm %v)", i, l.Desktop, l.Episode.ID, l.Warm)
		}
		a := p.apps[l.Desktop]
		if cur := a.control.Current(); cur == nil || cur.ID != l.Episode.ID || cur.TaskID != "warm-term" {
			t.Errorf("lease %d: desktop %d runs %+v, the lease says %s", i, l.Desktop, cur, l.Episode.ID)
		}
		if _, err := a.control.Health(testrig.Context(t, 5*time.Second)); err != nil {
			t.Errorf("lease %d: desktop %d is unhealthy: %v", i, l.Desktop, err)
		}
		if titles := windowTitles(t, p, l.Desktop); !contains(titles, "warm-"+l.Episode.ID) {
			t.Errorf("lease %d: desktop %d's windows %q lack the task's warm-%s", i, l.Desktop, titles, l.Episode.ID)
		}
	}
	if m := get(t, base+"/metrics", testOperator); !strings.Contains(m, "deskenv_pool_warm_discarded_total 2") {
		t.Errorf("/metrics does not count the two discarded warm desktops:\n%s", m)
	}
}

// TestWarmBrowserDied: a warm desktop whose task's Chromium died while it
// waited (crashed, or killed) is not handed out: a lease gets a desktop whose
// browser answers, and the other is reset again.
func TestWarmBrowserDied(t *testing.T) {
	testrig.NeedTools(t, "chromium")
	p, base := startWarmPool(t, 2, 2, "warm-web")
	waitWarm(t, base, 2)
	for i, a := range p.apps {
		if err := a.control.SetupIntact(); err != nil {
			t.Fatalf("warm desktop %d: %v", i, err)
		}
	}
	cred := p.apps[0].display.Credential()
	if cred == nil {
		t.Skip("the desktops share deskenv's user: no way to kill only desktop 0's browser")
	}
	if out, err := exec.Command("pkill", "-KILL", "-U", strconv.Itoa(int(cred.Uid)), "chromium").CombinedOutput(); err != nil {
		t.Fatalf("kill desktop 0's Chromium: %v %s", err, out)
	}
	testrig.WaitWithin(t, 10*time.Second, "desktop 0's browser to be gone", func() bool { return p.apps[0].control.SetupIntact() != nil })
	for i := range 2 {
		var l warmLease
		if code := doJSON(t, "POST", base+"/leases", testOperator, map[string]any{"task_id": "warm-web"}, &l); code != http.StatusCreated {
			t.Fatalf("lease %d: %d", i, code)
		}
		if err := p.apps[l.Desktop].control.SetupIntact(); err != nil {
			t.Errorf("lease %d handed out desktop %d (warm %v) whose %v", i, l.Desktop, l.Warm, err)
		}
	}
	if m := get(t, base+"/metrics", testOperator); !strings.Contains(m, "deskenv_pool_warm_discarded_total 1") {
		t.Errorf("/metrics does not count the discarded desktop:\n%s", m)
	}
}

// TestWarmUnresponsiveDesktop: a warm desktop whose X server stops
// answering (stopped, not dead: nothing restarts it) fails the check before
// a lease and is not handed out; once it answers again the refiller makes it
// warm again.
func TestWarmUnresponsiveDesktop(t *testing.T) {
	p, base := startWarmPool(t, 2, 2, "")
	waitWarm(t, base, 2)
	pid := p.apps[0].display.ServerPID()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)

	var l warmLease
	if code := doJSON(t, "POST", base+"/leases", testOperator, nil, &l); code != http.StatusCreated {
		t.Fatalf("lease: %d", code)
	}
	if l.Desktop != 1 || !l.Warm {
		t.Errorf("lease got desktop %d (warm %v), want the answering desktop 1, warm", l.Desktop, l.Warm)
	}
	if m := get(t, base+"/metrics", testOperator); !strings.Contains(m, "deskenv_pool_warm_discarded_total 1") {
		t.Errorf("/metrics does not count the discarded desktop:\n%s", m)
	}
	resume()
	if code := doJSON(t, "DELETE", base+"/leases/"+l.ID, testOperator, nil, nil); code != http.StatusNoContent {
		t.Fatalf("release: %d", code)
	}
	waitWarm(t, base, 2)
}

// TestWarmClose: Close stops the refiller and waits for the resets it
// runs, leaving none of its goroutines behind.
func TestWarmClose(t *testing.T) {
	p, base := startWarmPool(t, 2, 2, "warm-term")
	waitWarm(t, base, 2)
	var l warmLease
	if code := doJSON(t, "POST", base+"/leases", testOperator, map[string]any{"task_id": "warm-term"}, &l); code != http.StatusCreated {
		t.Fatalf("lease: %d", code)
	}
	// Released: a reset into the task starts in the background, and the
	// pool closes under it.
	if code := doJSON(t, "DELETE", base+"/leases/"+l.ID, testOperator, nil, nil); code != http.StatusNoContent {
		t.Fatalf("release: %d", code)
	}
	p.Close()
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	for _, fn := range []string{"(*Pool).refiller", "(*Pool).refill("} {
		if strings.Contains(stacks, fn) {
			t.Errorf("after Close a goroutine still runs %s:\n%s", fn, stacks)
		}
	}
}

// TestWarmServedTask: every desktop of a pool warm in one task whose site
// is served on a port of the machine. With a listener per desktop only the
// first could listen (the others' resets failed, "address already in
// use"); with the pool's shared ports (task.Ports) each desktop's agent
// reaches its own desktop's site at the address the task names, and its
// answer lands in its own home only.
func TestWarmServedTask(t *testing.T) {
	testrig.NeedTools(t, "curl")
	port := testrig.FreePort(t)
	shop := fmt.Sprintf(`{"id": "warm-shop", "instruction": "Order on http://127.0.0.1:%d/.", "setup": [
		{"type": "write_file", "path": "~/site/index.html", "content": "<title>shop</title>"},
		{"type": "command", "command": "id -un > ~/site/who.txt"},
		{"type": "serve", "dir": "~/site", "port": %d}
	], "evaluator": {"type": "json_field", "path": "~/site/.posted/1.json", "pointer": "/name", "equals": "Ada"}}`, port, port)
	cfg := DefaultConfig()
	cfg.Desktops, cfg.NoStream, cfg.WM, cfg.Apps = 2, true, "", ""
	cfg.Warm, cfg.WarmTask = 2, "warm-shop"
	p, base := servePoolWith(t, cfg, map[string]string{"warm-shop.json": shop})
	waitWarm(t, base, 2)
	site := fmt.Sprintf("http://127.0.0.1:%d/", port)
	var uids [2]uint32
	for i, a := range p.apps {
		cred := a.display.Credential()
		if cred == nil {
			t.Skip("the desktops share deskenv's user: one port cannot be told apart by user")
		}
		uids[i] = cred.Uid
	}
	ctx := testrig.Context(t, time.Minute)
	curlAs := func(uid uint32, args ...string) string { t.Helper(); return testrig.CurlAs(ctx, t, uid, args...) }
	for i, a := range p.apps {
		want := "200 " + a.seat.session.Name
		if got := curlAs(uids[i], site+"who.txt"); got != want {
			t.Errorf("desktop %d's user reads its site: %q, want %q (its own desktop's)", i, got, want)
		}
	}
	if got := curlAs(uids[0], "-d", "name=Ada", site+"order"); !strings.HasPrefix(got, "200 ") {
		t.Fatalf("desktop 0's user orders: %q", got)
	}
	if _, err := os.Stat(filepath.Join(p.apps[0].home, "site", ".posted", "1.json")); err != nil {
		t.Errorf("desktop 0's answer is not in its home: %v", err)
	}
	if _, err := os.Stat(filepath.Join(p.apps[1].home, "site", ".posted")); !os.IsNotExist(err) {
		t.Errorf("desktop 1's home got an answer it was not sent (%v)", err)
	}
	if got := curlAs(0, site); !strings.HasPrefix(got, "421 2 desktops serve port") {
		t.Errorf("root, with both desktops serving: %q, want 421", got)
	}
}
