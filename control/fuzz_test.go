package control

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// openenvFixtures returns the request bodies and /ws messages of the
// recorded OpenEnv exchanges in testdata/openenv, as fuzz seeds.
func openenvFixtures(f *testing.F) (reset, step, ws [][]byte) {
	files, err := filepath.Glob(filepath.Join("testdata", "openenv", "*.json"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no OpenEnv fixtures in testdata/openenv: %v", err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		var fx fixture
		if err := json.Unmarshal(b, &fx); err != nil {
			f.Fatalf("%s: %v", name, err)
		}
		reqs := append([]fixtureReq(nil), fx.Before...)
		if fx.Request != nil {
			reqs = append(reqs, *fx.Request)
		}
		for _, r := range reqs {
			switch r.Path {
			case "/reset":
				reset = append(reset, r.Body)
			case "/step":
				step = append(step, r.Body)
			}
		}
		for _, m := range fx.WS {
			if m.SendRaw != "" {
				ws = append(ws, []byte(m.SendRaw))
			}
			if len(m.Send) > 0 {
				ws = append(ws, m.Send)
			}
		}
	}
	return reset, step, ws
}

// mustMarshal asserts that an answer can be sent: a value that json cannot
// encode would end the /ws session or fail the HTTP response.
func mustMarshal(t *testing.T, what string, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("%s cannot be encoded: %v (%#v)", what, err, v)
	}
	return b
}

// FuzzOpenEnvReset feeds /reset bodies to parseOEReset. It accepts only
// seeds >= 0 and episode ids of at most 255 characters, and its validation
// errors encode as a 422 body.
func FuzzOpenEnvReset(f *testing.F) {
	reset, _, _ := openenvFixtures(f)
	for _, b := range reset {
		f.Add([]byte(b))
	}
	for _, s := range []string{``, `null`, `{}`, `{"seed":-1}`, `{"seed":1.5}`, `{"seed":9223372036854775808}`,
		`{"seed":"3"}`, `{"episode_id":"` + strings.Repeat("é", 256) + `"}`, `{"task_id":7}`, `[]`, `{"seed":1}{"seed":-1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		r, errs := parseOEReset(raw, []any{"body"})
		if errs != nil {
			mustMarshal(t, "the 422 body", map[string]any{"detail": errs})
			return
		}
		if r.Seed != nil && *r.Seed < 0 {
			t.Fatalf("accepted seed %d", *r.Seed)
		}
		if n := len([]rune(r.EpisodeID)); n > 255 {
			t.Fatalf("accepted an episode_id of %d characters", n)
		}
	})
}

// FuzzOpenEnvStep feeds /step bodies to parseOEStep. An accepted step has
// a list_tools or call_tool action, a call's arguments are a JSON object,
// timeout_s is positive and finite and request_id at most 255 characters;
// errors encode as a 422 body.
func FuzzOpenEnvStep(f *testing.F) {
	_, step, _ := openenvFixtures(f)
	for _, b := range step {
		f.Add([]byte(b))
	}
	for _, s := range []string{`{"action":{"type":"call_tool","tool_name":"computer","arguments":{"action":"screenshot"}},"timeout_s":1e308}`,
		`{"action":{"type":"call_tool","tool_name":"x","arguments":null}}`, `{"action":{"type":"list_tools","metadata":{}},"request_id":"r"}`,
		`{"action":[]}`, `{"action":{"type":"call_tool","tool_name":"x"},"timeout_s":-0}`, `{"action":{}}`, `"x"`, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		s, errs := parseOEStep(raw)
		if errs != nil {
			mustMarshal(t, "the 422 body", map[string]any{"detail": errs})
			_ = errs.Error()
			return
		}
		checkOEAction(t, s.Action)
		if s.TimeoutS < 0 || s.TimeoutS != s.TimeoutS {
			t.Fatalf("accepted timeout_s %g", s.TimeoutS)
		}
		if n := len([]rune(s.RequestID)); n > 255 {
			t.Fatalf("accepted a request_id of %d characters", n)
		}
	})
}

func checkOEAction(t *testing.T, a oeAction) {
	t.Helper()
	switch a.Type {
	case "list_tools":
	case "call_tool":
		checkArgs(t, a.Arguments)
	default:
		t.Fatalf("accepted action type %q", a.Type)
	}
}

func checkArgs(t *testing.T, args json.RawMessage) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(args, &m); err != nil || m == nil {
		t.Fatalf("tool arguments %s are not a JSON object", args)
	}
}

// fuzzTools is a Tools with one tool, echo, that answers with its arguments;
// it remembers any call whose arguments were not a JSON object.
type fuzzTools struct {
	mu  sync.Mutex
	bad string
}

func (ft *fuzzTools) ListTools(context.Context) ([]ToolInfo, error) {
	return []ToolInfo{{Name: "echo", Description: "echoes", InputSchema: json.RawMessage(`{"type":"object"}`)},
		{Name: "reset", Description: "a tool with a reserved name, hidden"}}, nil
}

func (ft *fuzzTools) CallTool(_ context.Context, name string, args json.RawMessage) (ToolResult, error) {
	var m map[string]any
	if err := json.Unmarshal(args, &m); err != nil || m == nil {
		ft.mu.Lock()
		ft.bad = fmt.Sprintf("tool %q called with arguments %s", name, args)
		ft.mu.Unlock()
	}
	if reservedTools[name] {
		ft.mu.Lock()
		ft.bad = fmt.Sprintf("reserved tool %q called", name)
		ft.mu.Unlock()
	}
	if name != "echo" {
		return ToolResult{}, fmt.Errorf("%w: %q", ErrUnknownTool, name)
	}
	text, _ := json.Marshal(map[string]any{"type": "text", "text": string(args)})
	return ToolResult{Content: []json.RawMessage{text}, Structured: m, IsError: bytes.Contains(args, []byte("fail"))}, nil
}

// FuzzWS feeds OpenEnv /ws messages to a session's handle, on a control
// plane in prod mode (reset and state refuse without touching a desktop)
// whose tools are fuzzTools. Every answer is one of the protocol's message
// types and encodes to JSON, and no tool is called with arguments that are
// not a JSON object, or by a reserved name.
func FuzzWS(f *testing.F) {
	_, _, ws := openenvFixtures(f)
	for _, b := range ws {
		f.Add(b)
	}
	for _, s := range []string{
		`{"type":"step","data":{"type":"call_tool","tool_name":"echo","arguments":{"a":[1,2.5e300,null]}}}`,
		`{"type":"step","data":{"type":"call_tool","tool_name":"echo","arguments":{"fail":true}}}`,
		`{"type":"step","data":{"type":"list_tools"}}`,
		`{"type":"mcp","data":{"jsonrpc":"2.0","method":"tools/call","id":"x","params":{"name":"echo","arguments":{"k":1}}}}`,
		`{"type":"mcp","data":{"jsonrpc":"2.0","method":"tools/call","id":1e400,"params":{"name":"reset"}}}`,
		`{"type":"mcp","data":{"jsonrpc":"2.0","method":"openenv/session/close","id":null,"params":{"session_id":"s"}}}`,
		`{"type":"reset","data":{"seed":1}}`, `{"type":"state"}`, `{"type":"close"}`, `{"type":"close"} trailing`, `7`, `{`,
	} {
		f.Add([]byte(s))
	}
	tools := &fuzzTools{}
	c := &Control{cfg: Config{Mode: ModeProd, MaxSessions: 1}, tools: tools, log: slog.New(slog.DiscardHandler)}
	s := &wsSession{c: c, id: "fuzz"}
	f.Fuzz(func(t *testing.T, raw []byte) {
		resp, done := s.handle(context.Background(), raw)
		tools.mu.Lock()
		bad := tools.bad
		tools.bad = ""
		tools.mu.Unlock()
		if bad != "" {
			t.Fatalf("message %q: %s", raw, bad)
		}
		if done {
			return
		}
		switch resp.Type {
		case "observation", "state", "mcp", "error":
		default:
			t.Fatalf("message %q answered with type %q", raw, resp.Type)
		}
		mustMarshal(t, "the answer", resp)
	})
}
