package control

import (
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/deskenv/deskenv/auth"
	"github.com/deskenv/deskenv/baseline"
	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/internal/activity"
	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/lifecycle"
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
	lc    *lifecycle.Bus
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
	// session is the display's session (display.SessionDesktop adds the
	// panel); empty is bare.
	session string
	// idle lets settles end after 40 ms on an idle desktop, as the
	// appliance's do by default (--settle-idle-quiet).
	idle bool
}

func newRig(t testing.TB, o rigOptions) *rig {
	t.Helper()
	testrig.NeedTools(t, "openbox", "xterm")
	home := testrig.SeedHome(t)
	apps := o.apps
	if apps == nil {
		apps = [][]string{{"xterm"}}
	}
	wm := o.wm
	if wm == nil {
		wm = []string{"openbox"}
	}
	log := testrig.Logger(t)
	d := testrig.Display(t, display.Config{
		Width: 1280, Height: 800, Home: home,
		WindowManager: wm, Apps: apps, Logger: log,
		RestartOnCrash: o.restart, Session: o.session,
	})
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
	r := &rig{d: d, exec: ex, capt: capt, shoot: shoot, home: home, lc: lifecycle.NewBus()}
	t.Cleanup(func() { r.lc.Close() })
	cfg := Config{
		Mode:        o.mode,
		Settle:      screen.SettleOptions{Quiet: 80 * time.Millisecond, Max: 2 * time.Second},
		Logger:      log,
		BaselineDir: filepath.Join(t.TempDir(), "baseline"),
		Version:     "test",
		Lifecycle:   r.lc,
	}
	if o.idle {
		cfg.Settle.Activity = activity.ForDisplay(d)
	}
	var tools Tools
	if o.tools {
		r.mcp, err = mcpserver.New(ex, shoot, capt, mcpserver.Config{Settle: cfg.Settle, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		tools = mcpTools{r.mcp}
	}
	r.c, err = New(d, ex, capt, shoot, o.tasks, tools, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.c.Close() })
	r.srv = httptest.NewServer(r.c.Handler(o.auth))
	t.Cleanup(r.srv.Close)
	return r
}

// windows lists the desktop's windows, as the reset sees them.
func (r *rig) windows(t testing.TB) []baseline.Window {
	t.Helper()
	ws, err := baseline.ListWindows(r.d.Name())
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

// windowClasses lists the desktop's windows by WM_CLASS.
func (r *rig) windowClasses(t testing.TB) string {
	t.Helper()
	return baseline.ClassKey(r.windows(t))
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

// heard collects the lifecycle events of some kinds the control plane
// publishes, from now on.
type heard struct {
	mu     sync.Mutex
	events []lifecycle.Event
}

func (r *rig) listen(t *testing.T, kinds ...lifecycle.Kind) *heard {
	h := &heard{}
	ch, cancel := r.lc.Subscribe(256)
	t.Cleanup(cancel)
	go func() {
		for ev := range ch {
			if slices.Contains(kinds, ev.Kind) {
				h.mu.Lock()
				h.events = append(h.events, ev)
				h.mu.Unlock()
			}
		}
	}()
	return h
}

// of waits until n events of kind have arrived (or 10 s) and returns
// those that did.
func (h *heard) of(kind lifecycle.Kind, n int) []lifecycle.Event {
	deadline := time.Now().Add(10 * time.Second)
	for {
		h.mu.Lock()
		var out []lifecycle.Event
		for _, ev := range h.events {
			if ev.Kind == kind {
				out = append(out, ev)
			}
		}
		h.mu.Unlock()
		if len(out) >= n || time.Now().After(deadline) {
			return out
		}
		time.Sleep(5 * time.Millisecond)
	}
}
