package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/deskenv/deskenv/internal/testrig"
)

// reachableHomes lets the session users reach the --home directories a test
// passes: t.TempDir's parent is 0700, which no session user may enter.
// Search permission only (0711): nothing in it can be listed.
func reachableHomes(t *testing.T, args []string) {
	t.Helper()
	if os.Geteuid() != 0 {
		return // the session runs as this user: nothing to reach
	}
	for i, a := range args {
		if (a == "--home" || a == "-home") && i+1 < len(args) {
			for d := args[i+1]; d != "/" && d != os.TempDir() && d != "."; d = filepath.Dir(d) {
				if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o011 != 0o011 {
					os.Chmod(d, fi.Mode().Perm()|0o011)
				}
			}
		}
	}
}

func TestScrubTokenArgs(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		rest  []string
		lines string
		flags []string
	}{
		{"none", []string{"--addr", ":1"}, []string{"--addr", ":1"}, "", nil},
		{"separate value", []string{"--agent-token", "a1", "--addr", ":1"}, []string{"--addr", ":1"}, "agent=a1\n", []string{"--agent-token"}},
		{"with =, one dash", []string{"-operator-token=o1", "mcp"}, []string{"mcp"}, "operator=o1\n", []string{"--operator-token"}},
		{"the last wins", []string{"--viewer-token", "v1", "--viewer-token=v2"}, nil, "viewer=v2\n", []string{"--viewer-token"}},
		{"three roles", []string{"--agent-token=a", "--operator-token=o", "--viewer-token=v"}, nil, "agent=a\noperator=o\nviewer=v\n",
			[]string{"--agent-token", "--operator-token", "--viewer-token"}},
		{"after --, not a flag", []string{"--", "--agent-token", "x"}, []string{"--", "--agent-token", "x"}, "", nil},
		{"a value that looks like a flag name", []string{"--apps", "agent-token"}, []string{"--apps", "agent-token"}, "", nil},
		{"missing value left to the flag package", []string{"--agent-token"}, []string{"--agent-token"}, "", nil},
		{"empty token", []string{"--agent-token="}, nil, "", []string{"--agent-token"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rest, lines, flags := scrubTokenArgs(tc.args)
			if !slices.Equal(rest, tc.rest) || lines != tc.lines || !slices.Equal(flags, tc.flags) {
				t.Fatalf("scrubTokenArgs(%q) = %q, %q, %q; want %q, %q, %q", tc.args, rest, lines, flags, tc.rest, tc.lines, tc.flags)
			}
		})
	}
}

// TestTokensOffCommandLine: tokens given as flags are not left in
// /proc/PID/cmdline, which every local user can read, yet work.
func TestTokensOffCommandLine(t *testing.T) {
	const agent = "agent-token-on-the-command-line-0123"
	d := startDeskenv(t, "--no-stream", "--wm", "", "--apps", "", "--home", t.TempDir(),
		"--operator-token", testOperator, "--agent-token="+agent)
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", d.pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{testOperator, agent} {
		if bytes.Contains(cmdline, []byte(tok)) {
			t.Errorf("/proc/%d/cmdline still holds a token: %q", d.pid, strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	if bytes.Contains(cmdline, []byte("-token")) {
		t.Errorf("/proc/%d/cmdline still names a token flag: %q", d.pid, strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
	if code := doJSON(t, "GET", d.base+"/api/tasks", testOperator, nil, nil); code != http.StatusOK {
		t.Errorf("the operator token from the scrubbed flag: GET /api/tasks answered %d, want 200", code)
	}
	if code := doJSON(t, "GET", d.base+"/api/tasks", "wrong", nil, nil); code != http.StatusUnauthorized {
		t.Errorf("a wrong token: GET /api/tasks answered %d, want 401", code)
	}
}

// anyWorks is a script that runs cmd on every path the glob matches (as
// root sees them: the agent may guess names it cannot list) and exits 0 as
// soon as one works; with no match it fails the test.
func anyWorks(cmd, glob string, suffix ...string) string {
	paths, _ := filepath.Glob(glob)
	if len(paths) == 0 {
		panic("nothing matches " + glob + ": the attempt would prove nothing")
	}
	var b strings.Builder
	for _, p := range paths {
		fmt.Fprintf(&b, "%s %q >/dev/null 2>&1 && exit 0; ", cmd, filepath.Join(append([]string{p}, suffix...)...))
	}
	b.WriteString("exit 1")
	return b.String()
}

// attempt is one thing an agent on desktop A tries; every one must fail.
type attempt struct {
	name   string
	script string
	// failed says whether the attempt failed, from the exit code and
	// output; nil means "exited non-zero".
	failed func(code int, out string) bool
}

// TestIsolationAttacker plays the agent of desktop A in a pool of two
// desktops with tokens, tasks in a 0700 directory and an episode being
// recorded, from a program started as A's session starts its programs and
// from the bash trait over MCP, and asserts that each attempt on deskenv's
// state, on desktop B, and on deskenv itself fails.
func TestIsolationAttacker(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: deskenv separates the session into users of its own only when it may switch users (run: sudo go test ./cmd/deskenv -run TestIsolationAttacker)")
	}
	// A layout like the image's /var/lib/deskenv: traversable by anyone,
	// so what keeps the agent out is deskenv's own modes, not the test's.
	base := t.TempDir()
	for _, d := range []string{filepath.Dir(base), base} {
		os.Chmod(d, 0o711)
	}
	tasks := filepath.Join(base, "tasks")
	if out, err := exec.Command("cp", "-r", filepath.Join("..", "..", "tasks"), tasks).CombinedOutput(); err != nil {
		t.Fatalf("copy the example tasks: %v %s", err, out)
	}
	os.Chmod(tasks, 0o700)
	taskFile := filepath.Join(tasks, "copy-code.json")
	// A task desktop B will run: a site served on a port of the machine,
	// whose POSTs are the answer its check reads.
	servePort := testrig.FreePort(t)
	served := fmt.Sprintf(`{"id": "served-site", "instruction": "Order on the page.", "setup": [
		{"type": "write_file", "path": "~/site/index.html", "content": "<title>B's shop</title>"},
		{"type": "serve", "dir": "~/site", "port": %d}
	], "evaluator": {"type": "json_field", "path": "~/site/.posted/1.json", "pointer": "/name", "equals": "B"}}`, servePort)
	if err := os.WriteFile(filepath.Join(tasks, "served-site.json"), []byte(served), 0o600); err != nil {
		t.Fatal(err)
	}
	episodes := filepath.Join(base, "episodes")
	homes := filepath.Join(base, "homes")

	d := startDeskenv(t, "--desktops", "2", "--no-stream", "--wm", "", "--apps", "",
		"--mcp-traits", "bash,files", "--home", homes, "--tasks", tasks, "--episodes", episodes,
		"--operator-token", testOperator)

	var desks struct {
		Desktops []struct {
			Display     string `json:"display"`
			XAuthority  string `json:"xauthority"`
			SessionUser string `json:"session_user"`
		} `json:"desktops"`
	}
	if code := doJSON(t, "GET", d.base+"/desktops", testOperator, nil, &desks); code != 200 || len(desks.Desktops) != 2 {
		t.Fatalf("GET /desktops: %d %+v", code, desks)
	}
	a, b := desks.Desktops[0], desks.Desktops[1]
	if a.SessionUser == "" || b.SessionUser == "" || a.SessionUser == b.SessionUser {
		t.Fatalf("desktops run as %q and %q: want two session users of their own", a.SessionUser, b.SessionUser)
	}
	// A's programs run as A's session user, with no supplementary groups,
	// as deskenv starts them.
	ua, err := user.Lookup(a.SessionUser)
	if err != nil {
		t.Fatal(err)
	}
	aUID, _ := strconv.Atoi(ua.Uid)
	aGID, _ := strconv.Atoi(ua.Gid)
	credA := &syscall.Credential{Uid: uint32(aUID), Gid: uint32(aGID), Groups: []uint32{}}
	homeA, homeB := filepath.Join(homes, "d0"), filepath.Join(homes, "d1")
	ub, _ := user.Lookup(b.SessionUser)
	bUID, _ := strconv.Atoi(ub.Uid)
	bGID, _ := strconv.Atoi(ub.Gid)
	secretB := filepath.Join(homeB, "b-secret.txt")
	if err := os.WriteFile(secretB, []byte("B's private notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chown(secretB, bUID, bGID)

	// Desktop B in an episode of the served task.
	if code := doJSON(t, "POST", d.base+"/d/1/api/reset", testOperator, map[string]any{"task_id": "served-site"}, nil); code != 200 {
		t.Fatalf("reset desktop B into served-site: %d", code)
	}
	site := fmt.Sprintf("http://127.0.0.1:%d/", servePort)
	if resp, err := http.Get(site); err != nil || resp.StatusCode != 200 {
		t.Fatalf("B's served site does not answer deskenv's user: %v %v", resp, err)
	}

	// A lease of desktop A, whose agent gets the bash trait.
	var lease struct {
		Desktop    int    `json:"desktop"`
		MCP        string `json:"mcp"`
		AgentToken string `json:"agent_token"`
	}
	if code := doJSON(t, "POST", d.base+"/leases", testOperator, nil, &lease); code != http.StatusCreated || lease.Desktop != 0 {
		t.Fatalf("lease: %d %+v, want desktop 0", code, lease)
	}
	agentA := agentClient(t, d.base+lease.MCP, lease.AgentToken)

	// An episode being recorded on desktop A.
	var rec map[string]any
	if code := doJSON(t, "POST", d.base+"/d/0/api/recording/start", testOperator, map[string]any{}, &rec); code/100 != 2 {
		t.Fatalf("start recording: %d %v", code, rec)
	}
	epDirs, _ := filepath.Glob(filepath.Join(episodes, "*", "*"))
	if len(epDirs) == 0 {
		t.Fatalf("no episode directory under %s while recording", episodes)
	}
	epDir := epDirs[0]

	pid := strconv.Itoa(d.pid)
	nonzero := func(code int, _ string) bool { return code != 0 }
	attempts := []attempt{
		{"open desktop B's display with A's cookie", "DISPLAY=" + b.Display + " xdpyinfo >/dev/null", nil},
		{"open desktop B's display with B's cookie file", "DISPLAY=" + b.Display + " XAUTHORITY=" + b.XAuthority + " xdpyinfo >/dev/null", nil},
		{"read B's cookie file", "cat " + b.XAuthority + " >/dev/null", nil},
		{"open desktop B's display without a cookie", "DISPLAY=" + b.Display + " XAUTHORITY=/dev/null xdpyinfo >/dev/null", nil},
		{"list B's home", "ls " + homeB, nil},
		{"read a file in B's home", "cat " + secretB, nil},
		{"write into B's home", "echo pwned > " + homeB + "/pwned", nil},
		{"read the site B's task serves", "curl -fsS " + site, nil},
		{"post an answer to B's task", "curl -fsS -d name=B " + site + "order", nil},
		{"list the tasks directory", "ls " + tasks, nil},
		{"read a task file (its evaluator and solution)", "cat " + taskFile, nil},
		{"list the episodes directory", "ls " + episodes, nil},
		{"read the episode being recorded", "cat " + filepath.Join(epDir, "episode.json"), nil},
		{"write an episode file", "echo '{}' > " + filepath.Join(epDir, "episode.json"), nil},
		{"create an episode", "mkdir " + filepath.Join(episodes, "forged"), nil},
		{"check that deskenv exists (kill -0)", "kill -0 " + pid, nil},
		{"stop deskenv (SIGTERM)", "kill -TERM " + pid, nil},
		{"read deskenv's environment", "cat /proc/" + pid + "/environ", nil},
		{"find a token in deskenv's command line", "tr '\\0' '\\n' < /proc/" + pid + "/cmdline", func(code int, out string) bool {
			return !strings.Contains(out, testOperator) && !strings.Contains(out, lease.AgentToken) && !strings.Contains(out, "token")
		}},
		{"find a token in the session's own environment", "env", func(code int, out string) bool {
			return !strings.Contains(out, testOperator) && !strings.Contains(out, "DESKENV_")
		}},
		{"read deskenv's memory", "head -c1 /proc/" + pid + "/mem", nil},
		{"read deskenv's own Xauthority (every display's cookie)", anyWorks("cat", "/tmp/deskenv-xauth-self-*/Xauthority"), nil},
		{"list a home baseline", anyWorks("ls", "/tmp/deskenv-baseline-*/home"), nil},
		{"write into a home baseline (to survive resets)", anyWorks("touch", "/tmp/deskenv-baseline-*/home", "planted"), nil},
	}

	homeEnv := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + homeA, "DISPLAY=" + a.Display, "XAUTHORITY=" + a.XAuthority,
		"USER=" + a.SessionUser, "LOGNAME=" + a.SessionUser}
	// Everything an attempt printed is something the agent found: each
	// word of it is tried as a token on the control plane at the end.
	var found []string
	runners := []struct {
		name string
		run  func(script string) (int, string)
	}{
		{"a program in A's session", func(script string) (int, string) {
			cmd := exec.Command("/bin/bash", "-c", script)
			cmd.Env, cmd.Dir = homeEnv, homeA
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: credA}
			out, err := cmd.CombinedOutput()
			code := 0
			if err != nil {
				code = -1
				if ee, ok := err.(*exec.ExitError); ok {
					code = ee.ExitCode()
				}
			}
			return code, string(out)
		}},
		{"the bash trait on A", func(script string) (int, string) {
			text := callText(t, agentA, "bash", map[string]any{"command": script})
			head, out, _ := strings.Cut(text, "\n")
			m := regexp.MustCompile(`^exit code (-?\d+)`).FindStringSubmatch(head)
			if m == nil {
				return -1, text
			}
			code, _ := strconv.Atoi(m[1])
			return code, out
		}},
	}
	for _, r := range runners {
		t.Run(r.name, func(t *testing.T) {
			// The runner itself works: a harmless command succeeds, as A's
			// user, on A's display.
			code, out := r.run("id -un; xdpyinfo | grep -c 'name of display'")
			if code != 0 || !strings.HasPrefix(out, a.SessionUser+"\n") {
				t.Fatalf("the runner does not work as %s on %s: exit %d, %q", a.SessionUser, a.Display, code, out)
			}
			for _, at := range attempts {
				code, out := r.run(at.script)
				failed := at.failed
				if failed == nil {
					failed = nonzero
				}
				if !failed(code, out) {
					t.Errorf("%s: it worked (exit %d): %.300q", at.name, code, out)
				}
				found = append(found, strings.Fields(out)...)
			}
		})
	}

	// Still there, still recording: the SIGTERMs did nothing.
	if err := syscall.Kill(d.pid, 0); err != nil {
		t.Fatalf("deskenv is gone after the attempts: %v", err)
	}
	var st map[string]any
	if code := doJSON(t, "GET", d.base+"/d/0/api/recording", testOperator, nil, &st); code != 200 || st["recording"] != true {
		t.Errorf("recording status after the attempts: %d %v, want recording", code, st)
	}
	// B's home is as it was.
	if _, err := os.Stat(filepath.Join(homeB, "pwned")); err == nil {
		t.Errorf("a file appeared in B's home")
	}
	if _, err := os.Stat(filepath.Join(homeB, "site", ".posted")); !os.IsNotExist(err) {
		t.Errorf("B's task got a POST (%v)", err)
	}
	// Anything found, tried as a token on the control plane: refused.
	tried := 0
	for _, w := range slices.Compact(slices.Sorted(slices.Values(found))) {
		if len(w) < 8 || len(w) > 200 {
			continue
		}
		tried++
		for _, path := range []string{"/d/0/api/tasks", "/d/1/api/tasks", "/desktops"} {
			if code := doJSON(t, "GET", d.base+path, w, nil, nil); code < 400 {
				t.Errorf("GET %s with %q found by the agent: %d, want a refusal", path, w, code)
			}
		}
	}
	t.Logf("tried %d words the attempts printed as tokens on the control plane", tried)
	if code := doJSON(t, "POST", d.base+"/d/1/api/reset", lease.AgentToken, map[string]any{}, nil); code < 400 {
		t.Errorf("A's agent token on B's control plane: %d, want a refusal", code)
	}

	// /health's details say the desktops are separated; the plain answer
	// stays OpenEnv's exact shape.
	var health struct {
		Status  string `json:"status"`
		Details struct {
			Isolation map[string]any `json:"isolation"`
		} `json:"details"`
	}
	doJSON(t, "GET", d.base+"/d/0/health?details=1", testOperator, nil, &health)
	if iso := health.Details.Isolation; iso["separated"] != true || iso["session_user"] != a.SessionUser {
		t.Errorf("/d/0/health?details=1 isolation = %v, want separated as %s", iso, a.SessionUser)
	}
	// Anyone may ask /health; the details (pids, user names) are the
	// operator's, and the plain answer stays OpenEnv's exact shape.
	for _, tc := range []struct{ path, token string }{
		{"/d/0/health", ""}, {"/d/0/health?details=1", ""}, {"/d/0/health?details=1", lease.AgentToken},
		{"/health", ""}, {"/health?details=1", ""},
	} {
		var plain map[string]any
		doJSON(t, "GET", d.base+tc.path, tc.token, nil, &plain)
		if plain["status"] != "healthy" || plain["details"] != nil {
			t.Errorf("GET %s (token %.8q): %v, want healthy without details", tc.path, tc.token, plain)
		}
		if tc.path == "/d/0/health" && len(plain) != 1 {
			t.Errorf("/d/0/health = %v, want exactly {\"status\":\"healthy\"}", plain)
		}
	}
}
