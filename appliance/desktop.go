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
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/deskenv/deskenv/auth"
	"github.com/deskenv/deskenv/control"
	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/mcpserver"
	"github.com/deskenv/deskenv/record"
	"github.com/deskenv/deskenv/screen"
	"github.com/deskenv/deskenv/stream"
	"github.com/deskenv/deskenv/web"
)

// Desktop is one desktop and everything served from it. Pool mode will hold
// several.
type Desktop struct {
	cfg     Config
	log     *slog.Logger
	display *display.Display
	exec    *hci.Executor
	capt    *screen.Capturer
	shooter *screen.Shooter
	mcp     *mcpserver.Server
	stream  *stream.Server // nil with --no-stream
	control *control.Control
	rec     *record.Recorder
	auth    *auth.Auth
	metrics *prometheus.Registry
	closers []func() error
	started time.Time
}

func New(ctx context.Context, cfg Config, log *slog.Logger) (a *Desktop, err error) {
	self := &Desktop{cfg: cfg, log: log, started: time.Now()}
	a = self
	defer func() {
		if err != nil {
			// a is nil by now (return nil, err): close what was started.
			self.Close()
		}
	}()
	// Tokens and tasks are checked before anything starts, so a typo costs
	// a second, not a desktop start-up.
	a.auth, err = auth.New(auth.Config{
		AgentToken: cfg.AgentToken, OperatorToken: cfg.OperatorToken, ViewerToken: cfg.ViewerToken, TokensFile: cfg.TokensFile,
	})
	if err != nil {
		return nil, err
	}
	tasks, err := cfg.loadTasks(log)
	if err != nil {
		return nil, err
	}
	if cfg.iso == nil {
		// One desktop (pool mode decides for all its desktops at once).
		iso, err := resolveIsolation(&cfg, 1, log)
		if err != nil {
			return nil, err
		}
		announceIsolation(iso, log)
		cfg.iso = &iso
		if iso.Separated {
			cfg.session = iso.users[0]
		}
		a.cfg = cfg
	}
	home, err := cfg.desktopHome()
	if err != nil {
		return nil, err
	}
	w, h, depth, _ := cfg.ScreenSize()
	dcfg := display.Config{
		Attach: cfg.Display, Width: w, Height: h, Depth: depth,
		WindowManager: cfg.WMCommand(), Apps: cfg.AppCommands(), Home: home,
		Logger: log, RestartOnCrash: true,
	}
	if cfg.session != nil {
		dcfg.Credential, dcfg.User = cfg.session.credential(), cfg.session.Name
	}
	a.display, err = display.Start(ctx, dcfg)
	if err != nil {
		return nil, err
	}
	a.closers = append(a.closers, a.display.Close)

	sw, sh := a.display.Size()
	space, err := hci.NewSpace(sw, sh, cfg.ModelSize)
	if err != nil {
		return nil, fmt.Errorf("--model-size: %w", err)
	}
	a.exec, err = hci.NewExecutor(a.display, hci.Options{Space: space, Logger: log})
	if err != nil {
		return nil, err
	}
	a.closers = append(a.closers, a.exec.Close)

	a.capt, err = screen.NewCapturer(a.display)
	if err != nil {
		return nil, err
	}
	a.closers = append(a.closers, a.capt.Close)
	a.shooter = screen.NewShooter(a.capt, screen.ShooterOptions{
		Format: screen.Format(cfg.ImageFormat), JPEGQuality: cfg.JPEGQuality,
		ModelW: space.ModelW, ModelH: space.ModelH,
	})

	traits, err := a.traits(cfg, home)
	if err != nil {
		return nil, err
	}
	var modes []mcpserver.Mode
	for _, m := range splitList(cfg.MCPTools, ",") {
		modes = append(modes, mcpserver.Mode(m))
	}
	a.mcp, err = mcpserver.New(a.exec, a.shooter, a.capt, mcpserver.Config{
		Modes:      modes,
		FindTools:  cfg.FindTools || cfg.DeferTools,
		DeferTools: cfg.DeferTools,
		Traits:     traits,
		Settle:     screen.SettleOptions{Quiet: cfg.SettleQuiet, Max: cfg.SettleMax},
		Name:       "deskenv",
		Version:    cfg.Version,
		Logger:     log,
	})
	if err != nil {
		return nil, err
	}
	if !cfg.NoStream {
		a.stream, err = stream.New(a.display, a.exec, stream.Config{
			FPS: cfg.FPS, BitrateKbps: cfg.BitrateKbps, Preset: cfg.Preset,
			ICEServers: splitList(cfg.ICEServers, ","), NAT1To1IPs: splitList(cfg.NAT1To1, ","),
			UDPPort: cfg.UDPPort, Policy: stream.Policy(cfg.Policy), Logger: log, Capturer: a.capt,
		})
		if err != nil {
			return nil, err
		}
		a.closers = append(a.closers, a.stream.Close)
	}

	ccfg := control.Config{
		Mode:   control.Mode(cfg.Mode),
		Settle: screen.SettleOptions{Quiet: cfg.SettleQuiet, Max: cfg.SettleMax},
		Logger: log, Home: home, Name: "deskenv", Version: cfg.Version,
		Description: "One Linux desktop driven with Anthropic's computer-use actions.",
		Isolation:   cfg.iso.detail(cfg.session),
	}
	a.control, err = control.New(a.display, a.exec, a.capt, a.shooter, tasks, mcpTools{a.mcp}, ccfg)
	if err != nil {
		return nil, err
	}
	a.closers = append(a.closers, a.control.Close)

	// The recorder writes episodes under --episodes (one directory per
	// desktop in pool mode); recording starts and stops on request.
	episodes, err := cfg.episodesDir()
	if err != nil {
		return nil, err
	}
	if cfg.Desktops > 1 {
		episodes = filepath.Join(episodes, filepath.Base(home))
	}
	warnReachable(&cfg, episodes, cfg.session, log)
	a.rec, err = record.New(episodes, a.exec, a.shooter, a.capt, record.Options{
		Logger: log,
		Current: func() (record.EpisodeInfo, bool) {
			ep := a.control.Current()
			if ep == nil {
				return record.EpisodeInfo{}, false
			}
			return record.EpisodeInfo{ID: ep.ID, TaskID: ep.TaskID, Instruction: ep.Instruction}, true
		},
		Finish: func(ctx context.Context, id string) (*record.Outcome, error) {
			ep, err := a.control.End(ctx, id)
			if err != nil {
				return nil, err
			}
			return outcomeOf(ep), nil
		},
		// Everyone watching sees the REC marker, viewers included: the
		// stream's state reaches every role, /api/recording only operators.
		OnStatus: func(st record.Status) {
			if a.stream == nil {
				return
			}
			state := ""
			switch {
			case st.Paused:
				state = "paused"
			case st.Recording:
				state = "recording"
			}
			a.stream.SetRecording(state)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("--episodes: %w", err)
	}
	// An episode that ends (scored) while it is being recorded ends its
	// recording too, with the reward written in.
	a.control.OnEpisodeEnd(func(ep control.Episode) {
		a.rec.StopEpisode(context.Background(), ep.ID, outcomeOf(&ep))
	})
	a.closers = append(a.closers, func() error {
		if a.rec.Status().Recording {
			_, err := a.rec.Stop(context.Background(), nil)
			return err
		}
		return nil
	})

	a.metrics = a.registry()
	log.Info("desktop ready", "display", a.display.Name(), "screen", fmt.Sprintf("%dx%d", sw, sh),
		"model", fmt.Sprintf("%dx%d", space.ModelW, space.ModelH), "mcp_tools", cfg.MCPTools)
	return a, nil
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
func (a *Desktop) Local() bool { return a.auth.Local() }

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
	d := auth.NewDoor(a.auth, a.cfg.limits())
	a.register(d)
	return d
}

// register puts the desktop's routes behind d: the page for viewers, MCP for
// agents, the stream's signalling, and the control plane and recorder for
// operators. The door checks tokens, origins and body sizes for all of them.
func (a *Desktop) register(d *auth.Door) {
	// The page itself is public code; what it connects to is not. Its URL
	// carries ?token=, which the page hands to the websocket.
	d.Handle("/", auth.Policy{Public: true}, web.Handler())
	// MCP's streamable HTTP: POST calls (a body up to the limit), a GET
	// event stream and DELETE of a session; the token only in the header.
	d.Handle("/mcp", auth.Policy{Roles: []auth.Role{auth.RoleAgent}, Stream: true}, a.mcp.Handler())
	if a.stream != nil {
		d.Handle("/stream/signal", auth.Policy{Roles: []auth.Role{auth.RoleViewer}, URLToken: true, Stream: true},
			a.stream.SignalHandler(viewerRole))
	}
	d.Mount(a.control.Routes()...)
	d.Handle("GET /metrics", auth.Policy{Roles: []auth.Role{auth.RoleOperator}}, promhttp.HandlerFor(a.metrics, promhttp.HandlerOpts{}))
	// More specific than the control plane's /api/.
	d.Mount(a.rec.Routes()...)
}

// viewerRole tells the stream who is connecting, from the role the door let
// in: operators (and everyone in local mode) may take control; viewer tokens
// watch only. The door already refused agents' tokens (MCP alone).
func viewerRole(r *http.Request) (role string, viewOnly bool, err error) {
	switch role0 := auth.RoleFrom(r.Context()); role0 {
	case auth.RoleOperator, auth.RoleLocal:
		return "operator", false, nil
	case auth.RoleViewer:
		return "viewer", true, nil
	default:
		return "", false, fmt.Errorf("a %s token cannot watch the desktop: use a viewer or operator token", role0)
	}
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

// outcomeOf is a scored episode as the recorder writes it into episode.json.
func outcomeOf(ep *control.Episode) *record.Outcome {
	out := &record.Outcome{Reward: ep.Reward, Success: ep.Success, Done: true}
	if ep.Interruption != "" {
		// Cut short, not finished: a dataset marks it truncated.
		out.Done, out.Interrupted = false, ep.Interruption
	}
	for _, r := range ep.Reasons {
		out.Reasons = append(out.Reasons, fmt.Sprintf("%s: %v %s", r.Check, r.Passed, r.Detail))
	}
	return out
}

// traits builds the MCP traits --mcp-traits names, over this desktop's home
// and session environment.
func (a *Desktop) traits(cfg Config, home string) (mcpserver.Traits, error) {
	var t mcpserver.Traits
	for _, name := range splitList(cfg.MCPTraits, ",") {
		switch name {
		case "bash":
			if err := cfg.sharedUserOK(name); err != nil {
				return t, err
			}
			t.Bash = &mcpserver.BashTrait{Dir: home, Env: a.display.Env(), Credential: a.display.Credential()}
			if a.display.Credential() == nil && os.Geteuid() == 0 {
				a.log.Warn("--mcp-traits bash: the session runs as deskenv's user, root, so the agent's commands run as root too")
			}
			if a.auth.Local() && a.display.Credential() == nil {
				// A separated session is refused at the door by its user
				// (desktopRefusal); a shared one only tokens keep out.
				a.log.Warn("--mcp-traits bash without tokens: every request to deskenv is allowed, so the agent's shell can reach the control plane (reset, scoring) on this machine; configure tokens to keep it out")
			}
		case "files":
			if err := cfg.sharedUserOK(name); err != nil {
				return t, err
			}
			t.Files = &mcpserver.FilesTrait{Home: home, Owner: a.display.Credential()}
		case "clipboard":
			c, err := newDeskClipboard(a.display, a)
			if err != nil {
				return t, err
			}
			t.Clipboard = c
		}
	}
	return t, nil
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
