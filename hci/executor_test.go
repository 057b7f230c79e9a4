package hci

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jezek/xgb/xproto"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/internal/xprobe"
)

// env is one Xvfb with an executor and a probe window covering the screen.
type env struct {
	d *display.Display
	e *Executor
	p *xprobe.Probe
}

func newEnv(t testing.TB, w, h int, model string) *env {
	t.Helper()
	testrig.NeedTools(t)
	d := testrig.Display(t, display.Config{Width: w, Height: h})
	sp, err := NewSpace(w, h, model)
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewExecutor(d, Options{Space: sp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return &env{d: d, e: e, p: testrig.Probe(t, d, xprobe.Options{})}
}

// take waits until the probe has every event the server generated so far and
// returns them, formatted.
func (v *env) take(t testing.TB) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := v.p.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	return format(v.p.Take())
}

func format(evs []xprobe.Event) []string {
	out := make([]string, 0, len(evs))
	for _, e := range evs {
		switch e.Kind {
		case xprobe.KeyPress:
			out = append(out, "kd "+Keysym(e.Keysym).String())
		case xprobe.KeyRelease:
			out = append(out, "ku "+Keysym(e.Keysym).String())
		case xprobe.ButtonPress:
			out = append(out, fmt.Sprintf("bd %d %d,%d", e.Button, e.X, e.Y))
		case xprobe.ButtonRelease:
			out = append(out, fmt.Sprintf("bu %d %d,%d", e.Button, e.X, e.Y))
		case xprobe.Motion:
			out = append(out, fmt.Sprintf("mv %d,%d", e.X, e.Y))
		}
	}
	return out
}

func (v *env) park(t testing.TB) (int, int) {
	t.Helper()
	w, h := v.d.Size()
	if err := v.e.MoveTo(context.Background(), w-1, h-1, SourceScript); err != nil {
		t.Fatal(err)
	}
	v.take(t)
	return w - 1, h - 1
}

func mustParse(t testing.TB, raw string) Action {
	t.Helper()
	a, err := ParseAction([]byte(raw))
	if err != nil {
		t.Fatalf("ParseAction(%s): %v", raw, err)
	}
	return a
}

// TestActionsLand runs every mutating action and checks the exact X events a
// client receives, at the right screen pixels, on a scaled and an unscaled
// space.
func TestActionsLand(t *testing.T) {
	for _, geo := range []struct {
		name  string
		w, h  int
		model string
	}{
		{"scaled-1920x1200-to-1280x800", 1920, 1200, "auto"},
		{"unscaled-1280x800", 1280, 800, "off"},
	} {
		t.Run(geo.name, func(t *testing.T) {
			v := newEnv(t, geo.w, geo.h, geo.model)
			sp := v.e.Space()
			pt := func(x, y int) string { sx, sy := sp.ToScreen(x, y); return fmt.Sprintf("%d,%d", sx, sy) }
			pw, ph := geo.w-1, geo.h-1
			park := fmt.Sprintf("%d,%d", pw, ph)
			drag := func() []string {
				x0, y0 := sp.ToScreen(10, 10)
				x1, y1 := sp.ToScreen(110, 60)
				out := []string{"mv " + pt(10, 10), "bd 1 " + pt(10, 10)}
				n := v.e.opt.DragSteps
				for i := 1; i <= n; i++ {
					out = append(out, fmt.Sprintf("mv %d,%d", x0+(x1-x0)*i/n, y0+(y1-y0)*i/n))
				}
				return append(out, "bu 1 "+pt(110, 60))
			}
			tests := []struct {
				name    string
				actions []string
				want    []string
			}{
				{"left_click", []string{`{"action":"left_click","coordinate":[100,200]}`},
					[]string{"mv " + pt(100, 200), "bd 1 " + pt(100, 200), "bu 1 " + pt(100, 200)}},
				{"left_click corner", []string{`{"action":"left_click","coordinate":[0,0]}`},
					[]string{"mv 0,0", "bd 1 0,0", "bu 1 0,0"}},
				{"left_click far corner", []string{fmt.Sprintf(`{"action":"left_click","coordinate":[%d,%d]}`, sp.ModelW-1, sp.ModelH-2)},
					[]string{"mv " + pt(sp.ModelW-1, sp.ModelH-2), "bd 1 " + pt(sp.ModelW-1, sp.ModelH-2), "bu 1 " + pt(sp.ModelW-1, sp.ModelH-2)}},
				{"left_click in place", []string{`{"action":"left_click"}`},
					[]string{"bd 1 " + park, "bu 1 " + park}},
				{"right_click", []string{`{"action":"right_click","coordinate":[7,9]}`},
					[]string{"mv " + pt(7, 9), "bd 3 " + pt(7, 9), "bu 3 " + pt(7, 9)}},
				{"middle_click", []string{`{"action":"middle_click","coordinate":[640,400]}`},
					[]string{"mv " + pt(640, 400), "bd 2 " + pt(640, 400), "bu 2 " + pt(640, 400)}},
				{"double_click", []string{`{"action":"double_click","coordinate":[33,44]}`},
					[]string{"mv " + pt(33, 44), "bd 1 " + pt(33, 44), "bu 1 " + pt(33, 44), "bd 1 " + pt(33, 44), "bu 1 " + pt(33, 44)}},
				{"triple_click", []string{`{"action":"triple_click","coordinate":[33,44]}`},
					[]string{"mv " + pt(33, 44), "bd 1 " + pt(33, 44), "bu 1 " + pt(33, 44), "bd 1 " + pt(33, 44), "bu 1 " + pt(33, 44), "bd 1 " + pt(33, 44), "bu 1 " + pt(33, 44)}},
				{"shift click (text)", []string{`{"action":"left_click","coordinate":[5,6],"text":"shift"}`},
					[]string{"mv " + pt(5, 6), "kd Shift_L", "bd 1 " + pt(5, 6), "bu 1 " + pt(5, 6), "ku Shift_L"}},
				{"ctrl+shift click (key)", []string{`{"action":"left_click","coordinate":[5,6],"key":"ctrl+shift"}`},
					[]string{"mv " + pt(5, 6), "kd Control_L", "kd Shift_L", "bd 1 " + pt(5, 6), "bu 1 " + pt(5, 6), "ku Shift_L", "ku Control_L"}},
				{"mouse_move", []string{`{"action":"mouse_move","coordinate":[321,123]}`},
					[]string{"mv " + pt(321, 123)}},
				{"mouse down then up", []string{`{"action":"left_mouse_down","coordinate":[20,30]}`, `{"action":"left_mouse_up"}`},
					[]string{"mv " + pt(20, 30), "bd 1 " + pt(20, 30), "bu 1 " + pt(20, 30)}},
				{"left_click_drag", []string{`{"action":"left_click_drag","start_coordinate":[10,10],"coordinate":[110,60]}`}, drag()},
				{"scroll down at", []string{`{"action":"scroll","coordinate":[50,60],"scroll_direction":"down","scroll_amount":2}`},
					[]string{"mv " + pt(50, 60), "bd 5 " + pt(50, 60), "bu 5 " + pt(50, 60), "bd 5 " + pt(50, 60), "bu 5 " + pt(50, 60)}},
				{"scroll up default amount", []string{`{"action":"scroll","scroll_direction":"up"}`},
					[]string{"bd 4 " + park, "bu 4 " + park, "bd 4 " + park, "bu 4 " + park, "bd 4 " + park, "bu 4 " + park}},
				{"ctrl scroll left", []string{`{"action":"scroll","scroll_direction":"left","scroll_amount":1,"text":"ctrl"}`},
					[]string{"kd Control_L", "bd 6 " + park, "bu 6 " + park, "ku Control_L"}},
				{"scroll right", []string{`{"action":"scroll","scroll_direction":"right","scroll_amount":1}`},
					[]string{"bd 7 " + park, "bu 7 " + park}},
				// The reference's no-ops: it moves to coordinate, then clicks the
				// wheel zero times; it types nothing.
				{"scroll_amount 0 moves only", []string{`{"action":"scroll","coordinate":[50,60],"scroll_direction":"down","scroll_amount":0}`},
					[]string{"mv " + pt(50, 60)}},
				{"scroll_amount 0 in place", []string{`{"action":"scroll","scroll_direction":"down","scroll_amount":0}`}, nil},
				{"type nothing", []string{`{"action":"type","text":""}`}, nil},
				{"key ctrl+s", []string{`{"action":"key","text":"ctrl+s"}`},
					[]string{"kd Control_L", "kd s", "ku s", "ku Control_L"}},
				{"key two chords", []string{`{"action":"key","text":"ctrl+a BackSpace"}`},
					[]string{"kd Control_L", "kd a", "ku a", "ku Control_L", "kd BackSpace", "ku BackSpace"}},
				{"type", []string{`{"action":"type","text":"Hi!"}`},
					[]string{"kd Shift_L", "kd H", "ku H", "ku Shift_L", "kd i", "ku i", "kd Shift_L", "kd exclam", "ku exclam", "ku Shift_L"}},
				{"hold_key", []string{`{"action":"hold_key","text":"shift+a","duration":0.01}`},
					[]string{"kd Shift_L", "kd A", "ku A", "ku Shift_L"}},
				{"observers send nothing", []string{`{"action":"screenshot"}`, `{"action":"cursor_position"}`,
					`{"action":"zoom","region":[0,0,10,10]}`, `{"action":"wait","duration":0}`}, nil},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					v.park(t)
					for _, raw := range tt.actions {
						if _, err := v.e.Do(context.Background(), mustParse(t, raw), SourceAgent); err != nil {
							t.Fatalf("Do(%s): %v", raw, err)
						}
					}
					got := v.take(t)
					if !slices.Equal(got, tt.want) {
						t.Errorf("events\n got %q\nwant %q", got, tt.want)
					}
					if keys, buttons := v.e.Held(); len(keys)+len(buttons) > 0 {
						t.Errorf("still held after the action: keys %v buttons %v", keys, buttons)
					}
				})
			}
		})
	}
}

// TestScaledPoints pins a few model->screen points by hand, so the action test
// above does not rely only on ToScreen agreeing with itself.
func TestScaledPoints(t *testing.T) {
	s := Space{1920, 1200, 1280, 800}
	for _, c := range []struct{ mx, my, sx, sy int }{
		{0, 0, 0, 0}, {100, 200, 150, 300}, {1, 1, 2, 2}, {1279, 799, 1919, 1199}, {640, 400, 960, 600},
	} {
		if x, y := s.ToScreen(c.mx, c.my); x != c.sx || y != c.sy {
			t.Errorf("ToScreen(%d,%d) = %d,%d want %d,%d", c.mx, c.my, x, y, c.sx, c.sy)
		}
	}
}

// TestKeyNames presses each name with the key action and checks the keysyms
// the probe receives, in order (presses then releases in reverse).
func TestKeyNames(t *testing.T) {
	v := newEnv(t, 1280, 800, "off")
	tests := []struct {
		text string
		want []string // key presses as the probe resolves them
	}{
		{"Return", []string{"Return"}},
		{"enter", []string{"Return"}},
		{"KP_Enter", []string{"KP_Enter"}},
		{"Page_Down", []string{"Next"}},
		{"pgdn", []string{"Next"}},
		{"pagedown", []string{"Next"}},
		{"Page_Up", []string{"Prior"}},
		{"esc", []string{"Escape"}},
		{"Escape", []string{"Escape"}},
		{"Tab", []string{"Tab"}},
		{"space", []string{"space"}},
		{"BackSpace", []string{"BackSpace"}},
		{"del", []string{"Delete"}},
		{"Home", []string{"Home"}},
		{"End", []string{"End"}},
		{"Up", []string{"Up"}},
		{"left", []string{"Left"}},
		{"F1", []string{"F1"}},
		{"F5", []string{"F5"}},
		{"f12", []string{"F12"}},
		{"super", []string{"Super_L"}},
		{"cmd", []string{"Super_L"}},
		{"win", []string{"Super_L"}},
		{"ctrl", []string{"Control_L"}},
		{"alt", []string{"Alt_L"}},
		{"shift", []string{"Shift_L"}},
		{"Control_R", []string{"Control_R"}},
		{"ctrl+s", []string{"Control_L", "s"}},
		{"ctrl+shift+t", []string{"Control_L", "Shift_L", "T"}},
		{"alt+Tab", []string{"Alt_L", "Tab"}},
		{"alt+F4", []string{"Alt_L", "F4"}},
		{"super+Return", []string{"Super_L", "Return"}},
		{"ctrl+A", []string{"Control_L", "Shift_L", "A"}},
		{"ctrl++", []string{"Control_L", "Shift_L", "plus"}},
		{"ctrl+minus", []string{"Control_L", "minus"}},
		{"a", []string{"a"}},
		{"A", []string{"Shift_L", "A"}},
		{"1", []string{"1"}},
		{"at", []string{"Shift_L", "at"}},
		{"Insert", []string{"Insert"}},
		{"Print", []string{"Print"}},
		{"Menu", []string{"Menu"}},
		{"XF86AudioMute", []string{"XF86AudioMute"}},
		{"KP_5", []string{"Shift_L", "KP_5"}}, // the keypad layer is the shifted level
		{"Caps_Lock", []string{"Caps_Lock"}},
		{"eacute", []string{"eacute"}},
		{"EuroSign", []string{"EuroSign"}},
		{"ctrl+é", []string{"Control_L", "eacute"}},
		{"U+65E5", []string{"U65E5"}},
		{"Meta_L", []string{"Shift_L", "Meta_L"}},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			v.take(t)
			if _, err := v.e.Do(context.Background(), Action{Action: "key", Text: tt.text}, SourceAgent); err != nil {
				t.Fatal(err)
			}
			got := v.take(t)
			want := make([]string, 0, 2*len(tt.want))
			for _, k := range tt.want {
				want = append(want, "kd "+k)
			}
			for i := len(tt.want) - 1; i >= 0; i-- {
				want = append(want, "ku "+tt.want[i])
			}
			if !slices.Equal(got, want) {
				t.Errorf("key %q:\n got %q\nwant %q", tt.text, got, want)
			}
		})
	}
}

// TestBadInputSendsNothing: an action that fails validation or names an
// unknown key reaches X not at all.
func TestBadInputSendsNothing(t *testing.T) {
	v := newEnv(t, 1280, 800, "off")
	v.park(t)
	tests := []struct{ raw, err string }{
		{`{"action":"key","text":"ctrl+Retrun"}`, `unknown key name "Retrun"; did you mean Return?`},
		{`{"action":"key","text":"a b Nope"}`, `unknown key name "Nope"`},
		{`{"action":"hold_key","text":"shift+bogus","duration":1}`, `unknown key name "bogus"`},
		{`{"action":"left_click","coordinate":[5,5],"text":"shfit"}`, `unknown key name "shfit"`},
		{`{"action":"left_click","coordinate":[1280,5]}`, "outside the 1280x800 screenshot"},
		{`{"action":"mouse_move"}`, "mouse_move requires coordinate"},
		{`{"action":"type","text":"ok\u0000"}`, "control character U+0000"},
		{`{"action":"scroll","scroll_direction":"diagonal"}`, "scroll_direction must be one of"},
	}
	for _, tt := range tests {
		_, err := v.e.Do(context.Background(), mustParse(t, tt.raw), SourceAgent)
		if err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("Do(%s) error = %v, want one containing %q", tt.raw, err, tt.err)
		}
		if got := v.take(t); len(got) > 0 {
			t.Errorf("Do(%s) failed but sent %q", tt.raw, got)
		}
	}
}

func pressedSyms(events []string) []string {
	var out []string
	for _, e := range events {
		if k, ok := strings.CutPrefix(e, "kd "); ok && k != "Shift_L" {
			out = append(out, k)
		}
	}
	return out
}

func wantSyms(text string) []string {
	var out []string
	for _, r := range strings.ReplaceAll(text, "\r\n", "\n") {
		out = append(out, KeysymForRune(r).String())
	}
	return out
}

// TestTypeUnicode types text the US layout lacks (spare keycodes are bound on
// the fly) and checks every keysym arrives, in order.
func TestTypeUnicode(t *testing.T) {
	v := newEnv(t, 1280, 800, "off")
	// More distinct characters the layout lacks than there are spare
	// keycodes, so spares are reused.
	var many strings.Builder
	for r := rune(0x4e00); r < 0x4e00+60; r++ {
		many.WriteRune(r)
	}
	tests := []struct{ name, text string }{
		{"ascii", "The quick brown fox jumps over the lazy dog 0123456789 ~!@#$%^&*()_+{}|:\"<>?`-=[]\\;',./"},
		{"latin1", "héllo wörld, ça va? ÀÉÎõü ñ ß ¿¡ £ © ½"},
		{"euro and more", "€ Œ œ Ł ł – — “quoted” … •"},
		{"cjk", "日本語のテキスト 中文 한국어"},
		{"emoji", "😀 👍 🎉"},
		{"greek and cyrillic", "αβγ ΔΣΩ жизнь Привет"},
		{"newline and tab", "a\nb\tc\r\nd\re"},
		{"spares reused", many.String()},
		{"repeat after reuse", "日本語 é € 😀"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v.take(t)
			if _, err := v.e.Do(context.Background(), Action{Action: "type", Text: tt.text}, SourceAgent); err != nil {
				t.Fatal(err)
			}
			got := pressedSyms(v.take(t))
			want := wantSyms(tt.text)
			if !slices.Equal(got, want) {
				t.Errorf("typed %q\n got %q\nwant %q", tt.text, got, want)
			}
			if keys, _ := v.e.Held(); len(keys) > 0 {
				t.Errorf("keys still held: %v", keys)
			}
		})
	}
	if n := v.e.KeymapChanges(); n < 60 {
		t.Errorf("only %d keycode bindings for text needing well over 60", n)
	}

	// Text whose missing characters fit in the spare keycodes binds each once:
	// typing it again changes no mapping.
	few := "ÀÉÎ € ж 日本 😀 ½ ß"
	for i := 0; i < 2; i++ {
		before := v.e.KeymapChanges()
		if _, err := v.e.Do(context.Background(), Action{Action: "type", Text: few}, SourceAgent); err != nil {
			t.Fatal(err)
		}
		if got := pressedSyms(v.take(t)); !slices.Equal(got, wantSyms(few)) {
			t.Errorf("typed %q: got %q", few, got)
		}
		if i == 1 && v.e.KeymapChanges() != before {
			t.Errorf("typing %q again made %d more keycode bindings, want 0", few, v.e.KeymapChanges()-before)
		}
	}
}

// TestCursorPosition reports the pointer in model space, in the reference's
// "X=..,Y=.." format.
func TestCursorPosition(t *testing.T) {
	v := newEnv(t, 1920, 1200, "auto")
	ctx := context.Background()
	tests := []struct {
		sx, sy int
		want   string
	}{
		{300, 450, "X=200,Y=300"},
		{0, 0, "X=0,Y=0"},
		{1919, 1199, "X=1279,Y=799"},
		{150, 300, "X=100,Y=200"},
		{151, 301, "X=101,Y=201"}, // 151.5 is the edge between model pixels 100 and 101
	}
	for _, tt := range tests {
		if err := v.e.MoveTo(ctx, tt.sx, tt.sy, SourceHuman); err != nil {
			t.Fatal(err)
		}
		res, err := v.e.Do(ctx, Action{Action: "cursor_position"}, SourceAgent)
		if err != nil {
			t.Fatal(err)
		}
		if res.Text != tt.want || res.Screenshot || res.Settle {
			t.Errorf("cursor at screen %d,%d: %+v, want text %q and no screenshot", tt.sx, tt.sy, res, tt.want)
		}
		if x, y, err := v.e.CursorPosition(ctx); err != nil || x != tt.sx || y != tt.sy {
			t.Errorf("CursorPosition = %d,%d,%v want %d,%d", x, y, err, tt.sx, tt.sy)
		}
	}
}

func TestResults(t *testing.T) {
	v := newEnv(t, 1920, 1200, "auto")
	ctx := context.Background()
	tests := []struct {
		raw                string
		screenshot, settle bool
		zoom               string
	}{
		{`{"action":"screenshot"}`, true, false, ""},
		{`{"action":"wait","duration":0.01}`, true, false, ""},
		{`{"action":"zoom","region":[100,50,200,150]}`, false, false, "(150,75)-(300,225)"},
		{`{"action":"mouse_move","coordinate":[1,1]}`, true, true, ""},
		{`{"action":"key","text":"Escape"}`, true, true, ""},
	}
	for _, tt := range tests {
		res, err := v.e.Do(ctx, mustParse(t, tt.raw), SourceAgent)
		if err != nil {
			t.Fatalf("Do(%s): %v", tt.raw, err)
		}
		zoom := ""
		if res.Zoom != nil {
			zoom = res.Zoom.String()
		}
		if res.Screenshot != tt.screenshot || res.Settle != tt.settle || zoom != tt.zoom {
			t.Errorf("Do(%s) = %+v (zoom %s), want screenshot %v settle %v zoom %q", tt.raw, res, zoom, tt.screenshot, tt.settle, tt.zoom)
		}
	}
}

// TestContextCancel: wait and hold_key end with ctx, and hold_key still
// releases its keys.
func TestContextCancel(t *testing.T) {
	v := newEnv(t, 1280, 800, "off")
	tests := []struct {
		raw  string
		want []string
	}{
		{`{"action":"wait","duration":60}`, nil},
		{`{"action":"hold_key","text":"ctrl+shift","duration":60}`, []string{"kd Control_L", "kd Shift_L", "ku Shift_L", "ku Control_L"}},
	}
	for _, tt := range tests {
		v.take(t)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		_, err := v.e.Do(ctx, mustParse(t, tt.raw), SourceAgent)
		cancel()
		if err == nil || !strings.Contains(err.Error(), "deadline exceeded") {
			t.Errorf("Do(%s) with a 50ms context: error %v, want deadline exceeded", tt.raw, err)
		}
		if got := v.take(t); !slices.Equal(got, tt.want) {
			t.Errorf("Do(%s) events %q, want %q", tt.raw, got, tt.want)
		}
		if keys, buttons := v.e.Held(); len(keys)+len(buttons) > 0 {
			t.Errorf("held after cancel: %v %v", keys, buttons)
		}
	}
}

// TestPrimitives drives the people's primitives and checks events, held
// state and release by source.
func TestPrimitives(t *testing.T) {
	v := newEnv(t, 1280, 800, "off")
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	v.park(t)
	must(v.e.MoveTo(ctx, 100, 200, SourceHuman))
	must(v.e.ButtonDown(ctx, 1, SourceHuman))
	must(v.e.MoveTo(ctx, 110, 210, SourceHuman))
	must(v.e.ButtonUp(ctx, 1, SourceHuman))
	must(v.e.Wheel(ctx, 0, 2, SourceHuman))
	must(v.e.Wheel(ctx, -1, -1, SourceHuman))
	got := v.take(t)
	want := []string{"mv 100,200", "bd 1 100,200", "mv 110,210", "bu 1 110,210",
		"bd 5 110,210", "bu 5 110,210", "bd 5 110,210", "bu 5 110,210",
		"bd 4 110,210", "bu 4 110,210", "bd 6 110,210", "bu 6 110,210"}
	if !slices.Equal(got, want) {
		t.Errorf("pointer events\n got %q\nwant %q", got, want)
	}

	// Keys as a person types them: Shift held, then '@' and 'a' as the browser
	// reports them; Tab under Shift stays the key it is.
	must(v.e.KeyDown(ctx, KeysymShiftL, SourceHuman))
	must(v.e.KeyDown(ctx, '@', SourceHuman))
	must(v.e.KeyUp(ctx, '@', SourceHuman))
	must(v.e.KeyDown(ctx, 'a', SourceHuman)) // Caps Lock on the person's side: lower case under Shift
	must(v.e.KeyUp(ctx, 'a', SourceHuman))
	must(v.e.KeyDown(ctx, 'A', SourceHuman))
	must(v.e.KeyUp(ctx, 'a', SourceHuman)) // released under the other case
	must(v.e.KeyDown(ctx, KeysymTab, SourceHuman))
	must(v.e.KeyUp(ctx, KeysymTab, SourceHuman))
	must(v.e.KeyUp(ctx, KeysymShiftL, SourceHuman))
	// Without Shift: '@' needs a key that gives it unshifted.
	must(v.e.KeyDown(ctx, '@', SourceHuman))
	must(v.e.KeyUp(ctx, '@', SourceHuman))
	got = v.take(t)
	want = []string{"kd Shift_L", "kd at", "ku at", "kd a", "ku a", "kd A", "ku A", "kd ISO_Left_Tab", "ku ISO_Left_Tab", "ku Shift_L", "kd at", "ku at"}
	if !slices.Equal(got, want) {
		t.Errorf("key events\n got %q\nwant %q", got, want)
	}

	// Held state by source.
	must(v.e.KeyDown(ctx, KeysymControlL, SourceHuman))
	must(v.e.KeyDown(ctx, 'x', "viewer-2"))
	must(v.e.ButtonDown(ctx, 3, SourceHuman))
	keys, buttons := v.e.Held()
	if !slices.Equal(keys, []Keysym{'x', KeysymControlL}) || !slices.Equal(buttons, []int{3}) {
		t.Errorf("Held() = %v %v, want [x Control_L] [3]", keys, buttons)
	}
	must(v.e.ReleaseHeldBy(ctx, SourceHuman))
	keys, buttons = v.e.Held()
	if !slices.Equal(keys, []Keysym{'x'}) || len(buttons) != 0 {
		t.Errorf("after ReleaseHeldBy(human): %v %v, want [x] []", keys, buttons)
	}
	must(v.e.ReleaseAll(ctx, SourceScript))
	if keys, buttons := v.e.Held(); len(keys)+len(buttons) > 0 {
		t.Errorf("after ReleaseAll: %v %v", keys, buttons)
	}
	got = v.take(t)
	if !slices.Contains(got, "ku Control_L") || !slices.Contains(got, "ku x") || !slices.Contains(got, "bu 3 110,210") {
		t.Errorf("releases not delivered: %q", got)
	}

	// A key two sources hold stays down until both let go.
	must(v.e.KeyDown(ctx, KeysymShiftL, SourceHuman))
	must(doJSON(ctx, v.e, `{"action":"key","text":"shift+b"}`))
	must(v.e.KeyUp(ctx, KeysymShiftL, SourceHuman))
	got = v.take(t)
	want = []string{"kd Shift_L", "kd B", "ku B", "ku Shift_L"}
	if !slices.Equal(got, want) {
		t.Errorf("shared shift\n got %q\nwant %q", got, want)
	}

	// Bad arguments.
	for _, err := range []error{
		v.e.MoveTo(ctx, 1280, 0, SourceHuman),
		v.e.MoveTo(ctx, -1, 0, SourceHuman),
		v.e.ButtonDown(ctx, 0, SourceHuman),
		v.e.ButtonDown(ctx, 10, SourceHuman),
		v.e.Wheel(ctx, 0, 1000, SourceHuman),
		v.e.KeyDown(ctx, 0, SourceHuman),
		v.e.KeyDown(ctx, 'a', ""),
	} {
		if err == nil {
			t.Error("bad primitive accepted")
		}
	}
	if got := v.take(t); len(got) > 0 {
		t.Errorf("bad primitives sent %q", got)
	}
}

// doJSON runs a JSON action as the agent.
func doJSON(ctx context.Context, e *Executor, raw string) error {
	a, err := ParseAction([]byte(raw))
	if err != nil {
		return err
	}
	_, err = e.Do(ctx, a, SourceAgent)
	return err
}

func TestGate(t *testing.T) {
	v := newEnv(t, 1280, 800, "off")
	ctx := context.Background()
	if err := v.e.KeyDown(ctx, KeysymShiftL, SourceHuman); err != nil {
		t.Fatal(err)
	}
	ungate := v.e.AddGate(func(src Source, what string) error {
		if src == SourceHuman {
			return fmt.Errorf("the agent has control")
		}
		return nil
	})
	bus, stop := v.e.Bus().Subscribe(16)
	defer stop()
	if err := v.e.KeyDown(ctx, 'q', SourceHuman); err == nil || !strings.Contains(err.Error(), "key_down from human refused: the agent has control") {
		t.Errorf("gated KeyDown: %v", err)
	}
	if _, err := v.e.Do(ctx, Action{Action: "left_click"}, SourceHuman); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("gated Do: %v", err)
	}
	// Letting go of what it holds is always allowed.
	if err := v.e.KeyUp(ctx, KeysymShiftL, SourceHuman); err != nil {
		t.Errorf("KeyUp of a held key was gated: %v", err)
	}
	if err := doJSON(ctx, v.e, `{"action":"key","text":"z"}`); err != nil {
		t.Errorf("agent gated: %v", err)
	}
	got := v.take(t)
	want := []string{"kd Shift_L", "ku Shift_L", "kd z", "ku z"}
	if !slices.Equal(got, want) {
		t.Errorf("events\n got %q\nwant %q", got, want)
	}
	var kinds []string
	for len(bus) > 0 {
		ev := <-bus
		kinds = append(kinds, fmt.Sprintf("%s/%s", ev.Kind, ev.Source))
	}
	if !slices.Equal(kinds, []string{"input/human", "action/agent"}) {
		t.Errorf("published %v, want the key_up and the agent's key only", kinds)
	}
	// A second gate: every gate must allow a call.
	ungateReplay := v.e.AddGate(func(src Source, what string) error {
		if src == SourceReplay {
			return fmt.Errorf("no replays now")
		}
		return nil
	})
	if err := v.e.MoveTo(ctx, 1, 1, SourceReplay); err == nil || !strings.Contains(err.Error(), "no replays now") {
		t.Errorf("second gate: %v", err)
	}
	ungateReplay()
	if err := v.e.MoveTo(ctx, 1, 1, SourceReplay); err != nil {
		t.Errorf("second gate removed but still refused: %v", err)
	}

	ungate()
	if err := v.e.KeyDown(ctx, 'q', SourceHuman); err != nil {
		t.Errorf("gate removed but still refused: %v", err)
	}
}

func TestBusEvents(t *testing.T) {
	v := newEnv(t, 1920, 1200, "auto")
	ctx := context.Background()
	ch, stop := v.e.Bus().Subscribe(64)
	if err := doJSON(ctx, v.e, `{"action":"left_click","coordinate":[100,200]}`); err != nil {
		t.Fatal(err)
	}
	if err := v.e.MoveTo(ctx, 5, 6, SourceHuman); err != nil {
		t.Fatal(err)
	}
	if err := v.e.KeyDown(ctx, 'k', SourceHuman); err != nil {
		t.Fatal(err)
	}
	if err := v.e.ButtonDown(ctx, 2, SourceHuman); err != nil {
		t.Fatal(err)
	}
	v.e.ReleaseAll(ctx, SourceScript)
	doJSON(ctx, v.e, `{"action":"left_click","coordinate":[5000,1]}`)
	stop()
	var got []string
	var last uint64
	for ev := range ch {
		if ev.Seq <= last {
			t.Errorf("seq %d after %d", ev.Seq, last)
		}
		last = ev.Seq
		if ev.Time.IsZero() || ev.Mono <= 0 {
			t.Errorf("event %d has no time: %+v", ev.Seq, ev)
		}
		switch ev.Kind {
		case KindAction:
			got = append(got, fmt.Sprintf("action %s %s err=%v", ev.Source, ev.Action.Action, ev.Err != ""))
		case KindInput:
			in := ev.Input
			got = append(got, fmt.Sprintf("input %s %s k=%s b=%d at %d,%d", ev.Source, in.Type, in.Keysym, in.Button, in.X, in.Y))
		}
	}
	want := []string{
		"action agent left_click err=false",
		"input human motion k=0x0 b=0 at 5,6",
		"input human key_down k=k b=0 at 5,6",
		"input human button_down k=0x0 b=2 at 5,6",
	}
	if len(got) != 7 || !slices.Equal(got[:4], want) || got[6] != "action agent left_click err=true" {
		t.Errorf("bus events:\n%s", strings.Join(got, "\n"))
	}
	// The two releases, in either order.
	rel := []string{got[4], got[5]}
	slices.Sort(rel)
	if !slices.Equal(rel, []string{"input script button_up k=0x0 b=2 at 5,6", "input script key_up k=k b=0 at 5,6"}) {
		t.Errorf("releases published as %q", rel)
	}
}

func TestBusDropsForSlowSubscriber(t *testing.T) {
	b := newBus()
	slow, stopSlow := b.Subscribe(2)
	fast, stopFast := b.Subscribe(100)
	for i := 0; i < 10; i++ {
		b.publish(Event{Kind: KindInput})
	}
	if n := len(slow); n != 2 {
		t.Errorf("slow subscriber holds %d events, want 2", n)
	}
	if n := len(fast); n != 10 {
		t.Errorf("fast subscriber holds %d events, want 10", n)
	}
	if d := b.Dropped(); d != 8 {
		t.Errorf("Dropped() = %d, want 8", d)
	}
	stopSlow()
	stopSlow() // twice is fine
	b.close()
	stopFast()
	n := 0
	for range fast {
		n++
	}
	if n != 10 {
		t.Errorf("drained %d from the fast subscriber after close, want 10", n)
	}
	if ch, _ := b.Subscribe(1); func() bool { _, ok := <-ch; return ok }() {
		t.Error("subscription after close is open")
	}
}

// TestForeignKeymapChange: another client rewrites the key for 'a'; the
// executor notices (MappingNotify) and still types 'a'.
func TestForeignKeymapChange(t *testing.T) {
	v := newEnv(t, 1280, 800, "off")
	ctx := context.Background()
	c, err := v.d.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	setup := xproto.Setup(c)
	km, err := xproto.GetKeyboardMapping(c, setup.MinKeycode, byte(int(setup.MaxKeycode)-int(setup.MinKeycode)+1)).Reply()
	if err != nil {
		t.Fatal(err)
	}
	per := int(km.KeysymsPerKeycode)
	var code xproto.Keycode
	for i := 0; i*per < len(km.Keysyms); i++ {
		if km.Keysyms[i*per] == 'a' {
			code = xproto.Keycode(int(setup.MinKeycode) + i)
		}
	}
	if code == 0 {
		t.Fatal("no key for 'a' in the default layout")
	}
	if err := doJSON(ctx, v.e, `{"action":"type","text":"a"}`); err != nil {
		t.Fatal(err)
	}
	if err := xproto.ChangeKeyboardMappingChecked(c, 1, code, 2, []xproto.Keysym{'q', 'Q'}).Check(); err != nil {
		t.Fatal(err)
	}
	defer xproto.ChangeKeyboardMapping(c, 1, code, 2, []xproto.Keysym{'a', 'A'})
	// One round trip on the executor's connection: the MappingNotify the
	// server sent before it is then queued there.
	if _, _, err := v.e.CursorPosition(ctx); err != nil {
		t.Fatal(err)
	}
	v.take(t)
	if err := doJSON(ctx, v.e, `{"action":"type","text":"aq"}`); err != nil {
		t.Fatal(err)
	}
	if got := pressedSyms(v.take(t)); !slices.Equal(got, []string{"a", "q"}) {
		t.Errorf("after a foreign remap typed %q, want [a q]", got)
	}
}

// TestServerRestart: after Xvfb dies and the display brings it back, the
// executor reconnects on its own.
func TestServerRestart(t *testing.T) {
	testrig.NeedTools(t)
	ctx := context.Background()
	d := testrig.Display(t, display.Config{Width: 640, Height: 480, RestartOnCrash: true})
	e, err := NewExecutor(d, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.KeyDown(ctx, KeysymShiftL, SourceHuman); err != nil {
		t.Fatal(err)
	}
	gen := d.Generation()
	syscall.Kill(d.ServerPID(), syscall.SIGKILL)
	testrig.WaitWithin(t, 20*time.Second, "the display to come back", func() bool {
		return d.Generation() != gen && d.Health(ctx) == nil
	})
	p := testrig.Probe(t, d, xprobe.Options{})
	if err := doJSON(ctx, e, `{"action":"left_click","coordinate":[10,20]}`); err != nil {
		t.Fatalf("after restart: %v", err)
	}
	if err := p.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	got := format(p.Take())
	want := []string{"mv 10,20", "bd 1 10,20", "bu 1 10,20"}
	if !slices.Equal(got, want) {
		t.Errorf("after restart: %q, want %q", got, want)
	}
	if keys, _ := e.Held(); len(keys) > 0 {
		t.Errorf("keys from the dead server still count as held: %v", keys)
	}
}

func TestCloseReleases(t *testing.T) {
	v := newEnv(t, 1280, 800, "off")
	ctx := context.Background()
	v.take(t)
	if err := v.e.KeyDown(ctx, KeysymControlL, SourceHuman); err != nil {
		t.Fatal(err)
	}
	if err := doJSON(ctx, v.e, `{"action":"left_mouse_down"}`); err != nil {
		t.Fatal(err)
	}
	if err := v.e.Close(); err != nil {
		t.Fatal(err)
	}
	got := v.take(t)
	if !slices.Contains(got, "ku Control_L") || !slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, "bu 1") }) {
		t.Errorf("Close did not release: %q", got)
	}
	if err := doJSON(ctx, v.e, `{"action":"left_click"}`); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Do after Close: %v", err)
	}
}
