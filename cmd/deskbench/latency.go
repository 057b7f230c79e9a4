package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/e2e/browser"
	"github.com/deskenv/deskenv/internal/proc"
	"github.com/deskenv/deskenv/internal/xprobe"
)

//go:embed latency_probe.js
var latencyProbeJS string

type latencyConfig struct {
	width, height int
	samples       int
	motion        time.Duration
	idle          time.Duration
	fps           int
	bitrate       int
	stacks        string
	jsonOut       string
	verbose       bool
}

// Where the benchmark paints. The marker answers "when did the page show the
// change"; the counter cell changes on every animation tick, so counting its
// changes counts the distinct frames the page showed.
const (
	markerX, markerY, cell = 16, 16, 32
	counterX               = 64
)

var (
	markerPalette  = []uint32{0xff0000, 0x0000ff} // alternate, so every sample is a change
	counterPalette = []uint32{0xff0000, 0x00ff00, 0x0000ff, 0xffff00, 0x00ffff, 0xff00ff}
	background     = uint32(0x404040)
)

// stackResult is one stack's figures.
type stackResult struct {
	Stack          string    `json:"stack"`
	Samples        int       `json:"samples"`
	Lost           int       `json:"lost"`
	LatencyMs      []float64 `json:"latency_ms,omitempty"`
	P50, P95       float64   `json:"-"`
	Min, Max, Mean float64   `json:"-"`
	// Of the glass-to-glass time, until the last packet of the frame arrived
	// (capture + encode + send), when the video element reports it.
	ReceiveP50 float64   `json:"receive_p50_ms,omitempty"`
	ReceiveMs  []float64 `json:"receive_ms,omitempty"`
	ShownFPS   float64   `json:"shown_fps"`
	DecodedFPS float64   `json:"decoded_fps,omitempty"`
	ServerCPU  float64   `json:"server_cpu_pct_motion"`
	XvfbCPU    float64   `json:"xvfb_cpu_pct_motion"`
	IdleCPU    float64   `json:"server_cpu_pct_idle"`
	PaintedFPS float64   `json:"painted_fps"`
	Notes      string    `json:"notes,omitempty"`
}

func runLatency(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := latencyConfig{}
	fs := flag.NewFlagSet("latency", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&c.width, "width", 1280, "screen width")
	fs.IntVar(&c.height, "height", 800, "screen height")
	fs.IntVar(&c.samples, "samples", 60, "latency samples per stack")
	fs.DurationVar(&c.motion, "motion", 10*time.Second, "how long to animate the screen for fps and CPU")
	fs.DurationVar(&c.idle, "idle", 5*time.Second, "how long to measure CPU with the screen still")
	fs.IntVar(&c.fps, "fps", 30, "deskenv stream frames per second")
	fs.IntVar(&c.bitrate, "bitrate", 4000, "deskenv stream bitrate in kbit/s")
	fs.StringVar(&c.stacks, "stacks", "deskenv,novnc", "stacks to measure, comma-separated: deskenv, deskenv-ws (the websocket fallback: H.264 decoded with WebCodecs), novnc")
	fs.StringVar(&c.jsonOut, "json", "", "also write the results as JSON to this file")
	fs.BoolVar(&c.verbose, "v", false, "show the browser's console")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if c.samples < 1 || c.motion <= 0 || c.idle <= 0 {
		return fmt.Errorf("-samples must be at least 1 and -motion, -idle positive (got %d, %s, %s)", c.samples, c.motion, c.idle)
	}
	dir, err := findBrowser()
	if err != nil {
		return err
	}
	b, err := startBench(ctx, dir, c.width, c.height, c.verbose, stderr)
	if err != nil {
		return err
	}
	defer b.Close()

	var results []stackResult
	for _, stack := range splitComma(c.stacks) {
		fmt.Fprintf(stderr, "latency: measuring %s\n", stack)
		var r stackResult
		switch stack {
		case "deskenv":
			r, err = measureDeskenv(ctx, c, b, stderr, false)
		case "deskenv-ws":
			r, err = measureDeskenv(ctx, c, b, stderr, true)
		case "novnc":
			r, err = measureNoVNC(ctx, c, b, stderr)
		default:
			err = fmt.Errorf("-stacks: unknown stack %q (use deskenv, deskenv-ws, novnc)", stack)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", stack, err)
		}
		results = append(results, r)
	}
	printLatency(stdout, c, results)
	if c.jsonOut != "" {
		b, _ := json.MarshalIndent(map[string]any{"screen": fmt.Sprintf("%dx%d", c.width, c.height), "results": results}, "", "  ")
		if err := os.WriteFile(c.jsonOut, b, 0o644); err != nil {
			return fmt.Errorf("-json %s: %w", c.jsonOut, err)
		}
	}
	return nil
}

func splitComma(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// measureDeskenv measures deskenv's page over WebRTC, or with ws over the
// websocket fallback (?transport=websocket).
func measureDeskenv(ctx context.Context, c latencyConfig, b *bench, stderr io.Writer, ws bool) (stackResult, error) {
	r := stackResult{Stack: "deskenv (WebRTC H.264)"}
	page, transport := "deskenv", "webrtc"
	if ws {
		r.Stack, page, transport = "deskenv (websocket H.264, WebCodecs)", "deskenv-ws", "websocket"
	}
	srv, err := startServeChild(ctx, stderr, deskenvServeArgs(b.d.Name(), c.fps, c.bitrate)...)
	if err != nil {
		return r, err
	}
	defer srv.stop()
	u := srv.url
	if ws {
		pu, err := url.Parse(u)
		if err != nil {
			return r, err
		}
		q := pu.Query()
		q.Set("transport", "websocket")
		pu.RawQuery = q.Encode()
		u = pu.String()
	}
	v := deskenvView(transport)
	closePage, err := openPage(ctx, b.drv, page, u, c.width, c.height+30, v, 20*time.Second)
	if err != nil {
		return r, err
	}
	defer closePage()
	decoded := func() (float64, error) {
		var s struct{ FramesDecoded float64 }
		err := b.drv.Do(ctx, "eval", map[string]any{"page": page, "expr": `deskenv.stats()`}, &s)
		return s.FramesDecoded, err
	}
	return measure(ctx, c, b, page, v, srv.pid(), decoded, r)
}

func measureNoVNC(ctx context.Context, c latencyConfig, b *bench, stderr io.Writer) (stackResult, error) {
	r := stackResult{Stack: "x11vnc + noVNC"}
	st, err := startNoVNC(ctx, b.d, b.dir, stderr)
	if err != nil {
		return r, err
	}
	defer st.stop()
	page := "novnc"
	closePage, err := openPage(ctx, b.drv, page, st.bridge.url, c.width, c.height, noVNCView, 20*time.Second)
	if err != nil {
		return r, err
	}
	defer closePage()
	// The VNC server process is x11vnc; the bridge child's CPU is added to it.
	r.Notes = "server CPU = x11vnc + the websocket bridge"
	return measure(ctx, c, b, page, noVNCView, st.vnc.pid(), nil, r, st.bridge.pid())
}

func rgb(c uint32) [3]int { return [3]int{int(c >> 16 & 0xff), int(c >> 8 & 0xff), int(c & 0xff)} }

func palette(cs []uint32) [][3]int {
	out := make([][3]int, len(cs))
	for i, c := range cs {
		out[i] = rgb(c)
	}
	return out
}

// clockOffset estimates page epoch time minus Go's wall clock, from the round
// trip with the smallest delay.
func clockOffset(ctx context.Context, drv *browser.Driver, page string) (float64, error) {
	best, off := math.Inf(1), 0.0
	for i := 0; i < 15; i++ {
		a := time.Now()
		var p float64
		if err := drv.Do(ctx, "now", map[string]any{"page": page}, &p); err != nil {
			return 0, err
		}
		b := time.Now()
		if rtt := float64(b.Sub(a).Microseconds()) / 1000; rtt < best {
			best = rtt
			mid := float64(a.UnixMicro()+b.UnixMicro()) / 2000
			off = p - mid
		}
	}
	return off, nil
}

func measure(ctx context.Context, c latencyConfig, b *bench, page string, v view,
	serverPID int, decoded func() (float64, error), r stackResult, extraPIDs ...int) (stackResult, error) {
	run := stackRun{c: c, probe: b.probe, drv: b.drv, page: page, d: b.d, decoded: decoded, pids: append([]int{serverPID}, extraPIDs...)}
	// A clean screen, then the watcher.
	if err := run.startWatcher(ctx, v.kind, v.selector); err != nil {
		return r, err
	}
	if err := run.latency(ctx, &r); err != nil {
		return r, err
	}
	if err := run.motion(ctx, &r); err != nil {
		return r, err
	}
	return r, run.idle(ctx, &r)
}

// stackRun is one stack under measurement: the page showing it, the probe
// painting on its display, and the processes whose CPU is counted.
type stackRun struct {
	c       latencyConfig
	probe   *xprobe.Probe
	drv     *browser.Driver
	page    string
	d       *display.Display
	decoded func() (float64, error) // frames the page decoded so far; nil when it cannot say
	pids    []int
	off     float64 // page clock minus Go's wall clock, ms
	// paint, when set, is held while the marker is painted: deskbench
	// network samples while an animation paints with the same probe.
	paint *sync.Mutex
}

func (run *stackRun) eval(ctx context.Context, expr string, arg, out any) error {
	args := map[string]any{"page": run.page, "expr": expr}
	if arg != nil {
		args["arg"] = arg
	}
	return run.drv.Do(ctx, "eval", args, out)
}

// startWatcher clears the screen, injects the page's frame watcher and
// aligns the two clocks.
func (run *stackRun) startWatcher(ctx context.Context, kind, selector string) error {
	c := run.c
	if err := run.probe.Fill(0, 0, c.width, c.height, background); err != nil {
		return err
	}
	if err := run.eval(ctx, latencyProbeJS, nil, nil); err != nil {
		return fmt.Errorf("inject the frame watcher: %w", err)
	}
	opts := map[string]any{
		"kind": kind, "selector": selector, "screenW": c.width, "screenH": c.height,
		"markerX": markerX + cell/2, "markerY": markerY + cell/2, "palette": palette(markerPalette),
		"counterX": counterX + cell/2, "counterY": markerY + cell/2, "counterPalette": palette(counterPalette),
	}
	if err := run.eval(ctx, `(o) => deskbench.start(o)`, opts, nil); err != nil {
		return fmt.Errorf("start the frame watcher: %w", err)
	}
	off, err := clockOffset(ctx, run.drv, run.page)
	run.off = off
	return err
}

// latency paints the marker, waits for the page to show it, and repeats.
func (run *stackRun) latency(ctx context.Context, r *stackResult) error {
	var lat, recv []float64
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < run.c.samples+1; i++ {
		t0, res, err := run.sample(ctx, i%len(markerPalette))
		if err != nil {
			return err
		}
		if i == 0 {
			// The first change only aligns the marker; it may wait on a keyframe.
			time.Sleep(100 * time.Millisecond)
			continue
		}
		r.Samples++
		if res == nil {
			r.Lost++
			continue
		}
		t0ms := float64(t0.UnixMicro()) / 1000
		lat = append(lat, res.T-run.off-t0ms)
		if res.Receive > 0 {
			recv = append(recv, res.Receive-run.off-t0ms)
		}
		// A random pause, so samples fall at every phase of the capture clock.
		time.Sleep(time.Duration(60+rng.IntN(90)) * time.Millisecond)
	}
	r.summarize(lat, recv)
	return nil
}

// shown is when the page showed a marker and received its frame, page clock.
type shown struct{ T, Receive float64 }

// sample paints marker colour want and waits up to sampleWaitMs for the
// page to show it; a nil result is a lost sample.
func (run *stackRun) sample(ctx context.Context, want int) (time.Time, *shown, error) {
	if err := run.eval(ctx, `(i) => deskbench.expect(i)`, want, nil); err != nil {
		return time.Time{}, nil, err
	}
	if run.paint != nil {
		run.paint.Lock()
	}
	t0 := time.Now()
	err := run.probe.Fill(markerX, markerY, cell, cell, markerPalette[want])
	if run.paint != nil {
		run.paint.Unlock()
	}
	if err != nil {
		return t0, nil, err
	}
	var res *shown
	if err := run.drv.Do(ctx, "waitFor", map[string]any{"page": run.page, "expr": `deskbench.take()`, "timeoutMs": sampleWaitMs}, &res); err != nil {
		return t0, nil, nil
	}
	return t0, res, nil
}

// summarize fills in the latency figures from the samples.
func (r *stackResult) summarize(lat, recv []float64) {
	r.LatencyMs = lat
	if len(lat) > 0 {
		s := slices.Clone(lat)
		slices.Sort(s)
		r.P50, r.P95, r.Min, r.Max = pct(s, 50), pct(s, 95), s[0], s[len(s)-1]
		for _, v := range s {
			r.Mean += v
		}
		r.Mean /= float64(len(s))
	}
	r.ReceiveMs = slices.Clone(recv)
	if len(recv) > 0 {
		slices.Sort(recv)
		r.ReceiveP50 = pct(recv, 50)
	}
}

// frameCounts are the page's counters of frames and of changes it showed.
type frameCounts struct {
	Frames, Changes float64
	Error           string
}

// motion moves boxes over the whole screen at 60 Hz and counts what the page
// shows, and the CPU the stack and Xvfb spend meanwhile.
func (run *stackRun) motion(ctx context.Context, r *stackResult) error {
	var c0, c1 frameCounts
	if err := run.eval(ctx, `deskbench.counts()`, nil, &c0); err != nil {
		return err
	}
	dec0, err := run.decodedFrames()
	if err != nil {
		return err
	}
	cpu0, x0 := cpuTicks(run.pids...), cpuTicks(xvfbPID(run.d))
	start := time.Now()
	painted, err := animate(ctx, run.probe, run.c.width, run.c.height, time.Now().Add(run.c.motion), nil)
	if err != nil {
		return err
	}
	el := time.Since(start).Seconds()
	cpu1, x1 := cpuTicks(run.pids...), cpuTicks(xvfbPID(run.d))
	if err := run.eval(ctx, `deskbench.counts()`, nil, &c1); err != nil {
		return err
	}
	if c1.Error != "" {
		return fmt.Errorf("frame watcher: %s", c1.Error)
	}
	dec1, err := run.decodedFrames()
	if err != nil {
		return err
	}
	if run.decoded != nil {
		r.DecodedFPS = (dec1 - dec0) / el
	}
	r.ShownFPS = (c1.Changes - c0.Changes) / el
	r.PaintedFPS = float64(painted) / el
	r.ServerCPU = 100 * (cpu1 - cpu0) / el
	r.XvfbCPU = 100 * (x1 - x0) / el
	return nil
}

func (run *stackRun) decodedFrames() (float64, error) {
	if run.decoded == nil {
		return 0, nil
	}
	return run.decoded()
}

// idle measures the stack's CPU with nothing changing on the screen.
func (run *stackRun) idle(ctx context.Context, r *stackResult) error {
	if err := run.probe.Fill(0, 0, run.c.width, run.c.height, background); err != nil {
		return err
	}
	time.Sleep(time.Second)
	i0 := cpuTicks(run.pids...)
	st := time.Now()
	select {
	case <-time.After(run.c.idle):
	case <-ctx.Done():
		return ctx.Err()
	}
	r.IdleCPU = 100 * (cpuTicks(run.pids...) - i0) / time.Since(st).Seconds()
	return nil
}

func pct(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// cpuTicks is the CPU time in seconds the processes have used so far (their
// threads included), from /proc/PID/stat.
func cpuTicks(pids ...int) float64 {
	const hz = 100 // USER_HZ, fixed at 100 on Linux for /proc
	pfs := proc.Default()
	total := 0.0
	for _, pid := range pids {
		if pid <= 0 {
			continue
		}
		st, err := pfs.Stat(pid)
		if err != nil {
			continue
		}
		total += float64(st.UTime+st.STime) / hz
	}
	return total
}

func xvfbPID(d *display.Display) int { return d.ServerPID() }

func printLatency(w io.Writer, c latencyConfig, rs []stackResult) {
	fmt.Fprintf(w, "glass-to-glass latency, loopback, %dx%d, headless Chromium (software decode), %s\n", c.width, c.height, time.Now().Format("2006-01-02"))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "stack\tsamples\tlost\tp50 ms\tp95 ms\tmin\tmax\tmean\tshown fps\tdecoded fps\tserver CPU %\tXvfb CPU %\tidle CPU %\t")
	for _, r := range rs {
		dec := "-"
		if r.DecodedFPS > 0 {
			dec = fmt.Sprintf("%.1f", r.DecodedFPS)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%s\t%.1f\t%.1f\t%.2f\t\n",
			r.Stack, r.Samples, r.Lost, r.P50, r.P95, r.Min, r.Max, r.Mean, r.ShownFPS, dec, r.ServerCPU, r.XvfbCPU, r.IdleCPU)
	}
	tw.Flush()
	for _, r := range rs {
		if r.ReceiveP50 > 0 {
			fmt.Fprintf(w, "%s: p50 until the frame's last packet arrived: %.1f ms (rest is decode + render)\n", r.Stack, r.ReceiveP50)
		}
		if r.PaintedFPS > 0 {
			fmt.Fprintf(w, "%s: motion painted at %.1f fps; CPU %% is of one core\n", r.Stack, r.PaintedFPS)
		}
		if r.Notes != "" {
			fmt.Fprintf(w, "%s: %s\n", r.Stack, r.Notes)
		}
	}
}
