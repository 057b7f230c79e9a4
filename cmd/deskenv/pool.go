package main

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

	"github.com/deskenv/deskenv/control"
)

// pool is several independent desktops in one process (--desktops N): each
// its own Xvfb, session, home, executor, MCP server, stream and control plane,
// served under /d/{i}/, and handed out to trainers through leases.
type pool struct {
	log   *slog.Logger
	apps  []*app
	auth  *control.Auth // the pool-wide tokens (operator, viewer)
	local bool

	mu     sync.Mutex
	leases map[string]*lease // by id
	busy   []string          // desktop index -> lease id, "" when free
	tokens []string          // each desktop's own agent token ("" in local mode)
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
}

// newPool starts cfg.Desktops desktops in parallel.
func newPool(ctx context.Context, cfg config, log *slog.Logger) (*pool, error) {
	auth, err := control.NewAuth(control.AuthConfig{
		AgentToken: cfg.AgentToken, OperatorToken: cfg.OperatorToken, ViewerToken: cfg.ViewerToken, TokensFile: cfg.TokensFile,
	})
	if err != nil {
		return nil, err
	}
	if auth.Has(control.RoleAgent) {
		// A pool-wide agent token opens every desktop, which undoes what
		// leases are for. It is allowed (a single trusted harness may want
		// it) but said out loud.
		log.Warn("an agent token from --agent-token or --tokens-file is valid on every desktop of the pool: " +
			"any agent holding it can act on desktops leased to others; leases hand out per-desktop tokens, use those")
	}
	if _, err := cfg.loadTasks(log); err != nil {
		return nil, err
	}
	home, err := cfg.desktopHome()
	if err != nil {
		return nil, err
	}
	p := &pool{
		log: log, auth: auth, local: auth.Local(), leases: map[string]*lease{},
		apps: make([]*app, cfg.Desktops), busy: make([]string, cfg.Desktops), tokens: make([]string, cfg.Desktops),
	}
	start := time.Now()
	errs := make([]error, cfg.Desktops)
	var wg sync.WaitGroup
	for i := range cfg.Desktops {
		dc := cfg
		dc.Home = filepath.Join(home, "d"+strconv.Itoa(i))
		if cfg.UDPPort > 0 {
			// One UDP port per desktop: --udp-port is the first of N.
			dc.UDPPort = cfg.UDPPort + i
		}
		if !p.local {
			// Each desktop's agent token works on that desktop alone, so one
			// desktop's agent can never act on another.
			p.tokens[i] = newToken()
			dc.extraTokens = []control.Token{{Role: control.RoleAgent, Value: p.tokens[i]}}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.apps[i], errs[i] = newApp(ctx, dc, log.With("desktop", i))
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		p.Close()
		return nil, fmt.Errorf("start the pool of %d desktops: %w", cfg.Desktops, err)
	}
	took := time.Since(start)
	log.Info("pool ready", "desktops", cfg.Desktops, "took", took.Round(time.Millisecond),
		"per_second", fmt.Sprintf("%.1f", float64(cfg.Desktops)/took.Seconds()))
	return p, nil
}

func newToken() string {
	b := make([]byte, 24)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Handler serves every desktop under /d/{i}/, and the pool's own API.
func (p *pool) Handler() http.Handler {
	mux := http.NewServeMux()
	for i, a := range p.apps {
		prefix := "/d/" + strconv.Itoa(i)
		mux.Handle(prefix+"/", http.StripPrefix(prefix, a.Handler()))
	}
	op := p.auth.Require(control.RoleOperator)
	mux.Handle("POST /leases", op(http.HandlerFunc(p.take)))
	mux.Handle("GET /leases", op(http.HandlerFunc(p.list)))
	mux.Handle("DELETE /leases/{id}", op(http.HandlerFunc(p.give)))
	mux.Handle("GET /desktops", op(http.HandlerFunc(p.desktops)))
	mux.HandleFunc("GET /health", p.health)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/d/0/", http.StatusFound)
	})
	return mux
}

type leaseRequest struct {
	TaskID string `json:"task_id,omitempty"`
	Seed   *int64 `json:"seed,omitempty"`
}

// take leases a free desktop, freshly reset (into a task if asked).
func (p *pool) take(w http.ResponseWriter, r *http.Request) {
	var req leaseRequest
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
	if err == nil && len(body) > 0 {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		err = dec.Decode(&req)
	}
	if err != nil {
		writeErr(w, http.StatusBadRequest, fmt.Sprintf("lease request body: %v (want {\"task_id\"?: string, \"seed\"?: int})", err))
		return
	}
	p.mu.Lock()
	idx := -1
	for i, id := range p.busy {
		if id == "" {
			idx = i
			break
		}
	}
	if idx < 0 {
		p.mu.Unlock()
		writeErr(w, http.StatusServiceUnavailable, fmt.Sprintf("all %d desktops are leased: release one with DELETE /leases/{id}", len(p.apps)))
		return
	}
	l := &lease{ID: newToken()[:16], Desktop: idx, Since: time.Now()}
	p.busy[idx] = l.ID // reserved while it resets
	p.mu.Unlock()

	ep, err := p.apps[idx].control.Reset(r.Context(), control.ResetRequest{TaskID: req.TaskID, Seed: req.Seed})
	if err != nil {
		p.mu.Lock()
		p.busy[idx] = ""
		p.mu.Unlock()
		status := http.StatusInternalServerError
		if errors.Is(err, control.ErrUnknownTask) {
			status = http.StatusNotFound
		}
		writeErr(w, status, fmt.Sprintf("reset desktop %d for the lease: %v", idx, err))
		return
	}
	base := "/d/" + strconv.Itoa(idx)
	l.Base, l.MCP, l.Page, l.Control = base+"/", base+"/mcp", base+"/", base+"/api/"
	l.AgentToken = p.tokens[idx]
	l.Episode = ep
	p.mu.Lock()
	p.leases[l.ID] = l
	p.mu.Unlock()
	p.log.Info("desktop leased", "lease", l.ID, "desktop", idx, "task", req.TaskID)
	writeJSONTo(w, http.StatusCreated, l)
}

// give ends a lease: the desktop is reset and goes back to the pool.
func (p *pool) give(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
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
	_, err := p.apps[l.Desktop].control.Reset(r.Context(), control.ResetRequest{})
	p.mu.Lock()
	p.busy[l.Desktop] = ""
	p.mu.Unlock()
	if err != nil {
		p.log.Warn("reset after release failed", "desktop", l.Desktop, "err", err)
		writeErr(w, http.StatusInternalServerError, fmt.Sprintf("lease released, but resetting desktop %d failed: %v", l.Desktop, err))
		return
	}
	p.log.Info("desktop released", "lease", id, "desktop", l.Desktop)
	w.WriteHeader(http.StatusNoContent)
}

func (p *pool) list(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	out := make([]*lease, 0, len(p.leases))
	for _, l := range p.leases {
		out = append(out, l)
	}
	p.mu.Unlock()
	writeJSONTo(w, http.StatusOK, map[string]any{"leases": out, "desktops": len(p.apps)})
}

func (p *pool) desktops(w http.ResponseWriter, r *http.Request) {
	type desk struct {
		Index   int    `json:"index"`
		Display string `json:"display"`
		Base    string `json:"base"`
		Lease   string `json:"lease,omitempty"`
	}
	p.mu.Lock()
	out := make([]desk, len(p.apps))
	for i, a := range p.apps {
		out[i] = desk{Index: i, Display: a.display.Name(), Base: "/d/" + strconv.Itoa(i) + "/", Lease: p.busy[i]}
	}
	p.mu.Unlock()
	writeJSONTo(w, http.StatusOK, map[string]any{"desktops": out})
}

// health is healthy when every desktop's X server answers.
func (p *pool) health(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	var bad []string
	for i, a := range p.apps {
		if err := a.display.Health(ctx); err != nil {
			bad = append(bad, fmt.Sprintf("desktop %d: %v", i, err))
		}
	}
	if len(bad) > 0 {
		writeJSONTo(w, http.StatusServiceUnavailable, map[string]any{"status": "unhealthy", "errors": bad})
		return
	}
	writeJSONTo(w, http.StatusOK, map[string]any{"status": "healthy", "desktops": len(p.apps)})
}

// Close stops every desktop.
func (p *pool) Close() error {
	var wg sync.WaitGroup
	for _, a := range p.apps {
		if a != nil {
			wg.Add(1)
			go func() { defer wg.Done(); a.Close() }()
		}
	}
	wg.Wait()
	return nil
}

func writeJSONTo(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, status int, msg string) {
	writeJSONTo(w, status, map[string]string{"error": msg})
}
