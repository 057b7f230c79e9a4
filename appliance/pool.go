package appliance

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/deskenv/deskenv/auth"
	"github.com/deskenv/deskenv/control"
	"github.com/deskenv/deskenv/task"
)

// Pool is several independent desktops in one process (--desktops N): each
// its own Xvfb, session, home, executor, MCP server, stream and control plane,
// served under /d/{i}/, and handed out to trainers through leases.
type Pool struct {
	log    *slog.Logger
	apps   []*Desktop
	iso    isolation  // who the desktops' sessions run as, for /health
	auth   *auth.Auth // the pool-wide tokens (operator, viewer)
	local  bool
	limits auth.Limits

	mu      sync.Mutex
	leases  map[string]*lease // by id
	slots   []slot            // by desktop index: free, warm, leased, ...
	changed chan struct{}     // closed at every change of slots (setLocked)

	// Warm desktops (warm.go): --warm and --warm-task, the refiller's
	// wake-up, the end of its life (closing, at Close) and its goroutines.
	warm    warmPlan
	kick    chan struct{}
	closing <-chan struct{}
	stop    context.CancelFunc
	refills sync.WaitGroup

	metrics *poolMetrics
	reg     *prometheus.Registry // the pool's own series, at /metrics

	// studioIdle: an annotator's desktop (studio.go) goes back to the pool
	// after this long with no viewer; life ends at Close (its releases'
	// background resets and the idle watch run under it).
	studioIdle time.Duration
	// studioGrace is how long a desktop whose page said it left waits for
	// the page to come back (a reload) before it is released (p.mu).
	studioGrace time.Duration
	life        context.Context
}

type lease struct {
	ID         string           `json:"lease_id"`
	Desktop    int              `json:"desktop"`
	Base       string           `json:"base"`
	MCP        string           `json:"mcp"`
	Page       string           `json:"page"`
	Control    string           `json:"control"`
	AgentToken string           `json:"agent_token,omitempty"`
	Episode    *control.Episode `json:"episode,omitempty"`
	Since      time.Time        `json:"since"`
	// Warm is whether the desktop was reset ahead of time (--warm) and
	// handed out at once; its episode then started when it was warmed.
	Warm bool `json:"warm"`

	// Annotator is who holds a studio lease (studio.go): auth.WhoFrom of
	// the annotator's pool-wide token; "" for a trainer's lease.
	Annotator string `json:"annotator,omitempty"`

	// revoke ends AgentToken (or a studio lease's annotator token): the
	// token was granted on the lease's desktop for the lease alone (nil in
	// local mode, where there is none).
	revoke func()
	// token is a studio lease's annotator token, never listed: it lets its
	// page release the lease (DELETE /studio/lease/{id}).
	token string
	// seen is when a studio lease's desktop last had a viewer; leaving,
	// when its page said it left (zero: it has not) (p.mu).
	seen, leaving time.Time
}

// NewPool starts cfg.Desktops desktops in parallel. The tokens, the tasks
// and who the sessions run as are decided once, for all of them.
func NewPool(ctx context.Context, cfg Config, log *slog.Logger) (*Pool, error) {
	pa, err := poolAuth(cfg, log)
	if err != nil {
		return nil, err
	}
	tasks, err := loadTasks(cfg.Tasks, log)
	if err != nil {
		return nil, err
	}
	if err := warmTask(cfg, tasks); err != nil {
		return nil, err
	}
	// Every desktop's session runs as a user of its own, so desktops cannot
	// read each other's homes or signal each other's programs.
	iso, err := resolveIsolation(&cfg, cfg.Desktops, log)
	if err != nil {
		return nil, err
	}
	announceIsolation(iso, log)
	// With --home, desktop i's home is --home/d<i>; without it, each
	// session user's own (desktopHome's default).
	home := ""
	if cfg.Home != "" || !iso.Separated {
		if home, err = cfg.desktopHome(nil); err != nil {
			iso.release()
			return nil, err
		}
	}
	p := &Pool{iso: iso,
		// the door refuses every desktop's programs (desktopRefusal)
		log: log, auth: pa, local: pa.Local(), limits: cfg.limits(&iso), leases: map[string]*lease{},
		apps: make([]*Desktop, cfg.Desktops), slots: make([]slot, cfg.Desktops), changed: make(chan struct{}),
		warm: warmPlan{n: cfg.Warm, task: cfg.WarmTask}, studioIdle: cfg.StudioIdle,
		studioGrace: studioGrace,
	}
	if p.studioIdle <= 0 {
		p.studioIdle = 10 * time.Minute
	}
	for i := range p.slots {
		p.slots[i].state = slotIdle
	}
	p.metrics, p.reg = newPoolMetrics(p)
	start := time.Now()
	if err := p.start(ctx, cfg, tasks, home); err != nil {
		p.Close()
		return nil, fmt.Errorf("start the pool of %d desktops: %w", cfg.Desktops, err)
	}
	took := time.Since(start)
	log.Info("pool ready", "desktops", cfg.Desktops, "took", took.Round(time.Millisecond),
		"per_second", fmt.Sprintf("%.1f", float64(cfg.Desktops)/took.Seconds()))
	p.startRefiller(ctx)
	return p, nil
}

// startRefiller starts keeping --warm desktops warm (warm.go), until
// Close. Without --warm there is no refiller: leases reset on their own
// time and releases reset before they answer, as before warm desktops.
func (p *Pool) startRefiller(ctx context.Context) {
	rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	p.stop, p.closing, p.life = stop, rctx.Done(), rctx
	p.refills.Add(1)
	go p.watchStudio(rctx)
	if p.warm.n == 0 {
		return
	}
	p.kick = make(chan struct{}, 1)
	p.refills.Add(1)
	go p.refiller(rctx)
	p.kickRefill()
	p.log.Info("keeping desktops warm", "warm", p.warm.n, "task", p.warm.task)
}

// poolAuth is the pool-wide tokens (operator, viewer). A pool-wide agent
// token opens every desktop, leased or not, to whoever holds it, which
// undoes what leases are for: refused unless asked for (a single trusted
// harness may want it), then said out loud.
func poolAuth(cfg Config, log *slog.Logger) (*auth.Auth, error) {
	pa, err := newAuth(cfg)
	if err != nil || !pa.Has(auth.RoleAgent) {
		return pa, err
	}
	if !cfg.PoolAgentToken {
		return nil, errors.New("an agent token from --agent-token, DESKENV_AGENT_TOKEN or --tokens-file would be valid on every desktop of the pool, " +
			"so one lessee's agent could act on desktops leased to others: remove it (each lease hands out its own agent token), " +
			"or pass --pool-agent-token if one trusted harness drives every desktop")
	}
	log.Warn("--pool-agent-token: the agent token from --agent-token or --tokens-file is valid on every desktop of the pool: " +
		"any agent holding it can act on desktops leased to others")
	return pa, nil
}

// start starts every desktop at once, each with tokens of its own (a lease
// grants its agent token on its desktop alone).
func (p *Pool) start(ctx context.Context, cfg Config, tasks []*task.Task, home string) error {
	errs := make([]error, len(p.apps))
	// One set of serve-step ports for all: every desktop can run a task
	// whose site is on the same port at once (task.Ports).
	ports := cfg.Ports
	if ports == nil {
		ports = task.NewPorts(p.log)
	}
	var wg sync.WaitGroup
	for i := range p.apps {
		s := seat{tasks: tasks, iso: &p.iso, ports: ports}
		if p.iso.Separated {
			s.session = p.iso.users[i]
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if s.auth, errs[i] = newAuth(cfg); errs[i] == nil {
				// The annotators' pool-wide token only leases a desktop
				// (studio.go); on the desktop an annotator holds a token
				// granted for it alone, so no annotator drives another's.
				s.auth = s.auth.Without(auth.RoleAnnotator)
				p.apps[i], errs[i] = newDesktop(ctx, desktopConfig(cfg, i, home), p.log.With("desktop", i), s)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// desktopConfig is desktop i's configuration: a home of its own under home
// (when given) and, with --udp-port, the i-th port from it.
func desktopConfig(cfg Config, i int, home string) Config {
	if home != "" {
		cfg.Home = filepath.Join(home, "d"+strconv.Itoa(i))
	}
	if cfg.UDPPort > 0 {
		cfg.UDPPort += i
	}
	return cfg
}

// Local reports whether the pool has no tokens of its own (operator,
// viewer): every request is let in.
func (p *Pool) Local() bool { return p.local }

// Len is the number of desktops.
func (p *Pool) Len() int { return len(p.apps) }

func newToken() string {
	b := make([]byte, 24)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Handler serves every desktop under /d/{i}/, each with its own tokens
// (the pool-wide ones and its leases' agent tokens), and the pool's own API,
// all behind one door.
func (p *Pool) Handler() http.Handler {
	d := auth.NewDoor(p.auth, p.limits)
	for i, a := range p.apps {
		a.register(d.Sub("/d/"+strconv.Itoa(i), a.seat.auth))
	}
	op := auth.Policy{Roles: []auth.Role{auth.RoleOperator}, BodyLimit: maxLeaseBody}
	d.Handle("POST /leases", op, http.HandlerFunc(p.take))
	d.Handle("GET /leases", op, http.HandlerFunc(p.list))
	d.Handle("DELETE /leases/{id}", op, http.HandlerFunc(p.give))
	d.Handle("GET /desktops", op, http.HandlerFunc(p.desktops))
	d.Handle("GET /metrics", auth.Policy{Roles: []auth.Role{auth.RoleOperator}}, promhttp.HandlerFor(p.reg, promhttp.HandlerOpts{}))
	d.Handle("GET /health", auth.Policy{Public: true}, http.HandlerFunc(p.health))
	p.registerStudio(d)
	return d
}

// maxLeaseBody bounds a lease request: a task id and a seed.
const maxLeaseBody = 64 << 10

// maxLeaseID is longer than any lease id handed out (16 hex digits): a longer
// one is refused without looking it up or quoting it whole.
const maxLeaseID = 64

type leaseRequest struct {
	TaskID string `json:"task_id,omitempty"`
	Seed   *int64 `json:"seed,omitempty"`
}

// take leases a free desktop: a warm one at once when the request asks for
// what the warm desktops were reset into, else one freshly reset (into a
// task if asked) on the request's time.
func (p *Pool) take(w http.ResponseWriter, r *http.Request) {
	req, err := readLeaseRequest(r.Body) // bounded by the door (maxLeaseBody)
	if err != nil {
		writeErr(w, http.StatusBadRequest, err.Error())
		return
	}
	// An unknown task is refused before a desktop is taken (every desktop
	// has the same tasks): it would cost a warm desktop its warmth.
	if req.TaskID != "" {
		if _, err := p.apps[0].control.Task(req.TaskID); err != nil {
			writeErr(w, http.StatusNotFound, fmt.Sprintf("lease request: %v", err))
			return
		}
	}
	start := time.Now()
	l, warm, err := p.claim(r.Context(), req)
	switch {
	case errors.Is(err, errAbandoned):
		return // the client went away while every desktop was being reset
	case errors.Is(err, errPoolFull):
		writeErr(w, http.StatusServiceUnavailable, fmt.Sprintf("all %d desktops are leased: release one with DELETE /leases/{id}", len(p.apps)))
		return
	case err != nil:
		writeErr(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	status, err := p.prepare(r.Context(), l, req, warm)
	if errors.Is(err, errAbandoned) {
		// Nobody will learn this lease's id: the desktop goes back to the
		// pool (still warm if it was), no token minted.
		p.unclaim(l.Desktop, warm)
		p.log.Info("lease abandoned by its client; desktop back in the pool", "desktop", l.Desktop)
		return
	}
	if err != nil {
		p.unclaim(l.Desktop, nil)
		writeErr(w, status, err.Error())
		return
	}
	p.mu.Lock()
	p.leases[l.ID] = l
	p.mu.Unlock()
	// A warm desktop taken, or an idle one: the refiller warms another.
	p.kickRefill()
	took := time.Since(start)
	kind := strconv.FormatBool(l.Warm)
	p.metrics.leases.WithLabelValues(kind).Inc()
	p.metrics.leaseSeconds.WithLabelValues(kind).Observe(took.Seconds())
	p.log.Info("desktop leased", "lease", l.ID, "desktop", l.Desktop, "task", req.TaskID, "warm", l.Warm, "took", took.Round(time.Microsecond))
	writeJSONTo(w, http.StatusCreated, l)
}

// readLeaseRequest reads a lease request: empty, or a task id and a seed.
func readLeaseRequest(body io.Reader) (leaseRequest, error) {
	var req leaseRequest
	b, err := io.ReadAll(body)
	if err == nil && len(b) > 0 {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		err = dec.Decode(&req)
	}
	if err != nil {
		return req, fmt.Errorf("lease request body: %v (want {\"task_id\"?: string, \"seed\"?: int})", err)
	}
	if req.Seed != nil && *req.Seed < 0 {
		// As POST /api/reset: a seed is an integer >= 0.
		return req, fmt.Errorf("lease request: seed %d is negative: use an integer >= 0", *req.Seed)
	}
	return req, nil
}

// unclaim puts a desktop reserved for a lease that was not granted back in
// the pool: warm again when it was warm and untouched (w), else idle, or
// with --warm dirty, so the refiller resets it.
func (p *Pool) unclaim(idx int, w *warmth) {
	switch {
	case w != nil:
		p.set(idx, slot{state: slotWarm, warm: w})
	case p.warm.n > 0:
		p.set(idx, slot{state: slotDirty})
	default:
		p.set(idx, slot{state: slotIdle})
	}
	p.kickRefill()
}

// errAbandoned is a lease whose client went away while its desktop was
// reset (the reset ran to its end all the same).
var errAbandoned = errors.New("lease abandoned by its client during the reset")

// prepare resets l's desktop for it (into req's task), unless it is warm
// (its reset's episode is the lease's), and mints the lease's agent token;
// on error, the status to answer with.
func (p *Pool) prepare(ctx context.Context, l *lease, req leaseRequest, warm *warmth) (status int, err error) {
	a := p.apps[l.Desktop]
	var ep *control.Episode
	if warm != nil {
		ep = warm.episode
	} else if ep, err = a.control.Reset(ctx, control.ResetRequest{TaskID: req.TaskID, Seed: req.Seed}); err != nil {
		status = http.StatusInternalServerError
		if errors.Is(err, control.ErrUnknownTask) {
			status = http.StatusNotFound
		}
		return status, fmt.Errorf("reset desktop %d for the lease: %w", l.Desktop, err)
	}
	if ctx.Err() != nil {
		return 0, errAbandoned
	}
	base := "/d/" + strconv.Itoa(l.Desktop)
	l.Base, l.MCP, l.Page, l.Control, l.Episode = base+"/", base+"/mcp", base+"/", base+"/api/", ep
	if p.local {
		return 0, nil
	}
	// A token of the lease's own, valid on its desktop until the lease
	// ends: the next lessee of this desktop gets another.
	if l.AgentToken, l.revoke, err = a.seat.auth.Grant(auth.RoleAgent); err != nil {
		return http.StatusInternalServerError, fmt.Errorf("mint the lease's agent token: %w", err)
	}
	return 0, nil
}

// give ends a lease: the desktop is reset and goes back to the pool.
func (p *Pool) give(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if len(id) > maxLeaseID {
		writeErr(w, http.StatusNotFound, fmt.Sprintf("no lease %q...: lease ids are 16 characters; GET /leases lists the current ones", id[:16]))
		return
	}
	p.mu.Lock()
	l, ok := p.leases[id]
	if ok {
		delete(p.leases, id)
	}
	p.mu.Unlock()
	if !ok {
		writeErr(w, http.StatusNotFound, fmt.Sprintf("no lease %q: GET /leases lists the current ones", id))
		return
	}
	// The lease's token dies before the reset starts: its agent must not
	// act on the desktop being cleaned for the next lessee.
	if l.revoke != nil {
		l.revoke()
	}
	if p.warm.n > 0 {
		// The refiller resets it in the background, into the warm task if
		// the pool is short of warm desktops: the caller does not wait.
		p.set(l.Desktop, slot{state: slotDirty})
		p.kickRefill()
		p.log.Info("desktop released; it is reset in the background", "lease", id, "desktop", l.Desktop)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	_, err := p.apps[l.Desktop].control.Reset(r.Context(), control.ResetRequest{})
	p.set(l.Desktop, slot{state: slotIdle})
	if err != nil {
		p.log.Warn("reset after release failed", "desktop", l.Desktop, "err", err)
		writeErr(w, http.StatusInternalServerError, fmt.Sprintf("lease released, but resetting desktop %d failed: %v", l.Desktop, err))
		return
	}
	p.log.Info("desktop released", "lease", id, "desktop", l.Desktop)
	w.WriteHeader(http.StatusNoContent)
}

func (p *Pool) list(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	out := make([]*lease, 0, len(p.leases))
	for _, l := range p.leases {
		out = append(out, l)
	}
	p.mu.Unlock()
	writeJSONTo(w, http.StatusOK, map[string]any{"leases": out, "desktops": len(p.apps)})
}

func (p *Pool) desktops(w http.ResponseWriter, r *http.Request) {
	type desk struct {
		Index   int    `json:"index"`
		Display string `json:"display"`
		Base    string `json:"base"`
		Lease   string `json:"lease,omitempty"`
		// XAuthority is the file with the display's X cookie (the
		// session's copy), for an operator's X clients on this machine.
		XAuthority string `json:"xauthority,omitempty"`
		// SessionUser is who the desktop's programs run as.
		SessionUser string `json:"session_user,omitempty"`
		// State is idle, dirty, warming, warm or leased (warm.go).
		State slotState `json:"state"`
		// WarmEpisode is the episode a warm desktop was reset into.
		WarmEpisode string `json:"warm_episode,omitempty"`
	}
	p.mu.Lock()
	out := make([]desk, len(p.apps))
	for i, a := range p.apps {
		s := p.slots[i]
		out[i] = desk{Index: i, Display: a.display.Name(), Base: "/d/" + strconv.Itoa(i) + "/", Lease: s.lease,
			XAuthority: a.display.XAuthority(), State: s.state}
		if s.warm != nil {
			out[i].WarmEpisode = s.warm.episode.ID
		}
		if a.seat.session != nil {
			out[i].SessionUser = a.seat.session.Name
		}
	}
	p.mu.Unlock()
	writeJSONTo(w, http.StatusOK, map[string]any{"desktops": out, "warm": p.warmCounts()})
}

// warmCounts is what /health and /desktops say about warm desktops: how
// many are ready, how many are being reset, how many the pool keeps.
func (p *Pool) warmCounts() map[string]any {
	c := p.counts()
	return map[string]any{"ready": c[slotWarm], "warming": c[slotWarming], "target": p.warm.n}
}

// health is healthy when every desktop's X server answers and its window
// manager is up; details say, per desktop, what died and when.
func (p *Pool) health(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	type deskFaults struct {
		Desktop int `json:"desktop"`
		control.Faults
	}
	var bad []string
	faults := make([]deskFaults, len(p.apps))
	for i, a := range p.apps {
		f, err := a.control.Health(ctx)
		faults[i] = deskFaults{Desktop: i, Faults: f}
		if err != nil {
			bad = append(bad, fmt.Sprintf("desktop %d: %v", i, err))
		}
	}
	body := map[string]any{"status": "healthy", "desktops": len(p.apps)}
	if p.warm.n > 0 {
		body["warm"] = p.warmCounts()
	}
	// /health is open to anyone; what runs, its pids and the session users'
	// names only to operators (local mode counts).
	if auth.Allows(auth.RoleFrom(r.Context()), auth.RoleOperator) {
		body["details"] = map[string]any{"desktops": faults, "isolation": p.iso, "warm_task": p.warm.task}
	}
	if len(bad) > 0 {
		body["status"], body["errors"] = "unhealthy", bad
		writeJSONTo(w, http.StatusServiceUnavailable, body)
		return
	}
	writeJSONTo(w, http.StatusOK, body)
}

// Close stops the refiller, waits for the resets it runs, then stops every
// desktop.
func (p *Pool) Close() error {
	if p.stop != nil {
		// Under p.mu: a studio release (studio.go) either counts its
		// background reset before this or sees the pool closing.
		p.mu.Lock()
		p.stop()
		p.mu.Unlock()
	}
	p.refills.Wait()
	var wg sync.WaitGroup
	for _, a := range p.apps {
		if a != nil {
			wg.Add(1)
			go func() { defer wg.Done(); a.Close() }()
		}
	}
	wg.Wait()
	// Last: the session users are free once no desktop runs as them.
	p.iso.release()
	return nil
}

func writeJSONTo(w http.ResponseWriter, status int, v any) { auth.WriteJSON(w, status, v) }

func writeErr(w http.ResponseWriter, status int, msg string) { auth.WriteError(w, status, msg) }
