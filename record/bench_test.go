package record

import (
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/screen"
)

// BenchmarkActionLatency measures what recording adds to an action: the same
// clicks through Executor.Do, back to back, with no recorder, with a recorder
// without video, and with everything on (an observation after the actions and
// 10 fps video, working in the background on the same two cores and the same
// X server). Only the time inside Do counts.
//
//	go test ./record/ -run '^$' -bench 'ActionLatency|AgentStep' -benchtime 200x
func BenchmarkActionLatency(b *testing.B) {
	r := newRig(b, 1280, 800, "")
	ctx := context.Background()
	acts := []hci.Action{
		{Action: hci.ActLeftClick, Coordinate: []int{100, 100}},
		{Action: hci.ActLeftClick, Coordinate: []int{700, 500}},
	}
	for _, mode := range benchModes {
		b.Run(mode.name, func(b *testing.B) {
			stop := mode.start(b, r)
			defer stop()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				// The screen changes now and then, as in a real session, so
				// observations and video have work to do.
				if i%10 == 0 {
					b.StopTimer()
					r.probe.Fill(0, 0, 640, 400, uint32(0x101010*(i%15+1)))
					b.StartTimer()
				}
				if _, err := r.exec.Do(ctx, acts[i%2], hci.SourceAgent); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
		})
	}
}

// BenchmarkAgentStep measures a step as an agent sees it over MCP: the
// action, the wait for the screen to settle (80 ms quiet) and the screenshot,
// with a second between steps for the model to think (-benchtime 20x takes
// a minute a mode). The recorder takes its own observation of the same
// screen in that window.
func BenchmarkAgentStep(b *testing.B) {
	r := newRig(b, 1280, 800, "")
	ctx := context.Background()
	for _, mode := range benchModes {
		b.Run(mode.name, func(b *testing.B) {
			stop := mode.start(b, r)
			defer stop()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				time.Sleep(time.Second)
				b.StartTimer()
				a := hci.Action{Action: hci.ActLeftClick, Coordinate: []int{100 + i%2*600, 100}}
				if _, err := r.exec.Do(ctx, a, hci.SourceAgent); err != nil {
					b.Fatal(err)
				}
				// What the click did to the screen, as an application would.
				r.probe.Fill(0, 0, 640, 400, uint32(0x101010*(i%15+1)))
				if _, _, err := r.capt.Settle(ctx, screen.SettleOptions{Quiet: 80 * time.Millisecond, Max: 2 * time.Second}); err != nil {
					b.Fatal(err)
				}
				if _, err := r.shooter.Shot(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
		})
	}
}

type benchMode struct {
	name string
	opt  *Options
}

var benchModes = []benchMode{
	{"no-recorder", nil},
	{"recording-no-video", &Options{FPS: -1}},
	{"recording-video-10fps", &Options{FPS: 10}},
}

// start starts recording as the mode says and returns what stops it.
func (m benchMode) start(b *testing.B, r *rig) func() {
	if m.opt == nil {
		return func() {}
	}
	rec := r.recorder(b, b.TempDir(), *m.opt)
	if _, err := rec.Start(context.Background(), EpisodeInfo{Source: "agent"}); err != nil {
		b.Fatal(err)
	}
	return func() { rec.Stop(context.Background(), nil) }
}

// BenchmarkHumanSessionDisk records a synthetic person working in an xterm
// (moving the mouse, clicking, typing commands at about five keys a second,
// reading their output, scrolling) for DESKENV_BENCH_SESSION (default 2m) of
// real time, and reports the disk it takes per hour by file kind.
//
//	DESKENV_BENCH_SESSION=10m go test ./record/ -run '^$' -bench HumanSessionDisk -benchtime 1x -timeout 30m
func BenchmarkHumanSessionDisk(b *testing.B) {
	length := 2 * time.Minute
	if s := os.Getenv("DESKENV_BENCH_SESSION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			b.Fatalf("DESKENV_BENCH_SESSION=%q: %v", s, err)
		}
		length = d
	}
	r := newRig(b, 1280, 800, "")
	r.probe.Close()
	xtermBench(b, r)
	ctx := context.Background()
	dir := b.TempDir()
	rec := r.recorder(b, dir, Options{})
	ep, err := rec.Start(ctx, EpisodeInfo{Source: "human"})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	h := hci.SourceHuman
	px, py := 400, 300
	sleep := func(d time.Duration) { time.Sleep(d) }
	move := func(x, y int) {
		// 60 Hz motion over ~0.4 s, as a browser sends it.
		for i := 1; i <= 24; i++ {
			r.exec.MoveTo(ctx, px+(x-px)*i/24, py+(y-py)*i/24, h)
			sleep(16 * time.Millisecond)
		}
		px, py = x, y
	}
	key := func(name string) {
		k, err := hci.KeysymByName(name)
		if err != nil {
			b.Fatal(err)
		}
		r.exec.KeyDown(ctx, k, h)
		sleep(time.Duration(40+rng.IntN(40)) * time.Millisecond)
		r.exec.KeyUp(ctx, k, h)
	}
	typeText := func(s string) {
		for _, c := range s {
			name := string(c)
			switch c {
			case ' ':
				name = "space"
			case '|':
				name = "bar"
			case '-':
				name = "minus"
			case '/':
				name = "slash"
			}
			key(name)
			sleep(time.Duration(80+rng.IntN(160)) * time.Millisecond)
		}
	}
	cmds := []string{"ls -la /usr/share | head -30", "cat /etc/os-release", "echo hello world", "df -h", "ps aux | head -20", "uname -a"}
	b.ResetTimer()
	start := time.Now()
	for n := 0; time.Since(start) < length; n++ {
		move(100+rng.IntN(300), 60+rng.IntN(200))
		r.exec.ButtonDown(ctx, 1, h)
		sleep(80 * time.Millisecond)
		r.exec.ButtonUp(ctx, 1, h)
		sleep(time.Duration(300+rng.IntN(700)) * time.Millisecond)
		typeText(cmds[n%len(cmds)])
		key("Return")
		sleep(time.Duration(1500+rng.IntN(2500)) * time.Millisecond) // reading
		if n%3 == 0 {
			for i := 0; i < 4; i++ {
				r.exec.Wheel(ctx, 0, -1, h)
				sleep(60 * time.Millisecond)
			}
			sleep(time.Second)
		}
		if n%4 == 3 {
			key("BackSpace")
			typeText("clear")
			key("Return")
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	meta, err := rec.Stop(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	sizes := map[string]int64{}
	filepath.Walk(ep.Dir(), func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(ep.Dir(), p)
		kind := rel
		switch {
		case strings.HasPrefix(rel, ShotsDir+"/"):
			kind = "shots-png"
		case strings.HasPrefix(rel, VideoDir+"/"):
			kind = "video-h264"
		}
		sizes[kind] += fi.Size()
		return nil
	})
	perHour := float64(time.Hour) / float64(elapsed)
	var total int64
	for k, v := range sizes {
		total += v
		unit := "MB/h-" + strings.TrimSuffix(strings.TrimSuffix(k, ".jsonl"), ".json")
		b.ReportMetric(float64(v)*perHour/1e6, unit)
	}
	b.ReportMetric(float64(total)*perHour/1e6, "MB/h-total")
	b.ReportMetric(float64(meta.Counts.Steps)*perHour, "steps/h")
	b.ReportMetric(float64(meta.Counts.Events)*perHour, "events/h")
	b.Logf("%s of session: %d events, %d steps, %d observations, %d frames in %d segments; %d bytes",
		elapsed.Round(time.Second), meta.Counts.Events, meta.Counts.Steps, meta.Counts.Shots, meta.Counts.Frames, meta.Counts.Segments, total)
}

// xtermBench starts an xterm filling most of the screen for the session
// benchmark.
func xtermBench(b *testing.B, r *rig) {
	b.Helper()
	cmd := exec.Command("xterm", "-geometry", "100x40+0+0", "-e", "sh")
	cmd.Env = append(append(os.Environ(), r.d.Env()...), "PS1=$ ", "ENV=")
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	time.Sleep(time.Second)
}
