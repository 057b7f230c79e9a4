package task

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/deskenv/deskenv/internal/testrig"
)

// BenchmarkBrowser times the browser step (Chromium started on a served
// page: fresh profile, load, window mapped) and one evaluation of each
// browser check against it, as the user nobody. docs/BENCHMARKS.md has the
// figures.
func BenchmarkBrowser(b *testing.B) {
	desk := func() (*DisplayEnv, *Task) {
		_, env := browserDesk(b)
		port := freePort(b)
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
