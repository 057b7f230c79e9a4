package task

import (
	"fmt"
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
