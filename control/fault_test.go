package control

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/deskenv/deskenv/baseline"
	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/lifecycle"
	"github.com/deskenv/deskenv/task"
)

// windowTask is a task whose setup opens a window of its own and waits for
// it: a reset into it that stops half way leaves the window, or no episode.
func windowTask(t testing.TB) *task.Task {
	t.Helper()
	tk, err := task.Parse([]byte(`{"id":"own-window","instruction":"x",
		"setup":[{"type":"launch","argv":["xterm","-T","setup window"]},{"type":"wait_window","contains":"setup window"}],
		"evaluator":{"type":"window_title","matches":"^never$"}}`), "own-window.json")
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// titles lists the desktop's window titles.
func (r *rig) titles(t testing.TB) []string {
	t.Helper()
	var out []string
	for _, w := range r.windows(t) {
		out = append(out, w.Title)
	}
	return out
}

func (r *rig) hasTitle(t testing.TB, title string) bool {
	for _, s := range r.titles(t) {
		if s == title {
			return true
		}
	}
	return false
}

// TestResetSurvivesItsClient cuts a reset's client 50 ms in, over each way
// a reset can be asked for: the reset runs to its end all the same, so the
// episode exists, runs, and its task's setup window is up; and the next
// reset works.
func TestResetSurvivesItsClient(t *testing.T) {
	tk := windowTask(t)
	r := newRig(t, rigOptions{mode: ModeSim, tasks: []*task.Task{tk}})
	cut := func(t *testing.T, send func(ctx context.Context) error) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if err := send(ctx); err == nil {
			t.Fatal("the reset answered within 50 ms: the test cuts nothing")
		}
	}
	post := func(path string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			req, err := http.NewRequestWithContext(ctx, "POST", r.srv.URL+path, strings.NewReader(`{"task_id":"own-window"}`))
			if err != nil {
				return err
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			return err
		}
	}
	tests := []struct {
		name string
		send func(ctx context.Context) error
	}{
		{"native", post("/api/reset")},
		{"openenv", post("/reset")},
		{"websocket", func(ctx context.Context) error {
			conn := dialWS(t, r.srv.URL, nil)
			if err := conn.WriteMessage(1, []byte(`{"type":"reset","data":{"task_id":"own-window"}}`)); err != nil {
				return err
			}
			<-ctx.Done()
			conn.Close()
			return ctx.Err()
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := r.c.Current()
			cut(t, tc.send)
			testrig.WaitWithin(t, 30*time.Second, "the cut reset's episode", func() bool {
				ep := r.c.Current()
				return ep != nil && (before == nil || ep.ID != before.ID)
			})
			ep := r.c.Current()
			if ep.Status != "running" || ep.TaskID != "own-window" {
				t.Fatalf("episode after the cut reset: %+v, want own-window running", ep)
			}
			if !r.hasTitle(t, "setup window") {
				t.Fatalf("windows %q after the cut reset: want the setup's window", r.titles(t))
			}
			// The next reset still works, and takes the setup's window away.
			if _, err := r.c.Reset(context.Background(), ResetRequest{}); err != nil {
				t.Fatalf("the reset after a cut one: %v", err)
			}
			if r.hasTitle(t, "setup window") {
				t.Errorf("windows %q: the setup's window outlived the next reset", r.titles(t))
			}
		})
	}
}

// TestFailedSetupRollsBack: a reset whose setup fails after it opened a
// window leaves no episode and no window of the setup's behind.
func TestFailedSetupRollsBack(t *testing.T) {
	tk, err := task.Parse([]byte(`{"id":"half-setup","instruction":"x",
		"setup":[{"type":"launch","argv":["xterm","-T","half set up"]},{"type":"wait_window","contains":"half set up"},
			{"type":"command","command":"exit 4"}],
		"evaluator":{"type":"file_exists","path":"~/x"}}`), "half-setup.json")
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, rigOptions{mode: ModeSim, tasks: []*task.Task{tk}})
	if _, err := r.c.Reset(context.Background(), ResetRequest{TaskID: "half-setup"}); err == nil {
		t.Fatal("a reset whose setup fails succeeded")
	}
	if ep := r.c.Current(); ep != nil {
		t.Errorf("episode %+v after a failed reset", ep)
	}
	if r.hasTitle(t, "half set up") {
		t.Errorf("windows %q: the failed setup's window is left", r.titles(t))
	}
	if got, want := r.windowClasses(t), baseline.ClassKey(r.c.BaselineWindows()); got != want {
		t.Errorf("windows after the rollback %s, want the baseline's %s", got, want)
	}
}

// TestXServerRestartInterruptsEpisode kills Xvfb during an episode: the
// desktop comes back, the episode ends as interrupted with the reason, as
// the episode list, OpenEnv's /state, the end hooks (the recorder) and
// /health say, and the next reset works on the new server.
func TestXServerRestartInterruptsEpisode(t *testing.T) {
	tk := windowTask(t)
	r := newRig(t, rigOptions{mode: ModeSim, tasks: []*task.Task{tk}, restart: true})
	heard := r.listen(t, lifecycle.EpisodeEnded, lifecycle.ServerRestarted)
	ep, err := r.c.Reset(context.Background(), ResetRequest{TaskID: "own-window"})
	if err != nil {
		t.Fatal(err)
	}
	server := r.d.ServerPID()
	if err := syscall.Kill(server, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testrig.WaitWithin(t, 30*time.Second, "the episode to be interrupted", func() bool { return r.c.Current() == nil })

	var got Episode
	if st := getJSON(t, r.srv.URL+"/api/episodes/"+ep.ID, "", &got); st != 200 {
		t.Fatalf("GET /api/episodes/%s: %d", ep.ID, st)
	}
	if got.Status != "interrupted" || got.EndReason != "interrupted" || got.Reward != nil ||
		!strings.Contains(got.Interruption, "X server exited (signal: killed)") || !strings.Contains(got.Interruption, "own-window") {
		t.Errorf("episode after the X server restart: %+v, want interrupted, unscored, with the reason", got)
	}
	var state map[string]any
	getJSON(t, r.srv.URL+"/state", "", &state)
	last, _ := state["last_episode"].(map[string]any)
	if state["episode_id"] != nil || last["episode_id"] != ep.ID || last["status"] != "interrupted" || last["interruption"] != got.Interruption {
		t.Errorf("/state after the interruption: %v", state)
	}
	ended := heard.of(lifecycle.EpisodeEnded, 1)
	if len(ended) != 1 || ended[0].Episode.ID != ep.ID || ended[0].Outcome == nil || ended[0].Outcome.Done ||
		ended[0].Outcome.Interrupted != got.Interruption || ended[0].Outcome.Reward != nil {
		t.Errorf("the lifecycle bus heard ends %+v, want the interrupted episode once, not done, unscored", ended)
	}
	if rs := heard.of(lifecycle.ServerRestarted, 1); len(rs) != 1 || !strings.Contains(rs[0].Err, "killed") {
		t.Errorf("the lifecycle bus heard restarts %+v, want one saying the server was killed", rs)
	}

	testrig.WaitWithin(t, 30*time.Second, "the X server's restart", func() bool {
		e := r.d.LastServerExit()
		return e != nil && e.Restarted
	})
	var health struct {
		Status  string `json:"status"`
		Details Faults `json:"details"`
	}
	if st := getJSON(t, r.srv.URL+"/health?details=1", "", &health); st != 200 || health.Status != "healthy" {
		t.Fatalf("/health after the restart: %d %+v", st, health)
	}
	found := false
	for _, e := range health.Details.Restarts {
		found = found || (e.Role == display.RoleServer && e.PID == server && e.Restarted && e.Exited == "signal: killed")
	}
	if !found || health.Details.XServerRestarts != 1 {
		t.Errorf("/health details %+v: want the X server's death and restart", health.Details)
	}

	next, err := r.c.Reset(context.Background(), ResetRequest{TaskID: "own-window"})
	if err != nil {
		t.Fatalf("reset on the restarted server: %v", err)
	}
	if next.Status != "running" || !r.hasTitle(t, "setup window") {
		t.Errorf("reset on the restarted server: %+v, windows %q", next, r.titles(t))
	}
}

// TestHealthNamesDeadSessionProcesses kills the window manager or the
// xterm: it comes back, and /health's details name it.
func TestHealthNamesDeadSessionProcesses(t *testing.T) {
	r := newRig(t, rigOptions{mode: ModeSim})
	for _, name := range []string{"openbox", "xterm"} {
		t.Run(name, func(t *testing.T) {
			var pid int
			for _, p := range r.d.Processes() {
				if p.Process == name {
					pid = p.PID
				}
			}
			if pid == 0 {
				t.Fatalf("no %s among %+v", name, r.d.Processes())
			}
			syscall.Kill(pid, syscall.SIGKILL)
			var health struct {
				Status  string `json:"status"`
				Details Faults `json:"details"`
			}
			var exit display.Exit
			testrig.WaitWithin(t, 30*time.Second, name+"'s restart in /health", func() bool {
				getJSON(t, r.srv.URL+"/health?details=1", "", &health)
				for _, e := range health.Details.Restarts {
					if e.PID == pid && e.Restarted {
						exit = e
						return true
					}
				}
				return false
			})
			if exit.Process != name || exit.Exited != "signal: killed" || exit.At.IsZero() || exit.NewPID == 0 {
				t.Errorf("/health names %+v, want %s killed and restarted", exit, name)
			}
			if health.Status != "healthy" {
				t.Errorf("/health status %q after %s came back", health.Status, name)
			}
			// The desktop is whole again: a reset brings the baseline back.
			if _, err := r.c.Reset(context.Background(), ResetRequest{}); err != nil {
				t.Fatal(err)
			}
			if got, want := r.windowClasses(t), baseline.ClassKey(r.c.BaselineWindows()); got != want {
				t.Errorf("windows after the reset %s, want %s", got, want)
			}
		})
	}
}

// TestHealthFailsWithoutWindowManager: a window manager that cannot come
// back (it fails at every restart) makes /health 503, saying which died
// and how, with the details.
func TestHealthFailsWithoutWindowManager(t *testing.T) {
	broken := filepath.Join(t.TempDir(), "broken")
	// openbox the first time; once the flag file exists, a failure.
	wm := []string{"sh", "-c", `test -e "$0" && exit 7; exec openbox`, broken}
	r := newRig(t, rigOptions{mode: ModeSim, wm: wm})
	var plain map[string]any
	if st := getJSON(t, r.srv.URL+"/health", "", &plain); st != 200 || len(plain) != 1 || plain["status"] != "healthy" {
		t.Fatalf("/health of a whole desktop: %d %v, want exactly OpenEnv's {\"status\":\"healthy\"}", st, plain)
	}
	if err := os.WriteFile(broken, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var pid int
	for _, p := range r.d.Processes() {
		if p.Role == display.RoleWindowManager {
			pid = p.PID
		}
	}
	syscall.Kill(pid, syscall.SIGKILL)
	var health struct {
		Status  string `json:"status"`
		Error   string `json:"error"`
		Details Faults `json:"details"`
	}
	var st int
	testrig.WaitWithin(t, 30*time.Second, "/health to fail", func() bool {
		st = getJSON(t, r.srv.URL+"/health", "", &health)
		return st != 200
	})
	if st != http.StatusServiceUnavailable || health.Status != "unhealthy" || !strings.Contains(health.Error, "window manager") {
		t.Errorf("/health without a window manager: %d %+v", st, health)
	}
	if len(health.Details.Restarts) == 0 || health.Details.Restarts[0].PID != pid || health.Details.Restarts[0].Exited != "signal: killed" {
		t.Errorf("/health details %+v: want the window manager's death first", health.Details.Restarts)
	}
}
