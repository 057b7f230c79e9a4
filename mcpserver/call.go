package mcpserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/internal/wire"
	"github.com/deskenv/deskenv/screen"
)

// handleComputer runs the computer tool: the arguments are an Anthropic
// tool_use input, handed to hci.ParseAction as they came so its strict type
// checks see what the model sent.
func (s *Server) handleComputer(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	raw, err := rawArguments(req)
	if err != nil {
		return toolError(err), nil
	}
	return s.Run(ctx, "computer", raw, true), nil
}

// actionHandler runs the granular tool of one action: its arguments are the
// computer tool's fields for that action, so adding "action" makes them an
// hci.Action.
func (s *Server) actionHandler(sp actionSpec) server.ToolHandlerFunc {
	allowed := make([]string, 0, len(sp.fields)+1)
	var required []field
	for _, f := range sp.fields {
		allowed = append(allowed, f.name)
		if f.required {
			required = append(required, f)
		}
	}
	if !sp.readOnly {
		allowed = append(allowed, fScreenshot)
	}
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		raw, err := rawArguments(req)
		if err != nil {
			return toolError(fmt.Errorf("%s: %w", sp.name, err)), nil
		}
		action, observe, err := granularToAction(sp.name, allowed, required, raw)
		if err != nil {
			return toolError(err), nil
		}
		return s.Run(ctx, sp.name, action, observe), nil
	}
}

// granularToAction turns a granular tool's arguments into computer tool
// input, checking that only this tool's fields are there, and takes out the
// screenshot switch.
func granularToAction(name string, allowed []string, required []field, raw json.RawMessage) (json.RawMessage, bool, error) {
	fields := map[string]json.RawMessage{}
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return nil, false, fmt.Errorf("%s: arguments must be a JSON object", name)
	}
	var unknown []string
	for k := range fields {
		if !slices.Contains(allowed, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		takes := "no arguments"
		if len(allowed) > 0 {
			takes = strings.Join(allowed, ", ")
		}
		return nil, false, fmt.Errorf("%s does not take %s; it takes %s", name, strings.Join(unknown, ", "), takes)
	}
	// hci checks what the action needs; this checks what the tool's schema
	// promises on top (a click's coordinate).
	for _, f := range required {
		if v, ok := fields[f.name]; !ok || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			return nil, false, fmt.Errorf("%s requires %s: %s", name, f.name, f.desc)
		}
	}
	observe := true
	if v, ok := fields[fScreenshot]; ok {
		delete(fields, fScreenshot)
		if !bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			if err := json.Unmarshal(v, &observe); err != nil {
				return nil, false, fmt.Errorf("%s: screenshot must be true or false, got %s", name, truncateJSON(v))
			}
		}
	}
	fields[fAction], _ = json.Marshal(name)
	out, err := json.Marshal(fields)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", name, err)
	}
	return out, observe, nil
}

// rawArguments returns the call's arguments as JSON: the bytes off the wire
// when there are some, or the decoded value re-encoded (in-process calls).
// No arguments at all, or null, is an empty object. Every tool reads its
// arguments here, so this is where text that is not valid UTF-8 (or an
// unpaired surrogate escape) is refused, while the bytes are still as sent:
// decoding would turn it into U+FFFD and type or write that instead.
func rawArguments(req mcp.CallToolRequest) (json.RawMessage, error) {
	switch v := req.GetRawArguments().(type) {
	case json.RawMessage:
		if t := bytes.TrimSpace(v); len(t) == 0 || bytes.Equal(t, []byte("null")) {
			return json.RawMessage("{}"), nil
		}
		if err := wire.CheckJSON(v); err != nil {
			return nil, fmt.Errorf("the arguments are refused: %w", err)
		}
		return v, nil
	case nil:
		return json.RawMessage("{}"), nil
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("arguments cannot be read as JSON: %w", err)
		}
		return b, nil
	}
}

// Run executes one action given as computer tool input (raw JSON) for the
// tool named tool, as the agent, and builds its result: the action's text, and
// unless observe is false for a mutating action, the screenshot (after the
// screen settles) or zoom crop. Any failure is a tool error result, never a
// Go error: the model is meant to read it and correct itself.
func (s *Server) Run(ctx context.Context, tool string, raw json.RawMessage, observe bool) (res *mcp.CallToolResult) {
	start := time.Now()
	var a hci.Action
	defer func() {
		// A bug in a handler must cost the model one call, not the server.
		if r := recover(); r != nil {
			s.log.Error("mcp tool call panicked", "tool", tool, "action", a.Action, "panic", r)
			res = toolError(fmt.Errorf("internal error in %s: %v", tool, r))
		}
		if s.log.Enabled(ctx, slog.LevelDebug) {
			s.log.Debug("mcp tool call", "tool", tool, "action", a.String(), "error", res.IsError, "took", time.Since(start))
		}
	}()

	a, err := s.parseAction(raw)
	if err != nil {
		return toolError(err)
	}
	out, err := s.exec.Do(ctx, a, hci.SourceAgent)
	if err != nil {
		return toolError(err)
	}
	content := []mcp.Content{}
	if out.Text != "" {
		content = append(content, mcp.NewTextContent(out.Text))
	}
	if out.Zoom != nil || (out.Screenshot && (observe || !a.Mutates())) {
		img, err := s.observe(ctx, out)
		if err != nil {
			what := "the screenshot"
			if out.Zoom != nil {
				what = "the zoom crop"
			}
			if a.Mutates() {
				// Say it ran, or the model will do it again.
				return toolError(fmt.Errorf("%s was done, but %s after it failed: %w", a.Action, what, err))
			}
			return toolError(fmt.Errorf("%s: %s failed: %w", a.Action, what, err))
		}
		content = append(content, img)
	}
	if len(content) == 0 {
		content = append(content, mcp.NewTextContent("done"))
	}
	return &mcp.CallToolResult{Content: content}
}

// parseAction turns computer tool input into a checked action: strict JSON
// types, the server's text cap, and the action's own validation. Do validates
// too; checking here first words input errors for the model, without the
// package prefix Do's errors carry.
func (s *Server) parseAction(raw json.RawMessage) (hci.Action, error) {
	a, err := hci.ParseAction(raw)
	if err != nil {
		return a, err
	}
	if a.Action == hci.ActType && len(a.Text) > s.cfg.MaxTextBytes {
		return a, fmt.Errorf("type: text is %d bytes; this server types at most %d bytes in one action, split it into several", len(a.Text), s.cfg.MaxTextBytes)
	}
	if err := a.Validate(s.exec.Space()); err != nil {
		return a, err
	}
	return a, nil
}

// observe takes the picture an action's result asks for: the zoom crop at
// full resolution, or the screenshot, once the screen has settled if the
// action may have changed it.
func (s *Server) observe(ctx context.Context, out hci.Result) (mcp.Content, error) {
	var shot screen.Shot
	var err error
	if out.Zoom != nil {
		shot, err = s.shooter.Zoom(ctx, *out.Zoom)
	} else {
		if out.Settle {
			// A screen still changing at the cap is photographed anyway: the
			// model sees it is busy and can wait. The shot is of the frame
			// the settle ended on, not a second capture.
			if shot, _, _, err = s.shooter.SettleShot(ctx, s.cfg.Settle); err != nil {
				return nil, fmt.Errorf("waiting for the screen to settle: %w", err)
			}
		} else {
			shot, err = s.shooter.Shot(ctx)
		}
	}
	if err != nil {
		return nil, err
	}
	if out.Zoom == nil {
		// The recorder keeps this very screenshot as the step's after: the
		// agent's observation, byte for byte, not one taken a moment later.
		s.exec.Observed(out.Seq, hci.SourceAgent, hci.Observation{Data: shot.Data, MIME: shot.MIME,
			Width: shot.Width, Height: shot.Height, Hash: shot.Hash, Captured: shot.Captured})
	}
	return mcp.NewImageContent(s.base64(shot.Data), shot.MIME), nil
}

// base64 encodes an image, reusing the last encoding when the Shooter handed
// back the very same bytes (its cache of an unchanged screen).
func (s *Server) base64(data []byte) string {
	s.lastMu.Lock()
	defer s.lastMu.Unlock()
	if len(data) > 0 && len(data) == len(s.lastData) && &data[0] == &s.lastData[0] {
		return s.last64
	}
	s.lastData = data
	s.last64 = base64.StdEncoding.EncodeToString(data)
	return s.last64
}

// toolError is a result the model sees as a failed call (isError) with the
// reason.
func toolError(err error) *mcp.CallToolResult {
	msg := err.Error()
	if errors.Is(err, context.Canceled) {
		msg = "the call was cancelled: " + msg
	} else if errors.Is(err, context.DeadlineExceeded) {
		msg = "the call timed out: " + msg
	}
	return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(msg)}, IsError: true}
}

func truncateJSON(v json.RawMessage) string {
	return wire.Prefix(string(bytes.TrimSpace(v)), 40)
}
