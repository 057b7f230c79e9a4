package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/deskenv/deskenv/auth"
	"github.com/deskenv/deskenv/task"
)

// config is everything the appliance can be told, from flags or DESKENV_*
// environment variables (a flag on the command line wins over the variable).
type config struct {
	Addr string

	// the front door (auth.Door) and the HTTP server
	ReadHeaderTimeout time.Duration
	BodyReadTimeout   time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	MaxBody           int64
	MaxConns          int

	// display
	Display   string
	Screen    string
	ModelSize string
	WM        string
	Apps      string
	Home      string

	// SessionUser is who the desktop session runs as (pool mode: a prefix
	// or a list); AllowSharedUser lets the bash and files traits run when
	// the session cannot be separated from deskenv's own user.
	SessionUser     string
	AllowSharedUser bool

	// agents
	MCPTools    string
	MCPTraits   string
	FindTools   bool
	DeferTools  bool
	ImageFormat string
	JPEGQuality int
	SettleQuiet time.Duration
	SettleMax   time.Duration

	// people
	FPS         int
	BitrateKbps int
	Preset      string
	ICEServers  string
	NAT1To1     string
	UDPPort     int
	Policy      string
	NoStream    bool

	// control plane
	Mode          string
	Tasks         string
	AgentToken    string
	OperatorToken string
	ViewerToken   string
	TokensFile    string
	Episodes      string

	// Desktops > 1 is pool mode: that many independent desktops under /d/{i}/.
	Desktops int
	// PoolAgentToken lets a pool-wide agent token through (every desktop
	// accepts it), which undoes per-lease tokens: refused without it.
	PoolAgentToken bool

	LogLevel  string
	LogFormat string

	// tokenFlags are the token flags given on the command line (not from
	// the environment), which any local user can read in the process list.
	tokenFlags []string

	// session is this desktop's session user (nil: deskenv's own user) and
	// iso how that was decided; pool mode sets both per desktop.
	session *sessionUser
	iso     *isolation

	// tasks are --tasks once loaded: pool mode loads them once for all its
	// desktops (and reports a bad file once, not once per desktop).
	tasks       []*task.Task
	tasksLoaded bool
}

func defaultConfig() config {
	return config{
		Screen:      "1280x800x24",
		ModelSize:   "auto",
		WM:          "openbox",
		Apps:        "xterm",
		MCPTools:    "computer,tools",
		ImageFormat: "png",
		JPEGQuality: 80,
		SettleQuiet: 80 * time.Millisecond,
		SettleMax:   2 * time.Second,
		FPS:         30,
		BitrateKbps: 4000,
		Preset:      "ultrafast",
		Policy:      "shared",
		Mode:        "sim",
		Episodes:    "",
		Desktops:    1,
		LogLevel:    "info",

		ReadHeaderTimeout: 10 * time.Second,
		BodyReadTimeout:   30 * time.Second,
		WriteTimeout:      5 * time.Minute,
		IdleTimeout:       60 * time.Second,
		MaxBody:           auth.DefaultBodyLimit,
		MaxConns:          1024,
		LogFormat:         "text",
	}
}

// flagSet registers every option on fs, with the environment variable it
// also reads named in its usage line.
func (c *config) flagSet(fs *flag.FlagSet) {
	str := func(p *string, name, usage string) { fs.StringVar(p, name, *p, usage+envNote(name)) }
	num := func(p *int, name, usage string) { fs.IntVar(p, name, *p, usage+envNote(name)) }
	dur := func(p *time.Duration, name, usage string) { fs.DurationVar(p, name, *p, usage+envNote(name)) }

	str(&c.Addr, "addr", "HTTP listen address; empty means 127.0.0.1:8080 when no tokens are configured (local only), else :8080")
	dur(&c.ReadHeaderTimeout, "read-header-timeout", "longest wait for a request's headers, including the first request of a new connection")
	dur(&c.BodyReadTimeout, "body-read-timeout", "longest wait for a request body to arrive (0: none); lifted once it has, so websockets and long calls are not cut")
	dur(&c.WriteTimeout, "write-timeout", "longest a request may take to be answered, except streams (MCP, websockets) (0: none)")
	dur(&c.IdleTimeout, "idle-timeout", "close a keep-alive connection idle this long")
	fs.Int64Var(&c.MaxBody, "max-body", c.MaxBody, "largest request body in bytes for /mcp (the control plane takes 1 MiB at most); larger ones get 413"+envNote("max-body"))
	num(&c.MaxConns, "max-conns", "most HTTP connections open at once; more wait to be accepted")

	str(&c.Display, "display", "attach to this existing X display (e.g. :0) instead of starting Xvfb")
	str(&c.Screen, "screen", "Xvfb screen size WIDTHxHEIGHTxDEPTH")
	str(&c.ModelSize, "model-size", "model space for coordinates and screenshots: auto (1024x768, 1280x800 or 1366x768 matching the screen's aspect), off (screen size), or WxH")
	str(&c.WM, "wm", "window manager command line; empty for none")
	str(&c.Apps, "apps", "session apps started on the desktop, separated by ';' (e.g. \"xterm;mousepad\"); empty for none")
	str(&c.Home, "home", "the desktop user's home directory, restored from its baseline on every reset (default: "+sessionHomes+"/USER for the session user, or $XDG_DATA_HOME/deskenv/home when the session shares deskenv's user; never your own home)")
	str(&c.SessionUser, "session-user", "the user the desktop session (window manager, apps, bash trait) runs as, never deskenv's own; pool mode: a prefix (users PREFIX0, PREFIX1, ...) or one name per desktop, comma-separated. As root the default is "+defaultSessionUser+", created if missing")
	fs.BoolVar(&c.AllowSharedUser, "allow-shared-user", c.AllowSharedUser, "allow the bash and files traits when the session cannot run as a user of its own (they would hand the agent deskenv's own user: its files, tasks and episodes)"+envNote("allow-shared-user"))

	str(&c.MCPTools, "mcp-tools", "MCP tool shapes, comma-separated: computer (one Anthropic-shaped tool), tools (one tool per action), codeact (run_script: a Starlark program calling the actions)")
	str(&c.MCPTraits, "mcp-traits", "optional MCP tool groups, comma-separated, none by default: bash (shell commands as the desktop user), files (read, write, list in the desktop's home), clipboard (get and set its text)")
	fs.BoolVar(&c.FindTools, "mcp-find-tools", c.FindTools, "add find_tools, which searches the other tools by words and returns their schemas"+envNote("mcp-find-tools"))
	fs.BoolVar(&c.DeferTools, "mcp-defer-tools", c.DeferTools, "list only find_tools, call_tool, screenshot, computer and run_script; the other tools are found with find_tools and run with call_tool (implies --mcp-find-tools)"+envNote("mcp-defer-tools"))
	str(&c.ImageFormat, "image-format", "screenshot encoding: png or jpeg")
	num(&c.JPEGQuality, "jpeg-quality", "JPEG quality 1-100 when --image-format=jpeg")
	dur(&c.SettleQuiet, "settle-quiet", "after a mutating action, the screen must be unchanged this long before the screenshot is taken")
	dur(&c.SettleMax, "settle-max", "the longest to wait for the screen to settle before taking the screenshot anyway")

	num(&c.FPS, "fps", "video frames per second for viewers")
	num(&c.BitrateKbps, "bitrate", "video bitrate in kbit/s")
	str(&c.Preset, "preset", "x264 preset: ultrafast or superfast")
	str(&c.ICEServers, "ice-servers", "STUN/TURN URLs for WebRTC, comma-separated (none needed on localhost)")
	str(&c.NAT1To1, "nat-1to1", "public IP addresses to announce for WebRTC when behind 1:1 NAT, comma-separated")
	num(&c.UDPPort, "udp-port", "serve all WebRTC media on this one UDP port (0: ephemeral ports); in pool mode desktop i uses this port + i")
	str(&c.Policy, "policy", "who may act: shared (agent and the person in control), human (agent actions refused while a person has control), agent (people watch only)")
	fs.BoolVar(&c.NoStream, "no-stream", c.NoStream, "do not serve the browser stream"+envNote("no-stream"))

	str(&c.Mode, "mode", "sim (reset, state and tasks on) or prod (off)")
	str(&c.Tasks, "tasks", "directory of task files (*.json) loaded at start")
	str(&c.AgentToken, "agent-token", "bearer token for agents (MCP only)")
	str(&c.OperatorToken, "operator-token", "bearer token for operators (control plane and human control)")
	str(&c.ViewerToken, "viewer-token", "bearer token for viewers (watch only)")
	str(&c.TokensFile, "tokens-file", "file with lines ROLE=TOKEN (agent, operator, viewer)")
	str(&c.Episodes, "episodes", "directory where episodes are recorded (default: $XDG_DATA_HOME/deskenv/episodes)")

	num(&c.Desktops, "desktops", "pool mode: run this many independent desktops, each under /d/{i}/, handed out by POST /leases")
	fs.BoolVar(&c.PoolAgentToken, "pool-agent-token", c.PoolAgentToken, "pool mode: accept an agent token from --agent-token or --tokens-file on every desktop (otherwise refused: each lease has its own)"+envNote("pool-agent-token"))

	str(&c.LogLevel, "log-level", "debug, info, warn or error")
	str(&c.LogFormat, "log-format", "text or json")
}

func envName(flagName string) string {
	return "DESKENV_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

func envNote(flagName string) string { return " [$" + envName(flagName) + "]" }

// parseConfig reads flags from args and, for every flag not given there, its
// environment variable.
func parseConfig(name string, args []string, out io.Writer) (config, *flag.FlagSet, error) {
	c := defaultConfig()
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	c.flagSet(fs)
	fs.Usage = func() { usage(fs, out) }
	if err := fs.Parse(args); err != nil {
		return c, fs, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, name := range []string{"agent-token", "operator-token", "viewer-token"} {
		if set[name] && fs.Lookup(name).Value.String() != "" {
			c.tokenFlags = append(c.tokenFlags, "--"+name)
		}
	}
	// Flags an earlier exec took off the command line (reexecWithoutTokens)
	// were flags all the same.
	c.tokenFlags = append(c.tokenFlags, scrubbedTokenFlags()...)
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || envErr != nil {
			return
		}
		if v, ok := os.LookupEnv(envName(f.Name)); ok {
			if err := fs.Set(f.Name, v); err != nil {
				envErr = fmt.Errorf("environment variable %s=%q: %w", envName(f.Name), v, err)
			}
		}
	})
	if envErr != nil {
		return c, fs, envErr
	}
	if err := c.readTokensFD(); err != nil {
		return c, fs, err
	}
	return c, fs, c.validate()
}

func (c *config) validate() error {
	if _, _, _, err := c.screenSize(); err != nil {
		return err
	}
	switch c.ImageFormat {
	case "png", "jpeg":
	default:
		return fmt.Errorf("--image-format %q: use png or jpeg", c.ImageFormat)
	}
	if c.JPEGQuality < 1 || c.JPEGQuality > 100 {
		return fmt.Errorf("--jpeg-quality %d: must be between 1 and 100", c.JPEGQuality)
	}
	if c.SettleQuiet <= 0 || c.SettleMax < c.SettleQuiet {
		return fmt.Errorf("--settle-quiet %s and --settle-max %s: both must be positive, and max at least quiet", c.SettleQuiet, c.SettleMax)
	}
	for _, m := range splitList(c.MCPTools, ",") {
		switch m {
		case "computer", "tools", "codeact":
		default:
			return fmt.Errorf("--mcp-tools %q: unknown shape %q (use computer, tools, codeact, or several: computer,tools)", c.MCPTools, m)
		}
	}
	if len(splitList(c.MCPTools, ",")) == 0 {
		return fmt.Errorf("--mcp-tools is empty: name at least one of computer, tools, codeact")
	}
	for _, tr := range splitList(c.MCPTraits, ",") {
		switch tr {
		case "bash", "files", "clipboard":
		default:
			return fmt.Errorf("--mcp-traits %q: unknown trait %q (use bash, files, clipboard, or several: bash,files)", c.MCPTraits, tr)
		}
	}
	switch c.Mode {
	case "sim", "prod":
	default:
		return fmt.Errorf("--mode %q: use sim or prod", c.Mode)
	}
	switch c.Policy {
	case "shared", "human", "agent":
	default:
		return fmt.Errorf("--policy %q: use shared, human or agent", c.Policy)
	}
	if c.FPS < 1 || c.FPS > 60 {
		return fmt.Errorf("--fps %d: must be between 1 and 60", c.FPS)
	}
	if c.BitrateKbps < 100 || c.BitrateKbps > 100000 {
		return fmt.Errorf("--bitrate %d: must be between 100 and 100000 kbit/s", c.BitrateKbps)
	}
	if c.UDPPort < 0 || c.UDPPort > 65535 {
		return fmt.Errorf("--udp-port %d: must be a port number", c.UDPPort)
	}
	if c.Desktops < 1 || c.Desktops > 256 {
		return fmt.Errorf("--desktops %d: must be between 1 and 256", c.Desktops)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"--read-header-timeout", c.ReadHeaderTimeout}, {"--idle-timeout", c.IdleTimeout}} {
		if d.v <= 0 {
			return fmt.Errorf("%s %s: must be positive, or connections are held forever", d.name, d.v)
		}
	}
	if c.BodyReadTimeout < 0 || c.WriteTimeout < 0 {
		return fmt.Errorf("--body-read-timeout %s and --write-timeout %s: use 0 for none or a positive duration", c.BodyReadTimeout, c.WriteTimeout)
	}
	if c.MaxBody < 1<<10 {
		return fmt.Errorf("--max-body %d: must be at least 1024 bytes", c.MaxBody)
	}
	if c.MaxConns < 1 {
		return fmt.Errorf("--max-conns %d: must be at least 1", c.MaxConns)
	}
	if c.Desktops > 1 && c.Display != "" {
		return fmt.Errorf("--desktops %d with --display %s: pool mode starts its own displays; attach to an existing one only with a single desktop", c.Desktops, c.Display)
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		return err
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		return fmt.Errorf("--log-format %q: use text or json", c.LogFormat)
	}
	return nil
}

// limits are the front door's bounds on every request.
func (c *config) limits() auth.Limits {
	return auth.Limits{Body: c.MaxBody, BodyRead: c.BodyReadTimeout, Write: c.WriteTimeout, Refuse: desktopRefusal(c.iso)}
}

func (c *config) screenSize() (w, h, depth int, err error) {
	parts := strings.Split(strings.ToLower(c.Screen), "x")
	if len(parts) == 2 {
		parts = append(parts, "24")
	}
	if len(parts) != 3 {
		return 0, 0, 0, fmt.Errorf("--screen %q: want WIDTHxHEIGHT or WIDTHxHEIGHTxDEPTH, e.g. 1280x800x24", c.Screen)
	}
	var v [3]int
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 {
			return 0, 0, 0, fmt.Errorf("--screen %q: %q is not a positive number", c.Screen, p)
		}
		v[i] = n
	}
	return v[0], v[1], v[2], nil
}

// desktopHome is the desktop user's home: --home, or a directory of its own.
// Never the home of whoever runs deskenv: reset restores the desktop's home to
// its baseline, deleting whatever the agent (or anyone) added there.
//
// When the session runs as a user of its own the default is
// /var/lib/deskenv/homes/USER (deskenv's data directory may be in root's
// home, which that user cannot enter), and the home is made that user's,
// mode 0700.
func (c *config) desktopHome() (string, error) {
	home := c.Home
	if home == "" && c.session != nil {
		home = filepath.Join(sessionHomes, c.session.Name)
	}
	if home == "" {
		base, err := dataDir()
		if err != nil {
			return "", fmt.Errorf("no --home given: %w", err)
		}
		home = filepath.Join(base, "home")
	}
	// Absolute, because the files trait and the reset's baseline both name
	// paths inside it and must not depend on the working directory.
	home, err := filepath.Abs(home)
	if err != nil {
		return "", fmt.Errorf("--home %s: %w", home, err)
	}
	if err := os.MkdirAll(home, 0o755); err != nil {
		return "", fmt.Errorf("--home %s: %w", home, err)
	}
	if c.session != nil {
		if err := ownHome(home, c.session); err != nil {
			return "", err
		}
	}
	return home, nil
}

// episodesDir is --episodes, or a directory beside the desktop's home.
//
// A directory it has to make is made 0700: episodes (rewards included) are
// deskenv's, not the desktop session's to read or rewrite. One that exists
// keeps its mode (warnReachable says when the session can reach it).
func (c *config) episodesDir() (string, error) {
	if c.Episodes != "" {
		if err := os.MkdirAll(c.Episodes, 0o700); err != nil {
			return "", fmt.Errorf("--episodes %s: %w", c.Episodes, err)
		}
		return c.Episodes, nil
	}
	base, err := dataDir()
	if err != nil {
		return "", fmt.Errorf("no --episodes given: %w", err)
	}
	// deskenv's own directory: its user's alone.
	if err := os.MkdirAll(base, 0o700); err != nil {
		return "", fmt.Errorf("no --episodes given, and deskenv's data directory: %w", err)
	}
	return filepath.Join(base, "episodes"), nil
}

// dataDir is where deskenv keeps its own files: $XDG_DATA_HOME/deskenv.
func dataDir() (string, error) {
	base := os.Getenv("XDG_DATA_HOME")
	if base == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no home directory to keep deskenv's files in: %w", err)
		}
		base = filepath.Join(h, ".local", "share")
	}
	return filepath.Join(base, "deskenv"), nil
}

func (c *config) apps() [][]string {
	var apps [][]string
	for _, a := range splitList(c.Apps, ";") {
		apps = append(apps, strings.Fields(a))
	}
	if apps == nil {
		apps = [][]string{}
	}
	return apps
}

func (c *config) wm() []string {
	f := strings.Fields(c.WM)
	if f == nil {
		f = []string{}
	}
	return f
}

func (c *config) logger(w io.Writer) *slog.Logger {
	lvl, _ := parseLevel(c.LogLevel)
	opts := &slog.HandlerOptions{Level: lvl}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("--log-level %q: use debug, info, warn or error", s)
	}
	return l, nil
}

func splitList(s, sep string) []string {
	var out []string
	for _, p := range strings.Split(s, sep) {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func usage(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprintf(w, `deskenv: one Linux desktop for computer-use agents and people.

Usage:
  deskenv [flags]              start the appliance (Xvfb, MCP at /mcp, browser client at /)
  deskenv mcp --stdio [flags]  serve MCP over stdin/stdout (for Claude Desktop and other stdio clients)
  deskenv health [--url URL]   exit 0 when the appliance at URL answers /health (for container health checks)
  deskenv export --out FILE [--format parquet|jsonl] [--task ID] [--source S] [--outcome O] EPISODES_DIR
                               recorded episodes to a dataset file (one row per step) and its card
  deskenv replay [flags] EPISODE_DIR
                               replay an episode on a fresh desktop, report divergence, compare rewards
  deskenv init -- CMD [ARGS]   the image's entrypoint: move the DESKENV_*_TOKEN variables onto a pipe
                               only deskenv reads, then run CMD (tini, then deskenv) without them
  deskenv version              print the version

Every flag can also be set with the environment variable in brackets.

Flags:
`)
	fs.PrintDefaults()
}

// loadTasks loads --tasks, or returns what was loaded already.
func (c *config) loadTasks(log *slog.Logger) ([]*task.Task, error) {
	if c.tasksLoaded || c.Tasks == "" {
		return c.tasks, nil
	}
	tasks, err := task.Load(c.Tasks)
	if err != nil {
		return nil, fmt.Errorf("--tasks: %w", err)
	}
	log.Info("tasks loaded", "dir", c.Tasks, "count", len(tasks))
	c.tasks, c.tasksLoaded = tasks, true
	return tasks, nil
}
