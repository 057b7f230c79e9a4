package control

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/deskenv/deskenv/auth"
)

// The checks below are transcribed from meta-pytorch/OpenEnv at commit
// 685de411e5f77286b0fd94798d42c4467cf8a1bc: `openenv validate <url>` runs
// validate_running_environment (src/openenv/cli/_validation.py), and the
// docs/OPENENV.md example drives MCPToolClient (src/openenv/core/
// mcp_client.py, env_client.py) over /ws.

// validatorGet does what the validator's requests.get(url, timeout=5) does,
// without a token (it sends none): the status and the body as JSON, nil when
// it is not JSON (response.json() raising ValueError).
func validatorGet(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	return validatorDo(t, http.MethodGet, url, "")
}

func validatorDo(t *testing.T, method, url, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "*/*")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if json.NewDecoder(resp.Body).Decode(&m) != nil {
		m = nil
	}
	return resp.StatusCode, m
}

func isString(v any) bool { _, ok := v.(string); return ok }
func isObject(v any) bool { _, ok := v.(map[string]any); return ok }

// validateReport is what validate_running_environment reports: each
// criterion's pass, and the mode it read from the OpenAPI paths.
type validateReport struct {
	passed  map[string]bool
	mode    string
	version string
}

// openEnvValidate replays validate_running_environment's six criteria in
// its order against base.
func openEnvValidate(t *testing.T, base string) validateReport {
	t.Helper()
	rep := validateReport{passed: map[string]bool{}, mode: "unknown", version: "unknown"}

	status, doc := validatorGet(t, base+"/openapi.json")
	info, _ := doc["info"].(map[string]any)
	rep.passed["openapi_version_available"] = status == 200 && info != nil && isString(info["version"])
	paths := map[string]any{}
	if rep.passed["openapi_version_available"] {
		rep.version = info["version"].(string)
		paths, _ = doc["paths"].(map[string]any)
	}

	status, health := validatorGet(t, base+"/health")
	rep.passed["health_endpoint"] = status == 200 && health["status"] == "healthy"

	status, meta := validatorGet(t, base+"/metadata")
	rep.passed["metadata_endpoint"] = status == 200 && isString(meta["name"]) && isString(meta["description"])

	status, schema := validatorGet(t, base+"/schema")
	rep.passed["schema_endpoint"] = status == 200 && isObject(schema["action"]) && isObject(schema["observation"]) && isObject(schema["state"])

	// requests.post(url, json={}): Content-Type application/json, Accept */*.
	status, rpc := validatorDo(t, http.MethodPost, base+"/mcp", "{}")
	rep.passed["mcp_endpoint"] = status == 200 && rpc["jsonrpc"] == "2.0"

	_, hasReset := paths["/reset"]
	_, hasStep := paths["/step"]
	_, hasState := paths["/state"]
	switch {
	case len(paths) == 0:
		rep.passed["mode_endpoint_consistency"] = false
	case hasReset:
		rep.mode = "simulation"
		rep.passed["mode_endpoint_consistency"] = hasStep && hasState
	default:
		rep.mode = "production"
		rep.passed["mode_endpoint_consistency"] = !hasStep && !hasState
	}
	return rep
}

// applianceDoor serves the control plane and MCP behind one door in local
// mode, as the appliance composes them: the validator reads both.
func (r *rig) applianceDoor(t *testing.T) string {
	t.Helper()
	d := auth.NewDoor(nil, auth.Limits{})
	r.c.Register(d)
	r.mcp.Register(d)
	ts := httptest.NewServer(d)
	t.Cleanup(ts.Close)
	return ts.URL
}

// TestOpenEnvValidate: `openenv validate` passes all six runtime checks in
// both modes and reads the mode deskenv runs in; in prod mode the OpenAPI
// document leaves out exactly the routes that answer 404 there.
func TestOpenEnvValidate(t *testing.T) {
	for _, tc := range []struct {
		mode Mode
		want string
	}{{ModeSim, "simulation"}, {ModeProd, "production"}} {
		t.Run(string(tc.mode), func(t *testing.T) {
			r := newRig(t, rigOptions{mode: tc.mode, tools: true})
			base := r.applianceDoor(t)
			rep := openEnvValidate(t, base)
			for _, c := range []string{"openapi_version_available", "health_endpoint", "metadata_endpoint", "schema_endpoint", "mcp_endpoint", "mode_endpoint_consistency"} {
				if !rep.passed[c] {
					t.Errorf("criterion %s fails", c)
				}
			}
			if rep.mode != tc.want {
				t.Errorf("the validator reads mode %q, want %q", rep.mode, tc.want)
			}

			var doc struct{ Paths map[string]any }
			getJSON(t, base+"/openapi.json", "", &doc)
			for _, rt := range controlRoutes {
				documented := slices.ContainsFunc(slices.Collect(maps.Keys(doc.Paths)), func(p string) bool { return pathMatches(p, rt.path) })
				if want := tc.mode == ModeSim || !rt.simOnly; documented != want {
					t.Errorf("%s %s: in the OpenAPI document %v, want %v (in %s mode)", rt.method, rt.path, documented, want, tc.mode)
				}
			}
		})
	}
}

// pathMatches reports whether an OpenAPI path template such as
// /api/tasks/{id} matches a concrete path.
func pathMatches(template, path string) bool {
	ts, ps := strings.Split(template, "/"), strings.Split(path, "/")
	if len(ts) != len(ps) {
		return false
	}
	for i := range ts {
		if ts[i] != ps[i] && !strings.HasPrefix(ts[i], "{") {
			return false
		}
	}
	return true
}

// TestOpenEnvClientExample replays docs/OPENENV.md's Python example as
// MCPToolClient sends it (simulation over /ws; use_production_mode is
// False by default): connect, reset into a task, list_tools,
// call_tool("computer", ...), and the close on leaving the with block,
// reading every answer as the client parses it (_parse_result).
func TestOpenEnvClientExample(t *testing.T) {
	r := newRig(t, rigOptions{mode: ModeSim, tools: true, tasks: loadExampleTasks(t)})
	conn := dialWS(t, r.srv.URL, nil)
	// _send_and_receive raises on {"type":"error"}; the rest is read from
	// data.
	exchange := func(msg string) map[string]any {
		t.Helper()
		var m struct {
			Type string
			Data map[string]any
		}
		if err := json.Unmarshal(wsRoundTrip(t, conn, []byte(msg)), &m); err != nil {
			t.Fatal(err)
		}
		if m.Type == "error" {
			t.Fatalf("%s: the client raises on %v", msg, m.Data)
		}
		obs, _ := m.Data["observation"].(map[string]any)
		if m.Type != "observation" || obs == nil {
			t.Fatalf("%s: %s %v, want an observation", msg, m.Type, m.Data)
		}
		return obs
	}

	// env.reset(task_id="hello-file", seed=1)
	obs := exchange(`{"type":"reset","data":{"task_id":"hello-file","seed":1}}`)
	md, _ := obs["metadata"].(map[string]any)
	if md["task_id"] != "hello-file" || !isString(md["instruction"]) {
		t.Errorf("reset: metadata %v, want the task id and its instruction (all MCPToolClient keeps)", md)
	}

	// env.list_tools()
	obs = exchange(`{"type":"step","data":{"type":"list_tools"}}`)
	tools, _ := obs["tools"].([]any)
	var names []string
	for _, v := range tools {
		tool, _ := v.(map[string]any)
		name, _ := tool["name"].(string)
		names = append(names, name)
	}
	if !slices.Contains(names, "computer") {
		t.Errorf("list_tools: %v lacks computer", names)
	}

	// env.call_tool("computer", action="left_click", coordinate=[640, 400])
	obs = exchange(`{"type":"step","data":{"type":"call_tool","tool_name":"computer","arguments":{"action":"left_click","coordinate":[640,400]}}}`)
	if obs["tool_name"] != "computer" || obs["error"] != nil {
		t.Errorf("call_tool: %v, want the computer tool's result and no error (the client raises on one)", obs)
	}
	if res, _ := obs["result"].(map[string]any); res == nil || res["is_error"] != false {
		t.Errorf("call_tool: result %v, want a call that went through", obs["result"])
	}

	// Leaving the with block: disconnect() sends close, then the server's
	// close frame says 1000.
	conn.WriteMessage(websocket.TextMessage, []byte(`{"type":"close"}`))
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, _, err := conn.ReadMessage(); !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
		t.Errorf("after close: %v, want a close frame with 1000 (normal closure)", err)
	}
}
