package hci

import (
	"context"
	"os/exec"
	"strconv"
	"testing"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/internal/testrig"
)

// benchEnv is a display and an executor, without a probe: both sides of each
// benchmark inject into the same bare Xvfb.
func benchEnv(b *testing.B) (*display.Display, *Executor) {
	b.Helper()
	testrig.NeedTools(b, "xdotool") // for the comparison
	d := testrig.Display(b, display.Config{})
	e, err := NewExecutor(d, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close() })
	return d, e
}

func xdotool(b *testing.B, d *display.Display, args ...string) {
	cmd := exec.Command("xdotool", args...)
	cmd.Env = d.Env()
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("xdotool %v: %v: %s", args, err, out)
	}
}

// BenchmarkClick: a left_click at a coordinate through Do (validation, motion,
// press, release, one round trip) against `xdotool mousemove x y click 1`.
func BenchmarkClick(b *testing.B) {
	d, e := benchEnv(b)
	ctx := context.Background()
	b.Run("deskenv", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			a := Action{Action: ActLeftClick, Coordinate: []int{100 + i%500, 100 + i%300}}
			if _, err := e.Do(ctx, a, SourceAgent); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("xdotool", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			xdotool(b, d, "mousemove", strconv.Itoa(100+i%500), strconv.Itoa(100+i%300), "click", "1")
		}
	})
}

const (
	text50 = "The quick brown fox jumps over the lazy dog, 12345"
	// 12 distinct characters missing from the US layout: they fit in the
	// spare keycodes, so after the first run no mapping changes.
	unicode50 = "héllo wörld, ça va? € 日本 — “ok” ½ ß à la carte!!!!"
	// 24 distinct missing characters, more than Xvfb's 19 spare keycodes:
	// every run rebinds, paying SpareReuseAge and BindSettle (the cost of
	// typing it correctly; see the Options).
	rotating50 = "héllo wörld ünïcödé ñ ç € 日本 — “ok” ½ ÅÆØ ß àèìòù"
)

// BenchmarkType50: typing 50 characters through Do against `xdotool type
// --delay 0` (Anthropic's demo uses --delay 12, i.e. at least 600 ms for 50).
func BenchmarkType50(b *testing.B) {
	d, e := benchEnv(b)
	ctx := context.Background()
	for _, tc := range []struct{ name, text string }{{"ascii", text50}, {"unicode", unicode50}, {"unicode-rotating", rotating50}} {
		b.Run(tc.name+"/deskenv", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := e.Do(ctx, Action{Action: ActType, Text: tc.text}, SourceAgent); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tc.name+"/xdotool", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				xdotool(b, d, "type", "--delay", "0", "--", tc.text)
			}
		})
	}
}

// BenchmarkKeyChord: ctrl+shift+t through Do against `xdotool key`.
func BenchmarkKeyChord(b *testing.B) {
	d, e := benchEnv(b)
	ctx := context.Background()
	b.Run("deskenv", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := e.Do(ctx, Action{Action: ActKey, Text: "ctrl+shift+t"}, SourceAgent); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("xdotool", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			xdotool(b, d, "key", "ctrl+shift+t")
		}
	})
}

// BenchmarkPrimitive: one person's key press (KeyDown + KeyUp), the stream's
// hot path.
func BenchmarkPrimitive(b *testing.B) {
	_, e := benchEnv(b)
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		if err := e.KeyDown(ctx, 'a', SourceHuman); err != nil {
			b.Fatal(err)
		}
		if err := e.KeyUp(ctx, 'a', SourceHuman); err != nil {
			b.Fatal(err)
		}
	}
}
