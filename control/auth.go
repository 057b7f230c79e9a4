package control

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
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
	// RoleLocal is the role of every request when no token is configured.
	RoleLocal Role = "local"
)

// Roles lists the roles a token can be issued for.
var roleNames = []Role{RoleAgent, RoleOperator, RoleViewer}

// ParseRole reads a role name, case-insensitively.
func ParseRole(s string) (Role, error) {
	r := Role(strings.ToLower(strings.TrimSpace(s)))
	for _, known := range roleNames {
		if r == known {
			return r, nil
		}
	}
	return "", fmt.Errorf("unknown role %q: use agent, operator or viewer", s)
}

// Token is one bearer token and the role it grants.
type Token struct {
	Role  Role
	Value string
}

// AuthConfig says where tokens come from. All sources are merged; a token may
// appear only once across all roles.
type AuthConfig struct {
	AgentToken, OperatorToken, ViewerToken string
	// TokensFile holds lines ROLE=TOKEN; blank lines and lines starting with
	// '#' are ignored. Several tokens per role are allowed.
	TokensFile string
	Tokens     []Token
}

// Auth checks bearer tokens against roles. With no token configured it is in
// local-only mode: every request is allowed, and the appliance must then bind
// to 127.0.0.1 only (cmd does).
type Auth struct {
	// tokens maps the SHA-256 of a token to its role, so a lookup compares
	// fixed-size digests in constant time and never keeps a timing signal of
	// how much of a guessed token matched.
	tokens map[[32]byte]Role
	realm  string
}

// MinTokenLength is the shortest token accepted: shorter ones can be guessed.
const MinTokenLength = 16

// NewAuth builds an Auth from c. A token shorter than MinTokenLength, one used
// for two roles or an unreadable file is an error naming its source.
func NewAuth(c AuthConfig) (*Auth, error) {
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
	a := &Auth{tokens: map[[32]byte]Role{}, realm: "deskenv"}
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

// Local reports local-only mode: no tokens, every request allowed.
func (a *Auth) Local() bool { return a == nil || len(a.tokens) == 0 }

// Has reports whether at least one token grants role.
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

// ErrNoToken is returned by RoleOf when the request carries no token.
var ErrNoToken = errors.New("no bearer token: send the header Authorization: Bearer <token>")

// ErrBadToken is returned by RoleOf for a token that matches no role.
var ErrBadToken = errors.New("the bearer token is not valid for this appliance")

// RoleOf returns the role of the token r carries: the Authorization header
// (Bearer), or, for browsers that cannot set headers on a WebSocket or a page
// load, the query parameter "token" or the cookie "deskenv_token". In local
// mode it is RoleLocal.
func (a *Auth) RoleOf(r *http.Request) (Role, error) {
	if a.Local() {
		return RoleLocal, nil
	}
	tok := requestToken(r)
	if tok == "" {
		return "", ErrNoToken
	}
	h := sha256.Sum256([]byte(tok))
	var found Role
	for k, role := range a.tokens {
		if subtle.ConstantTimeCompare(k[:], h[:]) == 1 {
			found = role
		}
	}
	if found == "" {
		return "", ErrBadToken
	}
	return found, nil
}

func requestToken(r *http.Request) string {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, v, ok := strings.Cut(h, " ")
		if ok && strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(v)
		}
		return ""
	}
	if v := r.URL.Query().Get("token"); v != "" {
		return v
	}
	if c, err := r.Cookie("deskenv_token"); err == nil {
		return c.Value
	}
	return ""
}

// Allows reports whether a holder of role may use an endpoint that accepts
// any of need. Operator implies viewer; local mode allows everything.
func Allows(role Role, need ...Role) bool {
	if role == RoleLocal {
		return true
	}
	for _, n := range need {
		if role == n || (role == RoleOperator && n == RoleViewer) {
			return true
		}
	}
	return false
}

// Require is middleware that lets a request through only when its token
// grants one of roles. A missing or unknown token gets 401 with
// WWW-Authenticate; a valid token of the wrong role gets 403 saying which
// token the endpoint needs.
func (a *Auth) Require(roles ...Role) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			role, err := a.RoleOf(r)
			if err != nil {
				code := "invalid_request"
				if errors.Is(err, ErrBadToken) {
					code = "invalid_token"
				}
				w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm=%q, error=%q`, a.realm, code))
				writeError(w, http.StatusUnauthorized, err.Error()+" ("+needText(roles)+")")
				return
			}
			if !Allows(role, roles...) {
				writeError(w, http.StatusForbidden, forbiddenText(role, roles))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

func needText(roles []Role) string {
	names := make([]string, len(roles))
	for i, r := range roles {
		names[i] = string(r)
	}
	return "this endpoint needs a token of role " + strings.Join(names, " or ")
}

func forbiddenText(have Role, need []Role) string {
	control := false
	for _, n := range need {
		if n == RoleOperator {
			control = true
		}
	}
	switch {
	case have == RoleAgent && control:
		return "this token is for agents (MCP); the control plane needs an operator token"
	case have == RoleAgent:
		return "this token is for agents (MCP only at /mcp); " + needText(need)
	case have == RoleViewer && control:
		return "this token is for viewers (watch only); the control plane needs an operator token"
	default:
		return fmt.Sprintf("this token is for role %s; %s", have, needText(need))
	}
}

// writeError writes {"error": msg} with status. Clients of the native API and
// people with curl read the same message.
func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
