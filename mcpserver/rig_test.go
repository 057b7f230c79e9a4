package mcpserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image/png"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/internal/xprobe"
	"github.com/deskenv/deskenv/screen"
)

// rigConfig says what desktop a test needs.
type rigConfig struct {
	w, h    int
	model   string // hci.NewSpace model setting
	modes   []Mode
	wm      []string   // nil: none
	apps    [][]string // nil: none
	noProbe bool
	settle  screen.SettleOptions
	// findTools and traits pass through to Config.
	findTools  bool
	deferTools bool
	traits     []Trait
	page       PageSource
}

// rig is one real desktop (its own Xvfb) with the whole MCP stack over it and
// a probe window recording what X delivers.
type rig struct {
	d     *display.Display
	exec  *hci.Executor
	capt  *screen.Capturer
	shoot *screen.Shooter
	srv   *Server
	probe *xprobe.Probe
	space hci.Space
}

func newRig(t testing.TB, cfg rigConfig) *rig {
	t.Helper()
	testrig.NeedTools(t)
	// Empty rather than nil: a rig that names a window manager but no apps
	// gets no apps, not the appliance's session.
	wm, apps := cfg.wm, cfg.apps
	if wm == nil {
		wm = []string{}
	}
	if apps == nil {
		apps = [][]string{}
	}
	d := testrig.Display(t, display.Config{Width: cfg.w, Height: cfg.h, WindowManager: wm, Apps: apps})
	sw, sh := d.Size()
	space, err := hci.NewSpace(sw, sh, cfg.model)
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
	shoot := screen.NewShooter(capt, screen.ShooterOptions{ModelW: space.ModelW, ModelH: space.ModelH})
	settle := cfg.settle
	if settle == (screen.SettleOptions{}) {
		settle = screen.SettleOptions{Quiet: 50 * time.Millisecond, Max: time.Second}
	}
	srv, err := New(ex, shoot, capt, Config{Modes: cfg.modes, Settle: settle, FindTools: cfg.findTools, DeferTools: cfg.deferTools, Traits: cfg.traits, Page: cfg.page})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{d: d, exec: ex, capt: capt, shoot: shoot, srv: srv, space: space}
	if !cfg.noProbe {
		r.probe = testrig.Probe(t, d, xprobe.Options{Background: 0x336699})
	}
	return r
}

// transports are the ways a test reaches the server: streamable HTTP with
// mcp-go's default (newest) protocol, the same pinned to the classic
// initialize handshake most hosts still use, and stdio over pipes.
var transports = []string{"http", "http-legacy", "stdio"}

// connect starts a real mcp-go client to the rig's server over kind.
func (r *rig) connect(t testing.TB, kind string) *client.Client {
	t.Helper()
	ctx := context.Background()
	var c *client.Client
	switch kind {
	case "http", "http-legacy":
		url := testrig.Serve(t, r.srv.Handler())
		var opts []client.ClientOption
		if kind == "http-legacy" {
			// The legacy handshake is deprecated, and still what many
			// deployed clients speak: it stays tested until they move.
			//lint:ignore SA1019 testing the protocol older clients speak
			opts = append(opts, client.WithLegacyProtocolOnly())
		}
		tr, err := transport.NewStreamableHTTP(url + "/mcp")
		if err != nil {
			t.Fatal(err)
		}
		c = client.NewClient(tr, opts...)
	case "stdio":
		// client writes -> server reads; server writes -> client reads.
		cr, sw := io.Pipe()
		sr, cw := io.Pipe()
		sctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- r.srv.ServeStdio(sctx, sr, sw) }()
		t.Cleanup(func() {
			cancel()
			cw.Close()
			sw.Close()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("ServeStdio: %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Errorf("ServeStdio did not return after its input closed")
			}
		})
		c = client.NewClient(transport.NewIO(cr, cw, io.NopCloser(strings.NewReader(""))))
	default:
		t.Fatalf("unknown transport %q", kind)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "deskenv-test", Version: "1"}
	if kind == "http-legacy" || kind == "stdio" {
		init.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatalf("initialize over %s: %v", kind, err)
	}
	return c
}

// call calls a tool; args may be a map or json.RawMessage. A protocol error
// fails the test: every tool failure must come back as a result.
func call(t testing.TB, c *client.Client, name string, args any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("%s(%v): protocol error %v (tool failures must be isError results)", name, abbreviate(args), err)
	}
	return res
}

func abbreviate(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 120 {
		return string(b[:120]) + "..."
	}
	return string(b)
}

// resultText joins the text content of a result.
func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// resultImages decodes every image of a result fully (PNG) and returns their
// sizes, failing the test on anything malformed.
func resultImages(t testing.TB, res *mcp.CallToolResult) [][2]int {
	t.Helper()
	var sizes [][2]int
	for _, c := range res.Content {
		ic, ok := c.(mcp.ImageContent)
		if !ok {
			continue
		}
		if ic.MIMEType != "image/png" {
			t.Fatalf("image mimeType %q, want image/png", ic.MIMEType)
		}
		data, err := base64.StdEncoding.DecodeString(ic.Data)
		if err != nil {
			t.Fatalf("image data is not base64: %v", err)
		}
		img, err := png.Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("image does not decode as PNG: %v", err)
		}
		b := img.Bounds()
		sizes = append(sizes, [2]int{b.Dx(), b.Dy()})
	}
	return sizes
}
