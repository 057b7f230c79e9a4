package control

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/deskenv/deskenv/auth"
	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/mcpserver"
	"github.com/deskenv/deskenv/screen"
	"github.com/deskenv/deskenv/task"
)

// rig is a whole desktop with its control plane, as cmd wires it: Xvfb,
// openbox and an xterm, the executor, capture, and Control over a temporary
// home.
type rig struct {
	d     *display.Display
	exec  *hci.Executor
	capt  *screen.Capturer
	shoot *screen.Shooter
	c     *Control
	home  string
	srv   *httptest.Server
	mcp   *mcpserver.Server // with rigOptions.tools
}

type rigOptions struct {
	mode  Mode
	tasks []*task.Task
	auth  *auth.Auth
	tools bool // wire the MCP server's tools
	apps  [][]string
	// restart brings the X server back when it dies, as the appliance
	// runs its displays.
	restart bool
	// wm is the window manager's command line; nil means openbox.
	wm []string
}

func newRig(t testing.TB, o rigOptions) *rig {
	t.Helper()
	needTools(t, "openbox", "xterm")
	home := seedHome(t)
	apps := o.apps
	if apps == nil {
		apps = [][]string{{"xterm"}}
	}
	wm := o.wm
	if wm == nil {
		wm = []string{"openbox"}
	}
	log := slog.New(slog.DiscardHandler)
	if os.Getenv("DESKENV_TEST_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	d, err := display.Start(context.Background(), display.Config{
		Width: 1280, Height: 800, Home: home,
		WindowManager: wm, Apps: apps, Logger: log,
		RestartOnCrash: o.restart,
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
	capt, err := screen.NewCapturer(d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { capt.Close() })
	shoot := screen.NewShooter(capt, screen.ShooterOptions{ModelW: space.ModelW, ModelH: space.ModelH})
	r := &rig{d: d, exec: ex, capt: capt, shoot: shoot, home: home}
	cfg := Config{
		Mode: o.mode, Display: d, Exec: ex, Capturer: capt, Shooter: shoot, Tasks: o.tasks, Auth: o.auth,
		Settle:      screen.SettleOptions{Quiet: 80 * time.Millisecond, Max: 2 * time.Second},
		Logger:      log,
		BaselineDir: filepath.Join(t.TempDir(), "baseline"),
		Version:     "test",
	}
	if o.tools {
		r.mcp, err = mcpserver.New(ex, shoot, capt, mcpserver.Config{Settle: cfg.Settle, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Tools = mcpTools{r.mcp}
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

// windows lists the desktop's windows, as the reset sees them.
func (r *rig) windows(t testing.TB) []Window {
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
	return ws
}

// windowClasses lists the desktop's windows by WM_CLASS.
func (r *rig) windowClasses(t testing.TB) string {
	t.Helper()
	return classKey(r.windows(t))
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
