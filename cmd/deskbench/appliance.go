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
	go func() {
		sc := bufio.NewScanner(errPipe)
		for sc.Scan() {
			if m := ready.FindStringSubmatch(sc.Text()); m != nil {
				addrc <- m[1]
			}
		}
		io.Copy(io.Discard, errPipe)
	}()
	select {
	case addr := <-addrc:
		a.base = "http://" + addr
		return a, nil
	case <-time.After(wait):
		a.stop()
		return nil, fmt.Errorf("deskenv %v was not ready within %s", args, wait)
	case <-ctx.Done():
		a.stop()
		return nil, ctx.Err()
	}
}

func (a *appliance) pid() int { return a.cmd.Process.Pid }

// stop asks for a clean shutdown and waits for it.
func (a *appliance) stop() {
	a.cmd.Process.Signal(syscall.SIGTERM)
	a.cmd.Wait()
}
