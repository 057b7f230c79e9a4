package mcpserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/deskenv/deskenv/auth"
	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/internal/xprobe"
)

// The exchanges below are transcribed from meta-pytorch/OpenEnv at commit
// 685de411e5f77286b0fd94798d42c4467cf8a1bc:
//
//   - `openenv validate <url>` (src/openenv/cli/_validation.py,
//     validate_running_environment, criterion "mcp_endpoint"):
//     requests.post(url+"/mcp", json={}) and passes on status 200 with a JSON
//     object whose "jsonrpc" is "2.0". OpenEnv's own server answers it
//     {"jsonrpc":"2.0","id":null,"error":{"code":-32600,...}}
//     (src/openenv/core/env_server/http_server.py, mcp_endpoint).
//   - MCPToolClient with use_production_mode = True
//     (src/openenv/core/mcp_client.py, _production_mcp_request): httpx posts
//     {"jsonrpc":"2.0","method":M,"params":P,"id":n} to url+"/mcp", with
//     n counting from 1, raises on a status that is not 2xx and reads the
//     JSON. list_tools and call_tool first call _ensure_production_session:
//     openenv/session/create, params {}, wants result.session_id; then
//     tools/list with params {"session_id"} reads result.tools[] (name,
//     description, input_schema or inputSchema) and tools/call with params
//     {"name","arguments","session_id"} raises on "error" and returns
//     result["data"] if the result has it, else the whole result. close()
//     sends openenv/session/close {"session_id"}, best effort.
//
// Both libraries send Content-Type application/json and their default
// Accept, */*; neither sends Mcp-Session-Id, MCP-Protocol-Version or an
// Authorization header of its own.

const (
	plainAgentToken    = "agent-token-0123456789abcdef"
	plainOperatorToken = "operator-token-0123456789abcdef"
)

// openEnvPost posts body to url as OpenEnv's clients do, with token as a
// bearer token if not empty, and decodes the answer if it is JSON.
func openEnvPost(t *testing.T, url, token, body string) (int, map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "*/*")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if len(raw) > 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("answer to %s is not a JSON object: %v: %.200s", body, err, raw)
		}
	}
	return resp.StatusCode, m
}

// rpcResult returns an answer's result, failing the test on an error answer.
func rpcResult(t *testing.T, what string, m map[string]any) map[string]any {
	t.Helper()
	if m["jsonrpc"] != "2.0" {
		t.Fatalf("%s: jsonrpc %v, want \"2.0\": %v", what, m["jsonrpc"], m)
	}
	if e, ok := m["error"]; ok {
		t.Fatalf("%s: error %v", what, e)
	}
	res, ok := m["result"].(map[string]any)
	if !ok {
		t.Fatalf("%s: result %v is not an object", what, m["result"])
	}
	return res
}

// rpcErrorCode returns an error answer's code, failing the test on a result.
func rpcErrorCode(t *testing.T, what string, m map[string]any) int {
	t.Helper()
	e, ok := m["error"].(map[string]any)
	if !ok {
		t.Fatalf("%s: %v, want a JSON-RPC error", what, m)
	}
	code, _ := e["code"].(float64)
	return int(code)
}

// doors serves the rig's MCP behind two front doors: one with an agent token
// (as deployed) and one in local mode (no tokens, as `openenv validate` is
// usually pointed at).
func (r *rig) doors(t *testing.T) (withToken, local string) {
	t.Helper()
	a, err := auth.New(auth.Config{AgentToken: plainAgentToken, OperatorToken: plainOperatorToken})
	if err != nil {
		t.Fatal(err)
	}
	d := auth.NewDoor(a, auth.Limits{})
	r.srv.Register(d)
	ld := auth.NewDoor(nil, auth.Limits{})
	r.srv.Register(ld)
	return testrig.Serve(t, d) + "/mcp", testrig.Serve(t, ld) + "/mcp"
}

// TestOpenEnvValidatorMCPEndpoint replays the mcp_endpoint check of
// `openenv validate`: POST /mcp {} answers 200 with a JSON-RPC payload. It
// is OpenEnv's own answer, an invalid request.
func TestOpenEnvValidatorMCPEndpoint(t *testing.T) {
	r := newRig(t, rigConfig{w: 1280, h: 800, model: "auto", noProbe: true})
	withToken, local := r.doors(t)

	status, m := openEnvPost(t, local, "", `{}`)
	if status != http.StatusOK || m["jsonrpc"] != "2.0" {
		t.Fatalf("POST /mcp {}: %d %v, want 200 and jsonrpc 2.0 (openenv validate's mcp_endpoint)", status, m)
	}
	if code := rpcErrorCode(t, "{}", m); code != -32600 {
		t.Errorf("POST /mcp {}: code %d, want -32600 (invalid request), as OpenEnv answers", code)
	}
	// With tokens, the door still wants the agent's.
	if status, _ := openEnvPost(t, withToken, "", `{}`); status != http.StatusUnauthorized {
		t.Errorf("POST /mcp {} without a token: %d, want 401", status)
	}
	if status, _ := openEnvPost(t, withToken, plainOperatorToken, `{}`); status != http.StatusForbidden {
		t.Errorf("POST /mcp {} with the operator's token: %d, want 403 (agents only)", status)
	}
	if status, m := openEnvPost(t, withToken, plainAgentToken, `{}`); status != http.StatusOK || m["jsonrpc"] != "2.0" {
		t.Errorf("POST /mcp {} with the agent's token: %d %v, want 200 and jsonrpc 2.0", status, m)
	}
}

// TestOpenEnvProductionMode replays what MCPToolClient sends in production
// mode, in its order: a session, the tools, a screenshot and a click through
// the computer tool, a tool that does not exist, and the session's close.
func TestOpenEnvProductionMode(t *testing.T) {
	r := newRig(t, rigConfig{w: 1280, h: 800, model: "auto"})
	url, _ := r.doors(t)
	post := func(body string) map[string]any {
		t.Helper()
		status, m := openEnvPost(t, url, plainAgentToken, body)
		if status != http.StatusOK {
			t.Fatalf("%s: status %d, want 200 (httpx raises otherwise): %v", body, status, m)
		}
		return m
	}

	sid, _ := rpcResult(t, "openenv/session/create", post(`{"jsonrpc":"2.0","method":"openenv/session/create","params":{},"id":1}`))["session_id"].(string)
	if sid == "" {
		t.Fatal("openenv/session/create: no session_id (MCPToolClient raises 'missing session_id')")
	}

	list := rpcResult(t, "tools/list", post(`{"jsonrpc":"2.0","method":"tools/list","params":{"session_id":"`+sid+`"},"id":2}`))
	tools, _ := list["tools"].([]any)
	var names []string
	for _, v := range tools {
		tool, _ := v.(map[string]any)
		name, _ := tool["name"].(string)
		_, hasDesc := tool["description"].(string)
		_, hasSchema := tool["inputSchema"].(map[string]any)
		if name == "" || !hasDesc || !hasSchema {
			t.Errorf("tools/list: tool %v lacks a name, description or inputSchema", tool)
		}
		names = append(names, name)
	}
	for _, want := range []string{"computer", "screenshot", "left_click"} {
		if !slices.Contains(names, want) {
			t.Errorf("tools/list: %v lacks %q", names, want)
		}
	}

	shot := rpcResult(t, "tools/call screenshot", post(`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"computer","arguments":{"action":"screenshot"},"session_id":"`+sid+`"},"id":3}`))
	if _, has := shot["data"]; has {
		// call_tool would hand back only "data" and drop the image.
		t.Errorf("tools/call screenshot: the result has \"data\": %v", shot["data"])
	}
	if w, h := plainImage(t, shot); w != 1280 || h != 800 {
		t.Errorf("tools/call screenshot: image %dx%d, want 1280x800", w, h)
	}

	ctx := testrig.Context(t, 10*time.Second)
	if err := r.probe.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	r.probe.Take()
	click := rpcResult(t, "tools/call left_click", post(`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"computer","arguments":{"action":"left_click","coordinate":[300,200]},"session_id":"`+sid+`"},"id":4}`))
	if isErr, _ := click["isError"].(bool); isErr {
		t.Fatalf("tools/call left_click: tool error %v", click["content"])
	}
	if err := r.probe.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	ev := events(r.probe.Take())
	if e, ok := ev.first(button(xprobe.ButtonPress, 1)); !ok || e.X != 300 || e.Y != 200 {
		t.Errorf("left_click at 300,200: X got %v", ev)
	}

	if m := post(`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"nope","arguments":{},"session_id":"` + sid + `"},"id":5}`); m["error"] == nil {
		t.Errorf("tools/call of a tool that does not exist: %v, want a JSON-RPC error (call_tool raises)", m)
	}

	closed := rpcResult(t, "openenv/session/close", post(`{"jsonrpc":"2.0","method":"openenv/session/close","params":{"session_id":"`+sid+`"},"id":6}`))
	if closed["session_id"] != sid || closed["closed"] != true {
		t.Errorf("openenv/session/close: %v, want {session_id: %q, closed: true}", closed, sid)
	}
}

// plainImage decodes the one PNG of a tools/call result as JSON and returns
// its size.
func plainImage(t *testing.T, res map[string]any) (int, int) {
	t.Helper()
	content, _ := res["content"].([]any)
	for _, v := range content {
		c, _ := v.(map[string]any)
		if c["type"] != "image" {
			continue
		}
		if c["mimeType"] != "image/png" {
			t.Fatalf("image mimeType %v, want image/png", c["mimeType"])
		}
		s, _ := c["data"].(string)
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		return img.Bounds().Dx(), img.Bounds().Dy()
	}
	t.Fatalf("no image in %v", res)
	return 0, 0
}

// TestPlainRPCAnswers: the JSON-RPC corners of production mode, each an
// answer with status 200 as OpenEnv's mcp_endpoint gives (a notification
// gets streamable HTTP's 202), and an initialize without an event stream
// still starts a streamable HTTP session.
func TestPlainRPCAnswers(t *testing.T) {
	r := newRig(t, rigConfig{w: 640, h: 480, noProbe: true})
	_, url := r.doors(t)
	cases := []struct {
		name, body string
		status     int
		code       int // the JSON-RPC error code; 0: a result
	}{
		{"not JSON", `{"jsonrpc":`, 200, -32700},
		{"no jsonrpc", `{"method":"tools/list","id":1}`, 200, -32600},
		{"unknown method", `{"jsonrpc":"2.0","method":"resources/nope","id":1}`, 200, -32601},
		{"ping", `{"jsonrpc":"2.0","method":"ping","id":"a"}`, 200, 0},
		{"tools/list without params", `{"jsonrpc":"2.0","method":"tools/list","id":7}`, 200, 0},
		{"session close without session_id", `{"jsonrpc":"2.0","method":"openenv/session/close","params":{},"id":1}`, 200, -32602},
		{"session params not an object", `{"jsonrpc":"2.0","method":"openenv/session/close","params":[1],"id":1}`, 200, -32602},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, 202, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, m := openEnvPost(t, url, "", tc.body)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %v", status, tc.status, m)
			}
			switch {
			case tc.status == http.StatusAccepted:
				if m != nil {
					t.Errorf("a notification was answered: %v", m)
				}
			case tc.code != 0:
				if code := rpcErrorCode(t, tc.body, m); code != tc.code {
					t.Errorf("code %d, want %d: %v", code, tc.code, m)
				}
			default:
				rpcResult(t, tc.body, m)
			}
		})
	}

	t.Run("initialize", func(t *testing.T) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url,
			strings.NewReader(`{"jsonrpc":"2.0","method":"initialize","id":1,"params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" {
			t.Errorf("initialize without an event stream: %d, session %q; want streamable HTTP's 200 and a session id",
				resp.StatusCode, resp.Header.Get("Mcp-Session-Id"))
		}
	})
}

// TestPlainCandidate: which requests plainRPC answers itself and which go to
// streamable HTTP untouched.
func TestPlainCandidate(t *testing.T) {
	cases := []struct {
		name   string
		method string
		header map[string]string
		want   bool
	}{
		{"OpenEnv's httpx and requests", "POST", map[string]string{"Accept": "*/*"}, true},
		{"JSON only", "POST", map[string]string{"Accept": "application/json"}, true},
		{"no Accept", "POST", nil, true},
		{"streamable HTTP client", "POST", map[string]string{"Accept": "application/json, text/event-stream"}, false},
		{"event stream with parameters", "POST", map[string]string{"Accept": "application/json;q=0.9, text/event-stream;q=1"}, false},
		{"a session", "POST", map[string]string{"Accept": "*/*", "Mcp-Session-Id": "mcp-session-1"}, false},
		{"a protocol version", "POST", map[string]string{"Accept": "application/json", "Mcp-Protocol-Version": "2025-11-25"}, false},
		{"GET stream", "GET", map[string]string{"Accept": "*/*"}, false},
		{"DELETE session", "DELETE", nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, "/mcp", nil)
			for k, v := range tc.header {
				r.Header.Set(k, v)
			}
			if got := plainCandidate(r); got != tc.want {
				t.Errorf("plainCandidate = %v, want %v", got, tc.want)
			}
		})
	}
}
