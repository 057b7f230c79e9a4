package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode"

	"github.com/mark3labs/mcp-go/mcp"
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
		if t.Name == "find_tools" {
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
