package screen

import (
	"bufio"
	"bytes"
	"fmt"
	"image/png"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/internal/activity"
	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/internal/xprobe"
)

// burstAppEnv makes the test binary the burst application of
// TestSettleIdle: a program of the desktop's own, so its CPU time is the
// desktop's, which an in-process probe's would not be.
const burstAppEnv = "DESKENV_TEST_BURST_APP"

func TestMain(m *testing.M) {
	if spec := os.Getenv(burstAppEnv); spec != "" {
		if err := burstApp(spec, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "burst app:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// burstApp ("display gap-ms spin|sleep") opens a full-screen window and,
// for every line read from in, draws the bursts gap apart, spending the
// gaps running on the CPU (an application computing its next draw) or
// asleep (one waiting on a timer), and writes a line to out when the last
// burst is drawn.
func burstApp(spec string, in io.Reader, out io.Writer) error {
	f := strings.Fields(spec)
	if len(f) != 3 {
		return fmt.Errorf("spec %q: want display, gap in ms, spin or sleep", spec)
	}
	ms, err := strconv.Atoi(f[1])
	if err != nil {
		return fmt.Errorf("spec %q: %w", spec, err)
	}
	gap := time.Duration(ms) * time.Millisecond
	p, err := xprobe.Open(f[0], xprobe.Options{Width: 320, Height: 240})
	if err != nil {
		return err
	}
	defer p.Close()
	fmt.Fprintln(out, "ready")
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		if err := p.Fill(0, 0, 320, 240, 0); err != nil {
			return err
		}
		if sc.Text() == "clear" {
			fmt.Fprintln(out, "cleared")
			continue
		}
		for i, b := range bursts {
			if i > 0 {
				if f[2] == "spin" {
					for end := time.Now().Add(gap); time.Now().Before(end); {
					}
				} else {
					time.Sleep(gap)
				}
			}
			if err := p.Fill(b.x, b.y, b.w, b.h, b.rgb); err != nil {
				return err
			}
		}
		fmt.Fprintln(out, "drawn")
	}
	return sc.Err()
}

// burstProcess is the burst application running as a child of the test.
type burstProcess struct {
	cmd *exec.Cmd
	in  io.Writer
	out *bufio.Scanner
}

func startBurstApp(t *testing.T, d *display.Display, gap time.Duration, mode string) *burstProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d %s", burstAppEnv, d.Name(), gap.Milliseconds(), mode))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	b := &burstProcess{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	b.expect(t, "ready")
	return b
}

func (b *burstProcess) send(t *testing.T, line string) {
	t.Helper()
	if _, err := fmt.Fprintln(b.in, line); err != nil {
		t.Fatalf("burst app: %v", err)
	}
}

func (b *burstProcess) expect(t *testing.T, want string) {
	t.Helper()
	if !b.out.Scan() || b.out.Text() != want {
		t.Fatalf("burst app said %q (%v), want %q", b.out.Text(), b.out.Err(), want)
	}
}

// TestSettleIdle: with the desktop's CPU time to go by, a settle waits
// through the pauses of an application that computes between its draws,
// longer than the idle quiet period, and returns a screenshot of every
// burst; and it does end after the idle quiet period on a desktop whose
// programs sleep, so the shorter wait is really taken. An application that
// sleeps between draws longer than the idle quiet period is the case this
// cannot see (SettleOptions.Activity says so); it is not tested here.
func TestSettleIdle(t *testing.T) {
	d := startDisplay(t, 320, 240)
	c, err := NewCapturer(d)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := NewShooter(c, ShooterOptions{})
	ctx := testrig.Context(t, 60*time.Second)
	meter := activity.ForDisplay(d)
	// Quiet is long, so only the idle path can end a settle early, and
	// the gaps are longer than the idle quiet period.
	opt := SettleOptions{Quiet: 400 * time.Millisecond, IdleQuiet: 40 * time.Millisecond, Max: 10 * time.Second, Activity: meter}
	app := startBurstApp(t, d, 90*time.Millisecond, "spin")

	for round := range 3 {
		app.send(t, "clear")
		app.expect(t, "cleared")
		if _, _, err := c.Settle(ctx, SettleOptions{Quiet: 100 * time.Millisecond, Max: 5 * time.Second}); err != nil {
			t.Fatal(err)
		}
		app.send(t, "draw")
		shot, settled, waited, err := s.SettleShot(ctx, opt)
		if err != nil || !settled {
			t.Fatalf("round %d: settled %v after %s: %v", round, settled, waited, err)
		}
		app.expect(t, "drawn")
		img, err := png.Decode(bytes.NewReader(shot.Data))
		if err != nil {
			t.Fatalf("decode the settled shot: %v", err)
		}
		for i, b := range bursts {
			r, g, bl, _ := img.At(b.x+b.w/2, b.y+b.h/2).RGBA()
			if got := (r>>8)<<16 | (g>>8)<<8 | bl>>8; got != b.rgb {
				t.Errorf("round %d: the settled shot (after %s) misses burst %d, drawn after the application computed for 90 ms: pixel %06x, want %06x",
					round, waited, i, got, b.rgb)
			}
		}
	}

	// A still screen on a sleeping desktop: the idle path ends the settle.
	w := c.damage()
	for range 3 {
		before := w.idleEnds.Load()
		settled, waited, err := c.Settle(ctx, opt)
		if err != nil || !settled {
			t.Fatalf("still screen: settled %v after %s: %v", settled, waited, err)
		}
		if w.idleEnds.Load() > before {
			return
		}
	}
	t.Errorf("a still screen with the desktop's programs asleep never settled after the idle quiet period (3 tries)")
}

// TestSettleBusyDesktop: while a program of the desktop keeps a CPU busy,
// no settle ends after the idle quiet period; each waits the whole quiet
// period, as without Activity.
func TestSettleBusyDesktop(t *testing.T) {
	d := startDisplay(t, 320, 240)
	c, err := NewCapturer(d)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := testrig.Context(t, 60*time.Second)
	spin := exec.Command("sh", "-c", "while :; do :; done")
	if err := spin.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = spin.Process.Kill(); _ = spin.Wait() })
	meter := activity.ForDisplay(d)
	opt := SettleOptions{Quiet: 100 * time.Millisecond, IdleQuiet: 40 * time.Millisecond, Max: 5 * time.Second, Activity: meter}
	w := c.damage()
	before := w.idleEnds.Load()
	for i := range 5 {
		if settled, waited, err := c.Settle(ctx, opt); err != nil || !settled {
			t.Fatalf("settle %d: settled %v after %s: %v", i, settled, waited, err)
		}
	}
	if n := w.idleEnds.Load() - before; n != 0 {
		t.Errorf("%d of 5 settles ended after the idle quiet period while a program of the desktop was running", n)
	}
}
