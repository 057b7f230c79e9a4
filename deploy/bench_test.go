package deploy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// BenchmarkIdleDesktop measures what one desktop costs at rest, the figures
// docs/SCALE.md sizes a fleet with: memory (RSS and PSS summed over deskenv,
// Xvfb, the window manager and the session's apps) after the appliance has
// settled, its CPU while nobody uses it, and its memory again after an agent
// has taken 20 steps. Each case starts the real binary; one iteration
// takes settle + idle seconds, so run it once:
//
//	go test ./deploy/ -run '^$' -bench IdleDesktop -benchtime=1x
//
// DESKENV_BENCH_SETTLE and DESKENV_BENCH_IDLE (seconds, default 10 and 30)
// change the two waits.
func BenchmarkIdleDesktop(b *testing.B) {
	bin := buildDeskenv(b)
	settle := envSeconds(b, "DESKENV_BENCH_SETTLE", 10)
	idle := envSeconds(b, "DESKENV_BENCH_IDLE", 30)
	chromium := "chromium --no-sandbox --no-first-run --no-default-browser-check --disable-gpu --password-store=basic about:blank"
	cases := []struct {
		name     string
		desktops int
		apps     string
	}{
		{"single/xterm", 1, "xterm"},
		{"single/xterm+chromium", 1, "xterm;" + chromium},
		{"pool8/xterm", 8, "xterm"},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				m := measureIdle(b, bin, tc.desktops, tc.apps, settle, idle)
				n := float64(tc.desktops)
				b.ReportMetric(m.rssKB/1024/n, "RSS-MB/desktop")
				b.ReportMetric(m.pssKB/1024/n, "PSS-MB/desktop")
				b.ReportMetric(m.cpuPct/n, "idle-CPU-%/desktop")
				b.ReportMetric(m.anonKB/1024/n, "anon-MB/desktop")
				b.ReportMetric(m.usedRSSKB/1024/n, "RSS-after-20-steps-MB/desktop")
				b.ReportMetric(m.usedAnonKB/1024/n, "anon-after-20-steps-MB/desktop")
				b.ReportMetric(m.cpuMSPerStep, "CPU-ms/step")
				b.ReportMetric(m.ready.Seconds(), "s-to-ready")
				b.Logf("%d desktop(s), apps %q: %d processes; RSS %.1f MB, PSS %.1f MB, anon+shmem %.1f MB in all; idle CPU %.3f %% of one core over %s; 20 agent steps per desktop took %.1f CPU-ms each, after them RSS %.1f MB, anon+shmem %.1f MB; RSS (anon+shmem) by program: %s",
					tc.desktops, tc.apps, m.procs, m.rssKB/1024, m.pssKB/1024, m.anonKB/1024, m.cpuPct, idle, m.cpuMSPerStep, m.usedRSSKB/1024, m.usedAnonKB/1024, m.byName)
			}
		})
	}
}

type idleFigures struct {
	procs                 int
	rssKB, pssKB, anonKB  float64
	usedRSSKB, usedAnonKB float64
	cpuPct                float64 // of one core
	cpuMSPerStep          float64 // CPU time per agent step, all processes
	ready                 time.Duration
	byName                string
}

func measureIdle(b *testing.B, bin string, desktops int, apps string, settle, idle time.Duration) idleFigures {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	home := b.TempDir()
	args := []string{"--addr", "127.0.0.1:0", "--log-format", "json", "--home", filepath.Join(home, "desk"), "--apps", apps}
	if desktops > 1 {
		args = append(args, "--desktops", strconv.Itoa(desktops))
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_DATA_HOME="+filepath.Join(home, "data"))
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 15 * time.Second
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	base, logs := waitReady(b, stderr)
	ready := time.Since(start)

	// Let start-up work (font caches, the browser's first paint) finish.
	time.Sleep(settle)
	pids := processTree(cmd.Process.Pid)
	var f idleFigures
	f.ready = ready
	f.procs = len(pids)
	names := map[string][2]float64{}
	for _, p := range pids {
		rss, pss, anon := memKB(p)
		f.rssKB += rss
		f.pssKB += pss
		f.anonKB += anon
		v := names[comm(p)]
		names[comm(p)] = [2]float64{v[0] + rss, v[1] + anon}
	}
	var parts []string
	for n, kb := range names {
		parts = append(parts, fmt.Sprintf("%s %.1f (%.1f) MB", n, kb[0]/1024, kb[1]/1024))
	}
	slices.Sort(parts)
	f.byName = strings.Join(parts, ", ")

	t0 := cpuTicks(pids)
	time.Sleep(idle)
	// /proc counts CPU time in USER_HZ ticks, 100 a second on Linux.
	f.cpuPct = float64(cpuTicks(pids)-t0) / 100 / idle.Seconds() * 100

	// An agent's work costs CPU and grows deskenv's buffers (capture, PNG
	// encoding): 20 steps per desktop, each typing a character into the
	// focused window and getting back the screenshot of the changed screen
	// once it settles, as a model's step does. (Plain screenshots of an
	// unchanged screen would flatter: those are served without re-encoding.)
	busy := processTree(cmd.Process.Pid)
	t1 := cpuTicks(busy)
	var wg sync.WaitGroup
	errs := make([]error, desktops)
	for i := range desktops {
		url := base + "/mcp"
		if desktops > 1 {
			url = base + "/d/" + strconv.Itoa(i) + "/mcp"
		}
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = agentSteps(ctx, url, 20) }()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			b.Fatalf("desktop %d: %v\n%s", i, err, logs())
		}
	}
	// Ticks are 10 ms: over 20 steps per desktop that is 0.5 ms resolution
	// per step.
	f.cpuMSPerStep = float64(cpuTicks(busy)-t1) * 10 / float64(20*desktops)
	for _, p := range processTree(cmd.Process.Pid) {
		rss, _, anon := memKB(p)
		f.usedRSSKB += rss
		f.usedAnonKB += anon
	}
	return f
}

func agentSteps(ctx context.Context, url string, n int) error {
	tr, err := transport.NewStreamableHTTP(url)
	if err != nil {
		return err
	}
	c := client.NewClient(tr)
	defer c.Close()
	if err := c.Start(ctx); err != nil {
		return fmt.Errorf("MCP start %s: %w", url, err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "deploy-bench", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		return fmt.Errorf("MCP initialize %s: %w", url, err)
	}
	for range n {
		req := mcp.CallToolRequest{}
		req.Params.Name = "computer"
		req.Params.Arguments = map[string]any{"action": "type", "text": "x"}
		res, err := c.CallTool(ctx, req)
		if err != nil {
			return fmt.Errorf("type: %w", err)
		}
		if res.IsError {
			return fmt.Errorf("type: tool error %+v", res.Content)
		}
		shot := false
		for _, c := range res.Content {
			if _, ok := c.(mcp.ImageContent); ok {
				shot = true
			}
		}
		if !shot {
			return fmt.Errorf("type: the result has no screenshot: %+v", res.Content)
		}
	}
	return nil
}

// waitReady reads deskenv's JSON log until it says where it listens, then
// keeps draining it; logs returns what it has read so far, for errors.
func waitReady(b *testing.B, r io.Reader) (base string, logs func() string) {
	b.Helper()
	var mu sync.Mutex
	var buf bytes.Buffer
	logs = func() string { mu.Lock(); defer mu.Unlock(); return buf.String() }
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			mu.Lock()
			buf.Write(sc.Bytes())
			buf.WriteByte('\n')
			mu.Unlock()
			var line struct {
				Msg string `json:"msg"`
				URL string `json:"url"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "deskenv is ready" {
				select {
				case found <- strings.TrimSuffix(line.URL, "/"):
				default:
				}
			}
		}
	}()
	select {
	case base = <-found:
	case <-time.After(90 * time.Second):
		b.Fatalf("deskenv did not say it was ready within 90 s:\n%s", logs())
	}
	resp, err := http.Get(base + "/health")
	if err != nil {
		b.Fatalf("/health: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("/health: %s", resp.Status)
	}
	return base, logs
}

func buildDeskenv(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "deskenv")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/deskenv")
	cmd.Dir = repoRoot(b)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build ./cmd/deskenv: %v\n%s", err, out)
	}
	return bin
}

func envSeconds(b *testing.B, name string, def int) time.Duration {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return time.Duration(def) * time.Second
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a whole number of seconds, at least 1", name, v)
	}
	return time.Duration(n) * time.Second
}

// processTree is pid and all its descendants, from /proc.
func processTree(pid int) []int {
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", out[i]))
		for _, t := range tasks {
			b, err := os.ReadFile(t)
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(b)) {
				if c, err := strconv.Atoi(f); err == nil {
					out = append(out, c)
				}
			}
		}
	}
	return out
}

// memKB reads a process's memory, in kB: its resident set; its proportional
// share (shared pages divided among all processes mapping them, on this
// machine, so it depends on what else runs); and its anonymous memory plus
// its share of shared memory (SysV segments, /dev/shm), which no other
// desktop can share and the kernel cannot drop: what each added desktop
// costs once the program files are in the page cache.
func memKB(pid int) (rss, pss, anon float64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "Rss:":
			rss = v
		case "Pss:":
			pss = v
		case "Anonymous:", "Pss_Shmem:":
			anon += v
		}
	}
	return rss, pss, anon
}

func comm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}

// cpuTicks sums user and system time of the processes, in clock ticks.
func cpuTicks(pids []int) int64 {
	var sum int64
	for _, p := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		// The command name may hold spaces; fields count from after its ')'.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		k, _ := strconv.ParseInt(f[12], 10, 64)
		sum += u + k
	}
	return sum
}
