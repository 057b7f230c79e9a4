// Package auth is deskenv's front door: bearer tokens by role (Auth), and the
// one piece of middleware every HTTP route sits behind (Door), which applies
// authentication, the same-origin check for browsers, where a token may come
// from, request body limits and per-request deadlines in one place, and writes
// every refusal as the same JSON error. Feature packages register their routes
// with a Policy; none of them checks a token or writes an auth error itself.
//
// It imports the standard library only, so every feature package may use it.
package auth

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
)

// Role is what a bearer token lets its holder do.
type Role string

const (
	// RoleAgent may reach MCP (/mcp) and nothing else: an agent must never be
	// able to reset the world, read the task's checker or change rewards.
	RoleAgent Role = "agent"
	// RoleOperator runs the control plane (reset, tasks, episodes, metrics)
	// and may take human control; it implies RoleViewer.
	RoleOperator Role = "operator"
	// RoleViewer may watch the desktop (the browser client and the stream).
	RoleViewer Role = "viewer"
	// RoleAnnotator records demonstrations: it may watch, take control,
	// list tasks, reset into one, record, end the episode it records and
	// review its own episodes; never change policy or tokens, nor touch
	// other people's episodes. Between viewer and operator: it implies
	// RoleViewer, and RoleOperator implies it.
	RoleAnnotator Role = "annotator"
	// RoleLocal is the role of every request when no token is configured.
	RoleLocal Role = "local"
)

// Roles lists the roles a token can be issued for.
var roleNames = []Role{RoleAgent, RoleOperator, RoleAnnotator, RoleViewer}

// ParseRole reads a role name, case-insensitively.
func ParseRole(s string) (Role, error) {
	r := Role(strings.ToLower(strings.TrimSpace(s)))
	for _, known := range roleNames {
		if r == known {
			return r, nil
		}
	}
	return "", fmt.Errorf("unknown role %q: use agent, operator, annotator or viewer", s)
}

// Token is one bearer token and the role it grants.
type Token struct {
	Role  Role
	Value string
}

// Config says where tokens come from. All sources are merged; a token may
// appear only once across all roles.
type Config struct {
	AgentToken, OperatorToken, AnnotatorToken, ViewerToken string
	// TokensFile holds lines ROLE=TOKEN; blank lines and lines starting with
	// '#' are ignored. Several tokens per role are allowed.
	TokensFile string
	Tokens     []Token
}

// Auth checks bearer tokens against roles. With no token configured it is in
// local-only mode: every request is allowed, and the appliance must then bind
// to 127.0.0.1 only (cmd does).
//
// Besides the configured tokens, which never change, an Auth holds granted
// tokens (Grant): minted at run time for one holder, e.g. one lease of a pool
// desktop, and valid until revoked. It is safe for concurrent use.
type Auth struct {
	// tokens maps the SHA-256 of a token to its role, so a lookup compares
	// fixed-size digests in constant time and never keeps a timing signal of
	// how much of a guessed token matched. Set once by New.
	tokens map[[32]byte]Role
	realm  string

	// sealed keeps an Auth out of local mode though it has no configured
	// token left (Without): only granted tokens open it.
	sealed bool

	mu      sync.RWMutex
	granted map[[32]byte]grant
}

// grant is one granted token: its role and the name records give its holder
// ("" for the token's own TokenID).
type grant struct {
	role Role
	id   string
}

// MinTokenLength is the shortest token accepted: shorter ones can be guessed.
const MinTokenLength = 16

// New builds an Auth from c. A token shorter than MinTokenLength, one used
// for two roles or an unreadable file is an error naming its source.
func New(c Config) (*Auth, error) {
	var all []struct {
		Token
		src string
	}
	add := func(r Role, v, src string) {
		if v != "" {
			all = append(all, struct {
				Token
				src string
			}{Token{r, v}, src})
		}
	}
	add(RoleAgent, c.AgentToken, "the agent token")
	add(RoleOperator, c.OperatorToken, "the operator token")
	add(RoleAnnotator, c.AnnotatorToken, "the annotator token")
	add(RoleViewer, c.ViewerToken, "the viewer token")
	for i, t := range c.Tokens {
		add(t.Role, t.Value, fmt.Sprintf("token %d", i+1))
	}
	if c.TokensFile != "" {
		ts, err := LoadTokensFile(c.TokensFile)
		if err != nil {
			return nil, err
		}
		for i, t := range ts {
			add(t.Role, t.Value, fmt.Sprintf("%s, token %d", c.TokensFile, i+1))
		}
	}
	a := &Auth{tokens: map[[32]byte]Role{}, granted: map[[32]byte]grant{}, realm: "deskenv"}
	for _, t := range all {
		if _, err := ParseRole(string(t.Role)); err != nil {
			return nil, fmt.Errorf("%s: %w", t.src, err)
		}
		if len(t.Value) < MinTokenLength {
			return nil, fmt.Errorf("%s for role %s is %d characters long: tokens must have at least %d (e.g. openssl rand -hex 24)", t.src, t.Role, len(t.Value), MinTokenLength)
		}
		if strings.ContainsAny(t.Value, " \t\r\n") {
			return nil, fmt.Errorf("%s for role %s contains white space: a bearer token cannot", t.src, t.Role)
		}
		h := sha256.Sum256([]byte(t.Value))
		if prev, ok := a.tokens[h]; ok && prev != t.Role {
			return nil, fmt.Errorf("%s is given for both roles %s and %s: use a different token per role", t.src, prev, t.Role)
		}
		a.tokens[h] = t.Role
	}
	return a, nil
}

// LoadTokensFile reads lines ROLE=TOKEN from path.
func LoadTokensFile(path string) ([]Token, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tokens file: %w", err)
	}
	defer f.Close()
	return ParseTokens(f, path)
}

// ParseTokens reads lines ROLE=TOKEN; name is used in error messages.
func ParseTokens(r io.Reader, name string) ([]Token, error) {
	var out []Token
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			return nil, fmt.Errorf("%s line %d: want ROLE=TOKEN (e.g. operator=...), got a line without '='", name, line)
		}
		role, err := ParseRole(k)
		if err != nil {
			return nil, fmt.Errorf("%s line %d: %w", name, line, err)
		}
		v = strings.TrimSpace(v)
		if v == "" {
			return nil, fmt.Errorf("%s line %d: the token for %s is empty", name, line, role)
		}
		out = append(out, Token{role, v})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return out, nil
}

// Local reports local-only mode: no token configured, every request allowed.
// Granted tokens do not count: Grant refuses to mint one in local mode, where
// it would change nothing.
func (a *Auth) Local() bool { return a == nil || len(a.tokens) == 0 && !a.sealed }

// Without is a new Auth with a's configured tokens except those of role,
// and no granted ones. It is never in local mode unless a is: pool mode
// gives each desktop the pool's tokens without the annotators', whose
// pool-wide token only leases a desktop (a per-desktop token is granted),
// and a desktop left with no configured token must not open to everyone.
func (a *Auth) Without(role Role) *Auth {
	if a.Local() {
		return a
	}
	b := &Auth{tokens: map[[32]byte]Role{}, granted: map[[32]byte]grant{}, realm: a.realm, sealed: true}
	for h, r := range a.tokens {
		if r != role {
			b.tokens[h] = r
		}
	}
	return b
}

// Has reports whether at least one configured token grants role.
func (a *Auth) Has(role Role) bool {
	if a == nil {
		return false
	}
	for _, r := range a.tokens {
		if r == role {
			return true
		}
	}
	return false
}

// Grant mints a fresh random token for role, valid until revoke is called.
// Pool mode grants one agent token per lease, so a lease's token dies with
// the lease and the next lessee of the desktop gets another. revoke may be
// called more than once; once it returns, the token is refused.
func (a *Auth) Grant(role Role) (token string, revoke func(), err error) {
	return a.GrantAs(role, "")
}

// GrantAs is Grant with the name records give the token's holder (WhoFrom's
// "role:id"): id instead of the token's own TokenID. Pool mode grants an
// annotator's desktop token under the TokenID of the annotator's pool-wide
// token, so what they record carries the same name whichever desktop and
// lease it was made on. id must not be empty to take effect.
func (a *Auth) GrantAs(role Role, id string) (token string, revoke func(), err error) {
	if _, err := ParseRole(string(role)); err != nil {
		return "", nil, err
	}
	if a.Local() {
		return "", nil, errors.New("no tokens are configured (local mode, every request is allowed): a granted token would protect nothing")
	}
	b := make([]byte, 24)
	rand.Read(b) // never fails (crypto/rand panics rather than return short)
	token = hex.EncodeToString(b)
	h := sha256.Sum256([]byte(token))
	a.mu.Lock()
	a.granted[h] = grant{role: role, id: id}
	a.mu.Unlock()
	return token, func() {
		a.mu.Lock()
		delete(a.granted, h)
		a.mu.Unlock()
	}, nil
}

// ErrNoToken is returned by Check when the request carries no token.
var ErrNoToken = errors.New("no bearer token: send the header Authorization: Bearer <token>")

// ErrBadToken is returned by Check for a token that matches no role.
var ErrBadToken = errors.New("the bearer token is not valid for this appliance")

// Check returns the role token grants. In local mode it is RoleLocal,
// whatever the token.
func (a *Auth) Check(token string) (Role, error) {
	if a.Local() {
		return RoleLocal, nil
	}
	if token == "" {
		return "", ErrNoToken
	}
	h := sha256.Sum256([]byte(token))
	var found Role
	for k, role := range a.tokens {
		if subtle.ConstantTimeCompare(k[:], h[:]) == 1 {
			found = role
		}
	}
	a.mu.RLock()
	for k, g := range a.granted {
		if subtle.ConstantTimeCompare(k[:], h[:]) == 1 {
			found = g.role
		}
	}
	a.mu.RUnlock()
	if found == "" {
		return "", ErrBadToken
	}
	return found, nil
}

// RoleOf returns the role of the bearer token in r's Authorization header.
// It reads no other source: where else a token may come from depends on the
// route, and only the Door knows routes.
func (a *Auth) RoleOf(r *http.Request) (Role, error) {
	return a.Check(bearer(r))
}

// bearer is the token of an "Authorization: Bearer" header, "" without one.
func bearer(r *http.Request) string {
	scheme, v, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if ok && strings.EqualFold(scheme, "Bearer") {
		return strings.TrimSpace(v)
	}
	return ""
}

// Allows reports whether a holder of role may use an endpoint that accepts
// any of need. The people's roles are ranked: operator implies annotator,
// annotator implies viewer; the agent's stands apart. Local mode allows
// everything.
func Allows(role Role, need ...Role) bool {
	if role == RoleLocal {
		return true
	}
	for _, n := range need {
		if role == n || rank(role) > rank(n) && rank(n) > 0 {
			return true
		}
	}
	return false
}

// rank orders the people's roles; 0 is a role outside the order (agent).
func rank(r Role) int {
	switch r {
	case RoleViewer:
		return 1
	case RoleAnnotator:
		return 2
	case RoleOperator:
		return 3
	}
	return 0
}

// whoID is the name records give token's holder: the id it was granted
// under (GrantAs), else its TokenID.
func (a *Auth) whoID(token string) string {
	if a != nil {
		h := sha256.Sum256([]byte(token))
		a.mu.RLock()
		g, ok := a.granted[h]
		a.mu.RUnlock()
		if ok && g.id != "" {
			return g.id
		}
	}
	return TokenID(token)
}

// TokenID is a short, stable name of a token for records and logs: the
// first 8 hex digits of its SHA-256. It tells tokens apart without being
// one, so it may be written where the token must never be.
func TokenID(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:4])
}

func needText(roles []Role) string {
	names := make([]string, len(roles))
	for i, r := range roles {
		names[i] = string(r)
	}
	return "this endpoint needs a token of role " + strings.Join(names, " or ")
}

func forbiddenText(have Role, need []Role) string {
	control, annotator := false, false
	for _, n := range need {
		switch n {
		case RoleOperator:
			control = true
		case RoleAnnotator:
			annotator = true
		}
	}
	switch {
	case have == RoleAgent && control:
		return "this token is for agents (MCP); the control plane needs an operator token"
	case have == RoleAgent && annotator:
		return "this token is for agents (MCP); the control plane needs an operator token (or here an annotator's)"
	case have == RoleAgent:
		return "this token is for agents (MCP only at /mcp); " + needText(need)
	case have == RoleViewer && control:
		return "this token is for viewers (watch only); the control plane needs an operator token"
	case have == RoleViewer && annotator:
		return "this token is for viewers (watch only); this endpoint needs an annotator or operator token"
	case have == RoleAnnotator && control:
		return "this token is for annotators (tasks, recording and their own episodes); this endpoint needs an operator token"
	default:
		return fmt.Sprintf("this token is for role %s; %s", have, needText(need))
	}
}
