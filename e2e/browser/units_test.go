package browser_test

import (
	"context"
	"testing"
	"time"

	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/web"
)

// The page's pure helpers, run in the real browser against tables kept here.

type keyCase struct {
	Name     string `json:"name"`
	Key      string `json:"key"`
	Code     string `json:"code"`
	Want     uint32 `json:"want"`
	Location int    `json:"location"`
}

func TestKeysymMapping(t *testing.T) {
	cases := []keyCase{
		{Name: "lower letter", Key: "a", Code: "KeyA", Want: 0x61},
		{Name: "upper letter", Key: "A", Code: "KeyA", Want: 0x41},
		{Name: "azerty a on the q key", Key: "a", Code: "KeyQ", Want: 0x61},
		{Name: "digit", Key: "7", Code: "Digit7", Want: 0x37},
		{Name: "space", Key: " ", Code: "Space", Want: 0x20},
		{Name: "shifted symbol", Key: "@", Code: "Digit2", Want: 0x40},
		{Name: "latin-1 e acute", Key: "é", Code: "Digit2", Want: 0xe9},
		{Name: "latin-1 sharp s", Key: "ß", Code: "Minus", Want: 0xdf},
		{Name: "euro sign is unicode keysym", Key: "€", Code: "KeyE", Want: 0x010020ac},
		{Name: "cyrillic", Key: "ж", Code: "Semicolon", Want: 0x01000436},
		{Name: "astral emoji", Key: "😀", Code: "", Want: 0x0101f600},
		{Name: "Enter", Key: "Enter", Code: "Enter", Want: 0xff0d},
		{Name: "Escape", Key: "Escape", Code: "Escape", Want: 0xff1b},
		{Name: "Tab", Key: "Tab", Code: "Tab", Want: 0xff09},
		{Name: "BackSpace", Key: "Backspace", Code: "Backspace", Want: 0xff08},
		{Name: "Delete", Key: "Delete", Code: "Delete", Want: 0xffff},
		{Name: "Insert", Key: "Insert", Code: "Insert", Want: 0xff63},
		{Name: "Left", Key: "ArrowLeft", Code: "ArrowLeft", Want: 0xff51},
		{Name: "Up", Key: "ArrowUp", Code: "ArrowUp", Want: 0xff52},
		{Name: "Right", Key: "ArrowRight", Code: "ArrowRight", Want: 0xff53},
		{Name: "Down", Key: "ArrowDown", Code: "ArrowDown", Want: 0xff54},
		{Name: "Home", Key: "Home", Code: "Home", Want: 0xff50},
		{Name: "End", Key: "End", Code: "End", Want: 0xff57},
		{Name: "Prior", Key: "PageUp", Code: "PageUp", Want: 0xff55},
		{Name: "Next", Key: "PageDown", Code: "PageDown", Want: 0xff56},
		{Name: "F1", Key: "F1", Code: "F1", Want: 0xffbe},
		{Name: "F12", Key: "F12", Code: "F12", Want: 0xffc9},
		{Name: "Shift_L", Key: "Shift", Code: "ShiftLeft", Want: 0xffe1},
		{Name: "Shift_R", Key: "Shift", Code: "ShiftRight", Want: 0xffe2},
		{Name: "Control_L", Key: "Control", Code: "ControlLeft", Want: 0xffe3},
		{Name: "Control_R", Key: "Control", Code: "ControlRight", Want: 0xffe4},
		{Name: "Alt_L", Key: "Alt", Code: "AltLeft", Want: 0xffe9},
		{Name: "Alt_R", Key: "Alt", Code: "AltRight", Want: 0xffea},
		{Name: "AltGr", Key: "AltGraph", Code: "AltRight", Want: 0xfe03},
		{Name: "Super_L", Key: "Meta", Code: "MetaLeft", Want: 0xffeb},
		{Name: "Super_R", Key: "Meta", Code: "MetaRight", Want: 0xffec},
		{Name: "CapsLock", Key: "CapsLock", Code: "CapsLock", Want: 0xffe5},
		{Name: "Menu", Key: "ContextMenu", Code: "ContextMenu", Want: 0xff67},
		{Name: "KP_1 numlock on", Key: "1", Code: "Numpad1", Want: 0xffb1},
		{Name: "KP_End numlock off", Key: "End", Code: "Numpad1", Want: 0xff9c},
		{Name: "KP_Begin numlock off", Key: "Clear", Code: "Numpad5", Want: 0xff9d},
		{Name: "KP_Enter", Key: "Enter", Code: "NumpadEnter", Want: 0xff8d},
		{Name: "KP_Add", Key: "+", Code: "NumpadAdd", Want: 0xffab},
		{Name: "KP_Multiply", Key: "*", Code: "NumpadMultiply", Want: 0xffaa},
		{Name: "KP_Decimal with comma locale", Key: ",", Code: "NumpadDecimal", Want: 0xffae},
		{Name: "KP_Delete", Key: "Delete", Code: "NumpadDecimal", Want: 0xff9f},
		{Name: "dead key sends nothing", Key: "Dead", Code: "BracketLeft", Want: 0},
		{Name: "IME processing sends nothing", Key: "Process", Code: "KeyA", Want: 0},
		{Name: "unidentified falls back to code", Key: "Unidentified", Code: "KeyZ", Want: 0x7a},
		{Name: "unknown name sends nothing", Key: "FooBar", Code: "", Want: 0},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d := startDriver(ctx, t)
	base := testrig.Serve(t, web.Handler())
	open(ctx, t, d, "units", base+"/")

	var got []uint32
	err := d.Do(ctx, "eval", map[string]any{"page": "units", "arg": cases,
		"expr": `async (cases) => { const k = await import('./keys.js'); return cases.map((c) => k.keysymFor(c)); }`}, &got)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(cases) {
		t.Fatalf("got %d results for %d cases", len(got), len(cases))
	}
	for i, c := range cases {
		if got[i] != c.Want {
			t.Errorf("%s: key %q code %q -> 0x%x, want 0x%x", c.Name, c.Key, c.Code, got[i], c.Want)
		}
	}
}

// A key goes up with the keysym it went down with, whatever changed between.
func TestKeyTracker(t *testing.T) {
	type ev struct {
		Op     string `json:"op"` // down, up, all
		Key    string `json:"key"`
		Code   string `json:"code"`
		Repeat bool   `json:"repeat"`
	}
	tests := []struct {
		name   string
		events []ev
		want   []uint32
	}{
		{"shift pressed while a is held: a goes up as a",
			[]ev{{"down", "a", "KeyA", false}, {"down", "Shift", "ShiftLeft", false}, {"up", "A", "KeyA", false}, {"up", "Shift", "ShiftLeft", false}},
			[]uint32{0x61, 0xffe1, 0x61, 0xffe1}},
		{"auto-repeat keeps the first keysym",
			[]ev{{"down", "a", "KeyA", false}, {"down", "A", "KeyA", true}, {"up", "A", "KeyA", false}},
			[]uint32{0x61, 0x61, 0x61}},
		{"up without down sends nothing",
			[]ev{{"up", "b", "KeyB", false}},
			[]uint32{0}},
		{"release all returns what is held",
			[]ev{{"down", "Control", "ControlLeft", false}, {"down", "c", "KeyC", false}, {"all", "", "", false}, {"up", "c", "KeyC", false}},
			[]uint32{0xffe3, 0x63, 0xffe3, 0x63, 0}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d := startDriver(ctx, t)
	base := testrig.Serve(t, web.Handler())
	open(ctx, t, d, "tracker", base+"/")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []uint32
			err := d.Do(ctx, "eval", map[string]any{"page": "tracker", "arg": tc.events, "expr": `async (events) => {
				const { KeyTracker } = await import('./keys.js');
				const tr = new KeyTracker(), out = [];
				for (const e of events) {
					if (e.op === 'down') out.push(tr.press(e));
					else if (e.op === 'up') out.push(tr.release(e));
					else out.push(...tr.releaseAll());
				}
				return out;
			}`}, &got)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %x, want %x", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("got %x, want %x", got, tc.want)
				}
			}
		})
	}
}

// Element pixels map to video pixels through the letterbox.
func TestVideoCoordinates(t *testing.T) {
	type pt struct {
		Name           string `json:"name"`
		PX, PY         float64
		BW, BH, PW, PH float64
		VW, VH         float64
		X, Y           int
		Inside         bool
	}
	cases := []pt{
		{Name: "exact fit top-left", PX: 0, PY: 0, BW: 1280, BH: 800, PW: 1280, PH: 800, VW: 1280, VH: 800, X: 0, Y: 0, Inside: true},
		{Name: "exact fit bottom-right", PX: 1279.5, PY: 799.5, BW: 1280, BH: 800, PW: 1280, PH: 800, VW: 1280, VH: 800, X: 1279, Y: 799, Inside: true},
		{Name: "half size", PX: 320, PY: 200, BW: 640, BH: 400, PW: 1280, PH: 800, VW: 1280, VH: 800, X: 640, Y: 400, Inside: true},
		// A 1280x800 picture in a 1000x1000 box: 1000x625, bars of 187.5 above and below.
		{Name: "letterbox top bar is outside", PX: 500, PY: 100, BW: 1000, BH: 1000, PW: 1280, PH: 800, VW: 1280, VH: 800, X: 640, Y: 0, Inside: false},
		{Name: "letterbox first row", PX: 0, PY: 187.5, BW: 1000, BH: 1000, PW: 1280, PH: 800, VW: 1280, VH: 800, X: 0, Y: 0, Inside: true},
		{Name: "letterbox middle", PX: 500, PY: 500, BW: 1000, BH: 1000, PW: 1280, PH: 800, VW: 1280, VH: 800, X: 640, Y: 400, Inside: true},
		// 1280x800 in 2000x800: 1280 wide, bars of 360 left and right.
		{Name: "pillarbox left bar", PX: 100, PY: 400, BW: 2000, BH: 800, PW: 1280, PH: 800, VW: 1280, VH: 800, X: 0, Y: 400, Inside: false},
		{Name: "pillarbox inside", PX: 360 + 100, PY: 10, BW: 2000, BH: 800, PW: 1280, PH: 800, VW: 1280, VH: 800, X: 100, Y: 10, Inside: true},
		{Name: "decoded picture smaller than video space", PX: 320, PY: 200, BW: 640, BH: 400, PW: 640, PH: 400, VW: 1280, VH: 800, X: 640, Y: 400, Inside: true},
		{Name: "no video yet", PX: 5, PY: 5, BW: 640, BH: 400, PW: 0, PH: 0, VW: 1280, VH: 800, X: 0, Y: 0, Inside: false},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d := startDriver(ctx, t)
	base := testrig.Serve(t, web.Handler())
	open(ctx, t, d, "geom", base+"/")
	var got []struct {
		X, Y   int
		Inside bool
	}
	err := d.Do(ctx, "eval", map[string]any{"page": "geom", "arg": cases, "expr": `async (cases) => {
		const g = await import('./geometry.js');
		return cases.map((c) => { const r = g.toVideo(c.PX, c.PY, c.BW, c.BH, c.PW, c.PH, c.VW, c.VH); return { X: r.x, Y: r.y, Inside: r.inside }; });
	}`}, &got)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		if got[i].X != c.X || got[i].Y != c.Y || got[i].Inside != c.Inside {
			t.Errorf("%s: (%v,%v) -> (%d,%d inside=%v), want (%d,%d inside=%v)", c.Name, c.PX, c.PY, got[i].X, got[i].Y, got[i].Inside, c.X, c.Y, c.Inside)
		}
	}
}

func TestWheelNotches(t *testing.T) {
	type step struct{ DX, DY, Mode float64 }
	tests := []struct {
		name  string
		steps []step
		want  [][2]int
	}{
		{"one mouse notch in pixels", []step{{0, 100, 0}}, [][2]int{{0, 1}}},
		{"trackpad pixels accumulate", []step{{0, 40, 0}, {0, 40, 0}, {0, 40, 0}}, [][2]int{{0, 0}, {0, 0}, {0, 1}}},
		{"lines: three per notch", []step{{0, 3, 1}, {0, -6, 1}}, [][2]int{{0, 1}, {0, -2}}},
		{"pages: one per notch", []step{{1, 0, 2}}, [][2]int{{1, 0}}},
		{"turning back starts afresh", []step{{0, 250, 0}, {0, -100, 0}}, [][2]int{{0, 2}, {0, -1}}},
		{"part notch then back", []step{{0, 60, 0}, {0, -60, 0}, {0, 100, 0}}, [][2]int{{0, 0}, {0, 0}, {0, 1}}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d := startDriver(ctx, t)
	base := testrig.Serve(t, web.Handler())
	open(ctx, t, d, "wheel", base+"/")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got [][2]int
			err := d.Do(ctx, "eval", map[string]any{"page": "wheel", "arg": tc.steps, "expr": `async (steps) => {
				const { WheelAccumulator } = await import('./geometry.js');
				const w = new WheelAccumulator();
				return steps.map((s) => { const n = w.add(s.DX, s.DY, s.Mode); return [n.dx, n.dy]; });
			}`}, &got)
			if err != nil {
				t.Fatal(err)
			}
			for i := range tc.want {
				if i >= len(got) || got[i] != tc.want[i] {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
}
