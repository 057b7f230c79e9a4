package task

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/internal/testrig"
)

const nobodyID = 65534

// browserDesk is a desktop (Xvfb + openbox) whose session runs as the
// unprivileged user nobody, as the agent's programs do in deployment, with a
// home of its own.
func browserDesk(t testing.TB) (*display.Display, *DisplayEnv) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run the session as the unprivileged user nobody")
	}
	testrig.NeedTools(t, "chromium", "openbox", "xdotool")
	base, err := os.MkdirTemp("/tmp", "deskenv-browser-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o711)
	home := filepath.Join(base, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chown(home, nobodyID, nobodyID)
	d := testrig.Display(t, display.Config{Home: home, WindowManager: []string{"openbox"}, Apps: [][]string{},
		Credential: &syscall.Credential{Uid: nobodyID, Gid: nobodyID, Groups: []uint32{}}, User: "nobody"})
	env := NewEnv(d, "", nil)
	t.Cleanup(func() { env.Close() })
	return d, env
}

const testPage = `<!doctype html>
<title>Shop front</title>
<h1 id="head">Welcome to the shop</h1>
<form method="post" action="/order">
<input id="name" name="name" autofocus>
<input id="gift" name="gift" type="checkbox">
<button id="send">Send</button>
</form>
<p><a id="dl" href="report.csv" download>Report</a> <a id="next" href="about.html">About</a></p>
<p id="count" data-n="3">3 items</p>
`

func xdo(t *testing.T, d *display.Display, args ...string) {
	t.Helper()
	cmd := exec.Command("xdotool", args...)
	cmd.Env = append(os.Environ(), "DISPLAY="+d.Name())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("xdotool %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// check parses one check and evaluates it.
func check(t *testing.T, ctx context.Context, env Env, js string) (bool, string) {
	t.Helper()
	tk, err := Parse([]byte(`{"id": "b", "instruction": "x", "evaluator": `+js+`}`), "b.json")
	if err != nil {
		t.Fatal(err)
	}
	out, err := tk.Evaluate(ctx, env)
	if err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return out.Reasons[0].Passed, out.Reasons[0].Detail
}

// listeners are the listening TCP sockets (v4 and v6) owned by uid.
func listeners(t *testing.T, uid int) []string {
	t.Helper()
	var out []string
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) > 7 && fs[3] == "0A" && fs[7] == strconv.Itoa(uid) {
				out = append(out, f+" "+fs[1])
			}
		}
		fh.Close()
	}
	return out
}

// TestBrowser plays a task over a served page in a real Chromium: serve
// and browser steps, the browser checks before and after the agent acts
// (typing, ticking, a bookmark with ctrl+d, a download, following a link),
// and from the agent's side: no debugging port, no way into the pipe.
func TestBrowser(t *testing.T) {
	d, env := browserDesk(t)
	ctx := testrig.Context(t, 4*time.Minute)
	port := testrig.FreePort(t)
	before := listeners(t, nobodyID)
	tk, err := Parse([]byte(fmt.Sprintf(`{"id": "shop", "instruction": "x", "setup": [
		{"type": "write_file", "path": "~/site/index.html", "content": %q},
		{"type": "write_file", "path": "~/site/about.html", "content": "<!doctype html><title>About us</title><p>About"},
		{"type": "write_file", "path": "~/site/report.csv", "content": "a,b\n1,2\n"},
		{"type": "serve", "dir": "~/site", "port": %d},
		{"type": "browser", "url": "http://127.0.0.1:%d/index.html"}
	], "evaluator": {"type": "browser_url", "contains": "about.html"}}`, testPage, port, port)), "shop.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := tk.RunSetup(ctx, env); err != nil {
		t.Fatal(err)
	}
	b := env.Browser()
	if b == nil {
		t.Fatal("no browser after the browser step")
	}

	// Sign-in is off in the profile Chromium runs with (it rewrites the
	// file it was seeded with): else a new profile grows an animated
	// "Sign in to Chromium?" button after the first page, 250 ms a reset
	// waits out, and folds it away seconds into the episode.
	t.Run("sign-in off", func(t *testing.T) {
		raw, err := os.ReadFile(filepath.Join(expandPath(d.Config().Home, BrowserProfile), "Default", "Preferences"))
		if err != nil {
			t.Fatal(err)
		}
		var prefs struct {
			Signin struct {
				Allowed *bool `json:"allowed"`
			} `json:"signin"`
		}
		if err := json.Unmarshal(raw, &prefs); err != nil {
			t.Fatalf("the running profile's Preferences: %v", err)
		}
		if prefs.Signin.Allowed == nil || *prefs.Signin.Allowed {
			t.Errorf("sign-in is not off in the running profile's Preferences: %.300s", raw)
		}
	})

	t.Run("no debugging port", func(t *testing.T) {
		if after := listeners(t, nobodyID); len(after) != len(before) {
			t.Errorf("the desktop user listens on TCP: before %v, after the browser started %v", before, after)
		}
		if out, err := exec.Command("sh", "-c", "tr '\\0' '\\n' < /proc/"+strconv.Itoa(b.PID())+"/cmdline").Output(); err != nil || strings.Contains(string(out), "remote-debugging-port") || !strings.Contains(string(out), "remote-debugging-pipe") {
			t.Errorf("chromium's command line (err %v): %s", err, out)
		}
	})

	for _, c := range []struct {
		check string
		pass  bool
	}{
		{`{"type": "browser_url", "contains": "/index.html"}`, true},
		{`{"type": "browser_url", "contains": "about.html"}`, false},
		{`{"type": "browser_title", "matches": "^Shop"}`, true},
		{`{"type": "browser_title", "contains": "shop front", "ignore_case": true}`, true},
		{`{"type": "browser_title", "contains": "About"}`, false},
		{`{"type": "browser_element", "selector": "#head", "contains": "Welcome"}`, true},
		{`{"type": "browser_element", "selector": "#head", "equals": "Welcome to the shop"}`, true},
		{`{"type": "browser_element", "selector": "#count", "property": "dataset", "equals": {"n": "3"}}`, true},
		{`{"type": "browser_element", "selector": "#missing", "contains": "x"}`, false},
		{`{"type": "browser_element", "selector": "#name", "property": "value", "equals": "Ada Lovelace"}`, false},
		{`{"type": "browser_element", "selector": "#gift", "property": "checked", "equals": true}`, false},
		{`{"type": "browser_element", "selector": "#name", "property": "nosuch", "equals": 1}`, false},
		{`{"type": "browser_download", "contains": "report"}`, false},
	} {
		if got, detail := check(t, ctx, env, c.check); got != c.pass {
			t.Errorf("%s: passed %v (%s), want %v", c.check, got, detail, c.pass)
		} else {
			t.Logf("%s: %v, %s", c.check, got, detail)
		}
	}

	// The agent types into the focused input and ticks the box.
	xdo(t, d, "search", "--sync", "--onlyvisible", "--class", "chromium", "windowactivate", "--sync")
	xdo(t, d, "type", "--delay", "20", "Ada Lovelace")
	xdo(t, d, "key", "Tab", "space")
	time.Sleep(300 * time.Millisecond) // for the keys to reach the page; checks below poll nothing
	for _, c := range []string{
		`{"type": "browser_element", "selector": "#name", "property": "value", "equals": "Ada Lovelace"}`,
		`{"type": "browser_element", "selector": "#gift", "property": "checked", "equals": true}`,
	} {
		if ok, detail := check(t, ctx, env, c); !ok {
			t.Errorf("%s after typing: %s", c, detail)
		}
	}

	t.Run("bookmark", func(t *testing.T) {
		if ok, detail := check(t, ctx, env, `{"type": "browser_bookmark", "contains": "Shop front"}`); ok {
			t.Fatalf("a bookmark before any was made: %s", detail)
		}
		xdo(t, d, "key", "ctrl+d")
		time.Sleep(time.Second) // the bookmark bubble opens
		xdo(t, d, "key", "Return")
		ok, detail := check(t, ctx, env, `{"type": "browser_bookmark", "matches": "127\\.0\\.0\\.1:\\d+/index"}`)
		if !ok {
			t.Fatalf("no bookmark after ctrl+d, Return: %s", detail)
		}
		t.Log(detail)
	})

	t.Run("download", func(t *testing.T) {
		p, err := b.Active(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Evaluate(ctx, `document.getElementById("dl").click()`, nil); err != nil {
			t.Fatal(err)
		}
		testrig.WaitState(t, 20*time.Second, "the download", func() (bool, string) {
			ok, detail := check(t, ctx, env, `{"type": "browser_download", "matches": "^report.*\\.csv$"}`)
			return ok, detail
		})
	})

	t.Run("agent cannot reach the pipe", func(t *testing.T) {
		// Every process holding an end of the DevTools pipes (chromium's fd 3
		// and 4, and any child that inherited them), opened through
		// /proc/<pid>/fd as the desktop user, which owns those processes.
		pipes := map[string]bool{}
		for _, fd := range []string{"3", "4"} {
			l, err := os.Readlink("/proc/" + strconv.Itoa(b.PID()) + "/fd/" + fd)
			if err != nil || !strings.HasPrefix(l, "pipe:") {
				t.Fatalf("chromium's fd %s is %q (%v), not a pipe", fd, l, err)
			}
			pipes[l] = true
		}
		fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
		tried := 0
		for _, f := range fds {
			if l, err := os.Readlink(f); err != nil || !pipes[l] {
				continue
			}
			var st syscall.Stat_t
			if syscall.Stat(filepath.Dir(filepath.Dir(f)), &st) != nil || st.Uid != nobodyID {
				continue // deskenv's own ends
			}
			tried++
			cmd := exec.Command("/bin/sh", "-c", `exec 5<>"$1" && echo opened`, "sh", f)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobodyID, Gid: nobodyID, Groups: []uint32{}}}
			out, err := cmd.CombinedOutput()
			t.Logf("the desktop user opens %s: %v %s", f, err, strings.TrimSpace(string(out)))
			if err == nil && strings.Contains(string(out), "opened") {
				t.Errorf("the desktop user could open the DevTools pipe at %s", f)
			}
		}
		if tried == 0 {
			t.Fatal("found no process of the desktop user holding the pipes")
		}
		status, _ := os.ReadFile("/proc/" + strconv.Itoa(b.PID()) + "/status")
		var st syscall.Stat_t
		syscall.Stat("/proc/"+strconv.Itoa(b.PID())+"/fd", &st)
		t.Logf("chromium pid %d: /proc/pid/fd owned by uid %d; %s", b.PID(), st.Uid, firstLine(string(status), "Uid:"))
	})

	// Following the link passes the task's evaluator.
	p, err := b.Active(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Evaluate(ctx, `document.getElementById("next").click()`, nil); err != nil {
		t.Fatal(err)
	}
	testrig.WaitState(t, 20*time.Second, "the about page", func() (bool, string) {
		out, err := tk.Evaluate(ctx, env)
		if err != nil {
			return false, err.Error()
		}
		return out.Success, out.Reasons[0].Detail
	})
	if err := b.Back(ctx); err != nil {
		t.Fatal(err)
	}
	testrig.WaitState(t, 20*time.Second, "back at the start", func() (bool, string) {
		u, err := b.URL(ctx)
		return err == nil && strings.HasSuffix(u, "/index.html"), u
	})
	if err := b.Forward(ctx); err != nil {
		t.Fatal(err)
	}
	testrig.WaitState(t, 20*time.Second, "forward at the about page", func() (bool, string) {
		u, err := b.URL(ctx)
		return err == nil && strings.HasSuffix(u, "/about.html"), u
	})
	if err := b.Forward(ctx); err == nil || !strings.Contains(err.Error(), "history has no entry") {
		t.Errorf("forward at the end of the history: %v", err)
	}
	if err := b.Navigate(ctx, fmt.Sprintf("http://127.0.0.1:%d/index.html#again", port)); err != nil {
		t.Fatal(err)
	}
	if u, err := b.URL(ctx); err != nil || !strings.HasSuffix(u, "#again") {
		t.Errorf("after Navigate the URL is %q (%v)", u, err)
	}
	if err := b.Back(ctx); err != nil {
		t.Fatal(err)
	}

	// A second browser step opens a tab in the same browser, which becomes
	// the active one.
	tab, err := Parse([]byte(fmt.Sprintf(`{"id": "tab", "instruction": "x", "setup": [
		{"type": "browser", "url": "http://127.0.0.1:%d/about.html"}], "evaluator": {"type": "browser_title", "contains": "About us"}}`, port)), "tab.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := tab.RunSetup(ctx, env); err != nil {
		t.Fatal(err)
	}
	if env.Browser() != b {
		t.Error("the second browser step started another browser")
	}
	if out, err := tab.Evaluate(ctx, env); err != nil || !out.Success {
		t.Errorf("the new tab is not the active one: %+v, %v", out, err)
	}
	if pages, err := b.dt.Pages(ctx); err != nil || len(pages) != 2 {
		t.Errorf("tabs after the second step: %+v, %v; want 2", pages, err)
	}

	// A page holding an alert() open answers no script: the element check
	// fails within its bound and says why, and the URL check still finds
	// the tab.
	p, err = b.Active(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Evaluate(ctx, `setTimeout(() => alert("hold"), 0)`, nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // for the alert to open
	if ok, detail := check(t, ctx, env, `{"type": "browser_element", "selector": "h1", "contains": "x"}`); ok || !strings.Contains(detail, "did not answer") {
		t.Errorf("browser_element with an alert open: %v %s", ok, detail)
	}
	if ok, detail := check(t, ctx, env, `{"type": "browser_url", "contains": "about.html"}`); !ok {
		t.Errorf("browser_url with an alert open: %s", detail)
	}

	env.CloseLaunched(ctx)
	if env.Browser() != nil {
		t.Error("the browser is still there after CloseLaunched")
	}
	// A check of a browser no step started is the task's mistake: an error.
	tk2, err := Parse([]byte(`{"id": "b", "instruction": "x", "evaluator": {"type": "browser_title", "contains": "Shop"}}`), "b.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tk2.Evaluate(ctx, env); err == nil || !strings.Contains(err.Error(), "started no browser") {
		t.Errorf("browser_title after the reset closed the browser: %v, want the error that no browser was started", err)
	}
}

func firstLine(s, prefix string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// TestBrowserLike: a program starting Chromium itself gets the browser
// step's program and flags but the DevTools pipe, and the sign-in-off
// preferences, and cannot change the step's own list through the slice it
// is given.
func TestBrowserLike(t *testing.T) {
	argv, env, prefs := BrowserLike()
	if len(argv) < len(browserFlags) {
		t.Fatalf("BrowserLike argv = %q, want a program and the step's flags %q but the pipe", argv, browserFlags)
	}
	flags := argv[1 : 1+len(browserFlags)-1]
	if slices.Contains(argv, "--remote-debugging-pipe") || !slices.Equal(flags, slices.DeleteFunc(slices.Clone(browserFlags), func(f string) bool { return f == "--remote-debugging-pipe" })) {
		t.Errorf("BrowserLike argv = %q, want the step's flags %q but the pipe", argv, browserFlags)
	}
	// The program is the one the step runs, launcher skipped or not.
	want := "chromium"
	var wantEnv []string
	if path, err := lookPath("chromium", nil); err == nil {
		want, _, wantEnv = debianLauncher(path, debianChromium)
	}
	if argv[0] != want || !slices.Equal(env, wantEnv) {
		t.Errorf("BrowserLike runs %s with %q, want %s with %q", argv[0], env, want, wantEnv)
	}
	if prefs != browserPreferences {
		t.Errorf("BrowserLike preferences = %q, want %q", prefs, browserPreferences)
	}
	argv[1] = "--changed"
	if browserFlags[0] == "--changed" {
		t.Error("changing BrowserLike's flags changed the browser step's")
	}
}

// TestDebianLauncher: Debian's launcher script is skipped only when the
// browser it runs is there and its settings directory holds the package's
// files alone.
func TestDebianLauncher(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "chromium")
	testrig.WriteFile(t, script, "#!/bin/sh\nexec /x \"$@\"\n", 0o755)
	elf := filepath.Join(dir, "chromium-elf")
	testrig.WriteFile(t, elf, "\x7fELF", 0o755)
	binary := filepath.Join(dir, "lib", "chromium")
	testrig.WriteFile(t, binary, "\x7fELF", 0o755)
	stock := filepath.Join(dir, "stock.d")
	for _, f := range debianChromium.stock {
		testrig.WriteFile(t, filepath.Join(stock, f), "# package\n", 0o644)
	}
	extra := filepath.Join(dir, "extra.d")
	testrig.WriteFile(t, filepath.Join(extra, "default-flags"), "# package\n", 0o644)
	testrig.WriteFile(t, filepath.Join(extra, "proxy"), "export CHROMIUM_FLAGS=\"$CHROMIUM_FLAGS --proxy-server=x\"\n", 0o644)
	cases := []struct {
		name    string
		path    string
		inst    chromiumInstall
		want    string
		wantEnv bool
	}{
		{"the package's launcher", script, chromiumInstall{binary, stock, debianChromium.stock}, binary, true},
		{"an operator's settings file", script, chromiumInstall{binary, extra, debianChromium.stock}, script, false},
		{"no settings directory", script, chromiumInstall{binary, filepath.Join(dir, "none"), debianChromium.stock}, script, false},
		{"no browser behind it", script, chromiumInstall{filepath.Join(dir, "lib", "none"), stock, debianChromium.stock}, script, false},
		{"not a script", elf, chromiumInstall{binary, stock, debianChromium.stock}, elf, false},
		{"missing", filepath.Join(dir, "gone"), chromiumInstall{binary, stock, debianChromium.stock}, filepath.Join(dir, "gone"), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, flags, env := debianLauncher(c.path, c.inst)
			if got != c.want {
				t.Errorf("debianLauncher(%s) runs %s, want %s", c.path, got, c.want)
			}
			if c.wantEnv != (len(env) > 0 && len(flags) > 0) || c.wantEnv && !slices.Contains(env, "CHROME_WRAPPER="+c.path) {
				t.Errorf("debianLauncher(%s) flags %q, env %q; want the launcher's (%v)", c.path, flags, env, c.wantEnv)
			}
		})
	}
}
