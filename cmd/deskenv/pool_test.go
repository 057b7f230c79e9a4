package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/deskenv/deskenv/internal/xprobe"
)

const testOperator = "operator-token-0123456789abcdef"

// startPool runs the binary in pool mode and returns its base URL.
func startPool(t *testing.T, n int) string {
	t.Helper()
	return startDeskenv(t, "--desktops", fmt.Sprint(n), "--no-stream",
		"--wm", "", "--apps", "", "--operator-token", testOperator, "--home", t.TempDir()).base
}

func doJSON(t *testing.T, method, url, token string, body any, out any) int {
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
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		json.NewDecoder(resp.Body).Decode(out)
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

// TestPool runs 8 desktops in one process: leases hand each out once, 8
// agents click at once, each only on its own desktop, and one desktop's token
// is refused by the others.
func TestPool(t *testing.T) {
	const n = 8
	base := startPool(t, n)

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
	type leaseResp struct {
		ID         string `json:"lease_id"`
		Desktop    int    `json:"desktop"`
		MCP        string `json:"mcp"`
		AgentToken string `json:"agent_token"`
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
