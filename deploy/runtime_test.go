package deploy

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/deskenv/deskenv/internal/testrig"
)

// TestRuntimeLayout rebuilds the image's runtime stage on this host with
// scripts/check-runtime.sh, taking the user, home, working directory and
// environment from the Dockerfile itself, so the layout tested is the one the
// image ships. It needs root (it creates a user and runs deskenv as that
// user): as another user it uses sudo when sudo needs no password, and fails
// otherwise, saying so. DESKENV_SKIP_ROOT_TESTS=1 skips it on purpose.
func TestRuntimeLayout(t *testing.T) {
	if os.Getenv("DESKENV_SKIP_ROOT_TESTS") == "1" {
		t.Skip("DESKENV_SKIP_ROOT_TESTS=1: the image's runtime layout is not checked")
	}
	// check-runtime.sh moves the machine's /var/lib/deskenv aside for its
	// run: not while another package's tests run deskenv on it.
	release, err := testrig.LockMachineState(true)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	root := repoRoot(t)
	l := readLayout(t)
	home, _ := l.getenv("DESKENV_HOME")
	session, _ := l.getenv("DESKENV_SESSION_USER")

	args := []string{filepath.Join(root, "scripts", "check-runtime.sh"),
		"--user", l.user, "--uid", strconv.Itoa(l.uid), "--workdir", l.workdir,
		"--session-user", session, "--session-uid", strconv.Itoa(l.uids[session]), "--home", home,
		"--addr", "127.0.0.1:" + strconv.Itoa(freePort(t, "tcp")),
		"--udp-port", strconv.Itoa(freePort(t, "udp")),
	}
	// The test builds the binary, as the image's build stage does, so the
	// script run under sudo needs no Go toolchain and leaves no root-owned
	// files in the caller's Go caches.
	bin := filepath.Join(t.TempDir(), "deskenv")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/deskenv")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/deskenv: %v\n%s", err, out)
	}
	args = append(args, "--bin", bin)
	for _, kv := range l.env {
		args = append(args, "--env", kv[0]+"="+kv[1])
	}
	if os.Geteuid() != 0 {
		if err := exec.Command("sudo", "-n", "true").Run(); err != nil {
			t.Fatalf("this test must run as root, or as a user with password-less sudo: it creates the image's user %q and runs deskenv as that user, "+
				"as the container would (sudo -n: %v). Run `sudo go test ./deploy/ -run TestRuntimeLayout`, or set DESKENV_SKIP_ROOT_TESTS=1 to skip it knowingly", l.user, err)
		}
		args = append([]string{"sudo", "-n"}, args...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = root
	// SIGTERM first, so the script's trap cleans up what it made.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("check-runtime.sh: %v (its output is above)", err)
	}
	for _, want := range []string{"ok: /health is healthy", "ok: MCP screenshot is a 1280x800 PNG", "no process left", "PASS",
		"cannot read the tasks or the episodes, reach deskenv's port, signal deskenv", "or open the display without its cookie"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("check-runtime.sh passed without saying %q", want)
		}
	}
}

// freePort asks the kernel for a port nobody uses right now.
func freePort(t testing.TB, network string) int {
	t.Helper()
	switch network {
	case "tcp":
		return testrig.FreePort(t)
	default:
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		return pc.LocalAddr().(*net.UDPAddr).Port
	}
}
