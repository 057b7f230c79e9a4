package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"image/png"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

func TestConfig(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		check   func(config) bool
		wantErr string
	}{
		{"defaults", nil, nil, func(c config) bool {
			w, h, d, _ := c.ScreenSize()
			return w == 1280 && h == 800 && d == 24 && c.ModelSize == "auto" && c.MCPTools == "computer,tools"
		}, ""},
		{"flag", []string{"--screen", "1920x1080"}, nil, func(c config) bool { w, h, d, _ := c.ScreenSize(); return w == 1920 && h == 1080 && d == 24 }, ""},
		{"env", nil, map[string]string{"DESKENV_MODEL_SIZE": "off", "DESKENV_APPS": "xterm -T a; mousepad"}, func(c config) bool {
			return c.ModelSize == "off" && len(c.AppCommands()) == 2 && c.AppCommands()[0][2] == "a"
		}, ""},
		{"flag beats env", []string{"--image-format", "png"}, map[string]string{"DESKENV_IMAGE_FORMAT": "jpeg"}, func(c config) bool { return c.ImageFormat == "png" }, ""},
		{"no apps", []string{"--apps", "", "--wm", ""}, nil, func(c config) bool { return len(c.AppCommands()) == 0 && len(c.WMCommand()) == 0 }, ""},
		{"bad screen", []string{"--screen", "big"}, nil, nil, "--screen \"big\""},
		{"bad format", []string{"--image-format", "gif"}, nil, nil, "use png or jpeg"},
		{"bad tools", []string{"--mcp-tools", "computer,magic"}, nil, nil, "unknown shape \"magic\""},
		{"dialect tools", []string{"--mcp-tools", "openai,gemini,pyautogui"}, nil, func(c config) bool { return c.MCPTools == "openai,gemini,pyautogui" }, ""},
		{"traits off by default", nil, nil, func(c config) bool { return c.MCPTraits == "" && !c.FindTools }, ""},
		{"traits", []string{"--mcp-traits", "bash, files,clipboard", "--mcp-find-tools"}, nil, func(c config) bool {
			return len(splitList(c.MCPTraits, ",")) == 3 && c.FindTools
		}, ""},
		{"traits from env", nil, map[string]string{"DESKENV_MCP_TRAITS": "files", "DESKENV_MCP_FIND_TOOLS": "true"}, func(c config) bool {
			return c.MCPTraits == "files" && c.FindTools
		}, ""},
		{"deferred tools", []string{"--mcp-defer-tools"}, nil, func(c config) bool { return c.DeferTools }, ""},
		{"pointer in screenshots by default", nil, nil, func(c config) bool { return c.ScreenshotPointer }, ""},
		{"pointer left out", []string{"--screenshot-pointer=false"}, nil, func(c config) bool { return !c.ScreenshotPointer }, ""},
		{"pointer left out from env", nil, map[string]string{"DESKENV_SCREENSHOT_POINTER": "false"}, func(c config) bool { return !c.ScreenshotPointer }, ""},
		{"bad trait", []string{"--mcp-traits", "bash,root"}, nil, nil, "unknown trait \"root\""},
		{"warm pool", []string{"--desktops", "4", "--warm", "2", "--warm-task", "hello-file"}, nil, func(c config) bool {
			return c.Warm == 2 && c.WarmTask == "hello-file"
		}, ""},
		{"warm from env", []string{"--desktops", "3"}, map[string]string{"DESKENV_WARM": "3"}, func(c config) bool { return c.Warm == 3 }, ""},
		{"warm without a pool", []string{"--warm", "1"}, nil, nil, "warm desktops are for pool mode"},
		{"warm task without warm", []string{"--desktops", "2", "--warm-task", "x"}, nil, nil, "--warm-task \"x\" without --warm"},
		{"annotator token", []string{"--annotator-token", "ann-0123456789abcdef"}, nil, func(c config) bool {
			return c.AnnotatorToken == "ann-0123456789abcdef" && slices.Contains(c.tokenFlags, "--annotator-token")
		}, ""},
		{"annotator token from env", nil, map[string]string{"DESKENV_ANNOTATOR_TOKEN": "ann-0123456789abcdef"}, func(c config) bool {
			return c.AnnotatorToken == "ann-0123456789abcdef" && len(c.tokenFlags) == 0
		}, ""},
		{"studio idle", []string{"--desktops", "2", "--studio-idle", "90s"}, nil, func(c config) bool { return c.StudioIdle == 90*time.Second }, ""},
		{"studio idle from env", []string{"--desktops", "2"}, map[string]string{"DESKENV_STUDIO_IDLE": "5m"}, func(c config) bool { return c.StudioIdle == 5*time.Minute }, ""},
		{"bad studio idle", []string{"--desktops", "2", "--studio-idle", "-1s"}, nil, nil, "--studio-idle"},
		{"turn secret", []string{"--ice-servers", "turn:turn.example:3478", "--turn-secret-file", "/run/secrets/turn", "--turn-ttl", "2h"}, nil,
			func(c config) bool { return c.TURNSecretFile == "/run/secrets/turn" && c.TURNTTL == 2*time.Hour }, ""},
		{"turn secret from the environment", nil, map[string]string{"DESKENV_TURN_SECRET_FILE": "/s", "DESKENV_TURN_TTL": "30m"},
			func(c config) bool { return c.TURNSecretFile == "/s" && c.TURNTTL == 30*time.Minute }, ""},
		{"session auto by default", nil, nil, func(c config) bool { return c.Session == "auto" }, ""},
		{"bare session", []string{"--session", "bare"}, nil, func(c config) bool { return c.Session == "bare" }, ""},
		{"session from env", nil, map[string]string{"DESKENV_SESSION": "desktop"}, func(c config) bool { return c.Session == "desktop" }, ""},
		{"bad session", []string{"--session", "kde"}, nil, nil, "--session \"kde\": use desktop, bare or auto"},
		{"bad env", nil, map[string]string{"DESKENV_FPS": "fast"}, nil, "DESKENV_FPS"},
		{"bad settle", []string{"--settle-quiet", "1s", "--settle-max", "10ms"}, nil, nil, "--settle-max"},
		{"idle settle by default", nil, nil, func(c config) bool { return c.SettleIdleQuiet == 40*time.Millisecond }, ""},
		{"idle settle off", []string{"--settle-idle-quiet", "0"}, nil, func(c config) bool { return c.SettleIdleQuiet == 0 }, ""},
		{"bad idle settle", []string{"--settle-idle-quiet", "-5ms"}, nil, nil, "--settle-idle-quiet"},
		{"unknown flag", []string{"--frobnicate"}, nil, nil, "frobnicate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			c, _, err := parseConfig("deskenv", tc.args, io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to mention %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(c) {
				t.Fatalf("config %+v does not match", c)
			}
		})
	}
}

func TestHelpNamesEveryFlagAndItsVariable(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"--help"}, nil, &out, &out); code != 0 {
		t.Fatalf("--help exit code %d", code)
	}
	for _, want := range []string{"deskenv mcp --stdio", "-model-size", "$DESKENV_MODEL_SIZE", "-screen", "-mcp-tools", "-addr"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help does not mention %q", want)
		}
	}
	out.Reset()
	if code := run([]string{"frob"}, nil, &out, &out); code == 0 || !strings.Contains(out.String(), "unknown command") {
		t.Errorf("unknown command: code %d, %q", code, out.String())
	}
}

// buildBinary builds cmd/deskenv once for the end-to-end tests.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "deskenv")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestApplianceEndToEnd runs the real binary as a user would, with its own
// Xvfb, openbox and xterm, drives it through MCP over HTTP, and stops it with
// SIGTERM: no child process may outlive it.
func TestApplianceEndToEnd(t *testing.T) {
	bin := buildBinary(t)
	episodes := t.TempDir()
	cmd := exec.Command(bin, "--addr", "127.0.0.1:0", "--no-stream", "--episodes", episodes)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	ready := regexp.MustCompile(`deskenv is ready" url=http://([^/ ]+)/`)
	addr := make(chan string, 1)
	var logBuf bytes.Buffer
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logBuf.WriteString(sc.Text() + "\n")
			if m := ready.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case <-time.After(30 * time.Second):
		t.Fatalf("deskenv did not become ready:\n%s", logBuf.String())
	}

	resp, err := http.Get(base + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/health: %v %v", resp, err)
	}
	resp.Body.Close()

	ctx := context.Background()
	tr, err := transport.NewStreamableHTTP(base + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "e2e", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tool := range tools.Tools {
		names[tool.Name] = true
	}
	for _, want := range []string{"computer", "screenshot", "left_click", "type", "key"} {
		if !names[want] {
			t.Errorf("tools/list lacks %q (has %v)", want, names)
		}
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = "computer"
	req.Params.Arguments = map[string]any{"action": "screenshot"}
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	var img *mcp.ImageContent
	for _, content := range res.Content {
		if ic, ok := content.(mcp.ImageContent); ok {
			img = &ic
		}
	}
	if res.IsError || img == nil {
		t.Fatalf("screenshot result: %+v", res)
	}
	raw, _ := base64.StdEncoding.DecodeString(img.Data)
	pic, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if b := pic.Bounds(); b.Dx() != 1280 || b.Dy() != 800 {
		t.Fatalf("screenshot is %v, want 1280x800", b)
	}

	// Record an agent's click: the episode lands on disk in the computer
	// tool's shape.
	post := func(path, body string) int {
		resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("/api/recording/start", `{"episode_id":"e2e-1","source":"agent"}`); code >= 300 {
		t.Fatalf("start recording: %d", code)
	}
	req.Params.Arguments = map[string]any{"action": "left_click", "coordinate": []int{300, 200}}
	if res, err := c.CallTool(ctx, req); err != nil || res.IsError {
		t.Fatalf("left_click: %v %+v", err, res)
	}
	if code := post("/api/recording/stop", `{}`); code >= 300 {
		t.Fatalf("stop recording: %d", code)
	}
	steps, err := os.ReadFile(filepath.Join(episodes, "e2e-1", "steps.jsonl"))
	if err != nil || !strings.Contains(string(steps), `"left_click"`) || !strings.Contains(string(steps), "[300,200]") {
		t.Fatalf("recorded steps: %v\n%s", err, steps)
	}
	c.Close()

	children := childPIDs(cmd.Process.Pid)
	if len(children) < 3 {
		t.Fatalf("expected Xvfb, openbox and xterm as children, found %v", children)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("deskenv exited with %v after SIGTERM:\n%s", err, logBuf.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("deskenv did not stop within 15 s of SIGTERM")
	}
	time.Sleep(100 * time.Millisecond)
	for _, pid := range children {
		if syscall.Kill(pid, 0) == nil {
			t.Errorf("child %d outlived deskenv", pid)
		}
	}
}

// TestStdio runs `deskenv mcp --stdio` as Claude Desktop would and talks MCP
// over its stdin and stdout.
func TestStdio(t *testing.T) {
	bin := buildBinary(t)
	c := stdioClient(t, bin, "--apps", "")
	res := callText(t, c, "computer", map[string]any{"action": "cursor_position"})
	if !regexp.MustCompile(`X=\d+,\s*Y=\d+`).MatchString(res) {
		t.Fatalf("cursor_position over stdio: %q", res)
	}
}

// stdioClient starts bin as an MCP host does, `deskenv mcp --stdio` with
// args, and initializes an mcp-go client over its stdin and stdout.
func stdioClient(t *testing.T, bin string, args ...string) *client.Client {
	t.Helper()
	reachableHomes(t, args)
	tr := transport.NewStdio(bin, []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}, append([]string{"mcp", "--stdio"}, args...)...)
	c := client.NewClient(tr)
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "stdio-e2e", Version: "1"}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	return c
}

// callText calls a tool and returns its text; a protocol error or a tool
// error fails the test.
func callText(t *testing.T, c *client.Client, tool string, args map[string]any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	text := ""
	for _, content := range res.Content {
		if tc, ok := content.(mcp.TextContent); ok {
			text += tc.Text
		}
	}
	if res.IsError {
		t.Fatalf("%s: %s", tool, text)
	}
	return text
}

// childPIDs lists the direct children of pid, from every /proc/N/stat (Go
// starts children from any of its threads, so one thread's list is not enough).
func childPIDs(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The command name may hold spaces; fields resume after its ')'.
		rest := string(data[bytes.LastIndexByte(data, ')')+1:])
		f := strings.Fields(rest)
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, n)
		}
	}
	return out
}

// TestStdioCodeAct runs the binary as an MCP host would for a CodeAct agent:
// over stdio, run_script and find_tools only, with every trait on; one
// script uses the desktop, the files, the shell and the clipboard.
func TestStdioCodeAct(t *testing.T) {
	bin := buildBinary(t)
	home := filepath.Join(t.TempDir(), "desk")
	c := stdioClient(t, bin, "--apps", "", "--home", home, "--mcp-tools", "codeact", "--mcp-traits", "bash,files,clipboard", "--mcp-find-tools")
	list, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	if strings.Join(names, ",") != "find_tools,run_script" {
		t.Fatalf("tools %v, want run_script and find_tools only", names)
	}
	script := `write_file("notes/a.txt", "alpha")
r = bash("cat notes/a.txt; echo; ls ~/notes")
print(r.exit_code, r.output.replace("\n", " ").strip())
clipboard_set("from the agent")
print(clipboard_get())
left_click(10, 10)
print(cursor_position(), screen_size())
print([e.name for e in list_files("notes")])
`
	tests := []struct {
		tool string
		args map[string]any
		want []string
	}{
		{"run_script", map[string]any{"script": script}, []string{
			"0 alpha a.txt\nfrom the agent\n(10, 10) (1280, 800)\n[\"a.txt\"]\n",
		}},
		{"find_tools", map[string]any{"query": "script"}, []string{`"name": "run_script"`, `"inputSchema"`}},
	}
	for _, tc := range tests {
		text := callText(t, c, tc.tool, tc.args)
		for _, w := range tc.want {
			if !strings.Contains(text, w) {
				t.Errorf("%s: result lacks %q:\n%s", tc.tool, w, text)
			}
		}
	}
	if b, err := os.ReadFile(filepath.Join(home, "notes", "a.txt")); err != nil || string(b) != "alpha" {
		t.Errorf("the file on disk: %q, %v", b, err)
	}
}

// TestInitMovesTokens: `deskenv init` runs its command with the token
// variables gone from the environment (what /proc/1/environ shows in a
// container) and the tokens on descriptor 3.
func TestInitMovesTokens(t *testing.T) {
	bin := buildBinary(t)
	cmd := exec.Command(bin, "init", "--", "/bin/sh", "-c", `tr '\0' '\n' < /proc/$$/environ; echo ---; cat <&3`)
	cmd.Env = append(os.Environ(), "DESKENV_OPERATOR_TOKEN=op-secret", "DESKENV_AGENT_TOKEN=agent-secret", "DESKENV_VIEWER_TOKEN=", "DESKENV_MODE=sim")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("deskenv init: %v\n%s", err, out)
	}
	env, pipe, _ := strings.Cut(string(out), "---\n")
	for _, bad := range []string{"op-secret", "agent-secret", "_TOKEN="} {
		if strings.Contains(env, bad) {
			t.Errorf("the command's environment still holds %q:\n%s", bad, env)
		}
	}
	for _, want := range []string{"DESKENV_TOKENS_FD=3\n", "DESKENV_MODE=sim\n"} {
		if !strings.Contains(env, want) {
			t.Errorf("the command's environment lacks %q", want)
		}
	}
	if pipe != "agent=agent-secret\noperator=op-secret\n" && pipe != "operator=op-secret\nagent=agent-secret\n" {
		t.Errorf("descriptor 3 holds %q", pipe)
	}
	if out, err := exec.Command(bin, "init").CombinedOutput(); err == nil || !strings.Contains(string(out), "name the command") {
		t.Errorf("init without a command: %v %s", err, out)
	}
}

// TestTokensFromInit: deskenv takes the tokens init left on a descriptor,
// once; a flag still wins, and a bad descriptor is a clear error.
func TestTokensFromInit(t *testing.T) {
	// Raw descriptors, not os.Pipe: deskenv closes the read end itself, and
	// an *os.File's finalizer would close that number again later.
	pipe := func(t *testing.T, text string) string {
		var p [2]int
		if err := syscall.Pipe(p[:]); err != nil {
			t.Fatal(err)
		}
		syscall.Write(p[1], []byte(text))
		syscall.Close(p[1])
		return strconv.Itoa(p[0])
	}
	tests := []struct {
		name    string
		text    string // on the pipe; empty: fd is given as is
		fd      string
		args    []string
		check   func(config) bool
		wantErr string
	}{
		{"tokens", "operator=o1\nagent=a1\n", "", nil, func(c config) bool { return c.OperatorToken == "o1" && c.AgentToken == "a1" && c.ViewerToken == "" }, ""},
		{"a flag wins", "operator=o1\n", "", []string{"--operator-token", "flag"}, func(c config) bool { return c.OperatorToken == "flag" }, ""},
		{"annotator", "annotator=n1\n", "", nil, func(c config) bool { return c.AnnotatorToken == "n1" && c.OperatorToken == "" }, ""},
		{"bad line", "root=x\n", "", nil, nil, "the tokens from deskenv init line 1"},
		{"not a number", "", "three", nil, nil, "want a descriptor number"},
		{"stdin", "", "0", nil, nil, "want a descriptor number"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fd := tc.fd
			if tc.text != "" {
				fd = pipe(t, tc.text)
			}
			t.Setenv(tokensFDVar, fd)
			c, _, err := parseConfig("deskenv", tc.args, io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(c) {
				t.Errorf("config %+v", c)
			}
			if _, ok := os.LookupEnv(tokensFDVar); ok {
				t.Errorf("%s is still set after it was read", tokensFDVar)
			}
		})
	}
}
