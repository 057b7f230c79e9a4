package stream

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/deskenv/deskenv/internal/xprobe"
)

// wsRecv is one video message a websocket viewer received.
type wsRecv struct {
	seq  uint32
	key  bool
	nals [][]byte
}

func (f wsRecv) types() []int {
	var ts []int
	for _, n := range f.nals {
		if len(n) > 0 {
			ts = append(ts, int(n[0]&0x1f))
		}
	}
	return ts
}

// wsViewer is a viewer on the websocket transport, as the page's fallback
// behaves: it asks for the transport, reads video messages and acks each
// after ackDelay (never, with noAck).
type wsViewer struct {
	t      testing.TB
	ws     *websocket.Conn
	hello  helloMsg
	wmu    sync.Mutex
	msgs   chan map[string]any
	frames chan wsRecv
	got    atomic.Int64
	done   chan struct{}
}

type wsOptions struct {
	token string
	// linkBps, when set, acks frames as a link of that many bit/s would
	// deliver them: one after the other, each after its size's worth of
	// time.
	linkBps int
	noAck   bool
}

func joinWS(t testing.TB, e *env, o wsOptions) *wsViewer {
	t.Helper()
	ws, hello := dialWS(t, e.wsURL(o.token))
	c := &wsViewer{t: t, ws: ws, hello: hello, msgs: make(chan map[string]any, 256), frames: make(chan wsRecv, 1024), done: make(chan struct{})}
	go c.read(o)
	c.send(map[string]any{"type": "transport", "kind": "websocket"})
	if m := c.waitMsg("transport", 10*time.Second); m["kind"] != "websocket" || m["codec"] != "h264" || m["header"] != float64(wsFrameHeader) {
		t.Fatalf("transport reply %v, want kind websocket, codec h264, header %d", m, wsFrameHeader)
	}
	return c
}

func (c *wsViewer) send(m any) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	c.ws.WriteJSON(m)
}

func (c *wsViewer) read(o wsOptions) {
	defer close(c.done)
	var link chan sentFrame
	if o.linkBps > 0 {
		link = make(chan sentFrame, 4096)
		defer close(link)
		go c.thinLink(link, o.linkBps)
	}
	for {
		kind, b, err := c.ws.ReadMessage()
		if err != nil {
			return
		}
		if kind == websocket.TextMessage {
			var m map[string]any
			if json.Unmarshal(b, &m) == nil {
				select {
				case c.msgs <- m:
				default:
				}
			}
			continue
		}
		seq, key, _, au, err := wsFrameInfo(b)
		if err != nil {
			c.t.Errorf("video message: %v", err)
			return
		}
		c.got.Add(1)
		select {
		case c.frames <- wsRecv{seq: seq, key: key, nals: splitAnnexB(au)}:
		default:
		}
		if o.noAck {
			continue
		}
		if link != nil {
			link <- sentFrame{seq: seq, bytes: len(b)}
			continue
		}
		c.send(map[string]any{"type": "ack", "seq": seq, "decode_ms": 1.5})
	}
}

// thinLink acks the frames it is given at the pace of a link of bps.
func (c *wsViewer) thinLink(frames <-chan sentFrame, bps int) {
	for f := range frames {
		time.Sleep(time.Duration(f.bytes) * 8 * time.Second / time.Duration(bps))
		c.send(map[string]any{"type": "ack", "seq": f.seq})
	}
}

func (c *wsViewer) waitMsg(typ string, timeout time.Duration) map[string]any {
	c.t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case m := <-c.msgs:
			if m["type"] == typ {
				return m
			}
		case <-deadline:
			c.t.Fatalf("no %q message within %v", typ, timeout)
			return nil
		}
	}
}

func (c *wsViewer) waitFrame(timeout time.Duration) wsRecv {
	c.t.Helper()
	select {
	case f := <-c.frames:
		return f
	case <-time.After(timeout):
		c.t.Fatalf("no video message within %v", timeout)
		return wsRecv{}
	}
}

// waitInput waits for an input-channel message of kind t in an envelope.
func (c *wsViewer) waitInput(t string, timeout time.Duration) map[string]any {
	c.t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case m := <-c.msgs:
			if in, ok := m["input"].(map[string]any); ok && m["type"] == "input" && in["t"] == t {
				return in
			}
		case <-deadline:
			c.t.Fatalf("no input %q message within %v", t, timeout)
			return nil
		}
	}
}

func (c *wsViewer) close() {
	c.wmu.Lock()
	c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "bye"), time.Now().Add(time.Second))
	c.wmu.Unlock()
	c.ws.Close()
	<-c.done
}

// TestWSVideo: a viewer on the websocket transport gets the shared H.264
// encode as access units: the first a keyframe with SPS, PPS and an IDR
// slice, frame numbers counting up from 1, frames while the screen changes,
// and its link reported as "websocket".
func TestWSVideo(t *testing.T) {
	e := newEnv(t, envOptions{width: 640, height: 400})
	p := e.probe(t)
	c := joinWS(t, e, wsOptions{})
	defer c.close()

	first := c.waitFrame(10 * time.Second)
	if !first.key || first.seq != 1 {
		t.Fatalf("first video message: frame %d key %v, want frame 1, a keyframe", first.seq, first.key)
	}
	ts := first.types()
	for _, want := range []int{7, 8, 5} {
		found := false
		for _, ty := range ts {
			found = found || ty == want
		}
		if !found {
			t.Errorf("the keyframe's NAL types are %v: no type %d (SPS 7, PPS 8, IDR 5)", ts, want)
		}
	}
	last := first.seq
	for i := 0; i < 5; i++ {
		p.Fill(0, 0, 200, 200, uint32(0x203040+i*0x101010))
		f := c.waitFrame(10 * time.Second)
		if f.seq != last+1 {
			t.Errorf("frame %d after %d: every frame sent is numbered in order", f.seq, last)
		}
		if f.key || len(f.nals) == 0 {
			t.Errorf("frame %d: key %v with NAL types %v, want a delta with slices", f.seq, f.key, f.types())
		}
		last = f.seq
	}
	links := e.s.Links()
	if len(links) != 1 || links[0].Transport != "websocket" || links[0].Codec != "h264" || links[0].EstimateKbps <= 0 {
		t.Fatalf("links %+v, want one websocket h264 link with an estimate", links)
	}
	// /metrics carries the viewer with transport "websocket".
	reg := prometheus.NewRegistry()
	reg.MustRegister(e.s.Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := 0
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["viewer"] == c.hello.ID {
				series++
				if labels["transport"] != "websocket" {
					t.Errorf("%s labels %v, want transport websocket", mf.GetName(), labels)
				}
				if mf.GetName() == "deskenv_viewer_estimate_bitrate_kbps" && m.GetGauge().GetValue() <= 0 {
					t.Errorf("estimate %v, want above 0", m.GetGauge().GetValue())
				}
			}
		}
	}
	if series == 0 {
		t.Errorf("no series for viewer %s", c.hello.ID)
	}
	c.send(map[string]any{"type": "stats"})
	m := c.waitMsg("stats", 5*time.Second)
	if l, _ := m["link"].(map[string]any); l == nil || l["transport"] != "websocket" {
		t.Errorf("stats %v, want the link's transport websocket", m)
	}

	t.Run("refusals", func(t *testing.T) {
		for _, tt := range []struct {
			msg  map[string]any
			want string
		}{
			{map[string]any{"type": "transport", "kind": "websocket"}, "already receives its video on the websocket"},
			{map[string]any{"type": "transport", "kind": "carrier-pigeon"}, `unknown transport "carrier-pigeon"`},
			{map[string]any{"type": "ack", "seq": 1 << 30}, "only"},
			{map[string]any{"type": "ack", "seq": 1.5}, "whole number"},
			{map[string]any{"type": "ack", "seq": 1, "decode_ms": -3}, "decode_ms"},
			{map[string]any{"type": "ack"}, "needs \"seq\""},
			{map[string]any{"type": "offer", "sdp": "v=0"}, "receives its video on the websocket"},
		} {
			c.send(tt.msg)
			if m := c.waitMsg("error", 5*time.Second); !strings.Contains(m["message"].(string), tt.want) || m["code"] != CodeBadMessage {
				t.Errorf("%v: error %v, want bad_message saying %q", tt.msg, m, tt.want)
			}
		}
	})
}

// TestWSInput: input on the websocket reaches the X server through the same
// parser and gates as the data channel; a view-only viewer's is refused.
func TestWSInput(t *testing.T) {
	e := newEnv(t, envOptions{width: 1280, height: 800, cfg: Config{VideoWidth: 640, VideoHeight: 400}})
	p := e.probe(t)
	ctx := context.Background()
	a := joinWS(t, e, wsOptions{token: "op"})
	defer a.close()
	a.send(map[string]any{"type": "control", "op": "request"})
	deadline := time.Now().Add(5 * time.Second)
	for e.s.Holder() != a.hello.ID && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if h := e.s.Holder(); h != a.hello.ID {
		t.Fatalf("holder %q, want %s", h, a.hello.ID)
	}
	p.Reset()
	for _, m := range []map[string]any{{"t": "mm", "x": 320, "y": 200}, {"t": "bd", "b": 1}, {"t": "bu", "b": 1}} {
		a.send(map[string]any{"type": "input", "input": m})
	}
	evs := waitProbe(t, p, func(evs []xprobe.Event) bool {
		for _, ev := range evs {
			if ev.Kind == xprobe.ButtonRelease {
				return true
			}
		}
		return false
	})
	press := false
	for _, ev := range evs {
		if ev.Kind == xprobe.ButtonPress {
			press = true
			if ev.Button != 1 || ev.X != 641 || ev.Y != 401 {
				t.Errorf("press %v, want button 1 at (641, 401): video (320, 200) on a screen twice its size", ev)
			}
		}
	}
	if !press {
		t.Fatalf("no button press on the desktop: %v", evs)
	}

	a.send(map[string]any{"type": "input", "input": map[string]any{"t": "bd", "b": 4}})
	if m := a.waitInput("err", 5*time.Second); !strings.Contains(m["message"].(string), "wheel button") {
		t.Errorf("bad input: %v, want the parser's error", m)
	}
	a.send(map[string]any{"type": "input"})
	if m := a.waitInput("err", 5*time.Second); !strings.Contains(m["message"].(string), "needs \"input\"") {
		t.Errorf("empty input: %v", m)
	}

	w := joinWS(t, e, wsOptions{token: "watch"})
	defer w.close()
	p.Reset()
	w.send(map[string]any{"type": "input", "input": map[string]any{"t": "mm", "x": 5, "y": 5}})
	if m := w.waitInput("err", 5*time.Second); !strings.Contains(m["message"].(string), "view-only") {
		t.Errorf("view-only input: %v, want refused as view-only", m)
	}
	if err := p.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if evs := p.Take(); len(evs) != 0 {
		t.Errorf("a view-only viewer's input reached the desktop: %v", evs)
	}

	// A WebRTC viewer may not use the websocket's input.
	b := join(t, e, clientOptions{noVideo: true})
	defer b.close()
	b.send(map[string]any{"type": "input", "input": map[string]any{"t": "mm", "x": 5, "y": 5}})
	if m := b.waitMsg("error", 5*time.Second); !strings.Contains(m["message"].(string), "websocket transport") {
		t.Errorf("input without the transport: %v", m)
	}
}

// waitProbe syncs with the probe until done says the events are complete,
// or five seconds pass.
func waitProbe(t *testing.T, p *xprobe.Probe, done func([]xprobe.Event) bool) []xprobe.Event {
	t.Helper()
	var evs []xprobe.Event
	deadline := time.Now().Add(5 * time.Second)
	for {
		if err := p.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, p.Take()...)
		if done(evs) || time.Now().After(deadline) {
			return evs
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestWSStuckViewer: a viewer that never reads nor acks holds a bounded
// number of frames, is dropped once they go unacknowledged for the wait,
// and never holds up a viewer that keeps up.
func TestWSStuckViewer(t *testing.T) {
	e := newEnv(t, envOptions{width: 640, height: 400, cfg: Config{wsAckWait: 2 * time.Second}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	noise(ctx, t, e, 15)
	good := joinWS(t, e, wsOptions{})
	defer good.close()

	// The stuck one asks for the video and never reads another byte.
	stuck, _ := dialWS(t, e.wsURL(""))
	defer stuck.Close()
	stuck.WriteJSON(map[string]any{"type": "transport", "kind": "websocket"})

	deadline := time.Now().Add(30 * time.Second)
	for len(e.s.Viewers()) > 1 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if vs := e.s.Viewers(); len(vs) != 1 || vs[0].ID != good.hello.ID {
		t.Fatalf("viewers %+v: the stuck viewer was not dropped", vs)
	}
	before := good.got.Load()
	waitUntil(t, 10*time.Second, func() bool { return good.got.Load() > before+10 }, "the viewer that keeps up stopped getting frames")
}

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

// TestWSSlowReader: a viewer behind a thin link (its acks come at 200
// kbit/s, below the 300 kbit/s floor) gets fewer frames than one that keeps
// up, and its estimate takes the shared encoder's target down from where it
// started: the lowest link sets the rate, as with GCC viewers.
func TestWSSlowReader(t *testing.T) {
	e := newEnv(t, envOptions{width: 640, height: 400, cfg: Config{BitrateKbps: 4000, MinBitrateKbps: 300}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	noise(ctx, t, e, 30)
	fast := joinWS(t, e, wsOptions{})
	defer fast.close()
	slow := joinWS(t, e, wsOptions{linkBps: 200_000})
	defer slow.close()

	st, ok := watchTarget(e, 30*time.Second, func(st Stats) bool { return st.TargetKbps > 0 && st.TargetKbps < 1000 })
	if !ok {
		t.Fatalf("target %d kbit/s after 30 s with a websocket viewer on a 200 kbit/s link, want under 1000 (links %+v)", st.TargetKbps, e.s.Links())
	}
	f0, s0 := fast.got.Load(), slow.got.Load()
	time.Sleep(3 * time.Second)
	fn, sn := fast.got.Load()-f0, slow.got.Load()-s0
	t.Logf("target %d kbit/s at %d fps; in 3 s the fast viewer got %d frames, the slow one %d; links %+v", st.TargetKbps, st.TargetFPS, fn, sn, e.s.Links())
	if sn >= fn {
		t.Errorf("the slow viewer got %d frames, the fast one %d: the slow one should skip frames", sn, fn)
	}
	for _, l := range e.s.Links() {
		if l.Viewer == slow.hello.ID && (l.Transport != "websocket" || l.EstimateKbps > 1000) {
			t.Errorf("slow link %+v: want transport websocket and an estimate under 1000 kbit/s", l)
		}
	}
}

// TestWSBesideWebRTC: a WebRTC viewer and a websocket viewer watch the same
// encode: both get frames, from one run of the loop, and each link says
// its transport.
func TestWSBesideWebRTC(t *testing.T) {
	e := newEnv(t, envOptions{width: 640, height: 400})
	p := e.probe(t)
	rtc := join(t, e, clientOptions{})
	defer rtc.close()
	ws := joinWS(t, e, wsOptions{})
	defer ws.close()
	rtc.waitFrame(10 * time.Second)
	ws.waitFrame(10 * time.Second)
	for i := 0; i < 3; i++ {
		p.Fill(0, 0, 100, 100, uint32(0x405060+i*0x111111))
		rtc.waitFrame(10 * time.Second)
		ws.waitFrame(10 * time.Second)
	}
	if st := e.s.Stats(); st.PipelineStarts != 1 {
		t.Errorf("the loop started %d times, want once for both viewers", st.PipelineStarts)
	}
	kinds := map[string]string{}
	for _, l := range e.s.Links() {
		kinds[l.Viewer] = l.Transport
	}
	if kinds[ws.hello.ID] != "websocket" || kinds[rtc.hello.ID] != "udp" {
		t.Errorf("links' transports %v, want %s websocket and %s udp", kinds, ws.hello.ID, rtc.hello.ID)
	}
}
