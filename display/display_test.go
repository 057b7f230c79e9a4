package display

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jezek/xgb/xproto"
	"github.com/jezek/xgb/xtest"

	"github.com/deskenv/deskenv/internal/xprobe"
)

func needXvfb(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("Xvfb"); err != nil {
		t.Fatalf("Xvfb is required for these tests (run scripts/install-deps.sh): %v", err)
	}
}

func TestStartSizesAndProbe(t *testing.T) {
	needXvfb(t)
	tests := []struct {
		name string
		w, h int
	}{
		{"default", 0, 0},
		{"small", 640, 480},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			d, err := Start(ctx, Config{Width: tc.w, Height: tc.h, WindowManager: []string{}, Apps: [][]string{}})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			w, h := d.Size()
			ww, wh := tc.w, tc.h
			if ww == 0 {
				ww, wh = 1280, 800
			}
			if w != ww || h != wh {
				t.Fatalf("size %dx%d, want %dx%d", w, h, ww, wh)
			}
			if err := d.Health(ctx); err != nil {
				t.Fatal(err)
			}
			p, err := xprobe.Open(d.Name(), xprobe.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			conn := d.Conn()
			if err := xtest.Init(conn); err != nil {
				t.Fatal(err)
			}
			xtest.FakeInput(conn, xproto.MotionNotify, 0, 0, d.Root(), 37, 41, 0)
			xtest.FakeInput(conn, xproto.ButtonPress, 1, 0, d.Root(), 0, 0, 0)
			xtest.FakeInput(conn, xproto.ButtonRelease, 1, 0, d.Root(), 0, 0, 0)
			xproto.GetInputFocus(conn).Reply()
			if err := p.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			var press *xprobe.Event
			for _, e := range p.Events() {
				if e.Kind == xprobe.ButtonPress {
					e := e
					press = &e
				}
			}
			if press == nil || press.X != 37 || press.Y != 41 || press.Button != 1 {
				t.Fatalf("probe saw %v, want a button 1 press at 37,41", p.Events())
			}
		})
	}
}

func TestBadConfig(t *testing.T) {
	needXvfb(t)
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"tiny", Config{Width: 10, Height: 10}, "out of range"},
		{"depth", Config{Depth: 7}, "depth 7"},
		{"no server", Config{Xvfb: "no-such-xserver"}, "cannot find the X server"},
		{"attach nowhere", Config{Attach: ":9999"}, "attach to display :9999"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Start(context.Background(), tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestSessionAndCleanShutdown(t *testing.T) {
	needXvfb(t)
	ctx := context.Background()
	d, err := Start(ctx, Config{WindowManager: []string{}, Apps: [][]string{{"sleep", "300"}, {"sh", "-c", "sleep 300 & sleep 300"}}})
	if err != nil {
		t.Fatal(err)
	}
	pids := d.SessionPIDs()
	if len(pids) != 2 {
		t.Fatalf("session pids %v, want 2", pids)
	}
	server := d.ServerPID()
	d.Close()
	time.Sleep(50 * time.Millisecond)
	for _, pid := range append(pids, server) {
		if syscall.Kill(pid, 0) == nil {
			t.Errorf("process %d still alive after Close", pid)
		}
		if syscall.Kill(-pid, 0) == nil {
			t.Errorf("process group %d still alive after Close", pid)
		}
	}
}

func TestRestartAfterCrash(t *testing.T) {
	needXvfb(t)
	ctx := context.Background()
	d, err := Start(ctx, Config{WindowManager: []string{}, Apps: [][]string{}, RestartOnCrash: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	gen := d.Generation()
	changed := d.Changed()
	syscall.Kill(d.ServerPID(), syscall.SIGKILL)
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("display did not notice the server died")
	}
	deadline := time.Now().Add(15 * time.Second)
	for d.Restarts() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if d.Restarts() != 1 {
		t.Fatalf("restarts = %d, want 1", d.Restarts())
	}
	if d.Generation() <= gen {
		t.Fatalf("generation did not move on")
	}
	if err := d.Health(ctx); err != nil {
		t.Fatalf("health after restart: %v", err)
	}
}

// TestSharedConnectionSurvivesManyMappingChanges changes the keyboard map far
// more often than xgb's event queue holds: the shared connection must keep
// answering because the display drains its events.
func TestSharedConnectionSurvivesManyMappingChanges(t *testing.T) {
	needXvfb(t)
	ctx := context.Background()
	d, err := Start(ctx, Config{WindowManager: []string{}, Apps: [][]string{}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	other, err := d.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	// This connection gets a MappingNotify per change too; drain it like
	// the display drains its own.
	go func() {
		for {
			if ev, err := other.WaitForEvent(); ev == nil && err == nil {
				return
			}
		}
	}()
	setup := xproto.Setup(other)
	code := setup.MaxKeycode // the last keycode is unused on Xvfb's default map
	km, err := xproto.GetKeyboardMapping(other, code, 1).Reply()
	if err != nil {
		t.Fatal(err)
	}
	per := km.KeysymsPerKeycode
	syms := make([]xproto.Keysym, per)
	for i := 0; i < 6000; i++ {
		syms[0] = xproto.Keysym(0x1000000 + 0x4e00 + i%100)
		xproto.ChangeKeyboardMapping(other, 1, code, per, syms)
	}
	xproto.GetInputFocus(other).Reply()
	hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := d.Health(hctx); err != nil {
		t.Fatalf("shared connection stopped answering after 6000 keyboard-map changes: %v", err)
	}
}

// TestSessionEnvHidesDeskenv: the session's programs get DISPLAY, HOME and
// the caller's environment, but not the appliance's DESKENV_* variables,
// which carry its tokens.
func TestSessionEnvHidesDeskenv(t *testing.T) {
	needXvfb(t)
	t.Setenv("DESKENV_OPERATOR_TOKEN", "operator-secret")
	t.Setenv("DESKENV_TEST_KEPT_OUT", "1")
	t.Setenv("SOME_USER_VARIABLE", "kept")
	home := t.TempDir()
	d, err := Start(context.Background(), Config{WindowManager: []string{}, Apps: [][]string{{"sleep", "300"}}, Home: home})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	pids := d.SessionPIDs()
	if len(pids) != 1 {
		t.Fatalf("session pids %v", pids)
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pids[0]))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range strings.Split(string(raw), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			got[k] = v
		}
	}
	for _, tc := range []struct {
		name, want string
	}{
		{"DESKENV_OPERATOR_TOKEN", ""},
		{"DESKENV_TEST_KEPT_OUT", ""},
		{"SOME_USER_VARIABLE", "kept"},
		{"DISPLAY", d.Name()},
		{"HOME", home},
	} {
		if got[tc.name] != tc.want {
			t.Errorf("the session's %s = %q, want %q", tc.name, got[tc.name], tc.want)
		}
	}
}

// TestStartDefaultSession: a Config that names neither a window manager nor
// apps gets the appliance's session, openbox and one xterm, both running.
// The supervision tests start through testrig, which turns that Config into
// a bare server, and ask for this session by name; this is where the default
// itself is checked.
func TestStartDefaultSession(t *testing.T) {
	needXvfb(t)
	for _, tool := range []string{"openbox", "xterm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is required for this test (run scripts/install-deps.sh): %v", tool, err)
		}
	}
	d, err := Start(context.Background(), Config{Home: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var got []string
	for _, p := range d.Processes() {
		got = append(got, fmt.Sprintf("%s %s running=%v", p.Role, p.Process, p.Running))
	}
	want := []string{RoleWindowManager + " openbox running=true", RoleApp + " xterm running=true"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("the default session's processes are %q, want %q", got, want)
	}
}
