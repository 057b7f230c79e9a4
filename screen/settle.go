package screen

import (
	"context"
	"errors"
	"time"
)

// SettleOptions say when the screen counts as settled.
type SettleOptions struct {
	// Quiet is how long the screen must stay unchanged. Default 80 ms.
	Quiet time.Duration
	// Max caps the wait. Default 2 s.
	Max time.Duration
	// Interval is the sampling period when the screen is sampled (no
	// DAMAGE, or Poll). Default 10 ms.
	Interval time.Duration
	// Poll samples the screen even where the X server reports damage: the
	// way settling worked before damage, kept to compare the two and for
	// servers whose damage cannot be trusted.
	Poll bool
	// Activity, when set, lets a settle from damage end after IdleQuiet
	// instead of Quiet when the desktop's programs ran on no CPU through
	// the second half of those IdleQuiet, and none was running or waiting
	// for a CPU at its end: an application that is done
	// drawing sleeps, one that will draw again soon (laying out a page,
	// reading a directory) mostly runs first. Drawing that waits on a
	// timer is not seen this way, as it is not by a quiet period shorter
	// than the timer (deskbench answers measures both on real
	// applications).
	Activity Activity
	// IdleQuiet is the shorter quiet period Activity allows. Default
	// 40 ms; a value not below Quiet turns Activity off.
	IdleQuiet time.Duration
}

// Activity is what a settle asks of the desktop's programs: the CPU time
// they have used so far, a running total (internal/activity's Meter).
type Activity interface {
	Used(ctx context.Context) (time.Duration, error)
}

// idleCPU is the CPU time the desktop's programs may use in the second half
// of an IdleQuiet spell and still count as idle: none. Idle applications
// (xterm, Chromium, GTK programs) measured here ran not at all in most
// 20 ms windows, and any work at all may be the next draw.
const idleCPU = 0

func (o *SettleOptions) defaults() {
	if o.Quiet <= 0 {
		o.Quiet = 80 * time.Millisecond
	}
	if o.Max <= 0 {
		o.Max = 2 * time.Second
	}
	if o.Interval <= 0 {
		o.Interval = 10 * time.Millisecond
	}
	if o.IdleQuiet <= 0 {
		o.IdleQuiet = 40 * time.Millisecond
	}
	if o.IdleQuiet >= o.Quiet {
		o.Activity = nil
	}
}

// Settle waits until the screen has not changed for opt.Quiet, and returns
// settled=false if that did not happen within opt.Max (waited is then about
// Max). It replaces the fixed sleep agents usually take after an action.
//
// Where the X server has DAMAGE, "changed" means the server reported drawing
// on the screen: Settle waits until no drawing was reported for Quiet,
// counted from the call or the last drawing, whichever is later, and
// captures nothing. Before it says settled it asks the server, with a round
// trip, whether anything was drawn that it has not heard of yet, so it never
// ends while drawing is reported late. Drawing that leaves the pixels as
// they were counts as a change here (sampling would not see it); the
// pointer, which Xvfb draws in software, does not (TestSettleIgnoresPointer).
// Without DAMAGE, or with opt.Poll, it captures the screen every
// opt.Interval and compares hashes, as it always did.
func (c *Capturer) Settle(ctx context.Context, opt SettleOptions) (settled bool, waited time.Duration, err error) {
	opt.defaults()
	start := time.Now()
	if w := c.damageFor(opt); w != nil {
		settled, waited, _, err := w.settle(ctx, start, opt, nil)
		if !c.fallBack(ctx, err) {
			return settled, waited, err
		}
	}
	return c.poll(ctx, start, opt, nil)
}

// damageFor is the damage watcher a settle with opt uses, or nil to sample.
func (c *Capturer) damageFor(opt SettleOptions) *damageWatch {
	if opt.Poll {
		return nil
	}
	return c.damage()
}

// fallBack reports whether a settle from damage that ended with err should
// be done again by sampling: the subscription was missing or broke, and the
// caller has not given up.
func (c *Capturer) fallBack(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil {
		return false
	}
	if !errors.Is(err, errNoDamage) {
		c.log.Debug("damage lost while settling; sampling the screen", "err", err)
	}
	return true
}

// poll samples the screen every opt.Interval until its hash has not changed
// for opt.Quiet.
func (c *Capturer) poll(ctx context.Context, start time.Time, opt SettleOptions, f *Frame) (bool, time.Duration, error) {
	if f == nil {
		f = &Frame{}
	}
	if err := c.CaptureInto(ctx, f); err != nil {
		return false, time.Since(start), err
	}
	last, lastChange := f.Hash, start
	tick := time.NewTicker(opt.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return false, time.Since(start), ctx.Err()
		case <-tick.C:
		}
		if err := c.CaptureInto(ctx, f); err != nil {
			return false, time.Since(start), err
		}
		now := time.Now()
		if f.Hash != last {
			last, lastChange = f.Hash, now
		}
		if now.Sub(lastChange) >= opt.Quiet {
			return true, now.Sub(start), nil
		}
		if now.Sub(start) >= opt.Max {
			return false, now.Sub(start), nil
		}
	}
}

// damage returns the capturer's damage watcher, starting it on first use
// (a capturer that never settles holds no second connection), or nil when
// the capturer is closed.
func (c *Capturer) damage() *damageWatch {
	c.dmgMu.Lock()
	defer c.dmgMu.Unlock()
	if c.dmgClosed {
		return nil
	}
	if c.dmg == nil {
		c.dmg = newDamageWatch(c.d, c.log)
	}
	return c.dmg
}

// closeDamage stops the damage watcher, if one started.
func (c *Capturer) closeDamage() {
	c.dmgMu.Lock()
	w := c.dmg
	c.dmg, c.dmgClosed = nil, true
	c.dmgMu.Unlock()
	if w != nil {
		w.close()
	}
}

// SettleShot waits for the screen to settle (Capturer.Settle) and returns
// the screenshot of the very frame the settle ended on, so a screen that
// just changed is captured once, not once to settle and again to shoot. The
// shot is cached like Shot's: Changed is false, and Data the last shot's
// bytes, when the screen is as the last shot showed it.
//
// With damage, the capture and encode are made ahead, once the screen has
// been quiet for half the quiet period, and used if nothing was drawn (and
// the pointer did not move) after that capture began; otherwise the screen
// is captured once more when the settle ends.
func (s *Shooter) SettleShot(ctx context.Context, opt SettleOptions) (shot Shot, settled bool, waited time.Duration, err error) {
	opt.defaults()
	start := time.Now()
	s.mu.Lock()
	a := &aheadShot{f: s.spare}
	s.spare = Frame{} // a concurrent SettleShot gets a buffer of its own
	s.mu.Unlock()
	if w := s.c.damageFor(opt); w != nil {
		var ahead func()
		if opt.Quiet >= 20*time.Millisecond {
			ahead = func() { s.shootAhead(ctx, a) }
		}
		var last time.Time
		settled, waited, last, err = w.settle(ctx, start, opt, ahead)
		if err == nil {
			if settled && a.ok && last.Before(a.taken) {
				if shot, ok := s.useAhead(ctx, a); ok {
					return shot, settled, waited, nil
				}
			}
			if err := s.c.CaptureInto(ctx, &a.f); err != nil {
				return Shot{}, false, waited, err
			}
			shot, err = s.shotOf(ctx, a)
			return shot, settled, waited, err
		}
		if !s.c.fallBack(ctx, err) {
			return Shot{}, false, waited, err
		}
	}
	settled, waited, err = s.c.poll(ctx, start, opt, &a.f)
	if err != nil {
		return Shot{}, false, waited, err
	}
	shot, err = s.shotOf(ctx, a)
	return shot, settled, waited, err
}

// aheadShot is a screenshot made while a settle waits out its quiet period.
type aheadShot struct {
	f      Frame
	taken  time.Time // before the capture began
	ptr    Pointer   // the pointer drawn in, when hasPtr
	hasPtr bool
	shot   Shot // made from f; its cache fields are set by useAhead
	ok     bool
}

// shootAhead captures the screen into a and encodes it, without touching
// the shot cache: the settle may yet see drawing and throw it away.
func (s *Shooter) shootAhead(ctx context.Context, a *aheadShot) {
	a.ok, a.hasPtr = false, false
	a.taken = time.Now()
	if err := s.c.CaptureInto(ctx, &a.f); err != nil {
		return
	}
	if s.opt.Pointer {
		if p, err := s.c.Pointer(ctx); err == nil {
			p.DrawOn(&a.f)
			a.f.Hash = p.mix(s.c.seed, a.f.Hash)
			a.ptr, a.hasPtr = p, true
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w, h := s.modelSize(&a.f)
	if s.hasLast && s.last.Hash == a.f.Hash && s.last.Width == w && s.last.Height == h {
		a.shot, a.ok = s.last, true
		return
	}
	shot, err := s.encode(s.scaler.scale(&a.f, w, h))
	if err != nil {
		return
	}
	shot.Hash = a.f.Hash
	a.shot, a.ok = shot, true
}

// useAhead makes a's shot the answer if the pointer is where it was drawn
// (moving it is no damage), with Shot's cache semantics.
func (s *Shooter) useAhead(ctx context.Context, a *aheadShot) (Shot, bool) {
	if s.opt.Pointer {
		p, err := s.c.Pointer(ctx)
		if (err == nil) != a.hasPtr || (a.hasPtr && (p.X != a.ptr.X || p.Y != a.ptr.Y || p.Serial != a.ptr.Serial)) {
			return Shot{}, false
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w, h := s.modelSize(&a.f)
	if a.shot.Width != w || a.shot.Height != h {
		return Shot{}, false // the model size changed meanwhile
	}
	s.frame, s.spare = a.f, s.frame
	if s.hasLast && s.last.Hash == a.shot.Hash && s.last.Width == w && s.last.Height == h {
		shot := s.last
		shot.Changed = false
		shot.Captured = a.f.Time
		return shot, true
	}
	shot := a.shot
	shot.Changed = true
	s.last, s.hasLast = shot, true
	return shot, true
}

// shotOf makes the shot of a.f, just captured: the pointer drawn in, then
// Shot's cache and encoding.
func (s *Shooter) shotOf(ctx context.Context, a *aheadShot) (Shot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.frame, s.spare = a.f, s.frame
	s.addPointer(ctx)
	return s.shotOfFrame()
}
