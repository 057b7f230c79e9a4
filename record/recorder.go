package record

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/internal/wire"
	"github.com/deskenv/deskenv/lifecycle"
	"github.com/deskenv/deskenv/screen"
)

// Options configure a Recorder. The zero value records with the defaults.
type Options struct {
	Logger *slog.Logger
	// Session names the desktop session episodes run on (display's
	// SessionDesktop or SessionBare), kept in episode.json for replays.
	Session string
	// Animations says the session's applications animate (display's
	// Config.Animations), kept in episode.json for replays.
	Animations bool
	// Thresholds reduce a person's input (zero fields take the defaults).
	Thresholds Thresholds
	// Settle is how long the screen must be still before an observation is
	// taken (default: quiet 80 ms sampled every 20 ms, at most 1 s), and InputQuiet how long
	// input must pause first (default 100 ms): a person typing fast gets one
	// observation when they pause, not one per key.
	Settle     screen.SettleOptions
	InputQuiet time.Duration
	// FPS is the video's frame rate (default 10; negative: no video). The
	// screen is captured at this rate and a frame encoded only when it
	// changed.
	FPS int
	// SegmentSeconds starts a new video segment, beginning with an IDR
	// frame, this often (default 30).
	SegmentSeconds int
	// BitrateKbps is the video's target bitrate (default 1500).
	BitrateKbps int
	// SyncEvery is how often the files are fsynced (default 1 s). Each line
	// is written with one write call as it happens; fsync bounds what a
	// power cut (not a crash of this process) could lose.
	SyncEvery time.Duration
	// BusBuffer is the recorder's bus subscription buffer (default 8192).
	BusBuffer int
	// Lifecycle, if set, ties the recorder to the control plane and the
	// stream through the appliance's lifecycle bus (see follow.go): it
	// learns the running episode from it, stops an episode's recording when
	// the episode ends, and announces its own state (the page's REC
	// marker). Without it the recorder records on its own.
	Lifecycle *lifecycle.Bus
}

func (o *Options) defaults() {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Settle == (screen.SettleOptions{}) {
		// Sampled every 20 ms, not image's 10: each sample is a full-screen
		// capture the X server must serve between the user's own requests.
		o.Settle = screen.SettleOptions{Quiet: 80 * time.Millisecond, Max: time.Second, Interval: 20 * time.Millisecond}
	}
	if o.InputQuiet <= 0 {
		o.InputQuiet = 100 * time.Millisecond
	}
	if o.FPS == 0 {
		o.FPS = 10
	}
	if o.SegmentSeconds <= 0 {
		o.SegmentSeconds = 30
	}
	if o.BitrateKbps <= 0 {
		o.BitrateKbps = 1500
	}
	if o.SyncEvery <= 0 {
		o.SyncEvery = time.Second
	}
	if o.BusBuffer <= 0 {
		o.BusBuffer = 8192
	}
	o.Thresholds = o.Thresholds.withDefaults()
}

// EpisodeInfo is what Start needs to know about an episode. Every field is
// optional.
type EpisodeInfo struct {
	// ID names the episode and its directory (made safe for a file name);
	// empty takes the control plane's running episode (Options.Lifecycle)
	// or a new id. The running episode's id records it under its task.
	ID          string `json:"episode_id,omitempty"`
	TaskID      string `json:"task_id,omitempty"`
	Instruction string `json:"instruction,omitempty"`
	// Seed and Params: the variant of the task, taken from the running
	// episode when the recording is tied to it (never from a request).
	Seed   *int64         `json:"-"`
	Params map[string]any `json:"-"`
	// Source is who is expected to act: human, agent or mixed. The steps
	// decide in the end: an episode with both has source mixed.
	Source string `json:"source,omitempty"`
	// RecordedBy is Meta.RecordedBy: set by the API from the door's
	// caller, never from the request body.
	RecordedBy string `json:"-"`
}

// Errors a caller can test for.
var (
	ErrRecording    = errors.New("already recording")
	ErrNotRecording = errors.New("not recording")
)

// invalidError is a request Start refuses as it is.
type invalidError string

func (e invalidError) Error() string { return string(e) }

// Recorder records episodes of one desktop: every event on its executor's
// bus, the person's input reduced to actions, observations and video. One
// episode is recorded at a time.
type Recorder struct {
	dir     string
	exec    *hci.Executor
	shooter *screen.Shooter
	capt    *screen.Capturer
	opt     Options
	log     *slog.Logger

	mu      sync.Mutex
	cur     *Episode
	last    *Meta
	metrics *metrics

	cp         *controlPlane
	unfollow   func()
	followDone chan struct{}
	// catchUp asks the follower to handle every lifecycle event already
	// published before it answers (by closing the channel it was sent).
	catchUp chan chan struct{}
}

// New returns a recorder writing episodes under dir (created if needed).
// Episodes in dir whose recorder died are repaired (marked incomplete).
func New(dir string, exec *hci.Executor, shooter *screen.Shooter, capt *screen.Capturer, opt Options) (*Recorder, error) {
	if exec == nil || shooter == nil || capt == nil {
		return nil, errors.New("record.New needs an executor, a shooter and a capturer")
	}
	if dir == "" {
		return nil, errors.New("record.New needs a directory for the episodes")
	}
	opt.defaults()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("episodes directory: %w", err)
	}
	r := &Recorder{dir: dir, exec: exec, shooter: shooter, capt: capt, opt: opt, log: opt.Logger.With("component", "record")}
	r.metrics = newMetrics(r)
	r.cp, r.unfollow, r.followDone, r.catchUp = newControlPlane(), func() {}, make(chan struct{}), make(chan chan struct{})
	if opt.Lifecycle != nil {
		var ch <-chan lifecycle.Event
		ch, r.unfollow = opt.Lifecycle.Subscribe(256)
		go r.follow(ch)
	} else {
		close(r.followDone)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("episodes directory: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if _, err := os.Stat(filepath.Join(p, MetaFile)); err != nil {
			continue
		}
		fixed, err := Repair(p)
		if err != nil {
			r.log.Warn("an episode could not be repaired", "dir", p, "err", err)
		} else if fixed {
			r.log.Warn("an episode's recorder had died: kept what was written and marked it incomplete", "dir", p)
		}
	}
	return r, nil
}

// Dir is where episodes are written.
func (r *Recorder) Dir() string { return r.dir }

// Episode is an episode being recorded.
type Episode struct {
	r    *Recorder
	id   string
	dir  string
	zero time.Time

	ctl       chan ctlMsg
	obsReq    chan struct{}
	obsRes    chan obsResult
	cancel    context.CancelFunc
	loopDone  chan struct{}
	obsDone   chan struct{}
	videoDone chan struct{}
	paused    atomic.Bool

	// Counters for Status.
	nEvents, nSteps, nShots, nFrames, nSegments atomic.Int64

	mu   sync.Mutex // meta
	meta Meta

	// Owned by the loop goroutine.
	events        <-chan hci.Event
	unsub         func()
	input, steps  *lines
	shots         *lines
	lock          *os.File
	red           *Reducer
	obs           []observation
	gcFrom        int
	pending       []pendingStep
	shotFiles     map[uint64]string // written observations by screen hash
	agent         agentShots
	unsubscribed  bool // finishing: no more screenshots can arrive from the bus
	lastSeq       uint64
	dropped       uint64
	sources       map[string]bool
	dialects      map[string]int // steps by via (Meta.Dialects)
	writeErr      error
	writeErrCount int

	// Owned by the video goroutine.
	frames *lines
}

type ctlMsg struct {
	kind    string // pause, resume, stop
	outcome *Outcome
	reply   chan error
}

type obsResult struct {
	shot screen.Shot
	err  error
}

// ID is the episode's id.
func (ep *Episode) ID() string { return ep.id }

// Dir is the episode's directory.
func (ep *Episode) Dir() string { return ep.dir }

// Start begins recording an episode.
func (r *Recorder) Start(ctx context.Context, info EpisodeInfo) (*Episode, error) {
	if err := r.caughtUp(ctx); err != nil {
		return nil, err
	}
	ep, err := r.start(ctx, info)
	if err == nil {
		r.notify()
	}
	return ep, err
}

func (r *Recorder) start(ctx context.Context, info EpisodeInfo) (*Episode, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur != nil {
		return nil, fmt.Errorf("%w episode %s: stop it first", ErrRecording, r.cur.id)
	}
	if r.opt.Lifecycle != nil {
		var err error
		if info, err = r.cp.tie(info); err != nil {
			return nil, err
		}
	}
	switch info.Source {
	case "", "human", "agent", "mixed":
	default:
		return nil, invalidError(fmt.Sprintf("source %s is not known: use human, agent or mixed (or leave it out)", wire.Quote(info.Source)))
	}
	if len(info.ID) > 255 {
		return nil, invalidError(fmt.Sprintf("episode id %s is %d bytes long: at most 255", wire.Quote(info.ID), len(info.ID)))
	}
	if len(info.TaskID) > 255 {
		return nil, invalidError(fmt.Sprintf("task id %s is %d bytes long: at most 255", wire.Quote(info.TaskID), len(info.TaskID)))
	}
	if info.ID == "" {
		info.ID = newID()
	}
	dir, err := r.episodeDir(info.ID)
	if err != nil {
		return nil, err
	}
	ep := &Episode{
		r: r, id: info.ID, dir: dir,
		ctl: make(chan ctlMsg), obsReq: make(chan struct{}, 1), obsRes: make(chan obsResult),
		loopDone: make(chan struct{}), obsDone: make(chan struct{}), videoDone: make(chan struct{}),
		red: NewReducer(r.exec.Space(), r.opt.Thresholds), sources: map[string]bool{}, shotFiles: map[uint64]string{}, agent: newAgentShots(),
	}
	if err := ep.open(ctx, info); err != nil {
		ep.closeFiles()
		os.RemoveAll(dir)
		return nil, err
	}
	lctx, cancel := context.WithCancel(context.Background())
	ep.cancel = cancel
	go ep.loop(lctx)
	go ep.observer(lctx)
	if r.opt.FPS > 0 {
		go ep.video(lctx)
	} else {
		close(ep.videoDone)
	}
	r.cur = ep
	r.log.Info("recording", "episode", ep.id, "dir", dir, "task", info.TaskID)
	return ep, nil
}

// episodeDir makes a new directory for id under the recorder's directory.
func (r *Recorder) episodeDir(id string) (string, error) {
	base := safeName(id)
	for i := 1; ; i++ {
		name := base
		if i > 1 {
			name = fmt.Sprintf("%s-%d", base, i)
		}
		p := filepath.Join(r.dir, name)
		err := os.Mkdir(p, 0o755)
		if err == nil {
			return p, nil
		}
		if !errors.Is(err, os.ErrExist) || i > 1000 {
			return "", fmt.Errorf("make the episode directory: %w", err)
		}
	}
}

// safeName keeps letters, digits, '.', '-' and '_' of an id for a
// directory name.
func safeName(id string) string {
	var b strings.Builder
	for _, c := range id {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
			b.WriteRune(c)
		default:
			b.WriteByte('_')
		}
	}
	s := strings.Trim(b.String(), ".")
	if s == "" {
		s = "episode"
	}
	if len(s) > 120 {
		s = s[:120]
	}
	return s
}

func newID() string {
	var b [4]byte
	rand.Read(b[:])
	return time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

// open writes the episode's files, subscribes to the bus and takes the
// first observation.
func (ep *Episode) open(ctx context.Context, info EpisodeInfo) error {
	r := ep.r
	var err error
	if ep.lock, err = lockEpisode(ep.dir); err != nil {
		return err
	}
	if err := os.Mkdir(filepath.Join(ep.dir, ShotsDir), 0o755); err != nil {
		return err
	}
	if r.opt.FPS > 0 {
		if err := os.Mkdir(filepath.Join(ep.dir, VideoDir), 0o755); err != nil {
			return err
		}
	}
	for _, f := range []struct {
		dst  **lines
		name string
	}{{&ep.input, InputFile}, {&ep.steps, StepsFile}, {&ep.shots, ShotsFile}} {
		if *f.dst, err = createLines(filepath.Join(ep.dir, f.name)); err != nil {
			return fmt.Errorf("create %s: %w", f.name, err)
		}
	}
	if r.opt.FPS > 0 {
		if ep.frames, err = createLines(filepath.Join(ep.dir, FramesFile)); err != nil {
			return fmt.Errorf("create %s: %w", FramesFile, err)
		}
	}
	space := r.exec.Space()
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	ep.zero = time.Now()
	m := Meta{
		SchemaVersion: SchemaVersion, ID: ep.id, Source: info.Source, RecordedBy: info.RecordedBy,
		Screen: Size{space.ScreenW, space.ScreenH}, Model: Size{space.ModelW, space.ModelH}, Pointer: ep.r.shooter.DrawsPointer(), Session: ep.r.opt.Session, Animations: ep.r.opt.Animations,
		Clock:  Clock{Wall: ep.zero, MonotonicNS: ts.Nano()},
		Status: StatusRecording, StartedAt: ep.zero,
	}
	if info.TaskID != "" || info.Instruction != "" {
		m.Task = &TaskInfo{ID: info.TaskID, Instruction: info.Instruction, Seed: info.Seed, Params: info.Params}
	}
	if r.opt.FPS > 0 {
		m.Video = &VideoInfo{Codec: "h264", Width: space.ScreenW &^ 1, Height: space.ScreenH &^ 1, FPS: r.opt.FPS,
			SegmentSeconds: r.opt.SegmentSeconds, BitrateKbps: r.opt.BitrateKbps}
	}
	ep.meta = m
	if err := writeMeta(ep.dir, &m); err != nil {
		return err
	}
	ep.events, ep.unsub = r.exec.Bus().Subscribe(r.opt.BusBuffer)
	shot, err := r.shooter.Shot(ctx)
	if err != nil {
		ep.unsub()
		return fmt.Errorf("take the first observation: %w", err)
	}
	ep.observed(obsResult{shot: shot})
	return nil
}

func (ep *Episode) closeFiles() {
	for _, l := range []*lines{ep.input, ep.steps, ep.shots} {
		if err := l.close(); err != nil {
			ep.fail(err)
		}
	}
	if ep.lock != nil {
		ep.lock.Close()
	}
}

// now is the time on the episode's clock.
func (ep *Episode) now() float64 { return secs(time.Since(ep.zero)) }

// fail remembers the first write error; recording goes on, and the episode
// ends incomplete saying why.
func (ep *Episode) fail(err error) {
	if err == nil {
		return
	}
	ep.writeErrCount++
	if ep.writeErr == nil {
		ep.writeErr = err
		ep.r.log.Error("recording: writing the episode failed; it will be marked incomplete", "episode", ep.id, "err", err)
	}
}

func (ep *Episode) loop(ctx context.Context) {
	defer close(ep.loopDone)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	syncT := time.NewTicker(ep.r.opt.SyncEvery)
	defer syncT.Stop()
	for {
		select {
		case ev, ok := <-ep.events:
			if !ok {
				ep.events = nil // the executor closed: wait for Stop
				continue
			}
			ep.handle(ev)
		case <-tick.C:
			ep.emit(ep.red.Tick(ep.now()))
		case res := <-ep.obsRes:
			ep.observed(res)
		case <-syncT.C:
			for _, l := range []*lines{ep.input, ep.steps, ep.shots} {
				ep.fail(l.sync())
			}
		case m := <-ep.ctl:
			switch m.kind {
			case "pause", "resume":
				m.reply <- ep.setPaused(m.kind == "pause")
			case "stop":
				m.reply <- ep.finish(ctx, m.outcome)
				return
			}
		}
	}
}

// handle records one bus event.
func (ep *Episode) handle(ev hci.Event) {
	if ep.lastSeq != 0 && ev.Seq > ep.lastSeq+1 {
		ep.dropped += ev.Seq - ep.lastSeq - 1
	}
	ep.lastSeq = ev.Seq
	if ep.paused.Load() {
		return
	}
	if ev.Kind == hci.KindObservation {
		ep.returnedShot(ev)
		return
	}
	e := fromBus(ev, ep.zero, ep.input.n)
	ep.agent.acted(ev, e.I)
	ep.mu.Lock()
	if ep.meta.Clock.ExecutorNS == nil {
		x := int64(ev.Mono) - int64(ev.Time.Sub(ep.zero))
		ep.meta.Clock.ExecutorNS = &x
	}
	ep.mu.Unlock()
	if err := ep.input.write(e); err != nil {
		ep.fail(err)
		return
	}
	ep.nEvents.Add(1)
	ep.emit(ep.red.Add(e))
	ep.requestObservation()
}

func (ep *Episode) requestObservation() {
	select {
	case ep.obsReq <- struct{}{}:
	default:
	}
}

// emit numbers steps, links them to observations and writes them once their
// observation after is there.
func (ep *Episode) emit(steps []Step) {
	for _, st := range steps {
		st.Step = int(ep.nSteps.Load()) + len(ep.pending)
		ep.pending = append(ep.pending, pendingStep{Step: st, before: ep.beforeIdx(st.TStart), seq: ep.agent.seqOf(st)})
		ep.requestObservation()
	}
	ep.resolve(false)
}

// pendingStep is a step waiting for its observation after.
type pendingStep struct {
	Step
	before int    // observation index, -1 for none
	seq    uint64 // an agent's action: its bus seq (agentshots.go); 0 otherwise
}

// observation is one observation; its PNG is kept in memory until a step
// refers to it (then it is written) or none can any more (then it is
// dropped), so a person typing in bursts does not leave a file per key.
type observation struct {
	Shot
	data    []byte
	written bool
}

// resolve writes pending steps, in order, whose observation after exists;
// with force, all of them.
func (ep *Episode) resolve(force bool) {
	for len(ep.pending) > 0 {
		p := &ep.pending[0]
		after, own, ok := ep.afterFor(p, force)
		if !ok {
			break
		}
		st := p.Step
		st.Before = ep.materialize(ep.beforeFor(p))
		st.After, st.AfterOwn = ep.materialize(after), own
		ep.agent.done(p.seq)
		if err := ep.steps.write(&st); err != nil {
			ep.fail(err)
		}
		ep.sources[sourceKind(st.Source)] = true
		if st.Via != "" {
			if ep.dialects == nil {
				ep.dialects = map[string]int{}
			}
			ep.dialects[st.Via]++
		}
		ep.nSteps.Add(1)
		ep.pending = ep.pending[1:]
	}
	ep.gc()
}

func sourceKind(s hci.Source) string {
	if isHuman(s) {
		return "human"
	}
	return string(s)
}

// beforeIdx is the last observation captured at or before t, or -1.
func (ep *Episode) beforeIdx(t float64) int {
	for i := len(ep.obs) - 1; i >= 0; i-- {
		if ep.obs[i].T <= t {
			return i
		}
	}
	return -1
}

// afterIdx is the first observation captured at or after t, or -1.
func (ep *Episode) afterIdx(t float64) int {
	if n := len(ep.obs); n == 0 || ep.obs[n-1].T < t {
		return -1
	}
	for i := len(ep.obs) - 1; i >= 0; i-- {
		if ep.obs[i].T < t {
			return i + 1
		}
	}
	return 0
}

// materialize writes observation i (once; an identical screen shares the
// file of its first observation) and returns its file, "" for none.
func (ep *Episode) materialize(i int) string {
	if i < 0 || i >= len(ep.obs) {
		return ""
	}
	o := &ep.obs[i]
	if o.written {
		return o.File
	}
	if o.data == nil {
		return "" // dropped: cannot happen for a step's own observations
	}
	name, ok := ep.shotFiles[o.Hash]
	if !ok {
		name = filepath.Join(ShotsDir, fmt.Sprintf("%06d.png", len(ep.shotFiles)))
		if err := writeFileAtomic(filepath.Join(ep.dir, name), o.data); err != nil {
			ep.fail(err)
			return ""
		}
		ep.shotFiles[o.Hash] = name
	}
	o.File, o.written, o.data = name, true, nil
	if err := ep.shots.write(o.Shot); err != nil {
		ep.fail(err)
	}
	ep.nShots.Add(1)
	return name
}

// gcMargin bounds how late an action's event may arrive after it started
// (wait and hold_key last up to 100 s): observations this recent are kept.
const gcMargin = 2 * time.Minute

// gc drops the PNGs of observations no step can refer to any more: those
// before the last one captured before anything that may still become a step.
func (ep *Episode) gc() {
	horizon := ep.now() - gcMargin.Seconds()
	if len(ep.pending) > 0 {
		horizon = min(horizon, ep.pending[0].TStart)
	}
	if t, ok := ep.red.PendingStart(); ok {
		horizon = min(horizon, t)
	}
	k := ep.beforeIdx(horizon)
	for ; ep.gcFrom < k; ep.gcFrom++ {
		ep.obs[ep.gcFrom].data = nil
	}
}

// observed keeps an observation until a step needs it.
func (ep *Episode) observed(res obsResult) {
	if res.err != nil {
		if !errors.Is(res.err, context.Canceled) {
			ep.r.log.Warn("recording: an observation failed", "episode", ep.id, "err", res.err)
		}
		return
	}
	s := res.shot
	sh := Shot{N: len(ep.obs), T: secs(s.Captured.Sub(ep.zero)), W: s.Width, H: s.Height, Hash: s.Hash}
	if n := len(ep.obs); n > 0 && sh.T < ep.obs[n-1].T {
		sh.T = ep.obs[n-1].T // keep them in time order
	}
	// An unchanged screen comes back from the shooter as the same bytes:
	// holding it twice costs nothing.
	ep.obs = append(ep.obs, observation{Shot: sh, data: s.Data})
	ep.resolve(false)
}

func (ep *Episode) setPaused(p bool) error {
	if ep.paused.Load() == p {
		return nil
	}
	// Whatever arrived before the pause was asked for is recorded first.
	ep.drain()
	t := ep.now()
	kind := KindResume
	if p {
		kind = KindPause
	}
	e := Event{I: ep.input.n, T: t, Kind: kind}
	if err := ep.input.write(e); err != nil {
		ep.fail(err)
	}
	ep.nEvents.Add(1)
	ep.emit(ep.red.Add(e))
	ep.paused.Store(p)
	ep.mu.Lock()
	if p {
		ep.meta.Pauses = append(ep.meta.Pauses, Pause{Start: t})
	} else if n := len(ep.meta.Pauses); n > 0 {
		ep.meta.Pauses[n-1].End = &t
	}
	m := ep.meta
	ep.mu.Unlock()
	return writeMeta(ep.dir, &m)
}

// drain records the events already published.
func (ep *Episode) drain() {
	for {
		select {
		case ev, ok := <-ep.events:
			if !ok {
				ep.events = nil
				return
			}
			ep.handle(ev)
		default:
			return
		}
	}
}

// finish ends the recording: the last events, the steps still being built,
// a last observation, the files and episode.json.
func (ep *Episode) finish(ctx context.Context, outcome *Outcome) error {
	ep.drain()
	ep.unsub()
	ep.drain()
	ep.unsubscribed = true
	ep.emit(ep.red.Flush())
	if len(ep.pending) > 0 {
		// Wait for the observation after the last steps, a little.
		ep.requestObservation()
		wait := time.NewTimer(ep.r.opt.Settle.Max + 3*time.Second)
	waiting:
		for len(ep.pending) > 0 {
			select {
			case res := <-ep.obsRes:
				ep.observed(res)
				ep.requestObservation()
			case <-wait.C:
				break waiting
			case <-ctx.Done():
				break waiting
			}
		}
		wait.Stop()
	}
	ep.resolve(true)
	ep.cancel()
	<-ep.obsDone
	<-ep.videoDone
	ep.closeFiles()

	end := time.Now()
	ep.mu.Lock()
	m := ep.meta
	ep.mu.Unlock()
	m.Status = StatusComplete
	if outcome != nil && outcome.Interrupted != "" {
		m.Status = StatusInterrupted
	}
	m.EndedAt = &end
	m.DurationS = secs(end.Sub(ep.zero))
	if n := len(m.Pauses); n > 0 && m.Pauses[n-1].End == nil {
		m.Pauses[n-1].End = &m.DurationS
	}
	m.Outcome = outcome
	m.Source = episodeSource(m.Source, ep.sources)
	m.Dialects = ep.dialects
	m.Counts = Counts{Events: int(ep.nEvents.Load()), Steps: int(ep.nSteps.Load()), Shots: int(ep.nShots.Load()),
		Frames: int(ep.nFrames.Load()), Segments: int(ep.nSegments.Load()), DroppedEvents: ep.dropped}
	if ep.writeErr != nil {
		m.Status = StatusIncomplete
		m.Error = fmt.Sprintf("%d writes failed, the first: %v", ep.writeErrCount, ep.writeErr)
	}
	if ep.dropped > 0 {
		ep.r.log.Warn("recording: the recorder fell behind and lost bus events", "episode", ep.id, "dropped", ep.dropped)
	}
	err := writeMeta(ep.dir, &m)
	os.Remove(filepath.Join(ep.dir, lockFile))
	ep.mu.Lock()
	ep.meta = m
	ep.mu.Unlock()
	return err
}

// episodeSource is human, agent or mixed from what was declared and who
// acted.
func episodeSource(declared string, acted map[string]bool) string {
	kinds := map[string]bool{}
	for k := range acted {
		if k == "human" || k == "agent" {
			kinds[k] = true
		}
	}
	switch declared {
	case "human", "agent":
		kinds[declared] = true
	case "mixed":
		return "mixed"
	}
	switch {
	case len(kinds) > 1:
		return "mixed"
	case kinds["human"]:
		return "human"
	case kinds["agent"]:
		return "agent"
	}
	for k := range acted {
		return k // replay or script alone
	}
	return "human"
}

// observer takes an observation once input has paused and the screen has
// settled, each time the loop asks.
func (ep *Episode) observer(ctx context.Context) {
	defer close(ep.obsDone)
	opt := ep.r.opt
	for {
		select {
		case <-ctx.Done():
			return
		case <-ep.obsReq:
		}
		deadline := time.Now().Add(time.Second)
	debounce:
		for time.Now().Before(deadline) {
			t := time.NewTimer(min(opt.InputQuiet, time.Until(deadline)))
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-ep.obsReq:
				t.Stop()
			case <-t.C:
				break debounce
			}
		}
		if ep.paused.Load() {
			continue
		}
		var res obsResult
		if _, _, err := ep.r.capt.Settle(ctx, opt.Settle); err != nil {
			res.err = err
		} else {
			res.shot, res.err = ep.r.shooter.Shot(ctx)
		}
		select {
		case ep.obsRes <- res:
		case <-ctx.Done():
			return
		}
	}
}

// control sends a message to the episode's loop.
func (ep *Episode) control(ctx context.Context, m ctlMsg) error {
	m.reply = make(chan error, 1)
	select {
	case ep.ctl <- m:
	case <-ep.loopDone:
		return fmt.Errorf("%w: episode %s has ended", ErrNotRecording, ep.id)
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-m.reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *Recorder) current() (*Episode, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur == nil {
		return nil, fmt.Errorf("%w: start a recording first", ErrNotRecording)
	}
	return r.cur, nil
}

// Pause stops recording input, observations and video until Resume: a
// privacy pause, marked in input.jsonl and episode.json.
func (r *Recorder) Pause(ctx context.Context) error {
	ep, err := r.current()
	if err != nil {
		return err
	}
	if err := ep.control(ctx, ctlMsg{kind: "pause"}); err != nil {
		return err
	}
	r.notify()
	return nil
}

// Resume ends a pause.
func (r *Recorder) Resume(ctx context.Context) error {
	ep, err := r.current()
	if err != nil {
		return err
	}
	if err := ep.control(ctx, ctlMsg{kind: "resume"}); err != nil {
		return err
	}
	r.notify()
	return nil
}

// Stop ends the recording and writes outcome (nil: unscored) into
// episode.json, and returns it.
func (r *Recorder) Stop(ctx context.Context, outcome *Outcome) (*Meta, error) {
	r.mu.Lock()
	ep := r.cur
	r.mu.Unlock()
	if ep == nil {
		return nil, fmt.Errorf("%w: nothing to stop", ErrNotRecording)
	}
	err := ep.control(ctx, ctlMsg{kind: "stop", outcome: outcome})
	if err != nil && errors.Is(err, ErrNotRecording) {
		return nil, err
	}
	<-ep.loopDone
	ep.mu.Lock()
	m := ep.meta
	ep.mu.Unlock()
	r.mu.Lock()
	if r.cur == ep {
		r.cur = nil
		r.last = &m
	}
	r.mu.Unlock()
	r.metrics.stopped(m)
	r.log.Info("recording stopped", "episode", m.ID, "dir", ep.dir, "steps", m.Counts.Steps, "events", m.Counts.Events,
		"frames", m.Counts.Frames, "status", m.Status)
	r.notify()
	return &m, err
}

// StopEpisode stops the recording if it is of episode id, with outcome; it
// is what the control plane's end-of-episode hook calls.
func (r *Recorder) StopEpisode(ctx context.Context, id string, outcome *Outcome) (*Meta, error) {
	r.mu.Lock()
	ep := r.cur
	r.mu.Unlock()
	if ep == nil || ep.id != id {
		return nil, fmt.Errorf("%w episode %s", ErrNotRecording, id)
	}
	return r.Stop(ctx, outcome)
}

// Status is what the recorder is doing.
type Status struct {
	Recording bool           `json:"recording"`
	Paused    bool           `json:"paused"`
	Dir       string         `json:"dir,omitempty"`
	Episode   *EpisodeStatus `json:"episode,omitempty"`
	// Last is the last episode recorded, once one has been stopped.
	Last *Meta `json:"last,omitempty"`
}

// EpisodeStatus describes the episode being recorded.
type EpisodeStatus struct {
	ID          string    `json:"episode_id"`
	Dir         string    `json:"dir,omitempty"`
	TaskID      string    `json:"task_id,omitempty"`
	Instruction string    `json:"instruction,omitempty"`
	RecordedBy  string    `json:"recorded_by,omitempty"`
	StartedAt   time.Time `json:"started_at"`
	ElapsedS    float64   `json:"elapsed_s"`
	Events      int       `json:"events"`
	Steps       int       `json:"steps"`
	Shots       int       `json:"shots"`
	Frames      int       `json:"frames"`
}

// Status reports the recording in progress, if any, and the last one.
func (r *Recorder) Status() Status {
	r.mu.Lock()
	ep, last := r.cur, r.last
	r.mu.Unlock()
	st := Status{Dir: r.dir, Last: last}
	if ep == nil {
		return st
	}
	st.Recording, st.Paused = true, ep.paused.Load()
	ep.mu.Lock()
	m := ep.meta
	ep.mu.Unlock()
	es := &EpisodeStatus{ID: ep.id, Dir: ep.dir, RecordedBy: m.RecordedBy, StartedAt: m.StartedAt, ElapsedS: ep.now(),
		Events: int(ep.nEvents.Load()), Steps: int(ep.nSteps.Load()), Shots: int(ep.nShots.Load()), Frames: int(ep.nFrames.Load())}
	if m.Task != nil {
		es.TaskID, es.Instruction = m.Task.ID, m.Task.Instruction
	}
	st.Episode = es
	return st
}

// Close stops a recording in progress (unscored) and stops following the
// lifecycle bus.
func (r *Recorder) Close() error {
	r.unfollow()
	<-r.followDone
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := r.Stop(ctx, nil)
	if errors.Is(err, ErrNotRecording) {
		return nil
	}
	return err
}
