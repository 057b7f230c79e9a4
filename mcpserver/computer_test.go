package mcpserver

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/internal/xprobe"
)

const (
	shiftMask   = 1
	controlMask = 4
	keyShiftL   = 0xffe1
	keyControlL = 0xffe3
)

// events is what the probe saw for one call, with helpers to find things.
type events []xprobe.Event

func (ev events) count(match func(xprobe.Event) bool) int {
	n := 0
	for _, e := range ev {
		if match(e) {
			n++
		}
	}
	return n
}

func (ev events) first(match func(xprobe.Event) bool) (xprobe.Event, bool) {
	for _, e := range ev {
		if match(e) {
			return e, true
		}
	}
	return xprobe.Event{}, false
}

func button(kind xprobe.Kind, b byte) func(xprobe.Event) bool {
	return func(e xprobe.Event) bool { return e.Kind == kind && e.Button == b }
}

func key(kind xprobe.Kind, sym uint32) func(xprobe.Event) bool {
	return func(e xprobe.Event) bool { return e.Kind == kind && e.Keysym == sym }
}

// actionCase is one call and what must come of it.
type actionCase struct {
	name   string
	tool   string         // "computer" or a granular tool
	args   map[string]any //
	images [][2]int       // sizes of the images in the result, in order
	text   string         // the result text must contain this
	check  func(t *testing.T, r *rig, ev events)
}

// at checks that exactly one press and one release of button b happened at
// the screen pixel under model pixel (x, y).
func at(b byte, presses int, x, y int) func(t *testing.T, r *rig, ev events) {
	return func(t *testing.T, r *rig, ev events) {
		t.Helper()
		sx, sy := r.space.ToScreen(x, y)
		if n := ev.count(button(xprobe.ButtonPress, b)); n != presses {
			t.Errorf("%d presses of button %d, want %d: %v", n, b, presses, ev)
		}
		if n := ev.count(button(xprobe.ButtonRelease, b)); n != presses {
			t.Errorf("%d releases of button %d, want %d: %v", n, b, presses, ev)
		}
		if e, ok := ev.first(button(xprobe.ButtonPress, b)); ok && (e.X != sx || e.Y != sy) {
			t.Errorf("button %d pressed at screen %d,%d, want %d,%d (model %d,%d)", b, e.X, e.Y, sx, sy, x, y)
		}
	}
}

func actionCases(model, zoom [2]int) []actionCase {
	full := [][2]int{model}
	return []actionCase{
		{name: "screenshot", tool: "computer", args: map[string]any{"action": "screenshot"}, images: full,
			check: func(t *testing.T, r *rig, ev events) {
				if n := ev.count(func(e xprobe.Event) bool { return e.Kind != xprobe.Motion }); n != 0 {
					t.Errorf("screenshot sent input: %v", ev)
				}
			}},
		{name: "left_click scaled", tool: "computer", args: map[string]any{"action": "left_click", "coordinate": []int{641, 399}}, images: full,
			check: at(1, 1, 641, 399)},
		{name: "left_click corner", tool: "computer", args: map[string]any{"action": "left_click", "coordinate": []int{model[0] - 1, model[1] - 1}}, images: full,
			check: at(1, 1, model[0]-1, model[1]-1)},
		{name: "right_click", tool: "computer", args: map[string]any{"action": "right_click", "coordinate": []int{10, 20}}, images: full,
			check: at(3, 1, 10, 20)},
		{name: "middle_click", tool: "computer", args: map[string]any{"action": "middle_click", "coordinate": []int{30, 40}}, images: full,
			check: at(2, 1, 30, 40)},
		{name: "double_click", tool: "computer", args: map[string]any{"action": "double_click", "coordinate": []int{300, 200}}, images: full,
			check: at(1, 2, 300, 200)},
		{name: "triple_click", tool: "computer", args: map[string]any{"action": "triple_click", "coordinate": []int{300, 201}}, images: full,
			check: at(1, 3, 300, 201)},
		{name: "shift+click", tool: "computer", args: map[string]any{"action": "left_click", "coordinate": []int{50, 60}, "text": "shift"}, images: full,
			check: func(t *testing.T, r *rig, ev events) {
				at(1, 1, 50, 60)(t, r, ev)
				if e, ok := ev.first(button(xprobe.ButtonPress, 1)); !ok || e.State&shiftMask == 0 {
					t.Errorf("click without shift held: %v", ev)
				}
				if ev.count(key(xprobe.KeyRelease, keyShiftL)) != 1 {
					t.Errorf("shift not released after the click: %v", ev)
				}
			}},
		{name: "mouse_move", tool: "computer", args: map[string]any{"action": "mouse_move", "coordinate": []int{123, 456}}, images: full,
			check: func(t *testing.T, r *rig, ev events) {
				sx, sy := r.space.ToScreen(123, 456)
				if _, ok := ev.first(func(e xprobe.Event) bool { return e.Kind == xprobe.Motion && e.X == sx && e.Y == sy }); !ok {
					t.Errorf("no motion to %d,%d: %v", sx, sy, ev)
				}
			}},
		{name: "cursor_position", tool: "computer", args: map[string]any{"action": "cursor_position"}, text: "X=123,Y=456",
			check: func(t *testing.T, r *rig, ev events) {
				if len(ev) != 0 {
					t.Errorf("cursor_position sent input: %v", ev)
				}
			}},
		{name: "type", tool: "computer", args: map[string]any{"action": "type", "text": "hi!"}, images: full,
			check: func(t *testing.T, r *rig, ev events) {
				var got []rune
				for _, e := range ev {
					if e.Kind == xprobe.KeyPress && e.Keysym < 0x100 {
						got = append(got, rune(e.Keysym))
					}
				}
				if string(got) != "hi!" {
					t.Errorf("typed %q, want %q: %v", string(got), "hi!", ev)
				}
			}},
		{name: "key ctrl+a", tool: "computer", args: map[string]any{"action": "key", "text": "ctrl+a"}, images: full,
			check: func(t *testing.T, r *rig, ev events) {
				if ev.count(key(xprobe.KeyPress, keyControlL)) != 1 {
					t.Errorf("no Control_L press: %v", ev)
				}
				if e, ok := ev.first(key(xprobe.KeyPress, 'a')); !ok || e.State&controlMask == 0 {
					t.Errorf("no a pressed with control held: %v", ev)
				}
				if ev.count(key(xprobe.KeyRelease, keyControlL)) != 1 {
					t.Errorf("Control_L not released: %v", ev)
				}
			}},
		{name: "scroll down 3", tool: "computer", args: map[string]any{"action": "scroll", "coordinate": []int{400, 300}, "scroll_direction": "down", "scroll_amount": 3}, images: full,
			check: at(5, 3, 400, 300)},
		{name: "scroll left", tool: "computer", args: map[string]any{"action": "scroll", "coordinate": []int{400, 300}, "scroll_direction": "left", "scroll_amount": 1}, images: full,
			check: at(6, 1, 400, 300)},
		{name: "left_click_drag", tool: "computer", args: map[string]any{"action": "left_click_drag", "start_coordinate": []int{100, 100}, "coordinate": []int{500, 300}}, images: full,
			check: func(t *testing.T, r *rig, ev events) {
				press, ok1 := ev.first(button(xprobe.ButtonPress, 1))
				release, ok2 := ev.first(button(xprobe.ButtonRelease, 1))
				px, py := r.space.ToScreen(100, 100)
				rx, ry := r.space.ToScreen(500, 300)
				if !ok1 || !ok2 || press.X != px || press.Y != py || release.X != rx || release.Y != ry {
					t.Errorf("drag: want press at %d,%d and release at %d,%d: %v", px, py, rx, ry, ev)
				}
			}},
		{name: "left_mouse_down", tool: "computer", args: map[string]any{"action": "left_mouse_down", "coordinate": []int{20, 20}}, images: full,
			check: func(t *testing.T, r *rig, ev events) {
				if ev.count(button(xprobe.ButtonPress, 1)) != 1 || ev.count(button(xprobe.ButtonRelease, 1)) != 0 {
					t.Errorf("want one press and no release: %v", ev)
				}
			}},
		{name: "left_mouse_up", tool: "computer", args: map[string]any{"action": "left_mouse_up", "coordinate": []int{40, 20}}, images: full,
			check: func(t *testing.T, r *rig, ev events) {
				sx, sy := r.space.ToScreen(40, 20)
				if e, ok := ev.first(button(xprobe.ButtonRelease, 1)); !ok || e.X != sx || e.Y != sy {
					t.Errorf("want a release at %d,%d: %v", sx, sy, ev)
				}
			}},
		{name: "hold_key", tool: "computer", args: map[string]any{"action": "hold_key", "text": "shift", "duration": 0.05}, images: full,
			check: func(t *testing.T, r *rig, ev events) {
				if ev.count(key(xprobe.KeyPress, keyShiftL)) != 1 || ev.count(key(xprobe.KeyRelease, keyShiftL)) != 1 {
					t.Errorf("want shift pressed and released once: %v", ev)
				}
			}},
		{name: "wait", tool: "computer", args: map[string]any{"action": "wait", "duration": 0.05}, images: full},
		{name: "zoom", tool: "computer", args: map[string]any{"action": "zoom", "region": []int{0, 0, model[0] / 2, model[1] / 2}}, images: [][2]int{zoom}},
		// The same through the granular tools.
		{name: "granular left_click", tool: "left_click", args: map[string]any{"coordinate": []int{700, 500}}, images: full,
			check: at(1, 1, 700, 500)},
		{name: "granular left_click no screenshot", tool: "left_click", args: map[string]any{"coordinate": []int{701, 500}, "screenshot": false}, text: "done",
			check: at(1, 1, 701, 500)},
		{name: "granular key", tool: "key", args: map[string]any{"text": "Return"}, images: full,
			check: func(t *testing.T, r *rig, ev events) {
				if ev.count(key(xprobe.KeyPress, 0xff0d)) != 1 {
					t.Errorf("no Return: %v", ev)
				}
			}},
		{name: "granular screenshot", tool: "screenshot", args: map[string]any{}, images: full},
		{name: "granular zoom", tool: "zoom", args: map[string]any{"region": []int{0, 0, model[0] / 2, model[1] / 2}}, images: [][2]int{zoom}},
		{name: "granular cursor_position", tool: "cursor_position", args: nil, text: "X=701,Y=500"},
	}
}

// TestActions runs every action through a real client over each transport on
// a real Xvfb whose screen is larger than model space, and checks on the
// probe what X delivered and in the result what the model gets back.
func TestActions(t *testing.T) {
	r := newRig(t, rigConfig{w: 1920, h: 1200, model: "auto"})
	if r.space.ModelW != 1280 || r.space.ModelH != 800 {
		t.Fatalf("model space %v, want 1280x800 on 1920x1200", r.space)
	}
	model := [2]int{1280, 800}
	zoom := [2]int{960, 600} // the model-space half screen, cropped at full resolution
	for _, kind := range transports {
		t.Run(kind, func(t *testing.T) {
			c := r.connect(t, kind)
			for _, tc := range actionCases(model, zoom) {
				t.Run(tc.name, func(t *testing.T) {
					runCase(t, r, c, tc)
				})
			}
		})
	}
}

func runCase(t *testing.T, r *rig, c *client.Client, tc actionCase) {
	t.Helper()
	ctx := testrig.Context(t, 10*time.Second)
	if err := r.probe.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	r.probe.Take()
	res := call(t, c, tc.tool, tc.args)
	if res.IsError {
		t.Fatalf("%s: tool error: %s", tc.tool, resultText(res))
	}
	if err := r.probe.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	ev := events(r.probe.Take())
	if got := resultImages(t, res); fmt.Sprint(got) != fmt.Sprint(tc.images) {
		t.Errorf("images %v, want %v", got, tc.images)
	}
	if tc.text != "" && !strings.Contains(resultText(res), tc.text) {
		t.Errorf("text %q, want it to contain %q", resultText(res), tc.text)
	}
	if tc.text == "" && resultText(res) != "" {
		t.Errorf("unexpected text %q", resultText(res))
	}
	if tc.check != nil {
		tc.check(t, r, ev)
	}
}

// TestUnchangedScreenNotReencoded: two screenshots of a still screen carry the
// very same image, and the second costs no new encoding (the Shooter's cache
// and the server's base64 cache).
func TestUnchangedScreenNotReencoded(t *testing.T) {
	r := newRig(t, rigConfig{w: 1280, h: 800, model: "auto"})
	c := r.connect(t, "http")
	var data []string
	var encodes []int64
	for i := 0; i < 2; i++ {
		res := call(t, c, "computer", map[string]any{"action": "screenshot"})
		if res.IsError || len(res.Content) != 1 {
			t.Fatalf("screenshot: error %v, %d contents", res.IsError, len(res.Content))
		}
		data = append(data, imageData(t, res))
		encodes = append(encodes, r.shoot.Encodes())
	}
	if data[0] != data[1] {
		t.Errorf("a still screen gave two different images")
	}
	if encodes[1] != encodes[0] {
		t.Errorf("the still screen was encoded again (%d encodes, then %d)", encodes[0], encodes[1])
	}
	if err := r.probe.Fill(0, 0, 200, 200, 0xff0000); err != nil {
		t.Fatal(err)
	}
	if err := r.probe.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	res := call(t, c, "computer", map[string]any{"action": "screenshot"})
	if imageData(t, res) == data[0] {
		t.Errorf("the screen changed but the screenshot did not")
	}
	if r.shoot.Encodes() != encodes[1]+1 {
		t.Errorf("a changed screen should be encoded once: %d encodes, then %d", encodes[1], r.shoot.Encodes())
	}
}

func imageData(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	for _, c := range res.Content {
		if ic, ok := c.(mcp.ImageContent); ok {
			return ic.Data
		}
	}
	t.Fatalf("no image in %v", res.Content)
	return ""
}

// TestPublishedAsAgent: every tool call, whichever shape, reaches the hci bus
// as an agent action in the computer tool's input shape, so it is recorded
// like any other; refused input is not published.
func TestPublishedAsAgent(t *testing.T) {
	r := newRig(t, rigConfig{w: 1280, h: 800, model: "auto", noProbe: true})
	c := r.connect(t, "http")
	evs, stop := r.exec.Bus().Subscribe(0)
	defer stop()
	calls := []struct {
		tool string
		args map[string]any
		want string // the published action, "" for none
	}{
		{"computer", map[string]any{"action": "mouse_move", "coordinate": []int{5, 6}}, "mouse_move"},
		{"left_click", map[string]any{"coordinate": []int{7, 8}, "screenshot": false}, "left_click"},
		{"computer", map[string]any{"action": "left_click", "coordinate": []int{9999, 0}}, ""},
		{"screenshot", nil, "screenshot"},
	}
	// The screenshots the calls return follow their actions on the bus as
	// observations (the recorder keeps them as the steps' after): skipped
	// here, once checked to be the agent's.
	next := func(wait time.Duration) (hci.Event, bool) {
		for {
			select {
			case ev := <-evs:
				if ev.Kind != hci.KindObservation {
					return ev, true
				}
				if ev.Source != hci.SourceAgent || ev.Observation == nil {
					t.Errorf("observation %+v: want the agent's, with its screenshot", ev)
				}
			case <-time.After(wait):
				return hci.Event{}, false
			}
		}
	}
	for _, cl := range calls {
		res := call(t, c, cl.tool, cl.args)
		if res.IsError != (cl.want == "") {
			t.Fatalf("%s %v: isError %v: %s", cl.tool, cl.args, res.IsError, resultText(res))
		}
		if cl.want == "" {
			continue
		}
		ev, ok := next(5 * time.Second)
		if !ok {
			t.Fatalf("%s: nothing published on the hci bus", cl.tool)
		}
		if ev.Source != hci.SourceAgent || ev.Kind != hci.KindAction || ev.Action == nil || ev.Action.Action != cl.want {
			t.Errorf("%s: published %+v, want an agent %s action", cl.tool, ev, cl.want)
		}
	}
	if ev, ok := next(200 * time.Millisecond); ok {
		t.Errorf("unexpected event %+v (a refused action must not be published)", ev)
	}
}
