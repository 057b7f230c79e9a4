package appliance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/internal/xprobe"
)

const testOperator = "operator-token-0123456789abcdef"

// startPool starts a pool of n bare desktops (no window manager, no apps,
// no stream) in this process, behind its door on a free port, as deskenv
// serves it; it returns the pool and its base URL.
func startPool(t *testing.T, n int) (*Pool, string) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Desktops, cfg.NoStream, cfg.WM, cfg.Apps = n, true, "", ""
	cfg.OperatorToken = testOperator
	cfg.Home, cfg.Episodes = reachableDir(t), t.TempDir()
	p, err := NewPool(context.Background(), cfg, testrig.Logger(t))
	if err != nil {
		t.Fatalf("start a pool of %d desktops: %v", n, err)
	}
	t.Cleanup(func() { p.Close() })
	srv := httptest.NewUnstartedServer(p.Handler())
	// As deskenv's server: the door asks who opened each connection.
	srv.Config.ConnContext = ConnContext
	srv.Start()
	t.Cleanup(srv.Close)
	return p, srv.URL
}

// reachableDir is a temporary directory the session users can search
// through (t.TempDir's parent is 0700): their homes go under it.
func reachableDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for d := dir; d != "/" && d != os.TempDir() && d != "."; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o011 != 0o011 {
			os.Chmod(d, fi.Mode().Perm()|0o011)
		}
	}
	return dir
}

// useXAuthority points this process's X clients at a file holding the
// cookies of the given Xauthority files, as /desktops names them.
// Xauthority files are sequences of records, so the files are joined.
func useXAuthority(t *testing.T, files ...string) {
	t.Helper()
	var all []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("read the display's cookie: %v", err)
		}
		all = append(all, b...)
	}
	p := filepath.Join(t.TempDir(), "Xauthority")
	if err := os.WriteFile(p, all, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XAUTHORITY", p)
}

func doJSON(t testing.TB, method, url, token string, body any, out any, header ...string) int {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, _ := http.NewRequest(method, url, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		b, _ := io.ReadAll(resp.Body)
		json.Unmarshal(b, out)
	}
	return resp.StatusCode
}

func agentClient(t *testing.T, url, token string) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "pool-agent", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatalf("initialize %s: %v", url, err)
	}
	return c
}

type leaseResp struct {
	ID         string `json:"lease_id"`
	Desktop    int    `json:"desktop"`
	MCP        string `json:"mcp"`
	AgentToken string `json:"agent_token"`
}

// TestPool runs 8 desktops in one process: leases hand each out once, 8
// agents click at once, each only on its own desktop, and one desktop's token
// is refused by the others.
func TestPool(t *testing.T) {
	const n = 8
	_, base := startPool(t, n)

	var desks struct {
		Desktops []struct {
			Index      int    `json:"index"`
			Display    string `json:"display"`
			XAuthority string `json:"xauthority"`
		} `json:"desktops"`
	}
	if code := doJSON(t, "GET", base+"/desktops", testOperator, nil, &desks); code != 200 || len(desks.Desktops) != n {
		t.Fatalf("GET /desktops: %d %+v", code, desks)
	}
	// Every display wants its cookie: the probes get all of them.
	var files []string
	for _, d := range desks.Desktops {
		files = append(files, d.XAuthority)
	}
	useXAuthority(t, files...)
	probes := make([]*xprobe.Probe, n)
	for i, d := range desks.Desktops {
		p, err := xprobe.Open(d.Display, xprobe.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		probes[i] = p
	}

	if code := doJSON(t, "POST", base+"/leases", "", nil, nil); code != http.StatusUnauthorized {
		t.Errorf("lease without a token: %d, want 401", code)
	}
	leases := make([]leaseResp, n)
	seen := map[int]bool{}
	for i := range n {
		if code := doJSON(t, "POST", base+"/leases", testOperator, nil, &leases[i]); code != http.StatusCreated {
			t.Fatalf("lease %d: status %d", i, code)
		}
		if seen[leases[i].Desktop] || leases[i].AgentToken == "" {
			t.Fatalf("lease %d: desktop %d handed out twice, or no token", i, leases[i].Desktop)
		}
		seen[leases[i].Desktop] = true
	}
	var full map[string]string
	if code := doJSON(t, "POST", base+"/leases", testOperator, nil, &full); code != http.StatusServiceUnavailable {
		t.Errorf("ninth lease: %d %v, want 503", code, full)
	}

	// Desktop 0's token opens no other desktop.
	other := leases[1]
	req, _ := http.NewRequest("POST", base+other.MCP, bytes.NewReader([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)))
	req.Header.Set("Authorization", "Bearer "+leases[0].AgentToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
		t.Errorf("desktop %d's token on desktop %d: status %d, want 401/403", leases[0].Desktop, other.Desktop, resp.StatusCode)
	}

	// Eight agents at once, each clicking at a place of its own.
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for _, l := range leases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := agentClient(t, base+l.MCP, l.AgentToken)
			req := mcp.CallToolRequest{}
			req.Params.Name = "computer"
			req.Params.Arguments = map[string]any{"action": "left_click", "coordinate": []int{100 + 10*l.Desktop, 200 + 10*l.Desktop}}
			res, err := c.CallTool(context.Background(), req)
			if err != nil || res.IsError {
				errs <- fmt.Errorf("desktop %d click: %v %+v", l.Desktop, err, res)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i, p := range probes {
		p.Sync(context.Background())
		var presses []xprobe.Event
		for _, e := range p.Events() {
			if e.Kind == xprobe.ButtonPress {
				presses = append(presses, e)
			}
		}
		if len(presses) != 1 || presses[0].X != 100+10*i || presses[0].Y != 200+10*i {
			t.Errorf("desktop %d saw presses %v, want exactly one at %d,%d", i, presses, 100+10*i, 200+10*i)
		}
	}

	if code := doJSON(t, "DELETE", base+"/leases/"+leases[3].ID, testOperator, nil, nil); code != http.StatusNoContent {
		t.Fatalf("release: %d", code)
	}
	if code := doJSON(t, "DELETE", base+"/leases/"+leases[3].ID, testOperator, nil, nil); code != http.StatusNotFound {
		t.Errorf("second release of the same lease: %d, want 404", code)
	}
	var again leaseResp
	if code := doJSON(t, "POST", base+"/leases", testOperator, nil, &again); code != http.StatusCreated || again.Desktop != leases[3].Desktop {
		t.Errorf("lease after release: %d desktop %d, want desktop %d", code, again.Desktop, leases[3].Desktop)
	}
}

// TestLeasesSameOrigin: the lease API is behind the same door as every
// other route, so a page of another origin cannot take or end a lease with
// the operator's cookie or token, while its own pages and clients that are
// not browsers can.
func TestLeasesSameOrigin(t *testing.T) {
	_, base := startPool(t, 2)
	cross := [][]string{
		{"Origin", "https://evil.example"},
		{"Origin", "null"},
		{"Origin", base, "Sec-Fetch-Site", "cross-site"},
		{"Sec-Fetch-Site", "same-site"},
	}
	var l leaseResp
	if code := doJSON(t, "POST", base+"/leases", testOperator, nil, &l); code != http.StatusCreated {
		t.Fatalf("lease from a client that is not a browser: %d, want 201", code)
	}
	tests := []struct {
		method, path string
	}{
		{"POST", "/leases"},
		{"DELETE", "/leases/" + l.ID},
	}
	for _, tc := range tests {
		for _, h := range cross {
			var e struct {
				Error string `json:"error"`
			}
			if code := doJSON(t, tc.method, base+tc.path, testOperator, map[string]any{}, &e, h...); code != http.StatusForbidden || !strings.Contains(e.Error, "cross-origin") {
				t.Errorf("%s %s with %v: %d %q, want 403 cross-origin", tc.method, tc.path, h, code, e.Error)
			}
		}
	}
	// Reading is not refused: a GET changes nothing.
	if code := doJSON(t, "GET", base+"/leases", testOperator, nil, nil, "Origin", "https://evil.example"); code != http.StatusOK {
		t.Errorf("GET /leases from another origin: %d, want 200", code)
	}
	// The lease refused above is still there, and its own page may end it.
	same := []string{"Origin", base, "Sec-Fetch-Site", "same-origin"}
	if code := doJSON(t, "DELETE", base+"/leases/"+l.ID, testOperator, nil, nil, same...); code != http.StatusNoContent {
		t.Errorf("same-origin DELETE /leases/%s: %d, want 204", l.ID, code)
	}
	if code := doJSON(t, "POST", base+"/leases", testOperator, map[string]any{}, nil, same...); code != http.StatusCreated {
		t.Errorf("same-origin POST /leases: %d, want 201", code)
	}
}

func TestReadLeaseRequest(t *testing.T) {
	seven := int64(7)
	tests := []struct {
		body    string
		want    leaseRequest
		wantErr string
	}{
		{"", leaseRequest{}, ""},
		{`{}`, leaseRequest{}, ""},
		{`{"task_id":"hello","seed":7}`, leaseRequest{TaskID: "hello", Seed: &seven}, ""},
		{`{"seed":-1}`, leaseRequest{}, "seed -1 is negative"},
		{`{"seed":1.5}`, leaseRequest{}, "lease request body"},
		{`{"task":"hello"}`, leaseRequest{}, "unknown field"},
		{`[`, leaseRequest{}, "lease request body"},
	}
	for _, tc := range tests {
		got, err := readLeaseRequest(strings.NewReader(tc.body))
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("readLeaseRequest(%q): error %v, want one mentioning %q", tc.body, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got.TaskID != tc.want.TaskID || (got.Seed == nil) != (tc.want.Seed == nil) ||
			(got.Seed != nil && *got.Seed != *tc.want.Seed) {
			t.Errorf("readLeaseRequest(%q) = %+v, %v; want %+v", tc.body, got, err, tc.want)
		}
	}
}
