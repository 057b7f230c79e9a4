package browser_test

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/web"
)

// TestWSVideoHelpers runs wsvideo.js's parsers in the browser on video
// messages laid out as docs/STREAM.md says (built here, byte by byte): the
// header's fields, refusals of short or other-version messages, the NAL
// units of an access unit and the codec string from its SPS.
func TestWSVideoHelpers(t *testing.T) {
	msg := func(version, flags byte, seq uint32, atUs uint64, au ...byte) []int {
		b := make([]byte, 14, 14+len(au))
		b[0], b[1] = version, flags
		binary.BigEndian.PutUint32(b[2:], seq)
		binary.BigEndian.PutUint64(b[6:], atUs)
		b = append(b, au...)
		out := make([]int, len(b))
		for i, x := range b {
			out[i] = int(x)
		}
		return out
	}
	sps := []byte{0, 0, 0, 1, 0x67, 0x42, 0xc0, 0x1f, 0xda, 0, 0, 1, 0x68, 0xce, 0, 0, 1, 0x65, 0x88, 0x80}
	delta := []byte{0, 0, 0, 1, 0x41, 0x9a, 0x02}
	type want struct {
		Ok    bool   `json:"ok"`
		Key   bool   `json:"key"`
		Seq   uint32 `json:"seq"`
		AtUs  uint64 `json:"atUs"`
		Nals  []int  `json:"nals"` // NAL types
		Codec string `json:"codec"`
	}
	cases := []struct {
		name string
		b    []int
		want want
	}{
		{"keyframe", msg(1, 1, 7, 1_764_000_000_123_456, sps...), want{true, true, 7, 1_764_000_000_123_456, []int{7, 8, 5}, "avc1.42c01f"}},
		{"delta", msg(1, 0, 8, 1_764_000_000_156_789, delta...), want{true, false, 8, 1_764_000_000_156_789, []int{1}, ""}},
		{"reserved flags ignored", msg(1, 0xfe, 9, 1, delta...), want{true, false, 9, 1, []int{1}, ""}},
		{"header only", msg(1, 0, 1, 1), want{Ok: true, Seq: 1, AtUs: 1, Nals: []int{}}},
		{"other version", msg(2, 1, 7, 1, sps...), want{}},
		{"shorter than the header", msg(1, 1, 7, 1)[:10], want{}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d := startDriver(ctx, t)
	base := testrig.Serve(t, web.Handler())
	open(ctx, t, d, "wsv", base+"/")
	bs := make([][]int, len(cases))
	for i, c := range cases {
		bs[i] = c.b
	}
	var got []want
	err := d.Do(ctx, "eval", map[string]any{"page": "wsv", "arg": bs, "expr": `async (bs) => {
		const w = await import('./wsvideo.js');
		return bs.map((b) => {
			const f = w.parseFrame(new Uint8Array(b).buffer);
			if (!f) return { ok: false, key: false, seq: 0, atUs: 0, nals: null, codec: '' };
			return { ok: true, key: f.key, seq: f.seq, atUs: f.atUs, nals: w.nalUnits(f.au).map((n) => n[0] & 0x1f), codec: w.codecFromSPS(f.au) ?? '' };
		});
	}`}, &got)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		g, w := got[i], c.want
		same := g.Ok == w.Ok && g.Key == w.Key && g.Seq == w.Seq && g.AtUs == w.AtUs && g.Codec == w.Codec && len(g.Nals) == len(w.Nals)
		for j := 0; same && j < len(w.Nals); j++ {
			same = g.Nals[j] == w.Nals[j]
		}
		if !same {
			t.Errorf("%s: got %+v, want %+v", c.name, g, w)
		}
	}
}
