package studio_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/internal/testrig"
)

// TestAnnotatorsInPool: two annotators open the pool's page at once on
// --desktops 2; each lands on a desktop of their own, types into its
// terminal, and what each typed reaches their own desktop alone (the shell
// of each desktop writes it into that desktop's home). Neither page's token
// works on the other's desktop; a page that reloads keeps its desktop, one
// that goes away gives it back.
func TestAnnotatorsInPool(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	testrig.NeedTools(t, "openbox", "xterm", "xdotool")
	root := testrig.ModuleRoot(t)
	bin := testrig.BuildDeskenv(ctx, t)

	const operator = "operator-0123456789abcdef"
	home := reachable(t)
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("annotator="+annotatorA+"\nannotator="+annotatorB+"\noperator="+operator+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The pool starts its own X servers; d only gives deskenv an
	// environment to start from.
	d := testrig.Display(t, display.Config{})
	base := startDeskenv(t, bin, d, "--desktops", "2", "--home", home, "--tasks", filepath.Join(root, "tasks"),
		"--episodes", t.TempDir(), "--tokens-file", tokens)

	var console syncBuffer
	drv := startDriverTo(ctx, t, &console)
	type page struct {
		name, token, text string
		desk              int
		deskToken         string
	}
	pages := []*page{{name: "a", token: annotatorA, text: "typed-by-A"}, {name: "b", token: annotatorB, text: "typed-by-B"}}
	// Both open before either is looked at: two annotators at once.
	for _, p := range pages {
		do(ctx, t, drv, "open", map[string]any{"page": p.name, "url": base + "/?token=" + p.token, "initScript": errorTrap}, nil)
	}
	for _, p := range pages {
		waitFor(ctx, t, drv, p.name, `/^\/d\/\d+\/$/.test(location.pathname) && deskenv.state === 'connected' && deskenv.video.videoWidth > 0`,
			"annotator "+p.name+"'s page never reached a desktop of its own")
		var href string
		do(ctx, t, drv, "eval", map[string]any{"page": p.name, "expr": `location.href`}, &href)
		u, err := url.Parse(href)
		if err != nil {
			t.Fatal(err)
		}
		p.desk, _ = strconv.Atoi(strings.Split(u.Path, "/")[2])
		p.deskToken = u.Query().Get("token")
		if p.deskToken == "" || p.deskToken == p.token {
			t.Fatalf("annotator %s's page is at %s: want the desktop's own token, not the pool-wide one", p.name, u.Path)
		}
	}
	if pages[0].desk == pages[1].desk {
		t.Fatalf("both annotators landed on desktop %d", pages[0].desk)
	}

	// Where each desktop's terminal is, from its own X server.
	var desks struct {
		Desktops []struct {
			Index      int    `json:"index"`
			Display    string `json:"display"`
			XAuthority string `json:"xauthority"`
		} `json:"desktops"`
	}
	if code := getJSON(t, base+"/desktops", operator, &desks); code != 200 || len(desks.Desktops) != 2 {
		t.Fatalf("GET /desktops: %d %+v", code, desks)
	}
	for _, p := range pages {
		dd := desks.Desktops[p.desk]
		env := []string{"DISPLAY=" + dd.Display, "XAUTHORITY=" + dd.XAuthority}
		cx, cy := terminalCentre(ctx, t, env)
		do(ctx, t, drv, "eval", map[string]any{"page": p.name, "expr": `document.getElementById('control').click()`}, nil)
		waitFor(ctx, t, drv, p.name, `deskenv.canAct`, "annotator "+p.name+" did not get control of its desktop")
		do(ctx, t, drv, "click", map[string]any{"page": p.name, "vx": cx, "vy": cy}, nil)
		do(ctx, t, drv, "type", map[string]any{"page": p.name, "text": "echo " + p.text + " >> ~/typed.txt"}, nil)
		do(ctx, t, drv, "press", map[string]any{"page": p.name, "key": "Enter"}, nil)
	}
	file := func(p *page) string { return filepath.Join(home, "d"+strconv.Itoa(p.desk), "typed.txt") }
	for _, p := range pages {
		testrig.WaitFor(t, "annotator "+p.name+"'s typing to reach desktop "+strconv.Itoa(p.desk), func() bool {
			b, err := os.ReadFile(file(p))
			return err == nil && strings.Contains(string(b), p.text)
		})
	}
	// Both lines have reached a shell: had either reached the other
	// desktop too, that desktop's file would hold it, the lines being
	// typed one after the other into the same kind of terminal.
	for _, p := range pages {
		b, _ := os.ReadFile(file(p))
		if string(b) != p.text+"\n" {
			t.Errorf("desktop %d's shell received %q, want annotator %s's %q alone", p.desk, b, p.name, p.text+"\n")
		}
		t.Logf("annotator %s is on desktop %d; its shell wrote %q", p.name, p.desk, b)
	}

	// Each page's token opens its own desktop alone.
	for i, p := range pages {
		other := pages[1-i]
		for _, c := range []struct {
			desk int
			want int
		}{{p.desk, 200}, {other.desk, 401}} {
			if code := status(t, fmt.Sprintf("%s/d/%d/api/tasks", base, c.desk), p.deskToken); code != c.want {
				t.Errorf("annotator %s's desktop token on desktop %d: %d, want %d", p.name, c.desk, code, c.want)
			}
		}
		if code := status(t, fmt.Sprintf("%s/d/%d/api/tasks", base, p.desk), p.token); code != 401 {
			t.Errorf("annotator %s's pool-wide token on its desktop %d: %d, want 401", p.name, p.desk, code)
		}
	}
	var errs []string
	for _, p := range pages {
		do(ctx, t, drv, "eval", map[string]any{"page": p.name, "expr": `window.__errors`}, &errs)
		if len(errs) > 0 {
			t.Errorf("annotator %s's page logged errors: %q", p.name, errs)
		}
	}

	// B reloads its page: that is leaving it too (pagehide), but the
	// reloaded page views the desktop again within the grace, so B keeps
	// it. A leaves for good: after the grace (10 s) its desktop goes back
	// to the pool and its token dies; by then B's grace is over too.
	do(ctx, t, drv, "eval", map[string]any{"page": "b", "expr": `location.reload()`}, nil)
	waitFor(ctx, t, drv, "b", `typeof deskenv !== 'undefined' && deskenv.state === 'connected' && deskenv.video.videoWidth > 0`,
		"annotator B's page did not come back after a reload")
	do(ctx, t, drv, "eval", map[string]any{"page": "a", "expr": `location.href = 'about:blank'`}, nil)
	testrig.WaitWithin(t, time.Minute, "annotator A's desktop to go back to the pool", func() bool {
		return status(t, fmt.Sprintf("%s/d/%d/api/tasks", base, pages[0].desk), pages[0].deskToken) == 401
	})
	if code := status(t, fmt.Sprintf("%s/d/%d/api/tasks", base, pages[1].desk), pages[1].deskToken); code != 200 {
		t.Errorf("annotator B's token after B reloaded its page: %d, want 200", code)
	}
	var leases struct {
		Leases []struct {
			Desktop int `json:"desktop"`
		} `json:"leases"`
	}
	if code := getJSON(t, base+"/leases", operator, &leases); code != 200 || len(leases.Leases) != 1 || leases.Leases[0].Desktop != pages[1].desk {
		t.Errorf("leases once A left: %d %+v, want B's desktop %d alone", code, leases, pages[1].desk)
	}
}

// status GETs u with token and returns the status.
func status(t *testing.T, u, token string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// terminalCentre is the centre of the xterm --apps starts on the X server
// env names, in screen pixels.
func terminalCentre(ctx context.Context, t *testing.T, env []string) (int, int) {
	t.Helper()
	var out []byte
	testrig.WaitFor(t, "the desktop's terminal", func() bool {
		cmd := exec.CommandContext(ctx, "xdotool", "search", "--onlyvisible", "--class", "xterm", "getwindowgeometry", "--shell")
		cmd.Env = append(os.Environ(), env...)
		var err error
		out, err = cmd.Output()
		return err == nil && strings.Contains(string(out), "WIDTH=")
	})
	v := map[string]int{}
	for _, line := range strings.Split(string(out), "\n") {
		if k, val, ok := strings.Cut(line, "="); ok {
			n, _ := strconv.Atoi(val)
			v[k] = n
		}
	}
	return v["X"] + v["WIDTH"]/2, v["Y"] + v["HEIGHT"]/2
}

// reachable is a temporary directory the pool's session users can search
// through (t.TempDir's parents are 0700): their homes go under it.
func reachable(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for d := dir; d != "/" && d != os.TempDir() && d != "."; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o011 != 0o011 {
			if err := os.Chmod(d, fi.Mode().Perm()|0o011); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}
