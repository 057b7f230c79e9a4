package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// appliance is a deskenv process started for a benchmark.
type appliance struct {
	cmd  *exec.Cmd
	base string // http://host:port
}

// buildDeskenv builds ./cmd/deskenv into dir unless bin names a binary.
func buildDeskenv(ctx context.Context, bin, dir string) (string, error) {
	if bin != "" {
		return bin, nil
	}
	out := filepath.Join(dir, "deskenv")
	if b, err := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/deskenv").CombinedOutput(); err != nil {
		return "", fmt.Errorf("build deskenv (run from the repository root): %v: %s", err, b)
	}
	return out, nil
}

// startAppliance runs bin with args on a free loopback port and waits for
// its ready line, which names the address it bound.
func startAppliance(ctx context.Context, bin string, wait time.Duration, args ...string) (*appliance, error) {
	cmd := exec.CommandContext(ctx, bin, append([]string{"--addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), "DESKENV_LOG_LEVEL=info")
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	a := &appliance{cmd: cmd}
	ready := regexp.MustCompile(`deskenv is ready" url=http://([^/ ]+)/`)
	addrc := make(chan string, 1)
	// exited carries deskenv's last words when its stderr ends before the
	// ready line: a refusal at start (a home the session user cannot
	// reach, say) is said at once, not after wait.
	exited := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(errPipe)
		var last []string
		for sc.Scan() {
			if m := ready.FindStringSubmatch(sc.Text()); m != nil {
				addrc <- m[1]
				io.Copy(io.Discard, errPipe)
				return
			}
			last = append(last, sc.Text())
			if len(last) > 5 {
				last = last[1:]
			}
		}
		exited <- strings.Join(last, "\n")
	}()
	select {
	case addr := <-addrc:
		a.base = "http://" + addr
		return a, nil
	case words := <-exited:
		a.stop()
		return nil, fmt.Errorf("deskenv %v stopped before it was ready:\n%s", args, words)
	case <-time.After(wait):
		a.stop()
		return nil, fmt.Errorf("deskenv %v was not ready within %s", args, wait)
	case <-ctx.Done():
		a.stop()
		return nil, ctx.Err()
	}
}

// tempDir makes a directory for a run's binary and homes that the desktops'
// session users can pass through (os.MkdirTemp makes it 0700, and deskenv
// refuses a home its session user cannot reach).
func tempDir(pattern string) (string, error) {
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

func (a *appliance) pid() int { return a.cmd.Process.Pid }

// stop asks for a clean shutdown and waits for it.
func (a *appliance) stop() {
	a.cmd.Process.Signal(syscall.SIGTERM)
	a.cmd.Wait()
}
