package hci

import (
	"context"
	"testing"
	"time"

	"github.com/deskenv/deskenv/internal/xprobe"
)

// TestTypeDoubledLetters: a key typed twice in a row is pressed again at a
// later server time than its release, so applications that tell autorepeat
// from typing by equal times (LibreOffice's VCL does) keep both letters:
// "ee", "11", "pp", a run of three, two Returns. (Without the gap the
// presses came at their releases' time in most runs.)
func TestTypeDoubledLetters(t *testing.T) {
	v := newEnv(t, 640, 480, "off")
	for _, text := range []string{"Meeting 11 apples", "zzz", "a\n\nb"} {
		v.take(t)
		if _, err := v.e.Do(context.Background(), Action{Action: "type", Text: text}, SourceAgent); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := v.p.Sync(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		evs, times := v.p.TakeTimed()
		if got, want := pressedSyms(format(evs)), wantSyms(text); len(got) != len(want) {
			t.Fatalf("typed %q: pressed %q, want %q", text, got, want)
		}
		again := 0
		released := map[byte]int{} // keycode -> index of its last release
		for i, e := range evs {
			switch e.Kind {
			case xprobe.KeyRelease:
				released[e.Keycode] = i
			case xprobe.KeyPress:
				r, ok := released[e.Keycode]
				if !ok || r != lastKeyEvent(evs, i) {
					continue // not right after its own release
				}
				again++
				if times[i] <= times[r] {
					t.Errorf("typed %q: %s at server time %d, the same as its release: it reads as autorepeat", text, e, times[i])
				}
			}
		}
		if again == 0 {
			t.Errorf("typed %q: no key pressed right after its own release: the test saw nothing to check", text)
		}
	}
}

// lastKeyEvent is the index of the key event before i (-1 if none).
func lastKeyEvent(evs []xprobe.Event, i int) int {
	for j := i - 1; j >= 0; j-- {
		if evs[j].Kind == xprobe.KeyPress || evs[j].Kind == xprobe.KeyRelease {
			return j
		}
	}
	return -1
}
