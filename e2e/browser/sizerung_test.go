package browser_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http/httputil"
	"net/url"
	"os"
	osexec "os/exec"
	"testing"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"

	"github.com/deskenv/deskenv/e2e/browser"
	"github.com/deskenv/deskenv/internal/xprobe"
	"github.com/deskenv/deskenv/stream"
)

// TestBrowserHalfSize: a stream told to send 200 kbit/s is under
// congestion control's size rung from the start (docs/STREAM.md), so
// Chromium gets the 1280x800 desktop as 640x400 video, over WebRTC and over
// the websocket. The video plays with the desktop's colours, a click lands
// at the screen pixel it was aimed at (input stays in the hello's
// 1280x800), and the link panel shows both sizes.
func TestBrowserHalfSize(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	st := startStackConfig(ctx, t, stream.Config{LoopbackOnly: true, BitrateKbps: 200})
	if st.sw != 1280 || st.sh != 800 {
		t.Fatalf("the test desktop is %dx%d: the sizes below assume 1280x800", st.sw, st.sh)
	}
	d := startDriver(ctx, t)

	for _, tc := range []struct{ name, query, transport string }{
		{"webrtc", "", "webrtc"},
		{"websocket", "&transport=websocket", "websocket"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			page := tc.name
			open(ctx, t, d, page, st.url(tokenOperator)+tc.query)
			waitFor(ctx, t, d, page, fmt.Sprintf(`deskenv.state === 'connected' && deskenv.session.transport === %q && deskenv.video.videoWidth > 0`, tc.transport),
				"the page never showed video")
			var hello struct{ W, H int }
			do(ctx, t, d, "eval", map[string]any{"page": page, "expr": `deskenv.hello.video`}, &hello)
			if hello.W != 1280 || hello.H != 800 {
				t.Errorf("the hello's video is %dx%d, want 1280x800: input's space stays the full size", hello.W, hello.H)
			}
			waitFor(ctx, t, d, page, `deskenv.video.videoWidth === 640 && deskenv.video.videoHeight === 400`, "the video is not 640x400")
			if s := st.stream.Stats(); s.TargetWidth != 640 || s.TargetHeight != 400 {
				t.Errorf("the server's target is %dx%d, want 640x400", s.TargetWidth, s.TargetHeight)
			}
			halfColours(ctx, t, d, st, page)
			takeControl(ctx, t, d, page)
			// Video pixels of the 640x400 picture: the page maps them into the
			// hello's 1280x800 and the server onto the screen.
			for _, p := range [][2]int{{100, 80}, {517, 333}} {
				clickHalf(ctx, t, d, st, page, p[0], p[1])
			}
			do(ctx, t, d, "eval", map[string]any{"page": page, "expr": `document.getElementById('link-btn').click(), true`}, nil)
			deadline := time.Now().Add(15 * time.Second)
			for {
				var p linkPanel
				do(ctx, t, d, "eval", map[string]any{"page": page, "expr": readLinkPanel}, &p)
				if p.Cells["server-size"] == "640×400" && p.Cells["browser-size"] == "640×400" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the link panel's video size: browser %q, server %q; want 640×400 both", p.Cells["browser-size"], p.Cells["server-size"])
				}
				st.probe.Fill(0, 0, 300, 300, uint32(0x405060+int(time.Now().UnixMilli()%8)*0x080808))
				time.Sleep(200 * time.Millisecond)
			}
			do(ctx, t, d, "close", map[string]any{"page": page}, nil)
		})
	}
}

// halfColours paints a square on the desktop and waits for the half-size
// video to show its colour at the square's middle (200, 200 on the screen,
// 100, 100 in the picture).
func halfColours(ctx context.Context, t *testing.T, d *browser.Driver, st *stack, page string) {
	t.Helper()
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
			do(ctx, t, d, "eval", map[string]any{"page": page, "expr": readPixel, "arg": []int{100, 100}}, &got)
			ok = len(got) == 3 && near(got[0], int(want>>16&0xff)) && near(got[1], int(want>>8&0xff)) && near(got[2], int(want&0xff))
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the half-size video shows %v at (100, 100), want about #%06x painted there", got, want)
		}
	}
}

// clickHalf clicks the middle of pixel (px, py) of the 640x400 picture and
// checks the press lands on the screen pixel under it: the middle of a
// picture pixel is screen pixel 2px+1 (the page floors (px+0.5)*2), give or
// take one for the browser's own rounding of the mouse position.
func clickHalf(ctx context.Context, t *testing.T, d *browser.Driver, st *stack, page string, px, py int) {
	t.Helper()
	st.probe.Take()
	do(ctx, t, d, "click", map[string]any{"page": page, "vx": px, "vy": py}, nil)
	evs := waitEvents(ctx, t, st.probe, func(evs []xprobe.Event) bool { return count(evs, xprobe.ButtonRelease) > 0 })
	sx, sy := 2*px+1, 2*py+1
	for _, e := range evs {
		if e.Kind == xprobe.ButtonPress {
			if e.Button != 1 || abs(e.X-sx) > 1 || abs(e.Y-sy) > 1 {
				t.Errorf("press %v, want button 1 at %d,%d (picture pixel %d,%d)", e, sx, sy, px, py)
			}
			return
		}
	}
	t.Fatalf("no button press on the desktop after clicking picture pixel %d,%d: %v", px, py, fmt.Sprint(evs))
}

// TestBrowserSizeSwitch: Chromium watches through a link that tc tbf
// thins to 150 kbit/s and then widens again, over WebRTC and then over the
// websocket. The video switches to half size and back while it plays
// (Chromium's WebRTC decoder and the page's VideoDecoder each take the new
// SPS), frames keep being decoded at each size, and clicks land at the
// right screen pixel at either size. The browser runs in the namespace the websocket
// fallback test uses (UDP let through here), the shaping on the veth's
// side toward it; it needs root, like that test.
func TestBrowserSizeSwitch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	wrapper, _ := udpBlockedChromium(t) // UDP is not blocked: the link is only thin
	t.Setenv("DESKENV_CHROMIUM", wrapper)
	shape := func(rate string) {
		t.Helper()
		// A queue of about 400 ms at the rate, a home router's: a sender
		// that overshoots sees delay first, then drops.
		out, err := osexec.Command("tc", "qdisc", "replace", "dev", udpHostIf, "root", "tbf", "rate", rate, "burst", "8kb", "latency", "400ms").CombinedOutput()
		if err != nil {
			t.Fatalf("tc tbf %s on %s: %v: %s", rate, udpHostIf, err, out)
		}
	}
	st := startStackConfig(ctx, t, stream.Config{})
	if st.sw != 1280 || st.sh != 800 {
		t.Fatalf("the test desktop is %dx%d: the sizes below assume 1280x800", st.sw, st.sh)
	}
	base := serveOn(t, udpHostIP+":0", httputil.NewSingleHostReverseProxy(mustURL(t, withWhoami(t, st.base))))
	opt := browser.Options{Args: []string{"--unsafely-treat-insecure-origin-as-secure=" + base}}
	if testing.Verbose() {
		opt.Stderr = os.Stderr
	}
	d, err := browser.Start(ctx, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	for _, tc := range []struct{ page, query, transport string }{
		{"webrtc", "", "webrtc"},
		{"websocket", "&transport=websocket", "websocket"},
	} {
		t.Run(tc.page, func(t *testing.T) {
			shape("20mbit")
			page := tc.page
			open(ctx, t, d, page, base+"/?token="+tokenOperator+tc.query)
			waitFor(ctx, t, d, page, fmt.Sprintf(`deskenv.state === 'connected' && deskenv.session.transport === %q && deskenv.video.videoWidth === 1280`, tc.transport),
				"no 1280x800 video over the wide link")
			takeControl(ctx, t, d, page)

			// Noise over a quarter of the screen: more than 150 kbit/s whatever
			// the encoder does, at either size (so half size is not idle).
			nctx, stopNoise := context.WithCancel(ctx)
			defer stopNoise()
			go paintNoise(nctx, t, st, 640, 400, 10)

			shape("150kbit")
			t0 := time.Now()
			waitSize(ctx, t, d, st, page, 640, 400, 40*time.Second)
			s := st.stream.Stats()
			t.Logf("150 kbit/s: the page shows 640x400 after %v (target %d kbit/s at %d fps)", time.Since(t0).Round(time.Millisecond), s.TargetKbps, s.TargetFPS)
			clickHalf(ctx, t, d, st, page, 400, 300)

			shape("20mbit")
			t1 := time.Now()
			waitSize(ctx, t, d, st, page, 1280, 800, 90*time.Second)
			s = st.stream.Stats()
			t.Logf("20 Mbit/s: the page shows 1280x800 again after %v (target %d kbit/s at %d fps)", time.Since(t1).Round(time.Millisecond), s.TargetKbps, s.TargetFPS)
			stopNoise()
			clickAt(ctx, t, d, st, page, 900, 600)
			do(ctx, t, d, "close", map[string]any{"page": page}, nil)
			waitUntil(t, 10*time.Second, func() bool { return len(st.stream.Viewers()) == 0 }, "the page's viewer did not leave")
		})
	}
}

// waitSize waits, within, for the server's target and the page's decoded
// video to be w x h, and then for frames decoded to grow at that size.
func waitSize(ctx context.Context, t *testing.T, d *browser.Driver, st *stack, page string, w, h int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		s := st.stream.Stats()
		var vw, vh int
		do(ctx, t, d, "eval", map[string]any{"page": page, "expr": `deskenv.video.videoWidth`}, &vw)
		do(ctx, t, d, "eval", map[string]any{"page": page, "expr": `deskenv.video.videoHeight`}, &vh)
		if s.TargetWidth == w && s.TargetHeight == h && vw == w && vh == h {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v the server's target is %dx%d (%d kbit/s at %d fps; links %+v) and the page shows %dx%d: want %dx%d",
				within, s.TargetWidth, s.TargetHeight, s.TargetKbps, s.TargetFPS, st.stream.Links(), vw, vh, w, h)
		}
		time.Sleep(250 * time.Millisecond)
	}
	f0 := framesDecoded(ctx, t, d, page)
	waitFor(ctx, t, d, page, fmt.Sprintf(`deskenv.stats().then(s => s.framesDecoded > %d && s.width === %d)`, f0+3, w), fmt.Sprintf("frames stopped at %dx%d", w, h))
}

// paintNoise keeps a w x h corner of the probe window changing with random
// pixels at fps until ctx ends: content no bitrate makes cheap.
func paintNoise(ctx context.Context, t *testing.T, st *stack, w, h, fps int) {
	c, err := xgb.NewConnDisplay(st.d.Name())
	if err != nil {
		t.Errorf("noise: %v", err)
		return
	}
	defer c.Close()
	gc, err := xproto.NewGcontextId(c)
	if err != nil {
		t.Errorf("noise: %v", err)
		return
	}
	win := xproto.Drawable(st.probe.Window())
	if err := xproto.CreateGCChecked(c, gc, win, 0, nil).Check(); err != nil {
		t.Errorf("noise: %v", err)
		return
	}
	const strip = 25 // rows per PutImage: well under the core request limit
	buf := make([]byte, w*strip*4)
	rnd := rand.New(rand.NewPCG(3, 4))
	tick := time.NewTicker(time.Second / time.Duration(fps))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for y := 0; y < h; y += strip {
			for i := range buf {
				buf[i] = byte(rnd.Uint32())
			}
			if err := xproto.PutImageChecked(c, xproto.ImageFormatZPixmap, win, gc, uint16(w), strip, 0, int16(y), 0, 24, buf).Check(); err != nil {
				return // the display went away with the test
			}
		}
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
