package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jezek/xgb/xproto"
	"github.com/mark3labs/mcp-go/mcp"
	dto "github.com/prometheus/client_model/go"

	"github.com/deskenv/deskenv/baseline"
	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/lifecycle"
	"github.com/deskenv/deskenv/task"
)

// typeLine types a shell line into the focused terminal, as an agent does.
func (r *rig) typeLine(t testing.TB, line string) {
	t.Helper()
	ctx := context.Background()
	for _, a := range []hci.Action{{Action: hci.ActType, Text: line}, {Action: hci.ActKey, Text: "Return"}} {
		if _, err := r.exec.Do(ctx, a, hci.SourceAgent); err != nil {
			t.Fatalf("%s: %v", a.String(), err)
		}
	}
}

// inputDown reports keys and buttons the X server itself has down, whoever
// pressed them.
func (r *rig) inputDown(t testing.TB) (keys []int, buttons uint16) {
	t.Helper()
	x := openLook(t, r.d)
	km, err := xproto.QueryKeymap(x.conn).Reply()
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range km.Keys {
		for bit := 0; bit < 8; bit++ {
			if b&(1<<bit) != 0 {
				keys = append(keys, i*8+bit)
			}
		}
	}
	p, err := xproto.QueryPointer(x.conn, x.root).Reply()
	if err != nil {
		t.Fatal(err)
	}
	return keys, p.Mask & (xproto.ButtonMask1 | xproto.ButtonMask2 | xproto.ButtonMask3 | xproto.ButtonMask4 | xproto.ButtonMask5)
}

func TestResetRestoresBaseline(t *testing.T) {
	testrig.NeedTools(t, "xclip", "xprop", "xrdb", "xdotool")
	r := newRig(t, rigOptions{mode: ModeSim})
	ctx := context.Background()
	want := testrig.TreeOf(t, r.c.Baseline().Home().Dir())
	baseWindows := baseline.ClassKey(r.c.BaselineWindows())
	if baseWindows != "xterm/XTerm" {
		t.Fatalf("baseline windows %q, want the session's one xterm", baseWindows)
	}
	x := openLook(t, r.d)
	baseProps, err := x.rootProps()
	if err != nil {
		t.Fatal(err)
	}
	basePX, basePY, _ := x.pointer()

	for round := 1; round <= 3; round++ {
		// The agent messes the desktop up through its own terminal: files,
		// the clipboard, a background process, X server state (a root
		// property, X resources, the current desktop) and, last since new
		// windows take the focus, two windows.
		r.typeLine(t, "echo junk > ~/junk.txt; rm ~/notes.txt; mkdir -p ~/deep/er && echo x > ~/deep/er/f; chmod 700 ~/Documents; echo more >> ~/.bashrc")
		r.typeLine(t, "printf secret | xclip -selection clipboard; (sleep 600 &)")
		r.typeLine(t, "xprop -root -f AGENT_MARK 8s -set AGENT_MARK here; echo 'XTerm*background: red' | xrdb -merge; touch ~/x-done")
		testrig.WaitFor(t, "the agent's files and X changes", func() bool {
			_, err := os.Stat(filepath.Join(r.home, "x-done"))
			return err == nil
		})
		r.typeLine(t, "xterm -class Mess1 -e sleep 300 & setsid xterm -class Mess2 -e sleep 300 &")
		if _, err := r.exec.Do(ctx, hci.Action{Action: hci.ActMouseMove, Coordinate: []int{700, 500}}, hci.SourceAgent); err != nil {
			t.Fatal(err)
		}
		testrig.WaitFor(t, "the agent's windows", func() bool {
			k := r.windowClasses(t)
			return strings.Contains(k, "Mess1") && strings.Contains(k, "Mess2") && x.selectionOwner("CLIPBOARD") != 0
		})
		// Switching desktops hides the terminal, so a process of the
		// desktop does it rather than a typed command.
		setDesktop := exec.Command("xdotool", "set_desktop", "1")
		setDesktop.Env = r.d.Env()
		if out, err := setDesktop.CombinedOutput(); err != nil {
			t.Fatalf("xdotool set_desktop: %v %s", err, out)
		}
		testrig.WaitFor(t, "the agent's X changes", func() bool {
			props, _ := x.rootProps()
			return props[x.atom("AGENT_MARK")].data != nil && string(props[x.atom("_NET_CURRENT_DESKTOP")].data) != string(baseProps[x.atom("_NET_CURRENT_DESKTOP")].data)
		})
		// ... and holds a key and a button down.
		if err := r.exec.KeyDown(ctx, hci.Keysym(0xffe1), hci.SourceAgent); err != nil { // Shift_L
			t.Fatal(err)
		}
		if err := r.exec.ButtonDown(ctx, 1, hci.SourceAgent); err != nil {
			t.Fatal(err)
		}
		if keys, buttons := r.inputDown(t); len(keys) == 0 || buttons == 0 {
			t.Fatalf("the held key and button did not reach the server: keys %v buttons %x", keys, buttons)
		}

		ep, err := r.c.Reset(ctx, ResetRequest{})
		if err != nil {
			t.Fatalf("round %d: reset: %v", round, err)
		}
		if got := testrig.TreeOf(t, r.home); got != want {
			t.Errorf("round %d: home after the reset:\n%s\nwant the baseline:\n%s", round, got, want)
		}
		if got := r.windowClasses(t); got != baseWindows {
			t.Errorf("round %d: windows after the reset %q, want %q", round, got, baseWindows)
		}
		if keys, buttons := r.inputDown(t); len(keys) != 0 || buttons != 0 {
			t.Errorf("round %d: input still down after the reset: keycodes %v, button mask %x", round, keys, buttons)
		}
		if k, b := r.exec.Held(); len(k) != 0 || len(b) != 0 {
			t.Errorf("round %d: the executor still holds keys %v buttons %v", round, k, b)
		}
		if o := x.selectionOwner("CLIPBOARD"); o != 0 {
			t.Errorf("round %d: CLIPBOARD is still owned (by 0x%x)", round, o)
		}
		props, err := x.rootProps()
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"AGENT_MARK", "RESOURCE_MANAGER", "_NET_CURRENT_DESKTOP", "_NET_NUMBER_OF_DESKTOPS"} {
			a := x.atom(name)
			if got, want := props[a], baseProps[a]; string(got.data) != string(want.data) || got.typ != want.typ {
				t.Errorf("round %d: root property %s is %q after the reset, want the baseline's %q", round, name, got.data, want.data)
			}
		}
		if px, py, _ := x.pointer(); px != basePX || py != basePY {
			t.Errorf("round %d: pointer at %d,%d after the reset, want the baseline's %d,%d", round, px, py, basePX, basePY)
		}
		session := map[int]bool{}
		for _, p := range r.d.SessionPIDs() {
			session[p] = true
			for c := range descendants(p) {
				session[c] = true
			}
		}
		for _, p := range displayProcesses(r.d.Name()) {
			if !session[p] {
				cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
				t.Errorf("round %d: process %d (%q) outside the session survived the reset", round, p, cmd)
			}
		}
		if ep.Observation == nil || ep.Observation.MIME != "image/png" {
			t.Fatalf("round %d: reset returned no PNG observation: %+v", round, ep.Observation)
		}
		if _, err := png.Decode(bytes.NewReader(ep.Observation.Data)); err != nil {
			t.Errorf("round %d: the observation is not a PNG: %v", round, err)
		}
		if !ep.Reset.WindowsMatched {
			t.Errorf("round %d: the reset says the windows did not match: %+v", round, ep.Reset.WindowsAfter)
		}
		t.Logf("round %d: reset %v (kill %v, home %v, session %v, windows %v, settle %v; killed %d processes, %d clients)", round,
			ep.Reset.Total.Round(time.Millisecond), ep.Reset.Kill.Round(time.Millisecond), ep.Reset.Home.Round(time.Millisecond),
			ep.Reset.Session.Round(time.Millisecond), ep.Reset.Windows.Round(time.Millisecond), ep.Reset.Settle.Round(time.Millisecond),
			ep.Reset.KilledProcesses, ep.Reset.KilledClients)
	}
}

func TestEpisodeLifecycle(t *testing.T) {
	ts := loadExampleTasks(t)
	r := newRig(t, rigOptions{mode: ModeSim, tasks: ts})
	ctx := context.Background()
	heard := r.listen(t, lifecycle.EpisodeStarted, lifecycle.EpisodeEnded)

	t.Run("bad task id", func(t *testing.T) {
		_, err := r.c.Reset(ctx, ResetRequest{TaskID: "no-such-task"})
		// The list is cut after twenty (tasks/ holds a hundred), in order.
		if !errors.Is(err, ErrUnknownTask) || !strings.Contains(err.Error(), "known tasks are "+ts[0].ID+", ") {
			t.Fatalf("Reset(no-such-task) = %v, want ErrUnknownTask listing the known tasks", err)
		}
	})

	seed := int64(7)
	ep, err := r.c.Reset(ctx, ResetRequest{Seed: &seed, EpisodeID: "ep-1"})
	if err != nil {
		t.Fatal(err)
	}
	if ep.ID != "ep-1" || *ep.Seed != 7 || ep.Status != "running" || ep.TaskID != "" {
		t.Fatalf("reset returned %+v", ep)
	}
	// Two agent actions (one a tool call, one from the agent's run_script),
	// a person's key press count as three steps; motion, the release and a
	// replay do not.
	for _, st := range []struct {
		a   hci.Action
		src hci.Source
	}{
		{hci.Action{Action: hci.ActMouseMove, Coordinate: []int{10, 10}}, hci.SourceAgent},
		{hci.Action{Action: hci.ActCursorPosition}, hci.SourceScript},
		{hci.Action{Action: hci.ActCursorPosition}, hci.SourceReplay},
	} {
		if _, err := r.exec.Do(ctx, st.a, st.src); err != nil {
			t.Fatal(err)
		}
	}
	r.exec.KeyDown(ctx, hci.Keysym('a'), hci.SourceHuman)
	r.exec.KeyUp(ctx, hci.Keysym('a'), hci.SourceHuman)
	r.exec.MoveTo(ctx, 20, 20, hci.SourceHuman)

	end, err := r.c.End(ctx, "ep-1")
	if err != nil {
		t.Fatal(err)
	}
	if end.Steps != 3 || end.AgentSteps != 2 || end.HumanSteps != 1 {
		t.Errorf("steps %d (agent %d, human %d), want 3 (2, 1)", end.Steps, end.AgentSteps, end.HumanSteps)
	}
	if end.Reward != nil || end.Success != nil || end.EndReason != "ended" || end.Status != "ended" {
		t.Errorf("an episode without a task ended as %+v, want unscored", end)
	}
	again, err := r.c.End(ctx, "ep-1")
	if err != nil || again.EndedAt == nil || !again.EndedAt.Equal(*end.EndedAt) {
		t.Errorf("ending it again = %+v, %v; want the same record", again, err)
	}
	if _, err := r.c.End(ctx, "nope"); !errors.Is(err, ErrUnknownEpisode) {
		t.Errorf("End(nope) = %v, want ErrUnknownEpisode", err)
	}
	if _, err := r.c.End(ctx, ""); !errors.Is(err, ErrUnknownEpisode) {
		t.Errorf("End() with nothing running = %v, want ErrUnknownEpisode", err)
	}

	// A task episode left undone scores 0 with reasons; the next reset ends
	// (and scores) the running one.
	ep2, err := r.c.Reset(ctx, ResetRequest{TaskID: "mkdir-project"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.c.Reset(ctx, ResetRequest{}); err != nil {
		t.Fatal(err)
	}
	rec, err := r.c.Episode(ep2.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.EndReason != "next_reset" || rec.Reward == nil || *rec.Reward != 0 || *rec.Success || len(rec.Reasons) == 0 || rec.Reasons[0].Passed {
		t.Errorf("undone task episode ended as %+v, want reward 0 with failing reasons", rec)
	}

	st := r.c.Stats()
	if st.Episodes != 2 || st.Scored != 1 || st.Successes != 0 || st.SuccessRate == nil || *st.SuccessRate != 0 || !st.Running {
		t.Errorf("stats %+v", st)
	}
	if st.Reset.Count != 3 || st.Reset.P50 == nil {
		t.Errorf("reset stats %+v, want 3 resets", st.Reset)
	}
	if len(st.ByTask) != 1 || st.ByTask[0].TaskID != "mkdir-project" {
		t.Errorf("per-task stats %+v", st.ByTask)
	}
	started, ended := heard.of(lifecycle.EpisodeStarted, 3), heard.of(lifecycle.EpisodeEnded, 2)
	if len(started) != 3 || len(ended) != 2 || started[0].Episode.ID != "ep-1" || ended[0].Episode.ID != "ep-1" || ended[1].Episode.ID != ep2.ID {
		t.Errorf("the lifecycle bus heard starts %d and ends %d: %+v / %+v", len(started), len(ended), started, ended)
	} else if out := ended[1].Outcome; out == nil || out.Reward == nil || *out.Reward != 0 || !out.Done || len(out.Reasons) == 0 {
		t.Errorf("the scored episode's end carried outcome %+v, want reward 0, done, the checker's reasons", out)
	}
	eps := r.c.Episodes(0, "")
	if len(eps) != 3 || eps[0].Status != "running" || eps[1].ID != ep2.ID || eps[2].ID != "ep-1" {
		t.Errorf("history (newest first) %+v", eps)
	}
	if got := r.c.Episodes(0, "mkdir-project"); len(got) != 1 || got[0].ID != ep2.ID {
		t.Errorf("history of mkdir-project %+v", got)
	}
}

// TestTasksScored solves every example task with a scripted agent that
// replays the task's solution over MCP (a real client to the real MCP server):
// it must score 1, and the same task left undone must score 0 with reasons.
func TestTasksScored(t *testing.T) {
	testrig.NeedTools(t, "mousepad", "chromium")
	// The six examples at the top of tasks/: the suite in its
	// subdirectories (a hundred tasks over real applications) is proven
	// by deskenv tasks check (make tasks-check), which runs the same path.
	var ts []*task.Task
	for _, tk := range loadExampleTasks(t) {
		if filepath.Dir(tk.Path) == filepath.Join("..", "tasks") {
			ts = append(ts, tk)
		}
	}
	r := newRig(t, rigOptions{mode: ModeSim, tasks: ts, tools: true})
	agent := mcpClient(t, r.mcp)
	ctx := context.Background()
	for _, tk := range ts {
		t.Run(tk.ID, func(t *testing.T) {
			if len(tk.Solution) == 0 {
				t.Fatalf("task %s has no solution to replay", tk.ID)
			}
			seed := int64(3)
			ep, err := r.c.Reset(ctx, ResetRequest{TaskID: tk.ID, Seed: &seed})
			if err != nil {
				t.Fatal(err)
			}
			// The task as seed 3 renders it (itself without params).
			rt, _, err := tk.Instantiate(seed)
			if err != nil {
				t.Fatal(err)
			}
			if ep.Instruction != rt.Instruction || ep.Observation == nil {
				t.Fatalf("reset into %s: %+v", tk.ID, ep)
			}
			for _, raw := range rt.Solution {
				var args map[string]any
				json.Unmarshal(raw, &args)
				req := mcp.CallToolRequest{}
				req.Params.Name = "computer"
				req.Params.Arguments = args
				res, err := agent.CallTool(ctx, req)
				if err != nil || res.IsError {
					t.Fatalf("solution step %s: %v %+v", raw, err, res)
				}
			}
			end, err := r.c.End(ctx, ep.ID)
			if err != nil {
				t.Fatal(err)
			}
			if end.Reward == nil || *end.Reward != 1 || !*end.Success {
				t.Fatalf("solved %s scored %v (success %v): %+v", tk.ID, ptrString(end.Reward), ptrString(end.Success), end.Reasons)
			}
			if end.AgentSteps != len(tk.Solution) {
				t.Errorf("the episode counted %d agent steps, the solution has %d", end.AgentSteps, len(tk.Solution))
			}

			undone, err := r.c.Reset(ctx, ResetRequest{TaskID: tk.ID})
			if err != nil {
				t.Fatal(err)
			}
			end, err = r.c.End(ctx, undone.ID)
			if err != nil {
				t.Fatal(err)
			}
			if end.Reward == nil || *end.Reward != 0 || *end.Success || len(end.Reasons) == 0 {
				t.Fatalf("undone %s scored %v: %+v", tk.ID, ptrString(end.Reward), end.Reasons)
			}
			var failed []task.Reason
			for _, rs := range end.Reasons {
				if !rs.Passed {
					failed = append(failed, rs)
				}
			}
			if len(failed) == 0 || failed[0].Detail == "" {
				t.Fatalf("undone %s: no failing reason with a detail: %+v", tk.ID, end.Reasons)
			}
			t.Logf("%s: undone because %s: %s", tk.ID, failed[0].Check, failed[0].Detail)
		})
	}
}

// TestStepSolvesTask solves a task through OpenEnv's HTTP face: reset with
// task_id, list_tools, then call_tool steps.
func TestStepSolvesTask(t *testing.T) {
	ts := loadExampleTasks(t)
	r := newRig(t, rigOptions{mode: ModeSim, tasks: ts, tools: true})
	var tk *task.Task
	for _, x := range ts {
		if x.ID == "hello-file" {
			tk = x
		}
	}
	if tk == nil {
		t.Fatal("the example set has no hello-file task")
	}
	step := func(action any) map[string]any {
		t.Helper()
		var out map[string]any
		if st := postJSON(t, r.srv.URL+"/step", "", map[string]any{"action": action}, &out); st != 200 {
			t.Fatalf("step %v: status %d: %v", action, st, out)
		}
		return out["observation"].(map[string]any)
	}
	var reset map[string]any
	if st := postJSON(t, r.srv.URL+"/reset", "", map[string]any{"task_id": tk.ID}, &reset); st != 200 {
		t.Fatalf("reset: %d %v", st, reset)
	}
	obs := reset["observation"].(map[string]any)
	if obs["instruction"] != tk.Instruction {
		t.Fatalf("reset observation %v lacks the instruction", obs)
	}
	found := false
	for _, tl := range step(map[string]any{"type": "list_tools"})["tools"].([]any) {
		found = found || tl.(map[string]any)["name"] == "computer"
	}
	if !found {
		t.Fatal("list_tools has no computer tool")
	}
	for _, raw := range tk.Solution {
		var args map[string]any
		json.Unmarshal(raw, &args)
		if o := step(map[string]any{"type": "call_tool", "tool_name": "computer", "arguments": args}); o["error"] != nil {
			t.Fatalf("step %s: %v", raw, o["error"])
		}
	}
	var end Episode
	if st := postJSON(t, r.srv.URL+"/api/episodes/"+obs["episode_id"].(string)+"/end", "", nil, &end); st != 200 || end.Reward == nil || *end.Reward != 1 {
		t.Fatalf("end: %d %+v", st, end)
	}
	var state map[string]any
	getJSON(t, r.srv.URL+"/state", "", &state)
	if state["episode_id"] != nil {
		t.Errorf("state after the end still names an episode: %v", state)
	}
}

func TestTaskSetupFailure(t *testing.T) {
	bad, err := task.Parse([]byte(`{"id":"bad-setup","instruction":"x","setup":[{"type":"command","command":"echo broken >&2; exit 3"}],"evaluator":{"type":"file_exists","path":"~/x"}}`), "bad-setup.json")
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, rigOptions{mode: ModeSim, tasks: []*task.Task{bad}})
	_, err = r.c.Reset(context.Background(), ResetRequest{TaskID: "bad-setup"})
	if err == nil || !strings.Contains(err.Error(), "set up task bad-setup") {
		t.Fatalf("reset into a task whose setup fails = %v, want an error naming the task", err)
	}
	if r.c.Current() != nil {
		t.Error("a failed reset left an episode running")
	}
	var m dto.Metric
	r.c.metrics.resets.WithLabelValues("error").Write(&m)
	if v := m.GetCounter().GetValue(); v != 1 {
		t.Errorf("resets{result=error} = %v, want 1", v)
	}
}

// TestSeedReachesSetup checks the seed and episode id reach setup commands.
func TestSeedReachesSetup(t *testing.T) {
	tk, err := task.Parse([]byte(`{"id":"seeded","instruction":"x","setup":[{"type":"command","command":"echo \"$DESKENV_SEED $DESKENV_EPISODE_ID\" > ~/seed.txt"}],"evaluator":{"type":"file_contains","path":"~/seed.txt","contains":"42 it's-mine"}}`), "seeded.json")
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, rigOptions{mode: ModeSim, tasks: []*task.Task{tk}})
	seed := int64(42)
	if _, err := r.c.Reset(context.Background(), ResetRequest{TaskID: "seeded", Seed: &seed, EpisodeID: "it's-mine"}); err != nil {
		t.Fatal(err)
	}
	ep, err := r.c.End(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if ep.Reward == nil || *ep.Reward != 1 {
		b, _ := os.ReadFile(filepath.Join(r.home, "seed.txt"))
		t.Fatalf("setup did not see the seed and id: ~/seed.txt is %q; reasons %+v", b, ep.Reasons)
	}
}

func TestResetInProdMode(t *testing.T) {
	r := newRig(t, rigOptions{mode: ModeProd})
	if _, err := r.c.Reset(context.Background(), ResetRequest{}); !errors.Is(err, ErrProdMode) {
		t.Fatalf("Reset in prod mode = %v, want ErrProdMode", err)
	}
	if r.c.Baseline() != nil {
		t.Error("prod mode took a home baseline it will never restore")
	}
}

func TestNewChecksConfig(t *testing.T) {
	r := newRig(t, rigOptions{mode: ModeSim})
	cases := []struct {
		name  string
		whole bool // the display, executor, capturer and shooter given
		cfg   Config
		want  string
	}{
		{"nothing", false, Config{}, "required"},
		{"bad mode", true, Config{Mode: "test"}, `mode "test"`},
		{"baseline in home", true, Config{BaselineDir: filepath.Join(r.home, "b"), WindowWait: time.Second}, "inside home"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			if c.whole {
				_, err = New(r.d, r.exec, r.capt, r.shoot, nil, nil, c.cfg)
			} else {
				_, err = New(nil, nil, nil, nil, nil, nil, c.cfg)
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("New = %v, want an error containing %q", err, c.want)
			}
		})
	}
}

// postJSON posts v as JSON with an optional bearer token and decodes the
// answer into out.
func postJSON(t testing.TB, url, token string, v any, out any) int {
	t.Helper()
	var body []byte
	switch b := v.(type) {
	case []byte:
		body = b
	case string:
		body = []byte(b)
	default:
		body, _ = json.Marshal(v)
	}
	return doJSON(t, "POST", url, token, body, out)
}

func getJSON(t testing.TB, url, token string, out any) int {
	t.Helper()
	return doJSON(t, "GET", url, token, nil, out)
}

// TestResetGatesInput: while a reset runs, the agent's tool calls and
// scripts and a person's input are refused with ErrResetting, and published
// nowhere; once it has answered they act again.
func TestResetGatesInput(t *testing.T) {
	r := newRig(t, rigOptions{mode: ModeSim})
	ctx := context.Background()
	type try struct {
		src hci.Source
		err error
	}
	var during []try
	// The start hook runs inside the reset, after the desktop is back and
	// before Reset answers: the latest moment an early action could land.
	r.c.testHookStarted = func(Episode) {
		for _, src := range []hci.Source{hci.SourceAgent, hci.SourceScript, hci.SourceHuman} {
			_, err := r.exec.Do(ctx, hci.Action{Action: hci.ActMouseMove, Coordinate: []int{30, 30}}, src)
			during = append(during, try{src, err})
		}
	}
	if _, err := r.c.Reset(ctx, ResetRequest{}); err != nil {
		t.Fatal(err)
	}
	if len(during) != 3 {
		t.Fatalf("the hook ran %d actions", len(during))
	}
	for _, d := range during {
		if !errors.Is(d.err, ErrResetting) {
			t.Errorf("%s during a reset: %v, want ErrResetting", d.src, d.err)
		}
	}
	if _, err := r.exec.Do(ctx, hci.Action{Action: hci.ActMouseMove, Coordinate: []int{40, 40}}, hci.SourceAgent); err != nil {
		t.Errorf("the agent after the reset: %v", err)
	}
}

// TestResetObservationSettled: a plain reset settles for half the quiet
// period once the session's windows are back, so its first observation must
// already be the screen as it stays: after an episode's mess (a stray
// window, a held key, a file), the reset's observation equals a screenshot
// taken well after it, on the bare session and on the default desktop.
func TestResetObservationSettled(t *testing.T) {
	tests := []struct {
		name    string
		session string
		tools   []string
	}{
		{"bare", "", nil},
		{"desktop", display.SessionDesktop, []string{"tint2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			testrig.NeedTools(t, tc.tools...)
			r := newRig(t, rigOptions{mode: ModeSim, session: tc.session})
			ctx := testrig.Context(t, 3*time.Minute)
			for round := range 6 {
				testrig.SpawnDetached(t, r.d, "xterm", "-class", "Stray", "-e", "sleep", "300")
				testrig.WriteFile(t, filepath.Join(r.home, "episode", "out.txt"), "x", 0o644)
				testrig.WaitFor(t, "the stray window", func() bool { return strings.Contains(r.windowClasses(t), "Stray") })
				ep, err := r.c.Reset(ctx, ResetRequest{})
				if err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				if ep.Observation == nil {
					t.Fatalf("round %d: no observation", round)
				}
				time.Sleep(700 * time.Millisecond)
				later, err := r.shoot.Shot(ctx)
				if err != nil {
					t.Fatal(err)
				}
				first, err := png.Decode(bytes.NewReader(ep.Observation.Data))
				if err != nil {
					t.Fatal(err)
				}
				then, err := png.Decode(bytes.NewReader(later.Data))
				if err != nil {
					t.Fatal(err)
				}
				if n, at := differingPixels(first, then, tc.session != ""); n > 0 {
					t.Errorf("round %d: the reset's observation differs from the screen 0.7 s later in %d pixels (first at %v): the reset answered before the session finished drawing", round, n, at)
				}
			}
		})
	}
}

// differingPixels counts the pixels where a and b differ, leaving out the
// panel's bottom strip when panel is set (its clock may turn over between
// the two).
func differingPixels(a, b image.Image, panel bool) (int, image.Point) {
	r := a.Bounds()
	if panel {
		r.Max.Y -= r.Dy() / 10
	}
	n, first := 0, image.Point{-1, -1}
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			if a.At(x, y) != b.At(x, y) {
				if n == 0 {
					first = image.Pt(x, y)
				}
				n++
			}
		}
	}
	return n, first
}
