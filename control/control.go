// Package control is deskenv's control plane: it runs episodes (a reset puts
// the desktop back into its baseline, package baseline, and sets up a task if
// one is asked for; the end scores the episode with the task's checker),
// keeps their history and statistics, exports its Prometheus series, and
// speaks both a native REST API and OpenEnv's environment-server protocol
// (HTTP and /ws). Its routes say which role may call them; the appliance's
// front door (package auth) checks. Nothing here is reachable by an agent:
// agents get MCP (/mcp) and nothing else.
//
// Errors follow one rule, as in package baseline: an error that wraps
// another starts with the operation that failed, in lower case ("set up
// task t: ...", "wait for another reset to finish: ..."); the innermost says
// what is wrong and, where it helps, what to do ("unknown task "x": known
// tasks are ..."); none ends with a period. The texts of OpenEnv's wire
// shapes (pydantic's and OpenEnv's own messages) keep OpenEnv's wording, so
// its clients read what they expect.
package control

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"log/slog"
	mrand "math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/deskenv/deskenv/baseline"
	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/internal/wire"
	"github.com/deskenv/deskenv/lifecycle"
	"github.com/deskenv/deskenv/screen"
	"github.com/deskenv/deskenv/task"
)

// Mode says whether the world may be reset.
type Mode string

const (
	// ModeSim turns reset, state and tasks on: training and evaluation.
	ModeSim Mode = "sim"
	// ModeProd turns them off: an agent working on a real desktop, which
	// nobody may reset under it.
	ModeProd Mode = "prod"
)

// ToolInfo describes one MCP tool.
type ToolInfo struct {
	Name        string
	Description string
	InputSchema json.RawMessage
}

// ToolResult is the outcome of a tool call, as MCP returns it.
type ToolResult struct {
	// Content is the MCP content blocks, each a JSON object such as
	// {"type":"text","text":"..."} or {"type":"image","data":"...","mimeType":"image/png"}.
	Content []json.RawMessage
	// Structured is the tool's structuredContent, if any.
	Structured any
	// IsError marks a call the tool itself failed (bad arguments, an action
	// that could not run); the text content says why.
	IsError bool
}

// ErrUnknownTool is wrapped by Tools.CallTool for a name no tool has.
var ErrUnknownTool = errors.New("unknown tool")

// Tools is the MCP tool surface the OpenEnv face (step, /ws mcp messages)
// calls into. cmd wires the MCP server to it; control never imports it.
// Calls count as agent actions: they run with source agent.
type Tools interface {
	ListTools(ctx context.Context) ([]ToolInfo, error)
	// CallTool runs tool name with a JSON object of arguments. An unknown
	// name is an error wrapping ErrUnknownTool; a tool's own failure is a
	// result with IsError set.
	CallTool(ctx context.Context, name string, args json.RawMessage) (ToolResult, error)
}

// Config is the control plane's settings; New takes its dependencies.
type Config struct {
	Mode Mode
	// Lifecycle, if set, is the appliance's lifecycle bus, where the control
	// plane announces episodes and X server restarts and takes requests to
	// end an episode (lifecycle.go). Without it the control plane runs alone.
	Lifecycle *lifecycle.Bus
	// Settle is how the screen must settle before the first observation.
	Settle screen.SettleOptions
	Logger *slog.Logger
	// Home is the desktop user's home directory, restored from its
	// baseline on every reset; empty means the display's Config().Home.
	Home string
	// BaselineDir holds the baseline copy of Home; empty means a temporary
	// directory removed by Close. When it already holds files they are the
	// baseline (an image can ship one).
	BaselineDir string
	// NoHomeRestore leaves home alone on reset.
	NoHomeRestore bool
	// Ports are the serve steps' listeners shared with the process's other
	// desktops (task.Ports); nil: this desktop's tasks listen on their own.
	Ports *task.Ports

	// Name, Description and Version are served at /metadata.
	Name, Description, Version string
	// MaxSessions bounds concurrent /ws sessions; the desktop is one
	// environment, so the default is 1.
	MaxSessions int
	// WindowWait bounds the wait for the session's windows after a reset
	// (default 10s).
	WindowWait time.Duration
	// History is how many finished episodes are kept (default 1000).
	History int
	// ResetTimeout bounds a reset (ending the last episode, the clean-up,
	// the task's setup, the first observation); default 3 minutes. A reset
	// runs to its end even when its caller goes away, so this, not the
	// caller's context, is what stops one that hangs.
	ResetTimeout time.Duration
	// Isolation, if set, is /health's "isolation" detail: whether the
	// session runs as a user of its own, and if not why (cmd says).
	Isolation any
	// ResetGuard, if set, is asked before a reset through POST /api/reset
	// with the request's context; an error refuses the reset with 409 and
	// its words. The appliance asks the recorder, so an annotator's reset
	// cannot cut short a recording someone else is making.
	ResetGuard func(ctx context.Context) error
}

// Control is the control plane of one desktop.
type Control struct {
	cfg     Config
	log     *slog.Logger
	d       *display.Display
	exec    *hci.Executor
	capt    *screen.Capturer
	shoot   *screen.Shooter
	tools   Tools             // nil: no tools are wired
	base    *baseline.Desktop // nil in prod mode: nothing is restored
	metrics *metrics
	tasks   map[string]*task.Task
	taskIDs []string

	resetSem chan struct{} // one reset or episode end at a time

	// stopCtx ends with Close: the X server watch (watchServer) stops.
	stopCtx   context.Context
	stop      context.CancelFunc
	watchDone chan struct{}

	mu       sync.Mutex
	current  *episodeRun
	history  []Episode // finished, oldest first
	finished int       // all finished, including those dropped from history
	resetDur []float64 // seconds, last History resets
	sessions int       // open /ws sessions
	lastEnv  *task.DisplayEnv

	busCancel func()
	busDone   chan struct{}

	// testHookStarted, set by tests only, runs inside a reset (started).
	testHookStarted func(Episode)
	unfollow        func()
	followDone      chan struct{}

	busCh <-chan hci.Event
	// counted is the sequence number of the last bus event counted.
	counted   atomic.Uint64
	closeOnce sync.Once
}

// episodeRun is the running episode and what its evaluation needs.
type episodeRun struct {
	ep   Episode
	task *task.Task
	env  *seededEnv // nil without a task
	// gen is the display's X server generation the episode was set up
	// on; a restarted server has another, and the episode is interrupted.
	gen uint64
}

// Episode is one run from a reset to its end.
type Episode struct {
	ID          string `json:"episode_id"`
	TaskID      string `json:"task_id,omitempty"`
	Instruction string `json:"instruction,omitempty"`
	// Seed is the reset's seed: the one asked for, or one deskenv drew.
	Seed *int64 `json:"seed,omitempty"`
	// Params are the values the seed chose for the task's parameters (an
	// empty object for a task without any; absent without a task).
	Params    map[string]any `json:"params,omitempty"`
	Status    string         `json:"status"` // running, ended, interrupted
	StartedAt time.Time      `json:"started_at"`
	EndedAt   *time.Time     `json:"ended_at,omitempty"`
	// DurationS is the time from the end of the reset to the end of the
	// episode (so far, while running).
	DurationS  float64 `json:"duration_s"`
	ResetS     float64 `json:"reset_s"`
	Steps      int     `json:"step_count"`
	AgentSteps int     `json:"agent_steps"`
	HumanSteps int     `json:"human_steps"`
	// Reward and Success are set when a task scored the episode; an
	// episode without a task is unscored.
	Reward    *float64      `json:"reward"`
	Success   *bool         `json:"success"`
	Reasons   []task.Reason `json:"reasons,omitempty"`
	EndReason string        `json:"end_reason,omitempty"` // ended, next_reset, closed, interrupted
	Error     string        `json:"error,omitempty"`      // the evaluator failed
	// Interruption says why an interrupted episode could not go on (the X
	// server restarted under it); such an episode is unscored.
	Interruption string `json:"interruption,omitempty"`
	// Observation is the first observation; only the reset's answer has it.
	Observation *Observation `json:"observation,omitempty"`
	// Reset says what the reset did; only the reset's answer has it.
	Reset *ResetReport `json:"reset,omitempty"`
}

// Observation is a screenshot as the agent sees it (model space).
type Observation struct {
	Type   string `json:"type"` // "image", as MCP image content
	Data   []byte `json:"data"` // base64 in JSON
	MIME   string `json:"mimeType"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
}

// ResetReport breaks a reset's time down: the baseline's restore, and the
// control plane's own steps around it.
type ResetReport struct {
	baseline.Report
	Release time.Duration `json:"release_ns"`
	Setup   time.Duration `json:"setup_ns"`
	Settle  time.Duration `json:"settle_ns"`
	// Shot is zero: the first observation is the frame the settle ended
	// on, taken within Settle (the field stays for clients that read it).
	Shot  time.Duration `json:"shot_ns"`
	Total time.Duration `json:"total_ns"`
}

// ResetRequest asks for a reset, optionally into a task and with a seed.
type ResetRequest struct {
	TaskID string `json:"task_id,omitempty"`
	Seed   *int64 `json:"seed,omitempty"`
	// EpisodeID names the new episode; empty means a random id.
	EpisodeID string `json:"episode_id,omitempty"`
}

// Errors a caller can test for.
var (
	ErrUnknownTask    = errors.New("unknown task")
	ErrUnknownEpisode = errors.New("unknown episode")
	ErrProdMode       = errors.New("not available in prod mode")
	ErrClosed         = errors.New("control is closed")
	// ErrResetting refuses the agent's and people's input while a reset
	// runs: an action meant for the ending episode must not land in the
	// next one's first observation.
	ErrResetting = errors.New("the desktop is being reset: act again once the new episode has started")
)

// New builds the control plane of the desktop d, which ex drives and capt
// and shoot capture: in sim mode it captures the desktop's baseline (the
// session's windows, X state and home; so call it once the desktop has
// started), and it starts counting actions from the executor's bus. tasks
// are what a reset may set up (none: resets into no task only); tools are
// the MCP tools the OpenEnv face calls (nil: /step and /ws answer that no
// tools are wired).
func New(d *display.Display, ex *hci.Executor, capt *screen.Capturer, shoot *screen.Shooter, tasks []*task.Task, tools Tools, cfg Config) (*Control, error) {
	if d == nil || ex == nil || capt == nil || shoot == nil {
		return nil, errors.New("new control plane: a display, an executor, a capturer and a shooter are all required")
	}
	if err := cfg.fill(d); err != nil {
		return nil, err
	}
	c := &Control{
		cfg:      cfg,
		log:      cfg.Logger.With("component", "control"),
		d:        d,
		exec:     ex,
		capt:     capt,
		shoot:    shoot,
		tools:    tools,
		tasks:    map[string]*task.Task{},
		resetSem: make(chan struct{}, 1),
	}
	c.metrics = newMetrics(c)
	if err := c.addTasks(tasks); err != nil {
		return nil, err
	}
	if cfg.Mode == ModeSim {
		ctx, cancel := context.WithTimeout(context.Background(), cfg.WindowWait+30*time.Second)
		defer cancel()
		var err error
		c.base, err = baseline.Capture(ctx, d, baseline.Config{Home: cfg.Home, Dir: cfg.BaselineDir, NoHome: cfg.NoHomeRestore,
			WindowWait: cfg.WindowWait, Logger: c.log})
		if err != nil {
			return nil, fmt.Errorf("new control plane: %w", err)
		}
	}
	c.start()
	return c, nil
}

// fill checks the mode and puts in the defaults the documentation of
// Config's fields promises.
func (cfg *Config) fill(d *display.Display) error {
	switch cfg.Mode {
	case "":
		cfg.Mode = ModeSim
	case ModeSim, ModeProd:
	default:
		return fmt.Errorf("new control plane: mode %q is not known: use sim or prod", cfg.Mode)
	}
	if cfg.Home == "" {
		cfg.Home = d.Config().Home
	}
	if cfg.Description == "" {
		cfg.Description = "A Linux desktop (X11) for computer-use agents: MCP tools for screen, keyboard and mouse; reset into tasks scored by checkers the agent never sees."
	}
	if cfg.Settle == (screen.SettleOptions{}) {
		cfg.Settle = screen.SettleOptions{Quiet: 80 * time.Millisecond, Max: 2 * time.Second}
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	cfg.Name = cmp.Or(cfg.Name, "deskenv")
	cfg.MaxSessions = positiveOr(cfg.MaxSessions, 1)
	cfg.WindowWait = positiveOr(cfg.WindowWait, 10*time.Second)
	cfg.History = positiveOr(cfg.History, 1000)
	cfg.ResetTimeout = positiveOr(cfg.ResetTimeout, 3*time.Minute)
	return nil
}

// positiveOr is v, or def when v is not positive.
func positiveOr[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// addTasks indexes tasks by id, refusing two with one id.
func (c *Control) addTasks(tasks []*task.Task) error {
	for _, t := range tasks {
		if t == nil {
			continue
		}
		if _, dup := c.tasks[t.ID]; dup {
			return fmt.Errorf("new control plane: task id %q is used by two tasks: ids must be unique", t.ID)
		}
		c.tasks[t.ID] = t
		c.taskIDs = append(c.taskIDs, t.ID)
	}
	sort.Strings(c.taskIDs)
	return nil
}

// start subscribes to the executor's bus, to count steps, and watches the
// X server, to interrupt an episode whose server went away.
func (c *Control) start() {
	bus := c.exec.Bus()
	c.busCh, c.busCancel = bus.Subscribe(4096)
	c.counted.Store(bus.Seq())
	c.busDone = make(chan struct{})
	go c.countEvents()
	c.stopCtx, c.stop = context.WithCancel(context.Background())
	c.watchDone = make(chan struct{})
	go c.watchServer()
	c.startFollowing()
}

// Mode is the mode the control plane runs in.
func (c *Control) Mode() Mode { return c.cfg.Mode }

// Baseline is the desktop's clean state every reset restores, nil in prod
// mode.
func (c *Control) Baseline() *baseline.Desktop { return c.base }

// BaselineWindows are the session's windows that every reset brings back
// (none in prod mode).
func (c *Control) BaselineWindows() []baseline.Window {
	if c.base == nil {
		return nil
	}
	return c.base.Windows()
}

// countEvents turns the executor's bus into steps and metrics.
func (c *Control) countEvents() {
	defer close(c.busDone)
	for ev := range c.busCh {
		c.count(ev)
		// Events arrive in order, but the store at start-up may be ahead
		// of the first few.
		if ev.Seq > c.counted.Load() {
			c.counted.Store(ev.Seq)
		}
	}
}

func (c *Control) count(ev hci.Event) {
	c.countScreenshot(ev)
	// A script's actions are the agent's (run_script); replays and the
	// control plane's own releases are nobody's steps.
	agent := ev.Source == hci.SourceAgent || ev.Source == hci.SourceScript
	if !isStep(ev) || (!agent && ev.Source != hci.SourceHuman) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.current == nil || ev.Time.Before(c.current.ep.StartedAt) {
		return
	}
	c.current.ep.Steps++
	if agent {
		c.current.ep.AgentSteps++
	} else {
		c.current.ep.HumanSteps++
	}
}

// isStep says whether ev is a step of whoever caused it: any action, and a
// person's press (key, button) or wheel turn; motion and releases belong to
// the step they follow.
func isStep(ev hci.Event) bool {
	switch ev.Kind {
	case hci.KindAction:
		return ev.Action != nil
	case hci.KindInput:
		if ev.Input == nil {
			return false
		}
		switch ev.Input.Type {
		case hci.InputKeyDown, hci.InputButtonDown, hci.InputWheel:
			return true
		}
	}
	return false
}

// countScreenshot counts the screenshots agents take (screenshot and zoom
// actions).
func (c *Control) countScreenshot(ev hci.Event) {
	if ev.Kind != hci.KindAction || ev.Action == nil {
		return
	}
	if name := ev.Action.Action; name == hci.ActScreenshot || name == hci.ActZoom {
		c.metrics.screenshots.WithLabelValues(string(ev.Source)).Inc()
	}
}

// drainBus lets the counter catch up with every event published so far, so
// a state read or an episode end right after an action counts it. Waiting
// for an empty channel is not enough: the counter may hold the last event
// it took and not have counted it yet. A dropped event (a full buffer) would
// never arrive, hence the deadline.
func (c *Control) drainBus(ctx context.Context) {
	target := c.exec.Bus().Seq()
	deadline := time.Now().Add(200 * time.Millisecond)
	for c.counted.Load() < target && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
}

func (c *Control) acquire(ctx context.Context) error {
	select {
	case c.resetSem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for another reset to finish: %w", ctx.Err())
	}
}

func (c *Control) release() { <-c.resetSem }

// Tasks are the loaded tasks, sorted by id.
func (c *Control) Tasks() []*task.Task {
	out := make([]*task.Task, 0, len(c.taskIDs))
	for _, id := range c.taskIDs {
		out = append(out, c.tasks[id])
	}
	return out
}

// Task returns the task with id.
func (c *Control) Task(id string) (*task.Task, error) {
	t, ok := c.tasks[id]
	if !ok {
		return nil, c.unknownTask(id)
	}
	return t, nil
}

func (c *Control) unknownTask(id string) error {
	if len(c.taskIDs) == 0 {
		return fmt.Errorf("%w %s: no tasks are loaded (start deskenv with --tasks DIR)", ErrUnknownTask, wire.Quote(id))
	}
	list := c.taskIDs
	more := ""
	if len(list) > 20 {
		list, more = list[:20], fmt.Sprintf(" and %d more", len(c.taskIDs)-20)
	}
	return fmt.Errorf("%w %s: known tasks are %s%s", ErrUnknownTask, wire.Quote(id), strings.Join(list, ", "), more)
}

// Reset ends the running episode (scoring it), puts the desktop back into
// its baseline, sets up the task if one is asked for, waits for the screen to
// settle and starts a new episode, returned with its first observation.
func (c *Control) Reset(ctx context.Context, req ResetRequest) (*Episode, error) {
	t, err := c.resetTask(req)
	if err != nil {
		return nil, err
	}
	// Every episode has a seed, so any episode can be run again: the one
	// asked for, or one drawn here and reported in the episode.
	seed := mrand.Int64N(1 << 31)
	if req.Seed != nil {
		seed = *req.Seed
	}
	var params map[string]any
	if t != nil {
		// The task as this seed renders it: its setup runs, its instruction
		// is shown and its evaluator scores. Rendering fails before the
		// desktop is touched.
		rt, vals, err := t.Instantiate(seed)
		if err != nil {
			return nil, fmt.Errorf("render task %s: %w", t.ID, err)
		}
		t, params = rt, map[string]any(vals)
	}
	if err := c.acquire(ctx); err != nil {
		return nil, err
	}
	defer c.release()
	// From here on the reset runs to its end (or fails and rolls back) even
	// if its caller goes away: an HTTP client that disconnects, a websocket
	// that closes. Abandoned half way, it would leave the last episode
	// ended, no new one started and a task's setup half done. The caller
	// only misses the answer; ResetTimeout bounds the reset instead.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.ResetTimeout)
	defer cancel()
	// Nobody acts on the desktop until it is back: the control plane's own
	// releases are never gated, and task setup does not use the executor.
	defer c.exec.AddGate(func(src hci.Source, what string) error { return ErrResetting })()

	if _, err := c.endLocked(ctx, "", "next_reset"); err != nil && !errors.Is(err, ErrUnknownEpisode) {
		c.log.Warn("ending the previous episode", "err", err)
	}
	start := time.Now()
	id := req.EpisodeID
	if id == "" {
		id = newID()
	}
	gen := c.d.Generation()
	rep, env, obs, err := c.resetDesktop(ctx, t, &seed, id)
	if err == nil && c.d.Generation() != gen {
		// The X server restarted during the reset: the session and any
		// setup it did are gone.
		err = fmt.Errorf("the X server restarted during the reset (%s): reset again", c.serverExit())
	}
	rep.Total = time.Since(start)
	c.metrics.resetSeconds.Observe(rep.Total.Seconds())
	if err != nil {
		c.metrics.resets.WithLabelValues("error").Inc()
		return nil, err
	}
	c.metrics.resets.WithLabelValues("ok").Inc()

	ep := Episode{ID: id, Seed: &seed, Status: "running", StartedAt: time.Now(), ResetS: rep.Total.Seconds()}
	if t != nil {
		ep.TaskID, ep.Instruction, ep.Params = t.ID, t.Instruction, params
	}
	c.begin(&episodeRun{ep: ep, task: t, env: env, gen: gen}, rep)
	out := ep
	out.Observation = obs
	out.Reset = &rep
	return &out, nil
}

// resetTask checks a reset request before anything is torn down: the mode,
// the ids, and the task asked for (nil: none).
func (c *Control) resetTask(req ResetRequest) (*task.Task, error) {
	if c.cfg.Mode != ModeSim {
		return nil, fmt.Errorf("reset is %w: deskenv runs with --mode prod, where nobody may reset the desktop; run with --mode sim", ErrProdMode)
	}
	if err := checkID("task_id", req.TaskID); err != nil {
		return nil, err
	}
	if err := checkID("episode_id", req.EpisodeID); err != nil {
		return nil, err
	}
	if req.TaskID == "" {
		return nil, nil
	}
	return c.Task(req.TaskID)
}

// begin makes run the running episode, keeps the reset's time for the
// statistics and announces the start.
func (c *Control) begin(run *episodeRun, rep ResetReport) {
	c.mu.Lock()
	c.current = run
	c.resetDur = append(c.resetDur, rep.Total.Seconds())
	if len(c.resetDur) > c.cfg.History {
		c.resetDur = c.resetDur[len(c.resetDur)-c.cfg.History:]
	}
	c.mu.Unlock()
	ep := run.ep
	c.started(ep)
	c.log.Info("episode started", "episode", ep.ID, "task", ep.TaskID, "reset", rep.Total.Round(time.Millisecond),
		"kill", rep.Kill.Round(time.Millisecond), "home", rep.Home.Round(time.Millisecond), "session", rep.Session.Round(time.Millisecond),
		"windows", rep.Windows.Round(time.Millisecond), "setup", rep.Setup.Round(time.Millisecond), "settle", rep.Settle.Round(time.Millisecond))
}

// resetDesktop does the work of a reset.
func (c *Control) resetDesktop(ctx context.Context, t *task.Task, seed *int64, id string) (ResetReport, *seededEnv, *Observation, error) {
	var rep ResetReport
	tm := time.Now()
	if err := c.exec.ReleaseAll(ctx, hci.SourceScript); err != nil && !errors.Is(err, hci.ErrClosed) {
		c.log.Warn("reset: releasing held input", "err", err)
	}
	rep.Release = time.Since(tm)

	st, err := c.base.Restore(ctx)
	rep.Report = st
	if err != nil {
		return rep, nil, nil, fmt.Errorf("reset the desktop: %w", err)
	}
	// The previous episode's processes died with the clean-up.
	c.forgetEnv()
	// Input state is per server, not per client: release again in case a
	// dying client's grab or a late event left anything down.
	c.exec.ReleaseAll(ctx, hci.SourceScript)

	var env *seededEnv
	if t != nil {
		env = c.taskEnv(seed, id)
		c.mu.Lock()
		c.lastEnv = env.DisplayEnv
		c.mu.Unlock()
		tm = time.Now()
		if err := t.RunSetup(ctx, env); err != nil {
			rep.Setup = time.Since(tm)
			c.rollback(ctx)
			return rep, nil, nil, fmt.Errorf("set up task %s: %w", t.ID, err)
		}
		rep.Setup = time.Since(tm)
	}
	// The first observation is the frame the settle ended on, captured and
	// encoded while the screen was quiet: no second capture after it.
	opt := c.cfg.Settle
	if t == nil && st.WindowsMatched {
		// A plain reset has already waited for the session's windows to be
		// mapped again; what is left is their first paint, one burst right
		// after the map, with no reaction to input or to a task's setup
		// to wait out (what the quiet period is sized for): half of it
		// covers the paint (TestResetObservationSettled) and takes 40 ms
		// off every reset.
		opt.Quiet /= 2
	}
	tm = time.Now()
	shot, _, _, err := c.shoot.SettleShot(ctx, opt)
	rep.Settle = time.Since(tm)
	if err != nil {
		return rep, nil, nil, fmt.Errorf("wait for the screen to settle and take the first observation: %w", err)
	}
	c.metrics.screenshots.WithLabelValues("control").Inc()
	obs := &Observation{Type: "image", Data: shot.Data, MIME: shot.MIME, Width: shot.Width, Height: shot.Height}
	return rep, env, obs, nil
}

// seededEnv is a task's environment for one episode: the display's, with the
// episode's seed and id exported to setup and checker commands as
// DESKENV_SEED and DESKENV_EPISODE_ID, so a task can vary with the seed.
type seededEnv struct {
	*task.DisplayEnv
	prefix string
}

// Run runs script with the episode's variables set.
func (e *seededEnv) Run(ctx context.Context, script string) (task.Result, error) {
	return e.DisplayEnv.Run(ctx, e.prefix+script)
}

func (c *Control) taskEnv(seed *int64, id string) *seededEnv {
	prefix := "DESKENV_EPISODE_ID=" + shellQuote(id) + "; "
	if seed != nil {
		prefix += "DESKENV_SEED=" + strconv.FormatInt(*seed, 10) + "; "
	}
	env := task.NewEnv(c.d, c.cfg.Home, c.grab)
	env.SharePorts(c.cfg.Ports)
	return &seededEnv{DisplayEnv: env, prefix: prefix + "export DESKENV_EPISODE_ID DESKENV_SEED\n"}
}

// grab is a full-resolution screenshot for checkers that compare regions.
func (c *Control) grab(ctx context.Context) (*image.RGBA, error) {
	f, err := c.capt.Capture(ctx)
	if err != nil {
		return nil, err
	}
	return f.RGBA(), nil
}

// End ends the running episode id (empty: whichever runs), scores it with its
// task's checker and returns its record. Ending an episode that has already
// ended returns its record again.
func (c *Control) End(ctx context.Context, id string) (*Episode, error) {
	if err := c.acquire(ctx); err != nil {
		return nil, err
	}
	defer c.release()
	return c.endLocked(ctx, id, "ended")
}

func (c *Control) endLocked(ctx context.Context, id, reason string) (*Episode, error) {
	c.mu.Lock()
	run := c.current
	if run == nil || (id != "" && run.ep.ID != id) {
		defer c.mu.Unlock()
		if id == "" {
			return nil, fmt.Errorf("%w: no episode is running (POST /api/reset starts one)", ErrUnknownEpisode)
		}
		for i := len(c.history) - 1; i >= 0; i-- {
			if c.history[i].ID == id {
				ep := c.history[i]
				return &ep, nil
			}
		}
		return nil, fmt.Errorf("%w %s: it is neither running nor in the history", ErrUnknownEpisode, wire.Quote(id))
	}
	c.mu.Unlock()

	c.drainBus(ctx)
	var outcome *task.Outcome
	var evalErr error
	if run.task != nil {
		o, err := run.task.Evaluate(ctx, run.env)
		if err != nil {
			evalErr = err
		} else {
			outcome = &o
		}
	}

	c.mu.Lock()
	ep := run.ep
	now := time.Now()
	ep.Status, ep.EndedAt, ep.EndReason = "ended", &now, reason
	ep.DurationS = now.Sub(ep.StartedAt).Seconds()
	switch {
	case evalErr != nil:
		ep.Error = fmt.Sprintf("the task's evaluator failed: %v", evalErr)
		zero, no := 0.0, false
		ep.Reward, ep.Success = &zero, &no
		ep.Reasons = []task.Reason{{Check: "evaluator", Detail: ep.Error, Path: "evaluator"}}
	case outcome != nil:
		r, s := outcome.Reward, outcome.Success
		ep.Reward, ep.Success, ep.Reasons = &r, &s, outcome.Reasons
	}
	c.retireLocked(ep)
	c.mu.Unlock()
	c.ended(ep)
	c.log.Info("episode ended", "episode", ep.ID, "task", ep.TaskID, "reason", reason, "steps", ep.Steps,
		"reward", ptrString(ep.Reward), "success", ptrString(ep.Success), "reasons", ep.Reasons)
	return &ep, nil
}

func ptrString[T any](p *T) string {
	if p == nil {
		return "none"
	}
	return fmt.Sprint(*p)
}

// SetupIntact reports whether what the current episode's setup started
// that must last still does: the task's browser, when it started one. A
// desktop reset ahead (pool mode's warm desktops) waits unwatched until it
// is leased; a browser that died meanwhile would hand the agent a task
// without its page.
func (c *Control) SetupIntact() error {
	c.mu.Lock()
	env := c.lastEnv
	c.mu.Unlock()
	if env == nil {
		return nil
	}
	if err := env.BrowserAlive(); err != nil {
		return fmt.Errorf("the task's browser: %w", err)
	}
	return nil
}

// Current returns the running episode, or nil.
func (c *Control) Current() *Episode {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.current == nil {
		return nil
	}
	ep := c.current.ep
	ep.DurationS = time.Since(ep.StartedAt).Seconds()
	return &ep
}

// Episodes returns finished episodes, newest first, then the running one
// first of all; at most limit (<= 0: all), optionally only of one task.
func (c *Control) Episodes(limit int, taskID string) []Episode {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Episode
	if c.current != nil && (taskID == "" || c.current.ep.TaskID == taskID) {
		ep := c.current.ep
		ep.DurationS = time.Since(ep.StartedAt).Seconds()
		out = append(out, ep)
	}
	for i := len(c.history) - 1; i >= 0 && (limit <= 0 || len(out) < limit); i-- {
		if taskID == "" || c.history[i].TaskID == taskID {
			out = append(out, c.history[i])
		}
	}
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

// Episode returns the episode with id, running or finished.
func (c *Control) Episode(id string) (*Episode, error) {
	for _, ep := range c.Episodes(0, "") {
		if ep.ID == id {
			return &ep, nil
		}
	}
	return nil, fmt.Errorf("%w %s: it is neither running nor among the last %d episodes", ErrUnknownEpisode, wire.Quote(id), c.cfg.History)
}

// Close ends the running episode, stops counting and removes a temporary
// baseline. The desktop stays as it is.
func (c *Control) Close() error {
	c.closeOnce.Do(func() {
		c.unfollow()
		<-c.followDone
		c.stop()
		<-c.watchDone
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if c.acquire(ctx) == nil {
			c.endLocked(ctx, "", "closed")
			c.release()
		}
		c.busCancel()
		<-c.busDone
		c.mu.Lock()
		env := c.lastEnv
		c.lastEnv = nil
		c.mu.Unlock()
		if env != nil {
			env.Close()
		}
		if c.base != nil {
			if err := c.base.Close(); err != nil {
				c.log.Warn("closing the baseline", "err", err)
			}
		}
	})
	return nil
}

// shellQuote quotes s for sh: an episode id is the caller's free text.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func newID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
