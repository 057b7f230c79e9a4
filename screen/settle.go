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
}

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
	return c.settle(ctx, opt, nil)
}

// settle is Settle that, when f is not nil, leaves in f the screen it
// settled on: the last sample, or with damage one capture at the end.
func (c *Capturer) settle(ctx context.Context, opt SettleOptions, f *Frame) (bool, time.Duration, error) {
	opt.defaults()
	start := time.Now()
	if !opt.Poll {
		if w := c.damage(); w != nil {
			settled, waited, err := w.settle(ctx, start, opt)
			switch {
			case err == nil:
				if f != nil {
					if err := c.CaptureInto(ctx, f); err != nil {
						return false, waited, err
					}
				}
				return settled, waited, nil
			case ctx.Err() != nil:
				return false, waited, err
			case !errors.Is(err, errNoDamage):
				c.log.Debug("damage lost while settling; sampling the screen", "err", err)
			}
		}
	}
	return c.poll(ctx, start, opt, f)
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
func (s *Shooter) SettleShot(ctx context.Context, opt SettleOptions) (shot Shot, settled bool, waited time.Duration, err error) {
	s.mu.Lock()
	f := s.spare
	s.spare = Frame{} // a concurrent SettleShot gets a buffer of its own
	s.mu.Unlock()
	settled, waited, err = s.c.settle(ctx, opt, &f)
	if err != nil {
		return Shot{}, false, waited, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.frame, s.spare = f, s.frame
	s.addPointer(ctx)
	shot, err = s.shotOfFrame()
	return shot, settled, waited, err
}
