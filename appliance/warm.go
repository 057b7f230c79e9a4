package appliance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/deskenv/deskenv/control"
	"github.com/deskenv/deskenv/task"
)

// Warm desktops (--warm N): the pool keeps N desktops reset ahead of time,
// into --warm-task when one is given, so that a lease asking for what they
// were reset into is handed one at once instead of waiting a quarter of a
// second (seconds for a browser task) for its reset. Released desktops are
// reset in the background by one refiller loop, which also replaces warm
// desktops that died while they waited.

// slotState is where a desktop is in the pool's cycle.
type slotState string

const (
	// slotIdle: free; a lease resets it on the lease's time.
	slotIdle slotState = "idle"
	// slotDirty: free, given back by its lease and not reset yet (with
	// --warm the refiller resets it; a lease may take it and reset it).
	slotDirty slotState = "dirty"
	// slotWarming: the refiller is resetting it; nobody may take it.
	slotWarming slotState = "warming"
	// slotWarm: reset ahead of time, ready to be leased at once.
	slotWarm slotState = "warm"
	// slotLeased: held by a lease, or reserved for one being prepared.
	slotLeased slotState = "leased"
)

// slot is one desktop's place in the pool.
type slot struct {
	state slotState
	lease string  // the lease holding it (slotLeased)
	warm  *warmth // what it was warmed into (slotWarm)
	// into is whether a warming desktop becomes warm (else it is only
	// cleaned after its lease and becomes idle).
	into bool
	// failures counts the refiller's failed resets of this desktop in a
	// row; retryAt is when it may try to warm it again.
	failures int
	retryAt  time.Time
}

// warmth is a warm desktop's reset: the episode it started (the answer a
// lease hands out, first observation included) and the X server it was set
// up on.
type warmth struct {
	episode *control.Episode
	gen     uint64
}

// warmPlan is --warm and --warm-task.
type warmPlan struct {
	n    int
	task string
}

// serves reports whether a lease request may take a warm desktop: it asks
// for exactly what the desktops were reset into. A seed changes what a
// task's setup does, so a request with one is always reset on its own time.
func (w warmPlan) serves(req leaseRequest) bool {
	return w.n > 0 && req.Seed == nil && req.TaskID == w.task
}

// warmTask checks --warm-task against the tasks loaded at start, before
// any desktop starts.
func warmTask(cfg Config, tasks []*task.Task) error {
	if cfg.WarmTask == "" {
		return nil
	}
	ids := make([]string, 0, len(tasks))
	for _, t := range tasks {
		if t.ID == cfg.WarmTask {
			return nil
		}
		ids = append(ids, t.ID)
	}
	if len(ids) == 0 {
		return fmt.Errorf("--warm-task %q: no tasks are loaded; give the task directory with --tasks", cfg.WarmTask)
	}
	if len(ids) > 20 {
		ids = append(ids[:20], "...")
	}
	return fmt.Errorf("--warm-task %q: no such task among --tasks %s (known: %v)", cfg.WarmTask, cfg.Tasks, ids)
}

// Timings of the refiller, none of them configurable: what they bound is
// the pool's own book-keeping.
const (
	// warmCheckTimeout bounds the health check of a warm desktop before it
	// is leased: an X round trip, well under a millisecond when the server
	// is alive.
	warmCheckTimeout = 2 * time.Second
	// warmWatch is how often the refiller looks at the warm desktops for
	// one that died while it waited, and at desktops whose warming failed.
	warmWatch = 2 * time.Second
	// refillBackoff and refillBackoffMax space the retries of a desktop
	// whose warming failed (a task setup that keeps failing must not keep
	// a core busy).
	refillBackoff    = time.Second
	refillBackoffMax = time.Minute
)

// errPoolFull is a lease request with no desktop free and none being reset.
var errPoolFull = errors.New("every desktop is leased")

// errPoolClosed is a lease request that waited for a desktop while the pool
// was being closed.
var errPoolClosed = errors.New("the pool is shutting down")

// setLocked puts desktop idx in state s and wakes whoever waits for a
// change. p.mu must be held.
func (p *Pool) setLocked(idx int, s slot) {
	p.slots[idx] = s
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *Pool) set(idx int, s slot) {
	p.mu.Lock()
	p.setLocked(idx, s)
	p.mu.Unlock()
}

// findLocked is the first desktop in state st, or -1.
func (p *Pool) findLocked(st slotState) int {
	return slices.IndexFunc(p.slots, func(s slot) bool { return s.state == st })
}

// countLocked counts the desktops in state st.
func (p *Pool) countLocked(st slotState) int {
	n := 0
	for _, s := range p.slots {
		if s.state == st {
			n++
		}
	}
	return n
}

// counts is how many desktops are in each state.
func (p *Pool) counts() map[slotState]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[slotState]int{}
	for _, s := range p.slots {
		out[s.state]++
	}
	return out
}

// reserveLocked holds a desktop for a new lease: a warm one when the
// request asks for what they were warmed into (w is then its warmth), else
// an idle, a dirty, or (taking it from the warm ones) a warm one, which the
// lease resets. With none free, wait is closed at the pool's next change
// when some desktop is being reset, and nil when every one is leased.
func (p *Pool) reserveLocked(req leaseRequest) (l *lease, w *warmth, wait <-chan struct{}) {
	idx := -1
	if p.warm.serves(req) {
		if idx = p.findLocked(slotWarm); idx >= 0 {
			w = p.slots[idx].warm
		}
	}
	for _, st := range []slotState{slotIdle, slotDirty, slotWarm} {
		if idx >= 0 {
			break
		}
		idx = p.findLocked(st)
	}
	if idx < 0 {
		if p.findLocked(slotWarming) >= 0 {
			return nil, nil, p.changed
		}
		return nil, nil, nil
	}
	l = &lease{ID: newToken()[:16], Desktop: idx, Since: time.Now(), Warm: w != nil}
	p.setLocked(idx, slot{state: slotLeased, lease: l.ID})
	return l, w, nil
}

// claim reserves a desktop for req, waiting (within ctx) while every free
// one is being reset. A warm desktop is checked before it is handed out;
// one that died while it waited goes back to the refiller and another is
// tried.
func (p *Pool) claim(ctx context.Context, req leaseRequest) (*lease, *warmth, error) {
	for {
		p.mu.Lock()
		l, w, wait := p.reserveLocked(req)
		p.mu.Unlock()
		switch {
		case l == nil && wait == nil:
			return nil, nil, errPoolFull
		case l == nil:
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, nil, errAbandoned
			case <-p.closing:
				return nil, nil, errPoolClosed
			}
		case w == nil:
			return l, nil, nil
		}
		err := p.checkWarm(ctx, l.Desktop, w)
		if err == nil {
			return l, w, nil
		}
		p.discard(l.Desktop, w, l.ID, err)
	}
}

// checkWarm checks that warm desktop idx is still as it was warmed: its X
// server answers, the window manager is up, the episode it was warmed into
// still runs on the same X server (a restarted server lost the task's
// setup; a reset through /d/{i}/api/reset replaced the episode), and the
// task's browser, if its setup started one, still answers.
func (p *Pool) checkWarm(ctx context.Context, idx int, w *warmth) error {
	a := p.apps[idx]
	hctx, cancel := context.WithTimeout(ctx, warmCheckTimeout)
	defer cancel()
	// Health first: a server killed a moment ago fails it even before
	// the display notices and restarts it (which changes the generation).
	if _, err := a.control.Health(hctx); err != nil {
		return fmt.Errorf("the desktop is unhealthy: %w", err)
	}
	if g := a.display.Generation(); g != w.gen {
		return errors.New("its X server was restarted after it was warmed, so its setup is gone")
	}
	if cur := a.control.Current(); cur == nil || cur.ID != w.episode.ID {
		return fmt.Errorf("the episode it was warmed into (%s) no longer runs", w.episode.ID)
	}
	if err := a.control.SetupIntact(); err != nil {
		return fmt.Errorf("its setup did not last: %w", err)
	}
	return nil
}

// discard gives a warm desktop that failed its check back to the refiller,
// to be reset again: one reserved for lease id, or (id "") one still warm
// as w, which the watch checked. One that has moved on meanwhile (leased,
// warmed again) is left alone.
func (p *Pool) discard(idx int, w *warmth, id string, why error) {
	p.mu.Lock()
	s := p.slots[idx]
	ours := s.state == slotWarm && s.warm == w
	if id != "" {
		ours = s.state == slotLeased && s.lease == id
	}
	if !ours {
		p.mu.Unlock()
		return
	}
	p.setLocked(idx, slot{state: slotDirty})
	p.mu.Unlock()
	p.metrics.discarded.Inc()
	p.log.Warn("a warm desktop is not fit to lease; it is reset again", "desktop", idx, "episode", w.episode.ID, "why", why)
	p.kickRefill()
}

// kickRefill wakes the refiller (without waiting for it).
func (p *Pool) kickRefill() {
	if p.kick == nil {
		return
	}
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// refillJob is one reset the refiller runs: desktop idx, into the warm task
// (warm) or only back to its baseline.
type refillJob struct {
	idx      int
	warm     bool
	failures int
}

// refiller keeps the warm desktops topped up until ctx ends: woken by each
// lease, release and finished reset, and every warmWatch to look for warm
// desktops that died while they waited and to retry failed warmings. Each
// reset runs in a goroutine of its own (desktops reset in parallel, as
// they start), counted in p.refills so Close waits for them.
func (p *Pool) refiller(ctx context.Context) {
	defer p.refills.Done()
	tick := time.NewTicker(warmWatch)
	defer tick.Stop()
	for {
		for _, job := range p.plan(time.Now()) {
			p.refills.Add(1)
			go p.refill(ctx, job)
		}
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
		case <-tick.C:
			p.watchWarm(ctx)
		}
	}
}

// plan marks the desktops to reset now as warming and returns the jobs:
// every dirty desktop (into the warm task while fewer than --warm are warm
// or warming, else only cleaned), then idle ones until --warm are warm or
// warming.
func (p *Pool) plan(now time.Time) []refillJob {
	p.mu.Lock()
	defer p.mu.Unlock()
	need := p.warm.n - p.countLocked(slotWarm)
	for _, s := range p.slots {
		if s.state == slotWarming && s.into {
			need--
		}
	}
	var jobs []refillJob
	for i, s := range p.slots {
		if s.state == slotDirty {
			jobs = append(jobs, refillJob{idx: i, warm: need > 0})
			need--
		}
	}
	for i, s := range p.slots {
		if need <= 0 {
			break
		}
		if s.state == slotIdle && !now.Before(s.retryAt) {
			jobs = append(jobs, refillJob{idx: i, warm: true, failures: s.failures})
			need--
		}
	}
	for _, j := range jobs {
		p.setLocked(j.idx, slot{state: slotWarming, into: j.warm, failures: j.failures})
	}
	return jobs
}

// refill resets one desktop for the refiller: into the warm task, or only
// back to its baseline. A failed warming leaves the desktop idle (a lease
// resets it on its own time) and is retried later, further apart each time.
func (p *Pool) refill(ctx context.Context, job refillJob) {
	defer p.refills.Done()
	defer p.kickRefill()
	a := p.apps[job.idx]
	req := control.ResetRequest{}
	if job.warm {
		req.TaskID = p.warm.task
	}
	// Read before the reset: Reset fails if the server restarts during it,
	// so an episode it starts was set up on this generation.
	gen := a.display.Generation()
	start := time.Now()
	ep, err := a.control.Reset(ctx, req)
	if err != nil {
		failures := job.failures + 1
		delay := min(refillBackoff<<min(failures-1, 10), refillBackoffMax)
		p.set(job.idx, slot{state: slotIdle, failures: failures, retryAt: time.Now().Add(delay)})
		if ctx.Err() == nil {
			p.metrics.refillErrors.Inc()
			p.log.Warn("resetting a desktop in the background failed: a lease resets it on its own time; the pool tries again later",
				"desktop", job.idx, "warm", job.warm, "task", req.TaskID, "retry_in", delay, "err", err)
		}
		return
	}
	if !job.warm {
		p.set(job.idx, slot{state: slotIdle})
		p.log.Debug("desktop reset after its lease", "desktop", job.idx, "took", time.Since(start).Round(time.Millisecond))
		return
	}
	p.set(job.idx, slot{state: slotWarm, warm: &warmth{episode: ep, gen: gen}})
	p.log.Debug("desktop warm", "desktop", job.idx, "task", req.TaskID, "episode", ep.ID, "took", time.Since(start).Round(time.Millisecond))
}

// watchWarm checks the warm desktops as a lease would, so one whose X
// server died while it waited is replaced before anyone asks for it.
func (p *Pool) watchWarm(ctx context.Context) {
	type warmDesk struct {
		idx int
		w   *warmth
	}
	var warm []warmDesk
	p.mu.Lock()
	for i, s := range p.slots {
		if s.state == slotWarm {
			warm = append(warm, warmDesk{i, s.warm})
		}
	}
	p.mu.Unlock()
	for _, d := range warm {
		if err := p.checkWarm(ctx, d.idx, d.w); err != nil && ctx.Err() == nil {
			p.discard(d.idx, d.w, "", err)
		}
	}
}

// poolMetrics are the pool's own series, served at the pool's /metrics
// (each desktop's are under /d/{i}/metrics).
type poolMetrics struct {
	leases       *prometheus.CounterVec
	leaseSeconds *prometheus.HistogramVec
	discarded    prometheus.Counter
	refillErrors prometheus.Counter
}

// newPoolMetrics builds the pool's registry: its lease series and a gauge
// per desktop state read from the pool when scraped.
func newPoolMetrics(p *Pool) (*poolMetrics, *prometheus.Registry) {
	m := &poolMetrics{
		leases: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "deskenv_pool_leases_total",
			Help: "Leases granted, by whether the desktop was warm (true: handed out at once; false: reset on the lease's time)."}, []string{"warm"}),
		leaseSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "deskenv_pool_lease_duration_seconds",
			Help:    "Time from a lease request to its answer, by whether the desktop was warm.",
			Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 1, 2, 5, 10, 30}}, []string{"warm"}),
		discarded: prometheus.NewCounter(prometheus.CounterOpts{Name: "deskenv_pool_warm_discarded_total",
			Help: "Warm desktops found unfit to lease (X server dead or restarted, window manager down, episode replaced) and reset again."}),
		refillErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "deskenv_pool_refill_errors_total",
			Help: "Background resets (warming, or cleaning after a lease) that failed."}),
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.leases, m.leaseSeconds, m.discarded, m.refillErrors,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "deskenv_pool_warm_desktops",
			Help: "Warm desktops ready to lease at once."},
			func() float64 { return float64(p.counts()[slotWarm]) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "deskenv_pool_warm_target",
			Help: "Warm desktops the pool keeps ready (--warm)."},
			func() float64 { return float64(p.warm.n) }))
	for _, st := range []slotState{slotIdle, slotDirty, slotWarming, slotWarm, slotLeased} {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "deskenv_pool_desktops",
			Help: "Desktops of the pool by state (idle, dirty, warming, warm, leased).", ConstLabels: prometheus.Labels{"state": string(st)}},
			func() float64 { return float64(p.counts()[st]) }))
	}
	return m, reg
}
