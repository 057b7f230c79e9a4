package screen

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
	"github.com/jezek/xgb/xtest"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/internal/activity"
	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/internal/xext"
)

// BenchmarkSettleAfterAction answers an action on an xterm with its settled
// screenshot, the old way (sample the screen every 10 ms until it is quiet,
// then capture again for the shot), from damage events (then capture once
// for the shot), and from damage events ending after 40 ms when the
// desktop's programs sat idle (SettleOptions.Activity), interleaved
// iteration by iteration so all see the same machine. It reports, for each
// way, the latency from the action to the encoded shot (p50, p95), the
// screens captured per settle, and the CPU time per settle of this process
// and of the X server (which copies the screen for every capture).
//
// The action is injected with XTEST, as hci's executor does; the MCP
// request around it (about 1-2 ms) is left out. Quiet is 80 ms, the
// appliance's default, unless DESKENV_BENCH_QUIET says otherwise (such as
// "40ms").
func BenchmarkSettleAfterAction(b *testing.B) {
	testrig.NeedTools(b, "openbox", "xterm")
	d := testrig.Display(b, display.Config{Width: 1280, Height: 800, WindowManager: []string{"openbox"}, Apps: [][]string{
		{"xterm", "-geometry", "100x50+0+0", "-e", "sh", "-c", "ls -l /usr/bin | head -60; exec sh"},
		{"xterm", "-geometry", "80x30+640+300", "-e", "sh", "-c", "cat /etc/services | head -40; exec sh"},
	}})
	c, err := NewCapturer(d)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	s := NewShooter(c, ShooterOptions{})
	ctx := testrig.Context(b, 10*time.Minute)
	if _, _, err := c.Settle(ctx, SettleOptions{Quiet: 500 * time.Millisecond, Max: 5 * time.Second}); err != nil {
		b.Fatal(err)
	}
	quiet := 80 * time.Millisecond
	if q := os.Getenv("DESKENV_BENCH_QUIET"); q != "" {
		if quiet, err = time.ParseDuration(q); err != nil {
			b.Fatalf("DESKENV_BENCH_QUIET=%q: %v", q, err)
		}
	}
	in := newInjector(b, ctx, d)
	in.click(200, 400) // focus the first xterm
	meter := activity.ForDisplay(d)

	ways := []struct {
		name string
		shot func() (Shot, error)
	}{
		{"poll", func() (Shot, error) {
			if _, _, err := c.Settle(ctx, SettleOptions{Quiet: quiet, Max: 2 * time.Second, Poll: true}); err != nil {
				return Shot{}, err
			}
			return s.Shot(ctx)
		}},
		{"damage", func() (Shot, error) {
			shot, _, _, err := s.SettleShot(ctx, SettleOptions{Quiet: quiet, Max: 2 * time.Second})
			return shot, err
		}},
		// As the appliance settles by default: the quiet period, ending
		// after 40 ms when the xterms and their shells sat idle.
		{"idle", func() (Shot, error) {
			shot, _, _, err := s.SettleShot(ctx, SettleOptions{Quiet: quiet, Max: 2 * time.Second, Activity: meter})
			return shot, err
		}},
	}
	actions := []struct {
		name string
		do   func(i int)
	}{
		// Type a character, then erase it: both draw in the xterm.
		{"type", func(i int) {
			if i%2 == 0 {
				in.key(53) // x
			} else {
				in.key(22) // BackSpace
			}
		}},
		// A click into the xterm: the screen barely changes, if at all.
		{"click", func(i int) { in.click(300+i%5, 400) }},
	}
	for _, act := range actions {
		b.Run(act.name, func(b *testing.B) {
			lat := make([][]time.Duration, len(ways))
			cpuSelf := make([]time.Duration, len(ways))
			cpuX := make([]time.Duration, len(ways))
			caps := make([]int64, len(ways))
			i := 0
			for b.Loop() {
				for w, way := range ways {
					self0, x0, n0 := selfCPU(), serverCPU(d), c.captures.Load()
					t0 := time.Now()
					act.do(i)
					i++
					if _, err := way.shot(); err != nil {
						b.Fatal(err)
					}
					lat[w] = append(lat[w], time.Since(t0))
					cpuSelf[w] += selfCPU() - self0
					cpuX[w] += serverCPU(d) - x0
					caps[w] += c.captures.Load() - n0
				}
			}
			for w, way := range ways {
				n := float64(len(lat[w]))
				slices.Sort(lat[w])
				pct := func(q float64) float64 { return float64(lat[w][int(q*(n-1))]) / 1e6 }
				b.ReportMetric(pct(0.5), way.name+"-p50-ms")
				b.ReportMetric(pct(0.95), way.name+"-p95-ms")
				b.ReportMetric(float64(caps[w])/n, way.name+"-captures/settle")
				b.ReportMetric(float64(cpuSelf[w])/1e6/n, way.name+"-cpu-ms/settle")
				b.ReportMetric(float64(cpuX[w])/1e6/n, way.name+"-xvfb-cpu-ms/settle")
			}
		})
	}
}

// injector sends input through XTEST on a connection of its own.
type injector struct {
	b    *testing.B
	c    *xgb.Conn
	root xproto.Window
}

func newInjector(b *testing.B, ctx context.Context, d *display.Display) *injector {
	c, err := display.DialContext(ctx, d.Name())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	if err := xext.Init(c, "XTEST", xtest.Init); err != nil {
		b.Fatal(err)
	}
	return &injector{b: b, c: c, root: xproto.Setup(c).DefaultScreen(c).Root}
}

func (in *injector) key(code byte) {
	xtest.FakeInput(in.c, xproto.KeyPress, code, 0, in.root, 0, 0, 0)
	in.sync(xtest.FakeInputChecked(in.c, xproto.KeyRelease, code, 0, in.root, 0, 0, 0))
}

func (in *injector) click(x, y int) {
	xtest.FakeInput(in.c, xproto.MotionNotify, 0, 0, in.root, int16(x), int16(y), 0)
	xtest.FakeInput(in.c, xproto.ButtonPress, 1, 0, in.root, 0, 0, 0)
	in.sync(xtest.FakeInputChecked(in.c, xproto.ButtonRelease, 1, 0, in.root, 0, 0, 0))
}

func (in *injector) sync(ck xtest.FakeInputCookie) {
	if err := ck.Check(); err != nil {
		in.b.Fatal(err)
	}
}

// selfCPU is the CPU time this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serverCPU is the CPU time d's X server has used, from /proc (in clock
// ticks of 10 ms: read it over many settles).
func serverCPU(d *display.Display) time.Duration {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(d.ServerPID()) + "/stat")
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses.
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}
