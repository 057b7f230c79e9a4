package browser_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/deskenv/deskenv/e2e/browser"
	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/internal/xprobe"
)

// linkPanel is what the page's link panel shows: visibility, the button's
// state and every cell by its data-k.
type linkPanel struct {
	Hidden  bool              `json:"hidden"`
	Pressed string            `json:"pressed"`
	Role    string            `json:"role"`
	Cells   map[string]string `json:"cells"`
}

const readLinkPanel = `(() => {
  const p = document.getElementById('link-panel');
  const cells = {};
  for (const c of p.querySelectorAll('[data-k]')) cells[c.dataset.k] = c.textContent;
  return {hidden: p.hidden, pressed: document.getElementById('link-btn').getAttribute('aria-pressed'),
    role: p.getAttribute('role'), cells};
})()`

// TestBrowserLinkPanel: the link numbers a person asks for (issue 18, item 3).
// The button and Ctrl+Alt+S show and hide them; shown, they fill in from the
// browser's getStats (udp on loopback, a round trip, frames per second) and
// from the server's {"type":"stats"} (its target); the shortcut's S never
// reaches the desktop while other keys still do; the page logs no errors.
func TestBrowserLinkPanel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st := startStack(ctx, t)
	var console lockedBuffer
	opt := browser.Options{Stderr: &console}
	if testing.Verbose() {
		opt.Stderr = io.MultiWriter(&console, os.Stderr)
	}
	d, err := browser.Start(ctx, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })

	open(ctx, t, d, "a", withWhoami(t, st.base)+"/?token="+tokenOperator)
	waitFor(ctx, t, d, "a", `deskenv.state === 'connected' && deskenv.video.videoWidth > 0`, "the page never showed video")
	takeControl(ctx, t, d, "a")

	read := func(t *testing.T) linkPanel {
		t.Helper()
		var p linkPanel
		do(ctx, t, d, "eval", map[string]any{"page": "a", "expr": readLinkPanel}, &p)
		return p
	}
	if p := read(t); !p.Hidden || p.Pressed != "false" || p.Role != "status" {
		t.Fatalf("before any toggle: hidden %v (want true), aria-pressed %q (want false), role %q (want status)", p.Hidden, p.Pressed, p.Role)
	}

	t.Run("the button shows the numbers", func(t *testing.T) {
		do(ctx, t, d, "eval", map[string]any{"page": "a", "expr": `document.getElementById('link-btn').click(), true`}, nil)
		p := waitNumbers(ctx, t, d, st.probe)
		t.Logf("shown: %v", p.Cells)
		do(ctx, t, d, "eval", map[string]any{"page": "a", "expr": `document.getElementById('link-btn').click(), true`}, nil)
		if p := read(t); !p.Hidden || p.Pressed != "false" {
			t.Errorf("after the second click: hidden %v, aria-pressed %q; want hidden, false", p.Hidden, p.Pressed)
		}
	})

	t.Run("Ctrl+Alt+S toggles them and never reaches the desktop", func(t *testing.T) {
		do(ctx, t, d, "focus", map[string]any{"page": "a", "selector": "#stage"}, nil)
		st.probe.Take()
		do(ctx, t, d, "press", map[string]any{"page": "a", "key": "Control+Alt+s"}, nil)
		if p := read(t); p.Hidden || p.Pressed != "true" {
			t.Fatalf("after Ctrl+Alt+S: hidden %v, aria-pressed %q; want shown, true", p.Hidden, p.Pressed)
		}
		waitNumbers(ctx, t, d, st.probe)
		do(ctx, t, d, "focus", map[string]any{"page": "a", "selector": "#stage"}, nil)
		do(ctx, t, d, "press", map[string]any{"page": "a", "key": "Control+Alt+s"}, nil)
		if p := read(t); !p.Hidden || p.Pressed != "false" {
			t.Errorf("after the second Ctrl+Alt+S: hidden %v, aria-pressed %q; want hidden, false", p.Hidden, p.Pressed)
		}
		// A key after the shortcuts marks the end of what the page sent: once
		// its x was pressed and released, so did anything the shortcuts let
		// through (the release comes after the press: wait for it, or a
		// loaded machine reads the events between the two).
		do(ctx, t, d, "type", map[string]any{"page": "a", "text": "x"}, nil)
		evs := waitEvents(ctx, t, st.probe, func(evs []xprobe.Event) bool {
			for _, e := range evs {
				if e.Kind == xprobe.KeyRelease && e.Keysym == 'x' {
					return true
				}
			}
			return false
		})
		if got := typed(evs); got != "x" {
			t.Errorf("the desktop received %q, want only the x typed after the shortcuts (events %v)", got, evs)
		}
		if p, r := count(evs, xprobe.KeyPress), count(evs, xprobe.KeyRelease); p != r {
			t.Errorf("%d key presses but %d releases on the desktop: a key is left down (events %v)", p, r, evs)
		}
	})

	if c := console.String(); strings.Contains(c, "[a error]") || strings.Contains(c, "[a pageerror]") {
		t.Errorf("the page logged console errors:\n%s", c)
	}
}

// withWhoami serves base behind a proxy that also answers whoami. The test
// stack serves only the page and the signalling, but the page asks whoami
// which panels to show, and the 404 would be a console error that says
// nothing about the link panel. A viewer's answer keeps the page from calling
// the recorder and the task list, which are not served here either.
func withWhoami(t *testing.T, base string) string {
	t.Helper()
	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /whoami", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"role":"viewer","who":""}`)
	})
	mux.Handle("/", httputil.NewSingleHostReverseProxy(target)) // websockets included
	return testrig.Serve(t, mux)
}

var (
	rttCell    = regexp.MustCompile(`^\d+(\.\d+)? ms$`)
	targetCell = regexp.MustCompile(`^[1-9]\d* kbit/s at [1-9]\d* fps$`)
)

// waitNumbers keeps the desktop changing (an unchanged screen sends no
// frames) until the shown panel has a transport, a round trip, frames per
// second above zero and the server's target, and returns what it showed.
func waitNumbers(ctx context.Context, t *testing.T, d *browser.Driver, probe *xprobe.Probe) linkPanel {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var p linkPanel
	for i := 0; ; i++ {
		if err := probe.Fill(0, 0, 300, 300, uint32(0x102030+(i%16)*0x0a0a0a)); err != nil {
			t.Fatal(err)
		}
		do(ctx, t, d, "eval", map[string]any{"page": "a", "expr": readLinkPanel}, &p)
		fps, _ := strconv.ParseFloat(p.Cells["browser-fps"], 64)
		switch {
		case p.Hidden || p.Pressed != "true":
			t.Fatalf("the panel is not shown (hidden %v, aria-pressed %q)", p.Hidden, p.Pressed)
		case p.Cells["browser-transport"] == "udp" && p.Cells["server-transport"] == "udp" &&
			rttCell.MatchString(p.Cells["browser-rtt"]) && fps > 0 && targetCell.MatchString(p.Cells["server-target"]):
			return p
		case time.Now().After(deadline):
			b, _ := json.Marshal(p.Cells)
			t.Fatalf("the panel never showed udp, a round trip, frames per second and the server's target: %s", b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// lockedBuffer is the driver's console output, written from its goroutine.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
