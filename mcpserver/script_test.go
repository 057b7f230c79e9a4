package mcpserver

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/internal/xprobe"
)

// TestScriptSameAsTools: a script that clicks, types and reads the screen
// size makes X deliver the same events as the equivalent tool calls, and is
// published on the hci bus as a script.
func TestScriptSameAsTools(t *testing.T) {
	r := newRig(t, rigConfig{w: 1280, h: 800, model: "auto", modes: []Mode{ModeTools, ModeCodeAct}})
	c := r.connect(t, "http")
	ctx := t.Context()
	strip := func(ev []xprobe.Event) []string {
		var out []string
		for _, e := range ev {
			// The pointer is already there the second time, so motions
			// differ by design; presses and releases must not.
			if e.Kind != xprobe.Motion {
				out = append(out, e.String())
			}
		}
		return out
	}
	if err := r.probe.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	r.probe.Take()
	for _, cl := range []struct {
		tool string
		args map[string]any
	}{
		{"left_click", map[string]any{"coordinate": []int{100, 120}, "screenshot": false}},
		{"type", map[string]any{"text": "hi", "screenshot": false}},
	} {
		if res := call(t, c, cl.tool, cl.args); res.IsError {
			t.Fatalf("%s: %s", cl.tool, resultText(res))
		}
	}
	if err := r.probe.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	viaTools := strip(r.probe.Take())
	if len(viaTools) < 6 { // a press and release of the button, and of h and i
		t.Fatalf("the tool calls produced only %v", viaTools)
	}

	evs, stop := r.exec.Bus().Subscribe(64)
	defer stop()
	res := call(t, c, "run_script", map[string]any{"script": "left_click(100, 120)\ntype('hi')\nw, h = screen_size()\nprint(w, h)\n"})
	if res.IsError {
		t.Fatalf("run_script: %s", resultText(res))
	}
	if err := r.probe.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	viaScript := strip(r.probe.Take())
	if strings.Join(viaTools, "\n") != strings.Join(viaScript, "\n") {
		t.Errorf("events differ\ntools:\n%s\nscript:\n%s", strings.Join(viaTools, "\n"), strings.Join(viaScript, "\n"))
	}
	if want := "1280 800"; !strings.Contains(resultText(res), want) {
		t.Errorf("output %q, want %q", resultText(res), want)
	}
	var sources []string
	for len(sources) < 2 {
		select {
		case ev := <-evs:
			if ev.Kind == hci.KindAction {
				sources = append(sources, string(ev.Source)+" "+ev.Action.Action)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("published only %v", sources)
		}
	}
	if want := "script left_click,script type"; strings.Join(sources, ",") != want {
		t.Errorf("published %v, want %s", sources, want)
	}
}

// TestScriptErrors: each failure is a tool error naming the cause, keeps the
// output printed before it, and the server keeps serving.
func TestScriptErrors(t *testing.T) {
	r := newRig(t, rigConfig{w: 1280, h: 800, model: "auto", modes: []Mode{ModeCodeAct}, noProbe: true})
	r.srv.cfg.Script = ScriptLimits{MaxSteps: 100000, MaxOutputBytes: 1000, Timeout: 20 * time.Second}
	c := r.connect(t, "http")
	tests := []struct {
		name, script string
		want         []string
	}{
		{"syntax", "print('a')\nx = (\n", []string{"script:3", "stopped"}},
		{"endless loop", "print('before')\nwhile True:\n  pass\n", []string{"100000 Starlark steps", "before"}},
		{"load", "load('x.star', 'y')\n", []string{"load is not available"}},
		{"huge output", "print('first')\nfor i in range(100000):\n  print('x' * 100)\n", []string{"more than 1000 bytes", "first"}},
		{"tool error", "print('clicked')\nleft_click(1, 2)\nleft_click(99999, 0)\nprint('never')\n", []string{"left_click", "clicked"}},
		{"missing arg", "print('p')\nleft_click(1)\n", []string{"missing y", "p"}},
		{"huge script", strings.Repeat("x = 1\n", 50000), []string{"the script is 300000 bytes, more than 262144"}},
		{"wall time", "print('w')\nwait(5)\nwait(5)\nwait(5)\nwait(5)\nwait(5)\n", []string{"wall time", "w"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "wall time" {
				r.srv.cfg.Script.Timeout = 2 * time.Second
				defer func() { r.srv.cfg.Script.Timeout = 20 * time.Second }()
			}
			res := call(t, c, "run_script", map[string]any{"script": tc.script})
			txt := resultText(res)
			if !res.IsError {
				t.Fatalf("not an error: %s", txt)
			}
			for _, w := range tc.want {
				if !strings.Contains(txt, w) {
					t.Errorf("error %q does not mention %q", txt, w)
				}
			}
			if strings.Contains(txt, "never") {
				t.Errorf("script went on after the error: %s", txt)
			}
			// The server is still up.
			if res := call(t, c, "run_script", map[string]any{"script": "print(cursor_position())"}); res.IsError {
				t.Fatalf("server broken after %s: %s", tc.name, resultText(res))
			}
		})
	}
}

// TestScriptImages: screenshot and zoom return images that show attaches.
func TestScriptImages(t *testing.T) {
	r := newRig(t, rigConfig{w: 1280, h: 800, model: "auto", modes: []Mode{ModeCodeAct}, noProbe: true})
	c := r.connect(t, "http")
	res := call(t, c, "run_script", map[string]any{"script": "s = screenshot()\nprint(s.width, s.height)\nshow(s)\nshow(zoom(0, 0, 10, 20))\n"})
	if res.IsError {
		t.Fatal(resultText(res))
	}
	got := resultImages(t, res)
	if len(got) != 2 || got[0] != [2]int{r.space.ModelW, r.space.ModelH} {
		t.Errorf("images %v, want the screenshot then the zoom", got)
	}
}

// TestScriptSignatures: the bound functions take their arguments by
// position and by name, with the names the description shows.
func TestScriptSignatures(t *testing.T) {
	r := newRig(t, rigConfig{w: 1280, h: 800, model: "auto", modes: []Mode{ModeCodeAct}})
	c := r.connect(t, "http")
	tests := []struct {
		script string
		want   []string // probe events, in order, presses only
	}{
		{"left_click(100, 120, modifiers='shift')", []string{"key 0xffe1", "button 1 @100,120"}}, // Shift_L
		{"left_click(x=200, y=220)", []string{"button 1 @200,220"}},
		{"mouse_move(300, 320)\nscroll(direction='down', amount=2)", []string{"button 5 @300,320", "button 5 @300,320"}},
		{"key(keys='ctrl+a')", []string{"key 0xffe3", "key 0x61"}}, // Control_L, a
	}
	for _, tc := range tests {
		t.Run(tc.script, func(t *testing.T) {
			if err := r.probe.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			r.probe.Take()
			res := call(t, c, "run_script", map[string]any{"script": tc.script})
			if res.IsError {
				t.Fatal(resultText(res))
			}
			if err := r.probe.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range r.probe.Take() {
				switch e.Kind {
				case xprobe.KeyPress:
					got = append(got, fmt.Sprintf("key %#x", e.Keysym))
				case xprobe.ButtonPress:
					got = append(got, fmt.Sprintf("button %d @%d,%d", e.Button, e.X, e.Y))
				}
			}
			if strings.Join(got, "; ") != strings.Join(tc.want, "; ") {
				t.Errorf("events %q, want %q", got, tc.want)
			}
		})
	}
}
