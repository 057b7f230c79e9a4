package stream

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/internal/xprobe"
	"github.com/deskenv/deskenv/internal/xsel"
)

// drain forgets bus events published so far.
func drain(ch <-chan hci.Event) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// waitBus waits until n input events from people were executed.
func waitBus(t *testing.T, ch <-chan hci.Event, n int) []hci.Event {
	t.Helper()
	var got []hci.Event
	deadline := time.After(5 * time.Second)
	for len(got) < n {
		select {
		case ev := <-ch:
			if ev.Source == hci.SourceHuman && ev.Kind == hci.KindInput {
				got = append(got, ev)
			}
		case <-deadline:
			t.Fatalf("only %d of %d inputs executed: %+v", len(got), n, got)
		}
	}
	return got
}

func TestInput(t *testing.T) {
	// The video is half the screen's size, so every coordinate is converted.
	e := newEnv(t, envOptions{width: 1280, height: 800, cfg: Config{VideoWidth: 640, VideoHeight: 400}})
	p := e.probe(t)
	bus, unsub := e.exec.Bus().Subscribe(0)
	defer unsub()

	a := join(t, e, clientOptions{})
	defer a.close()
	a.waitOpen(10 * time.Second)
	a.send(map[string]any{"type": "control", "op": "request"})
	a.waitState(5*time.Second, func(cs ControlState) bool { return cs.Holder != nil && *cs.Holder == a.hello.ID })

	ctx := context.Background()
	type ev struct {
		kind   xprobe.Kind
		x, y   int
		button byte
		keysym uint32
	}
	tests := []struct {
		name  string
		in    []map[string]any
		execs int // inputs executed
		want  []ev
	}{
		{name: "motion", in: []map[string]any{{"t": "mm", "x": 100, "y": 50}}, execs: 1,
			want: []ev{{kind: xprobe.Motion, x: 201, y: 101}}},
		{name: "corner", in: []map[string]any{{"t": "mm", "x": 639, "y": 399}}, execs: 1,
			want: []ev{{kind: xprobe.Motion, x: 1279, y: 799}}},
		{name: "origin", in: []map[string]any{{"t": "mm", "x": 0, "y": 0}}, execs: 1,
			want: []ev{{kind: xprobe.Motion, x: 1, y: 1}}},
		{name: "click", in: []map[string]any{{"t": "mm", "x": 320, "y": 200}, {"t": "bd", "b": 1}, {"t": "bu", "b": 1}}, execs: 3,
			want: []ev{{kind: xprobe.Motion, x: 641, y: 401}, {kind: xprobe.ButtonPress, button: 1, x: 641, y: 401}, {kind: xprobe.ButtonRelease, button: 1, x: 641, y: 401}}},
		{name: "right click", in: []map[string]any{{"t": "bd", "b": 3}, {"t": "bu", "b": 3}}, execs: 2,
			want: []ev{{kind: xprobe.ButtonPress, button: 3, x: 641, y: 401}, {kind: xprobe.ButtonRelease, button: 3, x: 641, y: 401}}},
		{name: "key", in: []map[string]any{{"t": "kd", "k": 0x61}, {"t": "ku", "k": 0x61}}, execs: 2,
			want: []ev{{kind: xprobe.KeyPress, keysym: 0x61}, {kind: xprobe.KeyRelease, keysym: 0x61}}},
		{name: "shifted key", in: []map[string]any{{"t": "kd", "k": 0xffe1}, {"t": "kd", "k": 0x41}, {"t": "ku", "k": 0x41}, {"t": "ku", "k": 0xffe1}}, execs: 4,
			want: []ev{{kind: xprobe.KeyPress, keysym: 0xffe1}, {kind: xprobe.KeyPress, keysym: 0x41}, {kind: xprobe.KeyRelease, keysym: 0x41}, {kind: xprobe.KeyRelease, keysym: 0xffe1}}},
		{name: "wheel", in: []map[string]any{{"t": "wh", "dy": 2}}, execs: 1,
			want: []ev{{kind: xprobe.ButtonPress, button: 5}, {kind: xprobe.ButtonRelease, button: 5}, {kind: xprobe.ButtonPress, button: 5}, {kind: xprobe.ButtonRelease, button: 5}}},
		{name: "release all", in: []map[string]any{{"t": "kd", "k": 0xffe3}, {"t": "bd", "b": 1}, {"t": "release"}}, execs: 4,
			want: []ev{{kind: xprobe.KeyPress, keysym: 0xffe3}, {kind: xprobe.ButtonPress, button: 1}, {kind: xprobe.ButtonRelease, button: 1}, {kind: xprobe.KeyRelease, keysym: 0xffe3}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p.Reset()
			drain(bus)
			for _, m := range tt.in {
				a.input(m)
			}
			waitBus(t, bus, tt.execs)
			if err := p.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			got := p.Take()
			if len(got) != len(tt.want) {
				t.Fatalf("probe got %v, want %d events", got, len(tt.want))
			}
			for i, w := range tt.want {
				g := got[i]
				ok := g.Kind == w.kind
				switch w.kind {
				case xprobe.Motion:
					ok = ok && g.X == w.x && g.Y == w.y
				case xprobe.ButtonPress, xprobe.ButtonRelease:
					ok = ok && g.Button == w.button && (w.x == 0 || g.X == w.x && g.Y == w.y)
				case xprobe.KeyPress, xprobe.KeyRelease:
					ok = ok && g.Keysym == w.keysym
				}
				if !ok {
					t.Errorf("event %d = %v, want %+v", i, g, w)
				}
			}
		})
	}

	t.Run("second viewer cannot act", func(t *testing.T) {
		b := join(t, e, clientOptions{})
		defer b.close()
		b.waitOpen(10 * time.Second)
		p.Reset()
		drain(bus)
		for _, m := range []map[string]any{{"t": "mm", "x": 5, "y": 5}, {"t": "bd", "b": 1}, {"t": "kd", "k": 0x62}, {"t": "wh", "dy": 1}} {
			b.input(m)
			if msg := b.waitInputErr(5 * time.Second); !strings.Contains(msg, "you do not have control: "+a.hello.ID+" has it") {
				t.Errorf("%v: error %q", m, msg)
			}
		}
		// Letting go is quietly ignored, and must not release a's keys.
		a.input(map[string]any{"t": "kd", "k": 0xffe1})
		waitBus(t, bus, 1)
		b.input(map[string]any{"t": "ku", "k": 0xffe1})
		b.input(map[string]any{"t": "release"})
		// An input of a's after b's proves b's were handled first.
		a.input(map[string]any{"t": "mm", "x": 7, "y": 7})
		waitBus(t, bus, 1)
		if err := p.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		got := p.Take()
		if len(got) != 2 || got[0].Kind != xprobe.KeyPress || got[1].Kind != xprobe.Motion || got[1].X != 15 {
			t.Fatalf("probe got %v, want only a's shift press and motion", got)
		}
		if keys, _ := e.exec.Held(); len(keys) != 1 {
			t.Fatalf("held keys %v, want a's shift", keys)
		}
	})

	t.Run("keys released when control passes", func(t *testing.T) {
		p.Reset()
		// a still holds shift from the previous step.
		if err := e.s.Revoke(); err == "" {
			t.Fatal("Revoke found no holder")
		}
		if err := p.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		got := p.Take()
		if len(got) != 1 || got[0].Kind != xprobe.KeyRelease || got[0].Keysym != 0xffe1 {
			t.Fatalf("probe got %v, want shift released", got)
		}
	})

	t.Run("keys released when the holder leaves", func(t *testing.T) {
		c := join(t, e, clientOptions{})
		c.waitOpen(10 * time.Second)
		if err := e.s.Grant(c.hello.ID); err != nil {
			t.Fatal(err)
		}
		drain(bus)
		c.input(map[string]any{"t": "kd", "k": 0xffe9})
		c.input(map[string]any{"t": "bd", "b": 2})
		waitBus(t, bus, 2)
		if err := p.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		p.Reset()
		c.close()
		testrig.WaitState(t, 5*time.Second, "the viewer's keys and buttons to be released after it left", func() (bool, string) {
			keys, buttons := e.exec.Held()
			return len(keys) == 0 && len(buttons) == 0, fmt.Sprintf("keys %v buttons %v", keys, buttons)
		})
		if err := p.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if got := p.Take(); len(got) != 2 {
			t.Fatalf("probe got %v, want the button and key released", got)
		}
	})
}

// TestBadInput sends garbage on the data channel: every message gets an error
// and nothing reaches the desktop.
func TestBadInput(t *testing.T) {
	e := newEnv(t, envOptions{})
	p := e.probe(t)
	a := join(t, e, clientOptions{})
	defer a.close()
	a.waitOpen(10 * time.Second)
	e.s.Grant(a.hello.ID)
	msgs := []struct {
		raw    string
		binary bool
		err    string
	}{
		{raw: "garbage\x00\xff", err: "not JSON"},
		{raw: `{"t":"kd","k":"Return"}`, err: "expected shape"},
		{raw: `{"t":"fly"}`, err: `unknown input type "fly"`},
		{raw: `{"t":"mm","x":5000,"y":1}`, err: "outside the 1280x800 video"},
		{raw: `{"t":"bd","b":0}`, err: `"b" is 0`},
		{raw: `{"t":"clip","text":"` + strings.Repeat("y", 70000) + `"}`, err: "too large"},
		{raw: "\x01\x02\x03", binary: true, err: "binary"},
	}
	for _, m := range badDataChannel {
		msgs = append(msgs, struct {
			raw    string
			binary bool
			err    string
		}{raw: m.raw, err: m.err})
	}
	for _, m := range msgs {
		var err error
		if m.binary {
			err = a.dc.Send([]byte(m.raw))
		} else {
			err = a.dc.SendText(m.raw)
		}
		if err != nil {
			t.Fatalf("send: %v", err)
		}
		if got := a.waitInputErr(5 * time.Second); !strings.Contains(got, m.err) {
			t.Errorf("%.40q: error %q, want %q", m.raw, got, m.err)
		}
	}
	if err := p.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := p.Take(); len(got) != 0 {
		t.Errorf("bad input reached the desktop: %v", got)
	}
	// No refused clip set the clipboard.
	if got, err := xsel.Read(context.Background(), e.d.Name(), "CLIPBOARD", 1<<10); err != nil || got != "" {
		t.Errorf("the clipboard holds %q (%v) after refused clips", got, err)
	}
	// Still alive and usable.
	a.input(map[string]any{"t": "mm", "x": 3, "y": 4})
	testrig.WaitWithin(t, 5*time.Second, "the motion after bad input to reach the probe", func() bool {
		p.Sync(context.Background())
		return len(p.Events()) > 0
	})
	if got := p.Take(); len(got) != 1 || got[0].X != 3 || got[0].Y != 4 {
		t.Errorf("after bad input, motion gave %v", got)
	}
}

// TestClipboard sets the desktop clipboard from a viewer and reads it with
// xclip, then sets it with xclip and sees it reach the viewers.
func TestClipboard(t *testing.T) {
	testrig.NeedTools(t, "xclip")
	e := newEnv(t, envOptions{})
	a := join(t, e, clientOptions{})
	defer a.close()
	b := join(t, e, clientOptions{})
	defer b.close()
	w := join(t, e, clientOptions{token: "watch"})
	defer w.close()
	for _, c := range []*client{a, b, w} {
		c.waitOpen(10 * time.Second)
	}
	xclip := func(args ...string) *exec.Cmd {
		cmd := exec.Command("xclip", args...)
		cmd.Env = e.d.Env()
		return cmd
	}
	waitClip := func(c *client, want string) {
		t.Helper()
		deadline := time.After(5 * time.Second)
		for {
			select {
			case m := <-c.dcMsgs:
				if m["t"] == "clip" {
					if m["text"] != want {
						t.Fatalf("clip %q, want %q", m["text"], want)
					}
					return
				}
			case <-deadline:
				t.Fatalf("no clip message %q", want)
			}
		}
	}

	t.Run("viewer to desktop", func(t *testing.T) {
		// Without control it is refused.
		a.input(map[string]any{"t": "clip", "text": "nope"})
		if msg := a.waitInputErr(5 * time.Second); !strings.Contains(msg, "do not have control") {
			t.Fatalf("error %q", msg)
		}
		e.s.Grant(a.hello.ID)
		const text = "héllo from the browser ✓\nline 2"
		a.input(map[string]any{"t": "clip", "text": text})
		// b, not the sender, hears about it; view-only w does not.
		waitClip(b, text)
		out, err := xclip("-o", "-selection", "clipboard").Output()
		if err != nil {
			t.Fatalf("xclip -o: %v", err)
		}
		if string(out) != text {
			t.Fatalf("desktop clipboard %q, want %q", out, text)
		}
	})

	t.Run("desktop to viewers", func(t *testing.T) {
		const text = "copied on the desktop ⌘"
		cmd := xclip("-i", "-selection", "clipboard", "-loops", "1")
		cmd.Stdin = strings.NewReader(text)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Wait()
		waitClip(a, text)
		waitClip(b, text)
		select {
		case m := <-w.dcMsgs:
			if m["t"] == "clip" {
				t.Errorf("a view-only viewer was sent the clipboard")
			}
		default:
		}
	})
}
