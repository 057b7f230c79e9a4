package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/deskenv/deskenv/internal/wire"
)

// findToolsTool searches the other tools, so a client can start with a
// short list and fetch full schemas when it needs them.
func (s *Server) findToolsTool() Tool {
	return Tool{
		Name:  "find_tools",
		Title: "Find tools",
		Description: "Search this server's tools by words in their names and descriptions (e.g. \"click\", \"scroll page\", " +
			"\"keyboard\"). Returns the matching tools with their full input schemas as JSON, best match first.",
		Schema: mcp.ToolInputSchema{
			Type: "object",
			Properties: map[string]any{"query": map[string]any{"type": "string",
				"description": "Words to look for; a tool matches if any word is in its name, title or description."}},
			Required: []string{"query"}, AdditionalProperties: false,
		},
		Annotations: annotations(true, false, true),
		Handler:     s.handleFindTools,
	}
}

func words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// FindTools returns the enabled tools matching query, best first: a word in
// the name counts more than one in the title or description.
func (s *Server) FindTools(query string) []Tool {
	q := words(query)
	type hit struct {
		t     Tool
		score int
		order int
	}
	var hits []hit
	for i, t := range s.Tools() {
		if t.Name == "find_tools" || t.Name == "call_tool" {
			continue
		}
		name := strings.ToLower(t.Name)
		text := " " + strings.Join(words(t.Title+" "+t.Description), " ") + " "
		score := 0
		for _, w := range q {
			if strings.Contains(name, w) {
				score += 3
			}
			if strings.Contains(text, " "+w) {
				score++
			}
		}
		if score > 0 {
			hits = append(hits, hit{t, score, i})
		}
	}
	sort.SliceStable(hits, func(a, b int) bool { return hits[a].score > hits[b].score })
	out := make([]Tool, len(hits))
	for i, h := range hits {
		out[i] = h.t
	}
	return out
}

func (s *Server) handleFindTools(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	raw, err := rawArguments(req)
	if err != nil {
		return toolError(fmt.Errorf("find_tools: %w", err)), nil
	}
	var args struct {
		Query *string `json:"query"`
	}
	if err := json.Unmarshal(raw, &args); err != nil || args.Query == nil || len(words(*args.Query)) == 0 {
		return toolError(errors.New(`find_tools needs "query": one or more words to look for in tool names and descriptions`)), nil
	}
	found := s.FindTools(*args.Query)
	if len(found) == 0 {
		var names []string
		for _, t := range s.Tools() {
			names = append(names, t.Name)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(fmt.Sprintf(
			"no tool matches %q; the tools are: %s", *args.Query, strings.Join(names, ", ")))}}, nil
	}
	list := make([]mcp.Tool, len(found))
	for i, t := range found {
		list[i] = t.MCPTool()
	}
	b, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return toolError(fmt.Errorf("find_tools: %w", err)), nil
	}
	return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(string(b))}}, nil
}

// callToolTool runs any tool by name: with DeferTools it is how a host that
// only calls listed tools reaches the ones find_tools revealed.
func (s *Server) callToolTool() Tool {
	return Tool{
		Name:  "call_tool",
		Title: "Call a tool",
		Description: "Run a tool that find_tools found, by name, with its arguments as its schema describes. " +
			"The answer is that tool's answer.",
		Schema: mcp.ToolInputSchema{
			Type: "object",
			Properties: map[string]any{
				"name":      map[string]any{"type": "string", "description": "The tool's name, as find_tools gave it."},
				"arguments": map[string]any{"type": "object", "description": "The tool's arguments; omit for none."},
			},
			Required: []string{"name"}, AdditionalProperties: false,
		},
		Annotations: annotations(false, true, false),
		Handler:     s.handleCallTool,
	}
}

func (s *Server) handleCallTool(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	raw, err := rawArguments(req)
	if err != nil {
		return toolError(fmt.Errorf("call_tool: %w", err)), nil
	}
	var args struct {
		Name      *string         `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&args); err != nil || args.Name == nil {
		return toolError(errors.New(`call_tool takes "name" (a tool's name) and "arguments" (an object)`)), nil
	}
	if *args.Name == "call_tool" {
		return toolError(errors.New("call_tool: call the tool itself, not call_tool through call_tool")), nil
	}
	res, err := s.CallTool(ctx, *args.Name, args.Arguments)
	if err != nil {
		return toolError(fmt.Errorf("call_tool: %w", err)), nil
	}
	return res, nil
}

// ErrUnknownTool is wrapped by CallTool for a name no tool of the server has.
var ErrUnknownTool = errors.New("unknown tool")

// CallTool runs the tool name with args (a JSON object; empty or null for
// none), as tools/call would, for the faces that are not MCP: call_tool, and
// OpenEnv's step through cmd. A tool's own failure is a result with IsError;
// an unknown name is an error wrapping ErrUnknownTool that lists the tools.
func (s *Server) CallTool(ctx context.Context, name string, args json.RawMessage) (*mcp.CallToolResult, error) {
	tools := s.Tools()
	for _, t := range tools {
		if t.Name != name {
			continue
		}
		if t := bytes.TrimSpace(args); len(t) > 0 && !bytes.Equal(t, []byte("null")) {
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(t, &obj); err != nil {
				return nil, fmt.Errorf("the arguments of %s must be a JSON object: %w", name, err)
			}
		}
		// The raw bytes go on, not a decoded map: the tools check types on
		// what the caller sent (5.0 is not an integer), as over tools/call.
		req := mcp.CallToolRequest{}
		req.Params.Name = name
		req.Params.Arguments = args
		return t.Handler(ctx, req)
	}
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	return nil, unknownToolError{name, names}
}

// unknownToolError names the tools there are; it is ErrUnknownTool.
type unknownToolError struct {
	name  string
	tools []string
}

func (e unknownToolError) Error() string {
	return fmt.Sprintf("there is no tool %s; the tools are %s", wire.Quote(e.name), strings.Join(e.tools, ", "))
}

func (e unknownToolError) Is(target error) bool { return target == ErrUnknownTool }
