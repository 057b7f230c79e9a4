package task

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deskenv/deskenv/internal/testrig"
)

// go test ./task/ -run '^$' -bench . -benchtime=200x

func BenchmarkLoadExamples(b *testing.B) {
	for b.Loop() {
		if _, err := Load("../tasks"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWindows lists the windows of a desktop with openbox and two
// xterms, beside xdotool's search for a title, the usual tool.
func BenchmarkWindows(b *testing.B) {
	k := startDesk(b, true)
	k.launchXterm(b, "bench one")
	k.launchXterm(b, "bench two")
	ctx := context.Background()
	b.Run("deskenv", func(b *testing.B) {
		for b.Loop() {
			ws, err := k.env.Windows(ctx)
			if err != nil || len(ws) != 2 {
				b.Fatal(ws, err)
			}
		}
	})
	b.Run("xdotool-search", func(b *testing.B) {
		for b.Loop() {
			cmd := exec.Command("xdotool", "search", "--name", "bench two")
			cmd.Env = append(os.Environ(), "DISPLAY="+k.d.Name())
			if out, err := cmd.Output(); err != nil || len(out) == 0 {
				b.Fatal(string(out), err)
			}
		}
	})
}

// BenchmarkSelection reads a short clipboard text owned by xclip, beside
// `xclip -o`.
func BenchmarkSelection(b *testing.B) {
	k := startDesk(b, false)
	src := filepath.Join(k.home, "clip")
	os.WriteFile(src, []byte("benchmark text"), 0o644)
	ctx := context.Background()
	if _, err := k.env.Launch(ctx, []string{"xclip", "-quiet", "-selection", "clipboard", "-i", src}); err != nil {
		b.Fatal(err)
	}
	testrig.WaitState(b, 10*time.Second, "xclip to own the clipboard", func() (bool, string) {
		s, err := k.env.Selection(ctx, "CLIPBOARD")
		return err == nil && s == "benchmark text", s
	})
	b.Run("deskenv", func(b *testing.B) {
		for b.Loop() {
			if s, err := k.env.Selection(ctx, "CLIPBOARD"); err != nil || s != "benchmark text" {
				b.Fatal(s, err)
			}
		}
	})
	b.Run("xclip-o", func(b *testing.B) {
		for b.Loop() {
			cmd := exec.Command("xclip", "-o", "-selection", "clipboard")
			cmd.Env = append(os.Environ(), "DISPLAY="+k.d.Name())
			if out, err := cmd.Output(); err != nil || !strings.Contains(string(out), "benchmark") {
				b.Fatal(string(out), err)
			}
		}
	})
}

// BenchmarkEvaluateFiles evaluates an "and" of three file checks.
func BenchmarkEvaluateFiles(b *testing.B) {
	env := NewEnv(nil, b.TempDir(), nil)
	os.WriteFile(filepath.Join(env.Home(), "notes.txt"), []byte(strings.Repeat("some line of notes\n", 500)+"the end\n"), 0o644)
	tk := parseTask(b, `"evaluator": {"type": "and", "checks": [
		{"type": "file_exists", "path": "~/notes.txt"},
		{"type": "file_contains", "path": "~/notes.txt", "contains": "the end"},
		{"type": "file_matches", "path": "~/notes.txt", "matches": "(?m)^the end$"}]}`)
	ctx := context.Background()
	for b.Loop() {
		if out, err := tk.Evaluate(ctx, env); err != nil || !out.Success {
			b.Fatal(out, err)
		}
	}
}

// BenchmarkScreenshotGetImage is the fallback capture screen_region uses when
// no screenshot function is given (a full 1280x800 GetImage and conversion).
func BenchmarkScreenshotGetImage(b *testing.B) {
	k := startDesk(b, false)
	ctx := context.Background()
	for b.Loop() {
		if _, err := k.env.Screenshot(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
