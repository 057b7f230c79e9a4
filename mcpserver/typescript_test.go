package mcpserver

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/internal/xprobe"
)

// TestTypeScriptSDK drives the server with the official TypeScript SDK
// (e2e/mcp-ts/check.mjs) over streamable HTTP on a real port: tools/list,
// screenshots, a left_click that must land on the probe, a tool error.
func TestTypeScriptSDK(t *testing.T) {
	dir, err := filepath.Abs("../e2e/mcp-ts")
	if err != nil {
		t.Fatal(err)
	}
	testrig.NeedTools(t, "node")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		t.Fatalf("the TypeScript SDK is not installed: run `npm ci` in e2e/mcp-ts (make test does it): %v", err)
	}

	r := newRig(t, rigConfig{w: 1920, h: 1200, model: "auto"})
	mux := http.NewServeMux()
	mux.Handle("/mcp", r.srv.Handler())
	base := testrig.Serve(t, mux)

	ctx := testrig.Context(t, 60*time.Second)
	url := base + "/mcp"
	cmd := exec.CommandContext(ctx, "node", filepath.Join(dir, "check.mjs"), url, "1280x800", "640,400")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("check.mjs failed: %v\n%s%s", err, out, stderr)
	}
	t.Logf("check.mjs: %s", strings.TrimSpace(string(out)))

	if err := r.probe.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	sx, sy := r.space.ToScreen(640, 400)
	ev := events(r.probe.Take())
	if e, ok := ev.first(button(xprobe.ButtonPress, 1)); !ok || e.X != sx || e.Y != sy {
		t.Errorf("the TypeScript client's left_click did not land at screen %d,%d: %v", sx, sy, ev)
	}
}
