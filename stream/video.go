package stream

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"

	"github.com/deskenv/deskenv/hci"
)

// rtpPayloadMTU is the most payload per RTP packet: pion's usual 1200-byte
// packets less the 12-byte RTP header, which stays under every path MTU
// after SRTP and UDP/IP overhead.
const rtpPayloadMTU = 1200 - 12

// geometry is the screen and video size the loop works with, and the exact
// mapping from video pixels to screen pixels for input.
type geometry struct {
	sw, sh, vw, vh int
	space          hci.Space // Model = video
}

// encFrame is one encoded frame, shared read-only by every viewer of its
// codec.
type encFrame struct {
	codec string // sendCodec.Name
	data  []byte // H.264: an Annex-B access unit; VP8: a frame
	key   bool
	at    time.Time // when it was captured: RTP timestamps follow the real clock
}

// estimator is a viewer's estimate of its link, read by congestion control:
// GCC's for WebRTC viewers, the acknowledgements' for websocket ones.
type estimator interface{ GetTargetBitrate() int }

// subscriber is one viewer's end of the fan-out.
type subscriber struct {
	id      string
	codec   string // the Name of the codec it is sent
	pay     rtp.Payloader
	track   *webrtc.TrackLocalStaticRTP
	bwe     estimator  // nil without congestion control
	link    *linkStats // nil in tests that subscribe directly
	q       chan *encFrame
	needKey bool // guarded by pipeline.mu: drop until the next keyframe
	quit    chan struct{}
	done    chan struct{}
}

type counters struct {
	captured, encoded, skipped, dropped, keyframes atomic.Uint64
	refined, keepalive                             atomic.Uint64
	bytesEncoded, bytesSent, starts, keyRequests   atomic.Uint64
	encodeNanos, lastEncodeNanos                   atomic.Int64
	inputs, inputErrors                            atomic.Uint64
	rateChanges                                    atomic.Uint64
}

// pipeline is the display's one capture and encode loop and its fan-out. It
// runs only while at least one viewer is subscribed, with one encoder for
// each codec viewers use.
type pipeline struct {
	s        *Server
	counters counters
	geom     atomic.Pointer[geometry]
	keyReq   atomic.Bool     // a keyframe was asked for since the last one
	keyMu    sync.Mutex      // guards keyWant; fanOut asks with mu held
	keyWant  map[string]bool // the codecs keyReq is for
	kick     chan struct{}   // wakes the loop for a keyframe request
	// codecGen changes whenever inUse does, so the loop knows when to open
	// or close encoders without taking mu on every tick.
	codecGen atomic.Uint64
	// target is the rung congestion control set last; the next run of the
	// loop starts from it.
	target atomic.Pointer[rung]

	mu      sync.Mutex
	subs    map[*subscriber]struct{}
	inUse   map[string]int // viewers per codec name
	running bool
	cancel  context.CancelFunc
	done    chan struct{}
	closed  bool
}

func newPipeline(s *Server) *pipeline {
	p := &pipeline{s: s, subs: map[*subscriber]struct{}{}, inUse: map[string]int{}, kick: make(chan struct{}, 1)}
	r := s.startRung(p.refreshGeometry())
	p.target.Store(&r)
	return p
}

// refreshGeometry reads the screen size; the video size follows Config.
func (p *pipeline) refreshGeometry() *geometry {
	sw, sh := p.s.d.Size()
	vw, vh, err := p.s.cfg.videoSize(sw, sh)
	if err != nil {
		// The screen shrank below the configured video size: send the
		// screen's own size rather than nothing.
		vw, vh = sw&^1, sh&^1
	}
	g := &geometry{sw: sw, sh: sh, vw: vw, vh: vh, space: hci.Space{ScreenW: sw, ScreenH: sh, ModelW: vw, ModelH: vh}}
	p.geom.Store(g)
	return g
}

func (p *pipeline) geometry() *geometry { return p.geom.Load() }

// targetSize is the size of the video the rung in use sends; input and the
// hello keep to the geometry's video size whatever it is (docs/STREAM.md).
func (p *pipeline) targetSize() (int, int) {
	g := p.geometry()
	return encodeSize(g, p.target.Load().half && canHalve(g.vw, g.vh))
}

// sizes is video then screen size, for the hello.
func (p *pipeline) sizes() (vw, vh, sw, sh int) {
	g := p.geometry()
	return g.vw, g.vh, g.sw, g.sh
}

// subscribe adds a viewer to the fan-out, starting the loop for the first
// one (and the loop an encoder for the first of its codec). The viewer gets
// frames from the next keyframe on, which it asks for.
func (p *pipeline) subscribe(id string, out videoOut) *subscriber {
	var bwe estimator
	switch {
	case out.ws != nil && !p.s.cfg.FixedBitrate:
		bwe = out.ws
	case out.bwe != nil:
		bwe = out.bwe
	}
	sub := &subscriber{id: id, codec: out.codec.Name, pay: out.codec.NewPayloader(), track: out.track, bwe: bwe, link: out.link,
		q: make(chan *encFrame, p.s.cfg.QueueFrames), needKey: true, quit: make(chan struct{}), done: make(chan struct{})}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.subs[sub] = struct{}{}
	p.inUse[sub.codec]++
	p.codecGen.Add(1)
	if out.ws != nil {
		go p.sendWS(sub, out.ws, out.gone)
	} else {
		go p.send(sub)
	}
	if !p.running {
		p.running = true
		p.counters.starts.Add(1)
		// A new audience starts at BitrateKbps, as its estimators do: the
		// last audience's link says nothing about this one's.
		r := p.s.startRung(p.geometry())
		p.target.Store(&r)
		ctx, cancel := context.WithCancel(context.Background())
		p.cancel = cancel
		done := make(chan struct{})
		p.done = done
		go p.loop(ctx, done)
	}
	p.requestKeyframe(sub.codec, "a viewer joined")
	return sub
}

// unsubscribe removes a viewer; the loop stops with the last one.
func (p *pipeline) unsubscribe(sub *subscriber) {
	p.mu.Lock()
	if _, ok := p.subs[sub]; !ok {
		p.mu.Unlock()
		return
	}
	delete(p.subs, sub)
	if p.inUse[sub.codec]--; p.inUse[sub.codec] <= 0 {
		delete(p.inUse, sub.codec)
	}
	p.codecGen.Add(1)
	close(sub.quit)
	var done chan struct{}
	if len(p.subs) == 0 && p.running {
		p.running = false
		p.cancel()
		done = p.done
	}
	p.mu.Unlock()
	<-sub.done
	if done != nil {
		<-done
	}
}

// stop ends everything for good (Server.Close).
func (p *pipeline) stop() {
	p.mu.Lock()
	p.closed = true
	subs := make([]*subscriber, 0, len(p.subs))
	for sub := range p.subs {
		subs = append(subs, sub)
	}
	p.mu.Unlock()
	for _, sub := range subs {
		p.unsubscribe(sub)
	}
}

// takeKeyWant returns the codecs a keyframe was asked for and forgets them.
func (p *pipeline) takeKeyWant() map[string]bool {
	p.keyMu.Lock()
	defer p.keyMu.Unlock()
	w := p.keyWant
	p.keyWant = nil
	return w
}

// codecsInUse are the names of the codecs viewers are sent now.
func (p *pipeline) codecsInUse() map[string]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]bool, len(p.inUse))
	for c := range p.inUse {
		out[c] = true
	}
	return out
}

// requestKeyframe asks the loop for a keyframe of the named codec; the loop
// rate-limits them. Only that codec's encoder makes one: a VP8 viewer
// joining costs the H.264 viewers nothing but the same picture again.
func (p *pipeline) requestKeyframe(codec, why string) {
	p.counters.keyRequests.Add(1)
	p.keyMu.Lock()
	if p.keyWant == nil {
		p.keyWant = map[string]bool{}
	}
	p.keyWant[codec] = true
	p.keyMu.Unlock()
	if !p.keyReq.Swap(true) {
		p.s.log.Debug("keyframe requested", "why", why)
	}
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

func (p *pipeline) stats() Stats {
	c := &p.counters
	p.mu.Lock()
	running := p.running
	p.mu.Unlock()
	target := p.target.Load()
	tw, th := p.targetSize()
	return Stats{
		Encoding:        running,
		FramesCaptured:  c.captured.Load(),
		FramesEncoded:   c.encoded.Load(),
		FramesSkipped:   c.skipped.Load(),
		FramesDropped:   c.dropped.Load(),
		Keyframes:       c.keyframes.Load(),
		FramesRefined:   c.refined.Load(),
		FramesKeepalive: c.keepalive.Load(),
		EncodeTime:      time.Duration(c.encodeNanos.Load()),
		LastEncode:      time.Duration(c.lastEncodeNanos.Load()),
		BytesEncoded:    c.bytesEncoded.Load(),
		BytesSent:       c.bytesSent.Load(),
		PipelineStarts:  c.starts.Load(),
		KeyframeRequest: c.keyRequests.Load(),
		TargetKbps:      target.kbps,
		TargetFPS:       target.fps,
		TargetWidth:     tw,
		TargetHeight:    th,
		RateChanges:     c.rateChanges.Load(),
	}
}

// fanOut offers f to every viewer of its codec without waiting for any. A viewer whose
// queue is full misses frames until the next keyframe, and asks for one:
// falling behind must cost a glitch, never delay.
func (p *pipeline) fanOut(f *encFrame) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for sub := range p.subs {
		if sub.codec != f.codec {
			continue
		}
		if sub.needKey {
			if !f.key {
				p.counters.dropped.Add(1)
				continue
			}
			sub.needKey = false
		}
		select {
		case sub.q <- f:
		default:
			sub.needKey = true
			p.counters.dropped.Add(1)
			p.requestKeyframe(sub.codec, "a viewer fell behind")
		}
	}
}

// send packetizes frames for one viewer. Sequence numbers are the viewer's
// own, so frames it skipped leave no gap for the browser to NACK; timestamps
// come from the capture clock, so the browser plays frames at the pace they
// happened even when unchanged frames were never sent.
func (p *pipeline) send(sub *subscriber) {
	defer close(sub.done)
	seq := uint16(rand.Uint32())
	base := rand.Uint32()
	var t0 time.Time
	pkt := &rtp.Packet{Header: rtp.Header{Version: 2}}
	for {
		var f *encFrame
		select {
		case <-sub.quit:
			return
		case f = <-sub.q:
		}
		if t0.IsZero() {
			t0 = f.at
		}
		ts := base + uint32(f.at.Sub(t0).Microseconds()*90/1000)
		payloads := sub.pay.Payload(rtpPayloadMTU, f.data)
		for i, pl := range payloads {
			pkt.Marker = i == len(payloads)-1
			pkt.SequenceNumber = seq
			pkt.Timestamp = ts
			pkt.Payload = pl
			seq++
			// Errors are per binding and transient (a closing peer
			// connection); the viewer's session notices real failures.
			if err := sub.track.WriteRTP(pkt); err != nil {
				continue
			}
			p.counters.bytesSent.Add(uint64(len(pl)))
		}
		if sub.link != nil {
			sub.link.sent.add(time.Now(), len(f.data), f.key)
		}
	}
}
