package appliance

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/deskenv/deskenv/auth"
	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/screen"
	"github.com/deskenv/deskenv/task"
)

// Config is everything a desktop (or a pool of them) can be told: settings
// only, in the form deskenv's flags give them (each field is named after its
// flag, and errors name the flag). DefaultConfig has the defaults.
type Config struct {
	// the front door's bounds on every request (auth.Limits)
	BodyReadTimeout time.Duration
	WriteTimeout    time.Duration
	MaxBody         int64

	// display
	Display   string
	Screen    string
	ModelSize string
	WM        string
	Apps      string
	Home      string
	// Session is the desktop session: desktop (openbox, the tint2 panel
	// and its launchers, a wallpaper, app settings in the home), bare
	// (openbox and the apps) or auto: desktop when its programs are
	// installed. Apps runs in either.
	Session string
	// Animations lets the session's GTK applications animate; off, they
	// are told the desktop prefers none (display.Config.Animations).
	Animations bool

	// SessionUser is who the desktop session runs as (pool mode: a prefix
	// or a list); AllowSharedUser lets the bash and files traits run when
	// the session cannot be separated from deskenv's own user.
	// SessionUserAuto says deskenv chose SessionUser, not the operator: when
	// another deskenv on the machine runs as it, this one takes another
	// (SessionUser-b, -c, ...) rather than refusing to start.
	SessionUser     string
	SessionUserAuto bool
	AllowSharedUser bool

	// Ports are the serve steps' listeners (task.Ports), for desktops one
	// process starts apart that should share them (`tasks check` does);
	// nil: a pool makes its own for its desktops, one desktop listens on
	// its own.
	Ports *task.Ports

	// agents
	MCPTools    string
	MCPTraits   string
	FindTools   bool
	DeferTools  bool
	ImageFormat string
	JPEGQuality int
	// ScreenshotPointer draws the mouse pointer into agents' screenshots,
	// zooms and recorded observations, as the reference tool's do.
	ScreenshotPointer bool
	SettleQuiet       time.Duration
	SettleMax         time.Duration
	// SettleIdleQuiet is the shorter quiet period a settle ends after when
	// the desktop's programs sat idle through its second half
	// (screen.SettleOptions.Activity); 0 waits the whole SettleQuiet.
	SettleIdleQuiet time.Duration

	// people
	FPS         int
	BitrateKbps int
	Preset      string
	ICEServers  string
	NAT1To1     string
	// TURNSecretFile holds the secret shared with the TURN server of
	// ICEServers: credentials are minted per viewer for TURNTTL (stream's
	// TURNSecret). A file, so the secret is on no command line.
	TURNSecretFile string
	TURNTTL        time.Duration
	UDPPort        int
	Policy         string
	NoStream       bool
	// MinBitrateKbps and MaxBitrateKbps bound congestion control (0: the
	// stream's defaults, 300 and BitrateKbps); FixedBitrate turns it off.
	MinBitrateKbps, MaxBitrateKbps int
	FixedBitrate                   bool

	// control plane
	Mode          string
	Tasks         string
	AgentToken    string
	OperatorToken string
	ViewerToken   string
	// AnnotatorToken is for people recording demonstrations (auth.RoleAnnotator).
	AnnotatorToken string
	TokensFile     string
	Episodes       string

	// Desktops > 1 is pool mode: that many independent desktops under /d/{i}/.
	Desktops int
	// PoolAgentToken lets a pool-wide agent token through (every desktop
	// accepts it), which undoes per-lease tokens: refused without it.
	PoolAgentToken bool
	// Warm is how many desktops of the pool are kept reset and ready to
	// lease at once (0: every lease waits for its reset); WarmTask is the
	// task they are reset into ("" for none).
	Warm     int
	WarmTask string
	// StudioIdle is how long an annotator's desktop (pool mode, POST
	// /studio/lease) stays theirs with no viewer connected (studio.go);
	// 0 is 10 minutes.
	StudioIdle time.Duration

	// Version is what the MCP server and the control plane report.
	Version string
}

// DefaultConfig is the configuration deskenv starts with before its flags.
func DefaultConfig() Config {
	return Config{
		Screen:      "1280x800x24",
		ModelSize:   "auto",
		WM:          "openbox",
		Apps:        "xterm",
		Session:     "auto",
		MCPTools:    "computer,tools",
		ImageFormat: "png",
		JPEGQuality: 80,
		// The reference takes its screenshots with scrot -p: models are
		// trained on screens that show the pointer.
		ScreenshotPointer: true,
		SettleQuiet:       80 * time.Millisecond,
		SettleMax:         2 * time.Second,
		SettleIdleQuiet:   40 * time.Millisecond,
		FPS:               30,
		BitrateKbps:       4000,
		Preset:            "ultrafast",
		Policy:            "shared",
		Mode:              "sim",
		Desktops:          1,
		StudioIdle:        10 * time.Minute,
		Version:           "dev",

		BodyReadTimeout: 30 * time.Second,
		WriteTimeout:    5 * time.Minute,
		MaxBody:         auth.DefaultBodyLimit,
	}
}

// Validate reports the first setting that cannot work, naming its flag.
func (c *Config) Validate() error {
	checks := []func() error{
		c.checkScreen, c.checkShots, c.checkTools, c.checkTraits,
		c.checkChoices, c.checkRanges, c.checkLimits, c.checkPool,
	}
	for _, check := range checks {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

func (c *Config) checkScreen() error {
	_, _, _, err := c.ScreenSize()
	return err
}

// checkShots checks how screenshots are taken: the settle times.
func (c *Config) checkShots() error {
	if c.SettleQuiet <= 0 || c.SettleMax < c.SettleQuiet {
		return fmt.Errorf("--settle-quiet %s and --settle-max %s: both must be positive, and max at least quiet", c.SettleQuiet, c.SettleMax)
	}
	if c.SettleIdleQuiet < 0 {
		return fmt.Errorf("--settle-idle-quiet %s: want 0 (wait the whole --settle-quiet) or a duration shorter than --settle-quiet", c.SettleIdleQuiet)
	}
	return nil
}

// checkTools checks --mcp-tools: at least one shape, each one known.
func (c *Config) checkTools() error {
	shapes := splitList(c.MCPTools, ",")
	known := []string{"computer", "tools", "codeact", "openai", "gemini", "pyautogui"}
	if len(shapes) == 0 {
		return fmt.Errorf("--mcp-tools is empty: name at least one of %s", strings.Join(known, ", "))
	}
	for _, m := range shapes {
		if !slices.Contains(known, m) {
			return fmt.Errorf("--mcp-tools %q: unknown shape %q (use %s, or several: computer,tools)", c.MCPTools, m, strings.Join(known, ", "))
		}
	}
	return nil
}

// checkTraits checks that every trait --mcp-traits names is known.
func (c *Config) checkTraits() error {
	for _, tr := range splitList(c.MCPTraits, ",") {
		if !slices.ContainsFunc(traitTable(), func(e traitEntry) bool { return e.name == tr }) {
			return unknownTrait(c.MCPTraits, tr)
		}
	}
	return nil
}

// checkChoices checks the settings that are one of a few words.
func (c *Config) checkChoices() error {
	choices := []struct {
		flag, value, hint string
		allowed           []string
	}{
		{"--image-format", c.ImageFormat, "use png or jpeg", []string{"png", "jpeg"}},
		{"--mode", c.Mode, "use sim or prod", []string{"sim", "prod"}},
		{"--session", c.Session, "use desktop, bare or auto (desktop when its programs are installed)", []string{"auto", "desktop", "bare"}},
		{"--policy", c.Policy, "use shared, human or agent", []string{"shared", "human", "agent"}},
	}
	for _, ch := range choices {
		if !slices.Contains(ch.allowed, ch.value) {
			return fmt.Errorf("%s %q: %s", ch.flag, ch.value, ch.hint)
		}
	}
	return nil
}

// checkRanges checks the numbers that have bounds.
func (c *Config) checkRanges() error {
	ranges := []struct {
		flag          string
		value, lo, hi int
		want          string
	}{
		{"--jpeg-quality", c.JPEGQuality, 1, 100, "must be between 1 and 100"},
		{"--fps", c.FPS, 1, 60, "must be between 1 and 60"},
		{"--bitrate", c.BitrateKbps, 100, 100000, "must be between 100 and 100000 kbit/s"},
		{"--bitrate-min", c.MinBitrateKbps, 0, c.BitrateKbps, "must be 100 to --bitrate (0: 300 kbit/s)"},
		{"--bitrate-max", c.MaxBitrateKbps, 0, 100000, "must be at most 100000 kbit/s (0: --bitrate)"},
		{"--udp-port", c.UDPPort, 0, 65535, "must be a port number"},
		{"--desktops", c.Desktops, 1, 256, "must be between 1 and 256"},
	}
	for _, r := range ranges {
		if r.value < r.lo || r.value > r.hi {
			return fmt.Errorf("%s %d: %s", r.flag, r.value, r.want)
		}
	}
	if c.MinBitrateKbps != 0 && c.MinBitrateKbps < 100 {
		return fmt.Errorf("--bitrate-min %d: must be 100 to --bitrate (0: 300 kbit/s)", c.MinBitrateKbps)
	}
	if c.MaxBitrateKbps != 0 && c.MaxBitrateKbps < c.BitrateKbps {
		// --bitrate is where congestion control starts: a ceiling under it
		// would start above the ceiling.
		return fmt.Errorf("--bitrate-max %d: must be at least --bitrate (%d), or 0 for --bitrate", c.MaxBitrateKbps, c.BitrateKbps)
	}
	return nil
}

// checkLimits checks the front door's bounds on every request.
func (c *Config) checkLimits() error {
	if c.BodyReadTimeout < 0 || c.WriteTimeout < 0 {
		return fmt.Errorf("--body-read-timeout %s and --write-timeout %s: use 0 for none or a positive duration", c.BodyReadTimeout, c.WriteTimeout)
	}
	if c.MaxBody < 1<<10 {
		return fmt.Errorf("--max-body %d: must be at least 1024 bytes", c.MaxBody)
	}
	return nil
}

// checkPool checks what pool mode cannot do.
func (c *Config) checkPool() error {
	if c.StudioIdle < 0 {
		return fmt.Errorf("--studio-idle %s: must be more than 0 (an annotator's desktop goes back to the pool after this long with nobody watching)", c.StudioIdle)
	}
	if c.Desktops > 1 && c.Display != "" {
		return fmt.Errorf("--desktops %d with --display %s: pool mode starts its own displays; attach to an existing one only with a single desktop", c.Desktops, c.Display)
	}
	return c.checkWarm()
}

// checkWarm checks --warm and --warm-task; the task's id is checked against
// the loaded tasks when the pool starts.
func (c *Config) checkWarm() error {
	switch {
	case c.Warm < 0:
		return fmt.Errorf("--warm %d: must be 0 (no warm desktops) or more", c.Warm)
	case c.Warm > 0 && c.Desktops < 2:
		return fmt.Errorf("--warm %d: warm desktops are for pool mode; add --desktops 2 or more", c.Warm)
	case c.Warm > c.Desktops:
		return fmt.Errorf("--warm %d with --desktops %d: the pool cannot keep more desktops warm than it has", c.Warm, c.Desktops)
	case c.Warm > 0 && c.Mode != "sim":
		return fmt.Errorf("--warm %d with --mode %s: warming a desktop is a reset, which only --mode sim allows", c.Warm, c.Mode)
	case c.WarmTask != "" && c.Warm == 0:
		return fmt.Errorf("--warm-task %q without --warm: say how many desktops to keep warm in that task, e.g. --warm 2", c.WarmTask)
	}
	return nil
}

// limits are the front door's bounds on every request.
// The desktops' own session users are refused whatever they carry
// (desktopRefusal).
func (c *Config) limits(iso *isolation) auth.Limits {
	return auth.Limits{Body: c.MaxBody, BodyRead: c.BodyReadTimeout, Write: c.WriteTimeout, Refuse: desktopRefusal(iso)}
}

// settle is how long a screen must stay still before a screenshot; act
// tells how busy the desktop's programs are (nil: not known, so the whole
// quiet period is waited).
func (c *Config) settle(act screen.Activity) screen.SettleOptions {
	opt := screen.SettleOptions{Quiet: c.SettleQuiet, Max: c.SettleMax}
	if c.SettleIdleQuiet > 0 && c.SettleIdleQuiet < c.SettleQuiet && act != nil {
		opt.IdleQuiet, opt.Activity = c.SettleIdleQuiet, act
	}
	return opt
}

// ScreenSize is --screen as numbers; the depth is 24 when not given.
func (c *Config) ScreenSize() (w, h, depth int, err error) {
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
func (c *Config) desktopHome(session *sessionUser) (string, error) {
	home := c.Home
	if home == "" && session != nil {
		home = filepath.Join(SessionHomes, session.Name)
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
	if session != nil {
		if err := ownHome(home, session); err != nil {
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
func (c *Config) episodesDir() (string, error) {
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

// AppCommands are --apps as command lines, one per session app.
func (c *Config) AppCommands() [][]string {
	var apps [][]string
	for _, a := range splitList(c.Apps, ";") {
		apps = append(apps, strings.Fields(a))
	}
	if apps == nil {
		apps = [][]string{}
	}
	return apps
}

// DisplaySession is the display's session for --session: auto becomes
// desktop when the desktop's programs are installed, else bare, saying on
// log what is missing. --session desktop without them is an error.
//
// auto also gives bare when --wm or --apps was emptied: whoever pares the
// session down to a bare server (tests, light pools) does not want a panel
// on it. --session desktop puts the panel there all the same.
func (c *Config) DisplaySession(log *slog.Logger) (string, error) {
	if c.Session == "auto" && (len(c.WMCommand()) == 0 || len(c.AppCommands()) == 0) {
		return display.SessionBare, nil
	}
	missing := display.MissingForDesktop()
	switch c.Session {
	case "desktop":
		if len(missing) > 0 {
			return "", fmt.Errorf("--session desktop: %s not installed (scripts/install-deps.sh apps installs them; --session bare is the xterm desktop)", strings.Join(missing, ", "))
		}
		return display.SessionDesktop, nil
	case "bare":
		return display.SessionBare, nil
	}
	if len(missing) > 0 {
		log.Warn("the bare desktop (openbox and --apps) runs: the full desktop's programs are not installed; scripts/install-deps.sh apps installs them", "missing", strings.Join(missing, ","))
		return display.SessionBare, nil
	}
	return display.SessionDesktop, nil
}

// WMCommand is --wm as a command line; empty for none.
func (c *Config) WMCommand() []string {
	f := strings.Fields(c.WM)
	if f == nil {
		f = []string{}
	}
	return f
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

// loadTasks loads the task files in dir (--tasks); none when dir is empty.
// Pool mode loads them once for all its desktops, and reports a bad file
// once, not once per desktop.
func loadTasks(dir string, log *slog.Logger) ([]*task.Task, error) {
	if dir == "" {
		return nil, nil
	}
	tasks, err := task.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("--tasks: %w", err)
	}
	log.Info("tasks loaded", "dir", dir, "count", len(tasks))
	return tasks, nil
}
