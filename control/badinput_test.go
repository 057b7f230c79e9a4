package control

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/deskenv/deskenv/internal/xprobe"
)

// stepArgs is an OpenEnv /step body calling tool with raw JSON arguments.
func stepArgs(tool, args string) string {
	return `{"action":{"type":"call_tool","tool_name":"` + tool + `","arguments":` + args + `}}`
}

// TestBadInputRefused drives one table of bad input over the native control
// plane, OpenEnv's /reset and /step, and its /ws: nulls where numbers go
// (JavaScript sends NaN and Infinity as null), 1e300, fractions, numbers as
// strings, text that is not UTF-8, over-long ids, timeouts that would
// overflow a Duration, negative scroll amounts and seeds. Each answer is a
// 4xx, or a step observation whose error names the problem; none quotes the
// whole input; X receives no event (a probe window), the pointer stays, and
// no episode starts.
func TestBadInputRefused(t *testing.T) {
	r := newRig(t, rigOptions{mode: ModeSim, tools: true, tasks: loadExampleTasks(t)})
	long := strings.Repeat("x", 100_000)
	id300 := strings.Repeat("e", 300)
	tests := []struct {
		name   string
		method string
		path   string
		body   string
		status int
		want   string
	}{
		// Native REST.
		{"reset: long episode_id", "POST", "/api/reset", `{"episode_id":"` + id300 + `"}`, 400, "episode_id"},
		{"reset: huge task_id", "POST", "/api/reset", `{"task_id":"` + long + `"}`, 400, "(100000 bytes)"},
		{"reset: negative seed", "POST", "/api/reset", `{"seed":-1}`, 400, "negative"},
		{"reset: 1e300 seed", "POST", "/api/reset", `{"seed":1e300}`, 400, "reset request"},
		{"reset: string seed", "POST", "/api/reset", `{"seed":"3"}`, 400, "reset request"},
		{"reset: invalid UTF-8", "POST", "/api/reset", "{\"episode_id\":\"a\xffb\"}", 400, "not valid UTF-8"},
		{"reset: lone surrogate", "POST", "/api/reset", `{"episode_id":"\ud800"}`, 400, "unpaired UTF-16 surrogate"},
		{"reset: long unknown field", "POST", "/api/reset", `{"` + long + `":1}`, 400, "unknown field"},
		{"task: long id", "GET", "/api/tasks/" + id300, "", 400, "at most 255"},
		{"task: huge id", "GET", "/api/tasks/" + long[:8000], "", 400, "(8000 bytes)"},
		{"task: invalid UTF-8 id", "GET", "/api/tasks/a%FFb", "", 400, "not valid UTF-8"},
		{"episode: long id", "GET", "/api/episodes/" + id300, "", 400, "at most 255"},
		{"end: long id", "POST", "/api/episodes/" + id300 + "/end", "", 400, "at most 255"},
		{"episodes: long limit", "GET", "/api/episodes?limit=" + long[:5000], "", 400, "(5000 bytes)"},

		// OpenEnv /reset.
		{"oe reset: long episode_id", "POST", "/reset", `{"episode_id":"` + id300 + `"}`, 422, "string_too_long"},
		{"oe reset: huge task_id", "POST", "/reset", `{"task_id":"` + long + `"}`, 422, "string_too_long"},
		{"oe reset: negative seed", "POST", "/reset", `{"seed":-1}`, 422, "greater_than_equal"},
		{"oe reset: 1e300 seed", "POST", "/reset", `{"seed":1e300}`, 422, "int_type"},
		{"oe reset: invalid UTF-8", "POST", "/reset", "{\"task_id\":\"\xc3\"}", 422, "not valid UTF-8"},

		// OpenEnv /step: the body's own fields.
		{"step: 1e300 timeout", "POST", "/step", `{"action":{"type":"list_tools"},"timeout_s":1e300}`, 422, "less_than_equal"},
		{"step: negative timeout", "POST", "/step", `{"action":{"type":"list_tools"},"timeout_s":-1}`, 422, "greater_than"},
		{"step: string timeout", "POST", "/step", `{"action":{"type":"list_tools"},"timeout_s":"3"}`, 422, "float_type"},
		{"step: long request_id", "POST", "/step", `{"action":{"type":"list_tools"},"request_id":"` + long + `"}`, 422, "string_too_long"},
		{"step: invalid UTF-8", "POST", "/step", stepArgs("computer", "{\"action\":\"type\",\"text\":\"a\xffb\"}"), 422, "not valid UTF-8"},
		{"step: lone surrogate", "POST", "/step", stepArgs("type", `{"text":"\udc00"}`), 422, "unpaired UTF-16 surrogate"},
		{"step: long tool name", "POST", "/step", stepArgs(long[:5000], `{}`), 422, "string_too_long"},
		{"step: a value after the body", "POST", "/step", `{"action":{"type":"list_tools"}} {"x":1}`, 422, "json_invalid"},
		{"oe reset: a value after the body", "POST", "/reset", `{"seed":1} junk`, 422, "json_invalid"},

		// OpenEnv /step: the action, refused by the tool (an observation
		// with its error).
		{"step: null coordinate", "POST", "/step", stepArgs("computer", `{"action":"left_click","coordinate":[null,null]}`), 200, "got null at index 0"},
		{"step: null start", "POST", "/step", stepArgs("left_click_drag", `{"start_coordinate":[null,null],"coordinate":[5,5]}`), 200, "got null at index 0"},
		{"step: null region", "POST", "/step", stepArgs("computer", `{"action":"zoom","region":[0,0,null,9]}`), 200, "got null at index 2"},
		{"step: 1e300 coordinate", "POST", "/step", stepArgs("computer", `{"action":"left_click","coordinate":[1e300,1]}`), 200, "got number 1e300"},
		{"step: 1.5 coordinate", "POST", "/step", stepArgs("mouse_move", `{"coordinate":[1.5,1]}`), 200, "got number 1.5"},
		{"step: string coordinate", "POST", "/step", stepArgs("left_click", `{"coordinate":["3",1]}`), 200, `got string \"3\"`},
		{"step: 1e300 wait", "POST", "/step", stepArgs("computer", `{"action":"wait","duration":1e300}`), 200, "duration must be between"},
		{"step: negative hold", "POST", "/step", stepArgs("hold_key", `{"text":"shift","duration":-1}`), 200, "duration must be between"},
		{"step: null hold", "POST", "/step", stepArgs("hold_key", `{"text":"shift","duration":null}`), 200, "hold_key requires duration"},
		{"step: negative scroll", "POST", "/step", stepArgs("scroll", `{"scroll_direction":"down","scroll_amount":-3}`), 200, "scroll_amount"},
		{"step: 1e300 scroll", "POST", "/step", stepArgs("computer", `{"action":"scroll","scroll_direction":"down","scroll_amount":1e300}`), 200, "scroll_amount must be an integer"},
	}

	// A running episode, to see that no refused reset replaces it.
	var ep Episode
	if st := doJSON(t, "POST", r.srv.URL+"/api/reset", "", []byte(`{}`), &ep); st != 200 {
		t.Fatalf("reset: %d", st)
	}
	p, err := xprobe.Open(r.d.Name(), xprobe.Options{Background: 0x224466})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	x0, y0 := moveAway(t, r)
	check := func(t *testing.T) {
		t.Helper()
		if err := p.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if ev := p.Take(); len(ev) != 0 {
			t.Errorf("X received %v", ev)
		}
		if x, y, err := r.exec.CursorPosition(ctx); err != nil || x != x0 || y != y0 {
			t.Errorf("the pointer moved to %d,%d (%v), from %d,%d", x, y, err, x0, y0)
		}
		if cur := r.c.Current(); cur == nil || cur.ID != ep.ID {
			t.Errorf("the running episode is now %+v, want %s", cur, ep.ID)
		}
	}
	p.Take()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, r.srv.URL+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if tc.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d: %.300s", resp.StatusCode, tc.status, body)
			}
			if !bytes.Contains(body, []byte(tc.want)) {
				t.Errorf("answer %.300s does not say %q", body, tc.want)
			}
			if tc.status == 200 && !bytes.Contains(body, []byte(`"error":{`)) {
				t.Errorf("the step succeeded: %.300s", body)
			}
			if len(body) > 4000 {
				t.Errorf("answer is %d bytes: it should quote a short prefix of the input", len(body))
			}
			check(t)
		})
	}

	// The same over OpenEnv's /ws.
	conn := dialWS(t, r.srv.URL, nil)
	defer closeWS(conn)
	wsTests := []struct {
		name, msg, want string
	}{
		{"null coordinate", `{"type":"step","data":{"type":"call_tool","tool_name":"computer","arguments":{"action":"left_click","coordinate":[null,null]}}}`, "got null at index 0"},
		{"1e300 wait", `{"type":"step","data":{"type":"call_tool","tool_name":"wait","arguments":{"duration":1e300}}}`, "duration must be between"},
		{"negative scroll", `{"type":"step","data":{"type":"call_tool","tool_name":"scroll","arguments":{"scroll_direction":"up","scroll_amount":-1}}}`, "scroll_amount"},
		{"invalid UTF-8", "{\"type\":\"step\",\"data\":{\"type\":\"call_tool\",\"tool_name\":\"type\",\"arguments\":{\"text\":\"\xff\"}}}", "not valid UTF-8"},
		{"lone surrogate", `{"type":"step","data":{"type":"call_tool","tool_name":"type","arguments":{"text":"\ud83d"}}}`, "unpaired UTF-16 surrogate"},
		{"long episode id", `{"type":"reset","data":{"episode_id":"` + id300 + `"}}`, "string_too_long"},
		{"negative seed", `{"type":"reset","data":{"seed":-5}}`, "greater_than_equal"},
		{"huge task id", `{"type":"reset","data":{"task_id":"` + long + `"}}`, "string_too_long"},
	}
	for _, tc := range wsTests {
		t.Run("ws "+tc.name, func(t *testing.T) {
			conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if err := conn.WriteMessage(websocket.TextMessage, []byte(tc.msg)); err != nil {
				t.Fatal(err)
			}
			conn.SetReadDeadline(time.Now().Add(60 * time.Second))
			_, got, err := conn.ReadMessage()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(got, []byte(tc.want)) {
				t.Errorf("answer %.300s does not say %q", got, tc.want)
			}
			if !bytes.Contains(got, []byte(`"error"`)) {
				t.Errorf("not an error: %.300s", got)
			}
			if len(got) > 4000 {
				t.Errorf("answer is %d bytes: it should quote a short prefix of the input", len(got))
			}
			check(t)
		})
	}
}

// moveAway puts the pointer at a known point away from (0,0) and returns
// where X has it.
func moveAway(t *testing.T, r *rig) (int, int) {
	t.Helper()
	var res map[string]any
	if st := doJSON(t, "POST", r.srv.URL+"/step", "", []byte(stepArgs("mouse_move", `{"coordinate":[640,400],"screenshot":false}`)), &res); st != 200 {
		t.Fatalf("mouse_move: %d %v", st, res)
	}
	x, y, err := r.exec.CursorPosition(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if x == 0 && y == 0 {
		t.Fatalf("the pointer did not move")
	}
	return x, y
}
