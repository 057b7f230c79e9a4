package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/gorilla/websocket"
)

// wsReadLimit bounds one incoming /ws message.
const wsReadLimit = 4 << 20

// ws serves OpenEnv's persistent session protocol (http_server.py,
// websocket_endpoint): one JSON message in, one out, until "close". Unlike
// OpenEnv, where each connection gets a fresh environment, every session
// drives the one desktop, so only MaxSessions (default 1) may be open.
func (c *Control) ws(w http.ResponseWriter, r *http.Request) {
	up := websocket.Upgrader{
		// sameOrigin has already refused other origins.
		CheckOrigin:     func(*http.Request) bool { return true },
		ReadBufferSize:  64 << 10,
		WriteBufferSize: 64 << 10,
	}
	// The slot is taken before the upgrade, so sessions are admitted in the
	// order their requests arrive.
	c.mu.Lock()
	full := c.sessions >= c.cfg.MaxSessions
	active := c.sessions
	if !full {
		c.sessions++
	}
	c.mu.Unlock()
	release := func() {}
	if !full {
		release = func() {
			c.mu.Lock()
			c.sessions--
			c.mu.Unlock()
		}
	}
	conn, err := up.Upgrade(w, r, nil)
	if err != nil {
		release()
		return // Upgrade has answered
	}
	// The slot is free before the client sees the connection close, so a
	// client that reconnects at once gets in. The close frame says 1000
	// (normal closure), as OpenEnv's server does, after a "close" message
	// and after refusing a session over capacity: without it clients see
	// 1006, an abnormal end, and may retry what was a clean answer.
	defer func() {
		release()
		conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		conn.Close()
	}()
	conn.SetReadLimit(wsReadLimit)

	s := &wsSession{c: c, conn: conn, id: newID()}
	if full {
		s.send(wsMsg{Type: "error", Data: map[string]any{
			"message":         fmt.Sprintf("Server at capacity: %d of %d sessions in use; deskenv serves one desktop, so close the other /ws session first", active, c.cfg.MaxSessions),
			"code":            wsCapacityReached,
			"active_sessions": active,
			"max_sessions":    c.cfg.MaxSessions,
		}})
		return
	}
	s.loop(r.Context())
}

type wsSession struct {
	c    *Control
	conn *websocket.Conn
	id   string
}

type wsMsg struct {
	Type string `json:"type"`
	Data any    `json:"data"`
}

func (s *wsSession) send(m wsMsg) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	s.conn.SetWriteDeadline(time.Now().Add(30 * time.Second))
	return s.conn.WriteMessage(websocket.TextMessage, b)
}

func wsError(code, msg string, extra map[string]any) wsMsg {
	d := map[string]any{"message": msg, "code": code}
	for k, v := range extra {
		d[k] = v
	}
	return wsMsg{Type: "error", Data: d}
}

func (s *wsSession) loop(ctx context.Context) {
	for {
		typ, raw, err := s.conn.ReadMessage()
		if err != nil {
			return
		}
		if typ != websocket.TextMessage && typ != websocket.BinaryMessage {
			continue
		}
		resp, done := s.handle(ctx, raw)
		if done {
			return
		}
		if err := s.send(resp); err != nil {
			return
		}
	}
}

// checkFields reports fields a message may not carry (OpenEnv's messages
// are extra="forbid").
func checkFields(m map[string]any, allowed ...string) ValidationError {
	ok := map[string]bool{}
	for _, a := range allowed {
		ok[a] = true
	}
	var errs ValidationError
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !ok[k] {
			errs = append(errs, FieldError{Type: "extra_forbidden", Loc: []any{k}, Msg: "Extra inputs are not permitted", Input: m[k]})
		}
	}
	return errs
}

func validationMsg(errs ValidationError) wsMsg {
	return wsError(wsValidationError, "Invalid message", map[string]any{"errors": errs})
}

// handle answers one message; done ends the session.
func (s *wsSession) handle(ctx context.Context, raw []byte) (wsMsg, bool) {
	m, refusal := decodeWS(raw)
	if m == nil {
		return refusal, false
	}
	switch msgType, _ := m["type"].(string); msgType {
	case "close":
		return wsMsg{}, true
	case "reset":
		return s.reset(ctx, m), false
	case "step":
		return s.step(ctx, m), false
	case "state":
		return s.state(ctx, m), false
	case "mcp":
		return s.mcp(ctx, m), false
	default:
		return wsError(wsUnknownType, fmt.Sprintf("Unknown message type: %v (use reset, step, state, close or mcp)", m["type"]), nil), false
	}
}

// decodeWS decodes a message as a JSON object, or says why it is not one.
func decodeWS(raw []byte) (map[string]any, wsMsg) {
	if errs := checkText(raw, nil); errs != nil {
		return nil, validationMsg(errs)
	}
	if m, ok := object(raw); ok {
		return m, wsMsg{}
	}
	if json.Valid(raw) {
		return nil, wsError(wsValidationError, "Invalid message: a message is a JSON object with a \"type\"", nil)
	}
	var v any
	err := json.Unmarshal(raw, &v)
	return nil, wsError(wsInvalidJSON, fmt.Sprintf("Invalid JSON: %v", err), nil)
}

// missingData and dataNotDict are the answers to a message whose data is
// absent or not an object.
func missingData(m map[string]any) wsMsg {
	return validationMsg(ValidationError{{Type: "missing", Loc: []any{"data"}, Msg: "Field required", Input: m}})
}

func dataNotDict(data any) wsMsg {
	return validationMsg(ValidationError{{Type: "dict_type", Loc: []any{"data"}, Msg: "Input should be a valid dictionary", Input: data}})
}

// reset answers {"type":"reset","data":{...}}: data is optional.
func (s *wsSession) reset(ctx context.Context, m map[string]any) wsMsg {
	if errs := checkFields(m, "type", "data"); errs != nil {
		return validationMsg(errs)
	}
	if s.c.cfg.Mode != ModeSim {
		return wsError(wsExecutionError, "reset is not available in prod mode: deskenv runs with --mode prod; run with --mode sim", nil)
	}
	dm := map[string]any{}
	if data := m["data"]; data != nil {
		var ok bool
		if dm, ok = data.(map[string]any); !ok {
			return dataNotDict(data)
		}
	}
	req, errs := parseOEResetMap(dm, []any{"data"})
	if errs != nil {
		return validationMsg(errs)
	}
	ep, err := s.c.oeResetRun(ctx, req)
	var ve ValidationError
	switch {
	case errors.As(err, &ve):
		return validationMsg(ve)
	case err != nil:
		return wsError(wsExecutionError, err.Error(), nil)
	}
	return wsMsg{Type: "observation", Data: resetObservation(ep)}
}

// step answers {"type":"step","data":action}.
func (s *wsSession) step(ctx context.Context, m map[string]any) wsMsg {
	if errs := checkFields(m, "type", "data"); errs != nil {
		return validationMsg(errs)
	}
	data, hasData := m["data"]
	if !hasData {
		return missingData(m)
	}
	a, errs := parseOEAction(data, nil)
	if errs != nil {
		return validationMsg(errs)
	}
	sctx, cancel := context.WithTimeout(ctx, defaultStepTimeout)
	defer cancel()
	res, err := s.c.step(sctx, a)
	if err != nil {
		return wsError(wsExecutionError, err.Error(), nil)
	}
	return wsMsg{Type: "observation", Data: res}
}

// state answers {"type":"state"}.
func (s *wsSession) state(ctx context.Context, m map[string]any) wsMsg {
	if errs := checkFields(m, "type"); errs != nil {
		return validationMsg(errs)
	}
	if s.c.cfg.Mode != ModeSim {
		return wsError(wsExecutionError, "state is not available in prod mode: deskenv runs with --mode prod; run with --mode sim", nil)
	}
	return wsMsg{Type: "state", Data: s.c.oeStateData(ctx)}
}

// mcp answers {"type":"mcp","data":JSON-RPC request}.
func (s *wsSession) mcp(ctx context.Context, m map[string]any) wsMsg {
	if errs := checkFields(m, "type", "data"); errs != nil {
		return validationMsg(errs)
	}
	data, hasData := m["data"]
	dm, ok := data.(map[string]any)
	switch {
	case !ok && !hasData:
		return missingData(m)
	case !ok:
		return dataNotDict(data)
	}
	sctx, cancel := context.WithTimeout(ctx, defaultStepTimeout)
	defer cancel()
	return wsMsg{Type: "mcp", Data: s.rpc(sctx, dm)}
}

// rpcFail is a JSON-RPC error answer.
func rpcFail(id any, code int, msg string) rpcResponse {
	return rpcResponse{ID: id, Error: &rpcError{Code: code, Message: msg}}
}

// rpc answers a JSON-RPC request as OpenEnv's mcp_handler does.
func (s *wsSession) rpc(ctx context.Context, req map[string]any) rpcResponse {
	id, method, params, fail := rpcRequest(req)
	if fail != nil {
		return *fail
	}
	switch method {
	case "openenv/session/create":
		return rpcResponse{ID: id, Result: map[string]any{"session_id": s.id}}
	case "openenv/session/close":
		return s.closeSession(id, params)
	case "tools/list":
		return s.listTools(ctx, id)
	case "tools/call":
		return s.callTool(ctx, id, params)
	default:
		return rpcFail(id, rpcMethodNotFound, "Method not found: "+method)
	}
}

// rpcRequest checks a JSON-RPC request's envelope: its id, version,
// method, fields and params.
func rpcRequest(req map[string]any) (id any, method string, params map[string]any, fail *rpcResponse) {
	refuse := func(id any, code int, msg string) (any, string, map[string]any, *rpcResponse) {
		r := rpcFail(id, code, msg)
		return nil, "", nil, &r
	}
	id = req["id"]
	switch id.(type) {
	case nil, string, json.Number:
	default:
		return refuse(nil, rpcInvalidRequest, "Invalid request: id must be a string, an integer or null")
	}
	if v, _ := req["jsonrpc"].(string); v != "2.0" {
		return refuse(id, rpcInvalidRequest, `Invalid request: jsonrpc must be "2.0"`)
	}
	method, ok := req["method"].(string)
	if !ok {
		return refuse(id, rpcInvalidRequest, "Invalid request: method is required and must be a string")
	}
	for k := range req {
		switch k {
		case "jsonrpc", "method", "params", "id":
		default:
			return refuse(id, rpcInvalidRequest, fmt.Sprintf("Invalid request: unexpected field %q", k))
		}
	}
	params = map[string]any{}
	if p, present := req["params"]; present && p != nil {
		if params, ok = p.(map[string]any); !ok {
			return refuse(id, rpcInvalidParams, "Params must be an object")
		}
	}
	return id, method, params, nil
}

// closeSession answers openenv/session/close: the websocket's own session
// closes with the websocket, and there is no other.
func (s *wsSession) closeSession(id any, params map[string]any) rpcResponse {
	sid, _ := params["session_id"].(string)
	switch {
	case sid == "":
		return rpcFail(id, rpcInvalidParams, "Invalid params - 'session_id' is required")
	case sid == s.id:
		return rpcFail(id, rpcInvalidRequest, "Cannot close active WebSocket-managed session via MCP method")
	default:
		return rpcFail(id, rpcInvalidParams, "Unknown session_id: "+sid)
	}
}

// listTools answers tools/list.
func (s *wsSession) listTools(ctx context.Context, id any) rpcResponse {
	tools, err := s.c.listTools(ctx)
	if err != nil {
		return rpcFail(id, rpcInternalError, err.Error())
	}
	list := make([]map[string]any, len(tools))
	for i, t := range tools {
		schema := t.InputSchema
		if len(schema) == 0 {
			schema = json.RawMessage(`{}`)
		}
		list[i] = map[string]any{"name": t.Name, "description": t.Description, "inputSchema": schema}
	}
	return rpcResponse{ID: id, Result: map[string]any{"tools": list}}
}

// callTool answers tools/call.
func (s *wsSession) callTool(ctx context.Context, id any, params map[string]any) rpcResponse {
	if s.c.tools == nil {
		return rpcFail(id, rpcInternalError, "Environment does not support MCP: no tools are wired into the control plane")
	}
	name, _ := params["name"].(string)
	if name == "" {
		return rpcFail(id, rpcInvalidParams, "Missing 'name' in params")
	}
	args := json.RawMessage("{}")
	if a, present := params["arguments"]; present && a != nil {
		if _, ok := a.(map[string]any); !ok {
			return rpcFail(id, rpcInvalidParams, "Invalid params - 'arguments' must be an object")
		}
		args, _ = json.Marshal(a)
	}
	if reservedTools[name] {
		return rpcFail(id, rpcInvalidParams, "Tool not found: "+name)
	}
	res, err := s.c.tools.CallTool(ctx, name, args)
	switch {
	case errors.Is(err, ErrUnknownTool):
		return rpcFail(id, rpcInvalidParams, "Tool not found: "+name)
	case err != nil:
		return rpcFail(id, rpcInternalError, err.Error())
	}
	return rpcResponse{ID: id, Result: callResult(res)}
}
