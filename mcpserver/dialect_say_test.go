package mcpserver

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"

	"github.com/deskenv/deskenv/hci"
)

// sayCase is a run of canonical actions for the round trip canonical ->
// dialect (hci.Space.Say) -> the dialect's tool -> canonical. The actions
// published on the bus must be the ones said, except where a dialect is
// known to say them differently (want) or not at all (cannot).
type sayCase struct {
	name   string
	acts   []string
	cannot []string            // dialects that must refuse an action of the run
	want   map[string][]string // a dialect's published actions, where not acts
}

func sayCases() []sayCase {
	py, oa, gm := hci.DialectPyAutoGUI, hci.DialectOpenAI, hci.DialectGemini
	return []sayCase{
		{name: "left click", acts: []string{`{"action":"left_click","coordinate":[405,157]}`}},
		{name: "shift click", acts: []string{`{"action":"left_click","coordinate":[50,60],"text":"shift"}`}, cannot: []string{gm}},
		{name: "ctrl+shift click", acts: []string{`{"action":"left_click","coordinate":[50,60],"text":"ctrl+shift"}`}, cannot: []string{gm}},
		{name: "right click", acts: []string{`{"action":"right_click","coordinate":[10,20]}`}, cannot: []string{gm}},
		{name: "middle click", acts: []string{`{"action":"middle_click","coordinate":[30,40]}`}, cannot: []string{gm}},
		{name: "double click", acts: []string{`{"action":"double_click","coordinate":[300,200]}`}, cannot: []string{gm}},
		{name: "triple click", acts: []string{`{"action":"triple_click","coordinate":[300,200]}`}, cannot: []string{gm, oa}},
		{name: "move", acts: []string{`{"action":"mouse_move","coordinate":[123,456]}`}},
		{name: "drag", acts: []string{`{"action":"left_click_drag","start_coordinate":[100,100],"coordinate":[500,300]}`},
			// pyautogui drags from the pointer: the move to the start is a step of its own.
			want: map[string][]string{py: {`{"action":"mouse_move","coordinate":[100,100]}`, `{"action":"left_click_drag","start_coordinate":[100,100],"coordinate":[500,300]}`}}},
		{name: "press, move, release", acts: []string{`{"action":"left_mouse_down","coordinate":[100,100]}`, `{"action":"mouse_move","coordinate":[200,150]}`,
			`{"action":"left_mouse_up","coordinate":[300,100]}`}, cannot: []string{gm}},
		{name: "scroll down", acts: []string{`{"action":"scroll","coordinate":[400,300],"scroll_direction":"down","scroll_amount":3}`}},
		{name: "scroll up", acts: []string{`{"action":"scroll","coordinate":[400,300],"scroll_direction":"up","scroll_amount":2}`}},
		{name: "scroll left", acts: []string{`{"action":"scroll","coordinate":[400,300],"scroll_direction":"left","scroll_amount":1}`}},
		{name: "type", acts: []string{`{"action":"type","text":"Hello, 'world' \\ \"ok\"\ttab"}`}, cannot: []string{gm}},
		{name: "click, type, Return", acts: []string{`{"action":"left_click","coordinate":[640,400]}`, `{"action":"type","text":"echo hello world > ~/hello.txt"}`,
			`{"action":"key","text":"Return"}`}},
		{name: "click, clear, type", acts: []string{`{"action":"left_click","coordinate":[640,400]}`, `{"action":"key","text":"ctrl+a"}`,
			`{"action":"key","text":"Delete"}`, `{"action":"type","text":"deskenv"}`}},
		{name: "navigate", acts: []string{`{"action":"key","text":"ctrl+l"}`, `{"action":"type","text":"https://example.com/"}`, `{"action":"key","text":"Return"}`},
			// Gemini's navigate pauses before the URL (hci.GeminiAddressBarWait).
			want: map[string][]string{gm: {`{"action":"key","text":"ctrl+l"}`, `{"action":"wait","duration":0.3}`, `{"action":"type","text":"https://example.com/"}`, `{"action":"key","text":"Return"}`}}},
		{name: "navigate as Gemini's tool does it", acts: []string{`{"action":"key","text":"ctrl+l"}`, `{"action":"wait","duration":0.3}`, `{"action":"type","text":"https://example.com/"}`, `{"action":"key","text":"Return"}`},
			// OpenAI's wait carries no duration: it waits 2 s.
			want: map[string][]string{oa: {`{"action":"key","text":"ctrl+l"}`, `{"action":"wait","duration":2}`, `{"action":"type","text":"https://example.com/"}`, `{"action":"key","text":"Return"}`}}},
		{name: "key ctrl+l", acts: []string{`{"action":"key","text":"ctrl+l"}`}},
		{name: "key ctrl+shift+t", acts: []string{`{"action":"key","text":"ctrl+shift+t"}`}},
		{name: "key Escape", acts: []string{`{"action":"key","text":"Escape"}`}},
		{name: "key Page_Down", acts: []string{`{"action":"key","text":"Page_Down"}`}},
		{name: "key alt+Left", acts: []string{`{"action":"key","text":"alt+Left"}`}},
		{name: "key F5", acts: []string{`{"action":"key","text":"F5"}`}},
		{name: "key super", acts: []string{`{"action":"key","text":"super"}`}},
		{name: "key ctrl+minus", acts: []string{`{"action":"key","text":"ctrl+minus"}`}},
		{name: "key Control_R", acts: []string{`{"action":"key","text":"Control_R"}`}},
		{name: "keys in turn", acts: []string{`{"action":"key","text":"Down Down"}`},
			// OpenAI and Gemini press one chord a call: two key actions.
			want: map[string][]string{oa: {`{"action":"key","text":"Down"}`, `{"action":"key","text":"Down"}`},
				gm: {`{"action":"key","text":"Down"}`, `{"action":"key","text":"Down"}`}}},
		{name: "wait", acts: []string{`{"action":"wait","duration":2}`},
			// Gemini waits 5 seconds at a time.
			want: map[string][]string{gm: {`{"action":"wait","duration":5}`}}},
		{name: "screenshot", acts: []string{`{"action":"screenshot"}`}, cannot: []string{py}},
		{name: "release alone", acts: []string{`{"action":"left_mouse_up","coordinate":[10,10]}`}, cannot: []string{oa, gm}},
		{name: "hold_key", acts: []string{`{"action":"hold_key","text":"shift","duration":0.1}`}, cannot: []string{oa, gm, py}},
		{name: "zoom", acts: []string{`{"action":"zoom","region":[0,0,100,100]}`}, cannot: []string{oa, gm, py}},
		{name: "cursor_position", acts: []string{`{"action":"cursor_position"}`}, cannot: []string{oa, gm, py}},
	}
}

// TestSayRoundTrip: every canonical action a dialect can say, said with
// hci.Space.Say and run through that dialect's tool, publishes the same
// canonical actions (Gemini's points are the pixels of the grid cells Say
// chose: FromGrid(ToGrid(p)), since 1,000 cells cannot name 1,280 pixels);
// those it cannot say are refused with a reason, never said wrongly.
func TestSayRoundTrip(t *testing.T) {
	r := newRig(t, rigConfig{w: 1920, h: 1200, model: "auto", modes: []Mode{ModeComputer, ModeOpenAI, ModeGemini, ModePyAutoGUI}})
	c := r.connect(t, "http")
	bus, stop := r.exec.Bus().Subscribe(0)
	defer stop()
	type variant struct {
		dialect, name string
		opt           hci.SayOptions
	}
	variants := []variant{}
	for _, d := range hci.Dialects() {
		variants = append(variants, variant{d, d, hci.SayOptions{}})
	}
	// pyautogui's points as fractions (AgentNet's), which read back to the same pixels.
	variants = append(variants, variant{hci.DialectPyAutoGUI, "pyautogui fractions", hci.SayOptions{Fractions: true}})
	for _, v := range variants {
		dialect := v.dialect
		t.Run(v.name, func(t *testing.T) {
			for _, tc := range sayCases() {
				t.Run(tc.name, func(t *testing.T) {
					acts := make([]hci.Action, len(tc.acts))
					for i, s := range tc.acts {
						a, err := hci.ParseAction([]byte(s))
						if err != nil {
							t.Fatalf("case action %s: %v", s, err)
						}
						acts[i] = a
					}
					said, err := r.space.Say(dialect, acts, v.opt)
					if err != nil {
						t.Fatal(err)
					}
					if containsStr(tc.cannot, dialect) {
						refused := 0
						for _, s := range said {
							if s.Err != nil {
								refused++
								if !strings.Contains(s.Err.Error(), "cannot be said in "+dialect) {
									t.Errorf("refusal %q does not say why", s.Err)
								}
							}
						}
						if refused == 0 {
							t.Errorf("said %s, want a refusal", abbreviate(said))
						}
						return
					}
					r.home(t, c, bus)
					for _, s := range said {
						if s.Err != nil {
							t.Fatalf("actions %d..%d: %v", s.First, s.Last, s.Err)
						}
						runSaid(t, c, dialect, s.Calls)
					}
					got := drainActions(bus)
					wantJSON := tc.acts
					if w, ok := tc.want[dialect]; ok {
						wantJSON = w
					}
					var want []string
					for _, s := range wantJSON {
						a, _ := hci.ParseAction([]byte(s))
						if dialect == hci.DialectGemini {
							a = snapToGrid(r.space, a)
						}
						b, _ := json.Marshal(a)
						want = append(want, fmt.Sprintf("agent:%s%s", viaTag(dialect), b))
					}
					if !reflect.DeepEqual(got, want) {
						t.Errorf("said as %s, published\n  %s\nwant\n  %s", abbreviate(said), strings.Join(got, "\n  "), strings.Join(want, "\n  "))
					}
				})
			}
		})
	}
}

// runSaid calls the dialect's tool with what Say said.
func runSaid(t *testing.T, c *client.Client, dialect string, calls []any) {
	t.Helper()
	var tool string
	var args any
	switch dialect {
	case hci.DialectOpenAI:
		tool, args = openAITool, map[string]any{"actions": calls}
	case hci.DialectGemini:
		for _, call := range calls {
			g := call.(hci.GeminiCall)
			if res := callTool(t, c, g.Name, g.Args); res != "" {
				t.Fatalf("%s %v: %s", g.Name, g.Args, res)
			}
		}
		return
	case hci.DialectPyAutoGUI:
		lines := []string{"import pyautogui", "import time"}
		for _, l := range calls {
			lines = append(lines, l.(string))
		}
		tool, args = pyautoguiTool, map[string]any{"code": strings.Join(lines, "\n")}
	}
	if res := callTool(t, c, tool, args); res != "" {
		t.Fatalf("%s %v: %s", tool, abbreviate(args), res)
	}
}

// callTool calls a tool and returns its error text, "" when it succeeded.
func callTool(t *testing.T, c *client.Client, tool string, args any) string {
	t.Helper()
	res := call(t, c, tool, args)
	if res.IsError {
		return resultText(res)
	}
	return ""
}

// snapToGrid moves an action's points to the pixels of the Gemini cells
// holding them.
func snapToGrid(sp hci.Space, a hci.Action) hci.Action {
	snap := func(p []int) []int {
		if len(p) != 2 {
			return p
		}
		gx, gy := sp.ToGrid(p[0], p[1], hci.GeminiGrid)
		x, y, _ := sp.FromGrid(gx, gy, hci.GeminiGrid)
		return []int{x, y}
	}
	a.Coordinate, a.StartCoordinate = snap(a.Coordinate), snap(a.StartCoordinate)
	return a
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
