package browser_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// withoutH264 makes the page's Chromium look like a browser without H.264:
// Debian's Chromium has no switch that turns its H.264 off (none of its
// features or field trials does), so the video receiver's capabilities
// drop H.264, the page's setCodecPreferences is given the rest, and the
// offer has no H.264 in it, which is what such a browser sends.
const withoutH264 = `(() => {
  const caps = RTCRtpReceiver.getCapabilities.bind(RTCRtpReceiver);
  RTCRtpReceiver.getCapabilities = (kind) => {
    const c = caps(kind);
    if (c && kind === 'video') c.codecs = c.codecs.filter((x) => x.mimeType.toLowerCase() !== 'video/h264');
    return c;
  };
})();`

// TestBrowserVP8: Chromium offering no H.264 gets VP8 video, and it plays.
func TestBrowserVP8(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st := startStack(ctx, t)
	d := startDriver(ctx, t)

	var res struct{ Status int }
	do(ctx, t, d, "open", map[string]any{"page": "a", "url": st.url(tokenOperator), "initScript": withoutH264}, &res)
	if res.Status != 200 {
		t.Fatalf("open: HTTP status %d", res.Status)
	}
	waitFor(ctx, t, d, "a", `deskenv.state === 'connected'`, "the page never connected")
	var offered bool
	do(ctx, t, d, "eval", map[string]any{"page": "a", "expr": `RTCRtpReceiver.getCapabilities('video').codecs.some((c) => c.mimeType.toLowerCase() === 'video/h264')`}, &offered)
	if offered {
		t.Fatal("the page still sees H.264 in its capabilities: the test would not test a browser without it")
	}
	waitFor(ctx, t, d, "a", `deskenv.video.videoWidth > 0`, "no video frame arrived")
	f0 := framesDecoded(ctx, t, d, "a")
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
	if !strings.EqualFold(s.Codec, "video/VP8") {
		t.Errorf("codec %q, want video/VP8", s.Codec)
	}
	if s.Width != 1280 || s.Height != 800 {
		t.Errorf("video %dx%d, want 1280x800", s.Width, s.Height)
	}
}
