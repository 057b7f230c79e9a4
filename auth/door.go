package auth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// DefaultBodyLimit is the largest request body a route accepts unless its
// Policy or the Door's Limits say otherwise: MCP calls, actions and reset
// requests are a few kilobytes; 4 MiB leaves room for write_file and
// run_script without letting one request hold hundreds of megabytes.
const DefaultBodyLimit = 4 << 20

// Policy says who may use a route and how. The zero Policy lets nobody in:
// a route must name its roles or say it is Public, so forgetting to decide is
// a panic at start, not an open endpoint.
type Policy struct {
	// Roles may use the route (operator implies annotator, annotator
	// implies viewer; in local mode
	// everyone may).
	Roles []Role
	// Public routes need no token at all: /health, and the browser client's
	// files, which are public code (what they connect to is not).
	Public bool
	// URLToken lets the token come from the query (?token= or
	// ?access_token=) or the cookie deskenv_token, on GET and HEAD only:
	// browsers cannot set an Authorization header on a page load or a
	// websocket. Everywhere else a token in the URL is refused rather than
	// ignored, since URLs end up in logs and browser history, and a cookie
	// is ignored, since a browser sends it to any page's requests.
	URLToken bool
	// BodyLimit is the largest request body in bytes; 0 means the Door's
	// Limits.Body. A larger body is refused with 413 before it is read.
	BodyLimit int64
	// Stream marks routes whose answer lasts as long as the client stays
	// (server-sent events, websockets, MCP's streamable HTTP): no write
	// deadline applies to them.
	Stream bool
}

// Limits bound every request that passes a Door.
type Limits struct {
	// Body is the default request body limit (0: DefaultBodyLimit).
	Body int64
	// BodyRead bounds how long reading a request body may take, so a client
	// trickling a body cannot hold a connection and a handler (0: none). The
	// deadline is lifted once the body is read: a long tool call or a
	// websocket is not cut by it.
	BodyRead time.Duration
	// Write bounds a request of a route that is not Stream, from the moment
	// it passes the door to the last byte of its answer (0: none).
	Write time.Duration
	// Refuse, if set, is asked about every request before anything else;
	// an error refuses it with 403 and the error's words. cmd uses it to
	// keep the desktop's own programs out by who they are, whatever token
	// they may have found.
	Refuse func(r *http.Request) error
}

// Route is one registration: what features hand to the Door.
type Route struct {
	Pattern string // as http.ServeMux takes it, e.g. "POST /api/reset"
	Policy  Policy
	Handler http.Handler
}

// Door is the one piece of middleware in front of every route of the
// appliance. For each request, in this order, it refuses with a JSON error:
//
//  0. a request Limits.Refuse refuses (the desktop's own programs): 403;
//  1. a write (any method but GET, HEAD, OPTIONS) or websocket upgrade sent
//     by a browser from another origin (Sec-Fetch-Site, else Origin against
//     Host): 403. Without tokens any page the user visits could otherwise
//     drive the desktop through their browser;
//  2. a token in the URL where the route does not take one: 401;
//  3. a missing or unknown token: 401 with WWW-Authenticate; a valid token
//     of the wrong role: 403 naming the token the route needs;
//  4. a body over the route's limit: 413 (at once when Content-Length says
//     so; otherwise when the handler reads past the limit, whatever the
//     handler then answers), and a body that takes longer than
//     Limits.BodyRead to arrive: 408.
//
// Handlers find the caller's role with RoleFrom. Unknown paths get a JSON
// 404 (or 405). A Door is an http.Handler; Sub gives a view of it that
// registers under a path prefix with another Auth (pool mode: /d/{i}/).
type Door struct {
	mux    *http.ServeMux
	auth   *Auth
	limits Limits
	prefix string
}

// NewDoor returns a Door checking tokens against a (nil: local mode).
func NewDoor(a *Auth, l Limits) *Door {
	if l.Body <= 0 {
		l.Body = DefaultBodyLimit
	}
	return &Door{mux: http.NewServeMux(), auth: a, limits: l}
}

// Sub returns a Door that registers its routes on d's, under prefix (e.g.
// "/d/3"), checking tokens against a: pool mode serves every desktop behind
// one door, each with its own tokens. Handlers see the path without prefix.
func (d *Door) Sub(prefix string, a *Auth) *Door {
	prefix = strings.TrimSuffix(prefix, "/")
	if !strings.HasPrefix(prefix, "/") {
		panic(fmt.Sprintf("auth: Sub prefix %q must start with /", prefix))
	}
	return &Door{mux: d.mux, auth: a, limits: d.limits, prefix: d.prefix + prefix}
}

// Auth is the token checker of this door.
func (d *Door) Auth() *Auth { return d.auth }

// Mount registers routes.
func (d *Door) Mount(routes ...Route) {
	for _, r := range routes {
		d.Handle(r.Pattern, r.Policy, r.Handler)
	}
}

// Handle registers h for pattern (http.ServeMux syntax, without a host)
// behind the door with policy p. It panics, as ServeMux does, on a pattern
// registered twice and on a Policy that names no role and is not Public.
func (d *Door) Handle(pattern string, p Policy, h http.Handler) {
	if !p.Public && len(p.Roles) == 0 {
		panic(fmt.Sprintf("auth: route %q has no roles and is not Public: say who may use it", pattern))
	}
	for _, r := range p.Roles {
		if _, err := ParseRole(string(r)); err != nil {
			panic(fmt.Sprintf("auth: route %q: %v", pattern, err))
		}
	}
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		method, path = "", pattern
	}
	path = strings.TrimSpace(path)
	if !strings.HasPrefix(path, "/") {
		panic(fmt.Sprintf("auth: pattern %q: the door takes paths only, no host", pattern))
	}
	if d.prefix != "" {
		h = http.StripPrefix(d.prefix, h)
	}
	full := d.prefix + path
	if method != "" {
		full = method + " " + full
	}
	if p.BodyLimit <= 0 {
		p.BodyLimit = d.limits.Body
	}
	d.mux.Handle(full, &gate{auth: d.auth, limits: d.limits, policy: p, next: h})
}

// ServeHTTP routes r to the gate of its route; unknown paths and methods get
// the mux's 404 or 405 as JSON.
func (d *Door) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, pattern := d.mux.Handler(r); pattern == "" {
		rec := &recorder{header: http.Header{}}
		d.mux.ServeHTTP(rec, r)
		if rec.code == http.StatusNotFound || rec.code == http.StatusMethodNotAllowed {
			if allow := rec.header.Get("Allow"); allow != "" {
				w.Header().Set("Allow", allow)
			}
			msg := fmt.Sprintf("no endpoint %s %s", r.Method, shorten(r.URL.Path))
			if rec.code == http.StatusMethodNotAllowed {
				msg = fmt.Sprintf("%s %s is not allowed: use %s", r.Method, shorten(r.URL.Path), rec.header.Get("Allow"))
			}
			WriteError(w, rec.code, msg)
			return
		}
		// A redirect to the canonical path: pass it on as the mux wrote it.
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.code)
		w.Write(rec.body)
		return
	}
	d.mux.ServeHTTP(w, r)
}

// shorten quotes at most a short prefix of what a client sent.
func shorten(s string) string {
	const max = 80
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}

// recorder captures the mux's own small answers (404, 405, redirects).
type recorder struct {
	header http.Header
	code   int
	body   []byte
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}
func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	r.body = append(r.body, b...)
	return len(b), nil
}

type roleKey struct{}

type whoKey struct{}

// WhoFrom names the caller the door let in, for records of who did what:
// "role:tokenid" (TokenID, never the token), "local" in local mode, "" for
// a request that passed no door or a Public route without a valid token.
// Annotators may touch only what carries their own name.
func WhoFrom(ctx context.Context) string {
	w, _ := ctx.Value(whoKey{}).(string)
	return w
}

func withWho(ctx context.Context, a *Auth, role Role, token string) context.Context {
	ctx = context.WithValue(ctx, roleKey{}, role)
	who := string(role)
	if role != RoleLocal {
		who += ":" + a.whoID(token)
	}
	return context.WithValue(ctx, whoKey{}, who)
}

// RoleFrom is the role the door let the request in with: RoleLocal in local
// mode. On a Public route it is the role of a valid bearer token in the
// Authorization header, if any, so a public answer can say more to those who
// may know more; "" for everyone else and for a request that passed no door.
func RoleFrom(ctx context.Context) Role {
	r, _ := ctx.Value(roleKey{}).(Role)
	return r
}

// gate applies one route's policy.
type gate struct {
	auth   *Auth
	limits Limits
	policy Policy
	next   http.Handler
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.limits.Refuse != nil {
		if err := g.limits.Refuse(r); err != nil {
			WriteError(w, http.StatusForbidden, err.Error())
			return
		}
	}
	upgrade := isUpgrade(r)
	if err := sameOrigin(r, upgrade); err != nil {
		WriteError(w, http.StatusForbidden, err.Error())
		return
	}
	ctx := r.Context()
	if !g.policy.Public {
		tok, err := g.token(r)
		if err != nil {
			g.unauthorized(w, "invalid_request", err.Error())
			return
		}
		role, err := g.auth.Check(tok)
		if err != nil {
			code := "invalid_request"
			if errors.Is(err, ErrBadToken) {
				code = "invalid_token"
			}
			g.unauthorized(w, code, err.Error()+" ("+needText(g.policy.Roles)+")")
			return
		}
		if !Allows(role, g.policy.Roles...) {
			WriteError(w, http.StatusForbidden, forbiddenText(role, g.policy.Roles))
			return
		}
		ctx = withWho(ctx, g.auth, role, tok)
	} else if role, err := g.auth.Check(bearer(r)); err == nil {
		// Public: nobody is refused; a valid token only adds its role.
		ctx = withWho(ctx, g.auth, role, bearer(r))
	}

	rc := http.NewResponseController(w)
	if g.policy.Stream || upgrade || g.limits.Write <= 0 {
		// A keep-alive connection may carry a deadline from an earlier
		// request of another route: a stream must not inherit it.
		rc.SetWriteDeadline(time.Time{})
	} else {
		rc.SetWriteDeadline(time.Now().Add(g.limits.Write))
	}

	limit := g.policy.BodyLimit
	if r.ContentLength > limit {
		// Refused before a byte of it is read; the connection is closed
		// rather than drained.
		w.Header().Set("Connection", "close")
		WriteError(w, http.StatusRequestEntityTooLarge, tooLarge(limit))
		return
	}
	if r.Body != nil && r.Body != http.NoBody && !upgrade {
		b := &body{ReadCloser: http.MaxBytesReader(w, r.Body, limit), rc: rc}
		if g.limits.BodyRead > 0 {
			rc.SetReadDeadline(time.Now().Add(g.limits.BodyRead))
			b.deadline = true
		}
		r.Body = b
		w = &guard{ResponseWriter: w, body: b, limit: limit}
	}
	g.next.ServeHTTP(w, r.WithContext(ctx))
}

func (g *gate) unauthorized(w http.ResponseWriter, code, msg string) {
	w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm=%q, error=%q`, g.auth.realmName(), code))
	WriteError(w, http.StatusUnauthorized, msg)
}

func (a *Auth) realmName() string {
	if a == nil || a.realm == "" {
		return "deskenv"
	}
	return a.realm
}

// token finds the request's token where the route allows it to be.
func (g *gate) token(r *http.Request) (string, error) {
	q := r.URL.Query()
	inURL := q.Get("token")
	if inURL == "" {
		inURL = q.Get("access_token")
	}
	safe := r.Method == http.MethodGet || r.Method == http.MethodHead
	if t := bearer(r); t != "" {
		if inURL != "" && !(g.policy.URLToken && safe) {
			return "", errURLToken(r)
		}
		return t, nil
	}
	if !g.policy.URLToken || !safe {
		if inURL != "" {
			return "", errURLToken(r)
		}
		return "", nil
	}
	if inURL != "" {
		return inURL, nil
	}
	if c, err := r.Cookie("deskenv_token"); err == nil {
		return c.Value, nil
	}
	return "", nil
}

func errURLToken(r *http.Request) error {
	return fmt.Errorf("a token in the URL is refused on %s %s: URLs end up in logs and history; send the header Authorization: Bearer <token> (the URL may carry it only to load the page or open a websocket)", r.Method, shorten(r.URL.Path))
}

func tooLarge(limit int64) string {
	return fmt.Sprintf("the request body is larger than %d bytes, the most this endpoint accepts", limit)
}

// isUpgrade reports a websocket (or other protocol) upgrade: a GET that
// turns into a long-lived connection, which browsers send with cookies and
// without a same-origin policy of their own.
func isUpgrade(r *http.Request) bool {
	if r.Header.Get("Upgrade") == "" {
		return false
	}
	for _, v := range r.Header.Values("Connection") {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), "upgrade") {
				return true
			}
		}
	}
	return false
}

// sameOrigin refuses writes and upgrades a browser sends from a page of
// another origin. Browsers say where a request comes from in Sec-Fetch-Site
// (every current one) or at least Origin; clients that are not browsers send
// neither and are let through, since they hold their token themselves.
func sameOrigin(r *http.Request, upgrade bool) error {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		if !upgrade {
			return nil
		}
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		if site == "same-origin" || site == "none" {
			return nil
		}
		return fmt.Errorf("cross-origin request refused (Sec-Fetch-Site: %s): deskenv answers writes and websockets only from its own pages and from clients that are not browsers", shorten(site))
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return nil
	}
	if u, err := url.Parse(o); err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host) {
		return nil
	}
	return fmt.Errorf("cross-origin request from %s refused: deskenv answers writes and websockets only from its own pages and from clients that are not browsers", shorten(o))
}

// body is a request body behind the door: limited, under a read deadline
// that is lifted when it ends.
type body struct {
	io.ReadCloser
	rc       *http.ResponseController
	deadline bool

	mu       sync.Mutex
	tooLarge bool
	timedOut bool
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		var mbe *http.MaxBytesError
		b.mu.Lock()
		switch {
		case errors.As(err, &mbe):
			b.tooLarge = true
		case errors.Is(err, os.ErrDeadlineExceeded):
			b.timedOut = true
		}
		b.mu.Unlock()
		b.lift()
	}
	return n, err
}

func (b *body) Close() error {
	b.lift()
	return b.ReadCloser.Close()
}

// lift removes the read deadline once the body is over, so the server's
// wait for the client to hang up (and websockets) are not cut by it.
func (b *body) lift() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.deadline {
		b.deadline = false
		b.rc.SetReadDeadline(time.Time{})
	}
}

func (b *body) failure() (tooLarge, timedOut bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tooLarge, b.timedOut
}

// guard answers 413 (or 408) in the handler's place when the handler read
// past the body limit (or the read deadline), whatever status it chose:
// libraries that read bodies themselves (mcp-go's streamable server answers
// 400) then tell the client what really happened.
type guard struct {
	http.ResponseWriter
	body    *body
	limit   int64
	wrote   bool
	swallow bool
}

func (g *guard) WriteHeader(code int) {
	if g.wrote {
		return
	}
	g.wrote = true
	big, slow := g.body.failure()
	switch {
	case big && code != http.StatusRequestEntityTooLarge:
		g.swallow = true
		g.ResponseWriter.Header().Del("Content-Length")
		WriteError(g.ResponseWriter, http.StatusRequestEntityTooLarge, tooLarge(g.limit))
	case slow && code < 500 && code != http.StatusRequestTimeout:
		g.swallow = true
		g.ResponseWriter.Header().Del("Content-Length")
		WriteError(g.ResponseWriter, http.StatusRequestTimeout, "the request body did not arrive in time")
	default:
		g.ResponseWriter.WriteHeader(code)
	}
}

func (g *guard) Write(p []byte) (int, error) {
	if !g.wrote {
		g.WriteHeader(http.StatusOK)
	}
	if g.swallow {
		return len(p), nil
	}
	return g.ResponseWriter.Write(p)
}

// Flush keeps server-sent events flowing through the guard.
func (g *guard) Flush() {
	if !g.swallow {
		http.NewResponseController(g.ResponseWriter).Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (g *guard) Unwrap() http.ResponseWriter { return g.ResponseWriter }
