package main

// The front door, tried from the attacker's side: the real binary, its own
// Xvfb, real HTTP over TCP.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

const (
	testAgent  = "agent-token-0123456789abcdef"
	testViewer = "viewer-token-0123456789abcdef"
	testAnnot  = "annotator-token-0123456789abcdef"
	testWrong  = "wrong-token-0123456789abcdef"
)

// deskenv is one running appliance in a test.
type deskenv struct {
	base string // http://127.0.0.1:port
	pid  int
	log  func() string // what it has logged so far
}

// startDeskenv runs the binary with args (plus --addr 127.0.0.1:0 unless
// args give --addr) and waits until it is ready; it is stopped with SIGTERM
// at the end of the test.
func startDeskenv(t *testing.T, args ...string) *deskenv {
	t.Helper()
	bin := buildBinary(t)
	if !strings.Contains(strings.Join(args, " "), "--addr") {
		args = append([]string{"--addr", "127.0.0.1:0"}, args...)
	}
	reachableHomes(t, args)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+t.TempDir())
	base, logs := startAs(t, cmd)
	return &deskenv{base: base, pid: cmd.Process.Pid, log: logs}
}

// procStatus reads one field of /proc/pid/status in kB.
func procStatus(t *testing.T, pid int, field string) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(field + `:\s+(\d+)`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no %s in /proc/%d/status", field, pid)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

func openFDs(t *testing.T, pid int) int {
	t.Helper()
	es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

// request sends one request and returns its status and error message.
func request(t *testing.T, method, u, token string, body io.Reader, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(b)
}

const mcpInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"door","version":"1"}}}`

// TestDoorLimits: a 100 MB body to /mcp gets 413 without the appliance
// growing by its size, and 1,000 idle keep-alive connections are closed
// after the idle timeout.
func TestDoorLimits(t *testing.T) {
	d := startDeskenv(t, "--no-stream", "--wm", "", "--apps", "", "--home", t.TempDir(),
		"--agent-token", testAgent, "--operator-token", testOperator,
		// Long enough that opening 1,000 connections on a loaded 2-core
		// machine finishes before the first is closed; short for a test.
		"--idle-timeout", "5s", "--read-header-timeout", "5s", "--max-conns", "2000")

	t.Run("100 MB body", func(t *testing.T) {
		const size = 100 << 20
		// Warm up: the first MCP request allocates the server's session
		// state, which is not what is measured.
		if code, msg := request(t, "POST", d.base+"/mcp", testAgent, strings.NewReader(mcpInit), "Content-Type", "application/json", "Accept", "application/json, text/event-stream"); code != 200 {
			t.Fatalf("initialize: %d %s", code, msg)
		}
		before := procStatus(t, d.pid, "VmRSS")
		for _, declared := range []bool{true, false} {
			// With Content-Length the door refuses before reading; chunked,
			// the limit trips while mcp-go reads the body itself.
			var body io.Reader = io.LimitReader(zeros{}, size)
			req, _ := http.NewRequest("POST", d.base+"/mcp", body)
			if declared {
				req.ContentLength = size
			} else {
				req.ContentLength = -1
			}
			req.Header.Set("Authorization", "Bearer "+testAgent)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("100 MB POST /mcp (Content-Length given: %v): %v", declared, err)
			}
			msg, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(msg), "larger than") {
				t.Errorf("100 MB POST /mcp (Content-Length given: %v): %d %s, want 413 saying the limit", declared, resp.StatusCode, msg)
			}
			t.Logf("100 MB POST /mcp (Content-Length given: %v): %d; RSS now %d kB", declared, resp.StatusCode, procStatus(t, d.pid, "VmRSS"))
		}
		after := procStatus(t, d.pid, "VmRSS")
		t.Logf("RSS before %d kB, after two 100 MB bodies %d kB: growth %d kB", before, after, after-before)
		if after-before > 20<<10 {
			t.Errorf("RSS grew by %d kB on a refused 100 MB body, want under 20 MB", after-before)
		}
	})

	t.Run("1000 idle connections", func(t *testing.T) {
		const n = 1000
		host := strings.TrimPrefix(d.base, "http://")
		baseFDs := openFDs(t, d.pid)
		conns := make([]net.Conn, n)
		for i := range conns {
			c, err := net.Dial("tcp", host)
			if err != nil {
				t.Fatalf("connection %d: %v", i, err)
			}
			defer c.Close()
			conns[i] = c
			// Half send one request at once and keep the connection
			// alive; half never send anything (--read-header-timeout
			// covers those).
			if i%2 == 1 {
				continue
			}
			fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: %s\r\n\r\n", host)
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("connection %d: %v", i, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.Close {
				t.Fatalf("connection %d: the server closed a keep-alive connection at once", i)
			}
		}
		held := openFDs(t, d.pid)
		t.Logf("deskenv holds %d descriptors with %d connections open (%d before)", held, n, baseFDs)
		if held < baseFDs+n/2 {
			t.Errorf("deskenv holds %d descriptors with %d connections open, %d before: were they accepted?", held, n, baseFDs)
		}
		start := time.Now()
		var wg sync.WaitGroup
		var mu sync.Mutex
		var open []int
		for i, c := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Generous: this bounds the test, not the server.
				c.SetReadDeadline(time.Now().Add(60 * time.Second))
				_, err := c.Read(make([]byte, 1))
				if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
					mu.Lock()
					open = append(open, i)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		t.Logf("all %d connections closed by the server within %s", n-len(open), time.Since(start).Round(10*time.Millisecond))
		if len(open) > 0 {
			t.Errorf("%d of %d idle connections were not closed by the server (e.g. %d)", len(open), n, open[0])
		}
		if code, _ := request(t, "GET", d.base+"/health", "", nil); code != 200 {
			t.Errorf("/health after the idle connections: %d", code)
		}
		t.Logf("deskenv holds %d descriptors after the server closed them", openFDs(t, d.pid))
	})
}

// zeros is an endless body.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestDoorOrigins: writes a page of another site sends through the user's
// browser are refused on every route that changes something, in single and
// pool mode, without tokens (where it matters most); the appliance's own
// pages and clients that are not browsers get through.
func TestDoorOrigins(t *testing.T) {
	single := startDeskenv(t, "--no-stream", "--wm", "", "--apps", "", "--home", t.TempDir())
	pool := startDeskenv(t, "--no-stream", "--wm", "", "--apps", "", "--home", t.TempDir(), "--desktops", "2")
	cases := []struct {
		name, base, path, body string
		okStatus               int
	}{
		{"single reset", single.base, "/api/reset", `{}`, 200},
		{"single recording", single.base, "/api/recording/start", `{}`, 201},
		{"pool lease", pool.base, "/leases", `{}`, 201},
		{"pool desktop reset", pool.base, "/d/1/api/reset", `{}`, 200},
		{"pool desktop recording", pool.base, "/d/1/api/recording/start", `{}`, 201},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			host := strings.TrimPrefix(c.base, "http://")
			for _, h := range [][]string{
				{"Origin", "https://evil.example"},
				{"Origin", "null"},
				{"Origin", "http://" + host, "Sec-Fetch-Site", "cross-site"},
				{"Sec-Fetch-Site", "same-site"},
			} {
				if code, msg := request(t, "POST", c.base+c.path, "", strings.NewReader(c.body), h...); code != 403 || !strings.Contains(msg, "cross-origin") {
					t.Errorf("POST %s with %v: %d %s, want 403", c.path, h, code, msg)
				}
			}
			if code, msg := request(t, "POST", c.base+c.path, "", strings.NewReader(c.body), "Origin", c.base, "Sec-Fetch-Site", "same-origin"); code != c.okStatus {
				t.Errorf("same-origin POST %s: %d %s, want %d", c.path, code, msg, c.okStatus)
			}
		})
	}
	// A cross-site websocket is refused too: it would carry the cookie.
	dialer := websocket.Dialer{}
	hdr := http.Header{"Origin": {"https://evil.example"}}
	if _, resp, err := dialer.Dial("ws"+strings.TrimPrefix(single.base, "http")+"/ws", hdr); err == nil || resp == nil || resp.StatusCode != 403 {
		t.Errorf("cross-site websocket /ws: %v %v, want 403", err, resp)
	}
}

// TestDoorTokenSources: a token in the URL (or a cookie) counts only to load
// the page or open a websocket; on POST /mcp and the control plane it is
// refused, not silently ignored.
func TestDoorTokenSources(t *testing.T) {
	d := startDeskenv(t, "--no-stream", "--wm", "", "--apps", "", "--home", t.TempDir(),
		"--agent-token", testAgent, "--operator-token", testOperator, "--viewer-token", testViewer)
	mcpHdr := []string{"Content-Type", "application/json", "Accept", "application/json, text/event-stream"}
	refused := []struct {
		name, method, path, body string
		header                   []string
	}{
		{"query on POST /mcp", "POST", "/mcp?token=" + testAgent, mcpInit, mcpHdr},
		{"access_token on POST /mcp", "POST", "/mcp?access_token=" + testAgent, mcpInit, mcpHdr},
		{"cookie on POST /mcp", "POST", "/mcp", mcpInit, append([]string{"Cookie", "deskenv_token=" + testAgent}, mcpHdr...)},
		{"query on POST /api/reset", "POST", "/api/reset?token=" + testOperator, `{}`, nil},
		{"query on GET /api/state", "GET", "/api/state?token=" + testOperator, "", nil},
		{"cookie on GET /api/state", "GET", "/api/state", "", []string{"Cookie", "deskenv_token=" + testOperator}},
		{"query on POST /api/recording/start", "POST", "/api/recording/start?token=" + testOperator, `{}`, nil},
		{"query beside a header on POST /api/reset", "POST", "/api/reset?token=" + testOperator, `{}`, []string{"Authorization", "Bearer " + testOperator}},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			code, msg := request(t, c.method, d.base+c.path, "", strings.NewReader(c.body), c.header...)
			if code != 401 {
				t.Errorf("%s %s: %d %s, want 401", c.method, c.path, code, msg)
			}
		})
	}
	t.Run("page with token", func(t *testing.T) {
		if code, msg := request(t, "GET", d.base+"/?token="+testViewer, "", nil); code != 200 {
			t.Errorf("GET /?token=: %d %s", code, msg)
		}
	})
	ws := "ws" + strings.TrimPrefix(d.base, "http") + "/ws"
	t.Run("websocket with query token", func(t *testing.T) {
		c, resp, err := websocket.DefaultDialer.Dial(ws+"?token="+url.QueryEscape(testOperator), nil)
		if err != nil {
			t.Fatalf("websocket /ws?token=: %v %v", err, resp)
		}
		c.Close()
	})
	t.Run("websocket with cookie", func(t *testing.T) {
		c, resp, err := websocket.DefaultDialer.Dial(ws, http.Header{"Cookie": {"deskenv_token=" + testOperator}})
		if err != nil {
			t.Fatalf("websocket /ws with the cookie: %v %v", err, resp)
		}
		c.Close()
	})
	t.Run("websocket with an agent's query token", func(t *testing.T) {
		if _, resp, err := websocket.DefaultDialer.Dial(ws+"?token="+testAgent, nil); err == nil || resp == nil || resp.StatusCode != 403 {
			t.Errorf("websocket /ws with the agent token: %v %v, want 403", err, resp)
		}
	})
}

// TestDoorRoles is every route against every caller, in single and pool
// mode. The annotator's column is its role table (docs/STUDIO.md): it
// watches, takes control, lists tasks, resets and records; nothing else of
// the control plane, nor MCP, metrics or the pool's leases.
func TestDoorRoles(t *testing.T) {
	type route struct {
		method, path, body string
		// want by caller: anonymous, agent, viewer, annotator, operator,
		// wrong token
		want [6]int
	}
	callers := []string{"anonymous", "agent", "viewer", "annotator", "operator", "wrong"}
	public := [6]int{200, 200, 200, 200, 200, 200}
	operator := func(ok int) [6]int { return [6]int{401, 403, 403, 403, ok, 401} }
	annotator := func(ok int) [6]int { return [6]int{401, 403, 403, ok, ok, 401} }
	desk := func(prefix string) []route {
		return []route{
			{"GET", prefix + "/", "", public},
			{"GET", prefix + "/health", "", public},
			{"GET", prefix + "/whoami", "", public},
			{"POST", prefix + "/mcp", mcpInit, [6]int{401, 200, 403, 403, 403, 401}},
			// Not a websocket upgrade: the stream says so (400) once the
			// door has let the caller in.
			{"GET", prefix + "/stream/signal", "", [6]int{401, 403, 400, 400, 400, 401}},
			{"GET", prefix + "/api/state", "", operator(200)},
			{"GET", prefix + "/api/tasks", "", annotator(200)},
			{"GET", prefix + "/api/tasks/hello-file", "", operator(404)},
			{"GET", prefix + "/api/episodes", "", operator(200)},
			{"POST", prefix + "/api/episodes/none/end", "", operator(404)},
			{"GET", prefix + "/api/stats", "", operator(200)},
			{"GET", prefix + "/api/nothing", "", operator(404)},
			{"GET", prefix + "/api/recording", "", annotator(200)},
			{"POST", prefix + "/api/recording/pause", `{}`, annotator(409)},
			{"POST", prefix + "/api/recording/resume", `{}`, annotator(409)},
			{"POST", prefix + "/api/recording/stop", `{}`, annotator(409)},
			{"GET", prefix + "/api/recording/episodes", "", annotator(200)},
			{"GET", prefix + "/api/recording/episodes/none/review", "", annotator(404)},
			{"PUT", prefix + "/api/recording/episodes/none/review", `{"status":"accepted"}`, annotator(404)},
			{"DELETE", prefix + "/api/recording/episodes/none", "", annotator(404)},
			{"GET", prefix + "/api/recording/episodes/none", "", annotator(404)},
			{"GET", prefix + "/api/recording/episodes/none/shots/000001.png", "", annotator(404)},
			{"GET", prefix + "/api/recording/episodes/none/video/000000.h264", "", annotator(404)},
			// A reward set by hand is the operator's: 403 for the annotator
			// before "not recording" (409).
			{"POST", prefix + "/api/recording/stop", `{"reward":1,"done":true}`, [6]int{401, 403, 403, 403, 409, 401}},
			{"GET", prefix + "/metadata", "", operator(200)},
			{"GET", prefix + "/schema", "", operator(200)},
			{"GET", prefix + "/state", "", operator(200)},
			{"POST", prefix + "/step", `{"action":{"type":"list_tools"}}`, operator(200)},
			{"GET", prefix + "/openapi.json", "", operator(200)},
			{"GET", prefix + "/metrics", "", operator(200)},
			// Last: a reset as each caller that may (the annotator's and
			// the operator's both 200) changes nothing the rows above ask.
			{"POST", prefix + "/api/reset", `{}`, annotator(200)},
		}
	}
	// run calls every route as every caller (only those in cols, if any),
	// with the agent's and the annotator's tokens given.
	run := func(t *testing.T, d *deskenv, agent, annot string, routes []route, cols ...int) {
		tokens := []string{"", agent, testViewer, annot, testOperator, testWrong}
		for _, r := range routes {
			for i, who := range callers {
				if len(cols) > 0 && !slices.Contains(cols, i) {
					continue
				}
				hdr := []string{"Content-Type", "application/json", "Accept", "application/json, text/event-stream"}
				code, msg := request(t, r.method, d.base+r.path, tokens[i], strings.NewReader(r.body), hdr...)
				if code != r.want[i] {
					t.Errorf("%s %s as %s: %d %s, want %d", r.method, r.path, who, code, msg, r.want[i])
				}
				if code == 401 && !strings.Contains(msg, `"error"`) {
					t.Errorf("%s %s as %s: 401 without a JSON error: %s", r.method, r.path, who, msg)
				}
			}
		}
	}
	common := []string{"--wm", "", "--apps", "", "--operator-token", testOperator, "--viewer-token", testViewer, "--annotator-token", testAnnot}
	t.Run("single", func(t *testing.T) {
		d := startDeskenv(t, append([]string{"--home", t.TempDir(), "--agent-token", testAgent}, common...)...)
		run(t, d, testAgent, testAnnot, desk(""))
		// While the operator records, an annotator's reset would end the
		// episode under the recording: 409; the operator's own is fine.
		if code, msg := request(t, "POST", d.base+"/api/recording/start", testOperator, strings.NewReader(`{}`)); code != 201 {
			t.Fatalf("the operator's recording: %d %s", code, msg)
		}
		if code, msg := request(t, "POST", d.base+"/api/reset", testAnnot, strings.NewReader(`{}`)); code != 409 || !strings.Contains(msg, "someone else") {
			t.Errorf("an annotator's reset under the operator's recording: %d %s, want 409", code, msg)
		}
		if code, msg := request(t, "POST", d.base+"/api/recording/stop", testOperator, strings.NewReader(`{}`)); code != 200 {
			t.Errorf("the operator's stop: %d %s", code, msg)
		}
		if code, msg := request(t, "POST", d.base+"/api/reset", testAnnot, strings.NewReader(`{}`)); code != 200 {
			t.Errorf("an annotator's reset once the recording stopped: %d %s, want 200", code, msg)
		}
	})
	t.Run("pool", func(t *testing.T) {
		d := startDeskenv(t, append([]string{"--home", t.TempDir(), "--desktops", "2"}, common...)...)
		var l struct {
			Desktop    int    `json:"desktop"`
			AgentToken string `json:"agent_token"`
		}
		if code := doJSON(t, "POST", d.base+"/leases", testOperator, nil, &l); code != 201 {
			t.Fatalf("lease: %d", code)
		}
		// An annotator's own desktop (docs/STUDIO.md, pool mode): the
		// other one, with a token valid there alone.
		var st struct {
			Desktop int    `json:"desktop"`
			Token   string `json:"token"`
		}
		if code := doJSON(t, "POST", d.base+"/studio/lease", testAnnot, nil, &st); code != 201 || st.Desktop == l.Desktop {
			t.Fatalf("the annotator's studio lease: %d %+v, want 201 and desktop %d", code, st, 1-l.Desktop)
		}
		// A lease's agent token is valid on its desktop alone: the pool's
		// own routes do not know it (401, not 403). Leases stay the
		// operators'. The annotators' pool-wide token is valid at the
		// pool's entry only: on a desktop it is unknown (401).
		pool := func(ok int) [6]int { return [6]int{401, 401, 403, 403, ok, 401} }
		onDesk := desk("/d/" + strconv.Itoa(l.Desktop))
		for i := range onDesk {
			if onDesk[i].want[0] != 200 {
				onDesk[i].want[3] = 401
			}
		}
		routes := append(onDesk,
			route{"GET", "/leases", "", pool(200)},
			route{"GET", "/desktops", "", pool(200)},
			route{"GET", "/metrics", "", pool(200)},
			route{"POST", "/leases", `{"seed":-1}`, pool(400)},
			route{"DELETE", "/leases/none", "", pool(404)},
			route{"POST", "/d/" + strconv.Itoa(1-l.Desktop) + "/mcp", mcpInit, [6]int{401, 401, 403, 401, 403, 401}},
			route{"GET", "/health", "", public},
			route{"GET", "/", "", public},
			route{"GET", "/lobby.js", "", public},
			// The annotator asking again gets the desktop it has (200);
			// operators have every desktop already (403).
			route{"POST", "/studio/lease", "", [6]int{401, 401, 403, 200, 403, 401}},
			// Public, the lease's own token checked inside: 401 without a
			// token, 404 for a lease that is not the caller's.
			route{"DELETE", "/studio/lease/none", "", [6]int{401, 404, 404, 404, 404, 404}},
			route{"GET", "/nothing", "", [6]int{404, 404, 404, 404, 404, 404}},
		)
		run(t, d, l.AgentToken, testAnnot, routes)
		// The studio lease's token is the annotator's column on its own
		// desktop, and unknown on the other one and to the pool.
		run(t, d, l.AgentToken, st.Token, desk("/d/"+strconv.Itoa(st.Desktop)), 3)
		run(t, d, l.AgentToken, st.Token, []route{
			{"GET", "/d/" + strconv.Itoa(l.Desktop) + "/api/tasks", "", [6]int{3: 401}},
			{"GET", "/leases", "", [6]int{3: 401}},
		}, 3)
	})
}

// TestLeaseTokens: a lease's agent token works on its desktop for the
// lease's lifetime only; the next lease of the desktop gets another; a
// pool-wide agent token is refused at start unless asked for.
func TestLeaseTokens(t *testing.T) {
	d := startDeskenv(t, "--no-stream", "--wm", "", "--apps", "", "--home", t.TempDir(), "--desktops", "2",
		"--operator-token", testOperator)
	type leaseResp struct {
		ID         string `json:"lease_id"`
		Desktop    int    `json:"desktop"`
		MCP        string `json:"mcp"`
		AgentToken string `json:"agent_token"`
	}
	mcpHdr := []string{"Content-Type", "application/json", "Accept", "application/json, text/event-stream"}
	var seen []string
	for round := range 3 {
		var l leaseResp
		if code := doJSON(t, "POST", d.base+"/leases", testOperator, map[string]any{"seed": 7}, &l); code != 201 || l.AgentToken == "" {
			t.Fatalf("lease %d: %d %+v", round, code, l)
		}
		if l.Desktop != 0 {
			t.Fatalf("lease %d went to desktop %d: the first free one is 0", round, l.Desktop)
		}
		for _, s := range seen {
			if s == l.AgentToken {
				t.Fatalf("lease %d of desktop %d got the token of an earlier lease", round, l.Desktop)
			}
		}
		seen = append(seen, l.AgentToken)
		if code, msg := request(t, "POST", d.base+l.MCP, l.AgentToken, strings.NewReader(mcpInit), mcpHdr...); code != 200 {
			t.Fatalf("lease %d's token on its desktop: %d %s", round, code, msg)
		}
		if code := doJSON(t, "DELETE", d.base+"/leases/"+l.ID, testOperator, nil, nil); code != 204 {
			t.Fatalf("release lease %d: %d", round, code)
		}
		if code, msg := request(t, "POST", d.base+l.MCP, l.AgentToken, strings.NewReader(mcpInit), mcpHdr...); code != 401 {
			t.Errorf("released lease %d's token: %d %s, want 401", round, code, msg)
		}
	}

	t.Run("bad lease requests", func(t *testing.T) {
		for _, c := range []struct {
			method, path, body string
			want               int
		}{
			{"POST", "/leases", `{"seed":-1}`, 400},
			{"POST", "/leases", `{"seed":-9223372036854775808}`, 400},
			{"POST", "/leases", `{"seed":1.5}`, 400},
			{"POST", "/leases", `{"seed":99999999999999999999}`, 400},
			{"POST", "/leases", strings.Repeat(" ", 128<<10) + `{}`, 413},
			{"DELETE", "/leases/" + strings.Repeat("a", 1000), "", 404},
			// Past the server's header limit: refused before any handler.
			{"DELETE", "/leases/" + strings.Repeat("a", 100000), "", 431},
			{"DELETE", "/leases/" + strings.Repeat("%ff", 1000), "", 404},
		} {
			code, msg := request(t, c.method, d.base+c.path, testOperator, strings.NewReader(c.body))
			if code != c.want {
				t.Errorf("%s %.40s: %d %.200s, want %d", c.method, c.path, code, msg, c.want)
			}
			if len(msg) > 1000 {
				t.Errorf("%s %.40s: the error quotes %d bytes of input", c.method, c.path, len(msg))
			}
		}
		var ls struct{ Leases []any }
		if doJSON(t, "GET", d.base+"/leases", testOperator, nil, &ls); len(ls.Leases) != 0 {
			t.Errorf("refused lease requests left leases: %v", ls.Leases)
		}
	})

	t.Run("pool-wide agent token", func(t *testing.T) {
		bin := buildBinary(t)
		out, err := exec.Command(bin, "--addr", "127.0.0.1:0", "--no-stream", "--wm", "", "--apps", "", "--home", t.TempDir(),
			"--desktops", "2", "--operator-token", testOperator, "--agent-token", testAgent).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "--pool-agent-token") {
			t.Errorf("pool with --agent-token started, or did not name --pool-agent-token: %v\n%s", err, out)
		}
		p := startDeskenv(t, "--no-stream", "--wm", "", "--apps", "", "--home", t.TempDir(), "--desktops", "2",
			"--operator-token", testOperator, "--agent-token", testAgent, "--pool-agent-token")
		if !strings.Contains(p.log(), "valid on every desktop") {
			t.Errorf("--pool-agent-token without a warning:\n%s", p.log())
		}
		if code, msg := request(t, "POST", p.base+"/d/1/mcp", testAgent, strings.NewReader(mcpInit), mcpHdr...); code != 200 {
			t.Errorf("the pool-wide agent token with --pool-agent-token: %d %s", code, msg)
		}
	})
}

// TestTokenFlagsWarning: tokens on the command line while listening beyond
// loopback are named, with the variables to use instead.
func TestTokenFlagsWarning(t *testing.T) {
	d := startDeskenv(t, "--addr", "0.0.0.0:0", "--no-stream", "--wm", "", "--apps", "", "--home", t.TempDir(),
		"--operator-token", testOperator)
	for _, want := range []string{"DESKENV_OPERATOR_TOKEN", "--tokens-file", "--operator-token"} {
		if !strings.Contains(d.log(), want) {
			t.Errorf("the log does not mention %s:\n%s", want, d.log())
		}
	}
	t.Setenv("DESKENV_OPERATOR_TOKEN", testOperator)
	e := startDeskenv(t, "--addr", "0.0.0.0:0", "--no-stream", "--wm", "", "--apps", "", "--home", t.TempDir())
	if strings.Contains(e.log(), "process list") {
		t.Errorf("a token from the environment was warned about as a flag:\n%s", e.log())
	}
}
