package studio_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/deskenv/deskenv/web"
)

// TestPlayerHelpers: the review page's video player's pure helpers, run in
// the real browser against tables kept here: the codec string read from an
// access unit's SPS, the frame on screen at a time, and the keyframe a
// decoder must start from.
func TestPlayerHelpers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := httptest.NewServer(web.Handler())
	defer srv.Close()
	drv := startDriverTo(ctx, t, &syncBuffer{})
	do(ctx, t, drv, "open", map[string]any{"page": "p", "url": srv.URL + "/player.js"}, nil)

	type frame struct {
		PTS int  `json:"pts_us"`
		Key bool `json:"key"`
		Seg int  `json:"segment"`
	}
	// Two segments: keyframes at 0 and 3 (each segment starts with one).
	frames := []frame{{0, true, 0}, {100, false, 0}, {250, false, 0}, {400, true, 1}, {450, false, 1}, {900, false, 1}}
	fj, _ := json.Marshal(frames)
	cases := []struct {
		name, expr string
		want       any
	}{
		{"baseline SPS after a 4-byte start code", `m.avcCodec(new Uint8Array([0,0,0,1,0x67,0x42,0xc0,0x1f,0xda,0x01]))`, "avc1.42c01f"},
		{"high profile SPS after a 3-byte start code, AUD first", `m.avcCodec(new Uint8Array([0,0,1,0x09,0xf0,0,0,1,0x27,0x64,0x00,0x28,0xac]))`, "avc1.640028"},
		{"no SPS", `m.avcCodec(new Uint8Array([0,0,0,1,0x65,0x88,0x84,0x00,0x10]))`, nil},
		{"a start code cut short", `m.avcCodec(new Uint8Array([0,0,1,0x67,0x42]))`, nil},
		{"before the first frame", `m.frameAt(F, -5)`, 0.0},
		{"at the first frame", `m.frameAt(F, 0)`, 0.0},
		{"just before the second", `m.frameAt(F, 99)`, 0.0},
		{"at the second", `m.frameAt(F, 100)`, 1.0},
		{"between", `m.frameAt(F, 420)`, 3.0},
		{"after the last", `m.frameAt(F, 1e9)`, 5.0},
		{"keyframe of a delta frame", `m.keyBefore(F, 2)`, 0.0},
		{"a keyframe is its own", `m.keyBefore(F, 3)`, 3.0},
		{"keyframe in the second segment", `m.keyBefore(F, 5)`, 3.0},
	}
	for _, c := range cases {
		var got any
		expr := `(async () => { const m = await import('/player.js'); const F = ` + string(fj) + `; return ` + c.expr + `; })()`
		do(ctx, t, drv, "eval", map[string]any{"page": "p", "expr": expr}, &got)
		if got != c.want {
			t.Errorf("%s: %s = %v, want %v", c.name, c.expr, got, c.want)
		}
	}
}
