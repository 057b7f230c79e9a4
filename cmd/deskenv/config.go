package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/deskenv/deskenv/appliance"
)

// config is everything deskenv can be told, from flags or DESKENV_*
// environment variables (a flag on the command line wins over the variable):
// the appliance's settings and the HTTP server's and the log's own.
type config struct {
	appliance.Config

	Addr string

	// the HTTP server (the front door's own bounds are in appliance.Config)
	ReadHeaderTimeout time.Duration
	IdleTimeout       time.Duration
	MaxConns          int

	LogLevel  string
	LogFormat string

	// tokenFlags are the token flags given on the command line (not from
	// the environment), which any local user can read in the process list.
	tokenFlags []string
}

func defaultConfig() config {
	c := config{
		Config:            appliance.DefaultConfig(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxConns:          1024,
		LogLevel:          "info",
		LogFormat:         "text",
	}
	c.Version = version
	return c
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
	str(&c.Apps, "apps", "session apps started on the desktop, separated by ';' (e.g. \"xterm;mousepad\"); empty for none. They run in either --session; the desktop session's panel and wallpaper are not apps and stay")
	str(&c.Session, "session", "the desktop session: desktop (openbox, a tint2 panel with launchers for a terminal, Chromium, files, editor, calculator, PDF viewer, LibreOffice Calc and Writer, a wallpaper, app settings without first-run dialogs), bare (openbox and --apps, for light pools), or auto: desktop when its programs are installed (scripts/install-deps.sh apps) and --wm and --apps are not empty, else bare")
	fs.BoolVar(&c.Animations, "animations", c.Animations, "let the desktop's GTK applications and Chromium animate (fades, sliding tabs, spinners) and blink their text cursors; off by default, so a settle is not stretched by either, a screenshot is not taken halfway through one, and two screenshots of a still screen are the same"+envNote("animations"))
	str(&c.Home, "home", "the desktop user's home directory, restored from its baseline on every reset (default: "+appliance.SessionHomes+"/USER for the session user, or $XDG_DATA_HOME/deskenv/home when the session shares deskenv's user; never your own home)")
	str(&c.SessionUser, "session-user", "the user the desktop session (window manager, apps, bash trait) runs as, never deskenv's own; pool mode: a prefix (users PREFIX0, PREFIX1, ...) or one name per desktop, comma-separated. As root the default is "+appliance.DefaultSessionUser+", created if missing")
	fs.BoolVar(&c.AllowSharedUser, "allow-shared-user", c.AllowSharedUser, "allow the bash and files traits when the session cannot run as a user of its own (they would hand the agent deskenv's own user: its files, tasks and episodes)"+envNote("allow-shared-user"))

	str(&c.MCPTools, "mcp-tools", "MCP tool shapes, comma-separated: computer (one Anthropic-shaped tool), tools (one tool per action), codeact (run_script: a Starlark program calling the actions), openai, gemini, pyautogui (those models' computer tools, docs/DIALECTS.md)")
	str(&c.MCPTraits, "mcp-traits", "optional MCP tool groups, comma-separated, none by default: "+appliance.TraitUsage())
	fs.BoolVar(&c.FindTools, "mcp-find-tools", c.FindTools, "add find_tools, which searches the other tools by words and returns their schemas"+envNote("mcp-find-tools"))
	fs.BoolVar(&c.DeferTools, "mcp-defer-tools", c.DeferTools, "list only find_tools, call_tool, screenshot, computer and run_script; the other tools are found with find_tools and run with call_tool (implies --mcp-find-tools)"+envNote("mcp-defer-tools"))
	str(&c.ImageFormat, "image-format", "screenshot encoding: png or jpeg")
	num(&c.JPEGQuality, "jpeg-quality", "JPEG quality 1-100 when --image-format=jpeg")
	fs.BoolVar(&c.ScreenshotPointer, "screenshot-pointer", c.ScreenshotPointer, "draw the mouse pointer into agents' screenshots, zooms and recorded observations, as the reference tool's scrot -p does; --screenshot-pointer=false leaves it out"+envNote("screenshot-pointer"))
	dur(&c.SettleQuiet, "settle-quiet", "after a mutating action, the screen must be unchanged this long before the screenshot is taken")
	dur(&c.SettleMax, "settle-max", "the longest to wait for the screen to settle before taking the screenshot anyway")
	dur(&c.SettleIdleQuiet, "settle-idle-quiet", "a shorter quiet period that is enough when the desktop's programs used no CPU through its second half (an application that is done drawing sleeps; one about to draw again mostly computes first); 0, or not below --settle-quiet, waits the whole --settle-quiet")

	num(&c.FPS, "fps", "video frames per second for viewers")
	num(&c.BitrateKbps, "bitrate", "video bitrate in kbit/s: where congestion control starts and, unless --bitrate-max is higher, its ceiling; with --fixed-bitrate, the bitrate")
	num(&c.MinBitrateKbps, "bitrate-min", "the lowest video bitrate congestion control goes down to, kbit/s (0: 300, or --bitrate if lower)")
	num(&c.MaxBitrateKbps, "bitrate-max", "the highest video bitrate congestion control goes up to, kbit/s (0: --bitrate)")
	fs.BoolVar(&c.FixedBitrate, "fixed-bitrate", c.FixedBitrate, "send --bitrate at --fps whatever the viewers' links do (no congestion control)"+envNote("fixed-bitrate"))
	str(&c.Preset, "preset", "x264 preset: ultrafast or superfast")
	str(&c.ICEServers, "ice-servers", "STUN/TURN URLs for WebRTC, comma-separated (none needed on localhost)")
	str(&c.NAT1To1, "nat-1to1", "public IP addresses to announce for WebRTC when behind 1:1 NAT, comma-separated")
	str(&c.TURNSecretFile, "turn-secret-file", "file holding the secret shared with the TURN server of --ice-servers (coturn's static-auth-secret): each viewer gets credentials of its own for --turn-ttl instead of a static TURN password")
	dur(&c.TURNTTL, "turn-ttl", "how long the TURN credentials minted for a viewer last (1m..168h; 0: 24h)")
	num(&c.UDPPort, "udp-port", "serve all WebRTC media on this one UDP port (0: ephemeral ports); in pool mode desktop i uses this port + i")
	str(&c.Policy, "policy", "who may act: shared (agent and the person in control), human (agent actions refused while a person has control), agent (people watch only)")
	fs.BoolVar(&c.NoStream, "no-stream", c.NoStream, "do not serve the browser stream"+envNote("no-stream"))

	str(&c.Mode, "mode", "sim (reset, state and tasks on) or prod (off)")
	str(&c.Tasks, "tasks", "directory of task files (*.json) loaded at start")
	str(&c.AgentToken, "agent-token", "bearer token for agents (MCP only)")
	str(&c.OperatorToken, "operator-token", "bearer token for operators (control plane and human control)")
	str(&c.ViewerToken, "viewer-token", "bearer token for viewers (watch only)")
	str(&c.AnnotatorToken, "annotator-token", "bearer token for annotators (take control, tasks, record and review their own episodes)")
	str(&c.TokensFile, "tokens-file", "file with lines ROLE=TOKEN (agent, operator, annotator, viewer)")
	str(&c.Episodes, "episodes", "directory where episodes are recorded (default: $XDG_DATA_HOME/deskenv/episodes)")

	num(&c.Desktops, "desktops", "pool mode: run this many independent desktops, each under /d/{i}/, handed out by POST /leases")
	fs.BoolVar(&c.PoolAgentToken, "pool-agent-token", c.PoolAgentToken, "pool mode: accept an agent token from --agent-token or --tokens-file on every desktop (otherwise refused: each lease has its own)"+envNote("pool-agent-token"))
	num(&c.Warm, "warm", "pool mode: keep this many desktops reset and ready, refilled in the background, so POST /leases hands one out at once (0: every lease waits for its reset)")
	str(&c.WarmTask, "warm-task", "pool mode with --warm: the task id the warm desktops are reset into; a lease naming it (and no seed) gets one at once, other leases are reset on their own time")
	dur(&c.StudioIdle, "studio-idle", "pool mode: an annotator's desktop (from the pool's page, POST /studio/lease) goes back to the pool after this long with no viewer connected")

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
	for _, name := range []string{"agent-token", "operator-token", "viewer-token", "annotator-token"} {
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

// validate checks the appliance's settings, then the server's and the log's.
func (c *config) validate() error {
	if err := c.Config.Validate(); err != nil {
		return err
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"--read-header-timeout", c.ReadHeaderTimeout}, {"--idle-timeout", c.IdleTimeout}} {
		if d.v <= 0 {
			return fmt.Errorf("%s %s: must be positive, or connections are held forever", d.name, d.v)
		}
	}
	if c.MaxConns < 1 {
		return fmt.Errorf("--max-conns %d: must be at least 1", c.MaxConns)
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		return err
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		return fmt.Errorf("--log-format %q: use text or json", c.LogFormat)
	}
	return nil
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
