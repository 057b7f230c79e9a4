package baseline

import (
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jezek/xgb/xproto"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/internal/testrig"
)

// TestResetKeepsThePanel resets the desktop session: the panel and the
// window manager are the same processes before and after (a reset does not
// restart them) and the panel's window is
// among the windows the reset brings back; what a launcher started goes;
// the home skeleton's LibreOffice profile is there again after the agent
// deleted it.
func TestResetKeepsThePanel(t *testing.T) {
	testrig.NeedTools(t, "openbox", "xterm", "tint2")
	ctx := testrig.Context(t, time.Minute)
	home := t.TempDir()
	d := testrig.Display(t, display.Config{Home: home, Session: display.SessionDesktop,
		WindowManager: []string{"openbox"}, Apps: [][]string{{"xterm"}}})
	b, err := Capture(ctx, d, Config{Home: home, Dir: filepath.Join(t.TempDir(), "baseline"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if key := ClassKey(b.Windows()); !strings.Contains(key, "tint2") || !strings.Contains(key, "XTerm") {
		t.Fatalf("baseline windows %q, want the panel's and the xterm's", key)
	}
	pids, wm := d.PanelPIDs(), d.WindowManagerPID()
	if len(pids) != 1 {
		t.Fatalf("panel processes %v, want one", pids)
	}
	profile := filepath.Join(home, ".config/libreoffice/4/user/registrymodifications.xcu")
	if err := os.RemoveAll(filepath.Join(home, ".config/libreoffice")); err != nil {
		t.Fatal(err)
	}
	stray := testrig.SpawnDetached(t, d, "xterm", "-class", "Stray", "-e", "sleep", "300")

	rep, err := b.Restore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := d.PanelPIDs(); len(got) != 1 || got[0] != pids[0] {
		t.Fatalf("panel processes %v after the reset, want the same process %d", got, pids[0])
	}
	if got := d.WindowManagerPID(); !rep.WindowManagerKept || got != wm {
		t.Errorf("window manager %d after the reset (kept: %v, %s), want %d kept beside the panel", got, rep.WindowManagerKept, rep.WindowManagerWhy, wm)
	}
	if !rep.WindowsMatched {
		t.Errorf("windows after the reset %q, want the baseline's %q", ClassKey(rep.WindowsAfter), ClassKey(b.Windows()))
	}
	testrig.WaitFor(t, "the stray xterm to be killed", func() bool { return processGone(stray.Process.Pid) })
	if _, err := os.Stat(profile); err != nil {
		t.Errorf("the LibreOffice profile after the reset: %v", err)
	}
	// The wallpaper (the root window's background, which no client owns)
	// is there after the reset killed every client: right of the xterm,
	// above the panel.
	x, err := openX(d.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	w, h := d.Size()
	img, err := xproto.GetImage(x.conn, xproto.ImageFormatZPixmap, xproto.Drawable(x.root), int16(w-4), int16(h/2), 1, 1, 0xffffffff).Reply()
	if err != nil || len(img.Data) < 3 {
		t.Fatalf("read the screen: %v", err)
	}
	if img.Data[0] == 0 && img.Data[1] == 0 && img.Data[2] == 0 {
		t.Errorf("the wallpaper pixel is black after the reset")
	}
}

// processGone reports whether pid no longer runs (or is a zombie).
func processGone(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	return err != nil || strings.Contains(string(b), ") Z ")
}
