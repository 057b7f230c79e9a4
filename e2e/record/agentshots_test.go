package record_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/deskenv/deskenv/auth"
	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/mcpserver"
	"github.com/deskenv/deskenv/record"
	"github.com/deskenv/deskenv/screen"
)

// TestAgentStepsKeepReturnedScreenshots: an agent (mcp-go's client) calls
// the computer tool back to back with no pause, on an xterm that changes
// with every call; every recorded step's after is byte for byte the
// screenshot its call returned, and each step's before is the one returned
// by the call before it (issue 13: 6 of 9 matched when the recorder took
// its own a moment later).
func TestAgentStepsKeepReturnedScreenshots(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	d := testrig.Display(t, display.Config{Width: 800, Height: 600, WindowManager: []string{},
		Apps: [][]string{{"xterm", "-geometry", "80x24+0+0", "-T", "deskenv terminal"}}, Home: testrig.SessionHome(t)})
	space, err := hci.NewSpace(800, 600, "off")
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
	shoot := screen.NewShooter(capt, screen.ShooterOptions{})
	srv, err := mcpserver.New(ex, shoot, capt, mcpserver.Config{Settle: screen.SettleOptions{Quiet: 50 * time.Millisecond, Max: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	door := auth.NewDoor(nil, auth.Limits{})
	srv.Register(door)
	tr, err := transport.NewStreamableHTTP(testrig.Serve(t, door) + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	t.Cleanup(func() { c.Close() })
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		t.Fatal(err)
	}
	waitWindow(ctx, t, d, "deskenv terminal")

	rec, err := record.New(t.TempDir(), ex, shoot, capt, record.Options{FPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	ep, err := rec.Start(ctx, record.EpisodeInfo{ID: "agent", Source: "agent"})
	if err != nil {
		t.Fatal(err)
	}

	// Nine calls, each changing the screen, back to back.
	actions := []map[string]any{{"action": "left_click", "coordinate": []int{200, 150}}}
	for i := 0; i < 7; i++ {
		actions = append(actions, map[string]any{"action": "type", "text": fmt.Sprintf("echo %d", i)})
	}
	actions = append(actions, map[string]any{"action": "key", "text": "Return"})
	var returned [][]byte
	for _, a := range actions {
		req := mcp.CallToolRequest{}
		req.Params.Name = "computer"
		req.Params.Arguments = a
		res, err := c.CallTool(ctx, req)
		if err != nil || res.IsError {
			t.Fatalf("%v: %v %+v", a, err, res)
		}
		var img []byte
		for _, content := range res.Content {
			if ic, ok := content.(mcp.ImageContent); ok {
				img, _ = base64.StdEncoding.DecodeString(ic.Data)
			}
		}
		if img == nil {
			t.Fatalf("%v returned no screenshot", a)
		}
		returned = append(returned, img)
	}
	if _, err := rec.Stop(ctx, nil); err != nil {
		t.Fatal(err)
	}
	got, err := record.Open(ep.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Steps) != len(actions) {
		t.Fatalf("%d steps recorded for %d calls", len(got.Steps), len(actions))
	}
	same := 0
	for i, st := range got.Steps {
		after, err := os.ReadFile(filepath.Join(ep.Dir(), st.After))
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if st.AfterOwn {
			t.Errorf("step %d (%s) took the recorder's own after, though its call returned a screenshot", i, st.Action)
		}
		if bytes.Equal(after, returned[i]) {
			same++
		} else {
			t.Errorf("step %d (%s): the recorded after (%s) is not the screenshot the call returned", i, st.Action, st.After)
		}
		if i > 0 {
			before, _ := os.ReadFile(filepath.Join(ep.Dir(), st.Before))
			if !bytes.Equal(before, returned[i-1]) {
				t.Errorf("step %d (%s): the recorded before (%s) is not the screenshot the call before returned", i, st.Action, st.Before)
			}
		}
	}
	t.Logf("%d of %d recorded afters are the returned screenshots", same, len(actions))
}

// waitWindow waits until a window titled title is mapped.
func waitWindow(ctx context.Context, t *testing.T, d *display.Display, title string) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(wctx, "xdotool", "search", "--sync", "--onlyvisible", "--name", title)
	cmd.Env = append(os.Environ(), d.Env()...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("no window %q: %v %s", title, err, out)
	}
}
