package dialect

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/deskenv/deskenv/control"
	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/mcpserver"
	"github.com/deskenv/deskenv/screen"
	"github.com/deskenv/deskenv/task"
)

// TestGeminiSeesTheURL: in an episode of browser-about (whose setup starts
// the desktop's Chromium over its DevTools pipe), Gemini's navigate, done
// with the keyboard and address bar as a person would, answers with the URL
// the browser then shows, read over that pipe through the control plane;
// go_back answers with the page before.
func TestGeminiSeesTheURL(t *testing.T) {
	testrig.NeedTools(t, "openbox", "chromium")
	ctx := testrig.Context(t, 3*time.Minute)
	tasks, err := task.Load(filepath.Join(testrig.ModuleRoot(t), "tasks"))
	if err != nil {
		t.Fatal(err)
	}
	home := testrig.SessionHome(t)
	d := testrig.Display(t, display.Config{Home: home, WindowManager: []string{"openbox"}})
	ex, err := hci.NewExecutor(d, hci.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	capt, err := screen.NewCapturer(d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { capt.Close() })
	sp := ex.Space()
	shooter := screen.NewShooter(capt, screen.ShooterOptions{ModelW: sp.ModelW, ModelH: sp.ModelH})
	ctl, err := control.New(d, ex, capt, shooter, tasks, nil, control.Config{Mode: control.ModeSim, Home: home})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctl.Close() })
	srv, err := mcpserver.New(ex, shooter, capt, mcpserver.Config{
		Modes:  []mcpserver.Mode{mcpserver.ModeGemini},
		Settle: screen.SettleOptions{Quiet: 80 * time.Millisecond, Max: 2 * time.Second},
		Page:   ctl,
	})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := transport.NewStreamableHTTP(testrig.Serve(t, srv.Handler()) + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	t.Cleanup(func() { c.Close() })
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ctl.Reset(ctx, control.ResetRequest{TaskID: "browser-about"}); err != nil {
		t.Fatal(err)
	}

	answerURL := func(name string, args map[string]any) string {
		t.Helper()
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = name, args
		res, err := c.CallTool(ctx, req)
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", name, err, res)
		}
		var texts []string
		for _, ct := range res.Content {
			if tc, ok := ct.(mcp.TextContent); ok {
				texts = append(texts, tc.Text)
			}
		}
		return strings.Join(texts, " ")
	}
	// urlAfter calls a function and wants its answer to carry url. The page
	// may still be loading when the screen has settled: then, once the
	// browser is there, a hover (which changes nothing here) must say so.
	urlAfter := func(name string, args map[string]any, url string) {
		t.Helper()
		want := `{"url":"` + url + `"}`
		if got := answerURL(name, args); got == want {
			return
		}
		testrig.WaitWithin(t, 20*time.Second, "the browser at "+url, func() bool {
			u, err := ctl.PageURL(ctx)
			return err == nil && u == url
		})
		if got := answerURL("hover_at", map[string]any{"x": 999, "y": 999}); got != want {
			t.Fatalf("after %s the answer's text is %q, want %s", name, got, want)
		}
	}
	index := "file://" + filepath.Join(home, "site", "index.html")
	about := "file://" + filepath.Join(home, "site", "about.html")
	urlAfter("click_at", map[string]any{"x": 500, "y": 500}, index)
	urlAfter("navigate", map[string]any{"url": about}, about)
	urlAfter("go_back", map[string]any{}, index)
}
