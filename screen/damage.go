package screen

import (
	"context"
	"errors"
	"fmt"
	"image"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/damage"
	"github.com/jezek/xgb/xfixes"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/internal/xext"
)

// damageWatch learns when the screen was last drawn on from the X server
// (the DAMAGE extension) instead of copying the screen to find out: one
// damage object on the root window, on a connection of its own (a
// display.Follower, since it reads events), made again after the X server
// restarts.
//
// The damage object reports at level NonEmpty: the server sends one event
// when its damage region goes from empty to non-empty, and no more until the
// region is emptied (DamageSubtract). So the watcher empties the region after
// each event only while a settle waits; with nobody waiting, the region
// stays non-empty and a busy screen (a video, a blinking cursor) costs the
// watcher nothing at all.
type damageWatch struct {
	d   *display.Display
	log *slog.Logger
	f   *display.Follower

	mu      sync.Mutex
	x       *damageConn // nil while there is no subscription
	last    time.Time   // when the last damage event was read (or found by check)
	waiters int         // settles waiting now
	closed  bool
	feeds   map[*DamageFeed]struct{}
	// idleEnds counts the settles that ended after the idle quiet period
	// (SettleOptions.Activity), for tests and benchmarks.
	idleEnds atomic.Int64

	ctx  context.Context
	stop context.CancelFunc
	done chan struct{}
}

// damageConn is one subscription on one X server generation.
//
// Every request that empties the damage object's region hands what it held
// to the server-side region acc (drainLocked), so the area drawn on since a
// feed's last Take is known without a round trip per event: Take moves acc
// into snap and empties it, and reads snap's extents, all in one round trip.
// The requests that touch these regions are sent with the watcher's mutex
// held, so the server (which runs one client's requests in order) never
// sees one Take's move split by another's.
type damageConn struct {
	c      *xgb.Conn
	gen    uint64
	dmg    damage.Damage
	region xfixes.Region // receives the damage a check takes out
	tmp    xfixes.Region // receives the damage the event loop and settles empty
	acc    xfixes.Region // all damage emptied since the last Take
	snap   xfixes.Region // a Take's copy of acc
}

// drainLocked empties the damage region into acc (no round trip); w.mu is
// held.
func (x *damageConn) drainLocked() {
	damage.Subtract(x.c, x.dmg, 0, x.tmp)
	xfixes.UnionRegion(x.c, x.tmp, x.acc, x.acc)
}

// errNoDamage says the watcher has no live subscription, so the caller
// samples the screen instead.
var errNoDamage = errors.New("no damage subscription on the X server")

func newDamageWatch(d *display.Display, log *slog.Logger) *damageWatch {
	w := &damageWatch{d: d, log: log.With("part", "damage"), f: d.Follow(display.ReadEvents), done: make(chan struct{})}
	w.ctx, w.stop = context.WithCancel(context.Background())
	// The first subscription is made before the goroutine starts, so the
	// first settle already has it.
	changed := d.Changed()
	x, err := w.connect()
	if err != nil {
		w.noDamage(err)
	} else {
		w.install(x)
	}
	go func() {
		defer close(w.done)
		display.Reconnect(w.ctx, d, changed, x, err, w.connect, w.watch, w.noDamage)
	}()
	return w
}

// noDamage says the display gives no damage events (for now).
func (w *damageWatch) noDamage(err error) {
	w.log.Debug("no damage events; settling samples the screen", "err", err)
}

// close ends the subscription and the goroutine.
func (w *damageWatch) close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	w.mu.Unlock()
	w.stop()
	w.f.Close() // ends the event loop
	<-w.done
}

// connect subscribes to the root window's damage on the Follower's
// connection.
func (w *damageWatch) connect() (*damageConn, error) {
	ctx, cancel := context.WithTimeout(w.ctx, 5*time.Second)
	defer cancel()
	c, gen, err := w.f.Get(ctx)
	if err != nil {
		return nil, err
	}
	x, err := subscribe(c, gen)
	if err != nil {
		w.f.Drop(gen)
		return nil, err
	}
	return x, nil
}

// subscribe creates the damage object, at level NonEmpty (see damageWatch),
// and the regions its damage is emptied into, on c of X server generation
// gen.
func subscribe(c *xgb.Conn, gen uint64) (*damageConn, error) {
	dmg, err := xext.DamageRoot(c, damage.ReportLevelNonEmpty)
	if err != nil {
		return nil, err
	}
	x := &damageConn{c: c, gen: gen, dmg: dmg}
	for _, r := range []*xfixes.Region{&x.region, &x.tmp, &x.acc, &x.snap} {
		if *r, err = xfixes.NewRegionId(c); err != nil {
			return nil, fmt.Errorf("allocate a region id: %w", err)
		}
		if err := xfixes.CreateRegionChecked(c, *r, nil).Check(); err != nil {
			return nil, fmt.Errorf("create a region: %w", err)
		}
	}
	return x, nil
}

// watch makes x the live subscription and reads its events until its
// connection closes (its server died, or close).
func (w *damageWatch) watch(x *damageConn) {
	if !w.install(x) {
		return
	}
	for {
		ev, err := x.c.WaitForEvent()
		if ev == nil && err == nil {
			break
		}
		if err != nil {
			// An unchecked Subtract on a server going away; nothing to do.
			w.log.Debug("X error on the damage connection", "err", err)
			continue
		}
		if _, ok := ev.(damage.NotifyEvent); !ok {
			continue
		}
		w.mu.Lock()
		// The time is taken before the region is emptied: a check that
		// sees the region empty then also sees this time.
		w.last = time.Now()
		if w.waiters > 0 {
			x.drainLocked()
		}
		w.notifyLocked()
		w.mu.Unlock()
	}
	w.mu.Lock()
	if w.x == x {
		w.x = nil
	}
	w.mu.Unlock()
	w.f.Drop(x.gen)
}

// install makes x the live subscription, unless the watcher is closed.
func (w *damageWatch) install(x *damageConn) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	if w.x == x {
		return true
	}
	w.x = x
	// Whatever was drawn before the subscription began is unknown: count it
	// as drawn now, which only makes a settle running now wait longer, and
	// as drawn everywhere for the feeds.
	w.last = time.Now()
	if w.waiters > 0 {
		x.drainLocked()
	}
	for f := range w.feeds {
		f.all = true
	}
	w.notifyLocked()
	return true
}

// notifyLocked tells every feed the screen was drawn on. w.mu is held.
func (w *damageWatch) notifyLocked() {
	for f := range w.feeds {
		f.dirty.Store(true)
		select {
		case f.wake <- struct{}{}:
		default:
		}
	}
}

// begin registers a waiting settle and empties the damage region, so the
// next drawing raises an event. It fails when there is no subscription.
func (w *damageWatch) begin() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.x == nil {
		return errNoDamage
	}
	w.waiters++
	w.x.drainLocked()
	return nil
}

// end unregisters a settle that begin registered.
func (w *damageWatch) end() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.waiters--
}

// lastDamage is when the screen was last seen drawn on.
func (w *damageWatch) lastDamage() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

// check asks the server, with a round trip, whether anything was drawn
// since the region was last emptied: drawing whose event is still on its way
// to the event loop (or was merged into a region the loop had not emptied
// yet) is found here, so a settle never ends on a screen still being drawn.
// Damage found counts as drawn now. It returns the time of the last damage.
func (w *damageWatch) check(ctx context.Context) (time.Time, error) {
	w.mu.Lock()
	x := w.x
	if x == nil {
		w.mu.Unlock()
		return time.Time{}, errNoDamage
	}
	damage.Subtract(x.c, x.dmg, 0, x.region)
	xfixes.UnionRegion(x.c, x.region, x.acc, x.acc)
	cookie := xfixes.FetchRegion(x.c, x.region)
	w.mu.Unlock()
	type fetched struct {
		r   *xfixes.FetchRegionReply
		err error
	}
	ch := make(chan fetched, 1)
	go func() {
		r, err := cookie.Reply()
		ch <- fetched{r, err}
	}()
	var got fetched
	select {
	case got = <-ch:
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	}
	if got.err != nil {
		return time.Time{}, fmt.Errorf("read the screen's damage: %w", got.err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(got.r.Rectangles) > 0 {
		w.last = time.Now()
	}
	return w.last, nil
}

// settle waits until no damage has been reported for opt.Quiet, measured
// from start or from the last damage, whichever is later, and at most until
// start+opt.Max. It captures nothing itself. errNoDamage (or a broken
// connection) tells the caller to sample the screen instead.
//
// ahead, when not nil, is called once the screen has been quiet for half
// the quiet period (again after each new drawing), so the caller can
// capture and encode while the rest of the period is waited out. last is
// the time of the last drawing known when the settle ended: a capture begun
// after it shows the settled screen.
func (w *damageWatch) settle(ctx context.Context, start time.Time, opt SettleOptions, ahead func()) (settled bool, waited time.Duration, last time.Time, err error) {
	if err := w.begin(); err != nil {
		return false, 0, time.Time{}, err
	}
	defer w.end()
	deadline := start.Add(opt.Max)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var (
		aheadFor time.Time     // the quiet spell ahead was last called in
		markFor  time.Time     // the quiet spell mark was read in
		mark     time.Duration // the desktop's CPU time at markFor's midpoint
		busyFor  time.Time     // a quiet spell in which the desktop was busy
	)
	last = w.lastDamage()
	for {
		from := start // the quiet spell began
		if last.After(start) {
			from = last
		}
		// idle: this spell may end after IdleQuiet if the desktop's
		// programs sit idle through its second half (SettleOptions.Activity).
		idle := opt.Activity != nil && !busyFor.Equal(from)
		due, early := from.Add(opt.Quiet), from.Add(opt.Quiet/2)
		idleDue := from.Add(opt.IdleQuiet)
		if idle {
			early = from.Add(opt.IdleQuiet / 2)
		}
		now := time.Now()
		if !now.Before(due) || (idle && markFor.Equal(from) && !now.Before(idleDue)) {
			byIdle := now.Before(due)
			if byIdle {
				// Quiet for IdleQuiet: settled if the programs used no
				// more than idleCPU since the mark.
				used, err := opt.Activity.Used(ctx)
				if err != nil || used-mark > idleCPU {
					busyFor = from
					continue
				}
			}
			if last, err = w.check(ctx); err != nil {
				return false, time.Since(start), last, err
			}
			if now = time.Now(); last.After(from) { // from is never before start
				if !now.Before(deadline) {
					return false, now.Sub(start), last, nil
				}
				continue // drawn since: wait a quiet period from then
			}
			if byIdle {
				w.idleEnds.Add(1)
			}
			return true, now.Sub(start), last, nil
		}
		if !now.Before(deadline) {
			return false, now.Sub(start), last, nil
		}
		if idle && !markFor.Equal(from) && !now.Before(early) {
			markFor = from
			if mark, err = opt.Activity.Used(ctx); err != nil {
				w.log.Debug("cannot tell whether the desktop is busy; waiting the whole quiet period", "err", err)
				busyFor = from
			}
		}
		if ahead != nil && !aheadFor.Equal(from) && !now.Before(early) {
			aheadFor = from
			ahead()
			last = w.lastDamage()
			continue
		}
		wake := due
		switch {
		case ahead != nil && !aheadFor.Equal(from), idle && !markFor.Equal(from):
			wake = early
		case idle:
			wake = idleDue
		}
		if deadline.Before(wake) {
			wake = deadline
		}
		timer.Reset(wake.Sub(now))
		select {
		case <-ctx.Done():
			return false, time.Since(start), last, ctx.Err()
		case <-timer.C:
		}
		last = w.lastDamage()
	}
}

// DamageFeed tells one consumer that watches the screen continuously (the
// stream's video loop) when it was drawn on, from the capturer's damage
// subscription, the one settles use: one DAMAGE object per display, however
// many parts of deskenv want to know.
//
// The subscription reports at level NonEmpty, so the X server sends one
// event and then nothing until the region is emptied. Take empties it, so a
// feed costs one event per frame taken, and a screen nobody takes costs
// nothing.
type DamageFeed struct {
	w     *damageWatch // nil when the capturer was closed
	dirty atomic.Bool
	wake  chan struct{}
	// area is drawn on and not yet handed out by TakeArea, found by
	// another feed's Take; all says the area is unknown (a new
	// subscription). Both guarded by w.mu.
	area image.Rectangle
	all  bool
}

// DamageFeed returns a new feed on the capturer's damage subscription,
// starting the subscription if nothing did yet. Close it when done. Without
// the DAMAGE extension (or while the X server restarts) Take always says
// the screen may have changed, so a consumer polls instead.
func (c *Capturer) DamageFeed() *DamageFeed {
	f := &DamageFeed{w: c.damage(), wake: make(chan struct{}, 1), all: true}
	f.dirty.Store(true) // whatever was drawn before it began
	if f.w != nil {
		f.w.mu.Lock()
		if f.w.feeds == nil {
			f.w.feeds = map[*DamageFeed]struct{}{}
		}
		f.w.feeds[f] = struct{}{}
		f.w.mu.Unlock()
	}
	return f
}

// Wake receives (without blocking the X event loop, coalesced) when the
// screen was drawn on since the last Take.
func (f *DamageFeed) Wake() <-chan struct{} { return f.wake }

// Take reports whether the screen may have changed since the last Take
// (always true without a damage subscription). When it was drawn on, the
// damage region is emptied with a round trip before Take returns, so a
// capture taken afterwards holds everything reported, and a later drawing
// raises a new event.
func (f *DamageFeed) Take() bool {
	changed, _, _ := f.TakeArea()
	return changed
}

// TakeArea is Take, and where the screen was drawn on: the bounding box of
// everything drawn since the last Take, or whole when that is not known
// (no subscription, or one that began since). changed is false when nothing
// was drawn, or only where an earlier Take already handed out. A capture of
// area taken after TakeArea returns shows all the drawing it reported.
func (f *DamageFeed) TakeArea() (changed bool, area image.Rectangle, whole bool) {
	w := f.w
	if w == nil {
		return true, image.Rectangle{}, true
	}
	w.mu.Lock()
	x := w.x
	if x == nil {
		w.mu.Unlock()
		return true, image.Rectangle{}, true
	}
	if !f.dirty.Swap(false) {
		w.mu.Unlock()
		return false, image.Rectangle{}, false
	}
	// Everything drawn goes into acc (drainLocked), acc is moved to snap
	// and emptied, and snap's extents read: sent in one go under w.mu, so
	// nothing drained by the event loop or a settle in between is lost, and
	// one round trip, as Take always took. Drawing that reaches the server
	// after the Subtract raises a new event (the region was emptied).
	x.drainLocked()
	xfixes.CopyRegion(x.c, x.acc, x.snap)
	xfixes.SetRegion(x.c, x.acc, nil)
	cookie := xfixes.FetchRegion(x.c, x.snap)
	w.mu.Unlock()
	reply, err := cookie.Reply()

	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		// The server is going away; the next Take captures anyway.
		f.dirty.Store(true)
		f.area, f.all = image.Rectangle{}, false
		return true, image.Rectangle{}, true
	}
	var got image.Rectangle
	if len(reply.Rectangles) > 0 {
		e := reply.Extents
		got = image.Rect(int(e.X), int(e.Y), int(e.X)+int(e.Width), int(e.Y)+int(e.Height))
	}
	// What this Take emptied was drawn for every feed: the others get it
	// on their next Take.
	if !got.Empty() {
		for g := range w.feeds {
			if g == f {
				continue
			}
			g.area = g.area.Union(got)
			g.dirty.Store(true)
			select {
			case g.wake <- struct{}{}:
			default:
			}
		}
	}
	area, whole = f.area.Union(got), f.all
	f.area, f.all = image.Rectangle{}, false
	if whole {
		return true, image.Rectangle{}, true
	}
	return !area.Empty(), area, false
}

// Close stops the feed.
func (f *DamageFeed) Close() {
	if f.w == nil {
		return
	}
	f.w.mu.Lock()
	delete(f.w.feeds, f)
	f.w.mu.Unlock()
}
