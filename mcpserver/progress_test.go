package mcpserver

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/screen"
)

// TestProgress: a long call (wait 1.5 s) reports progress to a client that
// asked for it with a progressToken, over streamable HTTP with mcp-go's
// client; a call without a token gets none.
func TestProgress(t *testing.T) {
	d := testrig.Display(t, display.Config{})
	w, h := d.Size()
	space, err := hci.NewSpace(w, h, "off")
	if err != nil {
		t.Fatal(err)
	}
	ex, err := hci.NewExecutor(d, hci.Options{Space: space})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	capt, err := screen.NewCapturer(d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { capt.Close() })
	srv, err := New(ex, screen.NewShooter(capt, screen.ShooterOptions{}), capt, Config{ProgressEvery: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := transport.NewStreamableHTTP(testrig.Serve(t, srv.Handler()) + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var progress atomic.Int32
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == "notifications/progress" && n.Params.AdditionalFields["progressToken"] == "call-1" {
			progress.Add(1)
		}
	})
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		token mcp.ProgressToken
		want  func(n int32) bool
	}{
		{"with a token", "call-1", func(n int32) bool { return n >= 2 }},
		{"without", nil, func(n int32) bool { return n == 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			progress.Store(0)
			req := mcp.CallToolRequest{}
			req.Params.Name = "computer"
			req.Params.Arguments = map[string]any{"action": "wait", "duration": 1.5}
			if tc.token != nil {
				req.Params.Meta = &mcp.Meta{ProgressToken: tc.token}
			}
			res, err := c.CallTool(ctx, req)
			if err != nil || res.IsError {
				t.Fatalf("wait: %v %+v", err, res)
			}
			if n := progress.Load(); !tc.want(n) {
				t.Errorf("%d progress notifications for a 1.5 s call reporting every 0.2 s", n)
			}
		})
	}
}
