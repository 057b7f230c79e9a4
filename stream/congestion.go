package stream

import (
	"sync"
	"time"

	"github.com/pion/interceptor"
	"github.com/pion/interceptor/pkg/cc"
	"github.com/pion/interceptor/pkg/gcc"
	"github.com/pion/webrtc/v4"
)

// Congestion control: every viewer's peer connection runs pion's GCC
// (send-side bandwidth estimation from the browser's transport-wide
// feedback). One encoder serves all viewers of a codec, so the loop
// follows the lowest estimate among them (docs/STREAM.md says why).

// adaptEvery is how often the loop reads the estimates. GCC updates its
// estimate about every feedback interval (~100 ms in Chromium); reading
// faster would only reconfigure the encoder for noise.
const adaptEvery = 250 * time.Millisecond

// estimateHeadroom is the share of the estimate the encoder is given: RTP,
// SRTP and UDP headers, RTCP, and NACK retransmissions ride on top of the
// encoder's bits, about a tenth on a link with a little loss.
const estimateHeadroom = 0.9

// fpsStep is one rung of the frame-rate ladder: below kbps the loop sends
// at most fpsDiv-th of Config.FPS. Fewer frames give each frame more bits,
// so text stays readable on a thin link instead of turning to mush at full
// rate. Steps back up need upHysteresis more than the threshold, so a link
// at the threshold does not flap between rates.
type fpsStep struct {
	kbps   int
	fpsDiv int
}

// fpsLadder is ordered from the thinnest link up. The thresholds are where
// a 1280x800 desktop at 30 fps in x264 superfast stops being legible while
// it changes (about 750 kbit/s, 25 kbit a frame: a still screen is sharpened
// by refinement in any case) and where even 15 fps is mostly blocks (400
// kbit/s). The first threshold was 1 Mbit/s; at 1 Mbit/s 150 ms 3 % loss
// that held the stream at 15 fps, of which Chromium showed 14 (freezes
// while NACK repaired), against 17.2 shown at 750 with p95 glass-to-glass
// still 304 ms (`deskbench network -profiles slow`, docs/BENCHMARKS.md).
var fpsLadder = [...]fpsStep{{kbps: 400, fpsDiv: 4}, {kbps: 750, fpsDiv: 2}}

// upHysteresis is how far above a step's threshold the target must be
// before the rate (or the size) steps back up.
const upHysteresis = 1.25

// The size rung sits below the frame-rate ladder's last step. Under
// halfSizeKbps (the estimate less headroom, before the floor) even a quarter
// of the frame rate is mush at full size: 250 kbit/s at 7 fps is about 35
// kbit a frame, 0.03 bits a pixel at 1280x800, where x264 smears text into
// blocks; at half width and height the same bits make 0.13 bits a pixel,
// what full size gets at about 1 Mbit/s, and text of ordinary size stays
// readable when the page scales it back up. 250 is also under the default
// floor (300), so the size only drops once the link cannot carry the
// floor: the floor keeps its meaning (the least worth sending at full
// size) and the size rung is what is left below it.
const halfSizeKbps = 250

// halfFloorDiv divides the floor at half size: a quarter of the pixels
// needs about a quarter of the bits for the same quality, so the floor's
// bits a pixel hold at the smaller size. GCC's own floor is set to it too
// (registerCC), or its estimate could never fall under the floor and the
// size rung would never be reached.
const halfFloorDiv = 4

// minHalfSide is the least width or height a halved video may have: below
// it a picture is too small to show anything and halving is skipped.
const minHalfSide = 64

// sizeHold is the least time between two size changes. Every change opens
// the encoders again and costs each viewer a keyframe at the new size, and
// a jump in sharpness they see; an estimate that wanders across both
// hysteresis edges must not turn into a keyframe storm.
const sizeHold = 2 * time.Second

// sizeUpAfter is how long a step up in size must stay due before it is
// taken. The estimate can leap for a moment just after the size went down:
// half size sends less, so the loss average falls and the target returns to
// the delay-based estimate, which has not yet seen the thin link. Measured
// in Chromium behind tc tbf at 150 kbit/s (TestBrowserSizeSwitch): 138 ->
// 618 kbit/s 2.3 s after the switch, and down again in 0.3 s once the full
// size overshot. A link that really recovered stays above the threshold;
// going down is never delayed.
//
// The estimate can also stay wrong for longer: on a link that drops rather
// than queues, the delay-based estimate hardly falls, and once loss averages
// under severeLoss the target is that estimate again (2.8 Mbit/s on the 150
// kbit/s link above). So a step up undone within sizeJudge doubles the wait
// for the next, up to sizeMaxWait, as TCP's backoff does: a link that
// cannot carry full size costs a keyframe and a moment of overshoot at
// longer and longer intervals, not every few seconds; a step up that holds
// for sizeJudge sets the wait back.
const (
	sizeUpAfter = 4 * time.Second
	sizeJudge   = 10 * time.Second
	sizeMaxWait = 64 * time.Second
)

// idleShare: a stream that sends less than this share of the estimate is
// application-limited, and its estimate says little about the link. pion's
// GCC then cannot grow: near the rate of its last cut it caps the estimate
// at 1.5 times what arrived, so a quiet desktop at half size (a few kbit/s)
// holds the estimate at its floor however wide the link has become (seen in
// TestBrowserSizeSwitch: 75 kbit/s for 90 s on a 20 Mbit/s link while 7
// kbit/s were sent). A half-size stream that is idle this way probes: it
// steps up to full size after the same wait, and stays there unless the
// estimate falls (estimateFallShare), which is what a link too thin for it
// does, where an idle one lets the estimate grow on the larger stream.
const idleShare = 0.5

// estimateFallShare is the share of the estimate at a step (a size probe's,
// the frame rate's last change) below which the link counts as congested,
// for both gates.
const estimateFallShare = 0.85

// sizeGate decides when the size changes, around what the ladder says: a
// step up (the ladder's, or a probe on an idle stream) after the present
// wait without a break, a step down at once, and the backoff between steps
// up that did not hold.
type sizeGate struct {
	up       stepBackoff // sizeUpAfter, sizeMaxWait, sizeJudge
	probeEst int         // the estimate (bit/s) when a probe stepped up; 0 when not probing
}

func newSizeGate() sizeGate {
	return sizeGate{up: stepBackoff{first: sizeUpAfter, max: sizeMaxWait, judge: sizeJudge}}
}

// half is the size to use: cur is the one in use (true: half), ladderHalf
// what the ladder says for est (bit/s), idle whether the stream sends well
// under the estimate.
func (g *sizeGate) half(now time.Time, cur, ladderHalf, idle bool, est int) bool {
	g.up.tick(now)
	if !cur {
		down := ladderHalf
		if g.probeEst > 0 {
			if !ladderHalf {
				g.probeEst = 0 // the estimate caught up: an ordinary full size now
			}
			down = ladderHalf && float64(est) < estimateFallShare*float64(g.probeEst)
		}
		if !down {
			return false
		}
		g.up.undone()
		g.probeEst = 0
		return true
	}
	if !g.up.due(now, !ladderHalf || idle) {
		return true
	}
	if ladderHalf {
		g.probeEst = max(1, est)
	}
	return false
}

// encodedRate is what the encoders produce, per encoder, smoothed over
// about a second: read at each adaptation from the bytes-encoded counter.
type encodedRate struct {
	at    time.Time
	bytes uint64
	kbps  float64
}

// update takes the counter (bytes of all encoders, encoders of them) and
// returns the rate in kbit/s; 0 until two readings.
func (m *encodedRate) update(now time.Time, total uint64, encoders int) float64 {
	if !m.at.IsZero() && total >= m.bytes {
		if dt := now.Sub(m.at).Seconds(); dt > 0 {
			k := float64(total-m.bytes) * 8 / 1000 / dt / float64(max(1, encoders))
			m.kbps = 0.6*m.kbps + 0.4*k
		}
	}
	m.at, m.bytes = now, total
	return m.kbps
}

// rung is what the encoder is set to: the bitrate the viewers should get,
// the frame rate the loop sends at and whether the video goes at half its
// width and height.
type rung struct {
	kbps int // the wire bitrate aimed at
	fps  int
	half bool // the video at half width and height (videoRun.encodeSize)
}

// rateLimits are the bounds the ladder works in.
type rateLimits struct {
	minKbps, maxKbps, fps int
	// halve says the size rung may be used: congestion control is on and
	// the video is big enough to halve.
	halve bool
	// holdSize keeps the size of the rung in use (a change of size was
	// too recent, sizeHold).
	holdSize bool
}

// halfFloor is the floor at half size.
func (l rateLimits) halfFloor() int { return max(1, l.minKbps/halfFloorDiv) }

// next is the rung for an estimate of estBps bit/s, given the one in use
// (prev; zero for none). The ladder, from a wide link down: full rate, half
// the frame rate below 750 kbit/s, a quarter below 400 kbit/s, and half the
// width and height (at a quarter of the frame rate) below halfSizeKbps; each
// step back up needs upHysteresis more than its threshold. The bitrate is
// clamped between the floor (a quarter of it at half size) and the
// ceiling.
func (l rateLimits) next(prev rung, estBps int) rung {
	raw := int(float64(estBps) * estimateHeadroom / 1000)
	half := false
	switch {
	case l.holdSize:
		half = prev.half
	case l.halve:
		limit := float64(halfSizeKbps)
		if prev.half {
			limit *= upHysteresis // at half size already: leave it only when clearly above
		}
		half = float64(raw) < limit
	}
	floor := l.minKbps
	if half {
		floor = l.halfFloor()
	}
	kbps := max(floor, min(l.maxKbps, raw))
	if half {
		// The bottom of the frame-rate ladder: sizes step down after the
		// frame rate, never instead of it.
		return rung{kbps: kbps, fps: max(1, l.fps/fpsLadder[0].fpsDiv), half: true}
	}
	prevDiv := 1
	if prev.fps > 0 && prev.fps < l.fps {
		prevDiv = l.fps / prev.fps
	}
	div := 1
	for _, st := range fpsLadder {
		limit := float64(st.kbps)
		if prevDiv >= st.fpsDiv {
			limit *= upHysteresis // on this step already: leave it only when clearly above
		}
		if float64(kbps) < limit {
			div = st.fpsDiv
			break
		}
	}
	return rung{kbps: kbps, fps: max(1, l.fps/div)}
}

// canHalve says whether a video of w x h may go at half size.
func canHalve(w, h int) bool { return w/2 >= minHalfSide && h/2 >= minHalfSide }

// halfSize is w x h halved, kept even as 4:2:0 video needs.
func halfSize(w, h int) (int, int) { return (w / 2) &^ 1, (h / 2) &^ 1 }

// startRung is where a new audience starts: BitrateKbps at the full frame
// rate, as the estimators start, and at half size when that bitrate is
// already under the size rung (a deployment told to send 200 kbit/s).
func (s *Server) startRung(g *geometry) rung {
	r := rung{kbps: s.cfg.BitrateKbps, fps: s.cfg.FPS}
	if !s.cfg.FixedBitrate && canHalve(g.vw, g.vh) {
		r.half = s.limits(g, false).next(rung{}, s.cfg.BitrateKbps*1000).half
	}
	return r
}

// limits are the ladder's bounds for a video of g's size.
func (s *Server) limits(g *geometry, holdSize bool) rateLimits {
	c := s.cfg
	return rateLimits{minKbps: c.MinBitrateKbps, maxKbps: c.MaxBitrateKbps, fps: c.FPS,
		halve: !c.FixedBitrate && canHalve(g.vw, g.vh), holdSize: holdSize}
}

// estimateFloorBps is the least estimate GCC and the websocket's estimator
// may reach: the floor at half size, so the estimate can fall under the
// full-size floor and the size rung be reached.
func (c Config) estimateFloorBps() int { return max(1, c.MinBitrateKbps/halfFloorDiv) * 1000 }

// encoderKbps is the bitrate to give an encoder opened at nominalFPS so that
// at r.fps it spends r.kbps: x264 and libvpx both budget each frame as
// 1/nominal of a second (constant-rate input), so sending half the frames
// would halve the bitrate.
func (r rung) encoderKbps(nominalFPS int) int {
	if r.fps <= 0 || r.fps >= nominalFPS {
		return r.kbps
	}
	return r.kbps * nominalFPS / r.fps
}

// estimators hands each new peer connection's bandwidth estimator to the
// viewer whose NewPeerConnection made it: pion builds a connection's
// interceptors inside NewPeerConnection and names them by an id it does not
// expose, so the server makes connections one at a time and takes the
// estimator the factory reported during the call.
type estimators struct {
	mu   sync.Mutex // held across NewPeerConnection
	last cc.BandwidthEstimator
}

// newPeer makes a peer connection with api and returns the estimator made
// for it (nil when congestion control is off).
func (e *estimators) newPeer(api *webrtc.API, conf webrtc.Configuration) (*webrtc.PeerConnection, cc.BandwidthEstimator, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.last = nil
	pc, err := api.NewPeerConnection(conf)
	bwe := e.last
	e.last = nil
	if bwe != nil {
		bwe = lossTolerant{bwe}
	}
	return pc, bwe, err
}

// severeLoss is the loss share above which lossTolerant cuts the rate for
// loss: the draft's decrease threshold (10 %, draft-ietf-rmcat-gcc-02
// section 6), where loss is no longer what NACK and RTX repair in a round
// trip.
const severeLoss = 0.10

// lossTolerant is GCC's estimate with a different answer to random loss.
// pion's loss controller (the draft's) raises its rate only while loss stays
// under 2 % and keeps it at or below the delay controller's, so on a link
// that loses 3 % at random (Wi-Fi, a long path) it ratchets down to the
// floor and never comes back, although the link is nowhere near full: at 1
// Mbit/s 150 ms 3 % it held the stream at about 300 kbit/s and 7 fps
// (docs/STREAM.md, "On real networks"). Here loss the retransmissions repair
// is not taken for congestion: the estimate is the delay controller's, which
// sees a full link by its growing queue. Above severeLoss the draft's cut,
// (1 - loss/2), applies to it, afresh at each reading: pion's loss-based
// rate cannot be used there, since after a spell of moderate loss it sits
// at its floor (100 kbit/s) however wide the link. The loss average is over
// a few feedback reports, so on a thin stream one lost packet can pass 10 %
// for a moment; the cut then stays proportionate. libwebrtc made the same
// judgement in its second loss-based estimator, which tells random loss
// from loss that grows with the rate.
type lossTolerant struct{ cc.BandwidthEstimator }

// GetTargetBitrate is the delay-based target, cut for severe loss.
func (l lossTolerant) GetTargetBitrate() int {
	st := l.GetStats()
	delay, ok1 := st["delayTargetBitrate"].(int)
	loss, ok2 := st["averageLoss"].(float64)
	if !ok1 || !ok2 || delay <= 0 {
		return l.BandwidthEstimator.GetTargetBitrate()
	}
	if loss > severeLoss {
		return int(float64(delay) * (1 - 0.5*min(loss, 1)))
	}
	return delay
}

// registerCC adds GCC and the transport-wide sequence numbers to reg. It
// must come before NACK's responder in the registry: interceptors added
// first sit nearest the network, so retransmissions get sequence numbers
// and count in the estimate too.
func (s *Server) registerCC(m *webrtc.MediaEngine, reg *interceptor.Registry) error {
	// GCC's floor is the size rung's, under MinBitrateKbps: the encoder is
	// held at the floor at full size all the same (rateLimits.next), but
	// the estimate must be free to say the link is thinner than that.
	startBps, minBps, maxBps := s.cfg.BitrateKbps*1000, s.cfg.estimateFloorBps(), s.cfg.MaxBitrateKbps*1000
	f, err := cc.NewInterceptor(func() (cc.BandwidthEstimator, error) {
		// No pacer: the encoder's VBV already spreads a big frame over
		// about 1.5 frame times, and the leaky-bucket pacer's queue has no
		// bound, so behind a thin link it would add seconds of delay that
		// the per-viewer frame queue exists to avoid.
		return gcc.NewSendSideBWE(gcc.SendSideBWEInitialBitrate(startBps), gcc.SendSideBWEMinBitrate(minBps),
			gcc.SendSideBWEMaxBitrate(maxBps), gcc.SendSideBWEPacer(gcc.NewNoOpPacer()),
			gcc.WithLoggerFactory(pionLogs{s.log}))
	})
	if err != nil {
		return err
	}
	f.OnNewPeerConnection(func(_ string, bwe cc.BandwidthEstimator) { s.bwes.last = bwe })
	reg.Add(f)
	return webrtc.ConfigureTWCCHeaderExtensionSender(m, reg)
}

// adapt moves the encoders to the rung for the lowest estimate among the
// viewers, at most every adaptEvery. With FixedBitrate, or before any
// estimate, nothing changes. A change of size opens the encoders again at
// the new size (resize), so every viewer's next frame is a keyframe with
// the new size in its headers.
func (r *videoRun) adapt(now time.Time) {
	if r.p.s.cfg.FixedBitrate || now.Sub(r.lastAdapt) < adaptEvery {
		return
	}
	r.lastAdapt = now
	est, ok := r.p.lowestEstimate()
	if !ok {
		return
	}
	cfg := r.p.s.cfg
	hold := !r.sizeAt.IsZero() && now.Sub(r.sizeAt) < sizeHold
	next := r.p.s.limits(r.g, hold).next(r.rung, est)
	sent := r.encoded.update(now, r.p.counters.bytesEncoded.Load(), len(r.encs))
	// A ceiling under the way back up leaves nothing to probe for.
	idle := float64(est)/1000*idleShare > sent && float64(cfg.MaxBitrateKbps)*estimateHeadroom >= halfSizeKbps*upHysteresis
	if half := r.sizeGate.half(now, r.rung.half, next.half, idle, est); half != next.half {
		at := r.rung
		at.half = half
		next = r.p.s.limits(r.g, true).next(at, est) // the gate's size, the ladder's rate
	}
	next = r.probe.step(now, r.rung, next, est, sent)
	if next == r.rung {
		return
	}
	if next.half != r.rung.half {
		r.p.s.log.Info("video size changed", "half", next.half, "kbps", next.kbps, "estimate_kbps", est/1000)
		r.sizeAt = now
		r.resize(next.half) // the encoders open again at next's bitrate
	} else {
		for _, e := range r.encs {
			if err := e.enc.SetBitrate(next.encoderKbps(cfg.FPS)); err != nil {
				// The old bitrate stays; the next adaptation tries again.
				r.p.s.log.Warn("video bitrate not changed", "codec", e.codec, "kbps", next.kbps, "err", err)
			}
		}
	}
	if next.fps != r.rung.fps {
		r.p.s.log.Debug("video frame rate changed", "from", r.rung.fps, "to", next.fps, "kbps", next.kbps)
		r.interval = time.Second / time.Duration(next.fps)
		r.minGap = r.interval * 9 / 10
		if r.fast {
			r.tick.Reset(r.interval)
		}
	}
	r.rung = next
	r.p.target.Store(&next)
	r.p.counters.rateChanges.Add(1)
}

// lowestEstimate is the least GCC estimate (bit/s) among the viewers
// subscribed to the video; false when none has an estimator.
func (p *pipeline) lowestEstimate() (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	low, ok := 0, false
	for sub := range p.subs {
		if sub.bwe == nil {
			continue
		}
		if b := sub.bwe.GetTargetBitrate(); !ok || b < low {
			low, ok = b, true
		}
	}
	return low, ok
}
