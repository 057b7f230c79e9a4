package task

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/deskenv/deskenv/internal/devtools"
	"github.com/deskenv/deskenv/internal/testrig"
)

// BenchmarkBrowser times the browser step (Chromium started on a served
// page: fresh profile, load, window mapped) and one evaluation of each
// browser check against it, as the user nobody. docs/BENCHMARKS.md has the
// figures.
func BenchmarkBrowser(b *testing.B) {
	desk := func() (*DisplayEnv, *Task) {
		_, env := browserDesk(b)
		port := testrig.FreePort(b)
		tk, err := Parse([]byte(fmt.Sprintf(`{"id": "shop", "instruction": "x", "setup": [
			{"type": "write_file", "path": "~/site/index.html", "content": %q},
			{"type": "write_file", "path": "~/site/other.html", "content": "<title>Other</title><p>other page</p>"},
			{"type": "serve", "dir": "~/site", "port": %d},
			{"type": "browser", "url": "http://127.0.0.1:%d/index.html"}
		], "evaluator": {"type": "browser_url", "contains": "index"}}`, testPage, port, port)), "shop.json")
		if err != nil {
			b.Fatal(err)
		}
		return env, tk
	}
	env, tk := desk()
	b.Run("setup", func(b *testing.B) {
		ctx := testrig.Context(b, 10*time.Minute)
		for b.Loop() {
			if err := tk.RunSetup(ctx, env); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			env.CloseLaunched(ctx)
			b.StartTimer()
		}
	})
	ctx := testrig.Context(b, 10*time.Minute)
	if err := tk.RunSetup(ctx, env); err != nil {
		b.Fatal(err)
	}
	// navigate: the active tab to the other page and back, each waited
	// for until loaded (what the MCP server's navigate tool does).
	b.Run("navigate", func(b *testing.B) {
		br := env.Browser()
		u, err := br.URL(ctx)
		if err != nil {
			b.Fatal(err)
		}
		other := strings.Replace(u, "index.html", "other.html", 1)
		for b.Loop() {
			for _, to := range []string{other, u} {
				if err := br.Navigate(ctx, to); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	for _, c := range []struct{ name, check string }{
		{"browser_url", `{"type": "browser_url", "contains": "index"}`},
		{"browser_title", `{"type": "browser_title", "contains": "Shop"}`},
		{"browser_element", `{"type": "browser_element", "selector": "#head", "contains": "Welcome"}`},
		{"browser_download", `{"type": "browser_download", "contains": "none"}`},
	} {
		ck, err := Parse([]byte(`{"id": "b", "instruction": "x", "evaluator": `+c.check+`}`), "b.json")
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := ck.Evaluate(ctx, env); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkBrowserWarm weighs what a Chromium kept warm across episodes
// would save a reset into a browser task (issue 19): "cold" is the browser
// step as it is (a fresh profile, Chromium started on the page, the page
// loaded, its window mapped); "warm-window" opens the same page in a new
// window of a Chromium already running without one (--no-startup-window,
// as a warm browser would wait between episodes), until loaded and mapped,
// and closes the window again untimed. Both run here in one go, on the
// same desktop. Not built into deskenv: docs/BENCHMARKS.md says why.
func BenchmarkBrowserWarm(b *testing.B) {
	_, env := browserDesk(b)
	ctx := testrig.Context(b, 10*time.Minute)
	page := filepath.Join(env.Home(), "page.html")
	if err := env.WriteFile(ctx, page, testPage, 0o644); err != nil {
		b.Fatal(err)
	}
	target := "file://" + page
	b.Run("cold", func(b *testing.B) {
		var ds []time.Duration
		for b.Loop() {
			start := time.Now()
			if err := env.openBrowser(ctx, target); err != nil {
				b.Fatal(err)
			}
			ds = append(ds, time.Since(start))
			b.StopTimer()
			env.CloseLaunched(ctx)
			b.StartTimer()
		}
		reportP50(b, ds)
	})
	b.Run("warm-window", func(b *testing.B) {
		dt := warmBrowser(b, env)
		windows := func() int {
			ws, _ := env.Windows(ctx)
			n := 0
			for _, w := range ws {
				if strings.EqualFold(w.Class, "chromium") {
					n++
				}
			}
			return n
		}
		var ds []time.Duration
		for b.Loop() {
			ictx, cancel := context.WithTimeout(ctx, 20*time.Second)
			start := time.Now()
			var res struct {
				TargetID string `json:"targetId"`
			}
			if err := dt.Conn().Call(ictx, "", "Target.createTarget", map[string]any{"url": target, "newWindow": true}, &res); err != nil {
				b.Fatal(err)
			}
			p, err := dt.Attach(ictx, res.TargetID)
			if err != nil {
				b.Fatal(err)
			}
			if err := p.WaitOpened(ictx); err != nil {
				b.Fatal(err)
			}
			for windows() == 0 {
				if ictx.Err() != nil {
					b.Fatal("no Chromium window was mapped")
				}
				time.Sleep(browserPoll)
			}
			ds = append(ds, time.Since(start))
			b.StopTimer()
			if err := dt.Conn().Call(ictx, "", "Target.closeTarget", map[string]any{"targetId": res.TargetID}, nil); err != nil {
				b.Fatal(err)
			}
			for windows() > 0 {
				if ictx.Err() != nil {
					b.Fatal("the Chromium window stays after its tab was closed")
				}
				time.Sleep(browserPoll)
			}
			cancel()
			b.StartTimer()
		}
		reportP50(b, ds)
	})
}

// warmBrowser starts Chromium as the browser step does (the session's user
// and environment, a fresh profile, the DevTools pipe) but with no window,
// and waits until it answers over DevTools.
func warmBrowser(b *testing.B, env *DisplayEnv) *devtools.Browser {
	ctx := testrig.Context(b, time.Minute)
	profile := filepath.Join(env.Home(), "warm-profile")
	if res, err := env.Run(ctx, `mkdir -p "$HOME/warm-profile"`); err != nil || res.ExitCode != 0 {
		b.Fatalf("make the profile: %v, %+v", err, res)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	args := append([]string{"--user-data-dir=" + profile, "--no-startup-window"}, browserFlags...)
	cmd := exec.Command("chromium", args...)
	cmd.Env, cmd.Dir, cmd.SysProcAttr = env.environ(), env.workDir(), env.sysProcAttr()
	cmd.ExtraFiles = []*os.File{inR, outW}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	inR.Close()
	outW.Close()
	b.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	dt := devtools.Open(outR, inW)
	b.Cleanup(func() { dt.Close() })
	var v map[string]any
	if err := dt.Conn().Call(ctx, "", "Browser.getVersion", nil, &v); err != nil {
		b.Fatalf("the warm browser does not answer: %v", err)
	}
	return dt
}

// reportP50 adds the median of ds to b's output, in milliseconds.
func reportP50(b *testing.B, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2])/float64(time.Millisecond), "p50-ms")
}
