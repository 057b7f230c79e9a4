package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/png"
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
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/internal/xprobe"
	"github.com/deskenv/deskenv/screen"
)

// The benchmarks put deskenv's MCP path and the usual alternative side by side
// in one run, on a 1280x800 screen with real content (openbox and two xterms
// full of text), and report p50/p90 per operation besides ns/op:
//
//	go test ./mcpserver/ -run '^$' -bench . -benchtime=200x
//
// BenchmarkSettleDemoSleep takes 2 s an iteration; give it -benchtime=5x.

// benchDesk is the shared content: a window manager and text-filled xterms.
func benchDesk(b *testing.B) *rig {
	b.Helper()
	testrig.NeedTools(b, "openbox", "xterm", "scrot", "convert", "xdotool")
	r := newRig(b, rigConfig{
		w: 1280, h: 800, model: "auto", noProbe: true,
		wm: []string{"openbox"},
		apps: [][]string{
			{"xterm", "-geometry", "100x50+0+0", "-e", "sh", "-c", "ls -l /usr/bin | head -60; exec sh"},
			{"xterm", "-geometry", "80x30+640+300", "-e", "sh", "-c", "cat /etc/services | head -40; exec sh"},
		},
		// As cmd/deskenv's defaults.
		settle: screen.SettleOptions{Quiet: 80 * time.Millisecond, Max: 2 * time.Second},
	})
	// Let the session draw before anything is measured.
	ctx := testrig.Context(b, 10*time.Second)
	if _, _, err := r.capt.Settle(ctx, screen.SettleOptions{Quiet: 500 * time.Millisecond, Max: 5 * time.Second}); err != nil {
		b.Fatal(err)
	}
	return r
}

// latencies collects one duration per iteration and reports percentiles.
type latencies []time.Duration

func (l latencies) report(b *testing.B) {
	if len(l) == 0 {
		return
	}
	s := slices.Clone(l)
	slices.Sort(s)
	ms := func(q float64) float64 { return float64(s[int(q*float64(len(s)-1))]) / 1e6 }
	b.ReportMetric(ms(0.5), "p50-ms")
	b.ReportMetric(ms(0.9), "p90-ms")
}

func timeIt(b *testing.B, lat *latencies, f func() error) {
	t0 := time.Now()
	if err := f(); err != nil {
		b.Fatal(err)
	}
	*lat = append(*lat, time.Since(t0))
}

// mcpImage calls a tool and decodes its image to the bytes of a PNG, checking
// the header: "request to decoded image".
func mcpImage(ctx context.Context, c *client.Client, name string, args map[string]any) error {
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return err
	}
	if res.IsError {
		return fmt.Errorf("%s: %s", name, resultText(res))
	}
	for _, ct := range res.Content {
		if ic, ok := ct.(mcp.ImageContent); ok {
			data, err := base64.StdEncoding.DecodeString(ic.Data)
			if err != nil {
				return err
			}
			_, err = png.DecodeConfig(bytes.NewReader(data))
			return err
		}
	}
	return fmt.Errorf("%s: no image", name)
}

func run(ctx context.Context, env []string, argv ...string) error {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%v: %w: %s", argv, err, out)
	}
	return nil
}

// BenchmarkScreenshot: a screenshot through MCP (request to decoded image) on
// a still screen and on one that changed since the last shot, against the
// usual demo pipeline (scrot, then ImageMagick resizing to 1280x800, then
// reading the file) and scrot alone.
func BenchmarkScreenshot(b *testing.B) {
	r := benchDesk(b)
	c := r.connect(b, "http")
	ctx := context.Background()
	env := append(os.Environ(), r.d.Env()...)
	dir := b.TempDir()
	shot, small := filepath.Join(dir, "shot.png"), filepath.Join(dir, "small.png")

	b.Run("mcp-still", func(b *testing.B) {
		var lat latencies
		for b.Loop() {
			timeIt(b, &lat, func() error { return mcpImage(ctx, c, "computer", map[string]any{"action": "screenshot"}) })
		}
		lat.report(b)
	})
	b.Run("mcp-still-lean-client", func(b *testing.B) {
		lc := newLeanClient(b, r)
		var lat latencies
		for b.Loop() {
			timeIt(b, &lat, lc.screenshot)
		}
		lat.report(b)
	})
	// A small window repainted between shots, outside the timing, so every
	// shot is captured, scaled and encoded afresh.
	p := testrig.Probe(b, r.d, xprobe.Options{X: 1200, Y: 720, Width: 60, Height: 60})
	colour := 0
	repaint := func(b *testing.B) {
		b.StopTimer()
		defer b.StartTimer()
		colour += 0x10305
		if err := p.Fill(0, 0, 60, 60, uint32(colour)&0xffffff); err != nil {
			b.Fatal(err)
		}
		if err := p.Sync(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("mcp-changed", func(b *testing.B) {
		var lat latencies
		for b.Loop() {
			repaint(b)
			timeIt(b, &lat, func() error { return mcpImage(ctx, c, "computer", map[string]any{"action": "screenshot"}) })
		}
		lat.report(b)
	})
	b.Run("mcp-changed-lean-client", func(b *testing.B) {
		lc := newLeanClient(b, r)
		var lat latencies
		for b.Loop() {
			repaint(b)
			timeIt(b, &lat, lc.screenshot)
		}
		lat.report(b)
	})
	// The same through the official TypeScript SDK (e2e/mcp-ts/shots.mjs),
	// timed in node around callTool: what most MCP hosts are built on.
	b.Run("mcp-changed-typescript", func(b *testing.B) {
		dir, err := filepath.Abs("../e2e/mcp-ts")
		if err != nil {
			b.Fatal(err)
		}
		testrig.NeedTools(b, "node")
		cmd := exec.CommandContext(ctx, "node", filepath.Join(dir, "shots.mjs"), testrig.Serve(b, r.srv.Handler())+"/mcp")
		cmd.Dir, cmd.Stderr = dir, os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			b.Fatal(err)
		}
		outPipe, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		defer cmd.Wait()
		defer in.Close()
		out := bufio.NewScanner(outPipe)
		if !out.Scan() || out.Text() != "ready" {
			b.Fatalf("shots.mjs did not start: %q %v", out.Text(), out.Err())
		}
		var lat latencies
		for b.Loop() {
			repaint(b)
			if _, err := io.WriteString(in, "\n"); err != nil {
				b.Fatal(err)
			}
			if !out.Scan() {
				b.Fatalf("shots.mjs stopped: %v", out.Err())
			}
			ms, err := strconv.ParseFloat(out.Text(), 64)
			if err != nil {
				b.Fatalf("shots.mjs wrote %q: %v", out.Text(), err)
			}
			lat = append(lat, time.Duration(ms*float64(time.Millisecond)))
		}
		lat.report(b)
	})
	b.Run("scrot+convert", func(b *testing.B) {
		var lat latencies
		for b.Loop() {
			timeIt(b, &lat, func() error {
				if err := run(ctx, env, "scrot", "-o", shot); err != nil {
					return err
				}
				if err := run(ctx, env, "convert", shot, "-resize", "1280x800!", small); err != nil {
					return err
				}
				_, err := os.ReadFile(small)
				return err
			})
		}
		lat.report(b)
	})
	b.Run("scrot", func(b *testing.B) {
		var lat latencies
		for b.Loop() {
			timeIt(b, &lat, func() error {
				if err := run(ctx, env, "scrot", "-o", shot); err != nil {
					return err
				}
				_, err := os.ReadFile(shot)
				return err
			})
		}
		lat.report(b)
	})
}

// BenchmarkClick: a left click through MCP without the observation (the
// granular tool's screenshot:false), the same with the settled screenshot the
// computer tool always returns, and `xdotool mousemove x y click 1` (with and
// without its default 100 ms click delay).
func BenchmarkClick(b *testing.B) {
	r := benchDesk(b)
	c := r.connect(b, "http")
	ctx := context.Background()
	env := append(os.Environ(), r.d.Env()...)
	// A point on the root window, clear of both xterms.
	x, y := 1100, 100

	b.Run("mcp", func(b *testing.B) {
		var lat latencies
		for b.Loop() {
			timeIt(b, &lat, func() error {
				req := mcp.CallToolRequest{}
				req.Params.Name = "left_click"
				req.Params.Arguments = map[string]any{"coordinate": []int{x, y}, "screenshot": false}
				res, err := c.CallTool(ctx, req)
				if err == nil && res.IsError {
					err = fmt.Errorf("left_click: %s", resultText(res))
				}
				return err
			})
		}
		lat.report(b)
	})
	b.Run("mcp+settled-screenshot", func(b *testing.B) {
		var lat latencies
		for b.Loop() {
			timeIt(b, &lat, func() error {
				return mcpImage(ctx, c, "computer", map[string]any{"action": "left_click", "coordinate": []int{x, y}})
			})
		}
		lat.report(b)
	})
	b.Run("xdotool", func(b *testing.B) {
		var lat latencies
		for b.Loop() {
			timeIt(b, &lat, func() error {
				return run(ctx, env, "xdotool", "mousemove", fmt.Sprint(x), fmt.Sprint(y), "click", "1")
			})
		}
		lat.report(b)
	})
	// xdotool click sleeps --delay (100 ms) even after a single click; this is
	// the same without that sleep, to show the process cost alone.
	b.Run("xdotool-delay0", func(b *testing.B) {
		var lat latencies
		for b.Loop() {
			timeIt(b, &lat, func() error {
				return run(ctx, env, "xdotool", "mousemove", fmt.Sprint(x), fmt.Sprint(y), "click", "--delay", "0", "1")
			})
		}
		lat.report(b)
	})
}

// BenchmarkSettle: type one character into an xterm and get the screenshot of
// the screen once it shows it, through MCP. Compare BenchmarkSettleDemoSleep,
// the usual demo's fixed 2 s sleep.
func BenchmarkSettle(b *testing.B) {
	r := benchDesk(b)
	c := r.connect(b, "http")
	ctx := context.Background()
	focusXterm(b, c)
	var lat latencies
	i := 0
	for b.Loop() {
		i++
		if i%40 == 0 {
			b.StopTimer()
			mcpImage(ctx, c, "key", map[string]any{"text": "ctrl+u"}) // keep the prompt line short
			b.StartTimer()
		}
		timeIt(b, &lat, func() error { return mcpImage(ctx, c, "computer", map[string]any{"action": "type", "text": "x"}) })
	}
	lat.report(b)
}

// BenchmarkSettleDemoSleep is the usual demo's observation after an action:
// xdotool types, a fixed 2 s sleep, then scrot and ImageMagick.
func BenchmarkSettleDemoSleep(b *testing.B) {
	r := benchDesk(b)
	c := r.connect(b, "http")
	ctx := context.Background()
	focusXterm(b, c)
	env := append(os.Environ(), r.d.Env()...)
	dir := b.TempDir()
	shot, small := filepath.Join(dir, "shot.png"), filepath.Join(dir, "small.png")
	var lat latencies
	for b.Loop() {
		timeIt(b, &lat, func() error {
			if err := run(ctx, env, "xdotool", "type", "--delay", "12", "x"); err != nil {
				return err
			}
			time.Sleep(2 * time.Second)
			if err := run(ctx, env, "scrot", "-o", shot); err != nil {
				return err
			}
			return run(ctx, env, "convert", shot, "-resize", "1280x800!", small)
		})
	}
	lat.report(b)
}

// focusXterm clicks into the first xterm so typing goes there.
func focusXterm(b *testing.B, c *client.Client) {
	b.Helper()
	if err := mcpImage(context.Background(), c, "computer", map[string]any{"action": "left_click", "coordinate": []int{200, 600}}); err != nil {
		b.Fatal(err)
	}
}

// leanClient speaks MCP's streamable HTTP with the least client work: one
// POST, one json.Unmarshal into the fields it needs, one base64 decode. It
// separates the server's share of a screenshot from mcp-go's client, which
// decodes every result several times over.
type leanClient struct {
	url, session string
	hc           *http.Client
	id           int
}

func newLeanClient(b *testing.B, r *rig) *leanClient {
	b.Helper()
	lc := &leanClient{url: testrig.Serve(b, r.srv.Handler()) + "/mcp", hc: &http.Client{}}
	resp, err := lc.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"lean","version":"1"}}}`)
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	lc.session = resp.Header.Get("Mcp-Session-Id")
	resp, err = lc.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	return lc
}

func (lc *leanClient) post(body string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodPost, lc.url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	if lc.session != "" {
		req.Header.Set("Mcp-Session-Id", lc.session)
	}
	resp, err := lc.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, fmt.Errorf("POST %s: %s: %s", lc.url, resp.Status, msg)
	}
	return resp, nil
}

func (lc *leanClient) screenshot() error {
	lc.id++
	resp, err := lc.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"computer","arguments":{"action":"screenshot"}}}`, lc.id))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return fmt.Errorf("response is %s, want application/json", ct)
	}
	var msg struct {
		Result struct {
			Content []struct {
				Type string `json:"type"`
				Data []byte `json:"data"` // base64, decoded by encoding/json
			} `json:"content"`
			IsError bool `json:"isError"`
		} `json:"result"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil {
		return err
	}
	for _, c := range msg.Result.Content {
		if c.Type == "image" {
			_, err := png.DecodeConfig(bytes.NewReader(c.Data))
			return err
		}
	}
	return fmt.Errorf("no image in the result (isError %v)", msg.Result.IsError)
}

// BenchmarkScript: ten pointer moves as ten granular tool calls (without
// observations) and as one run_script looping over the same points: what a
// script saves in round trips alone, before counting model turns.
func BenchmarkScript(b *testing.B) {
	r := benchDesk(b)
	srv, err := New(r.exec, r.shoot, r.capt, Config{Modes: []Mode{ModeTools, ModeCodeAct}})
	if err != nil {
		b.Fatal(err)
	}
	r.srv = srv
	c := r.connect(b, "http")
	ctx := context.Background()
	const n = 10
	b.Run("10-tool-calls", func(b *testing.B) {
		var lat latencies
		for b.Loop() {
			timeIt(b, &lat, func() error {
				for i := range n {
					req := mcp.CallToolRequest{}
					req.Params.Name = "mouse_move"
					req.Params.Arguments = map[string]any{"coordinate": []int{1000 + i*10, 100}, "screenshot": false}
					res, err := c.CallTool(ctx, req)
					if err == nil && res.IsError {
						err = fmt.Errorf("mouse_move: %s", resultText(res))
					}
					if err != nil {
						return err
					}
				}
				return nil
			})
		}
		lat.report(b)
	})
	b.Run("1-run_script", func(b *testing.B) {
		var lat latencies
		script := fmt.Sprintf("for i in range(%d):\n    mouse_move(1000 + i*10, 100)\n", n)
		for b.Loop() {
			timeIt(b, &lat, func() error {
				req := mcp.CallToolRequest{}
				req.Params.Name = "run_script"
				req.Params.Arguments = map[string]any{"script": script}
				res, err := c.CallTool(ctx, req)
				if err == nil && res.IsError {
					err = fmt.Errorf("run_script: %s", resultText(res))
				}
				return err
			})
		}
		lat.report(b)
	})
}

// BenchmarkToolsList: what a host puts in the model's context before the
// first turn, the tools/list answer, in bytes, for the default shapes, every
// shape and trait, and the same deferred (DeferTools).
func BenchmarkToolsList(b *testing.B) {
	home := b.TempDir()
	all := []Trait{BashTrait{Dir: home}, FilesTrait{Home: home}, ClipboardTrait{nopClipboard{}}}
	for _, cfg := range []struct {
		name string
		rc   rigConfig
	}{
		{"computer+tools", rigConfig{modes: []Mode{ModeComputer, ModeTools}}},
		{"computer", rigConfig{modes: []Mode{ModeComputer}}},
		{"codeact", rigConfig{modes: []Mode{ModeCodeAct}}},
		{"openai", rigConfig{modes: []Mode{ModeOpenAI}}},
		{"gemini", rigConfig{modes: []Mode{ModeGemini}}},
		{"pyautogui", rigConfig{modes: []Mode{ModePyAutoGUI}}},
		{"everything", rigConfig{modes: []Mode{ModeComputer, ModeTools, ModeCodeAct}, findTools: true, traits: all}},
		{"everything-deferred", rigConfig{modes: []Mode{ModeComputer, ModeTools, ModeCodeAct}, findTools: true, deferTools: true, traits: all}},
	} {
		b.Run(cfg.name, func(b *testing.B) {
			rc := cfg.rc
			rc.w, rc.h, rc.model, rc.noProbe = 1280, 800, "auto", true
			r := newRig(b, rc)
			c := r.connect(b, "http")
			var size, n int
			for b.Loop() {
				res, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
				if err != nil {
					b.Fatal(err)
				}
				raw, err := json.Marshal(res.Tools)
				if err != nil {
					b.Fatal(err)
				}
				size, n = len(raw), len(res.Tools)
			}
			b.ReportMetric(float64(size), "bytes")
			b.ReportMetric(float64(n), "tools")
		})
	}
}
