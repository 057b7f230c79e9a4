package appliance

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/deskenv/deskenv/auth"
	"github.com/deskenv/deskenv/internal/testrig"
)

var testAnnotators = []string{"annotator-a-0123456789abcdef", "annotator-b-0123456789abcdef", "annotator-c-0123456789abcdef"}

// startStudioPool is startPool with the annotators' tokens and an idle
// timeout for their desktops.
func startStudioPool(t *testing.T, n int, idle time.Duration) (*Pool, string) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Desktops, cfg.NoStream, cfg.WM, cfg.Apps = n, true, "", ""
	cfg.OperatorToken, cfg.StudioIdle = testOperator, idle
	cfg.TokensFile = filepath.Join(t.TempDir(), "tokens")
	var lines string
	for _, a := range testAnnotators {
		lines += "annotator=" + a + "\n"
	}
	if err := os.WriteFile(cfg.TokensFile, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.Home, cfg.Episodes = reachableDir(t), t.TempDir()
	p, err := NewPool(context.Background(), cfg, testrig.Logger(t))
	if err != nil {
		t.Fatalf("start a pool of %d desktops: %v", n, err)
	}
	t.Cleanup(func() { p.Close() })
	return p, testServer(t, p)
}

func testServer(t *testing.T, p *Pool) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(p.Handler())
	srv.Config.ConnContext = ConnContext
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

type studioAnswer struct {
	ID      string `json:"lease_id"`
	Desktop int    `json:"desktop"`
	URL     string `json:"url"`
	Token   string `json:"token"`
	Error   string `json:"error"`
}

func studioLeaseFor(t *testing.T, base, token string) (studioAnswer, int) {
	t.Helper()
	var a studioAnswer
	code := doJSON(t, "POST", base+"/studio/lease", token, nil, &a)
	return a, code
}

// TestStudioLeases: on a pool of two, two annotators get a desktop each,
// a third is told the pool is full; each one's token works on their own
// desktop alone and records under their pool-wide name; the pool-wide
// token works on no desktop; leaving revokes the token and frees the
// desktop for the next annotator.
func TestStudioLeases(t *testing.T) {
	p, base := startStudioPool(t, 2, time.Hour)
	a, code := studioLeaseFor(t, base, testAnnotators[0])
	if code != 201 || a.Token == "" {
		t.Fatalf("annotator A's lease: %d %+v", code, a)
	}
	b, code := studioLeaseFor(t, base, testAnnotators[1])
	if code != 201 || b.Token == "" {
		t.Fatalf("annotator B's lease: %d %+v", code, b)
	}
	if a.Desktop == b.Desktop {
		t.Fatalf("both annotators got desktop %d", a.Desktop)
	}
	if want := "/d/" + strconv.Itoa(a.Desktop) + "/?"; !strings.HasPrefix(a.URL, want) || !strings.Contains(a.URL, "lease="+a.ID) || !strings.Contains(a.URL, "token="+a.Token) {
		t.Errorf("A's page URL %q, want %s with lease= and token=", a.URL, want)
	}
	// Asking again is the desktop one has: one token cannot take the pool.
	if again, code := studioLeaseFor(t, base, testAnnotators[0]); code != 200 || again.ID != a.ID || again.Token != a.Token {
		t.Errorf("annotator A asking again: %d %+v, want 200 and A's lease %s", code, again, a.ID)
	}
	c, code := studioLeaseFor(t, base, testAnnotators[2])
	if code != 503 || !strings.Contains(c.Error, "all 2 desktops are in use") {
		t.Errorf("a third annotator on a pool of two: %d %+v, want 503 saying every desktop is in use", code, c)
	}
	// An operator has every desktop already: no studio lease.
	if _, code := studioLeaseFor(t, base, testOperator); code != 403 {
		t.Errorf("an operator's studio lease: %d, want 403", code)
	}

	tasks := func(desk int) string { return base + "/d/" + strconv.Itoa(desk) + "/api/tasks" }
	cases := []struct {
		name  string
		desk  int
		token string
		want  int
	}{
		{"A's token on A's desktop", a.Desktop, a.Token, 200},
		{"A's token on B's desktop", b.Desktop, a.Token, 401},
		{"B's token on B's desktop", b.Desktop, b.Token, 200},
		{"B's token on A's desktop", a.Desktop, b.Token, 401},
		{"A's pool-wide token on A's desktop", a.Desktop, testAnnotators[0], 401},
		{"the operator's token on A's desktop", a.Desktop, testOperator, 200},
	}
	for _, tc := range cases {
		if code := doJSON(t, "GET", tasks(tc.desk), tc.token, nil, nil); code != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, code, tc.want)
		}
	}
	// What A records carries the name of A's pool-wide token.
	var who struct{ Who string }
	doJSON(t, "GET", base+"/d/"+strconv.Itoa(a.Desktop)+"/whoami", a.Token, nil, &who)
	if want := "annotator:" + auth.TokenID(testAnnotators[0]); who.Who != want {
		t.Errorf("A's desktop token is %q, want %q", who.Who, want)
	}

	release := func(id, token string) int { return doJSON(t, "DELETE", base+"/studio/lease/"+id, token, nil, nil) }
	if code := release(a.ID, ""); code != 401 {
		t.Errorf("releasing A's lease without a token: %d, want 401", code)
	}
	if code := release(a.ID, b.Token); code != 404 {
		t.Errorf("B's page releasing A's lease: %d, want 404", code)
	}
	if code := release(strings.Repeat("x", 200), a.Token); code != 404 {
		t.Errorf("releasing a 200-character lease id: %d, want 404", code)
	}
	// The page leaving (or reloading) releases it studioGrace later unless
	// a page views the desktop again: none does here (no stream).
	p.mu.Lock()
	p.studioGrace = 50 * time.Millisecond
	p.mu.Unlock()
	if code := release(a.ID, a.Token); code != 202 {
		t.Fatalf("A's page releasing A's lease: %d, want 202 (released after the grace)", code)
	}
	waitStatus(t, tasks(a.Desktop), a.Token, 401, "A's token to be refused once A's page left")
	if code := release(a.ID, a.Token); code != 404 {
		t.Errorf("releasing A's lease twice: %d, want 404", code)
	}
	// C gets the desktop A left (once it is reset), with a token of its own.
	c, code = studioLeaseFor(t, base, testAnnotators[2])
	if code != 201 || c.Desktop != a.Desktop || c.Token == a.Token {
		t.Fatalf("C's lease after A left: %d %+v, want desktop %d with a new token", code, c, a.Desktop)
	}
	// B's pool-wide token releases B's own lease (the page may have lost
	// its lease token); C's it may not.
	if code := release(c.ID, testAnnotators[1]); code != 404 {
		t.Errorf("B releasing C's lease: %d, want 404", code)
	}
	if code := release(b.ID, testAnnotators[1]); code != 204 {
		t.Errorf("B releasing B's lease with B's pool-wide token: %d, want 204", code)
	}
	// An operator lists C's lease with its annotator and ends it as any
	// lease.
	var list struct {
		Leases []struct {
			ID        string `json:"lease_id"`
			Annotator string `json:"annotator"`
		} `json:"leases"`
	}
	if code := doJSON(t, "GET", base+"/leases", testOperator, nil, &list); code != 200 || len(list.Leases) != 1 ||
		list.Leases[0].ID != c.ID || list.Leases[0].Annotator != "annotator:"+auth.TokenID(testAnnotators[2]) {
		t.Errorf("GET /leases with C's studio lease: %d %+v", code, list)
	}
	if code := doJSON(t, "DELETE", base+"/leases/"+c.ID, testOperator, nil, nil); code != 204 {
		t.Errorf("the operator ending C's studio lease: %d, want 204", code)
	}
	if code := doJSON(t, "GET", tasks(c.Desktop), c.Token, nil, nil); code != 401 {
		t.Errorf("C's token after the operator ended its lease: %d, want 401", code)
	}
}

// TestStudioLobby: the pool's page is the lobby for an annotator's token,
// and desktop 0's page, token kept, for everyone else.
func TestStudioLobby(t *testing.T) {
	_, base := startStudioPool(t, 2, time.Hour)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	cases := []struct {
		name, query  string
		code         int
		location     string
		bodyContains string
	}{
		{"annotator", "?token=" + testAnnotators[0], 200, "", `src="lobby.js"`},
		{"operator", "?token=" + testOperator, 302, "/d/0/?token=" + testOperator, ""},
		{"nobody", "", 302, "/d/0/", ""},
		{"a wrong token", "?token=wrong-token-0123456789abcdef", 302, "/d/0/?token=wrong-token-0123456789abcdef", ""},
	}
	for _, tc := range cases {
		resp, err := noFollow.Get(base + "/" + tc.query)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || resp.Header.Get("Location") != tc.location || !strings.Contains(string(body), tc.bodyContains) {
			t.Errorf("%s: GET /%s: %d Location %q, want %d %q and a body with %q", tc.name, tc.query, resp.StatusCode, resp.Header.Get("Location"), tc.code, tc.location, tc.bodyContains)
		}
	}
	resp, err := http.Get(base + "/lobby.js")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /lobby.js: %v %v", err, resp)
	}
	resp.Body.Close()
}

// TestStudioIdle: a desktop nobody watches goes back to the pool after
// --studio-idle, its token revoked.
func TestStudioIdle(t *testing.T) {
	_, base := startStudioPool(t, 1, 100*time.Millisecond)
	a, code := studioLeaseFor(t, base, testAnnotators[0])
	if code != 201 {
		t.Fatalf("lease: %d %+v", code, a)
	}
	waitStatus(t, base+"/d/0/api/tasks", a.Token, 401, "the idle annotator's token to be refused (--studio-idle 100ms)")
	var list struct {
		Leases []any `json:"leases"`
	}
	if code := doJSON(t, "GET", base+"/leases", testOperator, nil, &list); code != 200 || len(list.Leases) != 0 {
		t.Errorf("leases after the idle timeout: %d %+v, want none", code, list)
	}
	if b, code := studioLeaseFor(t, base, testAnnotators[1]); code != 201 || b.Desktop != 0 {
		t.Errorf("the next annotator's lease: %d %+v, want desktop 0", code, b)
	}
}

// TestStudioIdleConfig: --studio-idle must be positive; 0 (a Config built
// without DefaultConfig) is the default.
func TestStudioIdleConfig(t *testing.T) {
	cases := []struct {
		idle time.Duration
		err  string
	}{
		{10 * time.Minute, ""},
		{0, ""},
		{-time.Second, "--studio-idle -1s: must be more than 0"},
	}
	for _, c := range cases {
		cfg := DefaultConfig()
		cfg.StudioIdle = c.idle
		err := cfg.Validate()
		if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("--studio-idle %s: %v, want %q", c.idle, err, c.err)
		}
	}
}

// waitStatus polls GET u with token until it answers want: polled, not
// timed, since the machine is noisy.
func waitStatus(t *testing.T, u, token string, want int, what string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for doJSON(t, "GET", u, token, nil, nil) != want {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
