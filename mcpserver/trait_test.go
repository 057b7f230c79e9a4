package mcpserver

import (
	"context"
	"os"
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

	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/internal/xsel"
)

var traitNames = []string{"bash", "read_file", "write_file", "list_files", "clipboard_get", "clipboard_set"}

// traitRig is a rig whose server has the bash and files traits on, over a
// home directory of the test's own.
func traitRig(t *testing.T, modes []Mode, bash BashTrait) (*rig, string) {
	t.Helper()
	r := newRig(t, rigConfig{w: 1024, h: 768, model: "auto", modes: []Mode{ModeTools}, noProbe: true})
	home := t.TempDir()
	bash.Dir = home
	bash.Env = append(r.d.Env(), "HOME="+home)
	srv, err := New(r.exec, r.shoot, r.capt, Config{Modes: modes, Traits: []Trait{
		bash,
		FilesTrait{Home: home, MaxReadBytes: 1 << 20},
	}})
	if err != nil {
		t.Fatal(err)
	}
	r.srv = srv
	return r, home
}

func toolNames(t *testing.T, c *client.Client) []string {
	t.Helper()
	res, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return names
}

// TestTraitsOff: without traits their tools do not exist, as MCP tools or
// as script functions.
func TestTraitsOff(t *testing.T) {
	r := newRig(t, rigConfig{w: 1024, h: 768, model: "auto", modes: []Mode{ModeTools, ModeComputer, ModeCodeAct}, noProbe: true})
	c := r.connect(t, "http")
	names := toolNames(t, c)
	for _, n := range traitNames {
		if slices.Contains(names, n) {
			t.Errorf("trait tool %s listed with traits off: %v", n, names)
		}
		res := call(t, c, "run_script", map[string]any{"script": n + "('x')"})
		if !res.IsError || !strings.Contains(resultText(res), "undefined: "+n) {
			t.Errorf("script calling %s with traits off: %s", n, resultText(res))
		}
	}
	// An unknown tool is a protocol error (-32602) in MCP, not a result.
	req := mcp.CallToolRequest{}
	req.Params.Name = "bash"
	req.Params.Arguments = map[string]any{"command": "true"}
	if res, err := c.CallTool(t.Context(), req); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("bash with traits off: %v, %+v; want tool not found", err, res)
	}
}

// TestTraitsListed: traits are MCP tools next to tools or computer, and only
// script functions in codeact alone, where run_script's description names
// them.
func TestTraitsListed(t *testing.T) {
	tests := []struct {
		modes  []Mode
		listed bool
	}{
		{[]Mode{ModeTools}, true},
		{[]Mode{ModeComputer}, true},
		{[]Mode{ModeComputer, ModeCodeAct}, true},
		{[]Mode{ModeCodeAct}, false},
	}
	for _, tc := range tests {
		t.Run(strings.Join(modeStrings(tc.modes), "+"), func(t *testing.T) {
			r, _ := traitRig(t, tc.modes, BashTrait{})
			c := r.connect(t, "http")
			names := toolNames(t, c)
			for _, n := range []string{"bash", "read_file", "write_file", "list_files"} {
				if slices.Contains(names, n) != tc.listed {
					t.Errorf("%s listed = %v, want %v (tools %v)", n, !tc.listed, tc.listed, names)
				}
			}
			for _, n := range []string{"clipboard_get", "clipboard_set"} {
				if slices.Contains(names, n) {
					t.Errorf("%s listed without a clipboard configured", n)
				}
			}
			if slices.Contains(tc.modes, ModeCodeAct) {
				var desc string
				for _, tl := range r.srv.Tools() {
					if tl.Name == "run_script" {
						desc = tl.Description
					}
				}
				for _, sig := range []string{"bash(command, timeout=None)", "read_file(path)", "write_file(path, text, append=None)", "list_files(path=None)"} {
					if !strings.Contains(desc, sig) {
						t.Errorf("run_script's description lacks %s:\n%s", sig, desc)
					}
				}
			}
		})
	}
}

func modeStrings(ms []Mode) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = string(m)
	}
	return out
}

func TestBashTrait(t *testing.T) {
	r, home := traitRig(t, []Mode{ModeTools}, BashTrait{MaxOutputBytes: 1000, MaxTimeout: time.Minute})
	c := r.connect(t, "stdio")
	tests := []struct {
		name    string
		args    map[string]any
		isError bool
		want    []string // substrings of the result text
	}{
		{"exit code and both streams", map[string]any{"command": "echo out; echo err >&2; exit 3"}, false,
			[]string{"exit code 3", "out\n", "err\n"}},
		{"home and display", map[string]any{"command": "pwd; echo $HOME; echo $DISPLAY"}, false,
			[]string{"exit code 0", home + "\n" + home + "\n" + r.d.Name()}},
		{"stdin is empty", map[string]any{"command": "cat; echo done"}, false, []string{"exit code 0\ndone"}},
		{"output cap keeps both ends", map[string]any{"command": "seq 1 100000"}, false,
			[]string{"cut to its first 500 and last 500", "1\n2\n3\n", "[...]", "99999\n100000"}},
		{"killed by a signal", map[string]any{"command": "kill -9 $$"}, false, []string{"killed by signal: killed"}},
		{"detached child does not hold the call", map[string]any{"command": "sleep 20 & echo started"}, false,
			[]string{"exit code 0\nstarted"}},
		{"timeout", map[string]any{"command": "echo before; sleep 30", "timeout": 1}, true,
			[]string{"ran past its timeout of 1s", "before"}},
		{"timeout out of range", map[string]any{"command": "true", "timeout": 0}, true, []string{"out of range: 1 to 60"}},
		{"timeout too long", map[string]any{"command": "true", "timeout": 61}, true, []string{"out of range"}},
		{"timeout wrong type", map[string]any{"command": "true", "timeout": "soon"}, true, []string{`"timeout" must be an integer`}},
		{"missing command", map[string]any{}, true, []string{`missing "command"`}},
		{"empty command", map[string]any{"command": "  "}, true, []string{"the command is empty"}},
		{"unknown argument", map[string]any{"command": "true", "sudo": true}, true, []string{`unknown argument "sudo"`}},
		{"huge command", map[string]any{"command": strings.Repeat("x", MaxCommandBytes+1)}, true, []string{"more than 65536"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := call(t, c, "bash", tc.args)
			txt := resultText(res)
			if res.IsError != tc.isError {
				t.Fatalf("isError %v, want %v: %s", res.IsError, tc.isError, txt)
			}
			for _, w := range tc.want {
				if !strings.Contains(txt, w) {
					t.Errorf("result lacks %q:\n%s", w, txt)
				}
			}
		})
	}
	// A timeout kills what the command started, not only the shell.
	res := call(t, c, "bash", map[string]any{"command": "sleep 40 & echo pid=$!; wait", "timeout": 1})
	m := regexp.MustCompile(`pid=(\d+)`).FindStringSubmatch(resultText(res))
	if !res.IsError || m == nil {
		t.Fatalf("want a timeout with the child's pid: %s", resultText(res))
	}
	pid, _ := strconv.Atoi(m[1])
	if alive(pid) {
		t.Errorf("the command's child %d outlived its timeout", pid)
	}
}

// alive reports a process that exists and is not a zombie (in a container
// without an init that reaps, a killed orphan stays a zombie).
func alive(pid int) bool {
	for range 50 {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return false
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 0 && (f[0] == "Z" || f[0] == "X") {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return syscall.Kill(pid, 0) == nil
}

func TestFilesTrait(t *testing.T) {
	r, home := traitRig(t, []Mode{ModeTools}, BashTrait{})
	outside := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(home, "a.txt"), []byte("hello"), 0o644))
	must(os.MkdirAll(filepath.Join(home, "sub"), 0o755))
	must(os.WriteFile(filepath.Join(home, "sub", "b.txt"), []byte("bee"), 0o644))
	must(os.WriteFile(filepath.Join(home, "bin"), []byte{0xff, 0xfe, 0, 1}, 0o644))
	must(os.WriteFile(filepath.Join(home, "big"), make([]byte, 1<<20+1), 0o644))
	must(os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o644))
	must(os.Symlink("a.txt", filepath.Join(home, "link_in")))
	must(os.Symlink(outside, filepath.Join(home, "link_out")))
	must(os.Symlink(filepath.Join(outside, "secret"), filepath.Join(home, "link_secret")))
	must(os.Symlink("../"+filepath.Base(outside)+"/secret", filepath.Join(home, "link_rel")))
	c := r.connect(t, "http")

	tests := []struct {
		tool    string
		args    map[string]any
		isError bool
		want    string
	}{
		{"read_file", map[string]any{"path": "a.txt"}, false, "hello"},
		{"read_file", map[string]any{"path": "~/a.txt"}, false, "hello"},
		{"read_file", map[string]any{"path": filepath.Join(home, "sub/b.txt")}, false, "bee"},
		{"read_file", map[string]any{"path": "sub/../a.txt"}, false, "hello"},
		{"read_file", map[string]any{"path": "link_in"}, false, "hello"},
		{"read_file", map[string]any{"path": "../" + filepath.Base(outside) + "/secret"}, true, "leads outside the home directory"},
		{"read_file", map[string]any{"path": filepath.Join(outside, "secret")}, true, "is outside the home directory"},
		{"read_file", map[string]any{"path": "/etc/passwd"}, true, "is outside the home directory"},
		{"read_file", map[string]any{"path": "link_out/secret"}, true, "through a symlink"},
		{"read_file", map[string]any{"path": "link_secret"}, true, "through a symlink"},
		{"read_file", map[string]any{"path": "link_rel"}, true, "through a symlink"},
		{"read_file", map[string]any{"path": "sub"}, true, "is a directory"},
		{"read_file", map[string]any{"path": "nope.txt"}, true, "does not exist"},
		{"read_file", map[string]any{"path": "bin"}, true, "not UTF-8 text"},
		{"read_file", map[string]any{"path": "big"}, true, "is 1048577 bytes, more than the 1048576"},
		{"read_file", map[string]any{"path": ""}, true, "the path is empty"},
		{"read_file", map[string]any{"path": 7}, true, `"path" must be a string`},
		{"write_file", map[string]any{"path": "new/deep/c.txt", "text": "sea"}, false, "wrote 3 bytes"},
		{"read_file", map[string]any{"path": "new/deep/c.txt"}, false, "sea"},
		{"write_file", map[string]any{"path": "new/deep/c.txt", "text": "+", "append": true}, false, "appended 1 bytes"},
		{"read_file", map[string]any{"path": "new/deep/c.txt"}, false, "sea+"},
		{"write_file", map[string]any{"path": "link_in", "text": "hi"}, false, "wrote 2 bytes"},
		{"read_file", map[string]any{"path": "a.txt"}, false, "hi"},
		{"write_file", map[string]any{"path": "../evil", "text": "x"}, true, "leads outside"},
		{"write_file", map[string]any{"path": "link_out/evil", "text": "x"}, true, "through a symlink"},
		{"write_file", map[string]any{"path": "link_secret", "text": "x"}, true, "through a symlink"},
		{"write_file", map[string]any{"path": "~", "text": "x"}, true, "the home directory itself"},
		{"write_file", map[string]any{"path": "x.txt"}, true, `missing "text"`},
		{"list_files", map[string]any{}, false, "a.txt (2 bytes)\nbig (1048577 bytes)\nbin (4 bytes)\nlink_in -> a.txt"},
		{"list_files", map[string]any{"path": "sub"}, false, "b.txt (3 bytes)"},
		{"list_files", map[string]any{"path": "link_out"}, true, "through a symlink"},
		{"list_files", map[string]any{"path": "a.txt"}, true, "not a directory"},
		{"list_files", map[string]any{"path": ".."}, true, "leads outside"},
	}
	for _, tc := range tests {
		t.Run(tc.tool+" "+abbreviate(tc.args["path"]), func(t *testing.T) {
			res := call(t, c, tc.tool, tc.args)
			txt := resultText(res)
			if res.IsError != tc.isError {
				t.Fatalf("isError %v, want %v: %s", res.IsError, tc.isError, txt)
			}
			if !strings.Contains(txt, tc.want) {
				t.Errorf("result %q lacks %q", txt, tc.want)
			}
		})
	}
	// Nothing was written outside home, and what is there is unchanged.
	entries, _ := os.ReadDir(outside)
	if len(entries) != 1 {
		t.Errorf("files outside home: %v", entries)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "secret" {
		t.Errorf("the file outside home was changed to %q", b)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(home), "evil")); err == nil {
		t.Errorf("write_file ../evil created a file beside home")
	}
}

// TestScriptTraits: trait tools are script functions returning values a
// script can use, and their errors stop the script with its output kept.
func TestScriptTraits(t *testing.T) {
	r, _ := traitRig(t, []Mode{ModeCodeAct}, BashTrait{})
	c := r.connect(t, "http")
	tests := []struct {
		name    string
		script  string
		isError bool
		want    []string
	}{
		{"values", `r = bash("echo hi; exit 2")
print(r.exit_code, r.output.strip(), r.truncated)
print(write_file("x/y.txt", "abc"))
write_file(path="x/y.txt", text="d", append=True)
print(read_file("x/y.txt"))
for e in list_files("x"):
    print(e.name, e.type, e.size)
`, false, []string{"2 hi False\n3\nabcd\ny.txt file 4\n"}},
		{"error keeps output", "print('first')\nread_file('../../etc/passwd')\nprint('never')", true,
			[]string{"leads outside the home directory", "first", "script:2"}},
		{"wrong type", "bash(1)", true, []string{"command must be a string, got int"}},
		{"wrong bool", "write_file('a', 'b', 'yes')", true, []string{"append must be True or False"}},
		{"missing", "write_file('a')", true, []string{`missing "text"`}},
		{"too many", "read_file('a', 'b')", true, []string{"takes at most 1 arguments"}},
		{"unknown keyword", "read_file(file='a')", true, []string{"unexpected or repeated argument file"}},
		{"timeout", "print('start')\nbash('sleep 10', timeout=1)", true, []string{"ran past its timeout of 1s", "start"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := call(t, c, "run_script", map[string]any{"script": tc.script})
			txt := resultText(res)
			if res.IsError != tc.isError {
				t.Fatalf("isError %v, want %v: %s", res.IsError, tc.isError, txt)
			}
			for _, w := range tc.want {
				if !strings.Contains(txt, w) {
					t.Errorf("result lacks %q:\n%s", w, txt)
				}
			}
		})
	}
}

func TestTraitConfigErrors(t *testing.T) {
	r := newRig(t, rigConfig{w: 640, h: 480, model: "off", noProbe: true})
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		traits []Trait
		want   string
	}{
		{"relative home", []Trait{FilesTrait{Home: "home"}}, "must be an absolute path"},
		{"missing home", []Trait{FilesTrait{Home: "/nonexistent/home"}}, "no such file"},
		{"home is a file", []Trait{FilesTrait{Home: file}}, "is not a directory"},
		{"no shell", []Trait{BashTrait{Shell: "/nonexistent/sh"}}, "the bash trait's shell"},
		{"bad dir", []Trait{BashTrait{Dir: file}}, "is not a directory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(r.exec, r.shoot, r.capt, Config{Traits: tc.traits})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestHeadTail(t *testing.T) {
	tests := []struct {
		writes    []string
		max       int
		want      string
		truncated bool
	}{
		{[]string{"abc"}, 10, "abc", false},
		{[]string{"abcde", "fghij"}, 10, "abcdefghij", false},
		{[]string{"abcdefghijk"}, 10, "abcde\n[...]\nghijk", true},
		{[]string{"ab", "cdefgh", "ijklmnop"}, 10, "abcde\n[...]\nlmnop", true},
		{[]string{"abc", "defghijklmnopqrstuvwxyz"}, 7, "abc\n[...]\nwxyz", true},
	}
	for _, tc := range tests {
		h := &headTail{max: tc.max}
		for _, w := range tc.writes {
			h.Write([]byte(w))
		}
		got, tr := h.result()
		if got != tc.want || tr != tc.truncated {
			t.Errorf("%v max %d: %q %v, want %q %v", tc.writes, tc.max, got, tr, tc.want, tc.truncated)
		}
	}
}

// xselClipboard is the clipboard trait as cmd/deskenv builds it: an owner of
// its own for setting, a pasting client's read for getting.
type xselClipboard struct {
	display string
	owner   *xsel.Owner
}

func (c xselClipboard) ReadClipboard(ctx context.Context) (string, error) {
	return xsel.Read(ctx, c.display, "CLIPBOARD", 1<<20)
}

func (c xselClipboard) WriteClipboard(ctx context.Context, text string) error {
	return c.owner.Set(ctx, text)
}

// TestClipboardTrait: clipboard_set makes the text what another X client
// pastes, clipboard_get reads what another client copied, in tools and in
// scripts.
func TestClipboardTrait(t *testing.T) {
	r := newRig(t, rigConfig{w: 1024, h: 768, model: "auto", noProbe: true})
	owner, err := xsel.NewOwner(r.d.Name(), "CLIPBOARD", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { owner.Close() })
	srv, err := New(r.exec, r.shoot, r.capt, Config{Modes: []Mode{ModeTools, ModeCodeAct},
		Traits: []Trait{ClipboardTrait{xselClipboard{r.d.Name(), owner}}}})
	if err != nil {
		t.Fatal(err)
	}
	r.srv = srv
	c := r.connect(t, "http")
	// Another client on the desktop: an app that copies.
	app, err := xsel.NewOwner(r.d.Name(), "CLIPBOARD", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close() })

	for _, text := range []string{"plain", "héllo € 日本 🙂", "", strings.Repeat("line\n", 20000)} {
		t.Run(abbreviate(text), func(t *testing.T) {
			res := call(t, c, "clipboard_set", map[string]any{"text": text})
			if res.IsError {
				t.Fatal(resultText(res))
			}
			got, err := xsel.Read(t.Context(), r.d.Name(), "CLIPBOARD", 1<<20)
			if err != nil || got != text {
				t.Fatalf("another client pastes %q (%v), want %q", abbreviate(got), err, abbreviate(text))
			}
			if err := app.Set(t.Context(), text+"!"); err != nil {
				t.Fatal(err)
			}
			res = call(t, c, "clipboard_get", map[string]any{})
			if res.IsError || resultText(res) != text+"!" {
				t.Fatalf("clipboard_get: %q (error %v), want %q", abbreviate(resultText(res)), res.IsError, abbreviate(text+"!"))
			}
		})
	}
	res := call(t, c, "run_script", map[string]any{"script": "clipboard_set('from a script')\nprint(clipboard_get())"})
	if res.IsError || resultText(res) != "from a script\n" {
		t.Errorf("script: %q (error %v)", resultText(res), res.IsError)
	}
	res = call(t, c, "clipboard_set", map[string]any{"text": strings.Repeat("x", xsel.MaxSetBytes+1)})
	if !res.IsError || !strings.Contains(resultText(res), "clipboard_set") {
		t.Errorf("oversized text: %q (error %v)", abbreviate(resultText(res)), res.IsError)
	}
	res = call(t, c, "clipboard_set", map[string]any{})
	if !res.IsError || !strings.Contains(resultText(res), `missing "text"`) {
		t.Errorf("no text: %q", resultText(res))
	}
}

// TestInstructions: the handshake's instructions describe the tools this
// server offers, no more.
func TestInstructions(t *testing.T) {
	tests := []struct {
		modes     []Mode
		findTools bool
		has, not  []string
	}{
		{[]Mode{ModeComputer}, false, []string{"1280x800", "answer with a screenshot"}, []string{"run_script", "find_tools"}},
		{[]Mode{ModeCodeAct}, true, []string{"run_script", "find_tools"}, []string{"answer with a screenshot"}},
	}
	for _, tc := range tests {
		r := newRig(t, rigConfig{w: 1280, h: 800, model: "auto", modes: tc.modes, findTools: tc.findTools, noProbe: true})
		tr, err := transport.NewStreamableHTTP(testrig.Serve(t, r.srv.Handler()) + "/mcp")
		if err != nil {
			t.Fatal(err)
		}
		c := client.NewClient(tr)
		if err := c.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		init := mcp.InitializeRequest{}
		init.Params.ClientInfo = mcp.Implementation{Name: "instructions", Version: "1"}
		res, err := c.Initialize(t.Context(), init)
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		got := res.Instructions
		for _, h := range tc.has {
			if !strings.Contains(got, h) {
				t.Errorf("%v: instructions lack %q: %s", tc.modes, h, got)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(got, n) {
				t.Errorf("%v: instructions mention %q: %s", tc.modes, n, got)
			}
		}
	}
}
