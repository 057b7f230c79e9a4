package main

// Faults on the real appliance: its own Xvfb, openbox and xterm killed
// under it, a reset's client cut, and what /health, the episode list,
// OpenEnv's /state and episode.json then say.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// windowTaskDir is a tasks directory with one task, own-window, whose
// setup opens a window and waits for it: its reset takes a while.
func windowTaskDir(t *testing.T) string {
	t.Helper()
	tasks := t.TempDir()
	task := `{"id":"own-window","instruction":"x",
		"setup":[{"type":"launch","argv":["xterm","-T","setup window"]},{"type":"wait_window","contains":"setup window"}],
		"evaluator":{"type":"window_title","matches":"^never$"}}`
	if err := os.WriteFile(filepath.Join(tasks, "own-window.json"), []byte(task), 0o600); err != nil {
		t.Fatal(err)
	}
	return tasks
}

// startWindowTasks runs the binary in single-desktop mode with a task whose setup
// opens a window, recording into episodes; it returns the base URL and
// deskenv's pid, and stops it with SIGTERM at the end of the test.
func startWindowTasks(t *testing.T, episodes string) (string, int) {
	t.Helper()
	bin := buildBinary(t)
	tasks := windowTaskDir(t)
	// A home the session's own user can reach when deskenv runs as root
	// and drops the session to another user.
	base, err := os.MkdirTemp("", "deskenv-faults-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(base, 0o711)
	t.Cleanup(func() { os.RemoveAll(base) })
	cmd := exec.Command(bin, "--addr", "127.0.0.1:0", "--no-stream", "--episodes", episodes, "--tasks", tasks,
		"--home", filepath.Join(base, "home"))
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+t.TempDir())
	url, _ := startAs(t, cmd)
	return url, cmd.Process.Pid
}

// health is /health?details=1 as the tests read it.
type health struct {
	Status  string `json:"status"`
	Error   string `json:"error"`
	Details struct {
		Restarts []struct {
			Process   string    `json:"process"`
			Role      string    `json:"role"`
			PID       int       `json:"pid"`
			Exited    string    `json:"exited"`
			At        time.Time `json:"at"`
			Restarted bool      `json:"restarted"`
		} `json:"restarts"`
		XServerRestarts int `json:"x_server_restarts"`
		Processes       []struct {
			Process string `json:"process"`
			PID     int    `json:"pid"`
			Running bool   `json:"running"`
		} `json:"processes"`
	} `json:"details"`
}

func (h health) pidOf(name string) int {
	for _, p := range h.Details.Processes {
		if p.Process == name && p.Running {
			return p.PID
		}
	}
	return 0
}

// eventually polls cond until it holds or 30 s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// serverPID is the Xvfb deskenv started.
func serverPID(t *testing.T, deskenv int) int {
	t.Helper()
	for _, pid := range childPIDs(deskenv) {
		if comm, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm")); strings.TrimSpace(string(comm)) == "Xvfb" {
			return pid
		}
	}
	t.Fatal("deskenv has no Xvfb child")
	return 0
}

// TestFaults kills openbox, the xterm and Xvfb under the running appliance
// and cuts a reset's client at 50 ms: the desktop comes back each time, and
// /health, the episode, OpenEnv's /state and episode.json say what
// happened.
func TestFaults(t *testing.T) {
	episodes := t.TempDir()
	base, pid := startWindowTasks(t, episodes)
	var h health
	if st := doJSON(t, "GET", base+"/health?details=1", "", nil, &h); st != 200 || h.Status != "healthy" {
		t.Fatalf("/health at start: %d %+v", st, h)
	}

	for _, name := range []string{"openbox", "xterm"} {
		t.Run("kill "+name, func(t *testing.T) {
			h = health{}
			doJSON(t, "GET", base+"/health?details=1", "", nil, &h)
			victim := h.pidOf(name)
			if victim == 0 {
				t.Fatalf("/health names no running %s: %+v", name, h.Details.Processes)
			}
			syscall.Kill(victim, syscall.SIGKILL)
			eventually(t, name+"'s restart in /health", func() bool {
				h = health{}
				doJSON(t, "GET", base+"/health?details=1", "", nil, &h)
				for _, e := range h.Details.Restarts {
					if e.PID == victim && e.Restarted && e.Process == name && e.Exited == "signal: killed" && !e.At.IsZero() {
						return true
					}
				}
				return false
			})
			if h.Status != "healthy" || h.pidOf(name) == 0 || h.pidOf(name) == victim {
				t.Errorf("/health after %s came back: %+v", name, h)
			}
		})
	}

	t.Run("kill Xvfb during a recorded episode", func(t *testing.T) {
		var ep struct {
			ID string `json:"episode_id"`
		}
		if st := doJSON(t, "POST", base+"/api/reset", "", map[string]any{"task_id": "own-window"}, &ep); st != 200 {
			t.Fatalf("reset: %d", st)
		}
		if st := doJSON(t, "POST", base+"/api/recording/start", "", map[string]any{}, nil); st >= 300 {
			t.Fatalf("start recording: %d", st)
		}
		server := serverPID(t, pid)
		syscall.Kill(server, syscall.SIGKILL)
		var got struct {
			Status       string `json:"status"`
			Interruption string `json:"interruption"`
		}
		eventually(t, "the episode to be interrupted", func() bool {
			doJSON(t, "GET", base+"/api/episodes/"+ep.ID, "", nil, &got)
			return got.Status == "interrupted"
		})
		if !strings.Contains(got.Interruption, "X server exited (signal: killed)") {
			t.Errorf("interruption %q: want the X server's death", got.Interruption)
		}
		var state map[string]any
		doJSON(t, "GET", base+"/state", "", nil, &state)
		if last, _ := state["last_episode"].(map[string]any); last["status"] != "interrupted" || last["episode_id"] != ep.ID {
			t.Errorf("/state: %v, want the last episode interrupted", state)
		}
		var meta struct {
			Status  string `json:"status"`
			Outcome struct {
				Done        bool   `json:"done"`
				Interrupted string `json:"interrupted"`
			} `json:"outcome"`
		}
		eventually(t, "episode.json to say interrupted", func() bool {
			b, err := os.ReadFile(filepath.Join(episodes, ep.ID, "episode.json"))
			return err == nil && json.Unmarshal(b, &meta) == nil && meta.Status == "interrupted"
		})
		if meta.Outcome.Interrupted != got.Interruption || meta.Outcome.Done {
			t.Errorf("episode.json outcome %+v: want the interruption, not done", meta.Outcome)
		}
		eventually(t, "the X server's restart in /health", func() bool {
			h = health{}
			st := doJSON(t, "GET", base+"/health?details=1", "", nil, &h)
			return st == 200 && h.Details.XServerRestarts == 1 && h.pidOf("openbox") != 0 && h.pidOf("xterm") != 0
		})
		found := false
		for _, e := range h.Details.Restarts {
			found = found || (e.Role == "x server" && e.PID == server && e.Restarted)
		}
		if !found {
			t.Errorf("/health details %+v: want Xvfb's death and restart", h.Details.Restarts)
		}
	})

	t.Run("cut a reset's client at 50 ms", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "POST", base+"/api/reset", strings.NewReader(`{"task_id":"own-window","episode_id":"cut-one"}`))
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			t.Fatal("the reset answered within 50 ms: nothing was cut")
		}
		var ep struct {
			Status string `json:"status"`
			TaskID string `json:"task_id"`
		}
		eventually(t, "the cut reset's episode", func() bool {
			return doJSON(t, "GET", base+"/api/episodes/cut-one", "", nil, &ep) == 200
		})
		if ep.Status != "running" || ep.TaskID != "own-window" {
			t.Errorf("the cut reset's episode: %+v, want own-window running", ep)
		}
		var state struct {
			Desktop struct {
				Windows []struct {
					Title string `json:"title"`
				} `json:"windows"`
			} `json:"desktop"`
		}
		doJSON(t, "GET", base+"/api/state", "", nil, &state)
		setup := false
		for _, w := range state.Desktop.Windows {
			setup = setup || w.Title == "setup window"
		}
		if !setup {
			t.Errorf("windows %+v after the cut reset: want the setup's window", state.Desktop.Windows)
		}
		if st := doJSON(t, "POST", base+"/api/reset", "", map[string]any{}, nil); st != 200 {
			t.Errorf("the reset after a cut one: %d", st)
		}
	})
}

// TestAbandonedLease cuts a lease request's client at 50 ms, during the
// desktop's reset: nobody will learn that lease's id, so the desktop goes
// back to the pool instead of staying leased for good.
func TestAbandonedLease(t *testing.T) {
	d := startDeskenv(t, "--desktops", "2", "--no-stream", "--operator-token", testOperator,
		"--tasks", windowTaskDir(t), "--home", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", d.base+"/leases", strings.NewReader(`{"task_id":"own-window"}`))
	req.Header.Set("Authorization", "Bearer "+testOperator)
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("the lease answered within 50 ms (%d %s): nothing was cut", resp.StatusCode, b)
	}
	var desks struct {
		Desktops []struct {
			Lease string `json:"lease"`
		} `json:"desktops"`
	}
	leased := func() int {
		desks.Desktops = nil // "lease" is left out when empty: no stale value
		doJSON(t, "GET", d.base+"/desktops", testOperator, nil, &desks)
		n := 0
		for _, k := range desks.Desktops {
			if k.Lease != "" {
				n++
			}
		}
		return n
	}
	if leased() != 1 {
		t.Fatalf("desktops %+v during the cut lease's reset: want one reserved", desks.Desktops)
	}
	eventually(t, "the desktop to go back to the pool", func() bool { return leased() == 0 })
	var list struct {
		Leases []struct {
			ID string `json:"id"`
		} `json:"leases"`
	}
	doJSON(t, "GET", d.base+"/leases", testOperator, nil, &list)
	if len(list.Leases) != 0 {
		t.Errorf("leases %+v: the abandoned lease was kept", list.Leases)
	}
}
