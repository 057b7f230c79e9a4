package control

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// Fixtures in testdata/openenv were transcribed from OpenEnv's source (each
// names its file); deskenv's answers must have their shapes. In a fixture:
//   - an object must be matched key for key, unless it has "$extra": true,
//     in which case the answer may have more keys;
//   - an array's elements must each match the fixture's first element;
//   - "<string>", "<number>", "<int>", "<bool>", "<object>", "<array>",
//     "<null>" and alternatives such as "<string|null>" match by JSON type,
//     "<any>" matches anything;
//   - any other value must be equal.
type fixture struct {
	Source  string          `json:"source"`
	Before  []fixtureReq    `json:"before"`
	Request *fixtureReq     `json:"request"`
	Status  int             `json:"status"`
	Resp    json.RawMessage `json:"response"`
	WS      []struct {
		Send    json.RawMessage `json:"send"`
		SendRaw string          `json:"send_raw"`
		Expect  json.RawMessage `json:"expect"`
	} `json:"ws"`
}

type fixtureReq struct {
	Method string          `json:"method"`
	Path   string          `json:"path"`
	Body   json.RawMessage `json:"body"`
}

func decodeAny(t testing.TB, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("not JSON (%v): %s", err, b)
	}
	return v
}

func jsonType(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "bool"
	case json.Number:
		if _, err := x.Int64(); err == nil {
			return "int"
		}
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// matchShape returns the differences between want (a fixture) and got.
func matchShape(path string, want, got any) []string {
	if s, ok := want.(string); ok && strings.HasPrefix(s, "<") && strings.HasSuffix(s, ">") {
		gt := jsonType(got)
		for _, alt := range strings.Split(s[1:len(s)-1], "|") {
			if alt == "any" || alt == gt || (alt == "number" && gt == "int") {
				return nil
			}
		}
		return []string{fmt.Sprintf("%s: want %s, got %s %s", path, s, gt, short(got))}
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: want an object, got %s %s", path, jsonType(got), short(got))}
		}
		var diffs []string
		extra, _ := w["$extra"].(bool)
		for k, wv := range w {
			if k == "$extra" {
				continue
			}
			gv, present := g[k]
			if !present {
				diffs = append(diffs, fmt.Sprintf("%s.%s: missing", path, k))
				continue
			}
			diffs = append(diffs, matchShape(path+"."+k, wv, gv)...)
		}
		if !extra {
			for k := range g {
				if _, ok := w[k]; !ok {
					diffs = append(diffs, fmt.Sprintf("%s.%s: not in the fixture (the OpenEnv model forbids extra fields)", path, k))
				}
			}
		}
		sort.Strings(diffs)
		return diffs
	case []any:
		g, ok := got.([]any)
		if !ok {
			return []string{fmt.Sprintf("%s: want an array, got %s %s", path, jsonType(got), short(got))}
		}
		if len(w) == 0 {
			if len(g) != 0 {
				return []string{fmt.Sprintf("%s: want [], got %s", path, short(got))}
			}
			return nil
		}
		if len(g) == 0 {
			return []string{fmt.Sprintf("%s: want at least one element", path)}
		}
		var diffs []string
		if len(w) == 1 && isTemplate(w[0]) {
			for i, gv := range g {
				diffs = append(diffs, matchShape(fmt.Sprintf("%s[%d]", path, i), w[0], gv)...)
			}
			return diffs
		}
		if len(g) != len(w) {
			return []string{fmt.Sprintf("%s: want %d elements %s, got %s", path, len(w), short(w), short(g))}
		}
		for i := range w {
			diffs = append(diffs, matchShape(fmt.Sprintf("%s[%d]", path, i), w[i], g[i])...)
		}
		return diffs
	default:
		if fmt.Sprint(want) != fmt.Sprint(got) || jsonType(want) != jsonType(got) {
			return []string{fmt.Sprintf("%s: want %s, got %s", path, short(want), short(got))}
		}
		return nil
	}
}

// isTemplate reports whether a fixture array's only element describes every
// element (an object or a type placeholder) rather than being a literal
// one-element list such as a location ["tool_name"].
func isTemplate(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		return true
	case string:
		return strings.HasPrefix(x, "<") && strings.HasSuffix(x, ">")
	}
	return false
}

func short(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 120 {
		return string(b[:120]) + "…"
	}
	return string(b)
}

func loadFixtures(t *testing.T) map[string]fixture {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("testdata", "openenv", "*.json"))
	if len(files) == 0 {
		t.Fatal("no fixtures in testdata/openenv")
	}
	out := map[string]fixture{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var fx fixture
		if err := json.Unmarshal(b, &fx); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !strings.Contains(fx.Source, "OpenEnv@") {
			t.Fatalf("%s does not name the OpenEnv source it was transcribed from", f)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".json")] = fx
	}
	return out
}

func sendFixture(t *testing.T, base string, rq fixtureReq) (int, []byte) {
	t.Helper()
	var body []byte
	if len(rq.Body) > 0 {
		body = rq.Body
	}
	var raw json.RawMessage
	status := doJSON(t, rq.Method, base+rq.Path, "", body, &raw)
	return status, raw
}

func TestOpenEnvShapes(t *testing.T) {
	fixtures := loadFixtures(t)
	r := newRig(t, rigOptions{mode: ModeSim, tools: true, tasks: loadExampleTasks(t)})
	names := make([]string, 0, len(fixtures))
	for n := range fixtures {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		fx := fixtures[name]
		t.Run(name, func(t *testing.T) {
			for _, b := range fx.Before {
				if st, body := sendFixture(t, r.srv.URL, b); st != 200 {
					t.Fatalf("before: %s %s: %d %s", b.Method, b.Path, st, body)
				}
			}
			if fx.Request != nil {
				status, body := sendFixture(t, r.srv.URL, *fx.Request)
				if status != fx.Status {
					t.Fatalf("status %d, want %d (%s): %s", status, fx.Status, fx.Source, body)
				}
				for _, d := range matchShape("$", decodeAny(t, fx.Resp), decodeAny(t, body)) {
					t.Errorf("%s (from %s)", d, fx.Source)
				}
				return
			}
			conn := dialWS(t, r.srv.URL, nil)
			defer closeWS(conn)
			for i, m := range fx.WS {
				msg := []byte(m.SendRaw)
				if len(m.Send) > 0 {
					msg = m.Send
				}
				got := wsRoundTrip(t, conn, msg)
				for _, d := range matchShape(fmt.Sprintf("message %d", i+1), decodeAny(t, m.Expect), decodeAny(t, got)) {
					t.Errorf("%s (from %s)", d, fx.Source)
				}
			}
		})
	}
}

func dialWS(t testing.TB, base string, header map[string][]string) *websocket.Conn {
	t.Helper()
	conn, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(base, "http")+"/ws", header)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dial /ws: %v (status %d)", err, status)
	}
	return conn
}

// closeWS ends a session the way OpenEnv's client does and waits for the
// server to hang up, so the next test finds the session slot free.
func closeWS(conn *websocket.Conn) {
	conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	conn.WriteMessage(websocket.TextMessage, []byte(`{"type":"close"}`))
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		if _, _, err := conn.ReadMessage(); err != nil {
			break
		}
	}
	conn.Close()
}

func wsRoundTrip(t testing.TB, conn *websocket.Conn, msg []byte) []byte {
	t.Helper()
	conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if err := conn.WriteMessage(websocket.TextMessage, msg); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	_, got, err := conn.ReadMessage()
	if err != nil {
		t.Fatalf("after sending %s: %v", msg, err)
	}
	return got
}

func TestWebSocketSessions(t *testing.T) {
	r := newRig(t, rigOptions{mode: ModeSim, tools: true})
	first := dialWS(t, r.srv.URL, nil)
	// A round trip makes sure the first session holds the slot.
	if got := wsRoundTrip(t, first, []byte(`{"type":"state"}`)); !strings.Contains(string(got), `"type":"state"`) {
		t.Fatalf("first session: %s", got)
	}
	second := dialWS(t, r.srv.URL, nil)
	second.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, b, err := second.ReadMessage()
	if err != nil {
		t.Fatalf("the second session got no answer: %v", err)
	}
	for _, d := range matchShape("$", decodeAny(t, []byte(`{"type":"error","data":{"message":"<string>","code":"CAPACITY_REACHED","active_sessions":1,"max_sessions":1}}`)), decodeAny(t, b)) {
		t.Error(d)
	}
	if _, _, err := second.ReadMessage(); !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
		t.Errorf("after CAPACITY_REACHED: %v, want a close frame with 1000 (normal closure)", err)
	}
	// close ends the first session; a new one can then open.
	first.WriteMessage(websocket.TextMessage, []byte(`{"type":"close"}`))
	first.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, _, err := first.ReadMessage(); !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
		t.Errorf("after close: %v, want a close frame with 1000 (normal closure)", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		c := dialWS(t, r.srv.URL, nil)
		got := wsRoundTrip(t, c, []byte(`{"type":"state"}`))
		c.Close()
		if strings.Contains(string(got), `"type":"state"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after close, a new session still gets %s", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Run("cross-origin refused", func(t *testing.T) {
		_, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(r.srv.URL, "http")+"/ws", map[string][]string{"Origin": {"https://evil.example"}})
		if err == nil || resp == nil || resp.StatusCode != 403 {
			t.Fatalf("cross-origin /ws: err %v, response %v; want 403", err, resp)
		}
	})
}

func TestWebSocketProdMode(t *testing.T) {
	r := newRig(t, rigOptions{mode: ModeProd, tools: true})
	c := dialWS(t, r.srv.URL, nil)
	defer c.Close()
	for _, msg := range []string{`{"type":"reset"}`, `{"type":"state"}`} {
		got := string(wsRoundTrip(t, c, []byte(msg)))
		if !strings.Contains(got, `"code":"EXECUTION_ERROR"`) || !strings.Contains(got, "prod mode") {
			t.Errorf("%s in prod mode: %s", msg, got)
		}
	}
	if got := string(wsRoundTrip(t, c, []byte(`{"type":"step","data":{"type":"list_tools"}}`))); !strings.Contains(got, `"tools"`) {
		t.Errorf("step in prod mode: %s", got)
	}
}

// TestOpenEnvPydantic validates deskenv's answers with pydantic models
// written after OpenEnv's (testdata/openenv_check.py), the way OpenEnv's
// Python side would parse them.
func TestOpenEnvPydantic(t *testing.T) {
	if err := exec.Command("python3", "-c", "import pydantic, sys; sys.exit(0 if pydantic.VERSION.startswith('2') else 1)").Run(); err != nil {
		t.Skip("python3 with pydantic 2 is not installed; the Go shape tests cover the same fixtures")
	}
	r := newRig(t, rigOptions{mode: ModeSim, tools: true})
	type sample struct {
		Kind string          `json:"kind"`
		Body json.RawMessage `json:"body"`
	}
	var samples []sample
	get := func(kind, method, path, body string) {
		var raw json.RawMessage
		var b []byte
		if body != "" {
			b = []byte(body)
		}
		doJSON(t, method, r.srv.URL+path, "", b, &raw)
		samples = append(samples, sample{kind, raw})
	}
	get("health", "GET", "/health", "")
	get("metadata", "GET", "/metadata", "")
	get("schema", "GET", "/schema", "")
	get("reset", "POST", "/reset", `{"seed":1}`)
	get("state", "GET", "/state", "")
	get("list_tools", "POST", "/step", `{"action":{"type":"list_tools"}}`)
	get("call_tool", "POST", "/step", `{"action":{"type":"call_tool","tool_name":"computer","arguments":{"action":"cursor_position"}}}`)
	get("call_tool", "POST", "/step", `{"action":{"type":"call_tool","tool_name":"nope"}}`)
	get("call_tool", "POST", "/step", `{"action":{"type":"call_tool","tool_name":"computer","arguments":{"action":"fly"}}}`)
	get("http_422", "POST", "/step", `{"action":{"type":"call_tool"}}`)
	get("http_422", "POST", "/reset", `{"seed":-4}`)
	c := dialWS(t, r.srv.URL, nil)
	defer c.Close()
	for _, m := range []struct{ kind, msg string }{
		{"ws_observation", `{"type":"reset","data":{}}`},
		{"ws_observation", `{"type":"step","data":{"type":"list_tools"}}`},
		{"ws_state", `{"type":"state"}`},
		{"ws_error", `{"type":"nope"}`},
		{"ws_error", `{"type":"step"}`},
		{"ws_mcp", `{"type":"mcp","data":{"jsonrpc":"2.0","method":"tools/list","id":1}}`},
		{"ws_mcp", `{"type":"mcp","data":{"jsonrpc":"2.0","method":"nope","id":2}}`},
	} {
		samples = append(samples, sample{m.kind, wsRoundTrip(t, c, []byte(m.msg))})
	}
	in, _ := json.Marshal(samples)
	cmd := exec.Command("python3", filepath.Join("testdata", "openenv_check.py"))
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("pydantic check failed: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), fmt.Sprintf("%d ok", len(samples))) {
		t.Fatalf("pydantic check did not validate all %d samples:\n%s", len(samples), out)
	}
}
