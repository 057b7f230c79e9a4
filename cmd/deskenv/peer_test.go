package main

import (
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestDesktopCannotReachDeskenv plays the agent typing curl into its xterm:
// in local mode (no tokens, as `make run` starts) and with the operator
// token in hand, the desktop's session user is refused on every route,
// while the same requests from deskenv's own user go through.
func TestDesktopCannotReachDeskenv(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: deskenv separates the session only when it may switch users")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("needs curl, as the agent would use it")
	}
	const operator = "operator-token-for-the-peer-test"
	for _, tc := range []struct {
		name  string
		args  []string
		token string
	}{
		{"local mode", []string{"--no-stream", "--apps", ""}, ""},
		{"with the operator token", []string{"--no-stream", "--apps", "", "--addr", "127.0.0.1:0"}, operator},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.token != "" {
				t.Setenv("DESKENV_OPERATOR_TOKEN", tc.token)
			}
			d := startDeskenv(t, args...)
			name := sessionUserOf(t, d.base, tc.token)
			u, err := user.Lookup(name)
			if err != nil {
				t.Fatalf("the session user %s: %v", name, err)
			}
			uid, _ := strconv.Atoi(u.Uid)
			gid, _ := strconv.Atoi(u.Gid)
			get := func(asSession bool, method, path string) (code, body string) {
				cmd := exec.Command("curl", "-s", "-w", "\n%{http_code}", "-m", "10", "-X", method, d.base+path)
				if tc.token != "" {
					cmd.Args = append(cmd.Args, "-H", "Authorization: Bearer "+tc.token)
				}
				if asSession {
					cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}}
				}
				out, _ := cmd.Output()
				i := strings.LastIndexByte(string(out), '\n')
				return string(out[i+1:]), string(out[:max(i, 0)])
			}
			for _, r := range []struct{ method, path string }{
				{"GET", "/api/tasks"}, {"POST", "/api/reset"}, {"GET", "/state"}, {"POST", "/mcp"},
				{"GET", "/api/episodes"}, {"GET", "/health"}, {"GET", "/"},
			} {
				code, body := get(true, r.method, r.path)
				if code != "403" || !strings.Contains(body, "the desktop's own session") {
					t.Errorf("%s %s from the desktop's session: %s %.200s, want 403 saying it comes from the session", r.method, r.path, code, body)
				}
			}
			// deskenv's own user (here root) is a client like any other.
			if code, body := get(false, "GET", "/api/tasks"); code != "200" {
				t.Errorf("GET /api/tasks from deskenv's user: %s %.200s, want 200", code, body)
			}
		})
	}
}
