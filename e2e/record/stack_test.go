package record_test

import (
	"context"
	"net/http"
	"os"
	"testing"

	"github.com/deskenv/deskenv/control"
	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/e2e/browser"
	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/lifecycle"
	"github.com/deskenv/deskenv/screen"
	"github.com/deskenv/deskenv/stream"
	"github.com/deskenv/deskenv/task"
	"github.com/deskenv/deskenv/web"
)

// stack is the appliance's desktop assembled in the test: openbox and an
// xterm, the executor, the stream and the page, and the control plane with
// the example tasks.
type stack struct {
	d       *display.Display
	exec    *hci.Executor
	capt    *screen.Capturer
	shooter *screen.Shooter
	ctl     *control.Control
	base    string         // the test server's URL
	lc      *lifecycle.Bus // where the control plane and the recorder meet
}

func startStack(ctx context.Context, t *testing.T, home string, tasks []*task.Task) *stack {
	t.Helper()
	testrig.NeedTools(t, "openbox", "xterm")
	d := testrig.Display(t, display.Config{Home: home, WindowManager: []string{"openbox"}, Apps: [][]string{{"xterm"}}})
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
	ss, err := stream.New(d, ex, stream.Config{LoopbackOnly: true, Capturer: capt})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	lc := lifecycle.NewBus()
	t.Cleanup(func() { lc.Close() })
	ctl, err := control.New(d, ex, capt, shooter, tasks, nil, control.Config{Mode: control.ModeSim, Home: home, Lifecycle: lc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctl.Close() })
	mux := http.NewServeMux()
	mux.Handle("/stream/signal", ss.SignalHandler(func(*http.Request) (string, bool, error) {
		return stream.RoleOperator, false, nil
	}))
	mux.Handle("/", web.Handler())
	return &stack{d: d, exec: ex, capt: capt, shooter: shooter, ctl: ctl, base: testrig.Serve(t, mux), lc: lc}
}

func startDriver(ctx context.Context, t *testing.T) *browser.Driver {
	t.Helper()
	opt := browser.Options{}
	if testing.Verbose() {
		opt.Stderr = os.Stderr
	}
	d, err := browser.Start(ctx, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func do(ctx context.Context, t *testing.T, d *browser.Driver, cmd string, args map[string]any, out any) {
	t.Helper()
	if err := d.Do(ctx, cmd, args, out); err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
}

func waitFor(ctx context.Context, t *testing.T, d *browser.Driver, page, expr, what string) {
	t.Helper()
	if err := d.Do(ctx, "waitFor", map[string]any{"page": page, "expr": expr, "timeoutMs": 15000, "pollMs": 50}, nil); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
