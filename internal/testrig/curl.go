package testrig

import (
	"context"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// CurlAs runs curl as uid (0: as this process) with args and returns the
// status and the body, as "200 <body>". The server then sees the kernel's
// answer for a program of that user as the connection's owner, as a
// desktop's agent would open it.
func CurlAs(ctx context.Context, t testing.TB, uid uint32, args ...string) string {
	t.Helper()
	NeedTools(t, "curl")
	// The body, then the status on a line of its own.
	cmd := exec.CommandContext(ctx, "curl", append([]string{"-sS", "-m", "10", "-w", "\n%{http_code}"}, args...)...)
	if uid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid, Groups: []uint32{}}}
	}
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("curl as user %d %v: %v: %s", uid, args, err, b)
	}
	body, code := string(b), ""
	if i := strings.LastIndexByte(body, '\n'); i >= 0 {
		body, code = body[:i], body[i+1:]
	}
	return code + " " + strings.TrimSpace(body)
}
