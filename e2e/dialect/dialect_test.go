// Package dialect_test checks issue 16's "recorded once, spoken in any" end
// to end: one task solved through each model's tool (the computer tool,
// OpenAI's, Gemini's, pyautogui code) on a real control plane with a real
// recorder, each scored by the task's checker; the recordings compared; the
// episodes exported in each dialect by the deskenv binary and the exports
// run again through that dialect's tool; and deskenv replay on an episode
// a dialect recorded.
package dialect_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/deskenv/deskenv/control"
	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/lifecycle"
	"github.com/deskenv/deskenv/mcpserver"
	"github.com/deskenv/deskenv/record"
	"github.com/deskenv/deskenv/screen"
	"github.com/deskenv/deskenv/task"
)

// The task and what solves it: hello-file's terminal, clicked, the command
// typed, Return.
const (
	taskID  = "hello-file"
	cmdline = "echo hello world > ~/hello.txt"
)

// stack is the appliance's desktop assembled in the test: openbox and an
// xterm, the executor, the control plane with the example tasks, the
// recorder following it on the lifecycle bus, and the MCP server with the
// computer tool and the three dialects, reached by mcp-go's client.
type stack struct {
	d    *display.Display
	exec *hci.Executor
	ctl  *control.Control
	rec  *record.Recorder
	mcp  *client.Client
	home string
	eps  string // the recorder's episodes directory
}

func startStack(ctx context.Context, t *testing.T, tasks []*task.Task) *stack {
	t.Helper()
	testrig.NeedTools(t, "openbox", "xterm", "xdotool")
	home := testrig.SessionHome(t)
	d := testrig.Display(t, display.Config{Home: home, WindowManager: []string{"openbox"}, Apps: [][]string{{"xterm"}}})
	ex, err := hci.NewExecutor(d, hci.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	capt, err := screen.NewCapturer(d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { capt.Close() })
	sp := ex.Space()
	shooter := screen.NewShooter(capt, screen.ShooterOptions{ModelW: sp.ModelW, ModelH: sp.ModelH})
	lc := lifecycle.NewBus()
	t.Cleanup(func() { lc.Close() })
	ctl, err := control.New(d, ex, capt, shooter, tasks, nil, control.Config{Mode: control.ModeSim, Home: home, Lifecycle: lc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctl.Close() })
	eps := t.TempDir()
	rec, err := record.New(eps, ex, shooter, capt, record.Options{Lifecycle: lc, FPS: -1, Session: display.SessionBare})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rec.Close() })
	srv, err := mcpserver.New(ex, shooter, capt, mcpserver.Config{
		Modes:  []mcpserver.Mode{mcpserver.ModeComputer, mcpserver.ModeOpenAI, mcpserver.ModeGemini, mcpserver.ModePyAutoGUI},
		Settle: screen.SettleOptions{Quiet: 50 * time.Millisecond, Max: time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := transport.NewStreamableHTTP(testrig.Serve(t, srv.Handler()) + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	t.Cleanup(func() { c.Close() })
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		t.Fatal(err)
	}
	return &stack{d: d, exec: ex, ctl: ctl, rec: rec, mcp: c, home: home, eps: eps}
}

// solver solves the task through one tool, clicking at model pixel p,
// which is the centre of Gemini's grid cell g.
type solver struct {
	tool  string // the computer tool or a dialect
	solve func(p, g [2]int) []toolCall
}

type toolCall struct {
	name string
	args map[string]any
}

func solvers() []solver {
	return []solver{
		{"computer", func(p, _ [2]int) []toolCall {
			return []toolCall{
				{"computer", map[string]any{"action": "left_click", "coordinate": p[:]}},
				{"computer", map[string]any{"action": "type", "text": cmdline}},
				{"computer", map[string]any{"action": "key", "text": "Return"}},
			}
		}},
		{hci.DialectOpenAI, func(p, _ [2]int) []toolCall {
			return []toolCall{{"computer_use_preview", map[string]any{"actions": []map[string]any{
				{"type": "click", "button": "left", "x": p[0], "y": p[1]},
				{"type": "type", "text": cmdline},
				{"type": "keypress", "keys": []string{"ENTER"}},
			}}}}
		}},
		{hci.DialectGemini, func(_, g [2]int) []toolCall {
			return []toolCall{{"type_text_at", map[string]any{"x": g[0], "y": g[1], "text": cmdline, "press_enter": true, "clear_before_typing": false}}}
		}},
		{hci.DialectPyAutoGUI, func(p, _ [2]int) []toolCall {
			return []toolCall{{"pyautogui", map[string]any{"code": fmt.Sprintf(
				"import pyautogui\npyautogui.click(%d, %d)\npyautogui.write(%s)\npyautogui.press('enter')", p[0], p[1], hci.PyString(cmdline))}}}
		}},
	}
}

// TestSameTaskEveryDialect: hello-file solved once through each tool scores
// 1 each time, and the four recordings are the same canonical steps (the
// click point is the centre of a Gemini grid cell, so the grid says it
// exactly); each episode exported by `deskenv export --dialect` and its
// dialect_json run through that dialect's tool on a fresh reset scores 1
// again; `deskenv replay` of the episode Gemini recorded scores 1.
func TestSameTaskEveryDialect(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	root := testrig.ModuleRoot(t)
	bin := testrig.BuildDeskenv(ctx, t)
	tasks, err := task.Load(filepath.Join(root, "tasks"))
	if err != nil {
		t.Fatal(err)
	}
	st := startStack(ctx, t, tasks)
	sp := st.exec.Space()

	recorded := map[string]*record.Recording{}
	for _, s := range solvers() {
		ep := st.reset(ctx, t, "by-"+s.tool)
		recEp, err := st.rec.Start(ctx, record.EpisodeInfo{Source: "agent"}) // the running episode
		if err != nil {
			t.Fatal(err)
		}
		if recEp.ID() != ep.ID {
			t.Fatalf("recording %s, want the running episode %s", recEp.ID(), ep.ID)
		}
		p, g := st.gridPoint(ctx, t, sp)
		for _, c := range s.solve(p, g) {
			st.call(ctx, t, c.name, c.args)
		}
		st.score(ctx, t, ep.ID, s.tool)
		testrig.WaitWithin(t, 30*time.Second, "the recording to stop when its episode ended", func() bool { return !st.rec.Status().Recording })
		got, err := record.Open(recEp.Dir())
		if err != nil {
			t.Fatal(err)
		}
		recorded[s.tool] = got
		t.Logf("%s: clicked model pixel %v, grid cell %v; recorded %s", s.tool, p, g, strings.Join(stepLines(got), "; "))
	}

	// The four recordings reduce to the same canonical steps; each step of
	// a dialect's episode says which dialect it was said in.
	want := stepLines(recorded["computer"])
	if len(want) != 3 {
		t.Fatalf("the computer tool's episode has steps %v, want click, type, Return", want)
	}
	for tool, rec := range recorded {
		if got := stepLines(rec); !reflect.DeepEqual(got, want) {
			t.Errorf("the episode solved through %s reduced to\n  %s\nwant (the computer tool's)\n  %s", tool, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
		wantVia := tool
		if tool == "computer" {
			wantVia = ""
		}
		for _, step := range rec.Steps {
			if step.Via != wantVia || step.Source != hci.SourceAgent {
				t.Errorf("%s's step %d: via %q source %s, want via %q by the agent", tool, step.Step, step.Via, step.Source, wantVia)
			}
		}
		if o := rec.Meta.Outcome; o == nil || o.Reward == nil || *o.Reward != 1 || rec.Meta.Source != "agent" || rec.Meta.Status != record.StatusComplete {
			t.Errorf("%s's episode.json: source %q status %q outcome %+v, want an agent's complete episode of reward 1", tool, rec.Meta.Source, rec.Meta.Status, o)
		}
	}

	// Exported in each dialect by the binary, and run again through that
	// dialect's tool on a fresh reset: the episode recorded through another
	// tool, so each export crosses from one tool to another.
	from := map[string]string{hci.DialectOpenAI: hci.DialectGemini, hci.DialectGemini: hci.DialectPyAutoGUI, hci.DialectPyAutoGUI: "computer"}
	for _, dialect := range hci.Dialects() {
		rows := exportDialect(ctx, t, bin, st.eps, dialect)
		src := recorded[from[dialect]].Meta.ID
		ep := st.reset(ctx, t, "export-"+dialect)
		calls := 0
		var said []string
		for _, r := range rows[src] {
			if r.DialectJSON != nil {
				said = append(said, *r.DialectJSON)
			}
			switch {
			case r.DialectError != nil:
				t.Fatalf("%s export of %s, step %d: %s", dialect, src, r.Step, *r.DialectError)
			case r.DialectJSON == nil:
				if r.DialectOf == nil {
					t.Fatalf("%s export of %s, step %d: no dialect_json, dialect_of or dialect_error", dialect, src, r.Step)
				}
				continue
			}
			for _, c := range dialectCalls(t, dialect, *r.DialectJSON) {
				st.call(ctx, t, c.name, c.args)
				calls++
			}
		}
		if calls == 0 {
			t.Fatalf("the %s export of %s ran no calls", dialect, src)
		}
		t.Logf("%s export of %s: %d calls: %s", dialect, src, calls, strings.Join(said, " "))
		st.score(ctx, t, ep.ID, dialect+" export of "+src)
	}

	// deskenv replay of the episode Gemini recorded (its steps are
	// canonical) on a fresh desktop of the binary's own making.
	gem := recorded[hci.DialectGemini]
	replay := exec.CommandContext(ctx, bin, "replay", "--tasks", filepath.Join(root, "tasks"), "--home", testrig.SessionHome(t), "--out", t.TempDir(), gem.Dir)
	replay.Env = append(os.Environ(), "XDG_DATA_HOME="+t.TempDir())
	out, err := replay.CombinedOutput()
	t.Logf("deskenv replay of %s:\n%s", gem.Meta.ID, out)
	if err != nil {
		t.Fatalf("deskenv replay of the episode Gemini recorded failed: %v", err)
	}
	if !strings.Contains(string(out), "reward: 1 (recorded: 1)") {
		t.Errorf("deskenv replay of the episode Gemini recorded did not earn its reward again")
	}
}

// reset starts hello-file's next episode, named id.
func (st *stack) reset(ctx context.Context, t *testing.T, id string) *control.Episode {
	t.Helper()
	ep, err := st.ctl.Reset(ctx, control.ResetRequest{TaskID: taskID, EpisodeID: id})
	if err != nil {
		t.Fatalf("reset for %s: %v", id, err)
	}
	if _, err := os.Stat(filepath.Join(st.home, "hello.txt")); err == nil {
		t.Fatalf("reset for %s left ~/hello.txt", id)
	}
	return ep
}

// score waits for the shell to write the file, ends the episode and
// requires the checker's reward of 1.
func (st *stack) score(ctx context.Context, t *testing.T, id, what string) {
	t.Helper()
	testrig.WaitWithin(t, 20*time.Second, what+" to make ~/hello.txt", func() bool {
		b, err := os.ReadFile(filepath.Join(st.home, "hello.txt"))
		return err == nil && string(b) == "hello world\n"
	})
	ended, err := st.ctl.End(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if ended.Reward == nil || *ended.Reward != 1 {
		t.Fatalf("%s scored %v, want 1: %+v", what, ended.Reward, ended.Reasons)
	}
}

// call calls a tool; a tool error fails the test.
func (st *stack) call(ctx context.Context, t *testing.T, name string, args map[string]any) {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := st.mcp.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		var text []string
		for _, c := range res.Content {
			if tc, ok := c.(mcp.TextContent); ok {
				text = append(text, tc.Text)
			}
		}
		t.Fatalf("%s %v: %s", name, args, strings.Join(text, " "))
	}
}

// gridPoint is where to click the task's terminal: the model pixel at the
// centre of the Gemini grid cell under the window's centre, so that every
// dialect names the same pixel exactly (FromGrid(g) is that pixel, and
// ToGrid of it is g again, on a model axis of 1,000 pixels or more). It
// must fall inside the window.
func (st *stack) gridPoint(ctx context.Context, t *testing.T, sp hci.Space) (p, g [2]int) {
	t.Helper()
	x, y, w, h := windowRect(ctx, t, st.d, "deskenv terminal")
	mx, my := sp.ToModel(x+w/2, y+h/2)
	g[0], g[1] = sp.ToGrid(mx, my, hci.GeminiGrid)
	px, py, err := sp.FromGrid(g[0], g[1], hci.GeminiGrid)
	if err != nil {
		t.Fatal(err)
	}
	if bx, by := sp.ToGrid(px, py, hci.GeminiGrid); bx != g[0] || by != g[1] {
		t.Fatalf("grid cell %v's pixel (%d, %d) maps back to cell (%d, %d) on %v", g, px, py, bx, by, sp)
	}
	if sx, sy := sp.ToScreen(px, py); sx < x || sy < y || sx >= x+w || sy >= y+h {
		t.Fatalf("the click point (%d, %d) on the screen is outside the terminal (%d, %d, %dx%d)", sx, sy, x, y, w, h)
	}
	return [2]int{px, py}, g
}

// stepLines are an episode's canonical actions, one JSON line each.
func stepLines(rec *record.Recording) []string {
	var out []string
	for _, s := range rec.Steps {
		out = append(out, s.Action.String())
	}
	return out
}

// exportDialect runs `deskenv export --format jsonl --dialect dialect` and
// returns its rows by episode, in step order.
func exportDialect(ctx context.Context, t *testing.T, bin, episodes, dialect string) map[string][]record.DialectRow {
	t.Helper()
	out := filepath.Join(t.TempDir(), dialect, "train.jsonl")
	cmd := exec.CommandContext(ctx, bin, "export", "--format", "jsonl", "--dialect", dialect, "--task", taskID, "--out", out, episodes)
	if b, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(b), "12 rows from 4 episodes") {
		t.Fatalf("deskenv export --dialect %s: %v\n%s", dialect, err, b)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows := map[string][]record.DialectRow{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r record.DialectRow
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s export line %s: %v", dialect, sc.Bytes(), err)
		}
		if r.Dialect != dialect {
			t.Errorf("%s export row says dialect %q", dialect, r.Dialect)
		}
		rows[r.EpisodeID] = append(rows[r.EpisodeID], r)
	}
	return rows
}

// dialectCalls are the tool calls that run one row's dialect_json: OpenAI's
// action objects as one batch, each Gemini function call as its tool,
// pyautogui's lines as one program.
func dialectCalls(t *testing.T, dialect, js string) []toolCall {
	t.Helper()
	switch dialect {
	case hci.DialectOpenAI:
		var objs []map[string]any
		if err := json.Unmarshal([]byte(js), &objs); err != nil {
			t.Fatalf("openai dialect_json %s: %v", js, err)
		}
		return []toolCall{{"computer_use_preview", map[string]any{"actions": objs}}}
	case hci.DialectGemini:
		var fcs []hci.GeminiCall
		if err := json.Unmarshal([]byte(js), &fcs); err != nil {
			t.Fatalf("gemini dialect_json %s: %v", js, err)
		}
		var out []toolCall
		for _, fc := range fcs {
			out = append(out, toolCall{fc.Name, fc.Args})
		}
		return out
	}
	var lines []string
	if err := json.Unmarshal([]byte(js), &lines); err != nil {
		t.Fatalf("pyautogui dialect_json %s: %v", js, err)
	}
	return []toolCall{{"pyautogui", map[string]any{"code": "import pyautogui\nimport time\n" + strings.Join(lines, "\n")}}}
}

// windowRect finds a window by title with xdotool: its position and size in
// screen pixels.
func windowRect(ctx context.Context, t *testing.T, d *display.Display, title string) (x, y, w, h int) {
	t.Helper()
	cmd := exec.CommandContext(ctx, "xdotool", "search", "--sync", "--onlyvisible", "--name", title, "getwindowgeometry", "--shell")
	cmd.Env = append(os.Environ(), d.Env()...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("xdotool: %v", err)
	}
	v := map[string]int{}
	for _, line := range strings.Split(string(out), "\n") {
		if k, val, ok := strings.Cut(line, "="); ok {
			var n int
			fmt.Sscan(val, &n)
			v[k] = n
		}
	}
	if v["WIDTH"] == 0 {
		t.Fatalf("no window %q: %s", title, out)
	}
	return v["X"], v["Y"], v["WIDTH"], v["HEIGHT"]
}
