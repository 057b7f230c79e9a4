package browser_test

import (
	"context"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deskenv/deskenv/e2e/browser"
	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/internal/xprobe"
)

// The browser client end to end: a real Xvfb, the stream and the page in
// Debian's headless Chromium; what the person does in the page must reach the
// probe window on the X display as the right events at the right places.
func TestBrowserEndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	st := startStack(ctx, t)
	d := startDriver(ctx, t)

	// Clipboard permissions, as a person who allowed them: the page mirrors
	// the desktop's clipboard into the local one.
	do(ctx, t, d, "open", map[string]any{"page": "a", "url": st.url(tokenOperator), "permissions": []string{"clipboard-read", "clipboard-write"}}, nil)
	waitFor(ctx, t, d, "a", `deskenv.state === 'connected'`, "the page never connected")

	t.Run("video plays", func(t *testing.T) {
		waitFor(ctx, t, d, "a", `deskenv.video.videoWidth > 0`, "no video frame arrived")
		f0 := framesDecoded(ctx, t, d, "a")
		// Change the screen so new frames must follow.
		for i := 0; i < 5; i++ {
			st.probe.Fill(0, 0, 200, 200, uint32(0x203040+i*0x101010))
			time.Sleep(50 * time.Millisecond)
		}
		waitFor(ctx, t, d, "a", fmt.Sprintf(`deskenv.stats().then(s => s.framesDecoded > %d)`, f0), "framesDecoded did not grow")
		var s struct {
			Codec         string
			Width, Height int
		}
		do(ctx, t, d, "eval", map[string]any{"page": "a", "expr": `deskenv.stats()`}, &s)
		if !strings.EqualFold(s.Codec, "video/H264") {
			t.Errorf("codec %q, want video/H264", s.Codec)
		}
	})

	takeControl(ctx, t, d, "a")

	t.Run("click reaches the probe", func(t *testing.T) {
		tests := []struct {
			name   string
			x, y   int
			button string
			want   byte
		}{
			{"left", 200, 150, "left", 1},
			{"right near the corner", 1270, 790, "right", 3},
			{"middle", 640, 400, "middle", 2},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				st.probe.Take()
				do(ctx, t, d, "click", map[string]any{"page": "a", "vx": tc.x, "vy": tc.y, "button": tc.button}, nil)
				evs := waitEvents(ctx, t, st.probe, func(evs []xprobe.Event) bool {
					return count(evs, xprobe.ButtonRelease) > 0
				})
				var press, release *xprobe.Event
				for i := range evs {
					switch evs[i].Kind {
					case xprobe.ButtonPress:
						press = &evs[i]
					case xprobe.ButtonRelease:
						release = &evs[i]
					}
				}
				if press == nil || release == nil {
					t.Fatalf("want a press and a release, got %v", evs)
				}
				if press.Button != tc.want || release.Button != tc.want {
					t.Errorf("button %d/%d, want %d", press.Button, release.Button, tc.want)
				}
				sx, sy := st.toScreen(tc.x, tc.y)
				if abs(press.X-sx) > 1 || abs(press.Y-sy) > 1 {
					t.Errorf("pressed at %d,%d on the screen, want %d,%d (video %d,%d)", press.X, press.Y, sx, sy, tc.x, tc.y)
				}
			})
		}
	})

	t.Run("wheel reaches the probe", func(t *testing.T) {
		tests := []struct {
			name string
			dy   int
			want byte
		}{{"down", 100, 5}, {"up", -100, 4}}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				do(ctx, t, d, "move", map[string]any{"page": "a", "vx": 300, "vy": 300}, nil)
				st.probe.Take()
				do(ctx, t, d, "wheel", map[string]any{"page": "a", "dy": tc.dy}, nil)
				evs := waitEvents(ctx, t, st.probe, func(evs []xprobe.Event) bool { return count(evs, xprobe.ButtonRelease) > 0 })
				for _, e := range evs {
					if e.Kind == xprobe.ButtonPress && e.Button != tc.want {
						t.Errorf("wheel %d pressed button %d, want %d", tc.dy, e.Button, tc.want)
					}
				}
			})
		}
	})

	t.Run("typed text reaches the probe", func(t *testing.T) {
		tests := []struct{ name, text string }{
			{"letters and punctuation", "Hello, world!"},
			{"digits and symbols", "x=1+2; y<3"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				st.probe.Take()
				do(ctx, t, d, "focus", map[string]any{"page": "a", "selector": "#stage"}, nil)
				do(ctx, t, d, "type", map[string]any{"page": "a", "text": tc.text}, nil)
				n := len([]rune(tc.text))
				evs := waitEvents(ctx, t, st.probe, func(evs []xprobe.Event) bool { return len(typed(evs)) >= n && count(evs, xprobe.KeyRelease) >= n })
				if got := typed(evs); got != tc.text {
					t.Errorf("probe received %q, want %q (events %v)", got, tc.text, evs)
				}
			})
		}
	})

	t.Run("key chords reach the probe", func(t *testing.T) {
		tests := []struct {
			name, chord string
			mods        []uint32
			key         uint32
		}{
			{"ctrl+a", "Control+a", []uint32{0xffe3}, 'a'},
			{"Return", "Enter", nil, 0xff0d},
			{"Escape", "Escape", nil, 0xff1b},
			{"shift+Tab", "Shift+Tab", []uint32{0xffe1}, 0},
			{"F5 does not reload the page", "F5", nil, 0xffc2},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				st.probe.Take()
				do(ctx, t, d, "press", map[string]any{"page": "a", "key": tc.chord}, nil)
				evs := waitEvents(ctx, t, st.probe, func(evs []xprobe.Event) bool {
					return count(evs, xprobe.KeyRelease) >= 1+len(tc.mods)
				})
				var pressed []uint32
				for _, e := range evs {
					if e.Kind == xprobe.KeyPress {
						pressed = append(pressed, e.Keysym)
					}
				}
				if len(pressed) != 1+len(tc.mods) {
					t.Fatalf("pressed %x, want %x then one key", pressed, tc.mods)
				}
				for i, m := range tc.mods {
					if pressed[i] != m {
						t.Errorf("press %d: keysym 0x%x, want modifier 0x%x", i, pressed[i], m)
					}
				}
				if last := pressed[len(pressed)-1]; tc.key != 0 && last != tc.key {
					t.Errorf("key 0x%x, want 0x%x", last, tc.key)
				}
			})
		}
		// The page must still be there after F5 and ctrl+w-like chords.
		waitFor(ctx, t, d, "a", `deskenv.state === 'connected'`, "the page lost its connection after the chords")
	})

	t.Run("clipboard both ways", func(t *testing.T) {
		testrig.NeedTools(t, "xclip")
		// Page to desktop: ctrl+v in the page sets the desktop clipboard first.
		want := "from the page: grüße ✓"
		do(ctx, t, d, "eval", map[string]any{"page": "a", "arg": want, "expr": `(s) => navigator.clipboard.writeText(s).then(() => true)`}, nil)
		do(ctx, t, d, "focus", map[string]any{"page": "a", "selector": "#stage"}, nil)
		st.probe.Take()
		do(ctx, t, d, "press", map[string]any{"page": "a", "key": "Control+v"}, nil)
		evs := waitEvents(ctx, t, st.probe, func(evs []xprobe.Event) bool { return count(evs, xprobe.KeyRelease) >= 2 })
		if got := typed(evs); got != "v" {
			t.Errorf("ctrl+v reached the desktop as %q (%v), want the v of the chord", got, evs)
		}
		got, err := readClipboard(ctx, st.d.Name(), want)
		if err != nil || got != want {
			t.Errorf("desktop clipboard %q (%v), want %q", got, err, want)
		}

		// Desktop to page.
		want = "from the desktop 42"
		owner := osexec.CommandContext(ctx, "xclip", "-selection", "clipboard", "-quiet", "-loops", "10")
		owner.Env = append(os.Environ(), "DISPLAY="+st.d.Name())
		owner.Stdin = strings.NewReader(want)
		if err := owner.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { owner.Process.Kill(); owner.Wait() }()
		waitFor(ctx, t, d, "a", fmt.Sprintf(`document.getElementById('clip-from').value === %q`, want), "the desktop's clipboard did not reach the page")
		var local string
		do(ctx, t, d, "eval", map[string]any{"page": "a", "expr": `navigator.clipboard.readText()`}, &local)
		if local != want {
			t.Errorf("the page's clipboard holds %q, want %q", local, want)
		}
	})

	t.Run("a second viewer without control cannot act", func(t *testing.T) {
		open(ctx, t, d, "b", st.url(tokenViewer))
		waitFor(ctx, t, d, "b", `deskenv.state === 'connected' && deskenv.video.videoWidth > 0 && deskenv.control != null`, "the second viewer never connected")
		var holder string
		do(ctx, t, d, "eval", map[string]any{"page": "b", "expr": `deskenv.control.holder === deskenv.you ? 'self' : String(deskenv.control.holder)`}, &holder)
		if holder == "self" || holder == "null" {
			t.Fatalf("the second viewer sees holder %q; the first viewer should hold control", holder)
		}
		var label string
		do(ctx, t, d, "eval", map[string]any{"page": "b", "expr": `document.getElementById('control').textContent`}, &label)
		if !strings.Contains(label, "has control") {
			t.Errorf("control button of the second viewer reads %q, want it to say who has control", label)
		}
		st.probe.Take()
		// Through the page: clicks and keys are not even sent.
		do(ctx, t, d, "click", map[string]any{"page": "b", "vx": 500, "vy": 500}, nil)
		do(ctx, t, d, "type", map[string]any{"page": "b", "text": "no"}, nil)
		// Straight onto the data channel: the server must refuse.
		var sent bool
		do(ctx, t, d, "eval", map[string]any{"page": "b", "expr": `(() => {
			const s = deskenv.session;
			return s.sendInput({t:'mm',x:700,y:600}) && s.sendInput({t:'bd',b:1}) && s.sendInput({t:'bu',b:1}) &&
				s.sendInput({t:'kd',k:0x71}) && s.sendInput({t:'ku',k:0x71});
		})()`}, &sent)
		if !sent {
			t.Fatal("the second viewer's input channel is not open")
		}
		// Let anything that was going to arrive arrive; the first viewer's
		// input is the marker that the server processed input after it.
		time.Sleep(300 * time.Millisecond)
		if err := st.probe.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		for _, e := range st.probe.Take() {
			t.Errorf("an input of the viewer without control reached the desktop: %v", e)
		}

		// The operator gives control to the second viewer from the viewers panel.
		var bid string
		do(ctx, t, d, "eval", map[string]any{"page": "b", "expr": `deskenv.you`}, &bid)
		var clicked bool
		do(ctx, t, d, "eval", map[string]any{"page": "a", "arg": bid, "expr": `(id) => {
			document.getElementById('viewers-btn').click();
			const li = [...document.querySelectorAll('#viewers li')].find((li) => li.querySelector('.who').textContent === id);
			const b = li && li.querySelector('button');
			if (!b) return false;
			b.click();
			return true;
		}`}, &clicked)
		if !clicked {
			t.Fatalf("the operator's viewers panel has no 'give control' button for %s", bid)
		}
		waitFor(ctx, t, d, "b", `deskenv.canAct`, "the second viewer did not get control from the operator")
		st.probe.Take()
		do(ctx, t, d, "click", map[string]any{"page": "b", "vx": 50, "vy": 60}, nil)
		evs := waitEvents(ctx, t, st.probe, func(evs []xprobe.Event) bool { return count(evs, xprobe.ButtonRelease) > 0 })
		if count(evs, xprobe.ButtonPress) != 1 {
			t.Fatalf("after the grant, the second viewer's click gave %v", evs)
		}
		waitFor(ctx, t, d, "a", `!deskenv.canAct`, "the operator's page still thinks it has control")
		do(ctx, t, d, "eval", map[string]any{"page": "a", "expr": `document.getElementById('revoke').click(), true`}, nil)
		waitFor(ctx, t, d, "b", `!deskenv.canAct && deskenv.control.holder === null`, "revoke did not take control away")
		do(ctx, t, d, "close", map[string]any{"page": "b"}, nil)
		takeControl(ctx, t, d, "a")
	})

	t.Run("a view-only link watches and cannot act", func(t *testing.T) {
		open(ctx, t, d, "c", st.url(tokenViewOnly))
		defer do(ctx, t, d, "close", map[string]any{"page": "c"}, nil)
		waitFor(ctx, t, d, "c", `deskenv.state === 'connected' && deskenv.video.videoWidth > 0 && deskenv.session.inputOpen`, "the view-only viewer never connected")
		var ui struct {
			Badge, Disabled bool
			Policy          bool
		}
		do(ctx, t, d, "eval", map[string]any{"page": "c", "expr": `({Badge: !document.getElementById('viewonly').hidden,
			Disabled: document.getElementById('control').disabled, Policy: !document.getElementById('policy').disabled})`}, &ui)
		if !ui.Badge || !ui.Disabled || ui.Policy {
			t.Errorf("view-only page: badge shown %v (want true), control button disabled %v (want true), policy editable %v (want false)", ui.Badge, ui.Disabled, ui.Policy)
		}
		st.probe.Take()
		do(ctx, t, d, "eval", map[string]any{"page": "c", "expr": `deskenv.session.sendInput({t:'bd',b:1}) && deskenv.session.sendInput({t:'bu',b:1})`}, nil)
		time.Sleep(300 * time.Millisecond)
		if err := st.probe.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		for _, e := range st.probe.Take() {
			t.Errorf("an input of the view-only viewer reached the desktop: %v", e)
		}
	})

	t.Run("reconnects after the signalling drops", func(t *testing.T) {
		do(ctx, t, d, "eval", map[string]any{"page": "a", "expr": `deskenv.session.ws.close(), true`}, nil)
		waitFor(ctx, t, d, "a", `deskenv.state !== 'connected'`, "the page did not notice the drop")
		waitFor(ctx, t, d, "a", `deskenv.state === 'connected' && deskenv.video.videoWidth > 0`, "the page did not reconnect")
		f0 := framesDecoded(ctx, t, d, "a")
		st.probe.Fill(0, 0, 300, 300, 0x336699)
		waitFor(ctx, t, d, "a", fmt.Sprintf(`deskenv.stats().then(s => s.framesDecoded > %d)`, f0), "no frames after reconnecting")
	})
}

func takeControl(ctx context.Context, t *testing.T, d *browser.Driver, page string) {
	t.Helper()
	var can bool
	do(ctx, t, d, "eval", map[string]any{"page": page, "expr": `deskenv.canAct`}, &can)
	if !can {
		do(ctx, t, d, "eval", map[string]any{"page": page, "expr": `document.getElementById('control').click(), true`}, nil)
	}
	waitFor(ctx, t, d, page, `deskenv.canAct`, "the viewer could not take control")
}

func do(ctx context.Context, t *testing.T, d *browser.Driver, cmd string, args map[string]any, out any) {
	t.Helper()
	if err := d.Do(ctx, cmd, args, out); err != nil {
		t.Fatal(err)
	}
}

func waitFor(ctx context.Context, t *testing.T, d *browser.Driver, page, expr, what string) {
	t.Helper()
	if err := d.Do(ctx, "waitFor", map[string]any{"page": page, "expr": expr, "timeoutMs": 15000, "pollMs": 50}, nil); err != nil {
		var state string
		d.Do(ctx, "eval", map[string]any{"page": page, "expr": `JSON.stringify({state: window.deskenv?.state, reason: window.deskenv?.session.lastReason, control: window.deskenv?.control})`}, &state)
		shot := filepath.Join(os.TempDir(), fmt.Sprintf("deskenv-e2e-%s-%s.png", strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()), page))
		if d.Do(ctx, "screenshot", map[string]any{"page": page, "path": shot}, nil) != nil {
			shot = "none"
		}
		t.Fatalf("%s: %v (page: %s; screenshot: %s)", what, err, state, shot)
	}
}

func framesDecoded(ctx context.Context, t *testing.T, d *browser.Driver, page string) int {
	t.Helper()
	var s struct{ FramesDecoded int }
	do(ctx, t, d, "eval", map[string]any{"page": page, "expr": `deskenv.stats()`}, &s)
	return s.FramesDecoded
}

// waitEvents syncs with the probe until done says the events are complete, or
// five seconds pass.
func waitEvents(ctx context.Context, t *testing.T, p *xprobe.Probe, done func([]xprobe.Event) bool) []xprobe.Event {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if err := p.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		evs := p.Events()
		if done(evs) || time.Now().After(deadline) {
			return evs
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func count(evs []xprobe.Event, k xprobe.Kind) int {
	n := 0
	for _, e := range evs {
		if e.Kind == k {
			n++
		}
	}
	return n
}

// typed is the text the key presses spell, modifiers left out.
func typed(evs []xprobe.Event) string {
	var b strings.Builder
	for _, e := range evs {
		if e.Kind != xprobe.KeyPress {
			continue
		}
		if e.Keysym >= 0x20 && e.Keysym <= 0x7e || e.Keysym >= 0xa0 && e.Keysym <= 0xff {
			b.WriteRune(rune(e.Keysym))
		} else if e.Keysym>>24 == 1 {
			b.WriteRune(rune(e.Keysym & 0xffffff))
		}
	}
	return b.String()
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// readClipboard reads the desktop's CLIPBOARD with xclip until it holds want
// or five seconds pass, and returns the last text read.
func readClipboard(ctx context.Context, display, want string) (string, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		ctx1, cancel := context.WithTimeout(ctx, 2*time.Second)
		cmd := osexec.CommandContext(ctx1, "xclip", "-selection", "clipboard", "-o")
		cmd.Env = append(os.Environ(), "DISPLAY="+display)
		out, err := cmd.Output()
		cancel()
		if string(out) == want || time.Now().After(deadline) {
			return string(out), err
		}
		time.Sleep(50 * time.Millisecond)
	}
}
