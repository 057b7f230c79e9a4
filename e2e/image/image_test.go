// Package image_test checks deskenv's container image from outside, as it
// runs under podman: the front door over real TCP, MCP through the mcp-go
// client with the agent token, a click the container's X server delivers to
// a probe window the test maps there, the page's video in headless Chromium,
// a reset, the users docs/SECURITY.md promises, and that the session user
// finds no token.
//
// scripts/image-test.sh (`make image-test`) builds nothing: it starts the
// image `make image` built, with tokens and --network host, and runs this
// test with the container's name, address and tokens in the environment. Run
// without them, the test skips and says how to run it.
package image_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/deskenv/deskenv/e2e/browser"
	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/internal/xprobe"
)

// container is the running image under test, as image-test.sh describes it.
type container struct {
	name     string // podman's container name
	target   string // full or slim
	base     string // http://127.0.0.1:PORT
	agent    string
	operator string
	viewer   string
	// tokensFile is the path of the tokens file inside the container, when
	// the script gave the tokens that way ("" when through the environment).
	tokensFile string
}

func fromEnv(t *testing.T) container {
	t.Helper()
	c := container{
		name:       os.Getenv("DESKENV_IMAGE_TEST_CONTAINER"),
		target:     os.Getenv("DESKENV_IMAGE_TEST_TARGET"),
		base:       os.Getenv("DESKENV_IMAGE_TEST_URL"),
		agent:      os.Getenv("DESKENV_IMAGE_TEST_AGENT_TOKEN"),
		operator:   os.Getenv("DESKENV_IMAGE_TEST_OPERATOR_TOKEN"),
		viewer:     os.Getenv("DESKENV_IMAGE_TEST_VIEWER_TOKEN"),
		tokensFile: os.Getenv("DESKENV_IMAGE_TEST_TOKENS_FILE"),
	}
	if c.name == "" {
		t.Skip("checks a running deskenv container: run `make image image-test` (scripts/image-test.sh starts the container and sets DESKENV_IMAGE_TEST_*)")
	}
	if c.base == "" || c.agent == "" || c.operator == "" || c.viewer == "" || (c.target != "full" && c.target != "slim") {
		t.Fatalf("DESKENV_IMAGE_TEST_CONTAINER=%s is set but not the rest: want DESKENV_IMAGE_TEST_URL, _TARGET (full or slim), _AGENT_TOKEN, _OPERATOR_TOKEN and _VIEWER_TOKEN", c.name)
	}
	return c
}

// podman runs a podman command and returns its standard output; a failure
// is returned with stderr in it, for the cases that expect one.
func podman(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "podman", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.String(), fmt.Errorf("podman %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

func mustPodman(ctx context.Context, t *testing.T, args ...string) string {
	t.Helper()
	out, err := podman(ctx, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// call makes one HTTP request with a bearer token ("" for none) and returns
// the status and body.
func call(ctx context.Context, t *testing.T, method, url, token string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, b
}

// proc is one process in the container as ps shows it.
type proc struct {
	pid  int
	user string
	comm string
	args string
}

func processes(ctx context.Context, t *testing.T, c container) []proc {
	t.Helper()
	out := mustPodman(ctx, t, "exec", c.name, "ps", "-eo", "pid=,user:32=,comm=,args=")
	var ps []proc
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		pid, _ := strconv.Atoi(f[0])
		ps = append(ps, proc{pid: pid, user: f[1], comm: f[2], args: strings.Join(f[3:], " ")})
	}
	return ps
}

func (c container) hostPID(ctx context.Context, t *testing.T) int {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(mustPodman(ctx, t, "inspect", "--format", "{{.State.Pid}}", c.name)))
	if err != nil || pid <= 0 {
		t.Fatalf("podman inspect %s gave no host pid: %v", c.name, err)
	}
	return pid
}

func TestImage(t *testing.T) {
	c := fromEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// The appliance is up once /health says so: the X server answers and the
	// window manager runs.
	testrig.WaitState(t, 90*time.Second, "GET /health to answer 200 healthy", func() (bool, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/health", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK && strings.TrimSpace(string(b)) == `{"status":"healthy"}`, fmt.Sprintf("%d %s", resp.StatusCode, b)
	})

	t.Run("health", func(t *testing.T) { checkHealth(ctx, t, c) })
	t.Run("front door roles", func(t *testing.T) { checkRoles(ctx, t, c) })
	t.Run("MCP tools/list and a click the X server delivers", func(t *testing.T) { checkMCP(ctx, t, c) })
	t.Run("the page plays video in headless Chromium", func(t *testing.T) { checkVideo(ctx, t, c) })
	t.Run("reset with the operator token", func(t *testing.T) { checkReset(ctx, t, c) })
	t.Run("users as docs/SECURITY.md says", func(t *testing.T) { checkUsers(ctx, t, c) })
	t.Run("no token visible to the session", func(t *testing.T) { checkNoToken(ctx, t, c) })
}

// checkHealth: the details name the separated session user, and the image's
// own HEALTHCHECK command passes (run by hand: podman runs health checks
// from systemd timers, which CI's machines lack, and the image's command
// names port 8080 while the test gives the container a free one).
func checkHealth(ctx context.Context, t *testing.T, c container) {
	code, body := call(ctx, t, http.MethodGet, c.base+"/health?details=1", c.operator, nil)
	if code != http.StatusOK {
		t.Fatalf("GET /health?details=1: %d %s", code, body)
	}
	var h struct {
		Status  string
		Details struct {
			Isolation struct {
				Separated   bool   `json:"separated"`
				SessionUser string `json:"session_user"`
				Why         string `json:"why"`
			} `json:"isolation"`
		} `json:"details"`
	}
	if err := json.Unmarshal(body, &h); err != nil {
		t.Fatalf("/health?details=1 is not JSON: %v: %s", err, body)
	}
	if !h.Details.Isolation.Separated || h.Details.Isolation.SessionUser != "desk" {
		t.Errorf("isolation %+v, want separated with session user desk: %s", h.Details.Isolation, body)
	}

	var hc []string
	image := strings.TrimSpace(mustPodman(ctx, t, "inspect", "--format", "{{.ImageName}}", c.name))
	if err := json.Unmarshal([]byte(mustPodman(ctx, t, "image", "inspect", "--format", "{{json .HealthCheck.Test}}", image)), &hc); err != nil {
		t.Fatalf("the image has no HEALTHCHECK (built in OCI format?): %v", err)
	}
	if len(hc) < 2 || hc[0] != "CMD" {
		t.Fatalf("HEALTHCHECK test %q: want [CMD ...]", hc)
	}
	port := c.base[strings.LastIndex(c.base, ":")+1:]
	args := []string{"exec", c.name}
	for _, a := range hc[1:] {
		args = append(args, strings.Replace(a, "127.0.0.1:8080", "127.0.0.1:"+port, 1))
	}
	if out, err := podman(ctx, args...); err != nil {
		t.Errorf("the image's HEALTHCHECK %q fails: %v %s", hc[1:], err, out)
	}
}

// checkRoles: with tokens configured nothing but /health and the page opens
// without one, and each token opens only its role's routes.
func checkRoles(ctx context.Context, t *testing.T, c container) {
	tests := []struct {
		name, method, path, token string
		want                      int
	}{
		{"MCP without a token", http.MethodPost, "/mcp", "", http.StatusUnauthorized},
		{"MCP with a wrong token", http.MethodPost, "/mcp", "not-a-token", http.StatusUnauthorized},
		{"reset without a token", http.MethodPost, "/api/reset", "", http.StatusUnauthorized},
		{"reset with the agent token", http.MethodPost, "/api/reset", c.agent, http.StatusForbidden},
		{"reset with the viewer token", http.MethodPost, "/api/reset", c.viewer, http.StatusForbidden},
		{"state with the operator token", http.MethodGet, "/api/state", c.operator, http.StatusOK},
		{"the page without a token", http.MethodGet, "/", "", http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var body any
			if tc.method == http.MethodPost {
				body = map[string]any{}
			}
			code, b := call(ctx, t, tc.method, c.base+tc.path, tc.token, body)
			if code != tc.want {
				t.Errorf("%s %s: %d %s, want %d", tc.method, tc.path, code, b, tc.want)
			}
		})
	}
}

// openProbe maps a probe window over the whole of the container's screen:
// it connects to the X server's socket inside the container (through
// /proc/PID/root, as root on the host) with the cookie deskenv made for it.
func openProbe(ctx context.Context, t *testing.T, c container) *xprobe.Probe {
	t.Helper()
	root := filepath.Join("/proc", strconv.Itoa(c.hostPID(ctx, t)), "root")
	socks, _ := filepath.Glob(filepath.Join(root, "tmp/.X11-unix/X*"))
	if len(socks) != 1 {
		t.Fatalf("want one X server socket in the container's /tmp/.X11-unix, found %v", socks)
	}
	num := strings.TrimPrefix(filepath.Base(socks[0]), "X")
	cookies, _ := filepath.Glob(filepath.Join(root, "tmp/deskenv-xauth-*/server"))
	if len(cookies) != 1 {
		t.Fatalf("want one X server cookie file in the container's /tmp/deskenv-xauth-*, found %v", cookies)
	}
	cookie, err := os.ReadFile(cookies[0])
	if err != nil {
		t.Fatalf("read the container's X cookie: %v", err)
	}
	dir := t.TempDir()
	auth := filepath.Join(dir, "xauthority")
	if err := os.WriteFile(auth, cookie, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XAUTHORITY", auth)
	// xgb dials DIR/x:N for a display "/DIR/x:N"; that name is a link to
	// the container's socket.
	if err := os.Symlink(socks[0], filepath.Join(dir, "x:"+num)); err != nil {
		t.Fatal(err)
	}
	p, err := xprobe.Open(filepath.Join(dir, "x")+":"+num, xprobe.Options{Background: 0x204060})
	if err != nil {
		t.Fatalf("probe on the container's display :%s: %v", num, err)
	}
	t.Cleanup(p.Close)
	return p
}

func checkMCP(ctx context.Context, t *testing.T, c container) {
	tr, err := transport.NewStreamableHTTP(c.base+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + c.agent}))
	if err != nil {
		t.Fatal(err)
	}
	cl := client.NewClient(tr)
	if err := cl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "deskenv-image-test", Version: "1"}
	if _, err := cl.Initialize(ctx, init); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	list, err := cl.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	for _, want := range []string{"computer", "screenshot", "left_click"} {
		if !slices.Contains(names, want) {
			t.Errorf("tools/list has no %s tool: %v", want, names)
		}
	}

	p := openProbe(ctx, t, c)
	_, _, pw, ph := p.Bounds()
	tests := []struct{ x, y int }{{200, 150}, {pw - 10, ph - 10}}
	for _, tc := range tests {
		p.Take()
		req := mcp.CallToolRequest{}
		req.Params.Name = "left_click"
		req.Params.Arguments = map[string]any{"coordinate": []int{tc.x, tc.y}}
		res, err := cl.CallTool(ctx, req)
		if err != nil {
			t.Fatalf("left_click %d,%d: %v", tc.x, tc.y, err)
		}
		if res.IsError {
			t.Fatalf("left_click %d,%d: tool error %v", tc.x, tc.y, res.Content)
		}
		var press *xprobe.Event
		testrig.WaitState(t, 10*time.Second, fmt.Sprintf("the probe to see left_click at %d,%d", tc.x, tc.y), func() (bool, string) {
			if err := p.Sync(ctx); err != nil {
				return false, err.Error()
			}
			for _, e := range p.Events() {
				if e.Kind == xprobe.ButtonPress {
					press = &e
					return slices.ContainsFunc(p.Events(), func(e xprobe.Event) bool { return e.Kind == xprobe.ButtonRelease }), fmt.Sprint(p.Events())
				}
			}
			return false, fmt.Sprint(p.Events())
		})
		// The screen is 1280x800 and the tools' model space the same, so
		// the press lands on the pixel asked for.
		if press.Button != 1 || press.X != tc.x || press.Y != tc.y {
			t.Errorf("left_click %d,%d: the X server delivered %v", tc.x, tc.y, press)
		}
	}
}

// checkVideo opens the page with the viewer token in this machine's headless
// Chromium (e2e/browser's Playwright driver) and waits for decoded frames
// that keep coming while the screen changes.
func checkVideo(ctx context.Context, t *testing.T, c container) {
	opt := browser.Options{}
	if testing.Verbose() {
		opt.Stderr = os.Stderr
	}
	d, err := browser.Start(ctx, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var opened struct{ Status int }
	if err := d.Do(ctx, "open", map[string]any{"page": "v", "url": c.base + "/?token=" + c.viewer}, &opened); err != nil {
		t.Fatal(err)
	}
	if opened.Status != http.StatusOK {
		t.Fatalf("open the page: HTTP %d", opened.Status)
	}
	wait := func(expr, what string) {
		t.Helper()
		if err := d.Do(ctx, "waitFor", map[string]any{"page": "v", "expr": expr, "timeoutMs": 30000, "pollMs": 100}, nil); err != nil {
			var state string
			d.Do(ctx, "eval", map[string]any{"page": "v", "expr": `JSON.stringify({state: window.deskenv?.state, reason: window.deskenv?.session?.lastReason})`}, &state)
			t.Fatalf("%s: %v (page: %s)", what, err, state)
		}
	}
	wait(`deskenv.state === 'connected'`, "the page never connected")
	wait(`deskenv.video.videoWidth > 0`, "no video frame arrived")
	var s0 struct{ FramesDecoded int }
	if err := d.Do(ctx, "eval", map[string]any{"page": "v", "expr": `deskenv.stats()`}, &s0); err != nil {
		t.Fatal(err)
	}
	// Change the screen so that new frames must follow.
	p := openProbe(ctx, t, c)
	for i := range 5 {
		p.Fill(0, 0, 300, 300, uint32(0x203040+i*0x101010))
		time.Sleep(100 * time.Millisecond)
	}
	wait(fmt.Sprintf(`deskenv.stats().then(s => s.framesDecoded > %d)`, s0.FramesDecoded), "framesDecoded did not grow while the screen changed")
	var s struct {
		Codec         string
		Width, Height int
	}
	if err := d.Do(ctx, "eval", map[string]any{"page": "v", "expr": `deskenv.stats()`}, &s); err != nil {
		t.Fatal(err)
	}
	t.Logf("video: %s %dx%d", s.Codec, s.Width, s.Height)
}

// checkReset resets into a terminal task (both targets) and, in the full
// image, a browser task, and finds the task's programs running as desk.
func checkReset(ctx context.Context, t *testing.T, c container) {
	tests := []struct {
		task string
		comm string // a process the task's setup starts
	}{
		{"hello-file", "xterm"},
	}
	if c.target == "full" {
		tests = append(tests, struct{ task, comm string }{"browser-about", "chromium"})
	}
	for _, tc := range tests {
		t.Run(tc.task, func(t *testing.T) {
			code, body := call(ctx, t, http.MethodPost, c.base+"/api/reset", c.operator, map[string]any{"task_id": tc.task, "seed": 1})
			if code != http.StatusOK {
				t.Fatalf("POST /api/reset %s: %d %s", tc.task, code, body)
			}
			var ep struct {
				ID     string `json:"episode_id"`
				TaskID string `json:"task_id"`
				Status string `json:"status"`
			}
			if err := json.Unmarshal(body, &ep); err != nil || ep.ID == "" || ep.TaskID != tc.task || ep.Status != "running" {
				t.Fatalf("reset answered %s (%v), want a running episode of %s", body, err, tc.task)
			}
			var found []proc
			for _, p := range processes(ctx, t, c) {
				if p.comm == tc.comm {
					found = append(found, p)
				}
			}
			if len(found) == 0 {
				t.Fatalf("after the reset into %s no %s runs in the container", tc.task, tc.comm)
			}
			for _, p := range found {
				if p.user != "desk" {
					t.Errorf("%s (pid %d) runs as %s, want desk", p.comm, p.pid, p.user)
				}
			}
		})
	}
	if c.target == "slim" {
		// The slim image has no browser: a task that needs one says so.
		code, body := call(ctx, t, http.MethodPost, c.base+"/api/reset", c.operator, map[string]any{"task_id": "browser-about"})
		if code == http.StatusOK {
			t.Errorf("the slim image reset into browser-about, which needs Chromium: %s", body)
		} else {
			t.Logf("slim, browser-about: %d %s", code, bytes.TrimSpace(body))
		}
	}
}

// checkUsers: deskenv and Xvfb run as deskenv, the session (window manager,
// apps) as desk, and nothing as root (docs/SECURITY.md, "The agent").
func checkUsers(ctx context.Context, t *testing.T, c container) {
	ps := processes(ctx, t, c)
	want := map[string]string{"deskenv": "deskenv", "Xvfb": "deskenv", "tini": "deskenv", "openbox": "desk", "xterm": "desk"}
	seen := map[string]bool{}
	for _, p := range ps {
		if p.comm == "ps" {
			continue
		}
		if p.user == "root" {
			t.Errorf("%s (pid %d) runs as root: %s", p.comm, p.pid, p.args)
		}
		if u, ok := want[p.comm]; ok {
			seen[p.comm] = true
			if p.user != u {
				t.Errorf("%s (pid %d) runs as %s, want %s", p.comm, p.pid, p.user, u)
			}
		}
	}
	for comm := range want {
		if !seen[comm] {
			t.Errorf("no %s process in the container: %v", comm, ps)
		}
	}
	if t.Failed() {
		t.Logf("processes: %v", ps)
	}
}

// checkNoToken plays the agent that typed into the terminal: as desk it
// tries deskenv's environment, every environment and command line it can
// read, the tokens file, and the places files land, and reaches for
// deskenv's port.
func checkNoToken(ctx context.Context, t *testing.T, c container) {
	var deskenvPID int
	for _, p := range processes(ctx, t, c) {
		if p.comm == "deskenv" && strings.HasSuffix(strings.Fields(p.args + " x")[0], "deskenv") {
			deskenvPID = p.pid
		}
	}
	if deskenvPID == 0 {
		t.Fatal("no deskenv process in the container")
	}
	// podman exec gives what it starts the container's run-time environment,
	// tokens included (the session's programs never get it: deskenv starts
	// them); env -i leaves the probing shell with nothing, as a program in the
	// session has, so a token found is one the session could find.
	asDesk := func(script string) (string, error) {
		return podman(ctx, "exec", "--user", "desk", c.name, "env", "-i", "PATH=/usr/bin:/bin", "HOME=/home/desk", "bash", "-c", script)
	}
	asDeskIn := func(stdin, script string) (string, error) {
		cmd := exec.CommandContext(ctx, "podman", "exec", "-i", "--user", "desk", c.name, "env", "-i", "PATH=/usr/bin:/bin", "HOME=/home/desk", "bash", "-c", script)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.Output()
		if ee, ok := err.(*exec.ExitError); ok {
			err = fmt.Errorf("%w: %s", err, ee.Stderr)
		}
		return string(out), err
	}

	if out, err := asDesk(fmt.Sprintf("cat /proc/%d/environ", deskenvPID)); err == nil {
		t.Errorf("desk read deskenv's (pid %d) environment: %q", deskenvPID, out)
	} else if !strings.Contains(err.Error(), "Permission denied") {
		t.Errorf("reading deskenv's environment as desk failed, but not for want of permission: %v", err)
	}
	if c.tokensFile != "" {
		if out, err := asDesk("cat " + c.tokensFile); err == nil {
			t.Errorf("desk read the tokens file %s: %q", c.tokensFile, out)
		} else if !strings.Contains(err.Error(), "Permission denied") {
			t.Errorf("reading the tokens file as desk failed, but not for want of permission: %v", err)
		}
	}
	// Every environment and command line desk can read, and the files in
	// the places a program or a task writes, searched for each token.
	// The token goes in on stdin, into a file the search skips: on the
	// command line, the search would find itself. A canary, left by desk in
	// a file and in a running program's environment, must be found: a
	// search that finds nothing proves nothing.
	canary := fmt.Sprintf("canary-%d-%d", time.Now().UnixNano(), os.Getpid())
	if _, err := asDesk(fmt.Sprintf(`echo %s >~/canary && (DESKENV_CANARY=%s setsid sleep 120 >/dev/null 2>&1 &)`, canary, canary)); err != nil {
		t.Fatalf("leave a canary as desk: %v", err)
	}
	out, err := asDeskIn(canary+"\n", `f=$(mktemp) && cat >"$f" && { grep -lsaF -f "$f" /proc/[0-9]*/environ; grep -rlsaF -f "$f" /home; rm -f "$f"; true; }`)
	asDesk(`rm -f ~/canary; pkill -u desk -x sleep; true`)
	if err != nil || !strings.Contains(out, "/environ") || !strings.Contains(out, "/home/desk/canary") {
		t.Fatalf("the search as desk missed its canary (in a file and an environment): %q %v", out, err)
	}
	for role, tok := range map[string]string{"agent": c.agent, "operator": c.operator, "viewer": c.viewer} {
		out, err := asDeskIn(tok+"\n", `f=$(mktemp) && cat >"$f" && `+
			`{ grep -lsaF -f "$f" /proc/[0-9]*/environ /proc/[0-9]*/cmdline; grep -rlsaF -f "$f" /home /tmp /var /etc /run /dev/shm /usr/share/deskenv | grep -vxF "$f"; rm -f "$f"; true; }`)
		if err != nil {
			t.Fatalf("search for the %s token as desk: %v", role, err)
		}
		if s := strings.TrimSpace(out); s != "" {
			t.Errorf("desk finds the %s token in: %s", role, s)
		}
	}
	// The front door refuses the session's users whatever they send.
	port := c.base[strings.LastIndex(c.base, ":")+1:]
	out, err = asDesk(fmt.Sprintf(`exec 3<>/dev/tcp/127.0.0.1/%s && printf 'GET /api/state HTTP/1.0\r\nAuthorization: Bearer %s\r\n\r\n' >&3 && head -1 <&3`, port, c.operator))
	if err != nil || !strings.Contains(out, " 403 ") {
		t.Errorf("desk asked deskenv's port with the operator token: %q %v, want 403", out, err)
	}
}
