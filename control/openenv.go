package control

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/deskenv/deskenv/internal/wire"
)

// This file holds the wire shapes of OpenEnv's environment server, so its
// Python clients (EnvClient, GenericEnvClient, MCPToolClient) work against
// deskenv unchanged. They were transcribed from meta-pytorch/OpenEnv
// src/openenv/core/env_server/{types.py,mcp_types.py,serialization.py,
// http_server.py} and core/{env_client.py,mcp_client.py}; docs/OPENENV.md
// lists every shape with its source.

// FieldError is one validation error in pydantic's shape, as FastAPI returns
// them in a 422 body {"detail": [...]} and OpenEnv's /ws in
// {"type":"error","data":{"code":"VALIDATION_ERROR","errors":[...]}}.
type FieldError struct {
	Type  string         `json:"type"`
	Loc   []any          `json:"loc"`
	Msg   string         `json:"msg"`
	Input any            `json:"input"`
	Ctx   map[string]any `json:"ctx,omitempty"`
}

// ValidationError is a list of FieldErrors; its message reads like pydantic's.
type ValidationError []FieldError

func (v ValidationError) Error() string {
	parts := make([]string, len(v))
	for i, e := range v {
		loc := make([]string, len(e.Loc))
		for j, l := range e.Loc {
			loc[j] = fmt.Sprint(l)
		}
		parts[i] = strings.Join(loc, ".") + ": " + e.Msg
	}
	return strings.Join(parts, "; ")
}

// object decodes raw as a JSON object, keeping numbers exact.
func object(raw json.RawMessage) (map[string]any, bool) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil, false
	}
	// One value and nothing after it, as OpenEnv's parser (pydantic's
	// model_validate_json) demands: `{"type":"close"} junk` is not a message.
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	m, ok := v.(map[string]any)
	return m, ok
}

func loc(prefix []any, names ...any) []any {
	out := append([]any(nil), prefix...)
	return append(out, names...)
}

// maxToolName bounds a tool_name: MCP names tools in at most 128
// characters, and the name is echoed in the observation.
const maxToolName = 128

// oeAction is a decoded OpenEnv MCP action: list_tools or call_tool.
type oeAction struct {
	Type      string          // "list_tools" or "call_tool"
	ToolName  string          // call_tool
	Arguments json.RawMessage // call_tool: a JSON object
}

// parseOEAction validates an action as OpenEnv's deserialize_action does for
// an MCP environment: "type" picks ListToolsAction or CallToolAction (both
// extra="forbid", with an optional "metadata" object); any other type fails
// the way pydantic fails on CallToolAction's literal.
func parseOEAction(v any, at []any) (oeAction, ValidationError) {
	m, ok := v.(map[string]any)
	if !ok {
		return oeAction{}, ValidationError{{Type: "dict_type", Loc: at, Msg: "Input should be a valid dictionary", Input: v}}
	}
	var errs ValidationError
	typ, _ := m["type"].(string)
	allowed := map[string]bool{"type": true, "metadata": true}
	switch typ {
	case "list_tools":
	case "call_tool":
		allowed["tool_name"], allowed["arguments"] = true, true
	default:
		// OpenEnv hands other types to the environment's action class,
		// CallToolAction for MCP environments: its literal rejects them.
		var in any = m["type"]
		if _, present := m["type"]; !present {
			in = nil
		}
		errs = append(errs, FieldError{Type: "literal_error", Loc: loc(at, "type"), Msg: "Input should be 'list_tools' or 'call_tool'",
			Input: in, Ctx: map[string]any{"expected": "'list_tools' or 'call_tool'"}})
		return oeAction{}, errs
	}
	a := oeAction{Type: typ}
	if md, present := m["metadata"]; present {
		if _, ok := md.(map[string]any); !ok {
			errs = append(errs, FieldError{Type: "dict_type", Loc: loc(at, "metadata"), Msg: "Input should be a valid dictionary", Input: md})
		}
	}
	if typ == "call_tool" {
		errs = append(errs, parseCallTool(m, at, &a)...)
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !allowed[k] {
			errs = append(errs, FieldError{Type: "extra_forbidden", Loc: loc(at, k), Msg: "Extra inputs are not permitted", Input: m[k]})
		}
	}
	if len(errs) > 0 {
		return oeAction{}, errs
	}
	return a, nil
}

// parseCallTool reads a call_tool action's tool_name and arguments into a.
func parseCallTool(m map[string]any, at []any, a *oeAction) ValidationError {
	var errs ValidationError
	name, present := m["tool_name"]
	switch s, ok := name.(string); {
	case !present:
		errs = append(errs, FieldError{Type: "missing", Loc: loc(at, "tool_name"), Msg: "Field required", Input: m})
	case !ok:
		errs = append(errs, FieldError{Type: "string_type", Loc: loc(at, "tool_name"), Msg: "Input should be a valid string", Input: name})
	case len(s) > maxToolName:
		errs = append(errs, FieldError{Type: "string_too_long", Loc: loc(at, "tool_name"), Msg: fmt.Sprintf("String should have at most %d characters", maxToolName), Input: wire.Prefix(s, wire.QuoteBytes), Ctx: map[string]any{"max_length": maxToolName}})
	default:
		a.ToolName = s
	}
	a.Arguments = json.RawMessage("{}")
	if args, present := m["arguments"]; present {
		if _, ok := args.(map[string]any); !ok {
			errs = append(errs, FieldError{Type: "dict_type", Loc: loc(at, "arguments"), Msg: "Input should be a valid dictionary", Input: args})
		} else {
			a.Arguments, _ = json.Marshal(args)
		}
	}
	return errs
}

// oeReset is OpenEnv's ResetRequest (extra fields allowed) with deskenv's
// own extra, task_id.
type oeReset struct {
	Seed      *int64
	EpisodeID string
	TaskID    string
}

// parseOEReset validates a reset body. An empty body is an empty request,
// as FastAPI's Body(default_factory=ResetRequest) makes it.
func parseOEReset(raw json.RawMessage, at []any) (oeReset, ValidationError) {
	var r oeReset
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return r, nil
	}
	if verr := checkText(raw, at); verr != nil {
		return r, verr
	}
	m, ok := object(raw)
	if !ok {
		return r, ValidationError{{Type: "model_attributes_type", Loc: at, Msg: "Input should be a valid dictionary or object to extract fields from", Input: wire.Prefix(string(raw), wire.QuoteBytes)}}
	}
	return parseOEResetMap(m, at)
}

func parseOEResetMap(m map[string]any, at []any) (oeReset, ValidationError) {
	var r oeReset
	var errs ValidationError
	add := func(e *FieldError) {
		if e != nil {
			errs = append(errs, *e)
		}
	}
	if v, present := m["seed"]; present && v != nil {
		var e *FieldError
		r.Seed, e = resetSeed(v, at)
		add(e)
	}
	if v, present := m["episode_id"]; present && v != nil {
		var e *FieldError
		r.EpisodeID, e = boundedString(v, loc(at, "episode_id"), 255, runeCount)
		add(e)
	}
	if v, present := m["task_id"]; present && v != nil {
		var e *FieldError
		r.TaskID, e = boundedString(v, loc(at, "task_id"), maxIDBytes, byteCount)
		add(e)
	}
	return r, errs
}

// resetSeed checks a reset's seed: an integer >= 0.
func resetSeed(v any, at []any) (*int64, *FieldError) {
	n, ok := v.(json.Number)
	i, err := n.Int64()
	switch {
	case !ok || err != nil:
		return nil, &FieldError{Type: "int_type", Loc: loc(at, "seed"), Msg: "Input should be a valid integer", Input: v}
	case i < 0:
		return nil, &FieldError{Type: "greater_than_equal", Loc: loc(at, "seed"), Msg: "Input should be greater than or equal to 0", Input: i, Ctx: map[string]any{"ge": 0}}
	}
	return &i, nil
}

// runeCount and byteCount measure a string in characters and in bytes.
func runeCount(s string) int { return len([]rune(s)) }
func byteCount(s string) int { return len(s) }

// boundedString checks a string field of at most limit, as length counts.
func boundedString(v any, at []any, limit int, length func(string) int) (string, *FieldError) {
	s, ok := v.(string)
	switch {
	case !ok:
		return "", &FieldError{Type: "string_type", Loc: at, Msg: "Input should be a valid string", Input: v}
	case length(s) > limit:
		return "", &FieldError{Type: "string_too_long", Loc: at, Msg: fmt.Sprintf("String should have at most %d characters", limit), Input: wire.Prefix(s, wire.QuoteBytes), Ctx: map[string]any{"max_length": limit}}
	}
	return s, nil
}

// checkText refuses a message whose JSON text is not valid UTF-8 or holds an
// unpaired surrogate escape, before decoding turns either into U+FFFD: text
// typed or put on the clipboard must be what the client sent.
func checkText(raw []byte, at []any) ValidationError {
	if err := wire.CheckJSON(raw); err != nil {
		return ValidationError{{Type: "unicode_error", Loc: at, Msg: "Input should be valid UTF-8: " + err.Error(), Input: nil}}
	}
	return nil
}

// maxStepTimeoutS bounds timeout_s: a step's longest action takes 100 s,
// and an unbounded float would overflow the Duration it becomes.
const maxStepTimeoutS = 3600

// oeStep is OpenEnv's StepRequest: action (required), timeout_s (> 0),
// request_id (at most 255 characters); extra fields allowed and ignored.
type oeStep struct {
	Action    oeAction
	TimeoutS  float64
	RequestID string
}

func parseOEStep(raw json.RawMessage) (oeStep, ValidationError) {
	var s oeStep
	m, verrs := stepObject(raw)
	if verrs != nil {
		return s, verrs
	}
	act, errs := stepAction(m)
	if v, present := m["timeout_s"]; present && v != nil {
		var e *FieldError
		if s.TimeoutS, e = stepTimeout(v); e != nil {
			errs = append(errs, *e)
		}
	}
	if v, present := m["request_id"]; present && v != nil {
		var e *FieldError
		if s.RequestID, e = boundedString(v, []any{"body", "request_id"}, 255, runeCount); e != nil {
			errs = append(errs, *e)
		}
	}
	if len(errs) > 0 {
		return s, errs
	}
	// OpenEnv validates the action against the action model itself, so its
	// locations start at the action's fields, not at body.action.
	a, verrs := parseOEAction(act, nil)
	if verrs != nil {
		return s, verrs
	}
	s.Action = a
	return s, nil
}

// stepObject decodes a step body as a JSON object, or says why it is not
// one.
func stepObject(raw json.RawMessage) (map[string]any, ValidationError) {
	if verr := checkText(raw, []any{"body"}); verr != nil {
		return nil, verr
	}
	if m, ok := object(raw); ok {
		return m, nil
	}
	switch {
	case len(bytes.TrimSpace(raw)) == 0:
		return nil, ValidationError{{Type: "missing", Loc: []any{"body"}, Msg: "Field required", Input: nil}}
	case !json.Valid(raw):
		return nil, ValidationError{{Type: "json_invalid", Loc: []any{"body", 0}, Msg: "JSON decode error", Input: map[string]any{}, Ctx: map[string]any{"error": "Expecting value"}}}
	default:
		return nil, ValidationError{{Type: "model_attributes_type", Loc: []any{"body"}, Msg: "Input should be a valid dictionary or object to extract fields from", Input: wire.Prefix(string(raw), wire.QuoteBytes)}}
	}
}

// stepAction is a step's action, which must be present and an object.
func stepAction(m map[string]any) (any, ValidationError) {
	act, present := m["action"]
	if !present {
		return nil, ValidationError{{Type: "missing", Loc: []any{"body", "action"}, Msg: "Field required", Input: m}}
	}
	if _, isMap := act.(map[string]any); !isMap {
		return nil, ValidationError{{Type: "dict_type", Loc: []any{"body", "action"}, Msg: "Input should be a valid dictionary", Input: act}}
	}
	return act, nil
}

// stepTimeout checks timeout_s: a finite number in (0, maxStepTimeoutS].
func stepTimeout(v any) (float64, *FieldError) {
	n, ok := v.(json.Number)
	f, err := n.Float64()
	switch {
	case !ok || err != nil || math.IsInf(f, 0) || math.IsNaN(f):
		return 0, &FieldError{Type: "float_type", Loc: []any{"body", "timeout_s"}, Msg: "Input should be a valid number", Input: v}
	case f <= 0:
		return 0, &FieldError{Type: "greater_than", Loc: []any{"body", "timeout_s"}, Msg: "Input should be greater than 0", Input: f, Ctx: map[string]any{"gt": 0}}
	case f > maxStepTimeoutS:
		return 0, &FieldError{Type: "less_than_equal", Loc: []any{"body", "timeout_s"}, Msg: fmt.Sprintf("Input should be less than or equal to %d", maxStepTimeoutS), Input: f, Ctx: map[string]any{"le": maxStepTimeoutS}}
	}
	return f, nil
}

// oeResult is OpenEnv's {observation, reward, done}: the observation's own
// reward and done lifted out, its metadata dropped (serialize_observation).
type oeResult struct {
	Observation any      `json:"observation"`
	Reward      *float64 `json:"reward"`
	Done        bool     `json:"done"`
}

// oeTool is mcp_types.Tool.
type oeTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// oeToolError is mcp_types.ToolError; ErrorType is one of execution_error,
// invalid_args, transport_error, tool_not_found, timeout.
type oeToolError struct {
	ErrorType string `json:"error_type"`
	Message   string `json:"message"`
}

// oeListTools is ListToolsObservation as serialised.
type oeListTools struct {
	Tools []oeTool `json:"tools"`
}

// oeCallTool is CallToolObservation as serialised.
type oeCallTool struct {
	ToolName string       `json:"tool_name"`
	Result   any          `json:"result"`
	Error    *oeToolError `json:"error"`
}

// oeCallResult is what OpenEnv puts in CallToolObservation.result after a
// successful call: FastMCP's CallToolResult dumped by pydantic. The Python
// MCPToolClient.call_tool returns its "data".
type oeCallResult struct {
	Content           []json.RawMessage `json:"content"`
	StructuredContent any               `json:"structured_content"`
	Meta              any               `json:"meta"`
	Data              any               `json:"data"`
	IsError           bool              `json:"is_error"`
}

// oeMetadata is EnvironmentMetadata.
type oeMetadata struct {
	Name             string  `json:"name"`
	Description      string  `json:"description"`
	ReadmeContent    *string `json:"readme_content"`
	Version          *string `json:"version"`
	Author           *string `json:"author"`
	DocumentationURL *string `json:"documentation_url"`
}

// WebSocket error codes (types.WSErrorCode).
const (
	wsInvalidJSON     = "INVALID_JSON"
	wsUnknownType     = "UNKNOWN_TYPE"
	wsValidationError = "VALIDATION_ERROR"
	wsExecutionError  = "EXECUTION_ERROR"
	wsCapacityReached = "CAPACITY_REACHED"
	wsFactoryError    = "FACTORY_ERROR"
	wsSessionError    = "SESSION_ERROR"
)

// JSON-RPC error codes (mcp_types.JsonRpcErrorCode).
const (
	rpcParseError     = -32700
	rpcInvalidRequest = -32600
	rpcMethodNotFound = -32601
	rpcInvalidParams  = -32602
	rpcInternalError  = -32603
	rpcServerError    = -32000
)

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data"`
}

// rpcResponse serialises as OpenEnv's JsonRpcResponse.model_dump: jsonrpc
// and id always, then result or error, never both.
type rpcResponse struct {
	ID     any
	Result any
	Error  *rpcError
}

func (r rpcResponse) MarshalJSON() ([]byte, error) {
	m := map[string]any{"jsonrpc": "2.0", "id": r.ID}
	if r.Error != nil {
		m["error"] = r.Error
	} else {
		m["result"] = r.Result
	}
	return json.Marshal(m)
}

// The JSON Schemas served at /schema, written as pydantic's
// model_json_schema() prints them for the classes OpenEnv uses.
var (
	listToolsActionSchema = json.RawMessage(`{"additionalProperties":false,"description":"Request list of available tools from the environment.","properties":{"metadata":{"additionalProperties":true,"description":"Additional metadata for the action","title":"Metadata","type":"object"},"type":{"const":"list_tools","default":"list_tools","description":"Action type discriminator","title":"Type","type":"string"}},"title":"ListToolsAction","type":"object"}`)
	callToolActionSchema  = json.RawMessage(`{"additionalProperties":false,"description":"Call a specific tool via MCP.","properties":{"metadata":{"additionalProperties":true,"description":"Additional metadata for the action","title":"Metadata","type":"object"},"type":{"const":"call_tool","default":"call_tool","description":"Action type discriminator","title":"Type","type":"string"},"tool_name":{"description":"Name of the tool to call","title":"Tool Name","type":"string"},"arguments":{"additionalProperties":true,"description":"Arguments to pass to the tool","title":"Arguments","type":"object"}},"required":["tool_name"],"title":"CallToolAction","type":"object"}`)
	stateSchema           = json.RawMessage(`{"additionalProperties":true,"description":"Base class for environment state.","properties":{"episode_id":{"anyOf":[{"type":"string"},{"type":"null"}],"default":null,"description":"Unique identifier for the current episode","title":"Episode Id"},"step_count":{"default":0,"description":"Number of steps taken in the current episode","minimum":0,"title":"Step Count","type":"integer"},"task_id":{"anyOf":[{"type":"string"},{"type":"null"}],"description":"deskenv: the task of the episode","title":"Task Id"},"instruction":{"anyOf":[{"type":"string"},{"type":"null"}],"description":"deskenv: the task's instruction","title":"Instruction"}},"title":"State","type":"object"}`)
	observationSchema     = json.RawMessage(`{"anyOf":[
{"additionalProperties":false,"description":"deskenv: the observation after a reset: the episode, its task's instruction and a screenshot.","properties":{"episode_id":{"type":"string"},"task_id":{"anyOf":[{"type":"string"},{"type":"null"}]},"instruction":{"anyOf":[{"type":"string"},{"type":"null"}]},"seed":{"anyOf":[{"type":"integer"},{"type":"null"}]},"params":{"anyOf":[{"type":"object"},{"type":"null"}],"description":"deskenv: the values the seed chose for the task's parameters"},"screenshot":{"description":"MCP image content: base64 data and its MIME type, in model space","properties":{"type":{"const":"image"},"data":{"type":"string"},"mimeType":{"type":"string"},"width":{"type":"integer"},"height":{"type":"integer"}},"type":"object"},"metadata":{"type":"object"}},"required":["episode_id"],"title":"DeskResetObservation","type":"object"},
{"additionalProperties":false,"description":"Response containing available tools.","properties":{"tools":{"items":{"properties":{"name":{"type":"string"},"description":{"type":"string"},"input_schema":{"type":"object"}},"required":["name","description","input_schema"],"title":"Tool","type":"object"},"title":"Tools","type":"array"}},"required":["tools"],"title":"ListToolsObservation","type":"object"},
{"additionalProperties":false,"description":"Response from tool execution.","properties":{"tool_name":{"title":"Tool Name","type":"string"},"result":{"default":null,"title":"Result"},"error":{"anyOf":[{"properties":{"error_type":{"enum":["execution_error","invalid_args","transport_error","tool_not_found","timeout"],"type":"string"},"message":{"type":"string"}},"required":["error_type","message"],"title":"ToolError","type":"object"},{"type":"null"}],"default":null}},"required":["tool_name"],"title":"CallToolObservation","type":"object"}]}`)
)

func actionSchema() json.RawMessage {
	b, _ := json.Marshal(map[string]any{
		"oneOf":         []json.RawMessage{listToolsActionSchema, callToolActionSchema},
		"discriminator": map[string]any{"propertyName": "type"},
		"title":         "DeskAction",
		"description":   "An MCP action: list the desktop's tools, or call one (the computer tool takes Anthropic's computer_20251124 input).",
	})
	return b
}
