package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/task"
)

// TestTasksCheck proves testdata/taskscheck on a real desktop (Xvfb, the
// executor, the MCP computer tool): good-echo (with params, three seeds)
// passes, wrong-solution's solution does not satisfy its checker and
// idle-wins is satisfied by doing nothing, so the command exits 1 and says
// why; --only smoke keeps only good-echo and exits 0.
func TestTasksCheck(t *testing.T) {
	testrig.NeedTools(t, "Xvfb", "xterm")
	base := []string{"tasks", "check", "--tasks", "testdata/taskscheck", "--session", "bare", "--apps", ""}
	var out, errOut bytes.Buffer
	code := run(base, nil, &out, &errOut)
	if code != 1 {
		t.Fatalf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, &out, &errOut)
	}
	for _, want := range []string{
		"idle run scored 1 (doing nothing must score 0)",
		"solved run scored 0: w.txt says hello (at evaluator): file does not contain \"hello\"",
		"FAIL idle-wins seed 1", "FAIL wrong-solution seed 1", "3 of 5 passed",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, &out)
		}
	}
	for _, seed := range []string{"1", "2", "3"} {
		if !strings.Contains(out.String(), "good-echo       "+seed+"     1              0") {
			t.Errorf("good-echo seed %s is not solved 1 / idle 0:\n%s", seed, &out)
		}
	}
	if !strings.Contains(errOut.String(), "[5/5] ") || !strings.Contains(errOut.String(), "2 of 5 checks failed") {
		t.Errorf("stderr lacks the progress or the verdict:\n%s", &errOut)
	}

	out.Reset()
	errOut.Reset()
	code = run(append(base, "--only", "smoke", "--seeds", "2", "--json"), nil, &out, &errOut)
	if code != 0 {
		t.Fatalf("--only smoke: exit %d\n%s\n%s", code, &out, &errOut)
	}
	var jobs []checkJob
	if err := json.Unmarshal(out.Bytes(), &jobs); err != nil {
		t.Fatalf("--json: %v\n%s", err, &out)
	}
	if len(jobs) != 2 || jobs[0].Task != "good-echo" || !jobs[0].OK || *jobs[0].Solved != 1 || *jobs[0].Idle != 0 || len(jobs[0].Params) != 3 {
		t.Errorf("--only smoke --seeds 2: %s", &out)
	}
	if jobs[0].Params["word"] == jobs[1].Params["word"] && jobs[0].Params["n"] == jobs[1].Params["n"] {
		t.Logf("seeds 1 and 2 drew the same values (possible, but unlikely): %v", jobs[0].Params)
	}
}

func TestTasksCheckUsage(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"tasks"}, "the subcommand is check"},
		{[]string{"tasks", "check", "--tasks", "testdata/taskscheck", "--only", "nosuch"}, "no task in testdata/taskscheck has a tag or id among --only nosuch"},
		{[]string{"tasks", "check", "--tasks", "testdata/nosuchdir"}, "no such file or directory"},
		{[]string{"tasks", "check", "--tasks", "testdata/taskscheck", "--seeds", "-1"}, "--seeds -1"},
		{[]string{"tasks", "check", "--tasks", "testdata/taskscheck", "--addr", ":9"}, "--addr does nothing here"},
	}
	for _, c := range cases {
		var out bytes.Buffer
		if code := run(c.args, nil, &out, &out); code != 2 || !strings.Contains(out.String(), c.want) {
			t.Errorf("%v: exit %d, want 2 and %q:\n%s", c.args, code, c.want, &out)
		}
	}
}

// TestSchedule keeps tasks that serve on the same port on one desktop (the
// desktops share the loopback), and shares the others.
func TestSchedule(t *testing.T) {
	mk := func(id string, port int) *task.Task {
		setup := ""
		if port != 0 {
			setup = fmt.Sprintf(`"setup":[{"type":"serve","dir":"~/site","port":%d}],`, port)
		}
		tk, err := task.Parse([]byte(`{"id":"`+id+`","instruction":"x",`+setup+`"evaluator":{"type":"file_exists","path":"~/a"}}`), id+".json")
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	tasks := []*task.Task{mk("a", 8123), mk("b", 8123), mk("c", 8312), mk("d", 0), mk("e", 8123)}
	var jobs []*checkJob
	for _, tk := range tasks {
		for s := range 3 {
			jobs = append(jobs, &checkJob{Task: tk.ID, Seed: int64(s + 1), t: tk})
		}
	}
	lanes, shared := schedule(jobs, 2, false)
	laneOf := map[string]int{}
	for i, l := range lanes {
		for _, j := range l {
			if prev, ok := laneOf[j.Task]; ok && prev != i {
				t.Errorf("%s runs on desktops %d and %d", j.Task, prev, i)
			}
			laneOf[j.Task] = i
		}
	}
	if laneOf["a"] != laneOf["b"] || laneOf["a"] != laneOf["e"] || laneOf["a"] == laneOf["c"] {
		t.Errorf("lanes %v: a, b and e share port 8123 and must share a desktop; c has its own port", laneOf)
	}
	var rest []string
	for j := range shared {
		rest = append(rest, j.Task)
	}
	if len(rest) != 3 || rest[0] != "d" {
		t.Errorf("shared jobs %v, want d's three", rest)
	}

	// Desktops that share the ports (users of their own) take any job.
	lanes, shared = schedule(jobs, 2, true)
	n := 0
	for range shared {
		n++
	}
	if len(lanes[0])+len(lanes[1]) != 0 || n != len(jobs) {
		t.Errorf("with shared ports: lanes of %d and %d jobs, %d shared; want every job shared", len(lanes[0]), len(lanes[1]), n)
	}
}
