package record

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/deskenv/deskenv/hci"
)

// events builds raw events from a table, one per line:
//
//	T TYPE ARGS
//
// where TYPE is kd/ku KEYNAME (a key name as hci.KeysymByName reads it),
// bd/bu BUTTON X Y, mm X Y, wh DX DY, act JSON (an agent's action), pause,
// resume. Times are seconds; every event takes 1 ms.
func events(t *testing.T, table string) []Event {
	t.Helper()
	var out []Event
	for _, line := range strings.Split(strings.TrimSpace(table), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 2 {
			t.Fatalf("bad line %q", line)
		}
		ts, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			t.Fatalf("bad time in %q", line)
		}
		ev := Event{I: len(out), T: ts, Dur: 0.001, Source: hci.SourceHuman, Kind: hci.KindInput}
		num := func(i int) int {
			n, err := strconv.Atoi(f[i])
			if err != nil {
				t.Fatalf("bad number %q in %q", f[i], line)
			}
			return n
		}
		switch f[1] {
		case "kd", "ku":
			k, err := hci.KeysymByName(f[2])
			if err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			typ := hci.InputKeyDown
			if f[1] == "ku" {
				typ = hci.InputKeyUp
			}
			ev.Input = &hci.Input{Type: typ, Keysym: k}
		case "bd", "bu":
			typ := hci.InputButtonDown
			if f[1] == "bu" {
				typ = hci.InputButtonUp
			}
			ev.Input = &hci.Input{Type: typ, Button: num(2), X: num(3), Y: num(4)}
		case "mm":
			ev.Input = &hci.Input{Type: hci.InputMotion, X: num(2), Y: num(3)}
		case "wh":
			ev.Input = &hci.Input{Type: hci.InputWheel, DX: num(2), DY: num(3)}
		case "act":
			a, err := hci.ParseAction([]byte(strings.Join(f[2:], " ")))
			if err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			ev.Kind, ev.Source, ev.Action, ev.Input = hci.KindAction, hci.SourceAgent, &a, nil
		case "pause":
			ev.Kind, ev.Source = KindPause, ""
		case "resume":
			ev.Kind, ev.Source = KindResume, ""
		default:
			t.Fatalf("unknown event type in %q", line)
		}
		out = append(out, ev)
	}
	return out
}

// typing returns key down/up events typing s from t0, one key every dt
// seconds, with shift for upper-case letters and symbols given as "+X".
func typing(t0, dt float64, s string) string {
	var b strings.Builder
	for _, r := range s {
		name := string(r)
		if r == ' ' {
			name = "space"
		}
		shift := r >= 'A' && r <= 'Z' || strings.ContainsRune("!@#$%^&*()_+{}|:\"<>?~", r)
		if shift {
			fmt.Fprintf(&b, "%.3f kd Shift_L\n", t0)
		}
		fmt.Fprintf(&b, "%.3f kd %s\n%.3f ku %s\n", t0+0.01, name, t0+0.04, name)
		if shift {
			fmt.Fprintf(&b, "%.3f ku Shift_L\n", t0+0.05)
		}
		t0 += dt
	}
	return b.String()
}

func actions(steps []Step) []string {
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i] = s.Action.String()
	}
	return out
}

var space1280 = hci.Space{ScreenW: 1280, ScreenH: 800, ModelW: 1280, ModelH: 800}

func TestReduce(t *testing.T) {
	tests := []struct {
		name  string
		space hci.Space
		table string
		want  []string
	}{
		{
			name:  "fast typing is one run",
			table: typing(0, 0.03, "echo hello world > ~/hello.txt"),
			want:  []string{`{"action":"type","text":"echo hello world > ~/hello.txt"}`},
		},
		{
			name:  "shift and a character count as typing",
			table: typing(0, 0.1, "Hello, World!"),
			want:  []string{`{"action":"type","text":"Hello, World!"}`},
		},
		{
			name: "unicode keysyms type without AltGr",
			table: `
0.00 kd eacute
0.02 ku eacute
0.10 kd EuroSign
0.12 ku EuroSign
0.20 kd U65E5
0.22 ku U65E5
0.30 kd U1F600
0.32 ku U1F600`,
			want: []string{`{"action":"type","text":"é€日😀"}`},
		},
		{
			name: "AltGr held while typing is still typing",
			table: `
0.00 kd ISO_Level3_Shift
0.05 kd at
0.08 ku at
0.10 ku ISO_Level3_Shift
0.20 kd x
0.22 ku x`,
			want: []string{`{"action":"type","text":"@x"}`},
		},
		{
			name:  "a pause splits typing runs",
			table: typing(0, 0.1, "abc") + typing(1.0, 0.1, "def"),
			want:  []string{`{"action":"type","text":"abc"}`, `{"action":"type","text":"def"}`},
		},
		{
			name:  "BackSpace corrections are kept",
			table: typing(0, 0.1, "help") + "0.40 kd BackSpace\n0.42 ku BackSpace\n" + typing(0.5, 0.1, "lo"),
			want: []string{`{"action":"type","text":"help"}`, `{"action":"key","text":"BackSpace"}`,
				`{"action":"type","text":"lo"}`},
		},
		{
			name: "repeated BackSpace is one key action",
			table: `
0.00 kd BackSpace
0.05 ku BackSpace
0.15 kd BackSpace
0.20 ku BackSpace
0.30 kd BackSpace
0.35 ku BackSpace`,
			want: []string{`{"action":"key","text":"BackSpace BackSpace BackSpace"}`},
		},
		{
			name: "Return ends a run and is a key",
			table: typing(0, 0.05, "ls") + `
0.12 kd Return
0.15 ku Return`,
			want: []string{`{"action":"type","text":"ls"}`, `{"action":"key","text":"Return"}`},
		},
		{
			name: "chords",
			table: `
0.00 kd Control_L
0.10 kd c
0.15 ku c
0.20 ku Control_L
1.00 kd Control_L
1.05 kd Shift_L
1.10 kd T
1.15 ku T
1.16 ku Shift_L
1.17 ku Control_L
2.00 kd Shift_L
2.05 kd Tab
2.10 ku Tab
2.15 ku Shift_L
3.00 kd Alt_L
3.05 kd F4
3.10 ku F4
3.15 ku Alt_L`,
			want: []string{`{"action":"key","text":"ctrl+c"}`, `{"action":"key","text":"ctrl+shift+t"}`,
				`{"action":"key","text":"shift+Tab"}`, `{"action":"key","text":"alt+F4"}`},
		},
		{
			name: "a modifier tapped alone is a key, shift alone is nothing",
			table: `
0.00 kd Super_L
0.10 ku Super_L
1.00 kd Shift_L
1.10 ku Shift_L`,
			want: []string{`{"action":"key","text":"super"}`},
		},
		{
			name: "single click",
			table: `
0.00 mm 400 300
0.05 bd 1 400 300
0.10 bu 1 400 300`,
			want: []string{`{"action":"left_click","coordinate":[400,300]}`},
		},
		{
			name: "double click",
			table: `
0.00 bd 1 400 300
0.05 bu 1 400 300
0.25 bd 1 401 302
0.30 bu 1 401 302`,
			want: []string{`{"action":"double_click","coordinate":[400,300]}`},
		},
		{
			name: "triple click",
			table: `
0.00 bd 1 400 300
0.05 bu 1 400 300
0.20 bd 1 400 300
0.25 bu 1 400 300
0.40 bd 1 400 300
0.45 bu 1 400 300`,
			want: []string{`{"action":"triple_click","coordinate":[400,300]}`},
		},
		{
			name: "two single clicks: too slow",
			table: `
0.00 bd 1 400 300
0.05 bu 1 400 300
0.70 bd 1 400 300
0.75 bu 1 400 300`,
			want: []string{`{"action":"left_click","coordinate":[400,300]}`, `{"action":"left_click","coordinate":[400,300]}`},
		},
		{
			name: "two single clicks: too far apart",
			table: `
0.00 bd 1 400 300
0.05 bu 1 400 300
0.10 mm 420 300
0.20 bd 1 420 300
0.25 bu 1 420 300`,
			want: []string{`{"action":"left_click","coordinate":[400,300]}`, `{"action":"left_click","coordinate":[420,300]}`},
		},
		{
			name: "right and middle clicks with a modifier",
			table: `
0.00 bd 3 10 20
0.05 bu 3 10 20
1.00 kd Control_L
1.05 bd 2 30 40
1.10 bu 2 30 40
1.20 ku Control_L`,
			want: []string{`{"action":"right_click","coordinate":[10,20]}`, `{"action":"middle_click","coordinate":[30,40],"text":"ctrl"}`},
		},
		{
			name: "shift+click",
			table: `
0.00 kd Shift_L
0.10 bd 1 50 60
0.15 bu 1 50 60
0.20 ku Shift_L`,
			want: []string{`{"action":"left_click","coordinate":[50,60],"text":"shift"}`},
		},
		{
			name: "drag",
			table: `
0.00 bd 1 100 100
0.05 mm 120 110
0.10 mm 180 150
0.20 mm 200 160
0.25 bu 1 200 160`,
			want: []string{`{"action":"left_click_drag","coordinate":[200,160],"start_coordinate":[100,100]}`},
		},
		{
			name: "a small wobble during a click is still a click",
			table: `
0.00 bd 1 100 100
0.05 mm 103 102
0.10 bu 1 103 102`,
			want: []string{`{"action":"left_click","coordinate":[100,100]}`},
		},
		{
			name: "long hold without moving",
			table: `
0.00 bd 1 100 100
1.50 bu 1 100 100`,
			want: []string{`{"action":"left_mouse_down","coordinate":[100,100]}`, `{"action":"left_mouse_up","coordinate":[100,100]}`},
		},
		{
			name: "a key pressed while the button is held",
			table: `
0.00 bd 1 100 100
0.20 kd Escape
0.25 ku Escape
0.40 bu 1 100 100`,
			want: []string{`{"action":"left_mouse_down","coordinate":[100,100]}`, `{"action":"key","text":"Escape"}`,
				`{"action":"left_mouse_up","coordinate":[100,100]}`},
		},
		{
			name: "scroll burst merged",
			table: `
0.00 mm 640 400
0.10 wh 0 1
0.15 wh 0 1
0.25 wh 0 2
0.40 wh 0 1`,
			want: []string{`{"action":"scroll","coordinate":[640,400],"scroll_direction":"down","scroll_amount":5}`},
		},
		{
			name: "scroll: direction change and a gap split bursts",
			table: `
0.00 wh 0 2
0.10 wh 0 -1
1.00 wh 0 -3
1.10 wh 2 0`,
			want: []string{
				`{"action":"scroll","coordinate":[0,0],"scroll_direction":"down","scroll_amount":2}`,
				`{"action":"scroll","coordinate":[0,0],"scroll_direction":"up","scroll_amount":1}`,
				`{"action":"scroll","coordinate":[0,0],"scroll_direction":"up","scroll_amount":3}`,
				`{"action":"scroll","coordinate":[0,0],"scroll_direction":"right","scroll_amount":2}`,
			},
		},
		{
			name: "wheel buttons 4-7 count as wheel ticks",
			table: `
0.00 bd 4 10 10
0.01 bu 4 10 10
0.05 bd 4 10 10
0.06 bu 4 10 10`,
			want: []string{`{"action":"scroll","coordinate":[10,10],"scroll_direction":"up","scroll_amount":2}`},
		},
		{
			name:  "idle becomes wait",
			table: typing(0, 0.1, "a") + typing(3.5, 0.1, "b"),
			want:  []string{`{"action":"type","text":"a"}`, `{"action":"wait","duration":3.5}`, `{"action":"type","text":"b"}`},
		},
		{
			name: "motion that rests without a click is mouse_move; jitter is nothing",
			table: `
0.00 mm 2 2
0.10 mm 300 200
0.20 mm 310 210
1.00 mm 312 211
1.10 kd a
1.12 ku a`,
			want: []string{`{"action":"mouse_move","coordinate":[310,210]}`, `{"action":"type","text":"a"}`},
		},
		{
			name:  "coordinates go to model space",
			space: hci.Space{ScreenW: 1920, ScreenH: 1200, ModelW: 1280, ModelH: 800},
			table: `
0.00 bd 1 1919 1199
0.05 bu 1 1919 1199
1.00 bd 1 300 300
1.10 mm 600 600
1.20 bu 1 600 600`,
			want: []string{`{"action":"left_click","coordinate":[1279,799]}`,
				`{"action":"left_click_drag","coordinate":[400,400],"start_coordinate":[200,200]}`},
		},
		{
			name: "an agent's action passes through and cuts a run",
			table: typing(0, 0.05, "ab") + `
0.12 act {"action":"left_click","coordinate":[5,5]}
` + typing(0.2, 0.05, "c"),
			want: []string{`{"action":"type","text":"ab"}`, `{"action":"left_click","coordinate":[5,5]}`, `{"action":"type","text":"c"}`},
		},
		{
			name:  "a pause cuts a run and hides the gap",
			table: typing(0, 0.05, "ab") + "0.2 pause\n10.0 resume\n" + typing(10.1, 0.05, "c"),
			want:  []string{`{"action":"type","text":"ab"}`, `{"action":"type","text":"c"}`},
		},
		{
			// The page's privacy key, Ctrl+Alt+P: the modifiers go down on
			// the desktop, P never does, and their releases fall in the
			// pause. Nothing of it is a step, and what is typed after the
			// pause is typing, not ctrl+alt chords.
			name: "modifiers held into a pause are let go by it",
			table: `
0.00 kd Control_L
0.05 kd Alt_L
0.10 pause
3.00 resume
3.10 ku Control_L
3.12 ku Alt_L
` + typing(3.5, 0.05, "ls"),
			want: []string{`{"action":"type","text":"ls"}`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sp := tc.space
			if sp == (hci.Space{}) {
				sp = space1280
			}
			steps := Reduce(events(t, tc.table), sp)
			if got := actions(steps); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
			for i, s := range steps {
				if s.Step != i {
					t.Errorf("step %d numbered %d", i, s.Step)
				}
				if s.TEnd < s.TStart {
					t.Errorf("step %d ends (%g) before it starts (%g)", i, s.TEnd, s.TStart)
				}
				if err := s.Action.Validate(sp); err != nil {
					t.Errorf("step %d %s is not a valid action: %v", i, s.Action, err)
				}
			}
		})
	}
}

// The recorder reduces as events arrive, with ticks in between; that must
// give exactly what Reduce gives on the whole list.
func TestReducerStreamingMatchesBatch(t *testing.T) {
	table := typing(0, 0.07, "Hello") + `
0.40 kd BackSpace
0.45 ku BackSpace
0.60 mm 300 300
0.70 bd 1 300 300
0.75 bu 1 300 300
0.90 bd 1 300 300
0.95 bu 1 300 300
2.00 wh 0 1
2.10 wh 0 1
5.00 kd Control_L
5.05 kd s
5.10 ku s
5.20 ku Control_L
5.30 bd 1 10 10
5.40 mm 100 100
5.50 bu 1 100 100
7.00 mm 500 500
7.10 mm 505 505`
	evs := events(t, table)
	want := Reduce(evs, space1280)
	r := NewReducer(space1280, Thresholds{})
	var got []Step
	for i, ev := range evs {
		got = append(got, r.Add(ev)...)
		// Tick at 50 ms steps up to the next event, as the recorder's timer does.
		next := ev.T + 3
		if i+1 < len(evs) {
			next = evs[i+1].T
		}
		for now := ev.T + 0.05; now < next; now += 0.05 {
			got = append(got, r.Tick(now)...)
		}
	}
	got = append(got, r.Flush()...)
	for i := range got {
		got[i].Step = i
	}
	if !reflect.DeepEqual(actions(got), actions(want)) {
		t.Fatalf("streaming gave\n  %s\nbatch gave\n  %s", strings.Join(actions(got), "\n  "), strings.Join(actions(want), "\n  "))
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("same actions but different steps:\n%+v\n%+v", got, want)
	}
}

func TestReduceEventRanges(t *testing.T) {
	evs := events(t, typing(0, 0.05, "ab")+"1.0 bd 1 5 5\n1.05 bu 1 5 5\n")
	steps := Reduce(evs, space1280)
	want := [][]int{{0, 3}, {4, 5}}
	if len(steps) != len(want) {
		t.Fatalf("got %d steps, want %d: %v", len(steps), len(want), actions(steps))
	}
	for i, s := range steps {
		if !reflect.DeepEqual(s.Events, want[i]) {
			t.Errorf("step %d (%s) events %v, want %v", i, s.Action, s.Events, want[i])
		}
	}
	if steps[0].TStart != 0.01 || steps[1].TStart != 1.0 {
		t.Errorf("start times %g, %g; want 0.01, 1", steps[0].TStart, steps[1].TStart)
	}
}
