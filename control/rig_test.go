package control

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/hci"
	deskimage "github.com/deskenv/deskenv/image"
	"github.com/deskenv/deskenv/task"
)

// rig is a whole desktop with its control plane, as cmd wires it: Xvfb,
// openbox and an xterm, the executor, capture, and Control over a temporary
// home.
type rig struct {
	d     *display.Display
	exec  *hci.Executor
	capt  *deskimage.Capturer
	shoot *deskimage.Shooter
	c     *Control
	home  string
	srv   *httptest.Server
}

type rigOptions struct {
	mode  Mode
	tasks []*task.Task
	auth  *Auth
	tools bool // wire the computer tool
	apps  [][]string
}

func newRig(t testing.TB, o rigOptions) *rig {
	t.Helper()
	needTools(t, "openbox", "xterm")
	home := seedHome(t)
	apps := o.apps
	if apps == nil {
		apps = [][]string{{"xterm"}}
	}
	log := slog.New(slog.DiscardHandler)
	if os.Getenv("DESKENV_TEST_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	d, err := display.Start(context.Background(), display.Config{
		Width: 1280, Height: 800, Home: home,
		WindowManager: []string{"openbox"}, Apps: apps, Logger: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	space, err := hci.NewSpace(1280, 800, "auto")
	if err != nil {
		t.Fatal(err)
	}
	ex, err := hci.NewExecutor(d, hci.Options{Space: space, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	capt, err := deskimage.NewCapturer(d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { capt.Close() })
	shoot := deskimage.NewShooter(capt, deskimage.ShooterOptions{ModelW: space.ModelW, ModelH: space.ModelH})
	r := &rig{d: d, exec: ex, capt: capt, shoot: shoot, home: home}
	cfg := Config{
		Mode: o.mode, Display: d, Exec: ex, Capturer: capt, Shooter: shoot, Tasks: o.tasks, Auth: o.auth,
		Settle:      deskimage.SettleOptions{Quiet: 80 * time.Millisecond, Max: 2 * time.Second},
		Logger:      log,
		BaselineDir: filepath.Join(t.TempDir(), "baseline"),
		Version:     "test",
	}
	if o.tools {
		cfg.Tools = &computerTools{exec: ex, shoot: shoot, capt: capt}
	}
	r.c, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.c.Close() })
	r.srv = httptest.NewServer(r.c.Handler())
	t.Cleanup(r.srv.Close)
	return r
}

// computerTools offers Anthropic's computer tool over the executor, the way
// the MCP server does, for the OpenEnv step tests: it runs the action as the
// agent and returns the text and the screenshot.
//
// TODO(lead): replace with the mcpserver adapter once mcpserver builds here.
type computerTools struct {
	exec  *hci.Executor
	shoot *deskimage.Shooter
	capt  *deskimage.Capturer
}

func (ct *computerTools) ListTools(ctx context.Context) ([]ToolInfo, error) {
	schema := `{"type":"object","properties":{"action":{"type":"string","enum":` + mustJSON(hci.Actions()) + `},"coordinate":{"type":"array","items":{"type":"integer"}},"text":{"type":"string"},"duration":{"type":"number"}},"required":["action"]}`
	return []ToolInfo{{Name: "computer", Description: "Use the mouse and keyboard and take screenshots.", InputSchema: json.RawMessage(schema)}}, nil
}

func (ct *computerTools) CallTool(ctx context.Context, name string, args json.RawMessage) (ToolResult, error) {
	if name != "computer" {
		return ToolResult{}, fmt.Errorf("%w %q: this server has computer", ErrUnknownTool, name)
	}
	text := func(s string) json.RawMessage {
		return json.RawMessage(mustJSON(map[string]string{"type": "text", "text": s}))
	}
	a, err := hci.ParseAction(args)
	if err != nil {
		return ToolResult{Content: []json.RawMessage{text(err.Error())}, IsError: true}, nil
	}
	out, err := ct.exec.Do(ctx, a, hci.SourceAgent)
	if err != nil {
		return ToolResult{Content: []json.RawMessage{text(err.Error())}, IsError: true}, nil
	}
	var content []json.RawMessage
	if out.Text != "" {
		content = append(content, text(out.Text))
	}
	if out.Screenshot {
		if out.Settle {
			ct.capt.Settle(ctx, deskimage.SettleOptions{})
		}
		shot, err := ct.shoot.Shot(ctx)
		if err != nil {
			return ToolResult{}, err
		}
		content = append(content, json.RawMessage(mustJSON(map[string]string{"type": "image", "data": base64.StdEncoding.EncodeToString(shot.Data), "mimeType": shot.MIME})))
	}
	return ToolResult{Content: content}, nil
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// windowClasses lists the desktop's windows by WM_CLASS.
func (r *rig) windowClasses(t testing.TB) string {
	t.Helper()
	x, err := openX(r.d.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	ws, err := x.windows()
	if err != nil {
		t.Fatal(err)
	}
	return classKey(ws)
}

// loadExampleTasks loads the example set shipped in tasks/.
func loadExampleTasks(t testing.TB) []*task.Task {
	t.Helper()
	ts, err := task.Load(filepath.Join("..", "tasks"))
	if err != nil {
		t.Fatalf("load the example tasks: %v", err)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].ID < ts[j].ID })
	return ts
}
