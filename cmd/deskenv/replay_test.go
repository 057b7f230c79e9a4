package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/deskenv/deskenv/appliance"
	"github.com/deskenv/deskenv/record"
)

// writeEpisode writes a finished episode of two mouse moves, with the task
// and recorded reward given (nil: none), as the recorder leaves one.
func writeEpisode(t *testing.T, taskID string, reward *float64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ep")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	m := record.Meta{SchemaVersion: record.SchemaVersion, ID: "ep", Source: "agent",
		Screen: record.Size{W: 1024, H: 768}, Model: record.Size{W: 1024, H: 768},
		Status: record.StatusComplete, StartedAt: now, EndedAt: &now, Counts: record.Counts{Steps: 2}}
	if taskID != "" {
		m.Task = &record.TaskInfo{ID: taskID}
	}
	if reward != nil {
		m.Outcome = &record.Outcome{Reward: reward, Done: true}
	}
	b, _ := json.Marshal(m)
	steps := `{"step":0,"source":"agent","action":{"action":"mouse_move","coordinate":[100,100]},"t_start":0.1,"t_end":0.2}
{"step":1,"source":"agent","action":{"action":"mouse_move","coordinate":[200,200]},"t_start":0.3,"t_end":0.4}
`
	for name, body := range map[string]string{record.MetaFile: string(b), record.StepsFile: steps, record.InputFile: ""} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestReplayVerdict: replay exits 1 with the reason whenever it cannot
// reproduce the recorded reward (issue 13: an episode without its task
// printed "reward: none (recorded: 1)" and exited 0), and refuses flags
// that do nothing there.
func TestReplayVerdict(t *testing.T) {
	bin := buildBinary(t)
	tasks := filepath.Join("..", "..", "tasks")
	one, zero := 1.0, 0.0
	cases := []struct {
		name   string
		args   []string
		fails  bool
		output string
	}{
		{"without a task", []string{writeEpisode(t, "", &one)}, true, "recorded without a task, so there is no checker to reproduce its reward (recorded: 1)"},
		{"without a recorded reward", []string{"--tasks", tasks, writeEpisode(t, "hello-file", nil)}, true, "has no recorded reward to compare with"},
		{"rewards differ", []string{"--tasks", tasks, writeEpisode(t, "hello-file", &one)}, true, "the reward 0 differs from the recorded 1"},
		{"reproduced", []string{"--tasks", tasks, writeEpisode(t, "hello-file", &zero)}, false, "reward: 0 (recorded: 0)"},
		{"a flag that does nothing", []string{"--addr", ":1", writeEpisode(t, "", nil)}, true, "--addr does nothing in a replay"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(bin, append([]string{"replay", "--wm", "", "--apps", ""}, c.args...)...)
			cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+t.TempDir())
			out, err := cmd.CombinedOutput()
			if (err != nil) != c.fails || !strings.Contains(string(out), c.output) {
				t.Errorf("deskenv replay %v: %v\n%s\nwant failure %v with %q", c.args, err, out, c.fails, c.output)
			}
			if c.fails && err != nil {
				if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
					t.Errorf("exit %v, want 1", err)
				}
			}
		})
	}
}

// TestReplayBesideTheAppliance: a replay run beside a running appliance,
// with the appliance's defaults, leaves the live desktop's home and session
// alone (issue 13: it reset the live home and deleted the agent's files).
func TestReplayBesideTheAppliance(t *testing.T) {
	live := startDeskenv(t, "--no-stream", "--operator-token", testOperator)
	home := liveHome(t, live)
	// hello-file's setup removes ~/hello.txt: in the live home it would be the
	// agent's work.
	marker := filepath.Join(home, "hello.txt")
	if err := os.WriteFile(marker, []byte("the agent's work\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := buildBinary(t)
	cmd := exec.Command(bin, "replay", "--tasks", filepath.Join("..", "..", "tasks"), writeEpisode(t, "hello-file", new(float64)))
	// The same defaults as the live appliance: its environment's data home.
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+liveEnv(t, live.pid, "XDG_DATA_HOME"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("deskenv replay beside the appliance: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(marker); err != nil || string(b) != "the agent's work\n" {
		t.Errorf("the live desktop's home lost the agent's file after a replay: %v", err)
	}
	if s, _ := request(t, "GET", live.base+"/health", "", nil); s != 200 {
		t.Errorf("the live appliance's health after a replay: %d", s)
	}
}

// liveHome is the home a running appliance chose by default: the session
// user's under appliance.SessionHomes as root (the user it reports: another
// deskenv on the machine may hold the default one), else under its
// XDG_DATA_HOME.
func liveHome(t *testing.T, live *deskenv) string {
	t.Helper()
	if os.Geteuid() == 0 {
		return filepath.Join(appliance.SessionHomes, sessionUserOf(t, live.base, testOperator))
	}
	return filepath.Join(liveEnv(t, live.pid, "XDG_DATA_HOME"), "deskenv", "home")
}

// liveEnv is an environment variable of a running process.
func liveEnv(t *testing.T, pid int, name string) string {
	t.Helper()
	env, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range strings.Split(string(env), "\x00") {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	t.Fatalf("the appliance runs without %s", name)
	return ""
}
