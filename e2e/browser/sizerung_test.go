package browser_test

import (
	"context"
	"fmt"
	"testing"
	"time"

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
