package appliance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/deskenv/deskenv/auth"
	"github.com/deskenv/deskenv/control"
	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/internal/activity"
	"github.com/deskenv/deskenv/lifecycle"
	"github.com/deskenv/deskenv/mcpserver"
	"github.com/deskenv/deskenv/record"
	"github.com/deskenv/deskenv/screen"
	"github.com/deskenv/deskenv/stream"
	"github.com/deskenv/deskenv/task"
	"github.com/deskenv/deskenv/web"
)

// Desktop is one desktop and everything served from it; a Pool holds
// several.
type Desktop struct {
	cfg     Config
	seat    seat
	log     *slog.Logger
	home    string // the session user's home, restored on every reset
	display *display.Display
	exec    *hci.Executor
	capt    *screen.Capturer
	shooter *screen.Shooter
	// busy measures the CPU time of the desktop's programs, for settles;
	// nil on a display deskenv did not start (it cannot tell which
	// programs are the desktop's).
	busy    screen.Activity
	mcp     *mcpserver.Server
	stream  *stream.Server // nil with --no-stream
	control *control.Control
	rec     *record.Recorder
	metrics *prometheus.Registry
	lc      *lifecycle.Bus // where the features meet
	closers []func() error
	started time.Time
}

// seat is what a desktop is given by whoever starts it, decided once for
// every desktop of a pool: its tokens, the tasks, and who its session runs
// as.
type seat struct {
	auth    *auth.Auth
	tasks   []*task.Task
	iso     *isolation
	session *sessionUser // nil: deskenv's own user
	ports   *task.Ports  // the serve steps' ports, shared by a pool's desktops; nil: its own
}

// New starts one desktop. Tokens and tasks are checked before anything
// starts, so a typo costs a second, not a desktop start-up.
func New(ctx context.Context, cfg Config, log *slog.Logger) (*Desktop, error) {
	au, err := newAuth(cfg)
	if err != nil {
		return nil, err
	}
	tasks, err := loadTasks(cfg.Tasks, log)
	if err != nil {
		return nil, err
	}
	iso, err := resolveIsolation(&cfg, 1, log)
	if err != nil {
		return nil, err
	}
	announceIsolation(iso, log)
	s := seat{auth: au, tasks: tasks, iso: &iso, ports: cfg.Ports}
	if iso.Separated {
		s.session = iso.users[0]
	}
	a, err := newDesktop(ctx, cfg, log, s)
	if err != nil {
		iso.release()
		return nil, err
	}
	// First in, so run last: the session user is free once the desktop
	// that ran as it is closed.
	a.closers = append([]func() error{func() error { iso.release(); return nil }}, a.closers...)
	return a, nil
}

// newDesktop starts the desktop's parts in order, each on the ones before
// it; when one fails, those started are stopped again.
func newDesktop(ctx context.Context, cfg Config, log *slog.Logger, s seat) (_ *Desktop, err error) {
	a := &Desktop{cfg: cfg, seat: s, log: log, started: time.Now()}
	defer func() {
		if err != nil {
			a.Close()
		}
	}()
	steps := []func(context.Context) error{
		a.startLifecycle, a.startDisplay, a.startInput, a.startScreen, a.startMCP, a.startStream,
		a.startControl, a.startRecorder, a.startMetrics,
	}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return nil, err
		}
	}
	sw, sh := a.display.Size()
	space := a.exec.Space()
	log.Info("desktop ready", "display", a.display.Name(), "screen", fmt.Sprintf("%dx%d", sw, sh),
		"model", fmt.Sprintf("%dx%d", space.ModelW, space.ModelH), "mcp_tools", cfg.MCPTools)
	return a, nil
}

// newAuth is the tokens --agent-token, --operator-token, --viewer-token,
// --annotator-token and --tokens-file give.
func newAuth(cfg Config) (*auth.Auth, error) {
	return auth.New(auth.Config{
		AgentToken: cfg.AgentToken, OperatorToken: cfg.OperatorToken, ViewerToken: cfg.ViewerToken,
		AnnotatorToken: cfg.AnnotatorToken, TokensFile: cfg.TokensFile,
	})
}

// startLifecycle creates the lifecycle bus the features meet on (control
// announces episodes, the recorder follows them, the stream shows the
// recorder's state); closed last, after every feature has stopped.
func (a *Desktop) startLifecycle(context.Context) error {
	a.lc = lifecycle.NewBus()
	a.closers = append(a.closers, a.lc.Close)
	return nil
}

// startDisplay starts Xvfb (or attaches to --display), the window manager
// and the session's apps, as the session user in its home.
func (a *Desktop) startDisplay(ctx context.Context) (err error) {
	if a.home, err = a.cfg.desktopHome(a.seat.session); err != nil {
		return err
	}
	w, h, depth, _ := a.cfg.ScreenSize()
	session := display.SessionBare
	if a.cfg.Display == "" {
		if session, err = a.cfg.DisplaySession(a.log); err != nil {
			return err
		}
	}
	dcfg := display.Config{
		Attach: a.cfg.Display, Width: w, Height: h, Depth: depth, Session: session,
		WindowManager: a.cfg.WMCommand(), Apps: a.cfg.AppCommands(), Home: a.home,
		Logger: a.log, RestartOnCrash: true, Animations: a.cfg.Animations,
	}
	if u := a.seat.session; u != nil {
		dcfg.Credential, dcfg.User = u.credential(), u.Name
	}
	if a.display, err = display.Start(ctx, dcfg); err != nil {
		return err
	}
	a.closers = append(a.closers, a.display.Close)
	if a.display.Owned() {
		a.busy = activity.ForDisplay(a.display)
	}
	return nil
}

// startInput starts the executor of actions, in the model space --model-size
// names.
func (a *Desktop) startInput(context.Context) (err error) {
	sw, sh := a.display.Size()
	space, err := hci.NewSpace(sw, sh, a.cfg.ModelSize)
	if err != nil {
		return fmt.Errorf("--model-size: %w", err)
	}
	if a.exec, err = hci.NewExecutor(a.display, hci.Options{Space: space, Logger: a.log}); err != nil {
		return err
	}
	a.closers = append(a.closers, a.exec.Close)
	return nil
}

// startScreen starts the capturer every feature reads the screen through,
// and the shooter of screenshots in the model space.
func (a *Desktop) startScreen(context.Context) (err error) {
	if a.capt, err = screen.NewCapturer(a.display); err != nil {
		return err
	}
	a.closers = append(a.closers, a.capt.Close)
	space := a.exec.Space()
	a.shooter = screen.NewShooter(a.capt, screen.ShooterOptions{
		Format: screen.Format(a.cfg.ImageFormat), JPEGQuality: a.cfg.JPEGQuality,
		ModelW: space.ModelW, ModelH: space.ModelH, Pointer: a.cfg.ScreenshotPointer,
	})
	return nil
}

// startMCP builds the MCP server: the tool shapes of --mcp-tools and the
// traits of --mcp-traits.
func (a *Desktop) startMCP(context.Context) (err error) {
	traits, err := a.traits()
	if err != nil {
		return err
	}
	var modes []mcpserver.Mode
	for _, m := range splitList(a.cfg.MCPTools, ",") {
		modes = append(modes, mcpserver.Mode(m))
	}
	a.mcp, err = mcpserver.New(a.exec, a.shooter, a.capt, mcpserver.Config{
		Modes:      modes,
		FindTools:  a.cfg.FindTools || a.cfg.DeferTools,
		DeferTools: a.cfg.DeferTools,
		Traits:     traits,
		Settle:     a.cfg.settle(a.busy),
		Name:       "deskenv",
		Version:    a.cfg.Version,
		Logger:     a.log,
		Page:       pageOf{a},
	})
	return err
}

// pageOf tells the MCP server the desktop's page URL (Gemini's answers carry
// it) from the control plane, which starts after the MCP server (it calls
// the server's tools); by the first request a.control is set.
type pageOf struct{ a *Desktop }

func (p pageOf) PageURL(ctx context.Context) (string, error) {
	if p.a.control == nil {
		return "", task.ErrNoBrowser
	}
	return p.a.control.PageURL(ctx)
}

// startStream starts the WebRTC stream for people, unless --no-stream.
func (a *Desktop) startStream(context.Context) (err error) {
	if a.cfg.NoStream {
		return nil
	}
	secret, err := readSecret(a.cfg.TURNSecretFile)
	if err != nil {
		return fmt.Errorf("--turn-secret-file: %w", err)
	}
	a.stream, err = stream.New(a.display, a.exec, stream.Config{
		TURNSecret: secret, TURNTTL: a.cfg.TURNTTL,
		FPS: a.cfg.FPS, BitrateKbps: a.cfg.BitrateKbps, Preset: a.cfg.Preset,
		MinBitrateKbps: a.cfg.MinBitrateKbps, MaxBitrateKbps: a.cfg.MaxBitrateKbps, FixedBitrate: a.cfg.FixedBitrate,
		ICEServers: splitList(a.cfg.ICEServers, ","), NAT1To1IPs: splitList(a.cfg.NAT1To1, ","),
		UDPPort: a.cfg.UDPPort, Policy: stream.Policy(a.cfg.Policy), Logger: a.log, Capturer: a.capt,
		Lifecycle: a.lc,
	})
	if err != nil {
		return err
	}
	a.closers = append(a.closers, a.stream.Close)
	return nil
}

// startControl starts the control plane: episodes, reset and scoring, the
// native API and the OpenEnv face.
func (a *Desktop) startControl(context.Context) (err error) {
	a.control, err = control.New(a.display, a.exec, a.capt, a.shooter, a.seat.tasks, mcpTools{a.mcp}, control.Config{
		Mode:   control.Mode(a.cfg.Mode),
		Settle: a.cfg.settle(a.busy),
		Logger: a.log, Home: a.home, Name: "deskenv", Version: a.cfg.Version,
		Description: "One Linux desktop driven with Anthropic's computer-use actions.",
		Isolation:   a.seat.iso.detail(a.seat.session),
		Lifecycle:   a.lc,
		Ports:       a.seat.ports,
		// The recorder starts after the control plane, and both before
		// the first request: by then a.rec is set.
		ResetGuard: func(ctx context.Context) error {
			if a.rec == nil {
				return nil
			}
			return a.rec.ResetGuard(ctx)
		},
	})
	if err != nil {
		return err
	}
	a.closers = append(a.closers, a.control.Close)
	return nil
}

// startRecorder starts the recorder, which writes episodes under
// --episodes (one directory per desktop in pool mode); recording starts and
// stops on request.
func (a *Desktop) startRecorder(context.Context) (err error) {
	episodes, err := a.cfg.episodesDir()
	if err != nil {
		return err
	}
	if a.cfg.Desktops > 1 {
		episodes = filepath.Join(episodes, filepath.Base(a.home))
	}
	warnReachable(&a.cfg, episodes, a.seat.session, a.log)
	a.rec, err = record.New(episodes, a.exec, a.shooter, a.capt, record.Options{
		Logger:     a.log,
		Lifecycle:  a.lc,
		Session:    sessionName(a.display.Config().Session),
		Animations: a.display.Config().Animations,
	})
	if err != nil {
		return fmt.Errorf("--episodes: %w", err)
	}
	a.closers = append(a.closers, func() error {
		if a.rec.Status().Recording {
			_, err := a.rec.Stop(context.Background(), nil)
			return err
		}
		return nil
	})
	return nil
}

// startMetrics builds the desktop's metric registry, served at /metrics.
func (a *Desktop) startMetrics(context.Context) error {
	a.metrics = a.registry()
	return nil
}

// registry is the desktop's metric registry, served at /metrics: every
// feature's series and the process's own (go_, process_). Each desktop of a
// pool has its own, under its own prefix, so series need no desktop label.
func (a *Desktop) registry() *prometheus.Registry {
	hm := hci.NewMetrics(a.exec)
	a.closers = append(a.closers, hm.Close)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		hm, a.control.Collector(), a.rec.Collector())
	if a.stream != nil {
		reg.MustRegister(a.stream.Collector())
	}
	return reg
}

// Local reports whether the desktop has no tokens: every request is let in.
func (a *Desktop) Local() bool { return a.seat.auth.Local() }

// SessionUser is the user of its own the desktop's session runs as, "" when
// it runs as deskenv's.
func (a *Desktop) SessionUser() string {
	if a.seat.session == nil {
		return ""
	}
	return a.seat.session.Name
}

// DisplayName is the desktop's X display, e.g. ":1".
func (a *Desktop) DisplayName() string { return a.display.Name() }

// Control is the desktop's control plane (episodes, reset, scoring).
func (a *Desktop) Control() *control.Control { return a.control }

// Space is the desktop's model space, as coordinates and screenshots use it.
func (a *Desktop) Space() hci.Space { return a.exec.Space() }

// Replay executes a recorded episode's steps on this desktop and compares
// each screen with the recorded observation (deskenv replay).
func (a *Desktop) Replay(ctx context.Context, rec *record.Recording, opt record.ReplayOptions) (*record.ReplayReport, error) {
	return record.Replay(ctx, rec, a.exec, a.shooter, a.capt, opt)
}

// ServeStdio serves the desktop's MCP tools over in and out (deskenv mcp
// --stdio) until ctx ends or in closes.
func (a *Desktop) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	return a.mcp.ServeStdio(ctx, in, out)
}

// Handler is the one HTTP surface of the appliance (DESIGN.md, "One HTTP
// server"): every route behind one front door.
func (a *Desktop) Handler() http.Handler {
	d := auth.NewDoor(a.seat.auth, a.cfg.limits(a.seat.iso))
	a.register(d)
	return d
}

// register puts the desktop's routes behind d: the page for viewers, MCP for
// agents, the stream's signalling, and the control plane and recorder for
// operators. The door checks tokens, origins and body sizes for all of them.
func (a *Desktop) register(d *auth.Door) {
	web.Register(d)
	a.mcp.Register(d)
	if a.stream != nil {
		a.stream.Register(d)
	}
	a.control.Register(d)
	d.Handle("GET /metrics", auth.Policy{Roles: []auth.Role{auth.RoleOperator}}, promhttp.HandlerFor(a.metrics, promhttp.HandlerOpts{}))
	// More specific than the control plane's /api/.
	a.rec.Register(d)
}

// Close stops everything in the reverse order it was started.
func (a *Desktop) Close() error {
	for i := len(a.closers) - 1; i >= 0; i-- {
		if err := a.closers[i](); err != nil {
			a.log.Warn("shutdown", "err", err)
		}
	}
	a.closers = nil
	return nil
}

// mcpTools offers the MCP server's tools to the control plane's OpenEnv face
// (/step, /ws "mcp" messages): the very tools agents get at /mcp.
type mcpTools struct{ s *mcpserver.Server }

func (m mcpTools) ListTools(ctx context.Context) ([]control.ToolInfo, error) {
	var out []control.ToolInfo
	for _, t := range m.s.Tools() {
		schema, err := json.Marshal(t.Schema)
		if err != nil {
			return nil, fmt.Errorf("schema of tool %s: %w", t.Name, err)
		}
		out = append(out, control.ToolInfo{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	return out, nil
}

func (m mcpTools) CallTool(ctx context.Context, name string, args json.RawMessage) (control.ToolResult, error) {
	res, err := m.s.CallTool(ctx, name, args)
	if errors.Is(err, mcpserver.ErrUnknownTool) {
		return control.ToolResult{}, fmt.Errorf("%w: %w", control.ErrUnknownTool, err)
	}
	if err != nil {
		return control.ToolResult{}, err
	}
	return toolResult(res)
}

// toolResult is an MCP result as the control plane carries it: each content
// item as its JSON.
func toolResult(res *mcp.CallToolResult) (control.ToolResult, error) {
	out := control.ToolResult{Structured: res.StructuredContent, IsError: res.IsError}
	for _, c := range res.Content {
		b, err := json.Marshal(c)
		if err != nil {
			return control.ToolResult{}, err
		}
		out.Content = append(out.Content, b)
	}
	return out, nil
}

// readSecret reads a secret from file (its surrounding white space trimmed);
// "" gives "". An empty file is an error rather than no secret, since the
// one who named it meant one.
func readSecret(file string) (string, error) {
	if file == "" {
		return "", nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("read the secret: %w", err)
	}
	secret := strings.TrimSpace(string(b))
	if secret == "" {
		return "", fmt.Errorf("%s is empty: put the TURN server's shared secret in it", file)
	}
	return secret, nil
}

// sessionName is the session a recording names: display's "" is bare.
func sessionName(s string) string {
	if s == "" {
		return display.SessionBare
	}
	return s
}
