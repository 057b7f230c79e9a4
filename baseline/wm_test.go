package baseline

import (
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jezek/xgb/xproto"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/internal/testrig"
)

// TestResetKeepsTheWindowManager attacks the window manager a reset keeps,
// from the agent's side (programs on the desktop, as the session's user),
// and checks after each reset that it behaves as at the baseline: the
// baseline's number of desktops, the first desktop shown, not showing the
// desktop, deskenv's configuration, and the session's new xterm managed
// (framed). The window manager is the same process after what the agent
// can do to a live one through X (it is put back), and a new one after
// what leaves it unfit (stopped, killed, restarted in place, holding a
// grab, showing a prompt of its own).
func TestResetKeepsTheWindowManager(t *testing.T) {
	testrig.NeedTools(t, "xdotool")
	ctx := testrig.Context(t, 2*time.Minute)
	home := testrig.SeedHome(t)
	d := startSession(t, home)
	b, err := Capture(ctx, d, Config{Home: home, Dir: filepath.Join(t.TempDir(), "baseline"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	x, err := openX(d.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	desktops := x.cardinal("_NET_NUMBER_OF_DESKTOPS")
	if desktops == ^uint32(0) || desktops < 2 {
		t.Fatalf("the baseline has %d desktops, want openbox's default of several", desktops)
	}
	conf, names := x.text("_OB_CONFIG_FILE"), x.text("_NET_DESKTOP_NAMES")
	if !strings.HasPrefix(conf, "/") || strings.HasPrefix(conf, home) {
		t.Fatalf("openbox reads %q, want deskenv's configuration outside home", conf)
	}
	agent := func(t *testing.T, argv ...string) {
		t.Helper()
		c := exec.Command(argv[0], argv[1:]...)
		c.Env, c.SysProcAttr = d.Env(), d.SysProcAttr()
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", argv, err, out)
		}
	}
	wmPID := func() int {
		for _, p := range d.Processes() {
			if p.Role == display.RoleWindowManager && p.Running {
				return p.PID
			}
		}
		return 0
	}
	cases := []struct {
		name string
		do   func(t *testing.T, pid int)
		kept bool
	}{
		{"more desktops, another shown", func(t *testing.T, pid int) {
			agent(t, "xdotool", "set_num_desktops", "7")
			agent(t, "xdotool", "set_desktop", "5")
			testrig.WaitFor(t, "desktop 5 of 7", func() bool {
				return x.cardinal("_NET_NUMBER_OF_DESKTOPS") == 7 && x.cardinal("_NET_CURRENT_DESKTOP") == 5
			})
		}, true},
		{"showing the desktop", func(t *testing.T, pid int) {
			if err := x.sendRoot("_NET_SHOWING_DESKTOP", 1); err != nil {
				t.Fatal(err)
			}
			testrig.WaitFor(t, "the desktop shown", func() bool { return x.cardinal("_NET_SHOWING_DESKTOP") == 1 })
		}, true},
		{"desktops renamed", func(t *testing.T, pid int) {
			names := x.atom("_NET_DESKTOP_NAMES")
			xproto.ChangeProperty(x.conn, xproto.PropModeReplace, x.root, names, x.atom("UTF8_STRING"), 8, 9, []byte("agent\x00was"))
			testrig.WaitFor(t, "the new names", func() bool { return strings.HasPrefix(x.text("_NET_DESKTOP_NAMES"), "agent") })
		}, true},
		{"hostile rc.xml in home, reconfigured", func(t *testing.T, pid int) {
			rc := filepath.Join(home, ".config", "openbox", "rc.xml")
			testrig.WriteFile(t, rc, `<?xml version="1.0"?><openbox_config xmlns="http://openbox.org/3.4/rc">`+
				`<desktops><number>9</number></desktops><theme><name>Onyx</name></theme></openbox_config>`, 0o644)
			agent(t, "openbox", "--reconfigure")
			// Openbox sets its theme property again once it has reread
			// its configuration, which the display's watch sees.
			testrig.WaitFor(t, "openbox to reconfigure", func() bool { return d.CheckWindowManager().Reconfigure })
			if n := x.cardinal("_NET_NUMBER_OF_DESKTOPS"); n != desktops {
				t.Errorf("after the agent's reconfigure openbox has %d desktops, want %d: it read the rc.xml in home", n, desktops)
			}
		}, true},
		{"root menu left open", func(t *testing.T, pid int) {
			w, h := d.Size()
			agent(t, "xdotool", "mousemove", "--sync", strconv.Itoa(w-40), strconv.Itoa(h-40), "click", "3")
			testrig.WaitFor(t, "openbox to grab for its menu", func() bool { return x.grabbed() != "" })
		}, false},
		{"its exit prompt left open", func(t *testing.T, pid int) {
			// The root menu's last item is Exit, which asks first.
			w, h := d.Size()
			agent(t, "xdotool", "mousemove", "--sync", strconv.Itoa(w-40), strconv.Itoa(h-40), "click", "3")
			testrig.WaitFor(t, "openbox to grab for its menu", func() bool { return x.grabbed() != "" })
			agent(t, "xdotool", "key", "Up", "Return")
			own := d.CheckWindowManager().Window
			testrig.WaitFor(t, "openbox's prompt", func() bool { return x.windowOf(own) != "" })
		}, false},
		{"stopped", func(t *testing.T, pid int) {
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"killed", func(t *testing.T, pid int) {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"restarted in place", func(t *testing.T, pid int) {
			agent(t, "openbox", "--restart")
			testrig.WaitFor(t, "openbox to take its selection again", func() bool { return !d.CheckWindowManager().Keep })
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pid := wmPID()
			if pid == 0 {
				t.Fatal("no window manager runs before the episode")
			}
			c.do(t, pid)
			rep, err := b.Restore(ctx)
			if err != nil {
				t.Fatal(err)
			}
			now := wmPID()
			switch {
			case c.kept && (now != pid || !rep.WindowManagerKept):
				t.Errorf("window manager pid %d after the reset (kept: %v, %s), want %d kept", now, rep.WindowManagerKept, rep.WindowManagerWhy, pid)
			case !c.kept && (now == pid || rep.WindowManagerKept):
				t.Errorf("window manager pid %d after the reset (kept: %v), want a new one in place of %d", now, rep.WindowManagerKept, pid)
			}
			if !c.kept && rep.WindowManagerWhy == "" {
				t.Error("the report does not say why the window manager was restarted")
			}
			for name, want := range map[string]uint32{"_NET_NUMBER_OF_DESKTOPS": desktops, "_NET_CURRENT_DESKTOP": 0, "_NET_SHOWING_DESKTOP": 0} {
				if got := x.cardinal(name); got != want {
					t.Errorf("%s is %d after the reset, want %d", name, got, want)
				}
			}
			if got := x.text("_NET_DESKTOP_NAMES"); got != names {
				t.Errorf("the desktops are named %q after the reset, want %q", got, names)
			}
			if got := x.text("_OB_CONFIG_FILE"); got != conf {
				t.Errorf("openbox reads %q after the reset, want %q", got, conf)
			}
			if what := x.grabbed(); what != "" {
				t.Errorf("the %s is grabbed after the reset", what)
			}
			if !rep.WindowsMatched {
				t.Fatalf("windows after the reset %q, want %q", ClassKey(rep.WindowsAfter), ClassKey(b.Windows()))
			}
			for _, w := range rep.WindowsAfter {
				if !framed(x, xproto.Window(w.ID)) {
					t.Errorf("window %s/%s is not managed by the window manager after the reset", w.Instance, w.Class)
				}
			}
			t.Logf("kept %v (%s), reconfigured %v, state requests %d; kill %v xstate %v session %v windows %v",
				rep.WindowManagerKept, rep.WindowManagerWhy, rep.WindowManagerReconfigure, rep.WindowManagerState,
				rep.Kill, rep.Clipboard, rep.Session, rep.Windows)
		})
	}
	if _, err := os.Stat(filepath.Join(home, ".config", "openbox")); err == nil {
		t.Error("the agent's openbox configuration in home survived the resets")
	}
}

// framed reports whether w sits in a window manager's frame (its parent is
// not the root) and carries the frame extents openbox sets on what it
// manages.
func framed(x *xsession, w xproto.Window) bool {
	tree, err := xproto.QueryTree(x.conn, w).Reply()
	if err != nil || tree.Parent == x.root {
		return false
	}
	p, err := xproto.GetProperty(x.conn, false, w, x.atom("_NET_FRAME_EXTENTS"), xproto.AtomCardinal, 0, 4).Reply()
	return err == nil && p.Format == 32 && len(p.Value) == 16
}

// text is root property name as a string ("" when missing).
func (s *xsession) text(name string) string {
	r, err := xproto.GetProperty(s.conn, false, s.root, s.atom(name), xproto.GetPropertyTypeAny, 0, 1024).Reply()
	if err != nil {
		return ""
	}
	return string(r.Value)
}
