package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"
)

// TestErrors sends bad input of every kind over each transport: each must be
// a tool error (isError) whose message names the problem, must send nothing
// to X, and must leave the server working.
func TestErrors(t *testing.T) {
	r := newRig(t, rigConfig{w: 1920, h: 1200, model: "auto"})
	huge := strings.Repeat("a", 1<<20)
	tests := []struct {
		name string
		tool string
		args any
		want []string // all must appear in the message
	}{
		{"unknown action", "computer", map[string]any{"action": "fly"}, []string{"unknown action", "fly", "left_click"}},
		{"near-miss action", "computer", map[string]any{"action": "left_clik", "coordinate": []int{1, 1}}, []string{"did you mean", "left_click"}},
		{"no action", "computer", map[string]any{"coordinate": []int{1, 1}}, []string{"action is required"}},
		{"no arguments", "computer", nil, []string{"action is required"}},
		{"missing coordinate", "computer", map[string]any{"action": "mouse_move"}, []string{"mouse_move requires coordinate"}},
		{"missing start", "computer", map[string]any{"action": "left_click_drag", "coordinate": []int{1, 1}}, []string{"start_coordinate"}},
		{"x out of range", "computer", map[string]any{"action": "left_click", "coordinate": []int{1280, 10}}, []string{"outside", "1280x800", "0..1279"}},
		{"negative y", "computer", map[string]any{"action": "left_click", "coordinate": []int{10, -1}}, []string{"coordinate"}},
		{"inverted region", "computer", map[string]any{"action": "zoom", "region": []int{100, 100, 50, 200}}, []string{"region", "x0 < x1"}},
		{"bad key", "computer", map[string]any{"action": "key", "text": "ctrl+nosuchkey"}, []string{"nosuchkey"}},
		{"empty chord part", "computer", map[string]any{"action": "key", "text": "ctrl++a+"}, []string{"chord"}},
		{"coordinate as string", "computer", json.RawMessage(`{"action":"left_click","coordinate":"100,200"}`), []string{"coordinate must be an array", "string"}},
		{"coordinate floats", "computer", json.RawMessage(`{"action":"left_click","coordinate":[10.5,20]}`), []string{"coordinate", "integer"}},
		{"coordinate of three", "computer", json.RawMessage(`{"action":"left_click","coordinate":[1,2,3]}`), []string{"coordinate", "3 values"}},
		{"scroll_amount as string", "computer", json.RawMessage(`{"action":"scroll","scroll_direction":"down","scroll_amount":"3"}`), []string{"scroll_amount must be an integer"}},
		{"text as number", "computer", json.RawMessage(`{"action":"type","text":5}`), []string{"text must be a string"}},
		{"action as number", "computer", json.RawMessage(`{"action":1}`), []string{"action must be a string"}},
		{"arguments as array", "computer", json.RawMessage(`[1,2]`), []string{"JSON object"}},
		{"bad scroll direction", "computer", map[string]any{"action": "scroll", "scroll_direction": "sideways"}, []string{"scroll_direction", "up, down, left, right"}},
		{"duration too long", "computer", map[string]any{"action": "wait", "duration": 1000}, []string{"duration", "100"}},
		{"unknown field", "computer", map[string]any{"action": "left_click", "coordinates": []int{1, 1}}, []string{"unknown field", "coordinate"}},
		{"field the action does not take", "computer", map[string]any{"action": "type", "text": "x", "coordinate": []int{1, 1}}, []string{"type does not take coordinate"}},
		{"1 MB text", "computer", map[string]any{"action": "type", "text": huge}, []string{"text is 1048576 bytes", "split"}},
		{"control character", "computer", map[string]any{"action": "type", "text": "a\x1bb"}, []string{"control character"}},
		{"granular: missing field", "left_click", map[string]any{}, []string{"left_click", "coordinate"}},
		{"granular: foreign field", "left_click", map[string]any{"coordinate": []int{1, 1}, "region": []int{0, 0, 1, 1}}, []string{"left_click does not take region", "coordinate"}},
		{"granular: action field", "left_click", map[string]any{"coordinate": []int{1, 1}, "action": "type"}, []string{"does not take action"}},
		{"granular: screenshot not bool", "type", map[string]any{"text": "x", "screenshot": "no"}, []string{"screenshot must be true or false"}},
		{"granular: read-only takes no switch", "zoom", map[string]any{"region": []int{0, 0, 2, 2}, "screenshot": false}, []string{"zoom does not take screenshot"}},
		{"granular: out of range", "mouse_move", map[string]any{"coordinate": []int{5000, 10}}, []string{"outside"}},
		{"granular: 1 MB text", "type", map[string]any{"text": huge}, []string{"1048576 bytes"}},
	}
	for _, kind := range transports {
		t.Run(kind, func(t *testing.T) {
			c := r.connect(t, kind)
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					r.probe.Take()
					res := call(t, c, tc.tool, tc.args)
					msg := resultText(res)
					if !res.IsError {
						t.Fatalf("not a tool error: %d images, text %q", len(resultImages(t, res)), msg)
					}
					for _, w := range tc.want {
						if !strings.Contains(msg, w) {
							t.Errorf("message %q does not mention %q", msg, w)
						}
					}
					if imgs := resultImages(t, res); len(imgs) != 0 {
						t.Errorf("an error result carries images %v", imgs)
					}
					// Still up: a screenshot works right after.
					ok := call(t, c, "computer", map[string]any{"action": "screenshot"})
					if ok.IsError || len(resultImages(t, ok)) != 1 {
						t.Fatalf("screenshot after the error failed: %s", resultText(ok))
					}
					if err := r.probe.Sync(t.Context()); err != nil {
						t.Fatal(err)
					}
					for _, e := range r.probe.Take() {
						if e.Kind != "motion" {
							t.Errorf("a refused action reached X: %v", e)
						}
					}
				})
			}
		})
	}
}

// TestMaxTextBytes: a server configured below hci's cap refuses longer text
// with a message giving its own limit.
func TestMaxTextBytes(t *testing.T) {
	r := newRig(t, rigConfig{w: 1280, h: 800, model: "auto", noProbe: true})
	srv, err := New(r.exec, r.shoot, r.capt, Config{MaxTextBytes: 10})
	if err != nil {
		t.Fatal(err)
	}
	r.srv = srv
	c := r.connect(t, "http")
	res := call(t, c, "computer", map[string]any{"action": "type", "text": "01234567890"})
	if !res.IsError || !strings.Contains(resultText(res), "at most 10 bytes") {
		t.Errorf("11 bytes over a 10-byte cap: %v %q", res.IsError, resultText(res))
	}
}

// TestNewRejects: New refuses configurations it cannot serve, saying why.
func TestNewRejects(t *testing.T) {
	r := newRig(t, rigConfig{w: 1280, h: 800, model: "auto", noProbe: true})
	tests := []struct {
		name string
		nil_ bool
		cfg  Config
		want string
	}{
		{"nil parts", true, Config{}, "needs an executor"},
		{"unknown mode", false, Config{Modes: []Mode{"computer", "robot"}}, `unknown mode "robot"`},
		{"negative text cap", false, Config{MaxTextBytes: -1}, "MaxTextBytes"},
		{"deferred tools nobody can find", false, Config{DeferTools: true}, "turn FindTools on too"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.nil_ {
				_, err = New(nil, r.shoot, r.capt, tc.cfg)
			} else {
				_, err = New(r.exec, r.shoot, r.capt, tc.cfg)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

// TestServeStdioEnds: the end of input and a cancelled context are both a
// clean end of ServeStdio, and garbage on the way is answered, not fatal.
func TestServeStdioEnds(t *testing.T) {
	r := newRig(t, rigConfig{w: 1280, h: 800, model: "auto", noProbe: true})
	tests := []struct {
		name   string
		input  string
		cancel bool
		want   string // in the output
	}{
		{"eof", "", false, ""},
		{"garbage then eof", "this is not json\n", false, "Parse error"},
		{"cancelled while waiting", "", true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var in io.Reader = strings.NewReader(tc.input)
			if tc.cancel {
				pr, pw := io.Pipe()
				defer pw.Close()
				in = pr
				time.AfterFunc(100*time.Millisecond, cancel)
			}
			var out bytes.Buffer
			done := make(chan error, 1)
			go func() { done <- r.srv.ServeStdio(ctx, in, &out) }()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("ServeStdio: %v, want nil", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("ServeStdio did not return")
			}
			if !strings.Contains(out.String(), tc.want) {
				t.Errorf("output %q, want it to contain %q", out.String(), tc.want)
			}
		})
	}
}
