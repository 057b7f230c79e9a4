// Package browser drives Debian's headless Chromium through Playwright
// (driver.mjs under node) for the end-to-end tests of the browser client and
// for the latency benchmark. One Driver is one browser; pages are named.
package browser

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Options start a Driver.
type Options struct {
	// Dir is the e2e/browser directory (driver.mjs and node_modules); empty
	// finds it from the working directory upwards.
	Dir string
	// Stderr receives the driver's and the pages' console output; nil drops it.
	Stderr io.Writer
	// Args are Chromium flags on top of the standard ones.
	Args []string
}

// Driver is one running driver.mjs with its Chromium.
type Driver struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	dir  string
	mu   sync.Mutex // one request at a time: the driver answers in order
	next int
	dead chan struct{}
	werr error
}

// FindDir locates e2e/browser by walking up from the working directory to the
// module root (the directory holding go.mod).
func FindDir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, "e2e", "browser"), nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod above %s: run from inside the deskenv module", wd)
		}
	}
}

// CheckDeps reports, as an error that says how to fix it, whether node and
// the npm packages the driver needs are there.
func CheckDeps(dir string) error {
	if _, err := exec.LookPath("node"); err != nil {
		return fmt.Errorf("node is not installed (the browser tests run Playwright under node): run scripts/install-deps.sh test")
	}
	for _, p := range []string{"playwright-core"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", p, "package.json")); err != nil {
			return fmt.Errorf("%s is missing from %s/node_modules: run `npm ci --prefix e2e/browser` (or `make npm`)", p, dir)
		}
	}
	chromium := os.Getenv("DESKENV_CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(chromium); err != nil {
		return fmt.Errorf("chromium not found at %s: install Debian's chromium (scripts/install-deps.sh runtime) or set DESKENV_CHROMIUM", chromium)
	}
	return nil
}

// Start runs the driver and launches Chromium. Close it when done.
func Start(ctx context.Context, opt Options) (*Driver, error) {
	dir := opt.Dir
	if dir == "" {
		var err error
		if dir, err = FindDir(); err != nil {
			return nil, err
		}
	}
	if err := CheckDeps(dir); err != nil {
		return nil, err
	}
	cmd := exec.Command("node", filepath.Join(dir, "driver.mjs"))
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // so Close can end Chromium with it
	if opt.Stderr != nil {
		cmd.Stderr = opt.Stderr
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the browser driver (node driver.mjs): %w", err)
	}
	d := &Driver{cmd: cmd, in: in, out: bufio.NewReaderSize(outPipe, 1<<20), dir: dir, dead: make(chan struct{})}
	go func() { d.werr = cmd.Wait(); close(d.dead) }()
	var launched struct{ Version string }
	var launch map[string]any
	if len(opt.Args) > 0 {
		launch = map[string]any{"extraArgs": opt.Args}
	}
	if err := d.Do(ctx, "launch", launch, &launched); err != nil {
		d.Close()
		return nil, fmt.Errorf("launch chromium: %w", err)
	}
	return d, nil
}

// Dir is the e2e/browser directory the driver runs from.
func (d *Driver) Dir() string { return d.dir }

type reply struct {
	ID     int             `json:"id"`
	OK     bool            `json:"ok"`
	Result json.RawMessage `json:"result"`
	Error  string          `json:"error"`
}

// Do sends one command with its arguments and decodes the result into out
// (nil to ignore it). A cancelled ctx kills the driver: it cannot abandon a
// request half way and stay in step.
func (d *Driver) Do(ctx context.Context, cmd string, args map[string]any, out any) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.next++
	req := map[string]any{}
	for k, v := range args {
		req[k] = v
	}
	req["id"], req["cmd"] = d.next, cmd
	line, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("driver %s: arguments: %w", cmd, err)
	}
	if _, err := d.in.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("driver %s: write: %w (driver exited: %v)", cmd, err, d.exitErr())
	}
	type result struct {
		r   reply
		err error
	}
	ch := make(chan result, 1)
	go func() {
		b, err := d.out.ReadBytes('\n')
		if err != nil {
			ch <- result{err: fmt.Errorf("read: %w (driver exited: %v)", err, d.exitErr())}
			return
		}
		var r reply
		if err := json.Unmarshal(b, &r); err != nil {
			ch <- result{err: fmt.Errorf("reply is not JSON: %q", b)}
			return
		}
		ch <- result{r: r}
	}()
	select {
	case <-ctx.Done():
		d.kill()
		return fmt.Errorf("driver %s: %w", cmd, ctx.Err())
	case res := <-ch:
		if res.err != nil {
			return fmt.Errorf("driver %s: %w", cmd, res.err)
		}
		if res.r.ID != d.next {
			return fmt.Errorf("driver %s: reply to request %d, expected %d", cmd, res.r.ID, d.next)
		}
		if !res.r.OK {
			return fmt.Errorf("driver %s: %s", cmd, res.r.Error)
		}
		if out != nil {
			if err := json.Unmarshal(res.r.Result, out); err != nil {
				return fmt.Errorf("driver %s: result %s: %w", cmd, res.r.Result, err)
			}
		}
		return nil
	}
}

func (d *Driver) exitErr() error {
	select {
	case <-d.dead:
		if d.werr == nil {
			return errors.New("exit 0")
		}
		return d.werr
	default:
		return nil
	}
}

func (d *Driver) kill() {
	if d.cmd.Process != nil {
		syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
	}
}

// Close quits the browser and the driver.
func (d *Driver) Close() error {
	d.in.Write([]byte(`{"cmd":"quit"}` + "\n"))
	d.in.Close()
	select {
	case <-d.dead:
	case <-time.After(10 * time.Second):
		d.kill()
		<-d.dead
	}
	// Chromium's helpers may linger in the group after node is gone.
	d.kill()
	return nil
}
