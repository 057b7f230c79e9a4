package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/e2e/browser"
	"github.com/deskenv/deskenv/internal/xprobe"
)

// What deskbench latency and deskbench network share: the bench the stacks
// are measured on (a bare display, the probe painting on it, Chromium
// watching), the stacks' processes, the page that shows each, and the
// animation that keeps the screen busy. The two benchmarks differ in what
// stands between the stack and the browser (nothing, or the shaped link)
// and in what they count, not in how a stack is started.

// findBrowser finds the browser driver (e2e/browser) and checks what it
// needs is installed, before anything slow is started.
func findBrowser() (string, error) {
	dir, err := browser.FindDir()
	if err != nil {
		return "", err
	}
	return dir, browser.CheckDeps(dir)
}

// bench is the desktop the stacks serve and the browser that watches them.
type bench struct {
	d     *display.Display
	probe *xprobe.Probe
	drv   *browser.Driver
	dir   string // the browser driver's directory (findBrowser)
}

// startBench starts a bare display (no window manager, no apps, so nothing
// but the probe paints), the probe, and the browser driver from dir; with
// verbose the browser's console goes to stderr.
func startBench(ctx context.Context, dir string, width, height int, verbose bool, stderr io.Writer) (*bench, error) {
	d, err := display.Start(ctx, display.Config{Width: width, Height: height, WindowManager: []string{}, Apps: [][]string{}})
	if err != nil {
		return nil, err
	}
	probe, err := xprobe.Open(d.Name(), xprobe.Options{Background: background})
	if err != nil {
		d.Close()
		return nil, err
	}
	var drvErr io.Writer
	if verbose {
		drvErr = stderr
	}
	drv, err := browser.Start(ctx, browser.Options{Dir: dir, Stderr: drvErr})
	if err != nil {
		probe.Close()
		d.Close()
		return nil, err
	}
	return &bench{d: d, probe: probe, drv: drv, dir: dir}, nil
}

// Close stops the browser, the probe and the display, in that order.
func (b *bench) Close() {
	b.drv.Close()
	b.probe.Close()
	b.d.Close()
}

// child is a server process of one stack.
type child struct {
	cmd  *exec.Cmd
	url  string
	done chan struct{}
}

// watch starts waiting for the started cmd, so done closes when it exits.
func watch(cmd *exec.Cmd) *child {
	ch := &child{cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(ch.done) }()
	return ch
}

// stop asks the process to end and kills it if it has not within 5 s.
func (ch *child) stop() {
	if ch == nil || ch.cmd.Process == nil {
		return
	}
	ch.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-ch.done:
	case <-time.After(5 * time.Second):
		ch.cmd.Process.Kill()
		<-ch.done
	}
}

func (ch *child) pid() int { return ch.cmd.Process.Pid }

// startServeChild runs this binary's latency-serve in its own process and
// waits for the URL it serves.
func startServeChild(ctx context.Context, stderr io.Writer, args ...string) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, append([]string{latencyServeCmd}, args...)...)
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", latencyServeCmd, err)
	}
	ch := watch(cmd)
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "URL "); ok {
				urlc <- u
			}
		}
	}()
	select {
	case ch.url = <-urlc:
		return ch, nil
	case <-ch.done:
		return nil, fmt.Errorf("%s %s exited before serving (see its messages above)", latencyServeCmd, strings.Join(args, " "))
	case <-time.After(30 * time.Second):
		ch.stop()
		return nil, fmt.Errorf("%s did not start serving within 30 s", latencyServeCmd)
	case <-ctx.Done():
		ch.stop()
		return nil, ctx.Err()
	}
}

// deskenvServeArgs are latency-serve's arguments for deskenv's stream of
// display at fps frames per second and bitrate kbit/s; more are appended.
func deskenvServeArgs(display string, fps, bitrate int, more ...string) []string {
	return append([]string{"-mode", "deskenv", "-display", display, "-fps", strconv.Itoa(fps), "-bitrate", strconv.Itoa(bitrate)}, more...)
}

// noVNC is the noVNC stack: x11vnc on the display and latency-serve's
// websocket bridge in front of it, which also serves noVNC's page.
type noVNC struct {
	vnc, bridge *child
}

// startNoVNC starts x11vnc as a person would for one local viewer (its
// defaults use XDamage to find changes), waits until it listens, and starts
// the bridge to it.
func startNoVNC(ctx context.Context, d *display.Display, dir string, stderr io.Writer) (*noVNC, error) {
	if _, err := exec.LookPath("x11vnc"); err != nil {
		return nil, errors.New("x11vnc is not installed: run scripts/install-deps.sh test")
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cmd := exec.Command("x11vnc", "-display", d.Name(), "-rfbport", strconv.Itoa(port), "-localhost",
		"-nopw", "-forever", "-shared", "-quiet", "-noxrecord", "-noncache")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start x11vnc: %w", err)
	}
	vnc := watch(cmd)
	if err := waitTCP(ctx, addr, vnc.done); err != nil {
		vnc.stop()
		return nil, fmt.Errorf("x11vnc: %w", err)
	}
	bridge, err := startServeChild(ctx, stderr, "-mode", "novnc", "-vnc", addr,
		"-novnc", filepath.Join(dir, "node_modules", "@novnc", "novnc"))
	if err != nil {
		vnc.stop()
		return nil, err
	}
	return &noVNC{vnc: vnc, bridge: bridge}, nil
}

// stop ends the bridge, then x11vnc.
func (s *noVNC) stop() {
	s.bridge.stop()
	s.vnc.stop()
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func waitTCP(ctx context.Context, addr string, died <-chan struct{}) error {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			conn.Close()
			return nil
		}
		select {
		case <-died:
			return errors.New("exited before listening")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("not listening on %s after 20 s", addr)
}

// view is how the frame watcher finds a stack's picture on its page, and
// the page expression that is true once the page plays.
type view struct {
	kind     string // video or canvas
	selector string
	ready    string
}

// deskenvView is deskenv's page playing over transport (webrtc or
// websocket).
func deskenvView(transport string) view {
	return view{kind: "video", selector: "#video",
		ready: `window.deskenv && deskenv.state === 'connected' && deskenv.session.transport === '` + transport +
			`' && deskenv.video.videoWidth > 0`}
}

// noVNCView is noVNC's page, connected and drawing.
var noVNCView = view{kind: "canvas", selector: "#screen canvas",
	ready: `window.novnc && novnc.state === 'connected' && document.querySelector('#screen canvas')?.width > 0`}

// openPage opens url in the browser as page and waits up to wait for it to
// play; the function returned closes the page.
func openPage(ctx context.Context, drv *browser.Driver, page, url string, width, height int, v view, wait time.Duration) (func(), error) {
	if err := drv.Do(ctx, "open", map[string]any{"page": page, "url": url, "width": width, "height": height}, nil); err != nil {
		return nil, err
	}
	closePage := func() { drv.Do(context.Background(), "close", map[string]any{"page": page}, nil) }
	if err := drv.Do(ctx, "waitFor", map[string]any{"page": page, "timeoutMs": wait.Milliseconds(), "expr": v.ready}, nil); err != nil {
		closePage()
		return nil, fmt.Errorf("the page did not play within %s: %w", wait, err)
	}
	return closePage, nil
}

// animation moves boxes over the screen below the marker row and steps the
// counter cell, one step a frame: the busy desktop both benchmarks measure.
// Its draws are seeded, so every stack sees the same motion.
type animation struct {
	probe         *xprobe.Probe
	width, height int
	top           int // the first row the boxes may cover
	boxes         []box
	n             int // steps painted
}

type box struct{ x, y, vx, vy, w, h int }

var boxColors = []uint32{0xe06c75, 0x98c379, 0xe5c07b, 0x61afef, 0xc678dd, 0x56b6c2, 0xffffff, 0x282c34}

func newAnimation(probe *xprobe.Probe, width, height int) *animation {
	rng := rand.New(rand.NewPCG(3, 4))
	a := &animation{probe: probe, width: width, height: height, top: markerY + cell + 16, boxes: make([]box, 24)}
	for i := range a.boxes {
		w, h := 80+rng.IntN(160), 50+rng.IntN(110)
		a.boxes[i] = box{x: rng.IntN(width - w), y: a.top + rng.IntN(height-a.top-h), vx: 3 + rng.IntN(9), vy: 2 + rng.IntN(7), w: w, h: h}
	}
	return a
}

// step clears the boxes' area, moves each box (bouncing off the edges),
// paints them and steps the counter cell.
func (a *animation) step() error {
	if err := a.probe.Fill(0, a.top, a.width, a.height-a.top, background); err != nil {
		return err
	}
	for i := range a.boxes {
		b := &a.boxes[i]
		b.x += b.vx
		b.y += b.vy
		if b.x < 0 || b.x+b.w > a.width {
			b.vx = -b.vx
			b.x += 2 * b.vx
		}
		if b.y < a.top || b.y+b.h > a.height {
			b.vy = -b.vy
			b.y += 2 * b.vy
		}
		if err := a.probe.Fill(b.x, b.y, b.w, b.h, boxColors[i%len(boxColors)]); err != nil {
			return err
		}
	}
	a.n++
	return a.probe.Fill(counterX, markerY, cell, cell, counterPalette[a.n%len(counterPalette)])
}

// animate paints the animation at 60 Hz until end and returns how many
// steps it painted. With paint it holds that lock for each step, so a
// marker can be painted between two (deskbench network samples while the
// screen moves).
func animate(ctx context.Context, probe *xprobe.Probe, width, height int, end time.Time, paint *sync.Mutex) (int, error) {
	a := newAnimation(probe, width, height)
	tick := time.NewTicker(time.Second / 60)
	defer tick.Stop()
	for time.Now().Before(end) {
		select {
		case <-ctx.Done():
			return a.n, ctx.Err()
		case <-tick.C:
		}
		if paint != nil {
			paint.Lock()
		}
		err := a.step()
		if paint != nil {
			paint.Unlock()
		}
		if err != nil {
			return a.n, err
		}
	}
	return a.n, nil
}
