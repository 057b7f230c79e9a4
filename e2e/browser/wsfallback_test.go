package browser_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/deskenv/deskenv/e2e/browser"
	"github.com/deskenv/deskenv/internal/xprobe"
	"github.com/deskenv/deskenv/stream"
)

// The namespace the UDP-blocked browser runs in: a veth pair to the root
// namespace (a /30 nothing here routes) and an iptables rule in the
// namespace that drops every UDP packet, as a proxy or an ingress that
// carries only HTTP would. The names are fixed; a lock makes concurrent
// runs take turns.
const (
	udpNS      = "e2eudp-browser"
	udpHostIf  = "e2eudp-h"
	udpInnerIf = "e2eudp-b"
	udpHostIP  = "10.231.79.1"
	udpInnerIP = "10.231.79.2"
)

// udpBlockedChromium makes the namespace and returns a Chromium wrapper
// that runs in it, and a function that turns the UDP drop on. It skips the
// test, saying why, without root or the ip and iptables commands.
func udpBlockedChromium(t *testing.T) (wrapper string, block func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the UDP-blocked browser needs root (a network namespace, a veth pair, iptables): run as root")
	}
	for _, c := range []string{"ip", "iptables"} {
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("the UDP-blocked browser needs the %s command (Debian: iproute2, iptables)", c)
		}
	}
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), udpNS+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Close() })
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	// Not the test's ctx: the cleanup runs after it is cancelled.
	run := func(args ...string) error {
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	cleanup := func() {
		run("ip", "link", "del", udpHostIf)
		run("ip", "netns", "del", udpNS)
	}
	cleanup() // what a crashed run left
	t.Cleanup(cleanup)
	for _, step := range [][]string{
		{"ip", "netns", "add", udpNS},
		{"ip", "link", "add", udpHostIf, "type", "veth", "peer", "name", udpInnerIf},
		{"ip", "link", "set", udpInnerIf, "netns", udpNS},
		{"ip", "addr", "add", udpHostIP + "/30", "dev", udpHostIf},
		{"ip", "link", "set", udpHostIf, "up"},
		{"ip", "netns", "exec", udpNS, "ip", "addr", "add", udpInnerIP + "/30", "dev", udpInnerIf},
		{"ip", "netns", "exec", udpNS, "ip", "link", "set", udpInnerIf, "up"},
		{"ip", "netns", "exec", udpNS, "ip", "link", "set", "lo", "up"},
	} {
		if err := run(step...); err != nil {
			t.Fatalf("make the browser's namespace: %v", err)
		}
	}
	chromium := os.Getenv("DESKENV_CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	wrapper = filepath.Join(t.TempDir(), "chromium-in-"+udpNS)
	script := fmt.Sprintf("#!/bin/sh\nexec ip netns exec %s '%s' \"$@\"\n", udpNS, strings.ReplaceAll(chromium, "'", `'\''`))
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return wrapper, func() {
		t.Helper()
		for _, chain := range []string{"OUTPUT", "INPUT"} {
			if err := run("ip", "netns", "exec", udpNS, "iptables", "-A", chain, "-p", "udp", "-j", "DROP"); err != nil {
				t.Fatalf("block UDP in the browser's namespace: %v", err)
			}
		}
	}
}

// serveOn serves h on addr (host:0) until the test ends and returns its URL.
func serveOn(t *testing.T, addr string, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// readPixel is the colour of video pixel (x, y) as the page's <video>
// shows it.
const readPixel = `(([x, y]) => {
  const v = deskenv.video;
  const c = document.createElement('canvas');
  c.width = v.videoWidth; c.height = v.videoHeight;
  const g = c.getContext('2d');
  g.drawImage(v, 0, 0);
  return Array.from(g.getImageData(x, y, 1, 1).data.slice(0, 3));
})`

// TestBrowserWebsocketFallback: with WebRTC unable to use UDP, the page
// falls back to the websocket transport by itself (issue 18, item 2):
// WebRTC really fails (the page says so), video plays with the desktop's
// colours, a click lands at the right pixel, the link panel says
// websocket. A second page forces the transport with ?transport=websocket.
// The browser runs in a network namespace whose UDP is dropped (a control
// page first shows WebRTC connects there without the drop) and reaches
// deskenv through httputil.ReverseProxy on one HTTP port.
func TestBrowserWebsocketFallback(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	wrapper, blockUDP := udpBlockedChromium(t)
	t.Setenv("DESKENV_CHROMIUM", wrapper)
	// All interfaces' candidates, the veth's among them: what the browser
	// could reach, were UDP let through.
	st := startStackConfig(ctx, t, stream.Config{})
	// One HTTP port on the veth, a reverse proxy in front of deskenv.
	target, err := url.Parse(withWhoami(t, st.base))
	if err != nil {
		t.Fatal(err)
	}
	base := serveOn(t, udpHostIP+":0", httputil.NewSingleHostReverseProxy(target))
	var console lockedBuffer
	// WebCodecs is for secure contexts only (https, or localhost): the
	// plain-HTTP address on the veth is declared one, as https would be.
	opt := browser.Options{Stderr: &console, Args: []string{"--unsafely-treat-insecure-origin-as-secure=" + base}}
	if testing.Verbose() {
		opt.Stderr = io.MultiWriter(&console, os.Stderr)
	}
	d, err := browser.Start(ctx, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })

	// The control: before UDP is blocked, WebRTC connects from the namespace.
	open(ctx, t, d, "ctl", base+"/?token="+tokenOperator)
	waitFor(ctx, t, d, "ctl", `deskenv.state === 'connected' && deskenv.session.transport === 'webrtc' && deskenv.video.videoWidth > 0`, "WebRTC did not connect from the namespace with UDP let through")
	do(ctx, t, d, "close", map[string]any{"page": "ctl"}, nil)
	waitUntil(t, 10*time.Second, func() bool { return len(st.stream.Viewers()) == 0 }, "the control page's viewer did not leave")

	blockUDP()
	t0 := time.Now()
	open(ctx, t, d, "a", base+"/?token="+tokenOperator)
	waitFor(ctx, t, d, "a", `deskenv.state === 'connected' && deskenv.session.transport === 'websocket' && deskenv.video.videoWidth > 0`, "the page never showed video on the websocket")
	t.Logf("video on the websocket %v after opening the page", time.Since(t0).Round(time.Millisecond))
	if c := console.String(); !strings.Contains(c, "video on the websocket: WebRTC did not connect") && !strings.Contains(c, "video on the websocket: the WebRTC connection failed") {
		t.Errorf("the page did not say WebRTC failed before falling back; console:\n%s", c)
	}
	if links := st.stream.Links(); len(links) != 1 || links[0].Transport != "websocket" {
		t.Errorf("the server's links: %+v, want one on the websocket", links)
	}

	t.Run("video plays with the desktop's colours", func(t *testing.T) {
		checkColours(ctx, t, d, st, "a")
	})

	t.Run("a click lands at the right pixel", func(t *testing.T) {
		takeControl(ctx, t, d, "a")
		clickAt(ctx, t, d, st, "a", 400, 300)
	})

	t.Run("the link panel says websocket", func(t *testing.T) {
		do(ctx, t, d, "eval", map[string]any{"page": "a", "expr": `document.getElementById('link-btn').click(), true`}, nil)
		deadline := time.Now().Add(20 * time.Second)
		for i := 0; ; i++ {
			st.probe.Fill(0, 0, 300, 300, uint32(0x102030+(i%16)*0x0a0a0a))
			var p linkPanel
			do(ctx, t, d, "eval", map[string]any{"page": "a", "expr": readLinkPanel}, &p)
			if p.Cells["browser-transport"] == "websocket" && p.Cells["server-transport"] == "websocket" && p.Cells["browser-fps"] != "–" && targetCell.MatchString(p.Cells["server-target"]) {
				t.Logf("panel: %v", p.Cells)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the panel never said websocket on both sides with frames and a target: %v", p.Cells)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})

	t.Run("?transport=websocket forces it at once", func(t *testing.T) {
		t0 := time.Now()
		open(ctx, t, d, "b", base+"/?token="+tokenOperator+"&transport=websocket")
		waitFor(ctx, t, d, "b", `deskenv.state === 'connected' && deskenv.session.transport === 'websocket' && deskenv.video.videoWidth > 0`, "the forced page never showed video")
		t.Logf("forced: video %v after opening the page", time.Since(t0).Round(time.Millisecond))
		checkColours(ctx, t, d, st, "b")
		takeControl(ctx, t, d, "b")
		clickAt(ctx, t, d, st, "b", 900, 600)
	})

	if c := console.String(); strings.Contains(c, "pageerror]") || strings.Contains(c, " error]") {
		t.Errorf("the pages logged errors:\n%s", c)
	}
}

// checkColours paints a square on the desktop and waits for the page's video
// to show its colour (H.264 and the colour conversions leave a few levels
// either way), and for frames decoded to grow.
func checkColours(ctx context.Context, t *testing.T, d *browser.Driver, st *stack, page string) {
	t.Helper()
	f0 := framesDecoded(ctx, t, d, page)
	colours := []uint32{0xd02020, 0x20c040, 0x2040e0}
	deadline := time.Now().Add(15 * time.Second)
	for i := 0; ; i++ {
		want := colours[i%len(colours)]
		if err := st.probe.Fill(0, 0, 400, 400, want); err != nil {
			t.Fatal(err)
		}
		var got []int
		ok := false
		for j := 0; j < 20 && !ok; j++ {
			time.Sleep(100 * time.Millisecond)
			do(ctx, t, d, "eval", map[string]any{"page": page, "expr": readPixel, "arg": []int{200, 200}}, &got)
			ok = len(got) == 3 && near(got[0], int(want>>16&0xff)) && near(got[1], int(want>>8&0xff)) && near(got[2], int(want&0xff))
		}
		if ok {
			if f := framesDecoded(ctx, t, d, page); f <= f0 {
				t.Errorf("frames decoded %d, was %d: the decoder counts nothing", f, f0)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the video shows %v at (200, 200), want about #%06x painted there", got, want)
		}
	}
}

func near(a, b int) bool { return abs(a-b) <= 24 }

func waitUntil(t *testing.T, within time.Duration, ok func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal(what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// clickAt clicks video pixel (vx, vy) in the page and checks where the
// desktop got the press.
func clickAt(ctx context.Context, t *testing.T, d *browser.Driver, st *stack, page string, vx, vy int) {
	t.Helper()
	st.probe.Take()
	do(ctx, t, d, "click", map[string]any{"page": page, "vx": vx, "vy": vy}, nil)
	evs := waitEvents(ctx, t, st.probe, func(evs []xprobe.Event) bool { return count(evs, xprobe.ButtonRelease) > 0 })
	sx, sy := st.toScreen(vx, vy)
	for _, e := range evs {
		if e.Kind == xprobe.ButtonPress {
			if e.Button != 1 || abs(e.X-sx) > 1 || abs(e.Y-sy) > 1 {
				t.Errorf("press %v, want button 1 at %d,%d (video %d,%d)", e, sx, sy, vx, vy)
			}
			return
		}
	}
	t.Fatalf("no button press on the desktop after clicking video %d,%d: %v", vx, vy, fmt.Sprint(evs))
}
