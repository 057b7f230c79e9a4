package stream

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/pion/webrtc/v4"
)

// The one-port fallback (docs/STREAM.md, "Video over the websocket"): a
// viewer whose WebRTC cannot get through (no UDP, no TURN, an ingress that
// carries only HTTP) asks for the video on its signalling websocket. It gets
// the same H.264 access units the WebRTC viewers get, from the same encode,
// one binary message each, and sends its input as {"type":"input"} messages
// on the same socket. H.264 only: it is what WebCodecs decodes everywhere.

// Websocket video limits.
const (
	// wsFrameHeader is the size of a video message's header: version,
	// flags, frame number, capture time (wsFrame).
	wsFrameHeader  = 14
	wsFrameVersion = 1
	wsFlagKey      = 1 // the access unit is an IDR picture with its SPS and PPS
	// wsMaxInFlight is the most frames sent and not yet acknowledged,
	// whatever their size: two seconds at 30 frames a second.
	wsMaxInFlight = 60
	// wsBudget is how much of a second of the estimate may be in flight
	// (bytes sent, not acknowledged) on top of the link's least round
	// trip before frames are dropped: a quarter second of queue is the
	// most delay the transport adds, so a person's click does not wait
	// behind seconds of video in TCP buffers.
	wsBudget = 0.25
	// wsMinBudget keeps a thin estimate from starving the link: a single
	// frame is always sent when nothing is in flight, and this much more.
	wsMinBudget = 64 << 10
	// wsBinQueue is the binary messages queued for the writer goroutine.
	wsBinQueue = 8
	// wsAdaptEvery is how often acknowledgements move the estimate.
	wsAdaptEvery = 200 * time.Millisecond
	// wsGrow and wsBackoff are the estimate's steps: up while the link
	// keeps up, down to a share of what was acknowledged when it did not.
	wsGrow    = 1.08
	wsBackoff = 0.85
	// wsDefaultAckWait is how long frames may go unacknowledged before the
	// viewer counts as gone (Config.wsAckWait overrides it in tests).
	wsDefaultAckWait = 10 * time.Second
	// wsMaxDecodeMillis bounds the decode time an ack may report.
	wsMaxDecodeMillis = 60000
)

// wsFrame is the binary message for one access unit:
//
//	byte 0      version (1)
//	byte 1      flags: bit 0 set for a keyframe (SPS, PPS and IDR)
//	bytes 2-5   frame number, big-endian uint32, from 1 for each viewer
//	bytes 6-13  capture time, microseconds since the Unix epoch, big-endian uint64
//	bytes 14-   the access unit, H.264 Annex-B (start codes)
func wsFrame(seq uint32, key bool, at time.Time, au []byte) []byte {
	b := make([]byte, wsFrameHeader+len(au))
	b[0] = wsFrameVersion
	if key {
		b[1] = wsFlagKey
	}
	binary.BigEndian.PutUint32(b[2:], seq)
	binary.BigEndian.PutUint64(b[6:], uint64(at.UnixMicro()))
	copy(b[wsFrameHeader:], au)
	return b
}

// wsFrameInfo reads a video message's header (the tests' and the fuzzer's
// reader; the page has its own in wsvideo.js).
func wsFrameInfo(b []byte) (seq uint32, key bool, at time.Time, au []byte, err error) {
	if len(b) < wsFrameHeader {
		return 0, false, time.Time{}, nil, fmt.Errorf("a video message of %d bytes is shorter than its %d-byte header", len(b), wsFrameHeader)
	}
	if b[0] != wsFrameVersion {
		return 0, false, time.Time{}, nil, fmt.Errorf("video message version %d, want %d", b[0], wsFrameVersion)
	}
	return binary.BigEndian.Uint32(b[2:]), b[1]&wsFlagKey != 0, time.UnixMicro(int64(binary.BigEndian.Uint64(b[6:]))), b[wsFrameHeader:], nil
}

// transportReplyMsg confirms {"type":"transport"}: binary video messages
// follow.
type transportReplyMsg struct {
	Type   string `json:"type"` // "transport"
	Kind   string `json:"kind"` // "websocket"
	Codec  string `json:"codec"`
	Header int    `json:"header"` // bytes before the access unit in each video message
}

// inputEnvelope carries an input-channel message on the websocket.
type inputEnvelope struct {
	Type  string `json:"type"` // "input"
	Input any    `json:"input"`
}

// ack is a validated {"type":"ack"}.
type ack struct {
	seq      uint32
	decodeMs float64 // -1 when not given
}

// parseAck checks {"type":"ack","seq":N,"decode_ms":D}.
func parseAck(m clientMsg) (ack, error) {
	if m.Seq == nil {
		return ack{}, errors.New("ack needs \"seq\": the number of the last video frame the page decoded")
	}
	if *m.Seq != math.Trunc(*m.Seq) || *m.Seq < 1 || *m.Seq > math.MaxUint32 {
		return ack{}, fmt.Errorf("ack \"seq\" is %g: it must be a frame number, a whole number 1..%d", *m.Seq, uint32(math.MaxUint32))
	}
	a := ack{seq: uint32(*m.Seq), decodeMs: -1}
	if m.DecodeMs != nil {
		if math.IsNaN(*m.DecodeMs) || *m.DecodeMs < 0 || *m.DecodeMs > wsMaxDecodeMillis {
			return ack{}, fmt.Errorf("ack \"decode_ms\" is %g: it must be 0..%d milliseconds", *m.DecodeMs, wsMaxDecodeMillis)
		}
		a.decodeMs = *m.DecodeMs
	}
	return a, nil
}

// parseTransport checks {"type":"transport","kind":...}.
func parseTransport(m clientMsg) error {
	switch m.Kind {
	case "websocket":
		return nil
	case "":
		return errors.New("transport needs \"kind\": \"websocket\" (WebRTC needs no request: send an offer)")
	default:
		return fmt.Errorf("unknown transport %q: the only one to ask for is \"websocket\" (WebRTC needs no request: send an offer)", truncate(m.Kind, 40))
	}
}

// sentFrame is a frame in flight.
type sentFrame struct {
	seq   uint32
	bytes int
	at    time.Time
}

// wsVideo is one websocket viewer's video: what is in flight, what was
// acknowledged, and the estimate congestion control reads.
type wsVideo struct {
	out     chan<- []byte // the viewer's binary queue, drained by its writer
	ackWait time.Duration
	minBps  int
	maxBps  int

	mu       sync.Mutex
	seq      uint32      // the last frame number sent
	inFlight []sentFrame // oldest first
	flyBytes int
	acked    []sentFrame // acknowledged in the last second, for the rate
	estBps   int
	refused  bool // a frame was refused since the estimate last moved
	adapted  time.Time
	rttMs    float64
	minRTT   time.Duration // the least send-to-ack time seen: the link's own delay, decode included
	firstAck time.Time
	decodeMs float64
}

func newWSVideo(out chan<- []byte, cfg Config) *wsVideo {
	wait := cfg.wsAckWait
	if wait <= 0 {
		wait = wsDefaultAckWait
	}
	// The estimate's floor is the size rung's, as GCC's is (registerCC).
	return &wsVideo{out: out, ackWait: wait, minBps: cfg.estimateFloorBps(), maxBps: cfg.MaxBitrateKbps * 1000, estBps: cfg.BitrateKbps * 1000}
}

// GetTargetBitrate is the estimate (bit/s), read by congestion control like
// a GCC viewer's.
func (w *wsVideo) GetTargetBitrate() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.estBps
}

// errAckTimeout ends a viewer whose page stopped acknowledging frames.
var errAckTimeout = errors.New("the browser stopped acknowledging video frames")

// offer tries to queue f for the writer: false when the link is full (too
// many frames or bytes in flight, or the writer's queue is full), and an
// error when the oldest frame in flight has waited longer than ackWait.
func (w *wsVideo) offer(f *encFrame, now time.Time) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.inFlight) > 0 && now.Sub(w.inFlight[0].at) > w.ackWait {
		return false, fmt.Errorf("%w for %v", errAckTimeout, w.ackWait)
	}
	budget := max(wsMinBudget, int(float64(w.estBps)/8*(wsBudget+w.minRTT.Seconds())))
	if len(w.inFlight) > 0 && (len(w.inFlight) >= wsMaxInFlight || w.flyBytes+len(f.data) > budget) {
		w.refused = true
		return false, nil
	}
	msg := wsFrame(w.seq+1, f.key, f.at, f.data)
	select {
	case w.out <- msg:
	default:
		w.refused = true
		return false, nil
	}
	w.seq++
	w.inFlight = append(w.inFlight, sentFrame{seq: w.seq, bytes: len(msg), at: now})
	w.flyBytes += len(msg)
	return true, nil
}

// stale reports whether frames have waited for an ack longer than ackWait.
func (w *wsVideo) stale(now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.inFlight) > 0 && now.Sub(w.inFlight[0].at) > w.ackWait
}

// onAck takes the page's acknowledgement of every frame up to a.seq, and
// moves the estimate at most every wsAdaptEvery: up while no frame was
// refused, down to a share of the rate acknowledged over the last second
// when frames were (the queue was deeper than the budget).
func (w *wsVideo) onAck(a ack, now time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if a.seq > w.seq {
		return fmt.Errorf("ack of frame %d, but only %d were sent", a.seq, w.seq)
	}
	n := 0
	for n < len(w.inFlight) && w.inFlight[n].seq <= a.seq {
		f := w.inFlight[n]
		w.flyBytes -= f.bytes
		w.acked = append(w.acked, sentFrame{seq: f.seq, bytes: f.bytes, at: now})
		if f.seq == a.seq {
			rtt := now.Sub(f.at)
			w.rttMs = float64(rtt.Microseconds()) / 1000
			if w.minRTT == 0 || rtt < w.minRTT {
				w.minRTT = rtt
			}
		}
		n++
	}
	w.inFlight = w.inFlight[n:]
	if a.decodeMs >= 0 {
		w.decodeMs = a.decodeMs
	}
	cut := 0
	for cut < len(w.acked) && now.Sub(w.acked[cut].at) > time.Second {
		cut++
	}
	w.acked = w.acked[cut:]
	if w.firstAck.IsZero() {
		w.firstAck = now
	}
	if now.Sub(w.adapted) < wsAdaptEvery {
		return nil
	}
	w.adapted = now
	if w.refused {
		// The link did not take what was sent: back off to a share of what
		// it carried over the last second, but at most by half per step: a
		// desktop that changes little sends far less than the link takes
		// (it is application-limited), and one late ack (a busy decoder)
		// must not throw the estimate down to that. In the first second,
		// when the rate is not measured yet, by wsBackoff alone.
		target := float64(w.estBps) * wsBackoff
		if now.Sub(w.firstAck) >= time.Second {
			rate := 0
			for _, f := range w.acked {
				rate += f.bytes * 8
			}
			target = min(target, max(float64(rate)*wsBackoff, float64(w.estBps)/2))
		}
		w.estBps = max(w.minBps, int(target))
	} else {
		w.estBps = min(w.maxBps, int(float64(w.estBps)*wsGrow)+1000)
	}
	w.refused = false
	return nil
}

// numbers is the link's round trip (send to ack, decode included) and the
// page's last decode time.
func (w *wsVideo) numbers() (rttMs, decodeMs float64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rttMs, w.decodeMs
}

// sendWS sends frames to one websocket viewer. A frame the link has no room
// for is dropped, and so is every delta after it until the next keyframe
// (which it asks for, through the loop's rate limit): a delta after a gap
// would decode to garbage.
func (p *pipeline) sendWS(sub *subscriber, w *wsVideo, gone func(error)) {
	defer close(sub.done)
	check := time.NewTicker(time.Second)
	defer check.Stop()
	needKey := false
	for {
		var f *encFrame
		select {
		case <-sub.quit:
			return
		case <-check.C:
			// An idle desktop sends nothing; the frames already out must
			// still come back.
			if w.stale(time.Now()) {
				gone(fmt.Errorf("%w for %v", errAckTimeout, w.ackWait))
				return
			}
			continue
		case f = <-sub.q:
		}
		if needKey && !f.key {
			p.counters.dropped.Add(1)
			continue
		}
		ok, err := w.offer(f, time.Now())
		if err != nil {
			gone(err)
			return
		}
		if !ok {
			p.counters.dropped.Add(1)
			if !needKey || f.key {
				p.requestKeyframe(sub.codec, "a websocket viewer's link is full")
			}
			needKey = true
			continue
		}
		needKey = false
		p.counters.bytesSent.Add(uint64(len(f.data)))
		if sub.link != nil {
			sub.link.sent.add(time.Now(), len(f.data), f.key)
		}
	}
}

// onTransport switches v's video to the websocket: any peer connection it
// was negotiating is closed, and the viewer joins the shared H.264 encode.
func (v *viewer) onTransport(m clientMsg) {
	if err := parseTransport(m); err != nil {
		v.sendError(CodeBadMessage, "%v", err)
		return
	}
	var h264 *sendCodec
	for i := range v.s.codecs {
		if v.s.codecs[i].Name == "h264" {
			h264 = &v.s.codecs[i]
		}
	}
	if h264 == nil {
		v.sendError(CodeInternal, "this server does not encode H.264, the only video the websocket transport carries: use WebRTC")
		return
	}
	v.mu.Lock()
	switch {
	case v.wsv != nil:
		v.mu.Unlock()
		v.sendError(CodeBadMessage, "this session already receives its video on the websocket")
		return
	case v.video:
		v.mu.Unlock()
		v.sendError(CodeBadMessage, "this session already receives its video over WebRTC: open a new websocket to use the websocket transport")
		return
	}
	w := newWSVideo(v.bin, v.s.cfg)
	pc, dc := v.pc, v.dc
	// The peer connection's callbacks check v.pc: with it gone they ignore
	// its closing.
	v.pc, v.dc, v.wsv = nil, nil, w
	out := videoOut{codec: h264, ws: w, link: v.link, gone: func(err error) { v.close(err.Error()) }}
	v.send = out
	v.mu.Unlock()
	if dc != nil {
		dc.Close()
	}
	if pc != nil {
		if err := pc.Close(); err != nil {
			v.log.Debug("closing the abandoned peer connection", "err", err)
		}
	}
	v.log.Info("video on the websocket")
	v.sendJSON(transportReplyMsg{Type: "transport", Kind: "websocket", Codec: h264.Name, Header: wsFrameHeader})
	v.startVideo(out)
}

// onAck handles {"type":"ack"}.
func (v *viewer) onAck(m clientMsg) {
	a, err := parseAck(m)
	if err == nil {
		v.mu.Lock()
		w := v.wsv
		v.mu.Unlock()
		if w == nil {
			err = errors.New("ack without the websocket transport: ask for it with {\"type\":\"transport\",\"kind\":\"websocket\"}")
		} else {
			err = w.onAck(a, time.Now())
		}
	}
	if err != nil {
		v.sendError(CodeBadMessage, "%v", err)
	}
}

// onWSInput handles {"type":"input","input":{...}}: the message the input
// data channel would carry, through the same parser and gates.
func (v *viewer) onWSInput(m clientMsg) {
	v.mu.Lock()
	w := v.wsv
	v.mu.Unlock()
	if w == nil {
		v.sendError(CodeBadMessage, "input on the websocket is for the websocket transport: use the \"input\" data channel, or ask for {\"type\":\"transport\",\"kind\":\"websocket\"}")
		return
	}
	if len(m.Input) == 0 || string(m.Input) == "null" {
		v.inputErrorWS(errors.New("input needs \"input\": one input message, e.g. {\"t\":\"kd\",\"k\":65293}"))
		return
	}
	if err := v.onInput(webrtc.DataChannelMessage{IsString: true, Data: m.Input}); err != nil {
		v.inputErrorWS(err)
	}
}

// inputErrorWS tells a websocket viewer why an input was refused, as the
// data channel would ({"t":"err"} inside an input envelope).
func (v *viewer) inputErrorWS(err error) {
	v.s.video.counters.inputErrors.Add(1)
	v.sendJSON(inputEnvelope{Type: "input", Input: inputErrMsg{T: "err", Message: err.Error()}})
}

// wsLinkStats is a websocket viewer's link.
func (v *viewer) wsLinkStats(w *wsVideo, now time.Time) LinkStats {
	st := LinkStats{Viewer: v.id, Codec: "h264", Transport: "websocket"}
	v.s.video.setTarget(&st)
	if !v.s.cfg.FixedBitrate {
		st.EstimateKbps = w.GetTargetBitrate() / 1000
	}
	c, keys := v.link.sent.read(now)
	st.FPS, st.SentKbps, st.Keyframes = float64(c.frames), float64(c.bytes)*8/1000, keys
	st.RTTMillis, _ = w.numbers()
	return st
}
