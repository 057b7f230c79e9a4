package baseline

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jezek/xgb/xproto"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/internal/testrig"
)

// startSession starts a display with openbox and one xterm, the default
// session, with home as the desktop user's home.
func startSession(t testing.TB, home string) *display.Display {
	t.Helper()
	testrig.NeedTools(t, "openbox", "xterm")
	return testrig.Display(t, display.Config{
		Width: 1024, Height: 768, Home: home,
		WindowManager: []string{"openbox"}, Apps: [][]string{{"xterm"}},
	})
}

func TestDesktopRestore(t *testing.T) {
	ctx := context.Background()
	home := testrig.SeedHome(t)
	d := startSession(t, home)
	// The session's windows first, then the snapshot of the home the
	// started session has written to.
	b, err := Capture(ctx, d, Config{Home: home, Dir: filepath.Join(t.TempDir(), "baseline"), WindowWait: 10 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	want := testrig.TreeOf(t, b.Home().Dir())
	if got := ClassKey(b.Windows()); got != "xterm/XTerm" {
		t.Fatalf("baseline windows %q, want one xterm", got)
	}
	x, err := openX(d.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()

	type mess struct {
		name string
		do   func(t *testing.T) (check func(t *testing.T))
	}
	messes := []mess{
		{"detached windows", func(t *testing.T) func(t *testing.T) {
			testrig.SpawnDetached(t, d, "xterm", "-class", "Stray", "-e", "sleep", "300")
			testrig.SpawnDetached(t, d, "xterm", "-class", "Stray2", "-e", "sh", "-c", "sleep 300")
			testrig.WaitFor(t, "the stray windows", func() bool {
				ws, _ := x.windows()
				return strings.Count(ClassKey(ws), "Stray") == 2
			})
			return nil
		}},
		{"background process without a window", func(t *testing.T) func(t *testing.T) {
			cmd := testrig.SpawnDetached(t, d, "sh", "-c", "exec sleep 300")
			return func(t *testing.T) {
				if alive(cmd.Process.Pid) {
					t.Errorf("a background process of the desktop (pid %d) survived the reset", cmd.Process.Pid)
				}
			}
		}},
		{"files in home", func(t *testing.T) func(t *testing.T) {
			testrig.WriteFile(t, filepath.Join(home, "agent-was-here.txt"), "x", 0o644)
			os.Remove(filepath.Join(home, "notes.txt"))
			testrig.WriteFile(t, filepath.Join(home, "Documents", "report.md"), "rewritten", 0o644)
			return nil
		}},
		{"clipboard", func(t *testing.T) func(t *testing.T) {
			testrig.NeedTools(t, "xclip")
			c := exec.Command("xclip", "-selection", "clipboard")
			c.Env = d.Env()
			c.Stdin = strings.NewReader("secret answer")
			if err := c.Run(); err != nil {
				t.Fatal(err)
			}
			testrig.WaitFor(t, "xclip to own CLIPBOARD", func() bool { return x.selectionOwner("CLIPBOARD") != 0 })
			return func(t *testing.T) {
				if o := x.selectionOwner("CLIPBOARD"); o != 0 {
					t.Errorf("CLIPBOARD still owned by window 0x%x after the reset", o)
				}
			}
		}},
		{"root property and pointer", func(t *testing.T) func(t *testing.T) {
			px, py, _ := x.pointer()
			mark := x.atom("TEST_MARK")
			xproto.ChangeProperty(x.conn, xproto.PropModeReplace, x.root, mark, xproto.AtomString, 8, 4, []byte("here"))
			x.warp(px+100, py+50)
			testrig.WaitFor(t, "the mark and the pointer", func() bool {
				props, _ := x.rootProps()
				nx, ny, _ := x.pointer()
				return props[mark].data != nil && nx == px+100 && ny == py+50
			})
			return func(t *testing.T) {
				props, err := x.rootProps()
				if err != nil {
					t.Fatal(err)
				}
				if p, ok := props[mark]; ok {
					t.Errorf("root property TEST_MARK is %q after the reset, want it gone as in the baseline", p.data)
				}
				if nx, ny, _ := x.pointer(); nx != px || ny != py {
					t.Errorf("pointer at %d,%d after the reset, want %d,%d", nx, ny, px, py)
				}
			}
		}},
		{"the session's own xterm killed", func(t *testing.T) func(t *testing.T) {
			for _, pid := range d.SessionPIDs()[1:] {
				syscall.Kill(-pid, syscall.SIGKILL)
			}
			testrig.WaitFor(t, "the xterm to go", func() bool {
				ws, _ := x.windows()
				return !strings.Contains(ClassKey(ws), "xterm/XTerm")
			})
			return nil
		}},
	}
	for _, m := range messes {
		t.Run(m.name, func(t *testing.T) {
			check := m.do(t)
			st, err := b.Restore(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !st.WindowsMatched {
				t.Errorf("windows after the reset: %q, want %q", ClassKey(st.WindowsAfter), ClassKey(b.Windows()))
			}
			ws, _ := x.windows()
			if got := ClassKey(ws); got != "xterm/XTerm" {
				t.Errorf("windows now %q, want one xterm", got)
			}
			if got := testrig.TreeOf(t, home); got != want {
				t.Errorf("home differs from the baseline:\n%s\nwant:\n%s", got, want)
			}
			if check != nil {
				check(t)
			}
			t.Logf("clean took kill %v home %v clipboard %v session %v windows %v touchup %v (killed %d processes, %d clients; session wrote %q)",
				st.Kill, st.Home, st.Clipboard, st.Session, st.Windows, st.Touchup, st.KilledProcesses, st.KilledClients, st.SessionWrote)
		})
	}
}

func TestDesktopProcessesScope(t *testing.T) {
	d := startSession(t, t.TempDir())
	other := startSession(t, t.TempDir())
	mine := testrig.SpawnDetached(t, d, "sleep", "300")
	theirs := testrig.SpawnDetached(t, other, "sleep", "300")
	got := map[int]bool{}
	for _, p := range desktopProcesses(d.Name(), -1, nil) {
		got[p] = true
	}
	if !got[mine.Process.Pid] {
		t.Errorf("a process with DISPLAY=%s was not found", d.Name())
	}
	if got[theirs.Process.Pid] {
		t.Errorf("a process of display %s was taken for one of %s", other.Name(), d.Name())
	}
	if got[os.Getpid()] {
		t.Error("this process is listed as a desktop process")
	}
}
