package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/deskenv/deskenv/mcpserver"
)

// mcpTools adapts the MCP server to Tools, as cmd does: the OpenEnv face
// lists and calls the very tools agents get at /mcp.
type mcpTools struct{ s *mcpserver.Server }

func (m mcpTools) ListTools(ctx context.Context) ([]ToolInfo, error) {
	var out []ToolInfo
	for _, t := range m.s.Tools() {
		schema, err := json.Marshal(t.Schema)
		if err != nil {
			return nil, err
		}
		out = append(out, ToolInfo{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	return out, nil
}

func (m mcpTools) CallTool(ctx context.Context, name string, args json.RawMessage) (ToolResult, error) {
	res, err := m.s.CallTool(ctx, name, args)
	if errors.Is(err, mcpserver.ErrUnknownTool) {
		return ToolResult{}, fmt.Errorf("%w: %w", ErrUnknownTool, err)
	}
	if err != nil {
		return ToolResult{}, err
	}
	out := ToolResult{Structured: res.StructuredContent, IsError: res.IsError}
	for _, c := range res.Content {
		b, err := json.Marshal(c)
		if err != nil {
			return ToolResult{}, err
		}
		out.Content = append(out.Content, b)
	}
	return out, nil
}

// mcpClient connects a real MCP client (streamable HTTP) to the MCP server,
// as an agent does.
func mcpClient(t testing.TB, s *mcpserver.Server) *client.Client {
	t.Helper()
	ctx := context.Background()
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	tr, err := transport.NewStreamableHTTP(ts.URL + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "deskenv-control-test", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	return c
}
