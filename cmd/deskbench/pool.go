package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/deskenv/deskenv/internal/proc"
)

// runPool measures pool mode: memory per idle desktop (the appliance's share
// plus Xvfb and the session), desktops started per second, aggregate actions
// per second with N agents at once, and screenshot p50 with 1, 4 and 8
// agents active.
func runPool(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("deskbench pool", flag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.Int("desktops", 8, "desktops in the pool")
	bin := fs.String("bin", "", "deskenv binary (default: build ./cmd/deskenv)")
	idle := fs.Duration("idle", 10*time.Second, "idle time before memory is read")
	dur := fs.Duration("duration", 5*time.Second, "how long the agents act in each load test")
	extra := fs.String("appliance-args", "", "more flags for the appliance, space-separated (such as \"--settle-idle-quiet 0\" to compare)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	dir, err := tempDir("deskbench-pool")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if *bin, err = buildDeskenv(ctx, *bin, dir); err != nil {
		return err
	}
	home := filepath.Join(dir, "home")

	start := time.Now()
	app, err := startAppliance(ctx, *bin, 2*time.Minute, append([]string{"--desktops", strconv.Itoa(*n), "--home", home}, strings.Fields(*extra)...)...)
	if err != nil {
		return err
	}
	defer app.stop()
	base := app.base
	startup := time.Since(start)
	fmt.Fprintf(stdout, "pool of %d desktops ready in %s: %.2f desktops/s\n", *n, startup.Round(time.Millisecond), float64(*n)/startup.Seconds())

	time.Sleep(*idle)
	self, kids := pssTree(app.pid())
	fmt.Fprintf(stdout, "idle memory (PSS): appliance %.1f MB, Xvfb+session %.1f MB, total %.1f MB = %.1f MB per desktop\n",
		self/1e6, kids/1e6, (self+kids)/1e6, (self+kids)/1e6/float64(*n))

	// Lease every desktop: each agent gets its own.
	type lease struct {
		MCP string `json:"mcp"`
	}
	leases := make([]lease, *n)
	for i := range leases {
		resp, err := http.Post(base+"/leases", "application/json", nil)
		if err != nil {
			return err
		}
		json.NewDecoder(resp.Body).Decode(&leases[i])
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			return fmt.Errorf("lease %d: %s", i, resp.Status)
		}
	}
	clients := make([]*client.Client, *n)
	for i, l := range leases {
		c, err := dialMCP(ctx, base+l.MCP)
		if err != nil {
			return err
		}
		defer c.Close()
		clients[i] = c
	}

	// Aggregate clicks per second, all agents at once.
	var count atomic.Int64
	runAgents(clients, *dur, func(i int, c *client.Client) error {
		_, err := call(ctx, c, map[string]any{"action": "mouse_move", "coordinate": []int{100 + i, 100 + i}})
		if err == nil {
			count.Add(1)
		}
		return err
	})
	fmt.Fprintf(stdout, "%d agents at once: %.0f actions/s in aggregate (mouse_move through MCP, with the settled observation)\n", *n, float64(count.Load())/dur.Seconds())

	for _, k := range []int{1, 4, 8} {
		if k > *n {
			break
		}
		var mu sync.Mutex
		var lat []time.Duration
		runAgents(clients[:k], *dur, func(i int, c *client.Client) error {
			t0 := time.Now()
			_, err := call(ctx, c, map[string]any{"action": "screenshot"})
			if err == nil {
				mu.Lock()
				lat = append(lat, time.Since(t0))
				mu.Unlock()
			}
			return err
		})
		sort.Slice(lat, func(a, b int) bool { return lat[a] < lat[b] })
		if len(lat) == 0 {
			return fmt.Errorf("no screenshot succeeded with %d agents", k)
		}
		fmt.Fprintf(stdout, "screenshot with %d agents active: p50 %.1f ms, p95 %.1f ms (%d shots)\n", k,
			ms(lat[len(lat)/2]), ms(lat[len(lat)*95/100]), len(lat))
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func dialMCP(ctx context.Context, url string) (*client.Client, error) {
	tr, err := transport.NewStreamableHTTP(url)
	if err != nil {
		return nil, err
	}
	c := client.NewClient(tr)
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "deskbench", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		return nil, fmt.Errorf("initialize %s: %w", url, err)
	}
	return c, nil
}

func call(ctx context.Context, c *client.Client, args map[string]any) (*mcp.CallToolResult, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = "computer"
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	if err == nil && res.IsError {
		err = fmt.Errorf("tool error: %+v", res.Content)
	}
	return res, err
}

// runAgents runs f in a loop on every client at once for d.
func runAgents(clients []*client.Client, d time.Duration, f func(i int, c *client.Client) error) {
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				if f(i, c) != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
}

// pssTree returns the proportional set size of pid and of all its
// descendants, from /proc/*/smaps_rollup: shared libraries are counted once
// across the processes that share them, unlike RSS.
func pssTree(pid int) (self, descendants float64) {
	pfs := proc.Default()
	if v, err := pfs.PSS(pid); err == nil {
		self = float64(v)
	}
	tree, err := pfs.ReadTree(context.Background())
	if err != nil {
		return self, 0
	}
	for _, p := range tree.Below(map[int]bool{pid: true}) {
		v, _ := pfs.PSS(p) // 0 for one that exited since the reading
		descendants += float64(v)
	}
	return self, descendants
}
