package mcpserver

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"

	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/internal/xprobe"
)

// dialectCase is one input a model of a dialect really emits and the
// canonical (computer tool) actions it must be: the X events the probe
// receives and the actions published on the hci bus must be the same for
// both.
type dialectCase struct {
	name string
	tool string
	args map[string]any
	want func(sp hci.Space) []map[string]any
}

// same is a want that does not depend on the space.
func same(steps ...map[string]any) func(hci.Space) []map[string]any {
	return func(hci.Space) []map[string]any { return steps }
}

type act = map[string]any

// openAICases are OpenAI computer-use actions. Shapes and field names from
// openai-python src/openai/types/responses/computer_action.py and the
// Responses API's computer_call item (read 2026-11-26); the batch
// [{"type": "click", "x": 405, "y": 157}, {"type": "type", "text":
// "penguin"}] is the example OpenAI's computer-use guide gives for batched
// actions (quoted by https://rkalani1.github.io/agent-builder-field-guide/
// browser-use/openai/, verified 2026-05-06); key names (CTRL, ENTER,
// ARROWLEFT) as OpenAI's CUA sample app maps them.
func openAICases() []dialectCase {
	one := func(a act) map[string]any { return map[string]any{"action": a} }
	return []dialectCase{
		{"click", openAITool, one(act{"type": "click", "button": "left", "x": 405, "y": 157}),
			same(act{"action": "left_click", "coordinate": []int{405, 157}})},
		{"batch click and type", openAITool, map[string]any{"actions": []act{{"type": "click", "x": 405, "y": 157}, {"type": "type", "text": "penguin"}}},
			same(act{"action": "left_click", "coordinate": []int{405, 157}}, act{"action": "type", "text": "penguin"})},
		{"right click", openAITool, one(act{"type": "click", "button": "right", "x": 10, "y": 20}),
			same(act{"action": "right_click", "coordinate": []int{10, 20}})},
		{"wheel click", openAITool, one(act{"type": "click", "button": "wheel", "x": 30, "y": 40}),
			same(act{"action": "middle_click", "coordinate": []int{30, 40}})},
		{"shift click", openAITool, one(act{"type": "click", "button": "left", "x": 50, "y": 60, "keys": []string{"SHIFT"}}),
			same(act{"action": "left_click", "coordinate": []int{50, 60}, "text": "shift"})},
		{"back button", openAITool, one(act{"type": "click", "button": "back", "x": 70, "y": 80}),
			same(act{"action": "mouse_move", "coordinate": []int{70, 80}}, act{"action": "key", "text": "alt+Left"})},
		{"double click", openAITool, one(act{"type": "double_click", "x": 300, "y": 200}),
			same(act{"action": "double_click", "coordinate": []int{300, 200}})},
		{"keypress ctrl+l", openAITool, one(act{"type": "keypress", "keys": []string{"CTRL", "L"}}),
			same(act{"action": "key", "text": "ctrl+l"})},
		{"keypress enter", openAITool, one(act{"type": "keypress", "keys": []string{"ENTER"}}),
			same(act{"action": "key", "text": "Return"})},
		{"keypress as one chord", openAITool, one(act{"type": "keypress", "keys": []string{"ctrl+shift+t"}}),
			same(act{"action": "key", "text": "ctrl+shift+t"})},
		{"keypress arrowleft", openAITool, one(act{"type": "keypress", "keys": []string{"ARROWLEFT"}}),
			same(act{"action": "key", "text": "Left"})},
		{"drag two points", openAITool, one(act{"type": "drag", "path": []act{{"x": 100, "y": 100}, {"x": 500, "y": 300}}}),
			same(act{"action": "left_click_drag", "start_coordinate": []int{100, 100}, "coordinate": []int{500, 300}})},
		{"drag along a path", openAITool, one(act{"type": "drag", "path": []act{{"x": 100, "y": 100}, {"x": 200, "y": 150}, {"x": 300, "y": 100}}}),
			same(act{"action": "left_mouse_down", "coordinate": []int{100, 100}}, act{"action": "mouse_move", "coordinate": []int{200, 150}},
				act{"action": "left_mouse_up", "coordinate": []int{300, 100}})},
		{"move", openAITool, one(act{"type": "move", "x": 123, "y": 456}),
			same(act{"action": "mouse_move", "coordinate": []int{123, 456}})},
		{"scroll down 300px", openAITool, one(act{"type": "scroll", "x": 400, "y": 300, "scroll_x": 0, "scroll_y": 300}),
			same(act{"action": "scroll", "coordinate": []int{400, 300}, "scroll_direction": "down", "scroll_amount": 3})},
		{"scroll left 100px", openAITool, one(act{"type": "scroll", "x": 400, "y": 300, "scroll_x": -100, "scroll_y": 0}),
			same(act{"action": "scroll", "coordinate": []int{400, 300}, "scroll_direction": "left", "scroll_amount": 1})},
		{"type", openAITool, one(act{"type": "type", "text": "Hello, world!"}),
			same(act{"action": "type", "text": "Hello, world!"})},
		{"screenshot", openAITool, one(act{"type": "screenshot"}), same(act{"action": "screenshot"})},
		{"wait", openAITool, one(act{"type": "wait"}), same(act{"action": "wait", "duration": 2})},
		{"a computer_call item forwarded whole", openAITool, map[string]any{"type": "computer_call", "id": "cu_1", "call_id": "call_1",
			"status": "completed", "pending_safety_checks": []any{}, "action": act{"type": "click", "button": "left", "x": 9, "y": 9}},
			same(act{"action": "left_click", "coordinate": []int{9, 9}})},
	}
}

// geminiCases are Gemini computer-use function calls, with the arguments
// google-gemini/computer-use-preview's agent.py reads (x, y on the 0..999
// grid; text, press_enter, clear_before_typing; keys "Control+A";
// direction, magnitude; destination_x, destination_y; url), read
// 2026-11-26. Points are converted with hci.Space.FromGrid, which
// hci's TestGridRoundTrip holds to its table.
func geminiCases() []dialectCase {
	grid := func(sp hci.Space, x, y int) []int {
		px, py, _ := sp.FromGrid(x, y, geminiGrid)
		return []int{px, py}
	}
	nav := func(url string) []map[string]any {
		return []map[string]any{{"action": "key", "text": "ctrl+l"}, {"action": "wait", "duration": hci.GeminiAddressBarWait}, {"action": "type", "text": url}, {"action": "key", "text": "Return"}}
	}
	return []dialectCase{
		{"click_at", "click_at", act{"x": 500, "y": 500}, func(sp hci.Space) []map[string]any {
			return []map[string]any{{"action": "left_click", "coordinate": grid(sp, 500, 500)}}
		}},
		{"click_at corner with a safety decision", "click_at", act{"x": 999, "y": 999, "safety_decision": act{"decision": "require_confirmation", "explanation": "cookie banner"}},
			func(sp hci.Space) []map[string]any {
				return []map[string]any{{"action": "left_click", "coordinate": grid(sp, 999, 999)}}
			}},
		{"hover_at", "hover_at", act{"x": 250.0, "y": 100}, func(sp hci.Space) []map[string]any {
			return []map[string]any{{"action": "mouse_move", "coordinate": grid(sp, 250, 100)}}
		}},
		{"type_text_at, enter", "type_text_at", act{"x": 400, "y": 300, "text": "deskenv", "press_enter": true}, func(sp hci.Space) []map[string]any {
			return []map[string]any{{"action": "left_click", "coordinate": grid(sp, 400, 300)}, {"action": "key", "text": "ctrl+a"},
				{"action": "key", "text": "Delete"}, {"action": "type", "text": "deskenv"}, {"action": "key", "text": "Return"}}
		}},
		{"type_text_at, no clearing", "type_text_at", act{"x": 400, "y": 300, "text": "more", "clear_before_typing": false}, func(sp hci.Space) []map[string]any {
			return []map[string]any{{"action": "left_click", "coordinate": grid(sp, 400, 300)}, {"action": "type", "text": "more"}}
		}},
		{"key_combination Control+A", "key_combination", act{"keys": "Control+A"}, same(act{"action": "key", "text": "ctrl+a"})},
		{"key_combination Enter", "key_combination", act{"keys": "Enter"}, same(act{"action": "key", "text": "Return"})},
		{"key_combination Control+Shift+T", "key_combination", act{"keys": "Control+Shift+T"}, same(act{"action": "key", "text": "ctrl+shift+t"})},
		{"scroll_document down", "scroll_document", act{"direction": "down"}, same(act{"action": "key", "text": "Page_Down"})},
		{"scroll_at", "scroll_at", act{"x": 500, "y": 500, "direction": "down", "magnitude": 800}, func(sp hci.Space) []map[string]any {
			// 800 grid units of the 800-pixel-high model space: 640 pixels, 7 notches.
			return []map[string]any{{"action": "scroll", "coordinate": grid(sp, 500, 500), "scroll_direction": "down", "scroll_amount": 7}}
		}},
		{"drag_and_drop", "drag_and_drop", act{"x": 100, "y": 100, "destination_x": 600, "destination_y": 400}, func(sp hci.Space) []map[string]any {
			return []map[string]any{{"action": "left_click_drag", "start_coordinate": grid(sp, 100, 100), "coordinate": grid(sp, 600, 400)}}
		}},
		{"navigate", "navigate", act{"url": "https://example.com/"}, same(nav("https://example.com/")...)},
		{"search", "search", act{}, same(nav(geminiSearchURL)...)},
		{"go_back", "go_back", nil, same(act{"action": "key", "text": "alt+Left"})},
		{"go_forward", "go_forward", nil, same(act{"action": "key", "text": "alt+Right"})},
		{"open_web_browser", "open_web_browser", nil, same(act{"action": "screenshot"})},
		{"wait_5_seconds", "wait_5_seconds", nil, same(act{"action": "wait", "duration": 5})},
	}
}

// pyautoguiCases are the code models trained on desktop trajectories emit:
// OpenCUA's fractional points (pyautogui.click(x=0.41, y=0.22), as in the
// issue and the AgentNet data), UI-TARS's pixel points, Agent-S's one-line
// "import pyautogui; pyautogui.click(960, 540, clicks=1, button='left'); "
// form, and the calls pyautogui's documentation lists (read 2026-11-26).
func pyautoguiCases() []dialectCase {
	frac := func(sp hci.Space, x, y float64) []int {
		px, py, _ := sp.FromFraction(x, y)
		return []int{px, py}
	}
	code := func(c string) map[string]any { return map[string]any{"code": c} }
	return []dialectCase{
		{"OpenCUA fractions", pyautoguiTool, code("import pyautogui\npyautogui.click(x=0.41, y=0.22)"), func(sp hci.Space) []map[string]any {
			return []map[string]any{{"action": "left_click", "coordinate": frac(sp, 0.41, 0.22)}}
		}},
		{"UI-TARS pixels", pyautoguiTool, code("pyautogui.click(x=523, y=341)"), same(act{"action": "left_click", "coordinate": []int{523, 341}})},
		{"Agent-S one line", pyautoguiTool, code("import pyautogui; pyautogui.click(960, 540, clicks=1, button='left'); "),
			same(act{"action": "left_click", "coordinate": []int{960, 540}})},
		{"doubleClick", pyautoguiTool, code("pyautogui.doubleClick(x=0.5, y=0.5)"), func(sp hci.Space) []map[string]any {
			return []map[string]any{{"action": "double_click", "coordinate": frac(sp, 0.5, 0.5)}}
		}},
		{"rightClick", pyautoguiTool, code("pyautogui.rightClick(100, 200)"), same(act{"action": "right_click", "coordinate": []int{100, 200}})},
		{"hotkey", pyautoguiTool, code("pyautogui.hotkey('ctrl', 'c')"), same(act{"action": "key", "text": "ctrl+c"})},
		{"press enter", pyautoguiTool, code("pyautogui.press('enter')"), same(act{"action": "key", "text": "Return"})},
		{"press a list", pyautoguiTool, code("pyautogui.press(['down', 'down', 'enter'])"), same(act{"action": "key", "text": "Down Down Return"})},
		{"write", pyautoguiTool, code("pyautogui.write('Hello world!')"), same(act{"action": "type", "text": "Hello world!"})},
		{"typewrite with interval", pyautoguiTool, code("pyautogui.typewrite('abc', interval=0.05)"), same(act{"action": "type", "text": "abc"})},
		{"scroll down at the pointer", pyautoguiTool, code("pyautogui.scroll(-5)"), same(act{"action": "scroll", "scroll_direction": "down", "scroll_amount": 5})},
		{"scroll up at a point", pyautoguiTool, code("pyautogui.scroll(3, x=400, y=300)"),
			same(act{"action": "scroll", "coordinate": []int{400, 300}, "scroll_direction": "up", "scroll_amount": 3})},
		{"hscroll", pyautoguiTool, code("pyautogui.hscroll(2)"), same(act{"action": "scroll", "scroll_direction": "right", "scroll_amount": 2})},
		{"moveTo then dragTo", pyautoguiTool, code("pyautogui.moveTo(100, 100)\npyautogui.dragTo(300, 300, duration=0.5)"),
			same(act{"action": "mouse_move", "coordinate": []int{100, 100}}, act{"action": "left_click_drag", "start_coordinate": []int{100, 100}, "coordinate": []int{300, 300}})},
		{"keyDown shift click keyUp", pyautoguiTool, code("pyautogui.keyDown('shift')\npyautogui.click(x=50, y=60)\npyautogui.keyUp('shift')"),
			same(act{"action": "left_click", "coordinate": []int{50, 60}, "text": "shift"})},
		{"keyDown keyUp alone", pyautoguiTool, code("pyautogui.keyDown('ctrl')\npyautogui.keyDown('s')\npyautogui.keyUp('s')\npyautogui.keyUp('ctrl')"),
			same(act{"action": "key", "text": "ctrl+s"})},
		{"time.sleep and a loop", pyautoguiTool, code("```python\nimport pyautogui\nimport time\nfor i in range(2):\n    pyautogui.press('tab')\n    time.sleep(0.1)\n```"),
			same(act{"action": "key", "text": "Tab"}, act{"action": "wait", "duration": 0.1}, act{"action": "key", "text": "Tab"}, act{"action": "wait", "duration": 0.1})},
	}
}

// TestDialects runs every dialect case on a real Xvfb whose screen is larger
// than model space, then its canonical actions through the computer tool,
// and requires the same X events at the probe and the same actions on the
// hci bus, published as the agent's.
func TestDialects(t *testing.T) {
	r := newRig(t, rigConfig{w: 1920, h: 1200, model: "auto", modes: []Mode{ModeComputer, ModeOpenAI, ModeGemini, ModePyAutoGUI}})
	if r.space.ModelW != 1280 || r.space.ModelH != 800 {
		t.Fatalf("model space %v, want 1280x800 on 1920x1200", r.space)
	}
	c := r.connect(t, "http")
	bus, stop := r.exec.Bus().Subscribe(0)
	defer stop()
	for _, set := range []struct {
		name  Mode
		cases []dialectCase
	}{{ModeOpenAI, openAICases()}, {ModeGemini, geminiCases()}, {ModePyAutoGUI, pyautoguiCases()}} {
		t.Run(string(set.name), func(t *testing.T) {
			for _, tc := range set.cases {
				t.Run(tc.name, func(t *testing.T) {
					want := tc.want(r.space)
					gotEv, gotActs := r.runDialect(t, c, bus, tc.tool, tc.args)
					wantEv, wantActs := r.runCanonical(t, c, bus, want)
					// The same canonical actions, marked as said in the dialect.
					for i := range wantActs {
						wantActs[i] = strings.Replace(wantActs[i], ":", ":"+viaTag(string(set.name)), 1)
					}
					if !reflect.DeepEqual(gotActs, wantActs) {
						t.Errorf("published actions:\n got  %v\n want %v", gotActs, wantActs)
					}
					if len(gotActs) != len(want) {
						t.Errorf("%d actions published, want %d", len(gotActs), len(want))
					}
					if fmt.Sprint(gotEv) != fmt.Sprint(wantEv) {
						t.Errorf("X events:\n got  %v\n want %v", gotEv, wantEv)
					}
					if mutates(want) && len(wantEv) == 0 {
						t.Errorf("the canonical actions %v sent no X events: the case checks nothing", want)
					}
				})
			}
		})
	}
}

func mutates(steps []map[string]any) bool {
	for _, s := range steps {
		switch s["action"] {
		case "screenshot", "wait":
		default:
			return true
		}
	}
	return false
}

// home puts the pointer at the top-left corner and forgets what the probe
// saw, so two runs start alike.
func (r *rig) home(t *testing.T, c *client.Client, bus <-chan hci.Event) {
	t.Helper()
	res := call(t, c, "computer", map[string]any{"action": "mouse_move", "coordinate": []int{0, 0}})
	if res.IsError {
		t.Fatalf("mouse_move home: %s", resultText(res))
	}
	r.settleProbe(t)
	drainActions(bus)
}

func (r *rig) settleProbe(t *testing.T) []xprobe.Event {
	t.Helper()
	ctx := testrig.Context(t, 10*time.Second)
	if err := r.probe.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	ev := r.probe.Take()
	for i := range ev {
		ev[i].Keycode = 0 // a keysym may sit on another keycode the second time
	}
	return ev
}

// drainActions returns the actions published so far, as JSON.
func drainActions(bus <-chan hci.Event) []string {
	var out []string
	for {
		select {
		case ev := <-bus:
			if ev.Kind == hci.KindAction && ev.Action != nil {
				b, _ := json.Marshal(ev.Action)
				out = append(out, fmt.Sprintf("%s:%s%s", ev.Source, viaTag(ev.Via), b))
			}
		case <-time.After(50 * time.Millisecond):
			return out
		}
	}
}

// viaTag shows an event's dialect in drainActions' lines.
func viaTag(via string) string {
	if via == "" {
		return ""
	}
	return "via " + via + ":"
}

func (r *rig) runDialect(t *testing.T, c *client.Client, bus <-chan hci.Event, tool string, args map[string]any) ([]xprobe.Event, []string) {
	t.Helper()
	r.home(t, c, bus)
	res := call(t, c, tool, args)
	if res.IsError {
		t.Fatalf("%s %v: %s", tool, abbreviate(args), resultText(res))
	}
	if got := resultImages(t, res); len(got) != 1 || got[0] != [2]int{r.space.ModelW, r.space.ModelH} {
		t.Errorf("%s answered with images %v, want one screenshot of the model space", tool, got)
	}
	return r.settleProbe(t), drainActions(bus)
}

func (r *rig) runCanonical(t *testing.T, c *client.Client, bus <-chan hci.Event, steps []map[string]any) ([]xprobe.Event, []string) {
	t.Helper()
	r.home(t, c, bus)
	for _, st := range steps {
		if res := call(t, c, "computer", st); res.IsError {
			t.Fatalf("computer %v: %s", st, resultText(res))
		}
	}
	return r.settleProbe(t), drainActions(bus)
}

// TestDialectsRefuse: input outside each dialect is a tool error that names
// the problem, does nothing at all (no X event, nothing on the bus), and the
// server goes on answering.
func TestDialectsRefuse(t *testing.T) {
	r := newRig(t, rigConfig{w: 1280, h: 800, model: "auto", modes: []Mode{ModeComputer, ModeOpenAI, ModeGemini, ModePyAutoGUI}})
	c := r.connect(t, "http")
	bus, stop := r.exec.Bus().Subscribe(0)
	defer stop()
	code := func(c string) map[string]any { return map[string]any{"code": c} }
	one := func(a act) map[string]any { return map[string]any{"action": a} }
	cases := []struct {
		name, tool string
		args       map[string]any
		says       []string
	}{
		{"openai unknown type", openAITool, one(act{"type": "teleport"}), []string{"unknown action type", "teleport"}},
		{"openai unknown key", openAITool, one(act{"type": "keypress", "keys": []string{"CTRL", "HYPERDRIVE"}}), []string{"unknown key", "HYPERDRIVE"}},
		{"openai off screen", openAITool, one(act{"type": "click", "button": "left", "x": 9999, "y": 0}), []string{"9999"}},
		{"openai fractional pixel", openAITool, one(act{"type": "click", "button": "left", "x": 10.5, "y": 0}), []string{"x must be an integer"}},
		{"openai batch with a bad second", openAITool, map[string]any{"actions": []act{{"type": "click", "x": 5, "y": 5}, {"type": "type"}}},
			[]string{"action 2 of 2", "type needs text", "nothing was done"}},
		{"openai field of another type", openAITool, one(act{"type": "type", "text": "a", "x": 1}), []string{"type does not take x"}},
		{"openai both", openAITool, map[string]any{"action": act{"type": "wait"}, "actions": []act{{"type": "wait"}}}, []string{"not both"}},
		{"openai nothing", openAITool, map[string]any{}, []string{"no action"}},
		{"openai move with keys", openAITool, one(act{"type": "move", "x": 1, "y": 1, "keys": []string{"SHIFT"}}), []string{"move with keys held"}},
		{"gemini off the grid", "click_at", act{"x": 1000, "y": 5}, []string{"off the grid"}},
		{"gemini fraction", "click_at", act{"x": 0.5, "y": 5}, []string{"x must be a whole number"}},
		{"gemini unknown argument", "click_at", act{"x": 1, "y": 5, "button": "left"}, []string{"unknown argument", "button"}},
		{"gemini missing", "type_text_at", act{"x": 1, "y": 5}, []string{"text is required"}},
		{"gemini url with newline", "navigate", act{"url": "https://a.example/\nrm -rf"}, []string{"newline"}},
		{"gemini bad direction", "scroll_document", act{"direction": "sideways"}, []string{"sideways"}},
		{"gemini unknown key", "key_combination", act{"keys": "Control+Foo"}, []string{"unknown key", "Foo"}},
		{"pyautogui import os", pyautoguiTool, code("import os\nos.system('id')"), []string{"line 1", "import os", "nothing was run"}},
		{"pyautogui from import", pyautoguiTool, code("from subprocess import run"), []string{"line 1", "nothing was run"}},
		{"pyautogui open", pyautoguiTool, code("pyautogui.click(1, 1)\nopen('/etc/passwd')"), []string{"line 2", "open is not available", "nothing was run"}},
		{"pyautogui unknown call", pyautoguiTool, code("pyautogui.locateOnScreen('ok.png')"), []string{"pyautogui.locateOnScreen is not supported", "nothing was run"}},
		{"pyautogui time.time", pyautoguiTool, code("import time\nt = time.time()"), []string{"time.time is not supported"}},
		{"pyautogui syntax", pyautoguiTool, code("pyautogui.click(x=1,"), []string{"line", "nothing was run"}},
		{"pyautogui off screen", pyautoguiTool, code("pyautogui.click(x=5000, y=1)"), []string{"5000"}},
		{"pyautogui negative fraction", pyautoguiTool, code("pyautogui.click(x=-0.5, y=0.5)"), []string{"-0.5"}},
		{"pyautogui keyUp without keyDown", pyautoguiTool, code("pyautogui.keyUp('shift')"), []string{"not held"}},
		{"pyautogui endless loop", pyautoguiTool, code("while True:\n    pass"), []string{"steps", "endless loop"}},
		{"pyautogui unknown key", pyautoguiTool, code("pyautogui.press('hyperdrive')"), []string{"unknown key", "hyperdrive"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r.settleProbe(t)
			drainActions(bus)
			res := call(t, c, tc.tool, tc.args)
			if !res.IsError {
				t.Fatalf("%s %v: no error", tc.tool, abbreviate(tc.args))
			}
			msg := resultText(res)
			for _, s := range tc.says {
				if !strings.Contains(msg, s) {
					t.Errorf("error %q does not say %q", msg, s)
				}
			}
			if ev := r.settleProbe(t); len(ev) != 0 {
				t.Errorf("refused input sent X events: %v", ev)
			}
			if acts := drainActions(bus); len(acts) != 0 {
				t.Errorf("refused input published actions: %v", acts)
			}
		})
	}
	// Still answering.
	if res := call(t, c, openAITool, one(act{"type": "screenshot"})); res.IsError {
		t.Fatalf("after the refusals: %s", resultText(res))
	}
}

// TestPyAutoGUIStopsAtTheBadCall: the calls before a bad one ran, the bad
// one and every call after it did not, and the error names the line.
func TestPyAutoGUIStopsAtTheBadCall(t *testing.T) {
	r := newRig(t, rigConfig{w: 1280, h: 800, model: "auto", modes: []Mode{ModePyAutoGUI}})
	c := r.connect(t, "http")
	for _, tc := range []struct {
		name, code string
		presses    int
		says       []string
	}{
		{"unknown call", "pyautogui.click(x=10, y=10)\npyautogui.screenshot()\npyautogui.click(x=20, y=20)", 1,
			[]string{"line 2", "pyautogui.screenshot is not supported", "the action before it was done (left_click)"}},
		{"bad point", "pyautogui.click(x=10, y=10)\npyautogui.click(x=10, y=9000)\npyautogui.click(x=20, y=20)", 1,
			[]string{"line 2", "9000"}},
		{"loop of clicks past the cap", "while True:\n    pyautogui.click(x=10, y=10)", maxSteps,
			[]string{"more than 200 actions"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r.settleProbe(t)
			res := call(t, c, pyautoguiTool, map[string]any{"code": tc.code})
			if !res.IsError {
				t.Fatalf("no error")
			}
			for _, s := range tc.says {
				if !strings.Contains(resultText(res), s) {
					t.Errorf("error %q does not say %q", resultText(res), s)
				}
			}
			ev := events(r.settleProbe(t))
			if n := ev.count(button(xprobe.ButtonPress, 1)); n != tc.presses {
				t.Errorf("%d clicks reached X, want %d (the calls before the bad one only)", n, tc.presses)
			}
			sx, sy := r.space.ToScreen(20, 20)
			if _, ok := ev.first(func(e xprobe.Event) bool { return e.Kind == xprobe.ButtonPress && e.X == sx && e.Y == sy }); ok {
				t.Errorf("the call after the bad one ran: %v", ev)
			}
		})
	}
}

// TestDialectToolsList: each dialect's tools over every transport, with
// strict schemas (no unknown fields), described properties, the model
// space or the grid in the descriptions, and every hint set.
func TestDialectToolsList(t *testing.T) {
	r := newRig(t, rigConfig{w: 1920, h: 1200, model: "auto", modes: []Mode{ModeOpenAI, ModeGemini, ModePyAutoGUI}, noProbe: true})
	want := append([]string{openAITool, pyautoguiTool}, dialectToolNames()[2:]...)
	for _, kind := range transports {
		t.Run(kind, func(t *testing.T) {
			tools := listWire(t, r, kind)
			if got := names(tools); !slices.Equal(got, sorted(want)) {
				t.Fatalf("tools %v, want %v", got, sorted(want))
			}
			for name, tl := range tools {
				s := tl.InputSchema
				if s.Type != "object" || s.AdditionalProperties == nil || *s.AdditionalProperties {
					t.Errorf("%s: schema type %q, additionalProperties %v: want a strict object", name, s.Type, s.AdditionalProperties)
				}
				for _, req := range s.Required {
					if _, ok := s.Properties[req]; !ok {
						t.Errorf("%s: required %q is not a property", name, req)
					}
				}
				for pname, p := range s.Properties {
					if p["type"] == nil || p["description"] == nil || p["description"] == "" {
						t.Errorf("%s.%s: every property needs a type and a description, got %v", name, pname, p)
					}
				}
				if !strings.Contains(tl.Description, "1280 x 800") {
					t.Errorf("%s: the description does not give the 1280 x 800 screenshot: %q", name, tl.Description)
				}
				a := tl.Annotations
				if a.ReadOnly == nil || a.Destructive == nil || a.Idempotent == nil || a.OpenWorld == nil || *a.OpenWorld {
					t.Errorf("%s: annotations must all be set and openWorldHint false, got %+v", name, a)
				}
			}
			if d := tools["click_at"].Description; !strings.Contains(d, "1000 x 1000 grid") {
				t.Errorf("click_at does not say its grid: %q", d)
			}
		})
	}
}

// TestDialectsEveryTransport: one call of each dialect over each transport
// reaches X and answers with the screenshot.
func TestDialectsEveryTransport(t *testing.T) {
	r := newRig(t, rigConfig{w: 1280, h: 800, model: "auto", modes: []Mode{ModeOpenAI, ModeGemini, ModePyAutoGUI}})
	calls := []struct {
		tool string
		args map[string]any
	}{
		{openAITool, map[string]any{"action": act{"type": "click", "button": "left", "x": 100, "y": 100}}},
		{"click_at", act{"x": 500, "y": 500}},
		{pyautoguiTool, map[string]any{"code": "pyautogui.click(x=0.25, y=0.75)"}},
	}
	for _, kind := range transports {
		t.Run(kind, func(t *testing.T) {
			c := r.connect(t, kind)
			for _, cl := range calls {
				r.settleProbe(t)
				res := call(t, c, cl.tool, cl.args)
				if res.IsError {
					t.Fatalf("%s: %s", cl.tool, resultText(res))
				}
				if got := resultImages(t, res); len(got) != 1 || got[0] != [2]int{1280, 800} {
					t.Errorf("%s: images %v, want one 1280x800 screenshot", cl.tool, got)
				}
				if n := events(r.settleProbe(t)).count(button(xprobe.ButtonPress, 1)); n != 1 {
					t.Errorf("%s over %s: %d clicks reached X, want 1", cl.tool, kind, n)
				}
			}
		})
	}
}
