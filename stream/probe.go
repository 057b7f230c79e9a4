package stream

import "time"

// The frame-rate ladder (congestion.go) halves the frame rate on a thin
// link so that each frame gets more bits. Two things it cannot see on its
// own are handled here.
//
// GCC cannot raise its estimate much above what is sent: pion's rate
// controller caps an increase at 1.5 times the rate the browser acknowledged.
// Once the frame rate is down, a desktop sends less than the rung would
// allow (a moving window at 15 fps needs about half of what it needs at 30),
// so after a thin spell the estimate stays under the threshold that would
// bring the frame rate back, however wide the link has become: in `deskbench
// network`'s drop profile the stream stayed at half rate for the rest of the
// run. Hence the probe: when the estimate stays well above what is sent, the
// frame rate goes one step up and is held there for a grace period, so the
// estimate can grow on the larger rate; if the link cannot carry it (the
// estimate falls) or the estimate did not grow to the step's threshold, the
// ladder steps down again and the next probe waits twice as long.
//
// And fewer frames buy nothing when the encoder does not use the bits it has:
// while it leaves a fifth of its budget unused at the present rate, and the
// estimate has not fallen, the frame rate is not stepped down.

const (
	// probeHeadroom is how far the estimate must stay above the sent rate
	// for the link to count as wider than the stream uses. GCC's own cap is
	// 1.5; a little under it so that an estimate at the cap qualifies.
	probeHeadroom = 1.4
	// probeFirstWait is how long that must hold before the first probe; a
	// probe undone within probeJudge doubles it, up to probeMaxWait.
	probeFirstWait = 2 * time.Second
	probeMaxWait   = 32 * time.Second
	// probeGrace is how long a probed rate is kept while the estimate
	// holds: GCC grows by about 8 % a second, so from the cap (1.5 times
	// the half-rate stream) it passes the step's threshold in a few seconds.
	probeGrace = 3 * time.Second
	// probeJudge is how soon after a probe a step down counts against it.
	probeJudge = 5 * time.Second
	// unusedBudget: an encoder that sends less than this share of its
	// bitrate is not short of bits.
	unusedBudget = 0.8
)

// rateProbe decides, around the ladder, when the frame rate steps up
// before the estimate says so and when it is kept up although the estimate
// says to step down.
type rateProbe struct {
	fullFPS int
	up      stepBackoff // probeFirstWait, probeMaxWait, probeJudge
	est     int         // the estimate at the last frame-rate change (bit/s)
}

func newRateProbe(fullFPS int) rateProbe {
	return rateProbe{fullFPS: fullFPS, up: stepBackoff{first: probeFirstWait, max: probeMaxWait, judge: probeJudge}}
}

// step takes the rung the ladder chose (next) from the one in use (cur),
// the lowest estimate (bit/s) and the rate the encoder sends (kbit/s), and
// returns the rung to use.
func (p *rateProbe) step(now time.Time, cur, next rung, estBps int, sentKbps float64) rung {
	if p.est == 0 {
		p.est = estBps // the first reading: nothing to compare with yet
	}
	if cur.fps == 0 {
		return next
	}
	if next.half || cur.half {
		// The size rung has a frame rate of its own (congestion.go), and a
		// change of size is a keyframe: no probing across it.
		p.up.forget()
		if next.fps != cur.fps {
			p.est = estBps
		}
		return next
	}
	p.up.tick(now)
	if next.fps < cur.fps {
		fell := float64(estBps) < estimateFallShare*float64(p.est)
		inGrace := p.up.within(now, probeGrace)
		unused := sentKbps > 0 && sentKbps < unusedBudget*float64(next.kbps)
		if !fell && (inGrace || unused) {
			next.fps = cur.fps
			return next
		}
		p.up.undone()
	}
	if next.fps != cur.fps {
		p.up.due(now, false) // the headroom's run starts again at the new rate
		p.est = estBps
		return next
	}
	headroom := next.fps < p.fullFPS && sentKbps > 0 && float64(estBps)/1000 >= probeHeadroom*sentKbps
	if !p.up.due(now, headroom) {
		return next
	}
	next.fps = p.fullFPS / max(1, p.fullFPS/next.fps/2) // the ladder's next rung up
	p.est = estBps
	return next
}
