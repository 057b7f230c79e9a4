package stream

import "time"

// stepBackoff times steps up that may not hold, for the two gates that take
// them before the estimate proves them (sizeGate's size, rateProbe's frame
// rate): a step is due once its condition has held for the present wait
// without a break; a step undone within judge doubles the wait, up to max,
// as TCP's backoff does; one that holds for judge sets it back to first.
type stepBackoff struct {
	first, max, judge time.Duration

	wait  time.Duration // zero means first
	since time.Time     // the condition has held since; zero when it does not
	at    time.Time     // the last step, while it is judged; zero otherwise
}

// tick starts each reading: the wait's default, and the end of judging a
// step that held.
func (b *stepBackoff) tick(now time.Time) {
	if b.wait == 0 {
		b.wait = b.first
	}
	if !b.at.IsZero() && now.Sub(b.at) >= b.judge {
		b.at, b.wait = time.Time{}, b.first
	}
}

// due reports whether the step is to be taken now: cond has held for the
// wait. A step taken starts being judged.
func (b *stepBackoff) due(now time.Time, cond bool) bool {
	if !cond {
		b.since = time.Time{}
		return false
	}
	if b.since.IsZero() {
		b.since = now
	}
	if now.Sub(b.since) < b.wait {
		return false
	}
	b.since, b.at = time.Time{}, now
	return true
}

// within reports whether the last step was taken less than d ago.
func (b *stepBackoff) within(now time.Time, d time.Duration) bool {
	return !b.at.IsZero() && now.Sub(b.at) < d
}

// undone records that the step back down was taken: one being judged
// doubles the wait.
func (b *stepBackoff) undone() {
	if !b.at.IsZero() {
		b.wait = min(2*b.wait, b.max)
	}
	b.at = time.Time{}
}

// forget drops the condition's run and the step being judged, without
// counting it either way.
func (b *stepBackoff) forget() { b.since, b.at = time.Time{}, time.Time{} }
