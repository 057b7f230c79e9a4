package auth

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	agentTok    = "agent-token-0123456789"
	operatorTok = "operator-token-0123456789"
	viewerTok   = "viewer-token-0123456789"
	annotTok    = "annotator-token-0123456789"
)

func testAuth(t *testing.T) *Auth {
	t.Helper()
	a, err := New(Config{AgentToken: agentTok, OperatorToken: operatorTok, ViewerToken: viewerTok, AnnotatorToken: annotTok})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestAuthRequire(t *testing.T) {
	a := testAuth(t)
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	cases := []struct {
		name   string
		need   []Role
		header string
		query  string
		status int
		msg    string
	}{
		{"operator on control", []Role{RoleOperator}, "Bearer " + operatorTok, "", 204, ""},
		{"agent on control", []Role{RoleOperator}, "Bearer " + agentTok, "", 403, "this token is for agents (MCP); the control plane needs an operator token"},
		{"viewer on control", []Role{RoleOperator}, "Bearer " + viewerTok, "", 403, "viewers (watch only)"},
		{"no token", []Role{RoleOperator}, "", "", 401, "no bearer token"},
		{"wrong token", []Role{RoleOperator}, "Bearer not-a-valid-token-at-all", "", 401, "not valid"},
		{"basic scheme", []Role{RoleOperator}, "Basic b3A6b3A=", "", 401, "no bearer token"},
		{"operator watches", []Role{RoleViewer}, "Bearer " + operatorTok, "", 204, ""},
		{"viewer watches", []Role{RoleViewer}, "Bearer " + viewerTok, "", 204, ""},
		{"agent cannot watch", []Role{RoleViewer}, "Bearer " + agentTok, "", 403, "agents"},
		{"agent on mcp", []Role{RoleAgent}, "Bearer " + agentTok, "", 204, ""},
		{"operator is not an agent", []Role{RoleAgent}, "Bearer " + operatorTok, "", 403, "role agent"},
		{"token in query on a page route", []Role{RoleViewer}, "", "token=" + viewerTok, 204, ""},
		{"lower-case scheme", []Role{RoleOperator}, "bearer " + operatorTok, "", 204, ""},
		{"annotator on control", []Role{RoleOperator}, "Bearer " + annotTok, "", 403, "annotators"},
		{"annotator watches", []Role{RoleViewer}, "Bearer " + annotTok, "", 204, ""},
		{"annotator on its routes", []Role{RoleAnnotator}, "Bearer " + annotTok, "", 204, ""},
		{"operator on annotator routes", []Role{RoleAnnotator}, "Bearer " + operatorTok, "", 204, ""},
		{"viewer on annotator routes", []Role{RoleAnnotator}, "Bearer " + viewerTok, "", 403, "needs an annotator or operator token"},
		{"agent on annotator routes", []Role{RoleAnnotator}, "Bearer " + agentTok, "", 403, "agents"},
		{"annotator is not an agent", []Role{RoleAgent}, "Bearer " + annotTok, "", 403, "role agent"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/api/state?"+c.query, nil)
			if c.header != "" {
				r.Header.Set("Authorization", c.header)
			}
			w := httptest.NewRecorder()
			d := NewDoor(a, Limits{})
			d.Handle("/api/state", Policy{Roles: c.need, URLToken: true}, ok)
			d.ServeHTTP(w, r)
			if w.Code != c.status {
				t.Fatalf("status %d, want %d (body %s)", w.Code, c.status, w.Body)
			}
			if c.status == 401 && !strings.HasPrefix(w.Header().Get("WWW-Authenticate"), "Bearer ") {
				t.Errorf("401 without a Bearer WWW-Authenticate header: %q", w.Header().Get("WWW-Authenticate"))
			}
			if c.msg != "" {
				var body struct{ Error string }
				json.Unmarshal(w.Body.Bytes(), &body)
				if !strings.Contains(body.Error, c.msg) {
					t.Errorf("error %q does not say %q", body.Error, c.msg)
				}
			}
		})
	}
}

func TestAuthLocalMode(t *testing.T) {
	a, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if !a.Local() {
		t.Fatal("an Auth without tokens is not in local mode")
	}
	for _, need := range []Role{RoleAgent, RoleOperator, RoleViewer} {
		w := httptest.NewRecorder()
		d := NewDoor(a, Limits{})
		d.Handle("/", Policy{Roles: []Role{need}}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
		d.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		if w.Code != 204 {
			t.Errorf("local mode refused a %s endpoint: %d", need, w.Code)
		}
	}
}

func TestAuthConfigErrors(t *testing.T) {
	dir := t.TempDir()
	file := func(body string) string {
		p := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_"))
		os.WriteFile(p, []byte(body), 0o600)
		return p
	}
	cases := []struct {
		name string
		cfg  func() Config
		want string
	}{
		{"short token", func() Config { return Config{OperatorToken: "short"} }, "at least 16"},
		{"same token twice", func() Config { return Config{OperatorToken: operatorTok, AgentToken: operatorTok} }, "both roles"},
		{"bad role in file", func() Config { return Config{TokensFile: file("admin=" + operatorTok + "\n")} }, "line 1: unknown role \"admin\""},
		{"no equals in file", func() Config { return Config{TokensFile: file("# tokens\n\noperator " + operatorTok + "\n")} }, "line 3: want ROLE=TOKEN"},
		{"empty token in file", func() Config { return Config{TokensFile: file("viewer=\n")} }, "line 1: the token for viewer is empty"},
		{"missing file", func() Config { return Config{TokensFile: filepath.Join(dir, "none")} }, "tokens file"},
		{"space in token", func() Config { return Config{Tokens: []Token{{RoleViewer, "a b c d e f g h i j k l"}}} }, "white space"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := New(c.cfg())
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("New = %v, want an error containing %q", err, c.want)
			}
		})
	}
}

func TestAuthTokensFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(p, []byte("# deskenv tokens\nOPERATOR = "+operatorTok+"\nviewer="+viewerTok+"\nviewer="+viewerTok+"-second\n"), 0o600)
	a, err := New(Config{TokensFile: p})
	if err != nil {
		t.Fatal(err)
	}
	for tok, want := range map[string]Role{operatorTok: RoleOperator, viewerTok: RoleViewer, viewerTok + "-second": RoleViewer} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		if got, err := a.RoleOf(r); err != nil || got != want {
			t.Errorf("RoleOf(%s) = %s, %v; want %s", tok, got, err, want)
		}
	}
	if a.Has(RoleAgent) || !a.Has(RoleViewer) {
		t.Errorf("Has: agent %v viewer %v, want false and true", a.Has(RoleAgent), a.Has(RoleViewer))
	}
}

// TestWhoFrom: the door names its caller by role and token id, never by the
// token, the same name for the same token on every route and token source.
func TestWhoFrom(t *testing.T) {
	a := testAuth(t)
	var got string
	d := NewDoor(a, Limits{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = WhoFrom(r.Context()) })
	d.Handle("/a", Policy{Roles: []Role{RoleAnnotator}, URLToken: true}, h)
	d.Handle("/p", Policy{Public: true}, h)
	cases := []struct {
		name, path, header, want string
	}{
		{"annotator header", "/a", "Bearer " + annotTok, "annotator:" + TokenID(annotTok)},
		{"annotator query", "/a?token=" + annotTok, "", "annotator:" + TokenID(annotTok)},
		{"operator", "/a", "Bearer " + operatorTok, "operator:" + TokenID(operatorTok)},
		{"public with token", "/p", "Bearer " + viewerTok, "viewer:" + TokenID(viewerTok)},
		{"public without", "/p", "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got = "unset"
			r := httptest.NewRequest("GET", c.path, nil)
			if c.header != "" {
				r.Header.Set("Authorization", c.header)
			}
			d.ServeHTTP(httptest.NewRecorder(), r)
			if got != c.want {
				t.Errorf("WhoFrom = %q, want %q", got, c.want)
			}
			if strings.Contains(got, "token-0123") {
				t.Errorf("WhoFrom %q contains the token", got)
			}
		})
	}
	if id := TokenID(annotTok); len(id) != 8 || id == TokenID(operatorTok) {
		t.Errorf("TokenID = %q (operator's %q): want 8 hex digits, one per token", id, TokenID(operatorTok))
	}
	local := NewDoor(nil, Limits{})
	local.Handle("/a", Policy{Roles: []Role{RoleAnnotator}}, h)
	local.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/a", nil))
	if got != "local" {
		t.Errorf("local mode: WhoFrom = %q, want local", got)
	}
}

// TestWithoutAndGrantAs: pool mode's desktop tokens. Without drops a role's
// configured tokens and stays closed even with none left; a token granted
// with GrantAs answers to the given name in records, and dies when revoked.
func TestWithoutAndGrantAs(t *testing.T) {
	only, err := New(Config{AnnotatorToken: annotTok})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		a    *Auth
	}{{"pool tokens", testAuth(t).Without(RoleAnnotator)}, {"annotator token only", only.Without(RoleAnnotator)}} {
		t.Run(c.name, func(t *testing.T) {
			if c.a.Local() {
				t.Fatal("an Auth without the annotators' tokens is in local mode: every request would be let in")
			}
			if _, err := c.a.Check(annotTok); err == nil {
				t.Error("the annotator's configured token is still valid")
			}
			tok, revoke, err := c.a.GrantAs(RoleAnnotator, TokenID(annotTok))
			if err != nil {
				t.Fatal(err)
			}
			d := NewDoor(c.a, Limits{})
			var who string
			d.Handle("/a", Policy{Roles: []Role{RoleAnnotator}}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { who = WhoFrom(r.Context()) }))
			call := func() int {
				r := httptest.NewRequest("GET", "/a", nil)
				r.Header.Set("Authorization", "Bearer "+tok)
				rec := httptest.NewRecorder()
				d.ServeHTTP(rec, r)
				return rec.Code
			}
			if code := call(); code != 200 || who != "annotator:"+TokenID(annotTok) {
				t.Errorf("the granted token: %d as %q, want 200 as annotator:%s", code, who, TokenID(annotTok))
			}
			revoke()
			if code := call(); code != 401 {
				t.Errorf("the granted token once revoked: %d, want 401", code)
			}
		})
	}
	if testAuth(t).Without(RoleAnnotator).Has(RoleOperator) != true {
		t.Error("Without(annotator) dropped the operator's token")
	}
	if (*Auth)(nil).Without(RoleAnnotator) != nil {
		t.Error("local mode's Without is not local mode")
	}
}
