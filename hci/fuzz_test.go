package hci

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"unicode/utf8"
)

// fuzzSpaces are the spaces actions are validated against: unscaled, scaled
// (the reference's XGA on a 16:10 screen is not chosen, so 1280x800 on
// 1920x1200) and a tiny one where most coordinates fall outside.
var fuzzSpaces = []Space{
	{ScreenW: 1280, ScreenH: 800, ModelW: 1280, ModelH: 800},
	{ScreenW: 1920, ScreenH: 1200, ModelW: 1280, ModelH: 800},
	{ScreenW: 3, ScreenH: 2, ModelW: 2, ModelH: 1},
}

// FuzzParseAction feeds tool_use inputs to ParseAction and Validate. An
// accepted action must re-encode to JSON that parses back to the same
// action; one that also validates must have every coordinate and region
// inside the space, a known action, and text and key that are valid UTF-8
// and resolve to keys; and a coordinate must have been written as numbers
// (a null is not 0).
func FuzzParseAction(f *testing.F) {
	for _, s := range []string{
		`{"action":"screenshot"}`,
		`{"action":"left_click","coordinate":[10,20]}`,
		`{"action":"left_click","coordinate":[10.0,20],"text":"ctrl+shift"}`,
		`{"action":"left_click","coordinate":[1,2],"key":"shift"}`,
		`{"action":"left_click","coordinate":null,"text":null}`,
		`{"action":"left_click","coordinate":[null,null]}`,
		`{"action":"left_click_drag","start_coordinate":[null,1],"coordinate":[1,1]}`,
		`{"action":"zoom","region":[0,0,null,10]}`,
		`{"action":"type","text":"\ud800"}`,
		`{"action":"mouse_move","coordinate":[1279,799]}`,
		`{"action":"scroll","coordinate":[1,2],"scroll_direction":"down","scroll_amount":5}`,
		`{"action":"hold_key","text":"shift","duration":1.5}`,
		`{"action":"wait","duration":100}`,
		`{"action":"zoom","region":[0,0,10,10]}`,
		`{"action":"zoom","region":[0,0,1280,800]}`,
		`{"action":"left_click_drag","start_coordinate":[1,2],"coordinate":[3,4]}`,
		`{"action":"left_mouse_down"}`,
		`{"action":"type","text":"h\u00e9llo\n\tworld €"}`,
		`{"action":"type","text":"\u0007"}`,
		`{"action":"key","text":"ctrl+a Delete"}`,
		`{"action":"key","text":"ctrl++ U+20AC super alt+F4 KP_Enter"}`,
		`{"action":"cursor_position"}`,
		`{"action":"left_click","coordinate":[1e10,-1]}`,
		`{"action":"left_click","coordinate":[2147483648,0]}`,
		`{"action":"scroll","scroll_direction":"up","scroll_amount":1e400}`,
		`{"action":"type","text":"\xff"}`,
		`["screenshot"]`,
		`null`,
		`{"action":`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		a, err := ParseAction(raw)
		if err != nil {
			return
		}
		_ = a.String()
		_ = a.Mutates()
		checkNumbers(t, raw)
		if utf8.ValidString(a.Text) && utf8.ValidString(a.Key) && utf8.ValidString(a.Action) && utf8.ValidString(a.ScrollDirection) {
			b, err := json.Marshal(a)
			if err != nil {
				t.Fatalf("Marshal(%#v): %v", a, err)
			}
			back, err := ParseAction(b)
			if err != nil {
				t.Fatalf("ParseAction(%s) of an accepted action's own JSON: %v", b, err)
			}
			if !reflect.DeepEqual(back, a) {
				t.Fatalf("round trip changed the action:\n got %#v\nwant %#v", back, a)
			}
		}
		for _, s := range fuzzSpaces {
			if err := a.Validate(s); err != nil {
				continue
			}
			checkValid(t, a, s)
		}
	})
}

// checkNumbers asserts that the coordinate fields of an accepted action
// were written as arrays of numbers: null, NaN-as-null from JavaScript and
// strings must not become 0.
func checkNumbers(t *testing.T, raw []byte) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		t.Fatalf("ParseAction accepted %q, which is not a JSON object", raw)
	}
	for _, name := range []string{"coordinate", "start_coordinate", "region"} {
		v, ok := fields[name]
		if !ok || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			continue
		}
		var elems []json.RawMessage
		if err := json.Unmarshal(v, &elems); err != nil {
			t.Fatalf("%s %s accepted but is not an array", name, v)
		}
		for i, e := range elems {
			var n json.Number
			if err := json.Unmarshal(e, &n); err != nil || n == "" {
				t.Fatalf("%s %s accepted with %s at index %d, which is not a number", name, v, e, i)
			}
		}
	}
}

// checkValid asserts what Validate promises about an action it accepted.
func checkValid(t *testing.T, a Action, s Space) {
	t.Helper()
	spec, ok := actionFields[a.Action]
	if !ok {
		t.Fatalf("Validate accepted unknown action %q", a.Action)
	}
	have := a.present()
	if have&spec.required != spec.required || have&^spec.allowed != 0 {
		t.Fatalf("Validate accepted %s with fields %b (required %b, allowed %b)", a, have, spec.required, spec.allowed)
	}
	for _, p := range [][]int{a.Coordinate, a.StartCoordinate} {
		if p == nil {
			continue
		}
		if len(p) != 2 || !s.InModel(p[0], p[1]) {
			t.Fatalf("Validate accepted %s with point %v outside %v", a, p, s)
		}
		if x, y := s.ToScreen(p[0], p[1]); !s.InScreen(x, y) {
			t.Fatalf("model point %v of %s maps to screen (%d, %d), off the %v screen", p, a, x, y, s)
		}
	}
	if r := a.Region; r != nil {
		if len(r) != 4 || r[0] < 0 || r[1] < 0 || r[0] >= r[2] || r[1] >= r[3] || r[2] > s.ModelW || r[3] > s.ModelH {
			t.Fatalf("Validate accepted %s with region %v outside %v", a, r, s)
		}
		if sr := s.RegionToScreen(r[0], r[1], r[2], r[3]); sr.Empty() {
			t.Fatalf("region %v of %s maps to an empty screen rectangle %v on %v", r, a, sr, s)
		}
	}
	if !utf8.ValidString(a.Text) || !utf8.ValidString(a.Key) {
		t.Fatalf("Validate accepted %s with text that is not UTF-8", a)
	}
	switch a.Action {
	case ActKey, ActHoldKey:
		if _, err := ParseKeys(a.Text); err != nil {
			t.Fatalf("Validate accepted %s whose keys do not parse: %v", a, err)
		}
	case ActType:
		if len(a.Text) > MaxTextBytes {
			t.Fatalf("Validate accepted %d bytes of text", len(a.Text))
		}
		for _, r := range a.Text {
			if KeysymForRune(r) == 0 {
				t.Fatalf("Validate accepted text with %U, which has no keysym", r)
			}
		}
	default:
		if _, err := a.Modifiers(); err != nil {
			t.Fatalf("Validate accepted %s whose modifiers do not parse: %v", a, err)
		}
	}
	if a.ScrollAmount != nil && (*a.ScrollAmount < 0 || *a.ScrollAmount > MaxScrollAmount) {
		t.Fatalf("Validate accepted scroll_amount %d", *a.ScrollAmount)
	}
	if a.Duration != nil && !(*a.Duration >= 0 && *a.Duration <= MaxDuration) {
		t.Fatalf("Validate accepted duration %g", *a.Duration)
	}
}

// FuzzParseKeys feeds key texts to ParseKeys. Accepted text gives 1 to 100
// chords of 1 to 8 non-zero keysyms, and each keysym's name resolves again
// to a key that types the same character.
func FuzzParseKeys(f *testing.F) {
	for _, s := range []string{
		"Return", "ctrl+s", "ctrl+shift+t", "ctrl + s", "ctrl+a Delete", "ctrl++", "+", " ",
		"U+20AC", "u20ac", "ctrl+U+20AC", "0xff0d", "super", "alt+F4", "KP_Enter", "page_down",
		"é", "ctrl+é", "EuroSign", "retrun", "ctrl+", "a+b+c+d+e+f+g+h+i", "\xff", "\x00",
		"Shift_L Shift_R", "XF86AudioMute", "cmd+shift+4", "U+", "0x", "0x20000000",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		chords, err := ParseKeys(text)
		if err != nil {
			return
		}
		if len(chords) == 0 || len(chords) > maxChords {
			t.Fatalf("ParseKeys(%q) gave %d chords", text, len(chords))
		}
		for _, c := range chords {
			if len(c) == 0 || len(c) > maxChordKeys {
				t.Fatalf("ParseKeys(%q) gave a chord of %d keys", text, len(c))
			}
			for _, k := range c {
				if k == 0 {
					t.Fatalf("ParseKeys(%q) gave keysym 0", text)
				}
				name := k.String()
				again, err := KeysymByName(name)
				if err != nil {
					t.Fatalf("ParseKeys(%q) gave %#x, whose name %q does not resolve: %v", text, uint32(k), name, err)
				}
				r1, ok1 := k.Rune()
				r2, ok2 := again.Rune()
				if ok1 != ok2 || r1 != r2 {
					t.Fatalf("%#x (%q) types %q/%v but its name resolves to %#x, which types %q/%v", uint32(k), name, r1, ok1, uint32(again), r2, ok2)
				}
			}
		}
	})
}
