package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Two deskenvs on one machine must not run desktops as one session user: a
// reset ends every process of its user, so each would kill the other's
// programs, and the two agents could read each other's homes. Tried with
// real processes, as an operator starting a second deskenv would.
func TestTwoDeskenvsOneUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: deskenv separates the session only when it may switch users")
	}
	args := []string{"--no-stream", "--wm", "", "--apps", ""}

	t.Run("named", func(t *testing.T) {
		const name = "deskenv-lockt"
		first := startDeskenv(t, append(args, "--session-user", name)...)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, buildBinary(t), append(args, "--session-user", name, "--addr", "127.0.0.1:0")...)
		cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+t.TempDir())
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatalf("the second deskenv as %s: %v, want it to exit refusing; it said:\n%s", name, err, out)
		}
		want := fmt.Sprintf("session user %s is in use by another deskenv (pid %d", name, first.pid)
		if !strings.Contains(string(out), want) || !strings.Contains(string(out), "--session-user") {
			t.Errorf("the second deskenv said:\n%s\nwant it to say %q and how to name another user", out, want)
		}
		// The first kept its desktop.
		var h health
		if st := doJSON(t, "GET", first.base+"/health?details=1", "", nil, &h); st != 200 || h.Status != "healthy" {
			t.Errorf("the first deskenv after the second was refused: %d %+v", st, h)
		}
	})

	t.Run("chosen", func(t *testing.T) {
		// Neither names a user: the second takes another than the first's.
		a := startDeskenv(t, args...)
		b := startDeskenv(t, args...)
		ua, ub := sessionUserOf(t, a.base, ""), sessionUserOf(t, b.base, "")
		if ua == "" || ub == "" || ua == ub {
			t.Fatalf("two deskenvs run as %q and %q: want a session user each", ua, ub)
		}
		if !strings.Contains(b.log(), "in use by another deskenv") && !strings.Contains(a.log(), "in use by another deskenv") {
			t.Errorf("neither said it took another session user; logs:\n%s\n%s", a.log(), b.log())
		}
	})
}

// sessionUserOf is the session user a single-desktop deskenv reports in
// /health?details=1, asked with token (none: asked from this machine).
func sessionUserOf(t *testing.T, base, token string) string {
	t.Helper()
	var h struct {
		Details struct {
			Isolation struct {
				Separated   bool   `json:"separated"`
				SessionUser string `json:"session_user"`
			} `json:"isolation"`
		} `json:"details"`
	}
	if st := doJSON(t, "GET", base+"/health?details=1", token, nil, &h); st != 200 || !h.Details.Isolation.Separated {
		t.Fatalf("GET /health?details=1: %d %+v", st, h)
	}
	return h.Details.Isolation.SessionUser
}
