package hci

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestSay holds the shapes each dialect is written in: what a model of
// that dialect would have emitted for the canonical actions. That they read
// back to the same actions is mcpserver's TestSayRoundTrip, through the
// dialects' real tools.
func TestSay(t *testing.T) {
	sp, err := NewSpace(1920, 1200, "1280x800")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		dialect string
		opt     SayOptions
		acts    []string
		want    string // the Saids' calls as JSON, one group a line; errors as "error: ..."
	}{
		{DialectOpenAI, SayOptions{}, []string{`{"action":"left_click","coordinate":[405,157],"text":"shift"}`},
			`[{"button":"left","keys":["SHIFT"],"type":"click","x":405,"y":157}]`},
		{DialectOpenAI, SayOptions{}, []string{`{"action":"key","text":"ctrl+L"}`}, `[{"keys":["CTRL","SHIFT","L"],"type":"keypress"}]`},
		{DialectOpenAI, SayOptions{}, []string{`{"action":"scroll","coordinate":[1,2],"scroll_direction":"up"}`},
			`[{"scroll_x":0,"scroll_y":-300,"type":"scroll","x":1,"y":2}]`},
		{DialectOpenAI, SayOptions{}, []string{`{"action":"wait","duration":3}`}, `[{"type":"wait"},{"type":"wait"}]`},
		{DialectOpenAI, SayOptions{}, []string{`{"action":"left_mouse_down","coordinate":[1,1]}`, `{"action":"mouse_move","coordinate":[2,2]}`, `{"action":"left_mouse_up","coordinate":[3,3]}`},
			`[{"path":[{"x":1,"y":1},{"x":2,"y":2},{"x":3,"y":3}],"type":"drag"}]`},
		{DialectOpenAI, SayOptions{}, []string{`{"action":"left_mouse_down","coordinate":[1,1]}`, `{"action":"left_mouse_up","coordinate":[3,3]}`},
			"error: left_mouse_down cannot be said in openai: a press is said only as the start of a drag's path: a press, moves and a release, each at a point\n" +
				"error: left_mouse_up cannot be said in openai: a release is said only as the end of a drag's path, after a press and a move"},
		{DialectOpenAI, SayOptions{}, []string{`{"action":"triple_click","coordinate":[1,1]}`},
			"error: triple_click cannot be said in openai: OpenAI's actions click once (click) or twice (double_click)"},
		{DialectGemini, SayOptions{}, []string{`{"action":"left_click","coordinate":[640,400]}`, `{"action":"type","text":"hi"}`, `{"action":"key","text":"Return"}`},
			`[{"name":"type_text_at","args":{"clear_before_typing":false,"press_enter":true,"text":"hi","x":500,"y":500}}]`},
		{DialectGemini, SayOptions{}, []string{`{"action":"key","text":"ctrl+shift+t"}`, `{"action":"key","text":"alt+Left"}`},
			`[{"name":"key_combination","args":{"keys":"Control+Shift+T"}}]` + "\n" + `[{"name":"go_back","args":{}}]`},
		{DialectGemini, SayOptions{}, []string{`{"action":"scroll","coordinate":[0,799],"scroll_direction":"down","scroll_amount":8}`},
			`[{"name":"scroll_at","args":{"direction":"down","magnitude":1000,"x":0,"y":999}}]`},
		{DialectGemini, SayOptions{}, []string{`{"action":"scroll","coordinate":[0,0],"scroll_direction":"down","scroll_amount":9}`},
			"error: scroll cannot be said in gemini: 9 notches is more than scroll_at's longest scroll, the whole screen (800 pixels, 8 notches)"},
		{DialectGemini, SayOptions{}, []string{`{"action":"type","text":"hi"}`},
			"error: type cannot be said in gemini: Gemini types only at a point it clicks first (type_text_at), and the step before this one is not such a click"},
		{DialectPyAutoGUI, SayOptions{}, []string{`{"action":"double_click","coordinate":[10,20],"text":"ctrl"}`},
			`["pyautogui.keyDown('ctrl')","pyautogui.doubleClick(10, 20)","pyautogui.keyUp('ctrl')"]`},
		{DialectPyAutoGUI, SayOptions{Fractions: true}, []string{`{"action":"left_click","coordinate":[0,799]}`},
			`["pyautogui.click(x=0.000391, y=0.999375)"]`},
		{DialectPyAutoGUI, SayOptions{}, []string{`{"action":"key","text":"Return Return"}`, `{"action":"key","text":"ctrl+a Delete"}`},
			`["pyautogui.press(['enter', 'enter'])"]` + "\n" + `["pyautogui.hotkey('ctrl', 'a')","pyautogui.press('delete')"]`},
		{DialectPyAutoGUI, SayOptions{}, []string{`{"action":"type","text":"it's\n"}`, `{"action":"wait","duration":0.5}`},
			`["pyautogui.write('it\\'s\\n')"]` + "\n" + `["time.sleep(0.5)"]`},
		{DialectPyAutoGUI, SayOptions{}, []string{`{"action":"zoom","region":[0,0,10,10]}`},
			"error: zoom cannot be said in pyautogui: it only observes, and the pyautogui tool answers every call with a screenshot"},
	}
	for _, c := range cases {
		acts := make([]Action, len(c.acts))
		for i, s := range c.acts {
			a, err := ParseAction([]byte(s))
			if err != nil {
				t.Fatalf("%s: %v", s, err)
			}
			acts[i] = a
		}
		said, err := sp.Say(c.dialect, acts, c.opt)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		last := -1
		for _, s := range said {
			if s.First != last+1 || s.Last < s.First {
				t.Errorf("%s %v: said %d..%d after %d: the groups must cover every action in order", c.dialect, c.acts, s.First, s.Last, last)
			}
			last = s.Last
			if s.Err != nil {
				lines = append(lines, "error: "+s.Err.Error())
				continue
			}
			b, _ := json.Marshal(s.Calls)
			lines = append(lines, string(b))
		}
		if last != len(acts)-1 {
			t.Errorf("%s %v: the groups end at %d of %d actions", c.dialect, c.acts, last, len(acts))
		}
		if got := strings.Join(lines, "\n"); got != c.want {
			t.Errorf("%s %v:\n got  %s\n want %s", c.dialect, c.acts, got, c.want)
		}
	}
	if _, err := sp.Say("claude", nil, SayOptions{}); err == nil || !strings.Contains(err.Error(), "use openai, gemini, pyautogui") {
		t.Errorf("an unknown dialect: %v", err)
	}
}
