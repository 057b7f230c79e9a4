package task

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"

	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/internal/xsel"
)

// ewmh sends the client messages a pager or wmctrl sends to the window
// manager, on a connection of the test's own.
type ewmh struct {
	c     *xgb.Conn
	root  xproto.Window
	atoms map[string]xproto.Atom
}

func newEWMH(t *testing.T, display string) *ewmh {
	c, err := xgb.NewConnDisplay(display)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	atoms, err := xsel.InternAtoms(c, "_NET_WM_STATE", "_NET_WM_STATE_MAXIMIZED_VERT", "_NET_WM_STATE_MAXIMIZED_HORZ",
		"_NET_WM_STATE_ABOVE", "_NET_WM_STATE_FULLSCREEN", "_NET_ACTIVE_WINDOW", "WM_CHANGE_STATE")
	if err != nil {
		t.Fatal(err)
	}
	return &ewmh{c: c, root: xproto.Setup(c).DefaultScreen(c).Root, atoms: atoms}
}

func (e *ewmh) send(t *testing.T, w uint32, typ string, data ...uint32) {
	t.Helper()
	var d [5]uint32
	copy(d[:], data)
	ev := xproto.ClientMessageEvent{Format: 32, Window: xproto.Window(w), Type: e.atoms[typ],
		Data: xproto.ClientMessageDataUnionData32New(d[:])}
	mask := uint32(xproto.EventMaskSubstructureRedirect | xproto.EventMaskSubstructureNotify)
	if err := xproto.SendEventChecked(e.c, false, e.root, mask, string(ev.Bytes())).Check(); err != nil {
		t.Fatal(err)
	}
}

// addState asks for _NET_WM_STATE_<a> (and <b>) on w, as wmctrl -b add does.
func (e *ewmh) addState(t *testing.T, w uint32, a, b string) {
	e.send(t, w, "_NET_WM_STATE", 1, uint32(e.atoms[a]), uint32(e.atoms[b]), 2)
}

// TestWindowState maximises, raises above, makes fullscreen, activates and
// minimises real xterms under openbox through EWMH client messages, and
// checks that window_state sees each state on the right window only.
func TestWindowState(t *testing.T) {
	k := startDesk(t, true)
	k.launchXterm(t, "alpha")
	k.launchXterm(t, "beta")
	ids := map[string]uint32{}
	ws, err := k.env.Windows(testrig.Context(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		ids[w.Title] = w.ID
	}
	if ids["alpha"] == 0 || ids["beta"] == 0 {
		t.Fatalf("xterms not listed: %+v", ws)
	}
	x := newEWMH(t, k.d.Name())
	check := func(title, state string) string {
		return `{"type":"window_state","contains":"` + title + `","state":"` + state + `"}`
	}
	// waitCheck waits for the window manager to apply a request.
	waitCheck := func(title, state string) {
		t.Helper()
		testrig.WaitState(t, 10*time.Second, title+" "+state, func() (bool, string) {
			ok, detail := evalCheck(t, k.env, check(title, state))
			return ok, detail
		})
	}
	expect := func(title, state string, want bool, detail string) {
		t.Helper()
		ok, got := evalCheck(t, k.env, check(title, state))
		if ok != want || !strings.Contains(got, detail) {
			t.Errorf("%s %s: passed %v, want %v; detail %q, want it to contain %q", title, state, ok, want, got, detail)
		}
	}

	expect("alpha", StateExists, true, "is exists")
	expect("gamma", StateExists, false, `no window title contains "gamma"`)
	expect("alpha", StateMaximized, false, "no window titled so is maximized")

	x.addState(t, ids["alpha"], "_NET_WM_STATE_MAXIMIZED_VERT", "_NET_WM_STATE_MAXIMIZED_HORZ")
	waitCheck("alpha", StateMaximized)
	expect("beta", StateMaximized, false, "beta")

	x.addState(t, ids["beta"], "_NET_WM_STATE_ABOVE", "")
	waitCheck("beta", StateAbove)
	expect("alpha", StateAbove, false, "maximized")

	x.send(t, ids["alpha"], "_NET_ACTIVE_WINDOW", 2, 0, 0)
	waitCheck("alpha", StateFocused)
	expect("beta", StateFocused, false, "above")
	x.send(t, ids["beta"], "_NET_ACTIVE_WINDOW", 2, 0, 0)
	waitCheck("beta", StateFocused)
	expect("alpha", StateFocused, false, "maximized")

	x.addState(t, ids["beta"], "_NET_WM_STATE_FULLSCREEN", "")
	waitCheck("beta", StateFullscreen)
	expect("alpha", StateFullscreen, false, "alpha")

	expect("alpha", StateMinimized, false, "alpha")
	x.send(t, ids["alpha"], "WM_CHANGE_STATE", 3) // IconicState, as a taskbar minimises
	waitCheck("alpha", StateMinimized)
	expect("beta", StateMinimized, false, "beta")
}

// TestProcessRunning starts a real program under a name of its own and
// checks process_running finds it by name and command line while it runs,
// and not once it has ended, nor among another user's processes.
func TestProcessRunning(t *testing.T) {
	home := t.TempDir()
	env := NewEnv(nil, home, nil)
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(sleep, "3001")
	cmd.Args[0] = filepath.Join("/opt/deskenv-test", "deskenvsleeper") // argv[0] is the name a person sees in ps
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	cases := []fileCase{
		{`{"type":"process_running","process":"deskenvsleeper"}`, true, "deskenvsleeper 3001"},
		{`{"type":"process_running","process":"sleep","matches":"deskenvsleeper 30[0-9]+$"}`, true, "is running"}, // comm
		{`{"type":"process_running","process":"deskenvsleeper","contains":"3002"}`, false, `deskenvsleeper runs, but no command line contains "3002"`},
		{`{"type":"process_running","contains":"deskenvsleeper 3001"}`, true, "is running"},
		{`{"type":"process_running","process":"deskenvsleepe"}`, false, `no process of the desktop's user named "deskenvsleepe"`},
	}
	runFileCases(t, env, cases)

	procs, err := listProcesses(testrig.Context(t, 10*time.Second), "/proc", 65534, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		if p.PID == cmd.Process.Pid {
			t.Errorf("user 65534's processes include the test's own sleeper: %+v", p)
		}
	}

	cmd.Process.Kill()
	cmd.Wait()
	runFileCases(t, env, []fileCase{
		{`{"type":"process_running","process":"deskenvsleeper"}`, false, "no process of the desktop's user"},
	})
}
