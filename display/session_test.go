package display_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
	"github.com/jezek/xgb/xtest"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/internal/testrig"
)

// desktopConfig is the desktop session as the appliance starts it.
func desktopConfig(t *testing.T) display.Config {
	t.Helper()
	testrig.NeedTools(t, "openbox", "xterm", "tint2")
	return display.Config{Home: t.TempDir(), Session: display.SessionDesktop,
		WindowManager: []string{"openbox"}, Apps: [][]string{{"xterm"}}}
}

// atom interns name on c.
func atom(t *testing.T, c *xgb.Conn, name string) xproto.Atom {
	t.Helper()
	r, err := xproto.InternAtom(c, false, uint16(len(name)), name).Reply()
	if err != nil {
		t.Fatal(err)
	}
	return r.Atom
}

// DockWindows are the top-level windows whose _NET_WM_WINDOW_TYPE says
// dock, as a panel's does.
func dockWindows(t *testing.T, d *display.Display) []xproto.Window {
	t.Helper()
	c, err := d.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	typ, dock := atom(t, c, "_NET_WM_WINDOW_TYPE"), atom(t, c, "_NET_WM_WINDOW_TYPE_DOCK")
	var out []xproto.Window
	// Top-level windows and, one level down, the clients inside the window
	// manager's frames (openbox frames docks too). Only viewable ones:
	// openbox keeps an unmapped dock window of its own for dock apps.
	var walk func(w xproto.Window, depth int)
	walk = func(w xproto.Window, depth int) {
		tree, err := xproto.QueryTree(c, w).Reply()
		if err != nil {
			return
		}
		for _, w := range tree.Children {
			if a, err := xproto.GetWindowAttributes(c, w).Reply(); err != nil || a.MapState != xproto.MapStateViewable {
				continue
			}
			if p, err := xproto.GetProperty(c, false, w, typ, xproto.AtomAtom, 0, 16).Reply(); err == nil && p.Format == 32 {
				for i := 0; i+4 <= len(p.Value); i += 4 {
					if xproto.Atom(xgb.Get32(p.Value[i:])) == dock {
						out = append(out, w)
					}
				}
			}
			if depth < 1 {
				walk(w, depth+1)
			}
		}
	}
	walk(d.Root(), 0)
	return out
}

// rootPixel reads the screen's pixel at x, y as the server has it.
func rootPixel(t *testing.T, d *display.Display, x, y int16) [3]uint8 {
	t.Helper()
	c, err := d.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	img, err := xproto.GetImage(c, xproto.ImageFormatZPixmap, xproto.Drawable(d.Root()), x, y, 1, 1, 0xffffffff).Reply()
	if err != nil {
		t.Fatal(err)
	}
	if len(img.Data) < 4 {
		t.Fatalf("a 1x1 image of %d bytes", len(img.Data))
	}
	// 24-bit screens: BGRX.
	return [3]uint8{img.Data[2], img.Data[1], img.Data[0]}
}

func panelPID(t *testing.T, d *display.Display) int {
	t.Helper()
	pids := d.PanelPIDs()
	if len(pids) != 1 {
		t.Fatalf("panel processes %v, want one", pids)
	}
	return pids[0]
}

// TestDesktopSession starts the desktop session: tint2 maps a dock window,
// the wallpaper is not black, the home skeleton is written, the panel
// survives RestartSession and KillSession (what a reset does) as the same
// process, and comes back when it is killed.
func TestDesktopSession(t *testing.T) {
	cfg := desktopConfig(t)
	cfg.RestartOnCrash = true
	d := testrig.Display(t, cfg)
	testrig.WaitWithin(t, patience, "the panel's dock window", func() bool { return len(dockWindows(t, d)) == 1 })

	w, h := d.Size()
	// Right of the xterm, above the panel: the wallpaper.
	if px := rootPixel(t, d, int16(w-4), int16(h/2)); px == [3]uint8{} {
		t.Errorf("wallpaper pixel at (%d,%d) is black", w-4, h/2)
	} else if px[2] <= px[0] {
		t.Errorf("wallpaper pixel %v is not the blue gradient", px)
	}
	for _, f := range []string{".config/libreoffice/4/user/registrymodifications.xcu", ".config/libfm/libfm.conf", ".config/pcmanfm/default/pcmanfm.conf"} {
		if _, err := os.Stat(filepath.Join(cfg.Home, f)); err != nil {
			t.Errorf("home skeleton: %v", err)
		}
	}
	// The panel reads its configuration from outside the home, from files
	// the session may read but not change (it outlives resets).
	panel := d.Config().Panel
	if len(panel) != 3 || panel[0] != "tint2" || panel[1] != "-c" || strings.HasPrefix(panel[2], cfg.Home) {
		t.Errorf("panel command %q, want tint2 -c with a file outside the home", panel)
	} else if fi, err := os.Stat(panel[2]); err != nil || fi.Mode().Perm()&0o022 != 0 {
		t.Errorf("panel configuration %s: %v, mode %v: want it readable, writable by deskenv alone", panel[2], err, fi.Mode())
	} else if rc, _ := os.ReadFile(panel[2]); !strings.Contains(string(rc), filepath.Join(filepath.Dir(panel[2]), "deskenv-calc.desktop")) {
		t.Errorf("tint2rc does not name the launchers beside it:\n%s", rc)
	}
	xcu, _ := os.ReadFile(filepath.Join(cfg.Home, ".config/libreoffice/4/user/registrymodifications.xcu"))
	for _, want := range []string{`"ShowTipOfTheDay"`, `"WarnAlienFormat"`, `"FirstStartWizardCompleted"`, `/org.openoffice.Office.Recovery/RecoveryInfo`} {
		if !strings.Contains(string(xcu), want) {
			t.Errorf("LibreOffice profile lacks %s", want)
		}
	}

	pid := panelPID(t, d)
	if err := d.RestartSession(context.Background()); err != nil {
		t.Fatal(err)
	}
	killed := d.KillSession(false)
	for _, k := range killed {
		if k == pid {
			t.Fatalf("KillSession killed the panel (pid %d)", pid)
		}
	}
	if err := d.StartSession(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := panelPID(t, d); got != pid {
		t.Fatalf("the panel is pid %d after RestartSession and KillSession, was %d: it was restarted", got, pid)
	}
	if n := len(dockWindows(t, d)); n != 1 {
		t.Fatalf("%d dock windows after the session restarted, want the one panel", n)
	}

	// The panel dies: it comes back, as a new process, whatever its status.
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	testrig.WaitWithin(t, patience, "the panel to come back", func() bool {
		pids := d.PanelPIDs()
		return len(pids) == 1 && pids[0] != pid && len(dockWindows(t, d)) == 1
	})
	p, ok := processByName(d, "tint2")
	if !ok || p.Role != display.RolePanel || !p.Running {
		t.Fatalf("Processes has the panel as %+v (found %v)", p, ok)
	}

	// What an agent (the session's user) could do to the panel so that the
	// next episode inherits it: the reset's RestartSession replaces a
	// panel that is stopped or whose window is unmapped.
	tamper := []struct {
		name string
		do   func(pid int)
	}{
		{"stopped", func(pid int) {
			syscall.Kill(pid, syscall.SIGSTOP)
			testrig.WaitFor(t, "the panel to stop", func() bool {
				st, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
				return strings.Contains(string(st), ") T ")
			})
		}},
		{"window unmapped", func(int) {
			c, err := d.Dial()
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			for _, w := range dockWindows(t, d) {
				xproto.UnmapWindow(c, w)
			}
			xproto.GetInputFocus(c).Reply()
		}},
	}
	for _, tc := range tamper {
		testrig.WaitWithin(t, patience, "the panel's window", func() bool { return len(dockWindows(t, d)) == 1 })
		pid := panelPID(t, d)
		tc.do(pid)
		if err := d.RestartSession(context.Background()); err != nil {
			t.Fatal(err)
		}
		testrig.WaitWithin(t, patience, "a new panel after it was "+tc.name, func() bool {
			pids := d.PanelPIDs()
			return len(pids) == 1 && pids[0] != pid && len(dockWindows(t, d)) == 1
		})
	}
}

// TestBareSessionHasNoPanel: the bare session is openbox and its apps: no
// dock window, no skeleton.
func TestBareSessionHasNoPanel(t *testing.T) {
	cfg := sessionConfig(t)
	cfg.Session = display.SessionBare
	d := testrig.Display(t, cfg)
	testrig.WaitWithin(t, patience, "the xterm", func() bool { _, ok := processByName(d, "xterm"); return ok })
	if n := len(dockWindows(t, d)); n != 0 {
		t.Errorf("%d dock windows in the bare session", n)
	}
	if len(d.PanelPIDs()) != 0 {
		t.Errorf("panel processes %v in the bare session", d.PanelPIDs())
	}
	if _, err := os.Stat(filepath.Join(cfg.Home, ".config/libreoffice")); !os.IsNotExist(err) {
		t.Errorf("the bare session wrote the desktop's skeleton: %v", err)
	}
}

func TestUnknownSession(t *testing.T) {
	_, err := display.Start(context.Background(), display.Config{Session: "fancy"})
	if err == nil || !strings.Contains(err.Error(), `unknown session "fancy"`) {
		t.Fatalf("Start with session fancy: %v, want an unknown-session error", err)
	}
}

// TestDesktopLaunchers clicks each of the panel's launchers, as a person or
// an agent would (XTEST), and waits for a window of its application. The
// launchers sit at the left of the panel in tint2rc's order; their centres
// follow from its paddings (panel 4, launcher 4, icons 26 apart by 6).
func TestDesktopLaunchers(t *testing.T) {
	testrig.NeedTools(t, "openbox", "xterm", "tint2", "chromium", "pcmanfm", "mousepad", "galculator", "mupdf-gl", "libreoffice")
	cfg := desktopConfig(t)
	d := testrig.Display(t, cfg)
	testrig.WaitWithin(t, patience, "the panel's dock window", func() bool { return len(dockWindows(t, d)) == 1 })
	c, err := d.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := xtest.Init(c); err != nil {
		t.Fatal(err)
	}
	_, h := d.Size()
	click := func(x, y int16) {
		xtest.FakeInput(c, xproto.MotionNotify, 0, 0, d.Root(), x, y, 0)
		xtest.FakeInput(c, xproto.ButtonPress, 1, 0, d.Root(), 0, 0, 0)
		xtest.FakeInput(c, xproto.ButtonRelease, 1, 0, d.Root(), 0, 0, 0)
		if _, err := xproto.GetInputFocus(c).Reply(); err != nil { // a round trip: the clicks are in
			t.Fatal(err)
		}
	}
	// The WM_CLASS class each launcher's application maps its window with
	// (mupdf-gl sets none: its file chooser's title).
	launchers := []struct{ name, class string }{
		{"terminal", "XTerm"}, {"browser", "Chromium"}, {"files", "Pcmanfm"}, {"editor", "Mousepad"},
		{"calculator", "Galculator"}, {"pdf", "title:MuPDF: Open document"}, {"calc", "libreoffice-calc"}, {"writer", "libreoffice-writer"},
	}
	for i, l := range launchers {
		before := mappedClasses(d)
		click(int16(4+4+13+32*i), int16(h-18))
		testrig.WaitWithin(t, 90*time.Second, "a "+l.class+" window from the "+l.name+" launcher", func() bool {
			return mappedClasses(d)[l.class] > before[l.class]
		})
	}
	// Close stops what the launchers started too, though tint2 puts each
	// in a session of its own.
	d.Close()
	testrig.WaitWithin(t, patience, "the launched applications to be gone", func() bool { return len(processesWithHome(cfg.Home)) == 0 })
}

// processesWithHome are the processes (not zombies) whose environment has
// HOME=home.
func processesWithHome(home string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(append([]byte{0}, env...), []byte("\x00HOME="+home+"\x00")) {
			continue
		}
		if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && strings.Contains(string(st), ") Z ") {
			continue
		}
		out = append(out, pid)
	}
	return out
}
