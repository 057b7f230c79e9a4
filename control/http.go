package control

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/deskenv/deskenv/auth"
	"github.com/deskenv/deskenv/baseline"
	"github.com/deskenv/deskenv/internal/wire"
)

//go:embed openapi.json
var openAPIDoc []byte

// OpenAPI is the OpenAPI 3 document of the control plane, served at
// /openapi.json.
func OpenAPI() []byte { return append([]byte(nil), openAPIDoc...) }

// maxBody bounds request bodies: actions and reset requests are small.
const maxBody = 1 << 20

// defaultStepTimeout bounds a step without timeout_s: longer than the
// longest action (wait and hold_key take up to 100 s).
const defaultStepTimeout = 120 * time.Second

// Register puts the control plane's routes behind the appliance's front
// door d: the native REST API under /api/, the
// OpenEnv face (/health, /metadata, /schema, /state, /reset, /step, /ws),
// and /openapi.json. Everything but /health needs an operator
// token, except the two an annotator's task panel uses (the task list and
// reset); an agent's token gets 403. In prod mode reset, step, state and the
// task endpoints answer 404 saying so. The door checks tokens, origins and
// body sizes; nothing here does.
func (c *Control) Register(d *auth.Door) { d.Mount(c.routes()...) }

// routes are the control plane's routes and their policies.
func (c *Control) routes() []auth.Route {
	var rs []auth.Route
	route := func(role auth.Role, pattern string, h http.HandlerFunc, simOnly bool) {
		var handler http.Handler = h
		if simOnly && c.cfg.Mode != ModeSim {
			handler = http.HandlerFunc(c.prodOff)
		}
		// /ws is OpenEnv's websocket: browsers cannot set a header on it.
		ws := strings.HasSuffix(pattern, " /ws")
		rs = append(rs, auth.Route{Pattern: pattern, Handler: handler,
			Policy: auth.Policy{Roles: []auth.Role{role}, BodyLimit: maxBody, URLToken: ws, Stream: ws}})
	}
	op := func(pattern string, h http.HandlerFunc, simOnly bool) { route(auth.RoleOperator, pattern, h, simOnly) }
	// An annotator (and so an operator) picks a task and resets into it;
	// the task itself (GET /api/tasks/{id}) holds its checker, which stays
	// the operators'.
	ann := func(pattern string, h http.HandlerFunc, simOnly bool) { route(auth.RoleAnnotator, pattern, h, simOnly) }
	// Native REST.
	ann("POST /api/reset", c.apiReset, true)
	op("GET /api/state", c.apiState, true)
	ann("GET /api/tasks", c.apiTasks, true)
	op("GET /api/tasks/{id}", c.apiTask, true)
	op("GET /api/episodes", c.apiEpisodes, false)
	op("GET /api/episodes/{id}", c.apiEpisode, false)
	op("POST /api/episodes/{id}/end", c.apiEnd, true)
	op("GET /api/stats", c.apiStats, false)
	op("/api/", c.apiNotFound, false)
	op("GET /openapi.json", c.openAPI, false)

	// OpenEnv.
	rs = append(rs, auth.Route{Pattern: "GET /health", Policy: auth.Policy{Public: true}, Handler: http.HandlerFunc(c.health)})
	op("GET /metadata", c.oeMetadata, false)
	op("GET /schema", c.oeSchema, false)
	op("GET /state", c.oeState, true)
	op("POST /reset", c.oeReset, true)
	op("POST /step", c.oeStep, true)
	op("GET /ws", c.ws, false)
	return rs
}

// Handler serves the control plane alone behind a door of its own, checking
// a's tokens (nil: local mode, every request allowed): for tests and for programs that embed the control
// plane, with /metrics serving the control plane's series alone. The
// appliance calls Register on its one door instead, and serves /metrics
// from its registry, where every feature's series meet.
func (c *Control) Handler(a *auth.Auth) http.Handler {
	d := auth.NewDoor(a, auth.Limits{})
	c.Register(d)
	reg := prometheus.NewRegistry()
	reg.MustRegister(c.Collector())
	d.Handle("GET /metrics", auth.Policy{Roles: []auth.Role{auth.RoleOperator}}, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return d
}

func (c *Control) prodOff(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusNotFound, fmt.Sprintf("%s %s is not available in prod mode: deskenv runs with --mode prod, where reset, step, state and tasks are off so nobody resets the desktop under its user; run with --mode sim to use it", r.Method, r.URL.Path))
}

func (c *Control) apiNotFound(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusNotFound, fmt.Sprintf("no endpoint %s %s: see /openapi.json for the API", r.Method, r.URL.Path))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

// readBody reads a bounded JSON body.
func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return nil, fmt.Errorf("read the request body: %w", err)
	}
	if len(b) > maxBody {
		return nil, fmt.Errorf("read the request body: it is larger than %d bytes", maxBody)
	}
	return b, nil
}

// statusOf maps an error to an HTTP status.
func statusOf(err error) int {
	var ve ValidationError
	switch {
	case errors.As(err, &ve):
		return http.StatusUnprocessableEntity
	case errors.Is(err, ErrBadInput):
		return http.StatusBadRequest
	case errors.Is(err, ErrUnknownTask), errors.Is(err, ErrUnknownEpisode), errors.Is(err, ErrProdMode):
		return http.StatusNotFound
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	case errors.Is(err, context.Canceled):
		return 499
	default:
		return http.StatusInternalServerError
	}
}

// --- native REST ---

func (c *Control) apiReset(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	var req ResetRequest
	if len(bytes.TrimSpace(body)) > 0 {
		if err := wire.CheckJSON(body); err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("reset request: %v", err))
			return
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			// The decoder's message may quote an unknown field whole.
			writeError(w, http.StatusBadRequest, fmt.Sprintf("reset request: %s (fields: task_id string, seed integer >= 0, episode_id string; all optional)", wire.Prefix(err.Error(), 200)))
			return
		}
	}
	if req.Seed != nil && *req.Seed < 0 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("reset request: seed %d is negative: use an integer >= 0", *req.Seed))
		return
	}
	if g := c.cfg.ResetGuard; g != nil {
		if err := g(r.Context()); err != nil {
			writeError(w, http.StatusConflict, err.Error())
			return
		}
	}
	ep, err := c.Reset(r.Context(), req)
	if err != nil {
		writeError(w, statusOf(err), err.Error())
		return
	}
	writeJSON(w, http.StatusOK, ep)
}

// DesktopState is what GET /api/state reports about the desktop.
type DesktopState struct {
	Display     string            `json:"display"`
	Width       int               `json:"width"`
	Height      int               `json:"height"`
	Windows     []baseline.Window `json:"windows"`
	HeldKeys    []string          `json:"held_keys"`
	HeldButtons []int             `json:"held_buttons"`
	Healthy     bool              `json:"healthy"`
	Error       string            `json:"error,omitempty"`
}

// State is GET /api/state.
type State struct {
	Mode            Mode              `json:"mode"`
	Episode         *Episode          `json:"episode"`
	Tasks           int               `json:"tasks"`
	Desktop         DesktopState      `json:"desktop"`
	BaselineWindows []baseline.Window `json:"baseline_windows"`
	Baseline        string            `json:"baseline,omitempty"`
}

// State reports the mode, the running episode and the desktop's windows and
// held input.
func (c *Control) State(ctx context.Context) State {
	d := c.d
	w, h := d.Size()
	st := State{Mode: c.cfg.Mode, Episode: c.Current(), Tasks: len(c.taskIDs), BaselineWindows: c.BaselineWindows(),
		Desktop: DesktopState{Display: d.Name(), Width: w, Height: h, Windows: []baseline.Window{}}}
	if c.base != nil && c.base.Home() != nil {
		st.Baseline = c.base.Home().Dir()
	}
	keys, buttons := c.exec.Held()
	st.Desktop.HeldKeys = make([]string, len(keys))
	for i, k := range keys {
		st.Desktop.HeldKeys[i] = k.String()
	}
	st.Desktop.HeldButtons = append([]int{}, buttons...)
	if err := d.Health(ctx); err != nil {
		st.Desktop.Error = err.Error()
		return st
	}
	st.Desktop.Healthy = true
	if ws, err := baseline.ListWindows(d.Name()); err == nil {
		st.Desktop.Windows = ws
	}
	return st
}

func (c *Control) apiState(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	c.drainBus(ctx)
	writeJSON(w, http.StatusOK, c.State(ctx))
}

// TaskSummary is a task as GET /api/tasks lists it.
type TaskSummary struct {
	ID          string   `json:"id"`
	Instruction string   `json:"instruction"`
	Tags        []string `json:"tags,omitempty"`
}

func (c *Control) apiTasks(w http.ResponseWriter, r *http.Request) {
	out := []TaskSummary{}
	for _, t := range c.Tasks() {
		out = append(out, TaskSummary{ID: t.ID, Instruction: t.Instruction, Tags: t.Tags})
	}
	writeJSON(w, http.StatusOK, map[string]any{"tasks": out})
}

func (c *Control) apiTask(w http.ResponseWriter, r *http.Request) {
	if err := checkID("task id", r.PathValue("id")); err != nil {
		writeError(w, statusOf(err), err.Error())
		return
	}
	t, err := c.Task(r.PathValue("id"))
	if err != nil {
		writeError(w, statusOf(err), err.Error())
		return
	}
	writeJSON(w, http.StatusOK, t)
}

func (c *Control) apiEpisodes(w http.ResponseWriter, r *http.Request) {
	c.drainBus(r.Context()) // step counts include the action just taken
	q := r.URL.Query()
	limit := 100
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("limit %s: use a number >= 0 (0: all)", wire.Quote(s)))
			return
		}
		limit = n
	}
	eps := c.Episodes(limit, q.Get("task_id"))
	if eps == nil {
		eps = []Episode{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"episodes": eps})
}

func (c *Control) apiEpisode(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := checkID("episode id", id); err != nil {
		writeError(w, statusOf(err), err.Error())
		return
	}
	c.drainBus(r.Context()) // step counts include the action just taken
	if id == "current" {
		if ep := c.Current(); ep != nil {
			writeJSON(w, http.StatusOK, ep)
		} else {
			writeError(w, http.StatusNotFound, "no episode is running (POST /api/reset starts one)")
		}
		return
	}
	ep, err := c.Episode(id)
	if err != nil {
		writeError(w, statusOf(err), err.Error())
		return
	}
	writeJSON(w, http.StatusOK, ep)
}

func (c *Control) apiEnd(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := checkID("episode id", id); err != nil {
		writeError(w, statusOf(err), err.Error())
		return
	}
	if id == "current" {
		id = ""
	}
	ep, err := c.End(r.Context(), id)
	if err != nil {
		writeError(w, statusOf(err), err.Error())
		return
	}
	writeJSON(w, http.StatusOK, ep)
}

func (c *Control) apiStats(w http.ResponseWriter, r *http.Request) {
	c.drainBus(r.Context())
	writeJSON(w, http.StatusOK, c.Stats())
}

func (c *Control) openAPI(w http.ResponseWriter, r *http.Request) {
	doc := openAPIDoc
	if c.cfg.Mode != ModeSim {
		doc = prodOpenAPI()
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(doc)
}

// simOnlyPaths are the OpenAPI paths whose routes answer 404 in prod mode
// (routes, prodOff); TestOpenEnvValidate holds the two lists together.
func simOnlyPaths() []string {
	return []string{"/api/reset", "/api/state", "/api/tasks", "/api/tasks/{id}", "/api/episodes/{id}/end", "/state", "/reset", "/step"}
}

// prodOpenAPI is the OpenAPI document without the routes prod mode does not
// serve. OpenEnv's production servers leave /reset, /step and /state out of
// theirs, and `openenv validate` tells the mode from those paths.
func prodOpenAPI() []byte {
	var doc map[string]any
	if err := json.Unmarshal(openAPIDoc, &doc); err != nil {
		return openAPIDoc // embedded and decoded by the tests: not reached
	}
	if paths, ok := doc["paths"].(map[string]any); ok {
		for _, p := range simOnlyPaths() {
			delete(paths, p)
		}
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return openAPIDoc
	}
	return b
}

// --- OpenEnv ---

func (c *Control) health(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	body := map[string]any{"status": "healthy"}
	// OpenEnv's HealthResponse forbids extra fields, so a healthy answer
	// carries what died and when, and who the session runs as, only when
	// asked (?details=1); an unhealthy one always says it. Either way only
	// to operators (local mode counts): /health is open to anyone, and
	// process ids and user names are not anyone's business.
	faults, err := c.Health(ctx)
	operator := auth.Allows(auth.RoleFrom(r.Context()), auth.RoleOperator)
	if d := r.URL.Query().Get("details"); operator && (err != nil || d == "1" || d == "true") {
		body["details"] = faults
	}
	if err != nil {
		body["status"], body["error"] = "unhealthy", err.Error()
		writeJSON(w, http.StatusServiceUnavailable, body)
		return
	}
	writeJSON(w, http.StatusOK, body)
}

func (c *Control) oeMetadata(w http.ResponseWriter, r *http.Request) {
	md := oeMetadata{Name: c.cfg.Name, Description: c.cfg.Description}
	if c.cfg.Version != "" {
		v := c.cfg.Version
		md.Version = &v
	}
	doc := "https://github.com/deskenv/deskenv/blob/main/docs/OPENENV.md"
	md.DocumentationURL = &doc
	writeJSON(w, http.StatusOK, md)
}

func (c *Control) oeSchema(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]json.RawMessage{
		"action":      actionSchema(),
		"observation": observationSchema,
		"state":       stateSchema,
	})
}

// oeStateData is OpenEnv's State with deskenv's extra fields.
func (c *Control) oeStateData(ctx context.Context) map[string]any {
	c.drainBus(ctx)
	st := map[string]any{"episode_id": nil, "step_count": 0, "mode": string(c.cfg.Mode)}
	if ep := c.Current(); ep != nil {
		st["episode_id"] = ep.ID
		st["step_count"] = ep.Steps
		st["task_id"] = nullable(ep.TaskID)
		st["instruction"] = nullable(ep.Instruction)
		st["seed"] = ep.Seed
		st["params"] = ep.Params
		st["started_at"] = ep.StartedAt
		st["agent_steps"] = ep.AgentSteps
		st["human_steps"] = ep.HumanSteps
		st["status"] = ep.Status
	} else if last := c.Episodes(1, ""); len(last) == 1 {
		// No episode runs: how the last one ended, so a client whose
		// episode was interrupted (the X server restarted) learns why.
		end := map[string]any{"episode_id": last[0].ID, "status": last[0].Status, "end_reason": last[0].EndReason}
		if last[0].Interruption != "" {
			end["interruption"] = last[0].Interruption
		}
		st["last_episode"] = end
	}
	return st
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func (c *Control) oeState(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, c.oeStateData(r.Context()))
}

// oeDetail writes FastAPI's error shape.
func oeDetail(w http.ResponseWriter, status int, detail any) {
	writeJSON(w, status, map[string]any{"detail": detail})
}

// resetObservation is the observation after a reset, OpenEnv-shaped.
func resetObservation(ep *Episode) oeResult {
	obs := map[string]any{
		"episode_id":  ep.ID,
		"task_id":     nullable(ep.TaskID),
		"instruction": nullable(ep.Instruction),
		"seed":        ep.Seed,
		"params":      ep.Params,
		"screenshot":  ep.Observation,
		// MCPToolClient keeps only "metadata" of an observation it does not
		// know, so the instruction travels there too.
		"metadata": map[string]any{"episode_id": ep.ID, "task_id": nullable(ep.TaskID), "instruction": nullable(ep.Instruction), "seed": ep.Seed, "params": ep.Params},
	}
	return oeResult{Observation: obs}
}

// oeResetRun validates and runs an OpenEnv reset body.
func (c *Control) oeResetRun(ctx context.Context, req oeReset) (*Episode, error) {
	if req.TaskID != "" {
		if _, err := c.Task(req.TaskID); err != nil {
			return nil, ValidationError{{Type: "value_error", Loc: []any{"body", "task_id"}, Msg: "Value error, " + err.Error(), Input: req.TaskID}}
		}
	}
	return c.Reset(ctx, ResetRequest{TaskID: req.TaskID, Seed: req.Seed, EpisodeID: req.EpisodeID})
}

func (c *Control) oeReset(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		oeDetail(w, http.StatusBadRequest, err.Error())
		return
	}
	if len(bytes.TrimSpace(body)) > 0 && !json.Valid(body) {
		oeDetail(w, http.StatusUnprocessableEntity, []FieldError{{Type: "json_invalid", Loc: []any{"body", 0}, Msg: "JSON decode error", Input: map[string]any{}, Ctx: map[string]any{"error": "Expecting value"}}})
		return
	}
	req, verrs := parseOEReset(body, []any{"body"})
	if verrs != nil {
		oeDetail(w, http.StatusUnprocessableEntity, verrs)
		return
	}
	ep, err := c.oeResetRun(r.Context(), req)
	if err != nil {
		var ve ValidationError
		if errors.As(err, &ve) {
			oeDetail(w, http.StatusUnprocessableEntity, ve)
			return
		}
		oeDetail(w, statusOf(err), err.Error())
		return
	}
	writeJSON(w, http.StatusOK, resetObservation(ep))
}

func (c *Control) oeStep(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		oeDetail(w, http.StatusBadRequest, err.Error())
		return
	}
	req, verrs := parseOEStep(body)
	if verrs != nil {
		oeDetail(w, http.StatusUnprocessableEntity, verrs)
		return
	}
	timeout := defaultStepTimeout
	if req.TimeoutS > 0 {
		timeout = time.Duration(req.TimeoutS * float64(time.Second))
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	res, err := c.step(ctx, req.Action)
	if err != nil {
		oeDetail(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// reservedTools may not be tools: they are the environment's own verbs
// (mcp_types.RESERVED_TOOL_NAMES).
var reservedTools = map[string]bool{"reset": true, "step": true, "state": true, "close": true}

func (c *Control) listTools(ctx context.Context) ([]ToolInfo, error) {
	if c.tools == nil {
		return nil, errors.New("no MCP tools are wired into the control plane")
	}
	tools, err := c.tools.ListTools(ctx)
	if err != nil {
		return nil, fmt.Errorf("list tools: %w", err)
	}
	out := tools[:0:0]
	for _, t := range tools {
		if reservedTools[t.Name] {
			c.log.Warn("a tool with a reserved name is hidden from OpenEnv clients", "tool", t.Name)
			continue
		}
		out = append(out, t)
	}
	return out, nil
}

// step runs one OpenEnv MCP action. Tool failures are observations (with
// error set), as in OpenEnv; only a missing tool surface is an error.
func (c *Control) step(ctx context.Context, a oeAction) (oeResult, error) {
	if c.tools == nil {
		return oeResult{}, errors.New("no MCP tools are wired into the control plane: steps cannot run")
	}
	switch a.Type {
	case "list_tools":
		tools, err := c.listTools(ctx)
		if err != nil {
			return oeResult{}, err
		}
		obs := oeListTools{Tools: make([]oeTool, len(tools))}
		for i, t := range tools {
			schema := t.InputSchema
			if len(schema) == 0 {
				schema = json.RawMessage(`{}`)
			}
			obs.Tools[i] = oeTool{Name: t.Name, Description: t.Description, InputSchema: schema}
		}
		return oeResult{Observation: obs}, nil
	default:
		return oeResult{Observation: c.callTool(ctx, a.ToolName, a.Arguments)}, nil
	}
}

// callTool calls a tool and shapes the outcome as CallToolObservation.
func (c *Control) callTool(ctx context.Context, name string, args json.RawMessage) oeCallTool {
	obs := oeCallTool{ToolName: name}
	if reservedTools[name] {
		obs.Error = &oeToolError{ErrorType: "tool_not_found", Message: fmt.Sprintf("%s is not a tool: reset, step, state and close are the environment's own verbs (and the agent cannot reach them)", wire.Quote(name))}
		return obs
	}
	res, err := c.tools.CallTool(ctx, name, args)
	switch {
	case errors.Is(err, ErrUnknownTool):
		obs.Error = &oeToolError{ErrorType: "tool_not_found", Message: err.Error()}
	case errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil:
		obs.Error = &oeToolError{ErrorType: "timeout", Message: fmt.Sprintf("tool %q did not finish in time: %v", name, err)}
	case err != nil:
		obs.Error = &oeToolError{ErrorType: "execution_error", Message: err.Error()}
	case res.IsError:
		// OpenEnv's MCP client raises on a tool error, and the environment
		// files it by its message.
		msg := contentText(res.Content)
		kind := "execution_error"
		if l := strings.ToLower(msg); strings.Contains(l, "invalid") || strings.Contains(l, "argument") {
			kind = "invalid_args"
		}
		obs.Error = &oeToolError{ErrorType: kind, Message: msg}
	default:
		obs.Result = callResult(res)
	}
	return obs
}

func callResult(res ToolResult) oeCallResult {
	content := res.Content
	if content == nil {
		content = []json.RawMessage{}
	}
	out := oeCallResult{Content: content, StructuredContent: res.Structured, IsError: res.IsError}
	if t := contentText(res.Content); t != "" {
		out.Data = t
	}
	return out
}

// contentText joins the text blocks of MCP content.
func contentText(content []json.RawMessage) string {
	var parts []string
	for _, raw := range content {
		var b struct{ Type, Text string }
		if json.Unmarshal(raw, &b) == nil && b.Type == "text" && b.Text != "" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}
