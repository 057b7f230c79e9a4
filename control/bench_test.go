package control

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/deskenv/deskenv/baseline"
	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/screen"
	"github.com/deskenv/deskenv/task"
)

// reportQuantiles adds p50, p95 and max of ds (milliseconds) to b's output.
func reportQuantiles(b *testing.B, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	s := make([]float64, len(ds))
	for i, d := range ds {
		s[i] = float64(d) / float64(time.Millisecond)
	}
	sort.Float64s(s)
	b.ReportMetric(quantile(s, 0.5), "p50-ms")
	b.ReportMetric(quantile(s, 0.95), "p95-ms")
	b.ReportMetric(s[len(s)-1], "max-ms")
	b.ReportMetric(0, "ns/op") // the quantiles say it better than the mean
}

// BenchmarkReset compares a deskenv reset with what container-per-episode
// setups pay: starting the desktop from nothing. Both end at the same point:
// the session's window is up and the screen has settled.
//
//	go test ./control/ -run '^$' -bench BenchmarkReset -benchtime 20x
func BenchmarkReset(b *testing.B) {
	settle := screen.SettleOptions{Quiet: 80 * time.Millisecond, Max: 2 * time.Second}

	b.Run("reset", func(b *testing.B) {
		benchResets(b, rigOptions{mode: ModeSim}, "")
	})

	// The default desktop: openbox, the tint2 panel, an xterm.
	b.Run("desktop", func(b *testing.B) {
		testrig.NeedTools(b, "tint2")
		benchResets(b, rigOptions{mode: ModeSim, session: display.SessionDesktop}, "")
	})

	// Into a task whose setup opens Chromium on a local page, on the
	// default desktop: the reset kills the last episode's Chromium too.
	b.Run("chromium-task", func(b *testing.B) {
		testrig.NeedTools(b, "tint2", "chromium")
		benchResets(b, rigOptions{mode: ModeSim, session: display.SessionDesktop, tasks: browserAbout(b)}, "browser-about")
	})

	// The same, settling as the appliance does by default: after 40 ms
	// once Chromium and the rest of the desktop sit idle.
	b.Run("chromium-task-idle", func(b *testing.B) {
		testrig.NeedTools(b, "tint2", "chromium")
		benchResets(b, rigOptions{mode: ModeSim, session: display.SessionDesktop, tasks: browserAbout(b), idle: true}, "browser-about")
	})

	b.Run("process-restart", func(b *testing.B) {
		testrig.NeedTools(b, "openbox", "xterm")
		home := testrig.SeedHome(b)
		var ds []time.Duration
		for i := 0; i < b.N; i++ {
			start := time.Now()
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "DESKENV_BENCH_APPLIANCE="+home)
			stdin, _ := cmd.StdinPipe()
			stdout, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			line, err := bufio.NewReader(stdout).ReadString('\n')
			if err != nil || line != "ready\n" {
				b.Fatalf("the appliance process said %q, %v", line, err)
			}
			ds = append(ds, time.Since(start))
			b.StopTimer()
			stdin.Close()
			cmd.Wait()
			b.StartTimer()
		}
		reportQuantiles(b, ds)
	})

	b.Run("full-restart", func(b *testing.B) {
		testrig.NeedTools(b, "openbox", "xterm")
		ctx := context.Background()
		home := testrig.SeedHome(b)
		log := slog.New(slog.DiscardHandler)
		var ds []time.Duration
		for i := 0; i < b.N; i++ {
			start := time.Now()
			d, err := display.Start(ctx, display.Config{Width: 1280, Height: 800, Home: home,
				WindowManager: []string{"openbox"}, Apps: [][]string{{"xterm"}}, Logger: log})
			if err != nil {
				b.Fatal(err)
			}
			ex, err := hci.NewExecutor(d, hci.Options{Logger: log})
			if err != nil {
				b.Fatal(err)
			}
			capt, err := screen.NewCapturer(d)
			if err != nil {
				b.Fatal(err)
			}
			if _, ok, err := baseline.WaitWindows(ctx, d.Name(), xtermOnly(), 30*time.Second); err != nil || !ok {
				b.Fatalf("the xterm did not come up: %v", err)
			}
			if _, _, err := capt.Settle(ctx, settle); err != nil {
				b.Fatal(err)
			}
			ds = append(ds, time.Since(start))
			b.StopTimer()
			capt.Close()
			ex.Close()
			d.Close()
			b.StartTimer()
		}
		reportQuantiles(b, ds)
	})
}

// benchResets resets a rig made with o b.N times into task (empty: none)
// after an episode's worth of mess, and reports the quantiles of the whole
// reset and the p50 of each of its steps (where the milliseconds go).
func benchResets(b *testing.B, o rigOptions, task string) {
	r := newRig(b, o)
	ctx := context.Background()
	var ds []time.Duration
	var reps []ResetReport
	for i := 0; i < b.N; i++ {
		// An episode's worth of mess, not timed: a stray window, files
		// written and deleted, a held key.
		b.StopTimer()
		testrig.SpawnDetached(b, r.d, "xterm", "-class", "Stray", "-e", "sleep", "300")
		testrig.WriteFile(b, filepath.Join(r.home, "episode", "out.txt"), "x", 0o644)
		r.exec.KeyDown(ctx, hci.Keysym(0xffe3), hci.SourceAgent) // Control_L
		testrig.WaitFor(b, "the stray window", func() bool { return strings.Contains(r.windowClasses(b), "Stray") })
		b.StartTimer()
		start := time.Now()
		ep, err := r.c.Reset(ctx, ResetRequest{TaskID: task})
		if err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(start))
		reps = append(reps, *ep.Reset)
	}
	reportQuantiles(b, ds)
	reportSteps(b, reps)
}

// reportSteps adds the p50 of each step of the resets in reps to b's
// output, in milliseconds.
func reportSteps(b *testing.B, reps []ResetReport) {
	steps := []struct {
		name string
		of   func(r ResetReport) time.Duration
	}{
		{"release", func(r ResetReport) time.Duration { return r.Release }},
		{"kill", func(r ResetReport) time.Duration { return r.Kill }},
		{"home", func(r ResetReport) time.Duration { return r.Home }},
		{"xstate", func(r ResetReport) time.Duration { return r.Clipboard }},
		{"session", func(r ResetReport) time.Duration { return r.Session }},
		{"windows", func(r ResetReport) time.Duration { return r.Windows }},
		{"touchup", func(r ResetReport) time.Duration { return r.Touchup }},
		{"setup", func(r ResetReport) time.Duration { return r.Setup }},
		{"settle", func(r ResetReport) time.Duration { return r.Settle }},
		{"shot", func(r ResetReport) time.Duration { return r.Shot }},
	}
	for _, st := range steps {
		s := make([]float64, len(reps))
		for i, r := range reps {
			s[i] = float64(st.of(r)) / float64(time.Millisecond)
		}
		sort.Float64s(s)
		b.ReportMetric(quantile(s, 0.5), st.name+"-ms")
	}
}

// browserAbout is the example task browser-about: its setup writes two
// pages into home and opens the first in Chromium.
func browserAbout(b *testing.B) []*task.Task {
	for _, t := range loadExampleTasks(b) {
		if t.ID == "browser-about" {
			return []*task.Task{t}
		}
	}
	b.Fatal("the example task browser-about is missing from tasks/")
	return nil
}

// xtermOnly is the default session's one window.
func xtermOnly() []baseline.Window { return []baseline.Window{{Instance: "xterm", Class: "XTerm"}} }

// TestMain lets the benchmark start this test binary as a stand-in for the
// appliance process: with DESKENV_BENCH_APPLIANCE=home it starts the desktop
// the way deskenv does, prints "ready" once the session's window is up and
// the screen has settled, and exits when its stdin closes.
func TestMain(m *testing.M) {
	if home := os.Getenv("DESKENV_BENCH_APPLIANCE"); home != "" {
		if err := runAppliance(home); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func runAppliance(home string) error {
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	d, err := display.Start(ctx, display.Config{Width: 1280, Height: 800, Home: home,
		WindowManager: []string{"openbox"}, Apps: [][]string{{"xterm"}}, Logger: log})
	if err != nil {
		return err
	}
	defer d.Close()
	ex, err := hci.NewExecutor(d, hci.Options{Logger: log})
	if err != nil {
		return err
	}
	defer ex.Close()
	capt, err := screen.NewCapturer(d)
	if err != nil {
		return err
	}
	defer capt.Close()
	if _, ok, err := baseline.WaitWindows(ctx, d.Name(), xtermOnly(), 30*time.Second); err != nil || !ok {
		return fmt.Errorf("the xterm did not come up: %v", err)
	}
	if _, _, err := capt.Settle(ctx, screen.SettleOptions{Quiet: 80 * time.Millisecond, Max: 2 * time.Second}); err != nil {
		return err
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	return nil
}
