package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"text/tabwriter"
	"time"
)

// deskbench network: the stacks of deskbench latency with headless Chromium
// behind a shaped link (network_link.go: a namespace, veth, tc tbf; relay.go:
// delay and loss), the desktop animating, for each profile.

type networkConfig struct {
	width, height int
	profiles      []netProfile
	duration      time.Duration
	warmup        time.Duration
	fps, bitrate  int
	stacks        []string
	jsonOut       string
	seed          uint64
	queue         time.Duration
	verbose       bool
}

// netResult is one stack on one profile.
type netResult struct {
	Profile string `json:"profile"`
	Stack   string `json:"stack"`
	// Glass-to-glass, over samples painted while the desktop animates.
	Samples int     `json:"samples"`
	Lost    int     `json:"lost"` // not shown within 3 s
	P50     float64 `json:"p50_ms"`
	P95     float64 `json:"p95_ms"`
	// P50Over and P95Over say the percentile fell on a lost sample: the
	// figure is the wait (3 s) and the latency was longer.
	P50Over bool      `json:"p50_over,omitempty"`
	P95Over bool      `json:"p95_over,omitempty"`
	Latency []float64 `json:"latency_ms,omitempty"`
	// ShownFPS is distinct frames the page showed per second.
	ShownFPS float64 `json:"shown_fps"`
	// FreezeMs is the longest time between two shown frames (or from the
	// window's start or to its end) while the desktop animated.
	FreezeMs float64 `json:"longest_freeze_ms"`
	// SentKbps is what the server sent towards the browser, as the relay
	// counted it before loss (the same measure for every stack).
	SentKbps float64 `json:"sent_kbps"`
	// Keyframes sent during the window (deskenv's own count); -1 when the
	// stack has none (noVNC).
	Keyframes int `json:"keyframes"`
	// For the drop profile: the seconds after the link came back until a
	// one-second window had shown fps and sent bitrate both within 90 % of
	// before the drop; -1 when it did not within the run.
	RecoverySec *float64 `json:"recovery_s,omitempty"`
	// Receiver is what Chromium's getStats said of the video during the
	// window (deskenv's stacks): why frames were missing.
	Receiver *receiverStats `json:"receiver,omitempty"`
	Notes    string         `json:"notes,omitempty"`
}

func runNetwork(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := networkConfig{}
	var profiles, stacks string
	fs := flag.NewFlagSet("network", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&c.width, "width", 1280, "screen width")
	fs.IntVar(&c.height, "height", 800, "screen height")
	fs.StringVar(&profiles, "profiles", "all", "links, comma-separated: fast (20 Mbit/s 20 ms), medium (3 Mbit/s 80 ms 1 %), slow (1 Mbit/s 150 ms 3 %), drop (10 -> 1 -> 10 Mbit/s), all, or RATE/RTT[/LOSS[/JITTER]] like 5mbit/40ms/0.5%")
	fs.DurationVar(&c.duration, "duration", 20*time.Second, "measured time per profile per stack (the drop profile: a third at each rate)")
	fs.DurationVar(&c.warmup, "warmup", 3*time.Second, "animation before measuring, after the page plays")
	fs.IntVar(&c.fps, "fps", 30, "deskenv stream frames per second")
	fs.IntVar(&c.bitrate, "bitrate", 4000, "deskenv's --bitrate in kbit/s: congestion control's start and ceiling, the fixed stack's rate")
	fs.StringVar(&stacks, "stacks", "deskenv,fixed,websocket,novnc", "stacks, comma-separated: deskenv (WebRTC, congestion control), fixed (deskenv --fixed-bitrate), websocket (deskenv's one-port fallback, ?transport=websocket), novnc (x11vnc + noVNC)")
	fs.StringVar(&c.jsonOut, "json", "", "also write the results as JSON to this file")
	fs.DurationVar(&c.queue, "queue", 100*time.Millisecond, "how much the shaped link queues before it drops (tc tbf latency)")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the relay's loss and jitter draws")
	fs.BoolVar(&c.verbose, "v", false, "show the browser's console")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var err error
	if c.profiles, err = parseProfiles(profiles); err != nil {
		return err
	}
	c.stacks = splitComma(stacks)
	for _, s := range c.stacks {
		if !slices.Contains([]string{"deskenv", "fixed", "websocket", "novnc"}, s) {
			return fmt.Errorf("-stacks: unknown stack %q (use deskenv, fixed, websocket, novnc)", s)
		}
	}
	if len(c.stacks) == 0 || c.duration < 3*time.Second || c.warmup < 0 || c.queue < time.Millisecond || c.queue > 10*time.Second {
		return fmt.Errorf("-stacks must name a stack, -duration be at least 3s, -warmup not negative and -queue 1ms..10s")
	}
	if err := checkNetCaps(); err != nil {
		return err
	}
	dir, err := findBrowser()
	if err != nil {
		return err
	}

	lock, err := lockLink()
	if err != nil {
		return err
	}
	defer lock.Close()
	link, err := setupLink(ctx, c.profiles[0].RateKbit, c.queue)
	if err != nil {
		return err
	}
	defer func() {
		if err := link.Close(); err != nil {
			fmt.Fprintf(stderr, "network: cleaning up the link: %v\n", err)
		}
	}()
	tmp, err := os.MkdirTemp("", netPrefix+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	wrapper, err := chromiumInNS(tmp)
	if err != nil {
		return err
	}
	// The driver reads its Chromium from the environment it inherits.
	os.Setenv("DESKENV_CHROMIUM", wrapper)

	b, err := startBench(ctx, dir, c.width, c.height, c.verbose, stderr)
	if err != nil {
		return err
	}
	defer b.Close()

	nb := &netBench{c: c, link: link, bench: b, stderr: stderr}
	var results []netResult
	for _, p := range c.profiles {
		for _, s := range c.stacks {
			fmt.Fprintf(stderr, "network: %s, %s\n", p, stackName(s))
			r, err := nb.measure(ctx, p, s)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				// One stack failing on one link is a figure too (it did not
				// play); the run goes on.
				fmt.Fprintf(stderr, "network: %s on %s: %v\n", stackName(s), p.Name, err)
				r = netResult{Profile: p.Name, Stack: stackName(s), Keyframes: -1, Notes: "failed: " + err.Error()}
			}
			results = append(results, r)
		}
	}
	printNetwork(stdout, c, results)
	if c.jsonOut != "" {
		b, _ := json.MarshalIndent(map[string]any{"screen": fmt.Sprintf("%dx%d", c.width, c.height),
			"duration_s": c.duration.Seconds(), "profiles": c.profiles, "results": results}, "", "  ")
		if err := os.WriteFile(c.jsonOut, b, 0o644); err != nil {
			return fmt.Errorf("-json %s: %w", c.jsonOut, err)
		}
	}
	return nil
}

func stackName(s string) string {
	switch s {
	case "deskenv":
		return "deskenv (congestion control)"
	case "fixed":
		return "deskenv --fixed-bitrate"
	case "websocket":
		return "deskenv websocket (WebCodecs)"
	case "novnc":
		return "x11vnc + noVNC"
	}
	return s
}

type netBench struct {
	c    networkConfig
	link *netLink
	*bench
	stderr io.Writer
}

// stackUp is one stack serving behind the relay.
type stackUp struct {
	url   string // the page, through the relay
	links string // deskenv's links endpoint on 127.0.0.1; "" for noVNC
	relay *relay
	stop  func()
	view  view
}

func (nb *netBench) measure(ctx context.Context, p netProfile, stack string) (netResult, error) {
	r := netResult{Profile: p.Name, Stack: stackName(stack), Keyframes: -1}
	if err := nb.link.setRate(ctx, p.RateKbit); err != nil {
		return r, err
	}
	shape := linkShape{Delay: p.RTT / 2, Jitter: p.Jitter, Loss: p.Loss, Seed: nb.c.seed}
	var st *stackUp
	var err error
	if stack == "novnc" {
		st, err = nb.startNoVNC(ctx, shape)
	} else {
		st, err = nb.startDeskenv(ctx, shape, stack == "fixed", stack == "websocket")
	}
	if err != nil {
		return r, err
	}
	defer st.stop()

	page := "net-" + stack
	closePage, err := openPage(ctx, nb.drv, page, st.url, nb.c.width, nb.c.height+30, st.view, time.Minute)
	if err != nil {
		return r, err
	}
	defer closePage()
	lc := latencyConfig{width: nb.c.width, height: nb.c.height}
	run := &stackRun{c: lc, probe: nb.probe, drv: nb.drv, page: page, d: nb.d, paint: new(sync.Mutex)}
	if err := run.startWatcher(ctx, st.view.kind, st.view.selector); err != nil {
		return r, err
	}
	return nb.window(ctx, p, st, run, r)
}

// startDeskenv runs deskenv's stream (latency-serve) with all its WebRTC on
// one UDP port of 127.0.0.1 and the relay's address announced as its only
// candidate, so media and page both cross the relay and the shaped veth.
//
// With ws the page asks for the websocket fallback (the same encode and
// congestion logic over the signalling websocket, all TCP).
func (nb *netBench) startDeskenv(ctx context.Context, shape linkShape, fixed, ws bool) (*stackUp, error) {
	// The relay listens on the same port number the stream uses on
	// 127.0.0.1: a 1:1 NAT keeps ports, so the candidate announced is
	// netHostIP:port.
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freeUDPPort(netHostIP)
		if err != nil {
			return nil, err
		}
		args := deskenvServeArgs(nb.d.Name(), nb.c.fps, nb.c.bitrate, "-udp-port", strconv.Itoa(port), "-nat-1to1", netHostIP)
		if fixed {
			args = append(args, "-fixed-bitrate")
		}
		srv, err := startServeChild(ctx, nb.stderr, args...)
		if err != nil {
			lastErr = err
			continue
		}
		hostport := hostPort(srv.url)
		rl, err := startRelay(relayConfig{
			TCPListen: net.JoinHostPort(netHostIP, netPagePort), TCPTarget: hostport,
			UDPListen: net.JoinHostPort(netHostIP, strconv.Itoa(port)), UDPTarget: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			Shape: shape})
		if err != nil {
			srv.stop()
			lastErr = err
			continue
		}
		transport, query := "webrtc", ""
		if ws {
			transport, query = "websocket", "?transport=websocket"
		}
		return &stackUp{
			url: fmt.Sprintf("http://%s/%s", rl.TCPAddr(), query), links: "http://" + hostport + "/deskbench/links",
			relay: rl, stop: func() { rl.Close(); srv.stop() }, view: deskenvView(transport),
		}, nil
	}
	return nil, lastErr
}

// startNoVNC runs x11vnc and the websocket bridge, the bridge behind the
// relay (noVNC is all TCP).
func (nb *netBench) startNoVNC(ctx context.Context, shape linkShape) (*stackUp, error) {
	st, err := startNoVNC(ctx, nb.d, nb.dir, nb.stderr)
	if err != nil {
		return nil, err
	}
	rl, err := startRelay(relayConfig{TCPListen: net.JoinHostPort(netHostIP, netPagePort), TCPTarget: hostPort(st.bridge.url), Shape: shape})
	if err != nil {
		st.stop()
		return nil, err
	}
	return &stackUp{
		url: fmt.Sprintf("http://%s/", rl.TCPAddr()), relay: rl,
		stop: func() { rl.Close(); st.stop() }, view: noVNCView,
	}, nil
}

func hostPort(url string) string {
	var hp string
	fmt.Sscanf(url, "http://%s", &hp)
	if i := len(hp) - 1; i >= 0 && hp[i] == '/' {
		hp = hp[:i]
	}
	return hp
}

func freeUDPPort(ip string) (int, error) {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(ip)})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port, nil
}

// tick is the relay's byte count at a moment.
type tick struct {
	t    time.Time
	down int64
}

// window animates the desktop for warm-up plus the duration, samples
// glass-to-glass meanwhile, and for the drop profile changes the rate.
func (nb *netBench) window(ctx context.Context, p netProfile, st *stackUp, run *stackRun, r netResult) (netResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	measureFrom := start.Add(nb.c.warmup)
	end := measureFrom.Add(nb.c.duration)

	animErr := make(chan error, 1)
	go func() {
		_, err := animate(ctx, nb.probe, nb.c.width, nb.c.height, end, run.paint)
		animErr <- err
	}()

	// The relay's byte count every 250 ms, for the bitrate over time.
	var ticks []tick
	var ticksMu sync.Mutex
	go func() {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			ticksMu.Lock()
			ticks = append(ticks, tick{time.Now(), st.relay.down.Load()})
			ticksMu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()

	// The drop profile's rate changes, at a third and two thirds.
	var dropAt, backAt time.Time
	if p.DropKbit > 0 {
		dropAt = measureFrom.Add(nb.c.duration / 3)
		backAt = measureFrom.Add(2 * nb.c.duration / 3)
		go func() {
			for _, ch := range []struct {
				at   time.Time
				kbit int
			}{{dropAt, p.DropKbit}, {backAt, p.RateKbit}} {
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Until(ch.at)):
				}
				if err := nb.link.setRate(context.Background(), ch.kbit); err != nil {
					fmt.Fprintf(nb.stderr, "network: %v\n", err)
				}
			}
		}()
	}

	if err := sleepCtx(ctx, time.Until(measureFrom)); err != nil {
		return r, err
	}
	kf0, kfErr := keyframesSent(ctx, st.links)
	rs0 := receiverNow(ctx, run, st)
	// Glass-to-glass samples until the end.
	var lat []float64
	rng := rand.New(rand.NewPCG(nb.c.seed, 5))
	for i := 0; time.Until(end) > 500*time.Millisecond; i++ {
		t0, res, err := run.sample(ctx, i%len(markerPalette))
		if err != nil {
			return r, err
		}
		if res == nil {
			if ctx.Err() != nil {
				return r, ctx.Err()
			}
			if i > 0 { // the first only aligns the marker
				r.Samples++
				r.Lost++
			}
			continue
		}
		if i > 0 {
			r.Samples++
			lat = append(lat, res.T-run.off-float64(t0.UnixMicro())/1000)
		}
		if err := sleepCtx(ctx, time.Duration(100+rng.IntN(150))*time.Millisecond); err != nil {
			return r, err
		}
	}
	if err := sleepCtx(ctx, time.Until(end)); err != nil {
		return r, err
	}
	if err := <-animErr; err != nil {
		return r, fmt.Errorf("animate: %w", err)
	}
	kf1, kfErr1 := keyframesSent(ctx, st.links)
	if rs1 := receiverNow(ctx, run, st); rs0 != nil && rs1 != nil {
		r.Receiver = rs1.since(rs0)
	}
	// Whatever was still on its way when the animation stopped.
	if err := sleepCtx(ctx, p.RTT+500*time.Millisecond); err != nil {
		return r, err
	}
	cancel()

	var times []float64
	if err := run.eval(context.Background(), `(s) => deskbench.changeTimes(s)`, float64(start.UnixMicro())/1000+run.off, &times); err != nil {
		return r, fmt.Errorf("read the shown frames: %w", err)
	}
	shownAt := make([]time.Time, len(times))
	for i, t := range times {
		shownAt[i] = time.UnixMicro(int64((t - run.off) * 1000))
	}
	ticksMu.Lock()
	defer ticksMu.Unlock()

	r.Latency = lat
	r.P50, r.P50Over = latencyPct(lat, r.Lost, 50)
	r.P95, r.P95Over = latencyPct(lat, r.Lost, 95)
	r.ShownFPS = framesIn(shownAt, measureFrom, end) / nb.c.duration.Seconds()
	r.FreezeMs = longestGap(shownAt, measureFrom, end).Seconds() * 1000
	r.SentKbps = bitrate(ticks, measureFrom, end)
	if st.links != "" {
		if kfErr != nil || kfErr1 != nil {
			r.Notes = fmt.Sprintf("keyframes unknown: %v", errors.Join(kfErr, kfErr1))
		} else {
			r.Keyframes = kf1 - kf0
		}
	}
	if p.DropKbit > 0 {
		before := measureFrom.Add(time.Second) // what the stack does on the full link, settled
		baseFPS := framesIn(shownAt, before, dropAt) / dropAt.Sub(before).Seconds()
		baseKbps := bitrate(ticks, before, dropAt)
		rec := recovery(shownAt, ticks, backAt, end, baseFPS, baseKbps)
		r.RecoverySec = &rec
		r.Notes = joinNote(r.Notes, fmt.Sprintf("before the drop %.1f fps %.0f kbit/s; during %.1f fps %.0f kbit/s",
			baseFPS, baseKbps, framesIn(shownAt, dropAt, backAt)/backAt.Sub(dropAt).Seconds(), bitrate(ticks, dropAt, backAt)))
	}
	return r, nil
}

// receiverStats are the browser's counters of the video it received.
type receiverStats struct {
	PacketsLost    float64 `json:"packets_lost"`
	Nacks          float64 `json:"nacks_sent"`
	PLIs           float64 `json:"plis_sent"`
	Freezes        float64 `json:"freezes"`
	FreezeSeconds  float64 `json:"freeze_s"`
	FramesDropped  float64 `json:"frames_dropped"`
	FramesDecoded  float64 `json:"frames_decoded"`
	KeyFramesDecod float64 `json:"keyframes_decoded"`
}

const receiverExpr = `(async () => {
  const pc = window.deskenv && deskenv.pc;
  if (!pc) return null;
  let o = null;
  (await pc.getStats()).forEach((s) => {
    if (s.type === 'inbound-rtp' && s.kind === 'video') o = {
      packets_lost: s.packetsLost ?? 0, nacks_sent: s.nackCount ?? 0, plis_sent: s.pliCount ?? 0,
      freezes: s.freezeCount ?? 0, freeze_s: s.totalFreezesDuration ?? 0,
      frames_dropped: s.framesDropped ?? 0, frames_decoded: s.framesDecoded ?? 0, keyframes_decoded: s.keyFramesDecoded ?? 0 };
  });
  return o;
})()`

// receiverNow reads the receiver's counters; nil for noVNC or when the page
// cannot say.
func receiverNow(ctx context.Context, run *stackRun, st *stackUp) *receiverStats {
	if st.links == "" {
		return nil
	}
	var rs *receiverStats
	if err := run.eval(ctx, receiverExpr, nil, &rs); err != nil {
		return nil
	}
	return rs
}

func (b *receiverStats) since(a *receiverStats) *receiverStats {
	return &receiverStats{b.PacketsLost - a.PacketsLost, b.Nacks - a.Nacks, b.PLIs - a.PLIs, b.Freezes - a.Freezes,
		b.FreezeSeconds - a.FreezeSeconds, b.FramesDropped - a.FramesDropped, b.FramesDecoded - a.FramesDecoded,
		b.KeyFramesDecod - a.KeyFramesDecod}
}

// sampleWaitMs is how long a glass-to-glass sample waits for the page.
const sampleWaitMs = 3000

// latencyPct is the p-th percentile of the samples with the lost ones
// counted as longer than the wait: a stack that shows only its quick
// frames must not look quick. over says the percentile is a lost sample.
func latencyPct(lat []float64, lost int, p float64) (v float64, over bool) {
	if len(lat)+lost == 0 {
		return 0, false
	}
	s := slices.Clone(lat)
	for range lost {
		s = append(s, math.Inf(1))
	}
	slices.Sort(s)
	if v = pct(s, p); math.IsInf(v, 1) {
		return sampleWaitMs, true
	}
	return v, false
}

func msCell(v float64, over bool) string {
	if over {
		return fmt.Sprintf("> %.0f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// keyframesSent asks deskenv's stream how many keyframes it sent its
// viewers so far.
func keyframesSent(ctx context.Context, url string) (int, error) {
	if url == "" {
		return 0, nil
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var links []struct {
		Keyframes int `json:"keyframes_total"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&links); err != nil {
		return 0, fmt.Errorf("links: %w", err)
	}
	n := 0
	for _, l := range links {
		n += l.Keyframes
	}
	return n, nil
}

// framesIn counts the frames shown in [from, to).
func framesIn(shown []time.Time, from, to time.Time) float64 {
	n := 0
	for _, t := range shown {
		if !t.Before(from) && t.Before(to) {
			n++
		}
	}
	return float64(n)
}

// longestGap is the longest time in [from, to] without a shown frame,
// counting from from to the first and from the last to to.
func longestGap(shown []time.Time, from, to time.Time) time.Duration {
	prev, gap := from, time.Duration(0)
	for _, t := range shown {
		if t.Before(from) {
			continue
		}
		if t.After(to) {
			break
		}
		gap = max(gap, t.Sub(prev))
		prev = t
	}
	return max(gap, to.Sub(prev))
}

// bitrate is the relay's downstream rate in kbit/s between the ticks
// nearest from and to.
func bitrate(ticks []tick, from, to time.Time) float64 {
	var a, b *tick
	for i := range ticks {
		if a == nil && !ticks[i].t.Before(from) {
			a = &ticks[i]
		}
		if !ticks[i].t.After(to) {
			b = &ticks[i]
		}
	}
	if a == nil || b == nil || !b.t.After(a.t) {
		return 0
	}
	return float64(b.down-a.down) * 8 / 1000 / b.t.Sub(a.t).Seconds()
}

// recovery is the seconds from back until the end of the first one-second
// window (stepped by 250 ms) whose shown fps and sent bitrate are both at
// least 90 % of the figures before the drop; -1 if none before end.
func recovery(shown []time.Time, ticks []tick, back, end time.Time, baseFPS, baseKbps float64) float64 {
	for w := back; !w.Add(time.Second).After(end); w = w.Add(250 * time.Millisecond) {
		fps := framesIn(shown, w, w.Add(time.Second))
		kbps := bitrate(ticks, w, w.Add(time.Second))
		if fps >= 0.9*baseFPS && kbps >= 0.9*baseKbps {
			return w.Add(time.Second).Sub(back).Seconds()
		}
	}
	return -1
}

func printNetwork(w io.Writer, c networkConfig, rs []netResult) {
	fmt.Fprintf(w, "deskbench network: headless Chromium behind a shaped link (veth + tc tbf with a %s queue + deskbench's relay), %dx%d animating, %s measured per stack, %s\n",
		c.queue, c.width, c.height, c.duration, time.Now().UTC().Format("2006-01-02"))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "profile\tstack\tshown fps\tp50 ms\tp95 ms\tlost\tlongest freeze s\tsent kbit/s\tkeyframes\trecovery s\t")
	for _, r := range rs {
		kf, rec := "n/a", ""
		if r.Keyframes >= 0 {
			kf = strconv.Itoa(r.Keyframes)
		}
		if r.RecoverySec != nil {
			rec = "not within the run"
			if *r.RecoverySec >= 0 {
				rec = fmt.Sprintf("%.2f", *r.RecoverySec)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t%s\t%s\t%d/%d\t%.2f\t%.0f\t%s\t%s\t\n",
			r.Profile, r.Stack, r.ShownFPS, msCell(r.P50, r.P50Over), msCell(r.P95, r.P95Over), r.Lost, r.Samples, r.FreezeMs/1000, r.SentKbps, kf, rec)
	}
	tw.Flush()
	for _, r := range rs {
		if v := r.Receiver; v != nil {
			fmt.Fprintf(w, "%s, %s: Chromium received: %.0f packets lost, %.0f NACKs, %.0f PLIs sent; %.0f frames decoded (%.0f keyframes), %.0f dropped; %.0f freezes, %.1f s frozen\n",
				r.Profile, r.Stack, v.PacketsLost, v.Nacks, v.PLIs, v.FramesDecoded, v.KeyFramesDecod, v.FramesDropped, v.Freezes, v.FreezeSeconds)
		}
		if r.Notes != "" {
			fmt.Fprintf(w, "%s, %s: %s\n", r.Profile, r.Stack, r.Notes)
		}
	}
}
