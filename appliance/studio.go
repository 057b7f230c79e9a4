package appliance

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/deskenv/deskenv/auth"
	"github.com/deskenv/deskenv/control"
	"github.com/deskenv/deskenv/stream"
	"github.com/deskenv/deskenv/web"
)

// The studio in pool mode: an annotator opening the pool's page gets a
// desktop of their own, for as long as their page stays (docs/STUDIO.md).
//
// The annotators' pool-wide token is valid here, at the pool's entry,
// and nowhere under /d/{i}/ (the desktops' tokens are the pool's without
// it, pool.go): GET / with it is the lobby page, which asks POST
// /studio/lease for a desktop and goes there with the token granted for
// that desktop alone. So two annotators never hold a token valid on the
// same desktop, and one leaving revokes only their own.

// studioLease is the answer to POST /studio/lease: where the annotator's
// page goes and the token it goes there with.
type studioLease struct {
	ID      string `json:"lease_id"`
	Desktop int    `json:"desktop"`
	// URL is the desktop's page with its token and lease id, as the lobby
	// opens it.
	URL   string `json:"url"`
	Token string `json:"token,omitempty"`
	Warm  bool   `json:"warm"`
	// Idle is how long the desktop stays the annotator's with no page
	// watching it.
	Idle string `json:"idle"`
}

func (p *Pool) registerStudio(d *auth.Door) {
	lobby := web.Handler()
	d.Handle("GET /{$}", auth.Policy{Public: true}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !p.isAnnotator(r) {
			// Operators and viewers keep the pool as it was: desktop 0's
			// page, their token with them.
			to := "/d/0/"
			if r.URL.RawQuery != "" {
				to += "?" + r.URL.RawQuery
			}
			http.Redirect(w, r, to, http.StatusFound)
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/lobby.html"
		lobby.ServeHTTP(w, r2)
	}))
	d.Handle("GET /lobby.js", auth.Policy{Public: true}, lobby)
	d.Handle("POST /studio/lease", auth.Policy{Roles: []auth.Role{auth.RoleAnnotator}, BodyLimit: maxLeaseBody}, http.HandlerFunc(p.studioTake))
	// Public: the page that releases holds the lease's own token, which
	// the pool's door does not know; studioGive checks it.
	d.Handle("DELETE /studio/lease/{id}", auth.Policy{Public: true}, http.HandlerFunc(p.studioGive))
}

// isAnnotator reports whether the page is asked for with an annotator's
// pool-wide token (the URL's ?token=, as the page is linked, or the
// Authorization header).
func (p *Pool) isAnnotator(r *http.Request) bool {
	if p.local {
		return false
	}
	tok := r.URL.Query().Get("token")
	if tok == "" {
		tok, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	role, err := p.auth.Check(tok)
	return err == nil && role == auth.RoleAnnotator
}

// studioTake gives the calling annotator a desktop of their own: a warm one
// at once if there is one, else a free one reset for them.
func (p *Pool) studioTake(w http.ResponseWriter, r *http.Request) {
	role := auth.RoleFrom(r.Context())
	if role != auth.RoleAnnotator && role != auth.RoleLocal {
		// An operator's token is valid on every desktop already.
		writeErr(w, http.StatusForbidden, "studio leases are for annotator tokens: an operator's token opens every desktop at /d/{i}/ as it is")
		return
	}
	who := auth.WhoFrom(r.Context())
	// One desktop per annotator: asking again (a second tab, the link
	// opened anew) is the desktop they have, so one token cannot take
	// the whole pool. Local mode has no one to tell apart.
	if l := p.studioLeaseOf(who); l != nil {
		p.log.Info("an annotator asked again; same desktop", "lease", l.ID, "desktop", l.Desktop, "who", who)
		writeJSONTo(w, http.StatusOK, p.studioAnswer(l))
		return
	}
	l, warm, err := p.claim(r.Context(), leaseRequest{})
	switch {
	case errors.Is(err, errAbandoned):
		return
	case errors.Is(err, errPoolFull):
		writeErr(w, http.StatusServiceUnavailable, fmt.Sprintf("all %d desktops are in use: try again when an annotator or a trainer leaves one", len(p.apps)))
		return
	case err != nil:
		writeErr(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	a := p.apps[l.Desktop]
	if warm != nil {
		l.Episode = warm.episode
	} else if l.Episode, err = a.control.Reset(r.Context(), control.ResetRequest{}); err != nil {
		p.unclaim(l.Desktop, nil)
		writeErr(w, http.StatusInternalServerError, fmt.Sprintf("reset desktop %d for the annotator: %v", l.Desktop, err))
		return
	}
	if r.Context().Err() != nil {
		p.unclaim(l.Desktop, warm)
		return
	}
	base := "/d/" + strconv.Itoa(l.Desktop)
	l.Base, l.MCP, l.Page, l.Control, l.Annotator = base+"/", base+"/mcp", base+"/", base+"/api/", who
	if !p.local {
		// Recorded under the annotator's own name (the pool-wide token's
		// TokenID), so their episodes stay theirs from lease to lease.
		_, id, _ := strings.Cut(who, ":")
		if l.token, l.revoke, err = a.seat.auth.GrantAs(auth.RoleAnnotator, id); err != nil {
			p.unclaim(l.Desktop, nil)
			writeErr(w, http.StatusInternalServerError, fmt.Sprintf("mint the annotator's desktop token: %v", err))
			return
		}
	}
	p.mu.Lock()
	l.seen = time.Now() // the page has studioIdle to connect
	p.leases[l.ID] = l
	p.mu.Unlock()
	p.kickRefill()
	p.log.Info("desktop leased to an annotator", "lease", l.ID, "desktop", l.Desktop, "who", who, "warm", l.Warm)
	writeJSONTo(w, http.StatusCreated, p.studioAnswer(l))
}

// studioLeaseOf is who's studio lease, if they hold one, noted as seen and
// no longer leaving: they are back.
func (p *Pool) studioLeaseOf(who string) *lease {
	if p.local {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.leases {
		if l.Annotator == who {
			l.seen, l.leaving = time.Now(), time.Time{}
			return l
		}
	}
	return nil
}

func (p *Pool) studioAnswer(l *lease) studioLease {
	q := url.Values{"lease": {l.ID}}
	if l.token != "" {
		q.Set("token", l.token)
	}
	return studioLease{ID: l.ID, Desktop: l.Desktop, URL: l.Page + "?" + q.Encode(),
		Token: l.token, Warm: l.Warm, Idle: p.studioIdle.String()}
}

// studioGrace is how long a desktop stays its annotator's after their page
// said it left: a reload says so too, and the page it loads comes back
// within a second or two. A page that does not come back costs the pool
// this long, not --studio-idle.
const studioGrace = 10 * time.Second

// studioGive ends a studio lease for the annotator who took it (their
// pool-wide token) or an operator at once; for its page (holding the
// lease's token) studioGrace later, unless the page comes back.
func (p *Pool) studioGive(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if len(id) > maxLeaseID {
		writeErr(w, http.StatusNotFound, fmt.Sprintf("no studio lease %q...: lease ids are 16 characters", id[:16]))
		return
	}
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	p.mu.Lock()
	l, ok := p.leases[id]
	page := ok && l.token != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(l.token)) == 1
	allowed := ok && l.Annotator != "" && (p.local || page ||
		auth.WhoFrom(r.Context()) == l.Annotator ||
		auth.RoleFrom(r.Context()) == auth.RoleOperator)
	grace := p.studioGrace
	if allowed && page && grace > 0 {
		// The page went away, or is reloading: watchStudio releases it
		// unless a viewer joins after now.
		l.leaving = time.Now()
	} else if allowed {
		delete(p.leases, id)
	}
	p.mu.Unlock()
	switch {
	case !allowed && tok == "":
		writeErr(w, http.StatusUnauthorized, "releasing a studio lease needs its token (or the annotator's, or an operator's) in the header Authorization: Bearer <token>")
		return
	case !allowed:
		// The same answer for a lease that is not there and one that is
		// not the caller's: lease ids are not for guessing.
		writeErr(w, http.StatusNotFound, fmt.Sprintf("no studio lease %q of yours: it may have ended already (idle for %s)", id, p.studioIdle))
		return
	}
	if page && grace > 0 {
		p.log.Info("an annotator's page left; its desktop is released unless it comes back", "lease", id, "desktop", l.Desktop, "within", grace)
		writeJSONTo(w, http.StatusAccepted, map[string]string{"released_in": grace.String(), "unless": "a page views the desktop again"})
		return
	}
	p.release(l, "released by its annotator or an operator")
	w.WriteHeader(http.StatusNoContent)
}

// release ends a studio lease: its token dies at once, its desktop is reset
// in the background and goes back to the pool.
func (p *Pool) release(l *lease, why string) {
	if l.revoke != nil {
		l.revoke()
	}
	p.log.Info("annotator's desktop released; it is reset in the background", "lease", l.ID, "desktop", l.Desktop, "why", why)
	if p.warm.n > 0 {
		p.set(l.Desktop, slot{state: slotDirty})
		p.kickRefill()
		return
	}
	// Dirty until reset: a lease taking it meanwhile resets it itself.
	p.mu.Lock()
	p.setLocked(l.Desktop, slot{state: slotDirty})
	if p.life.Err() != nil {
		p.mu.Unlock()
		return // the pool is closing: nobody will lease it again
	}
	// Under p.mu, which Close holds to end the pool's life: this reset is
	// counted before Close waits for the resets, or not started at all.
	p.refills.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.refills.Done()
		p.mu.Lock()
		mine := p.slots[l.Desktop].state == slotDirty
		if mine {
			// Held while it is reset, so no lease takes it half-reset.
			p.setLocked(l.Desktop, slot{state: slotWarming})
		}
		p.mu.Unlock()
		if !mine {
			return
		}
		if _, err := p.apps[l.Desktop].control.Reset(p.life, control.ResetRequest{}); err != nil {
			p.log.Warn("reset after an annotator left failed; the next lease resets it again", "desktop", l.Desktop, "err", err)
			p.set(l.Desktop, slot{state: slotDirty})
			return
		}
		p.set(l.Desktop, slot{state: slotIdle})
	}()
}

// watchStudio releases annotators' desktops nobody has watched for
// studioIdle: the page closed without saying so (a crash, a lost network).
// An annotator acts through the page's stream, so no viewer is no input.
func (p *Pool) watchStudio(ctx context.Context) {
	defer p.refills.Done()
	every := min(max(p.studioIdle/4, 10*time.Millisecond), time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			for _, l := range p.idleStudioLeases(now) {
				p.release(l, "its page left, or nobody watched it for "+p.studioIdle.String())
			}
		}
	}
}

// idleStudioLeases takes out of the lease table the studio leases whose
// desktop has had no viewer for studioIdle, or whose page left studioGrace
// ago and has not come back, and notes now as seen on the others that
// have a viewer.
func (p *Pool) idleStudioLeases(now time.Time) []*lease {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*lease
	for id, l := range p.leases {
		if l.Annotator == "" {
			continue
		}
		var viewers []stream.ViewerInfo
		if s := p.apps[l.Desktop].stream; s != nil {
			viewers = s.Viewers()
		}
		if len(viewers) > 0 {
			l.seen = now
		}
		// The page that left may still be connected for a moment: only a
		// viewer that joined after it left brings the lease back.
		if !l.leaving.IsZero() && slices.ContainsFunc(viewers, func(v stream.ViewerInfo) bool { return v.Since.After(l.leaving) }) {
			l.leaving = time.Time{}
		}
		leftFor := !l.leaving.IsZero() && now.Sub(l.leaving) >= p.studioGrace
		if leftFor || now.Sub(l.seen) >= p.studioIdle {
			delete(p.leases, id)
			out = append(out, l)
		}
	}
	return out
}
