package hci

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestActions(t *testing.T) {
	want := []string{"screenshot", "left_click", "right_click", "middle_click", "double_click", "triple_click",
		"mouse_move", "left_click_drag", "left_mouse_down", "left_mouse_up", "scroll", "type", "key",
		"hold_key", "wait", "cursor_position", "zoom"}
	if got := Actions(); !slices.Equal(got, want) {
		t.Fatalf("Actions() = %v, want %v", got, want)
	}
	for _, a := range want {
		if _, ok := actionFields[a]; !ok {
			t.Errorf("action %q has no field rules", a)
		}
	}
}

func TestParseAction(t *testing.T) {
	amount := 5
	dur := 1.5
	tests := []struct {
		raw  string
		want Action
		err  string
	}{
		{raw: `{"action":"screenshot"}`, want: Action{Action: "screenshot"}},
		{raw: `{"action":"left_click","coordinate":[10,20]}`, want: Action{Action: "left_click", Coordinate: []int{10, 20}}},
		{raw: `{"action":"left_click","coordinate":[10.0,20]}`, want: Action{Action: "left_click", Coordinate: []int{10, 20}}},
		// Harnesses fill unused fields with None: absent, where unused.
		{raw: `{"action":"screenshot","coordinate":null,"text":null,"region":null}`, want: Action{Action: "screenshot"}},
		{raw: `{"action":"left_click","text":null}`, want: Action{Action: "left_click"}},
		{raw: `{"action":"left_click","coordinate":[1,2],"key":"shift"}`, want: Action{Action: "left_click", Coordinate: []int{1, 2}, Key: "shift"}},
		{raw: `{"action":"scroll","coordinate":[1,2],"scroll_direction":"down","scroll_amount":5}`,
			want: Action{Action: "scroll", Coordinate: []int{1, 2}, ScrollDirection: "down", ScrollAmount: &amount}},
		{raw: `{"action":"hold_key","text":"shift","duration":1.5}`, want: Action{Action: "hold_key", Text: "shift", Duration: &dur}},
		{raw: `{"action":"zoom","region":[0,0,10,10]}`, want: Action{Action: "zoom", Region: []int{0, 0, 10, 10}}},
		{raw: `{"action":"left_click_drag","start_coordinate":[1,2],"coordinate":[3,4]}`,
			want: Action{Action: "left_click_drag", StartCoordinate: []int{1, 2}, Coordinate: []int{3, 4}}},
		{raw: ` {"action":"type","text":"h\u00e9llo\n"} `, want: Action{Action: "type", Text: "héllo\n"}},

		{raw: `{"action":"left_click","coordinate":"500,375"}`, err: `coordinate must be an array of 2 non-negative integers [x, y], got string "500,375"`},
		{raw: `{"action":"left_click","coordinate":[1,2,3]}`, err: "coordinate must be an array of 2 non-negative integers [x, y], got 3 values"},
		{raw: `{"action":"left_click","coordinate":[1.5,2]}`, err: "got number 1.5 at index 0"},
		{raw: `{"action":"left_click","coordinate":["1",2]}`, err: `got string "1" at index 0`},
		{raw: `{"action":"left_click","coordinate":{"x":1}}`, err: "coordinate must be an array of 2 non-negative integers [x, y], got object"},
		{raw: `{"action":"left_click","coordinates":[1,2]}`, err: `unknown field "coordinates" (did you mean "coordinate"?)`},
		{raw: `{"action":"left_click","foo":1,"bar":2}`, err: `unknown fields "bar", "foo"`},
		{raw: `{"action":"type","text":5}`, err: "text must be a string, got number 5"},
		{raw: `{"action":5}`, err: "action must be a string, got number 5"},
		{raw: `{"text":"x"}`, err: "action is required"},
		{raw: `{"action":"scroll","scroll_amount":"3"}`, err: `scroll_amount must be an integer, got string "3"`},
		{raw: `{"action":"scroll","scroll_amount":2.5}`, err: "scroll_amount must be an integer, got number 2.5"},
		{raw: `{"action":"wait","duration":"2"}`, err: `duration must be a number of seconds, got string "2"`},
		{raw: `{"action":"zoom","region":[0,0,10]}`, err: "region must be an array of 4 non-negative integers [x0, y0, x1, y1], got 3 values"},
		{raw: `["screenshot"]`, err: "action must be a JSON object, got array"},
		{raw: `null`, err: "got null"},
		{raw: `{"action":`, err: "not valid JSON"},
		{raw: ``, err: "empty action"},

		// null is never 0: JavaScript sends NaN and Infinity as null.
		{raw: `{"action":"left_click","coordinate":[null,null]}`, err: "got null at index 0"},
		{raw: `{"action":"left_click","coordinate":null}`, err: "left_click: coordinate is null"},
		{raw: `{"action":"left_click_drag","start_coordinate":null,"coordinate":[3,4]}`, err: "start_coordinate is null"},
		{raw: `{"action":"zoom","region":null}`, err: "zoom: region is null"},
		{raw: `{"action":"left_click","coordinate":[5,null]}`, err: "got null at index 1"},
		{raw: `{"action":"left_click_drag","start_coordinate":[null,1],"coordinate":[3,4]}`, err: "start_coordinate must be an array of 2 non-negative integers [x, y], got null at index 0"},
		{raw: `{"action":"zoom","region":[0,0,null,10]}`, err: "region must be an array of 4 non-negative integers [x0, y0, x1, y1], got null at index 2"},
		{raw: `{"action":"left_click","coordinate":[1e300,1]}`, err: "got number 1e300 at index 0"},
		{raw: `{"action":"left_click","coordinate":[2147483648,1]}`, err: "got number 2147483648 at index 0"},
		{raw: `{"action":"left_click","coordinate":[1e400,1]}`, err: "at index 0"},
		{raw: `{"action":"left_click","coordinate":[true,1]}`, err: "got boolean true at index 0"},
		{raw: `{"action":"scroll","scroll_direction":"up","scroll_amount":1e300}`, err: "scroll_amount must be an integer, got number 1e300"},
		{raw: `{"action":"scroll","scroll_direction":"up","scroll_amount":[3]}`, err: "scroll_amount must be an integer, got array"},
		{raw: `{"action":"wait","duration":1e400}`, err: "duration must be a number of seconds"},
		// Invalid UTF-8 and unpaired surrogates are refused before decoding
		// would make them U+FFFD.
		{raw: "{\"action\":\"type\",\"text\":\"a\xffb\"}", err: "not valid UTF-8: the byte 0xff at byte 26"},
		{raw: `{"action":"type","text":"a\ud800b"}`, err: `not valid UTF-8: the unpaired UTF-16 surrogate escape \ud800`},
		{raw: `{"action":"type","text":"a\udc00"}`, err: `unpaired UTF-16 surrogate escape \udc00`},
		{raw: `{"action":"key","text":"\ud83d"}`, err: `unpaired UTF-16 surrogate escape \ud83d`},
		{raw: `{"action":"type","text":"\ud83d\ude00 \\ud800"}`, want: Action{Action: "type", Text: "😀 \\ud800"}},
	}
	for _, tt := range tests {
		got, err := ParseAction([]byte(tt.raw))
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseAction(%s) error = %v, want one containing %q", tt.raw, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseAction(%s): %v", tt.raw, err)
			continue
		}
		if got.String() != tt.want.String() {
			t.Errorf("ParseAction(%s) = %s, want %s", tt.raw, got, tt.want)
		}
	}
}

func TestValidate(t *testing.T) {
	s := Space{ScreenW: 1920, ScreenH: 1200, ModelW: 1280, ModelH: 800}
	tests := []struct {
		raw string
		err string // "" = valid
	}{
		{`{"action":"screenshot"}`, ""},
		{`{"action":"screenshot","coordinate":[1,2]}`, "screenshot does not take coordinate"},
		{`{"action":"cursor_position"}`, ""},
		{`{"action":"cursor_position","text":"x"}`, "cursor_position does not take text"},
		{`{"action":"left_click"}`, ""},
		{`{"action":"left_click","coordinate":[0,0]}`, ""},
		{`{"action":"left_click","coordinate":[1279,799]}`, ""},
		{`{"action":"left_click","coordinate":[1280,10]}`, "coordinate [1280, 10] is outside the 1280x800 screenshot: x must be 0..1279 and y 0..799"},
		{`{"action":"left_click","coordinate":[10,800]}`, "outside the 1280x800 screenshot"},
		{`{"action":"left_click","coordinate":[-1,10]}`, "outside the 1280x800 screenshot"},
		{`{"action":"left_click","coordinate":[1,2],"text":"shift"}`, ""},
		{`{"action":"left_click","coordinate":[1,2],"key":"ctrl+shift"}`, ""},
		{`{"action":"left_click","coordinate":[1,2],"key":"ctrl","text":"ctrl"}`, ""},
		{`{"action":"left_click","coordinate":[1,2],"key":"ctrl","text":"shift"}`, "give one of them"},
		{`{"action":"left_click","key":"shfit"}`, `modifiers: unknown key name "shfit"; did you mean shift?`},
		{`{"action":"left_click","scroll_direction":"up"}`, "left_click does not take scroll_direction"},
		{`{"action":"right_click","coordinate":[5,5]}`, ""},
		{`{"action":"middle_click"}`, ""},
		{`{"action":"double_click","coordinate":[5,5]}`, ""},
		{`{"action":"triple_click","coordinate":[5,5],"text":"alt"}`, ""},
		{`{"action":"mouse_move","coordinate":[5,5]}`, ""},
		{`{"action":"mouse_move"}`, "mouse_move requires coordinate [x, y] in screenshot pixels"},
		{`{"action":"mouse_move","coordinate":[5,5],"text":"a"}`, "mouse_move does not take text"},
		{`{"action":"left_click_drag","start_coordinate":[1,2],"coordinate":[3,4]}`, ""},
		{`{"action":"left_click_drag","coordinate":[3,4]}`, "left_click_drag requires start_coordinate"},
		{`{"action":"left_click_drag","start_coordinate":[1,2]}`, "left_click_drag requires coordinate"},
		{`{"action":"left_click_drag","start_coordinate":[1,2000],"coordinate":[3,4]}`, "start_coordinate [1, 2000] is outside"},
		{`{"action":"left_mouse_down"}`, ""},
		{`{"action":"left_mouse_down","coordinate":[3,4]}`, ""},
		{`{"action":"left_mouse_up","text":"shift"}`, "left_mouse_up does not take text"},
		{`{"action":"scroll","scroll_direction":"down"}`, ""},
		{`{"action":"scroll","scroll_direction":"up","scroll_amount":100,"coordinate":[1,1],"text":"ctrl"}`, ""},
		{`{"action":"scroll"}`, "scroll requires scroll_direction: up, down, left or right"},
		{`{"action":"scroll","scroll_direction":"sideways"}`, `scroll_direction must be one of up, down, left, right, got "sideways"`},
		{`{"action":"scroll","scroll_direction":"Down"}`, `got "Down"`},
		{`{"action":"scroll","scroll_direction":"up","scroll_amount":0}`, ""}, // the reference's no-op
		{`{"action":"scroll","scroll_direction":"up","scroll_amount":-1}`, "scroll_amount must be a number of wheel notches from 0 to 100, got -1"},
		{`{"action":"scroll","scroll_direction":"up","scroll_amount":101}`, "got 101"},
		{`{"action":"scroll","scroll_direction":"up","scroll_amount":-3}`, "got -3"},
		{`{"action":"type","text":"hello, wörld 日本 😀\n\tok"}`, ""},
		{`{"action":"type"}`, "type requires text: the text to type"},
		{`{"action":"type","text":""}`, ""}, // the reference types nothing
		{`{"action":"key","text":""}`, "key requires text"},
		{`{"action":"hold_key","text":"","duration":1}`, "hold_key requires text"},
		{`{"action":"type","text":"a\u0007b"}`, "control character U+0007 at byte 1"},
		{`{"action":"type","text":"x","coordinate":[1,1]}`, "type does not take coordinate"},
		{`{"action":"key","text":"ctrl+s"}`, ""},
		{`{"action":"key","text":"ctrl+a Delete"}`, ""},
		{`{"action":"key","text":"ctrl+Retrun"}`, `unknown key name "Retrun"; did you mean Return?`},
		{`{"action":"key","key":"Return"}`, "key requires text"},
		{`{"action":"key","text":"Return","key":"Return"}`, "key does not take key (put the chord in text)"},
		{`{"action":"hold_key","text":"shift","duration":2}`, ""},
		{`{"action":"hold_key","text":"shift"}`, "hold_key requires duration in seconds (0 to 100)"},
		{`{"action":"hold_key","duration":1}`, "hold_key requires text"},
		{`{"action":"hold_key","text":"shift","duration":101}`, "duration must be between 0 and 100 seconds, got 101"},
		{`{"action":"hold_key","text":"shift","duration":-1}`, "got -1"},
		{`{"action":"wait","duration":0}`, ""},
		{`{"action":"wait","duration":100}`, ""},
		{`{"action":"wait"}`, "wait requires duration"},
		{`{"action":"wait","duration":100.5}`, "got 100.5"},
		{`{"action":"zoom","region":[0,0,1280,800]}`, ""},
		{`{"action":"zoom","region":[100,100,50,200]}`, "region [100 100 50 200] is empty or inverted"},
		{`{"action":"zoom","region":[10,10,10,20]}`, "empty or inverted"},
		{`{"action":"zoom","region":[0,0,1281,800]}`, "extends past the 1280x800 screenshot"},
		{`{"action":"zoom","region":[-5,0,10,10]}`, "negative"},
		{`{"action":"zoom"}`, "zoom requires region"},
		{`{"action":"zoom","region":[0,0,1,1],"coordinate":[1,1]}`, "zoom does not take coordinate"},
		{`{"action":"click"}`, `unknown action "click"`},
		{`{"action":"left_clik"}`, `(did you mean "left_click"?)`},
	}
	for _, tt := range tests {
		a, err := ParseAction([]byte(tt.raw))
		if err != nil {
			t.Errorf("ParseAction(%s): %v", tt.raw, err)
			continue
		}
		err = a.Validate(s)
		if tt.err == "" {
			if err != nil {
				t.Errorf("Validate(%s): %v", tt.raw, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("Validate(%s) error = %v, want one containing %q", tt.raw, err, tt.err)
		}
	}
}

func TestValidateDirect(t *testing.T) {
	s := Space{ScreenW: 1280, ScreenH: 800, ModelW: 1280, ModelH: 800}
	nan := 0.0
	nan = nan / nan
	big := strings.Repeat("x", MaxTextBytes+1)
	tests := []struct {
		name string
		a    Action
		s    Space
		err  string
	}{
		{"huge text", Action{Action: "type", Text: big}, s, "at most 65536 (64 KiB)"},
		{"max text", Action{Action: "type", Text: big[:MaxTextBytes]}, s, ""},
		{"invalid utf8", Action{Action: "type", Text: "a\xffb"}, s, "not valid UTF-8"},
		{"short coordinate", Action{Action: "mouse_move", Coordinate: []int{1}}, s, "got 1 values"},
		{"NaN duration", Action{Action: "wait", Duration: &nan}, s, "duration must be between 0 and 100"},
		{"empty action", Action{}, s, "action is required"},
		{"zero space", Action{Action: "screenshot"}, Space{}, "screen size 0x0 is not valid"},
		{"model bigger than screen", Action{Action: "screenshot"}, Space{100, 100, 200, 200}, "larger than"},
		{"long key text", Action{Action: "key", Text: strings.Repeat("a", MaxKeyTextBytes+1)}, s, "at most 1024"},
	}
	for _, tt := range tests {
		err := tt.a.Validate(tt.s)
		if tt.err == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%s: error = %v, want one containing %q", tt.name, err, tt.err)
		}
	}
}

func TestMutates(t *testing.T) {
	observe := map[string]bool{"screenshot": true, "cursor_position": true, "zoom": true, "wait": true}
	for _, name := range Actions() {
		if got := (Action{Action: name}).Mutates(); got == observe[name] {
			t.Errorf("Action{%s}.Mutates() = %v", name, got)
		}
	}
	if (Action{Action: "nonsense"}).Mutates() {
		t.Error("an unknown action mutates")
	}
}

// TestActionUnmarshalJSON: an Action decoded by encoding/json, inside a
// recording's line or a message, is as strict as ParseAction.
func TestActionUnmarshalJSON(t *testing.T) {
	var ok struct {
		Action Action `json:"action"`
	}
	if err := json.Unmarshal([]byte(`{"action":{"action":"left_click","coordinate":[3,4]}}`), &ok); err != nil {
		t.Fatal(err)
	}
	if got := ok.Action.String(); got != `{"action":"left_click","coordinate":[3,4]}` {
		t.Errorf("decoded %s", got)
	}
	for _, raw := range []string{
		`{"action":{"action":"left_click","coordinate":[null,null]}}`,
		`{"action":{"action":"left_click","coordinate":[1.5,2]}}`,
		"{\"action\":{\"action\":\"type\",\"text\":\"\xff\"}}",
		`{"action":{"action":"type","text":"\udc00"}}`,
		`{"action":{"action":"left_click","bogus":1}}`,
	} {
		var v struct {
			Action Action `json:"action"`
		}
		if err := json.Unmarshal([]byte(raw), &v); err == nil {
			t.Errorf("json.Unmarshal(%q) = %s, want an error", raw, v.Action)
		}
	}
}

// TestErrorsQuoteShort: an error about bad input quotes a short prefix of
// it, not all of it.
func TestErrorsQuoteShort(t *testing.T) {
	long := strings.Repeat("x", 5000)
	sp := Space{ScreenW: 1280, ScreenH: 800, ModelW: 1280, ModelH: 800}
	for name, err := range map[string]error{
		"action":    Action{Action: long}.Validate(sp),
		"direction": Action{Action: ActScroll, ScrollDirection: long}.Validate(sp),
		"key":       Action{Action: ActKey, Text: long[:900]}.Validate(sp),
		"chord":     Action{Action: ActKey, Text: "ctrl+" + long[:900]}.Validate(sp),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		if len(err.Error()) > 600 {
			t.Errorf("%s: the error is %d bytes long: %.200s", name, len(err.Error()), err)
		}
	}
	if _, err := ParseAction([]byte(`{"action":"screenshot","` + long + `":1}`)); err == nil || len(err.Error()) > 600 {
		t.Errorf("unknown field: %v", err)
	}
}

// TestNoOpRoundTrip: the reference's no-ops survive JSON both ways, so a
// recorded empty type or zero scroll replays as what the agent sent.
func TestNoOpRoundTrip(t *testing.T) {
	s := Space{ScreenW: 1280, ScreenH: 800, ModelW: 1280, ModelH: 800}
	for _, raw := range []string{
		`{"action":"type","text":""}`,
		`{"action":"scroll","coordinate":[3,4],"scroll_direction":"up","scroll_amount":0}`,
		`{"action":"type","text":"a<b> & c"}`,
	} {
		a, err := ParseAction([]byte(raw))
		if err != nil {
			t.Fatalf("ParseAction(%s): %v", raw, err)
		}
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatalf("json.Marshal(%s): %v", raw, err)
		}
		if a.String() != raw {
			t.Errorf("String() = %s, want %s", a, raw)
		}
		var back Action
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("json.Unmarshal(%s): %v", b, err)
		}
		if err := back.Validate(s); err != nil {
			t.Errorf("%s after a round trip through %s: %v", raw, b, err)
		}
		if back.String() != raw {
			t.Errorf("round trip gave %s, want %s", back, raw)
		}
	}
	// A type with no text at all is still refused: that is a model's mistake.
	var a Action
	if err := json.Unmarshal([]byte(`{"action":"type"}`), &a); err != nil {
		t.Fatal(err)
	}
	if err := a.Validate(s); err == nil || !strings.Contains(err.Error(), "type requires text") {
		t.Errorf(`Validate({"action":"type"}) = %v, want "type requires text"`, err)
	}
}
