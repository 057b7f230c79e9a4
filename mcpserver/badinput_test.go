package mcpserver

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/deskenv/deskenv/internal/xsel"
)

// badInputs is the table of input every face must refuse with a clear error
// and without doing anything: nulls where numbers go (JavaScript sends NaN
// and Infinity as null), numbers too large or not whole, numbers as
// strings, text that is not UTF-8 (raw bytes, or a lone surrogate escape
// that decoding would turn into U+FFFD), durations that would overflow,
// negative or huge scroll amounts. Arguments are raw JSON so the bytes reach
// the server as written. (A number past float64, 1e400, is refused by
// mcp-go itself as an invalid request before any tool sees it; hci's tests
// cover it for the other faces.)
var badInputs = []struct {
	name string
	tool string
	args string
	want string // the message must contain it
}{
	{"null coordinate", "computer", `{"action":"left_click","coordinate":[null,null]}`, "got null at index 0"},
	{"null y", "computer", `{"action":"mouse_move","coordinate":[10,null]}`, "got null at index 1"},
	{"null point", "computer", `{"action":"left_click","coordinate":null}`, "coordinate is null"},
	{"null start", "computer", `{"action":"left_click_drag","start_coordinate":[null,null],"coordinate":[5,5]}`, "start_coordinate must be an array"},
	{"null region", "computer", `{"action":"zoom","region":[0,0,null,null]}`, "region must be an array"},
	{"1e300 coordinate", "computer", `{"action":"left_click","coordinate":[1e300,1]}`, "got number 1e300"},
	{"past int32", "computer", `{"action":"left_click","coordinate":[4294967296,1]}`, "got number 4294967296"},
	{"1.5 coordinate", "computer", `{"action":"left_click","coordinate":[1.5,2]}`, "got number 1.5"},
	{"string coordinate", "computer", `{"action":"left_click","coordinate":["3",4]}`, `got string "3"`},
	{"negative coordinate", "computer", `{"action":"left_click","coordinate":[-1,4]}`, "outside"},
	{"negative scroll", "computer", `{"action":"scroll","scroll_direction":"down","scroll_amount":-3}`, "scroll_amount must be a number of wheel notches from 0 to 100, got -3"},
	{"huge scroll", "computer", `{"action":"scroll","scroll_direction":"down","scroll_amount":1e300}`, "scroll_amount must be an integer"},
	{"string scroll", "computer", `{"action":"scroll","scroll_direction":"down","scroll_amount":"3"}`, "scroll_amount must be an integer"},
	{"1e300 wait", "computer", `{"action":"wait","duration":1e300}`, "duration must be between 0 and 100 seconds"},
	{"negative wait", "computer", `{"action":"wait","duration":-1}`, "duration must be between 0 and 100 seconds"},
	{"null wait", "computer", `{"action":"wait","duration":null}`, "wait requires duration"},
	{"1e300 hold", "computer", `{"action":"hold_key","text":"shift","duration":1e300}`, "duration must be between"},
	{"invalid UTF-8 type", "computer", "{\"action\":\"type\",\"text\":\"a\xffb\"}", "not valid UTF-8: the byte 0xff"},
	{"lone surrogate type", "computer", `{"action":"type","text":"a\udc00b"}`, `unpaired UTF-16 surrogate escape \udc00`},
	{"invalid UTF-8 key", "computer", "{\"action\":\"key\",\"text\":\"ctrl+\xc3\"}", "not valid UTF-8"},
	{"invalid UTF-8 modifiers", "computer", "{\"action\":\"left_click\",\"coordinate\":[1,1],\"text\":\"\xfe\"}", "not valid UTF-8"},
	{"long unknown action", "computer", `{"action":"` + strings.Repeat("z", 10000) + `"}`, "(10000 bytes)"},

	{"granular null coordinate", "left_click", `{"coordinate":[null,null]}`, "got null at index 0"},
	{"granular null start", "left_click_drag", `{"start_coordinate":[null,0],"coordinate":[1,1]}`, "start_coordinate"},
	{"granular float", "mouse_move", `{"coordinate":[0.5,0]}`, "got number 0.5"},
	{"granular negative scroll", "scroll", `{"scroll_direction":"up","scroll_amount":-1}`, "scroll_amount"},
	{"granular 1e300 wait", "wait", `{"duration":1e300}`, "duration must be between"},
	{"granular null hold", "hold_key", `{"text":"shift","duration":null}`, "hold_key requires duration"},
	{"granular invalid UTF-8", "type", "{\"text\":\"\xff\xfe\"}", "not valid UTF-8"},
	{"granular lone surrogate", "type", `{"text":"\ud83d"}`, "unpaired UTF-16 surrogate"},

	{"script raw invalid UTF-8", "run_script", "{\"script\":\"type('\xff')\"}", "not valid UTF-8"},
	{"script byte of a string", "run_script", `{"script":"type('é'[0])"}`, "not valid UTF-8"},
	{"script NaN wait", "run_script", `{"script":"wait(float('nan'))"}`, "finite number"},
	{"script 1e300 wait", "run_script", `{"script":"wait(1e300)"}`, "duration must be between"},
	{"script negative wait", "run_script", `{"script":"wait(-1)"}`, "duration must be between"},
	{"script huge scroll", "run_script", `{"script":"scroll(direction='down', amount=1000000000000000000000000000000)"}`, "out of range"},
	{"script float pixel", "run_script", `{"script":"left_click(1.5, 2)"}`, "integer pixel"},
	{"script huge pixel", "run_script", `{"script":"left_click(100000000000000000000, 2)"}`, "integer pixel"},
	{"script file text", "run_script", `{"script":"write_file('s.txt', 'é'[1])"}`, "not valid UTF-8"},
	{"script clipboard text", "run_script", `{"script":"clipboard_set('é'[0])"}`, "not valid UTF-8"},

	{"write_file invalid UTF-8", "write_file", "{\"path\":\"w.txt\",\"text\":\"a\xffb\"}", "not valid UTF-8"},
	{"write_file lone surrogate", "write_file", `{"path":"w.txt","text":"\udfff"}`, "unpaired UTF-16 surrogate"},
	{"write_file invalid path", "write_file", "{\"path\":\"w\xff.txt\",\"text\":\"x\"}", "not valid UTF-8"},
	{"clipboard invalid UTF-8", "clipboard_set", "{\"text\":\"a\xffb\"}", "not valid UTF-8"},
	{"clipboard lone surrogate", "clipboard_set", `{"text":"\ud800"}`, "unpaired UTF-16 surrogate"},
}

// TestBadInputRefused drives the table over every MCP transport with a real
// mcp-go client: each call is a tool error naming the problem, X receives
// no event (the probe window), the pointer does not move, no file is
// written and the clipboard keeps what it held.
func TestBadInputRefused(t *testing.T) {
	r := newRig(t, rigConfig{w: 1280, h: 800, model: "auto"})
	home := t.TempDir()
	owner, err := xsel.NewOwner(r.d.Name(), "CLIPBOARD", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { owner.Close() })
	srv, err := New(r.exec, r.shoot, r.capt, Config{
		Modes: []Mode{ModeComputer, ModeTools, ModeCodeAct},
		Traits: []Trait{
			FilesTrait{Home: home},
			ClipboardTrait{xselClipboard{r.d.Name(), owner}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	r.srv = srv
	// Another app holds the clipboard; a refused clipboard_set leaves it.
	app, err := xsel.NewOwner(r.d.Name(), "CLIPBOARD", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close() })
	if err := app.Set(t.Context(), "held"); err != nil {
		t.Fatal(err)
	}
	// The pointer rests inside the probe window, away from (0,0).
	if res := call(t, r.connect(t, "http"), "mouse_move", map[string]any{"coordinate": []int{640, 400}, "screenshot": false}); res.IsError {
		t.Fatal(resultText(res))
	}
	x0, y0, err := r.exec.CursorPosition(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range transports {
		t.Run(kind, func(t *testing.T) {
			c := r.connect(t, kind)
			for _, tc := range badInputs {
				t.Run(tc.name, func(t *testing.T) {
					if err := r.probe.Sync(t.Context()); err != nil {
						t.Fatal(err)
					}
					r.probe.Take()
					res := call(t, c, tc.tool, json.RawMessage(tc.args))
					msg := resultText(res)
					if !res.IsError {
						t.Fatalf("accepted: %.200s", msg)
					}
					if !strings.Contains(msg, tc.want) {
						t.Errorf("message %.300q does not say %q", msg, tc.want)
					}
					if len(msg) > 1000 {
						t.Errorf("message is %d bytes: it should quote a short prefix of the input", len(msg))
					}
					if err := r.probe.Sync(t.Context()); err != nil {
						t.Fatal(err)
					}
					if ev := r.probe.Take(); len(ev) != 0 {
						t.Errorf("X received %v", ev)
					}
					if x, y, err := r.exec.CursorPosition(t.Context()); err != nil || x != x0 || y != y0 {
						t.Errorf("the pointer moved to %d,%d (%v), from %d,%d", x, y, err, x0, y0)
					}
				})
			}
		})
	}
	if entries, _ := os.ReadDir(home); len(entries) != 0 {
		t.Errorf("refused calls wrote into the home: %v", entries)
	}
	if got, err := xsel.Read(t.Context(), r.d.Name(), "CLIPBOARD", 1<<10); err != nil || got != "held" {
		t.Errorf("the clipboard holds %q (%v) after refused sets, want %q", got, err, "held")
	}
}

// threads is this process's OS thread count.
func threads(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if n, ok := strings.CutPrefix(line, "Threads:"); ok {
			var v int
			if _, err := fmt.Sscan(n, &v); err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatal("no Threads line in /proc/self/status")
	return 0
}

// TestFilesFIFO: a FIFO the session planted in its home is refused at once
// by read_file, write_file and list_files (which used to block in open(2)
// for ever, a thread pinned per call), and 1,000 such calls leave the
// process's thread count where it was.
func TestFilesFIFO(t *testing.T) {
	r, home := traitRig(t, []Mode{ModeTools}, BashTrait{})
	fifo := filepath.Join(home, "fifo")
	if err := syscall.Mkfifo(fifo, 0o666); err != nil {
		t.Fatal(err)
	}
	c := r.connect(t, "http")
	cases := []struct {
		tool string
		args map[string]any
		want string
	}{
		{"read_file", map[string]any{"path": "fifo"}, "not a regular file"},
		{"write_file", map[string]any{"path": "fifo", "text": "x"}, "not a regular file"},
		{"write_file", map[string]any{"path": "fifo", "text": "x", "append": true}, "not a regular file"},
		{"list_files", map[string]any{"path": "fifo"}, "not a regular file"},
	}
	for _, tc := range cases {
		res := call(t, c, tc.tool, tc.args)
		if !res.IsError || !strings.Contains(resultText(res), tc.want) {
			t.Errorf("%s %v: %q (error %v), want an error saying %q", tc.tool, tc.args, resultText(res), res.IsError, tc.want)
		}
	}
	before := threads(t)
	for i := range 1000 {
		tc := cases[i%len(cases)]
		if res := call(t, c, tc.tool, tc.args); !res.IsError {
			t.Fatalf("call %d: %s accepted a FIFO", i, tc.tool)
		}
	}
	// The Go runtime may start a thread or two for its own reasons; a
	// blocked open would leave hundreds.
	after := threads(t)
	t.Logf("threads: %d before 1,000 FIFO calls, %d after", before, after)
	if after > before+8 {
		t.Errorf("threads went from %d to %d over 1,000 FIFO calls", before, after)
	}
	// With a reader at the other end, a write must still be refused, not
	// feed the FIFO.
	rd, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	if res := call(t, c, "write_file", map[string]any{"path": "fifo", "text": "fed"}); !res.IsError {
		t.Errorf("write_file to a FIFO with a reader: %s", resultText(res))
	}
	buf := make([]byte, 8)
	if n, _ := rd.Read(buf); n != 0 {
		t.Errorf("the FIFO received %q", buf[:n])
	}
}

// TestFilesUnixSocket: a socket in the home is no file either.
func TestFilesUnixSocket(t *testing.T) {
	r, home := traitRig(t, []Mode{ModeTools}, BashTrait{})
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: filepath.Join(home, "sock")}); err != nil {
		t.Fatal(err)
	}
	c := r.connect(t, "http")
	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{"read_file", map[string]any{"path": "sock"}},
		{"write_file", map[string]any{"path": "sock", "text": "x"}},
		{"list_files", map[string]any{"path": "sock"}},
	} {
		res := call(t, c, tc.tool, tc.args)
		if !res.IsError || !strings.Contains(resultText(res), "not a regular file") {
			t.Errorf("%s on a socket: %q (error %v)", tc.tool, resultText(res), res.IsError)
		}
	}
}

// TestBashTimeoutBounded: a timeout whose nanoseconds overflow int64 (it
// used to wrap to a negative Duration and pass the bound) is refused, as are
// timeouts that are not integers; no command runs.
func TestBashTimeoutBounded(t *testing.T) {
	r, home := traitRig(t, []Mode{ModeTools}, BashTrait{})
	c := r.connect(t, "http")
	for _, args := range []string{
		`{"command":"touch ran","timeout":10000000000}`,
		`{"command":"touch ran","timeout":9223372036854775807}`,
		`{"command":"touch ran","timeout":-1}`,
		`{"command":"touch ran","timeout":1e300}`,
		`{"command":"touch ran","timeout":1.5}`,
		`{"command":"touch ran","timeout":"3"}`,
		`{"command":"touch ran","timeout":null,"x":1}`,
	} {
		res := call(t, c, "bash", json.RawMessage(args))
		if !res.IsError || !strings.Contains(resultText(res), "timeout") && !strings.Contains(resultText(res), `"x"`) {
			t.Errorf("%s: %q (error %v), want an error about the timeout", args, resultText(res), res.IsError)
		}
	}
	if _, err := os.Stat(filepath.Join(home, "ran")); err == nil {
		t.Errorf("a refused bash call ran its command")
	}
}
