package task

import (
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/internal/xprobe"
	"github.com/deskenv/deskenv/internal/xsel"
)

// desk is a test desktop: an Xvfb (with openbox when asked), a home
// directory of its own and the Env over both.
type desk struct {
	d    *display.Display
	env  *DisplayEnv
	home string
}

func startDesk(t testing.TB, withWM bool) *desk {
	t.Helper()
	testrig.NeedTools(t, "xterm", "xclip")
	home := t.TempDir()
	cfg := display.Config{Home: home}
	if withWM {
		cfg.WindowManager, cfg.Apps = []string{"openbox"}, [][]string{}
	}
	d := testrig.Display(t, cfg)
	env := NewEnv(d, "", nil)
	t.Cleanup(func() { env.Close() }) // before the display's own cleanup
	if env.Home() != home {
		t.Fatalf("env home %q, want the display's %q", env.Home(), home)
	}
	return &desk{d: d, env: env, home: home}
}

// launchXterm starts an xterm with a fixed title and waits for it to show.
func (k *desk) launchXterm(t testing.TB, title string) *Process {
	t.Helper()
	ctx := testrig.Context(t, 20*time.Second)
	p, err := k.env.Launch(ctx, []string{"xterm", "-T", title, "-xrm", "XTerm*allowTitleOps: false"})
	if err != nil {
		t.Fatal(err)
	}
	tk := &Task{ID: "wait", Setup: []Step{{Type: StepWaitWindow, Contains: title, Timeout: Duration(15 * time.Second)}}}
	if err := tk.RunSetup(ctx, k.env); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestWindows(t *testing.T) {
	for _, wm := range []bool{false, true} {
		t.Run(fmt.Sprintf("wm=%v", wm), func(t *testing.T) {
			k := startDesk(t, wm)
			ctx := testrig.Context(t, 30*time.Second)
			ws, err := k.env.Windows(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range ws {
				// openbox's _NET_SUPPORTING_WM_CHECK window is titled "Openbox"
				// but is no window a person sees.
				if w.Title != "" {
					t.Errorf("an empty desktop lists window %+v", w)
				}
			}
			k.launchXterm(t, "first ünïcode title")
			k.launchXterm(t, "second")
			ws, err = k.env.Windows(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]Window{}
			for _, w := range ws {
				got[w.Title] = w
			}
			for _, title := range []string{"first ünïcode title", "second"} {
				w, ok := got[title]
				if !ok {
					t.Fatalf("no window titled %q in %+v", title, ws)
				}
				if w.Class != "XTerm" || w.Instance != "xterm" {
					t.Errorf("window %q has class %q/%q, want XTerm/xterm", title, w.Instance, w.Class)
				}
			}
			if len(ws) != 2 {
				t.Errorf("listed %d windows, want the 2 xterms: %+v", len(ws), ws)
			}
		})
	}
}

// TestWindowsAfterClose checks that closing the launched programs removes
// their windows, and that CloseLaunched ends the whole process group.
func TestCloseLaunched(t *testing.T) {
	k := startDesk(t, true)
	ctx := testrig.Context(t, 30*time.Second)
	p := k.launchXterm(t, "to be closed")
	if len(k.env.Launched()) != 1 {
		t.Fatalf("Launched() = %v, want the xterm", k.env.Launched())
	}
	k.env.CloseLaunched(ctx)
	select {
	case <-p.Done():
	case <-ctx.Done():
		t.Fatal("xterm still runs after CloseLaunched")
	}
	if done, how := p.Exited(); !done || how == "" {
		t.Errorf("Exited() = %v, %q", done, how)
	}
	testrig.WaitState(t, 10*time.Second, "the xterm window to go", func() (bool, string) {
		ws, err := k.env.Windows(ctx)
		return err == nil && len(ws) == 0, fmt.Sprintf("%+v %v", ws, err)
	})
}

func newOwner(t *testing.T, d *display.Display, selection string, answer func(c *xgb.Conn, req xproto.SelectionRequestEvent)) {
	t.Helper()
	c, err := d.Dial()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	root := xproto.Setup(c).DefaultScreen(c).Root
	win, _ := xproto.NewWindowId(c)
	if err := xproto.CreateWindowChecked(c, 0, win, root, 0, 0, 1, 1, 0, xproto.WindowClassInputOnly, 0, 0, nil).Check(); err != nil {
		t.Fatal(err)
	}
	atoms, err := xsel.InternAtoms(c, selection)
	if err != nil {
		t.Fatal(err)
	}
	if err := xproto.SetSelectionOwnerChecked(c, win, xproto.Atom(atoms[selection]), xproto.TimeCurrentTime).Check(); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			ev, err := c.WaitForEvent()
			if ev == nil && err == nil {
				return
			}
			if req, ok := ev.(xproto.SelectionRequestEvent); ok && answer != nil {
				answer(c, req)
			}
		}
	}()
}

// refuse answers every request with "cannot convert" (property None).
func refuse(c *xgb.Conn, req xproto.SelectionRequestEvent) {
	ev := xproto.SelectionNotifyEvent{Time: req.Time, Requestor: req.Requestor, Selection: req.Selection, Target: req.Target, Property: xproto.AtomNone}
	xproto.SendEvent(c, false, req.Requestor, 0, string(ev.Bytes()))
}

// latin1 answers STRING requests with Latin-1 bytes and refuses the rest.
func latin1(text []byte) func(c *xgb.Conn, req xproto.SelectionRequestEvent) {
	return func(c *xgb.Conn, req xproto.SelectionRequestEvent) {
		if req.Target != xproto.AtomString {
			refuse(c, req)
			return
		}
		xproto.ChangeProperty(c, xproto.PropModeReplace, req.Requestor, req.Property, xproto.AtomString, 8, uint32(len(text)), text)
		ev := xproto.SelectionNotifyEvent{Time: req.Time, Requestor: req.Requestor, Selection: req.Selection, Target: req.Target, Property: req.Property}
		xproto.SendEvent(c, false, req.Requestor, 0, string(ev.Bytes()))
	}
}

func TestSelection(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB: xclip sends it with INCR
	tests := []struct {
		name    string
		sel     string
		setup   func(t *testing.T, k *desk)
		want    string
		wantErr string
	}{
		{"no owner", "CLIPBOARD", nil, "", ""},
		{"xclip clipboard", "CLIPBOARD", xclip("clipboard", "hello from xclip ✓"), "hello from xclip ✓", ""},
		{"xclip primary", "primary", xclip("primary", "primary text"), "primary text", ""},
		{"xclip incremental", "CLIPBOARD", xclip("clipboard", big), big, ""},
		{"latin-1 STRING", "CLIPBOARD", func(t *testing.T, k *desk) { newOwner(t, k.d, "CLIPBOARD", latin1([]byte("caf\xe9"))) }, "café", ""},
		{"owner has no text", "CLIPBOARD", func(t *testing.T, k *desk) { newOwner(t, k.d, "CLIPBOARD", refuse) }, "", "holds no text"},
		{"owner never answers", "CLIPBOARD", func(t *testing.T, k *desk) { newOwner(t, k.d, "CLIPBOARD", nil) }, "", "did not answer"},
		{"bad name", "SELECTION", nil, "", `"SELECTION" is not a selection`},
	}
	k := startDesk(t, false)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.setup != nil {
				tc.setup(t, k)
			}
			ctx := testrig.Context(t, 5*time.Second)
			if tc.wantErr == "did not answer" {
				ctx = testrig.Context(t, 300*time.Millisecond)
			}
			got, err := k.env.Selection(ctx, tc.sel)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Selection = %q, %v; want an error containing %q", short(got), err, tc.wantErr)
				}
				if tc.wantErr == "holds no text" && !errors.Is(err, ErrNoText) {
					t.Errorf("error %v is not ErrNoText", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("Selection = %q (%d bytes), want %q (%d bytes)", short(got), len(got), short(tc.want), len(tc.want))
			}
		})
	}
}

// xclip makes xclip own a selection with text, for the rest of the test.
func xclip(selection, text string) func(t *testing.T, k *desk) {
	return func(t *testing.T, k *desk) {
		t.Helper()
		src := filepath.Join(k.home, "xclip-"+selection)
		if err := os.WriteFile(src, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		ctx := testrig.Context(t, 10*time.Second)
		// -quiet keeps xclip in the foreground, in the launched process
		// group, so CloseLaunched ends it.
		p, err := k.env.Launch(ctx, []string{"xclip", "-quiet", "-selection", selection, "-i", src})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { k.env.CloseLaunched(context.Background()) })
		sel := strings.ToUpper(selection)
		testrig.WaitState(t, 10*time.Second, "xclip to own "+sel, func() (bool, string) {
			if done, how := p.Exited(); done {
				t.Fatalf("xclip exited: %s", how)
			}
			c := k.d.Conn()
			atoms, err := xsel.InternAtoms(c, sel)
			if err != nil {
				return false, err.Error()
			}
			r, err := xproto.GetSelectionOwner(c, xproto.Atom(atoms[sel])).Reply()
			return err == nil && r.Owner != 0, fmt.Sprint(r, err)
		})
	}
}

func short(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

func TestScreenshotGetImage(t *testing.T) {
	k := startDesk(t, false)
	p := testrig.Probe(t, k.d, xprobe.Options{X: 10, Y: 20, Width: 50, Height: 40, Background: 0x336699})
	if err := p.Fill(5, 5, 10, 10, 0xff8000); err != nil {
		t.Fatal(err)
	}
	img, err := k.env.Screenshot(testrig.Context(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	w, h := k.d.Size()
	if img.Bounds() != image.Rect(0, 0, w, h) {
		t.Fatalf("screenshot is %v, want %dx%d", img.Bounds(), w, h)
	}
	tests := []struct {
		x, y int
		want color.RGBA
	}{
		{10, 20, color.RGBA{0x33, 0x66, 0x99, 0xff}},
		{59, 59, color.RGBA{0x33, 0x66, 0x99, 0xff}},
		{15, 25, color.RGBA{0xff, 0x80, 0x00, 0xff}},
		{24, 34, color.RGBA{0xff, 0x80, 0x00, 0xff}},
		{25, 35, color.RGBA{0x33, 0x66, 0x99, 0xff}},
	}
	for _, tc := range tests {
		if got := img.RGBAAt(tc.x, tc.y); got != tc.want {
			t.Errorf("pixel %d,%d = %v, want %v", tc.x, tc.y, got, tc.want)
		}
	}
}

func TestNoDisplay(t *testing.T) {
	env := NewEnv(nil, t.TempDir(), nil)
	ctx := testrig.Context(t, 10*time.Second)
	if _, err := env.Windows(ctx); !errors.Is(err, ErrNoDisplay) {
		t.Errorf("Windows: %v, want ErrNoDisplay", err)
	}
	if _, err := env.Selection(ctx, "CLIPBOARD"); !errors.Is(err, ErrNoDisplay) {
		t.Errorf("Selection: %v, want ErrNoDisplay", err)
	}
	if _, err := env.Screenshot(ctx); !errors.Is(err, ErrNoDisplay) {
		t.Errorf("Screenshot: %v, want ErrNoDisplay", err)
	}
	res, err := env.Run(ctx, `echo "$HOME"; pwd; echo err >&2; exit 4`)
	if err != nil {
		t.Fatal(err)
	}
	want := env.Home() + "\n" + env.Home() + "\n"
	if res.ExitCode != 4 || res.Stdout != want || res.Stderr != "err\n" {
		t.Errorf("Run = %+v, want exit 4, stdout %q, stderr \"err\\n\"", res, want)
	}
}

func TestRun(t *testing.T) {
	k := startDesk(t, false)
	tests := []struct {
		name     string
		script   string
		limit    time.Duration
		exit     int
		stdout   string
		trunc    bool
		errMatch string
	}{
		{"display and home", `echo "$DISPLAY $HOME"`, 0, 0, "", false, ""},
		{"exit status", `exit 7`, 0, 7, "", false, ""},
		{"killed by signal", `kill -TERM $$`, 0, 128 + 15, "", false, ""},
		{"output capped", `head -c 100000 /dev/zero | tr '\0' x`, 0, 0, strings.Repeat("x", MaxOutput), true, ""},
		// Were the output a pipe, Run would wait for the sleep and time out.
		{"background child does not hold the wait", `sleep 20 & echo $!`, 5 * time.Second, 0, "", false, ""},
		{"timeout", `sleep 30`, 200 * time.Millisecond, 0, "", false, "did not finish"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testrig.Context(t, 10*time.Second)
			if tc.limit > 0 {
				ctx = testrig.Context(t, tc.limit)
			}
			res, err := k.env.Run(ctx, tc.script)
			if tc.errMatch != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errMatch) || !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("Run = %+v, %v; want an error containing %q", res, err, tc.errMatch)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := tc.stdout
			switch tc.name {
			case "display and home":
				want = k.d.Name() + " " + k.home + "\n"
			case "background child does not hold the wait":
				pid, perr := strconv.Atoi(strings.TrimSpace(res.Stdout))
				if perr != nil {
					t.Fatalf("stdout %q is not the pid of the background sleep", res.Stdout)
				}
				syscall.Kill(pid, syscall.SIGKILL)
				want = res.Stdout
			}
			if res.ExitCode != tc.exit || res.Stdout != want || res.Truncated != tc.trunc {
				t.Fatalf("Run = exit %d, stdout %q (%d bytes), truncated %v; want %d, %q, %v", res.ExitCode, short(res.Stdout), len(res.Stdout), res.Truncated, tc.exit, short(want), tc.trunc)
			}
		})
	}
}
