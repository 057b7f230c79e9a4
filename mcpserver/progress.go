package mcpserver

import (
	"context"
	"fmt"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// withProgress reports progress on a long call (run_script, wait, hold_key,
// a slow bash) every Config.ProgressEvery to a client that asked for it
// with a progressToken. Clients reset their request timeout on progress
// (the official TypeScript SDK's resetTimeoutOnProgress; its default
// timeout is 60 s), so a call that legitimately runs longer keeps its
// caller waiting for its result, or for the documented wall-time error,
// instead of being abandoned with its output lost.
func (s *Server) withProgress(next server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var token mcp.ProgressToken
		if req.Params.Meta != nil {
			token = req.Params.Meta.ProgressToken
		}
		srv := server.ServerFromContext(ctx)
		if token == nil || srv == nil {
			return next(ctx, req)
		}
		done := make(chan struct{})
		defer close(done)
		go s.reportProgress(ctx, srv, token, req.Params.Name, done)
		return next(ctx, req)
	}
}

// reportProgress sends a progress notification every ProgressEvery until
// done closes or the call is cancelled. Progress counts the reports: the
// length of a call is not known in advance, so there is no total.
func (s *Server) reportProgress(ctx context.Context, srv *server.MCPServer, token mcp.ProgressToken, tool string, done <-chan struct{}) {
	start := time.Now()
	t := time.NewTicker(s.cfg.ProgressEvery)
	defer t.Stop()
	for n := 1; ; n++ {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := srv.SendNotificationToClient(ctx, "notifications/progress", map[string]any{
			"progressToken": token,
			"progress":      n,
			"message":       fmt.Sprintf("%s is still running (%s)", tool, time.Since(start).Round(time.Second)),
		})
		if err != nil {
			s.log.Debug("progress notification not sent", "tool", tool, "err", err)
		}
	}
}
