// Package mcpserver is deskenv's face for agents: the desktop's screen,
// keyboard and mouse as MCP tools, served over streamable HTTP and stdio with
// mcp-go.
//
// Tool shapes can be offered alone or together (Config.Modes):
//
//   - "computer": one tool named computer whose input is exactly the tool_use
//     input of Anthropic's computer_20251124 tool, so an agent loop written
//     for the Anthropic API forwards tool_use.input unchanged;
//   - "tools": one tool per action (screenshot, left_click, type, ...), with
//     precise schemas and read-only / destructive annotations, for MCP hosts
//     whose models were not trained on the computer tool;
//   - "codeact": run_script, a Starlark program with every action bound as a
//     function, for agents that loop, check and filter in code and keep bulky
//     observations out of their context;
//   - "openai", "gemini", "pyautogui": other models' computer tools, spoken
//     natively and run as the computer tool's actions (dialect.go).
//
// The first three are built from one table of tool definitions (Tools), so a
// field, a description or a check is written once. find_tools
// (Config.FindTools) searches that table; with Config.DeferTools only the
// entry points are listed and the rest run through call_tool, so a host can
// start from a short list.
//
// Traits (Config.Traits) add optional tool groups beyond the screen, each
// off unless listed: BashTrait, FilesTrait (the user's home) and
// ClipboardTrait here, or any type with the Trait interface. A trait is a
// list of TraitTools (parameters, hints, a Run function), and the server
// makes each both an MCP tool and a run_script function, so a new trait is
// one type in its own file and nothing else in this package.
//
// Every action runs through hci.Executor.Do, as SourceAgent from a tool and
// SourceScript from a script, so it is published on the hci bus (and
// recorded) like any other. A mutating tool call answers with a screenshot
// taken once the screen has settled, not after a fixed sleep. Bad input is a
// tool error (isError) with a message the model can act on, never a protocol
// failure.
package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/deskenv/deskenv/auth"
	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/screen"
)

// Mode is a tool shape the server offers.
type Mode string

const (
	// ModeComputer offers one Anthropic-shaped tool named computer.
	ModeComputer Mode = "computer"
	// ModeTools offers one tool per action.
	ModeTools Mode = "tools"
)

// Config configures a Server. The zero value is usable.
type Config struct {
	// Modes are the tool shapes to offer. Empty means both, computer and
	// tools, as cmd/deskenv does by default: the computer tool for agent loops
	// built on the Anthropic API, the granular tools for every other host.
	Modes []Mode
	// Settle is how a mutating action waits for the screen before its
	// screenshot. Zero fields take the screen package's defaults.
	Settle screen.SettleOptions
	// Name and Version identify the server in the MCP handshake; defaults
	// "deskenv" and "dev".
	Name, Version string
	// Logger receives one debug line per tool call and warnings; default
	// slog.Default().
	Logger *slog.Logger
	// MaxTextBytes caps the text of one type action, below hci's own cap
	// (hci.MaxTextBytes, 64 KiB) if set lower. Zero means hci's cap.
	MaxTextBytes int
	// Script bounds run_script (ModeCodeAct).
	Script ScriptLimits
	// FindTools adds find_tools, a search over the other tools.
	FindTools bool
	// DeferTools (with FindTools) keeps tools/list short: it shows only the
	// entry points (find_tools, call_tool, screenshot, computer,
	// run_script). Every other tool is found with find_tools, which hands
	// out its schema, and run through call_tool, so hosts that only call
	// listed tools can use them all.
	DeferTools bool
	// Traits are optional tool groups (BashTrait, FilesTrait,
	// ClipboardTrait, or a caller's own), in tools/list order; none in the
	// zero value. Two traits of one name, or two tools of one name, are
	// refused.
	Traits []Trait
	// ProgressEvery is how often a call still running tells a client that
	// asked for progress (a progressToken) that it is (default 5 s).
	ProgressEvery time.Duration
	// Page, when set, is asked for the URL of the browser tab the desktop
	// shows, which Gemini's computer use returns with every screenshot.
	// Without it, or when it has no browser, the Gemini functions answer
	// with the screenshot alone.
	Page PageSource
}

// PageSource tells the URL of the browser tab the desktop shows (the
// control plane's: the running task's browser, over its DevTools pipe).
type PageSource interface {
	PageURL(ctx context.Context) (string, error)
}

// Server serves one desktop's executor and screen over MCP.
type Server struct {
	exec    *hci.Executor
	shooter *screen.Shooter
	capt    *screen.Capturer
	cfg     Config
	log     *slog.Logger
	// traitTools are the configured traits' tools, gathered and checked
	// once by New.
	traitTools []TraitTool

	toolsMu sync.RWMutex
	space   hci.Space // the model space the tools describe
	tools   []Tool    // every tool this server offers, in tools/list order
	mcp     *server.MCPServer
	http    *server.StreamableHTTPServer

	// last is the base64 of the last image sent, so an unchanged screen,
	// which the Shooter hands back as the same encoded bytes, is not
	// re-encoded to base64 either.
	lastMu   sync.Mutex
	lastData []byte
	last64   string
}

// New builds the MCP server over an executor and the screen of the same
// display. It registers the tools for cfg.Modes; serve it with Handler or
// ServeStdio.
func New(exec *hci.Executor, shooter *screen.Shooter, capt *screen.Capturer, cfg Config) (*Server, error) {
	if exec == nil || shooter == nil || capt == nil {
		return nil, errors.New("mcpserver: New needs an executor, a shooter and a capturer (one was nil)")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	traitTools, err := traitTools(cfg.Traits)
	if err != nil {
		return nil, err
	}
	s := &Server{exec: exec, shooter: shooter, capt: capt, cfg: cfg, log: cfg.Logger, space: exec.Space(), traitTools: traitTools}
	if err := s.space.Check(); err != nil {
		return nil, fmt.Errorf("mcpserver: the executor's space: %w", err)
	}
	// The server's own tools never take OpenEnv's reserved names; traits'
	// tools were checked for them (traitTools).
	s.tools = s.buildTools()

	s.mcp = server.NewMCPServer(cfg.Name, cfg.Version,
		// listChanged: the schemas carry the model space, and change with it
		// (SpaceChanged).
		server.WithToolCapabilities(true),
		server.WithInstructions(s.instructions()),
		server.WithToolHandlerMiddleware(s.withProgress),
	)
	s.mcp.AddTools(serverTools(s.listed(s.tools))...)
	// The default session manager hands out session ids and refuses (404)
	// a request after initialize that carries none or an unknown one;
	// clients that keep no session at all, OpenEnv's production mode, are
	// answered beside it by plainRPC (Handler, plain.go).
	s.http = server.NewStreamableHTTPServer(s.mcp, server.WithStreamableHTTPLogger(s.log))
	return s, nil
}

// withDefaults fills in the zero fields and refuses settings out of range
// or at odds with each other.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.Name == "" {
		cfg.Name = "deskenv"
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ProgressEvery <= 0 {
		cfg.ProgressEvery = 5 * time.Second
	}
	if cfg.MaxTextBytes < 0 {
		return cfg, fmt.Errorf("mcpserver: MaxTextBytes is %d: it must be 0 (hci's cap of %d) or positive", cfg.MaxTextBytes, hci.MaxTextBytes)
	}
	if cfg.MaxTextBytes == 0 || cfg.MaxTextBytes > hci.MaxTextBytes {
		cfg.MaxTextBytes = hci.MaxTextBytes
	}
	if cfg.Settle.Quiet < 0 || cfg.Settle.Max < 0 || cfg.Settle.Interval < 0 {
		return cfg, fmt.Errorf("mcpserver: settle durations must not be negative (quiet %s, max %s, interval %s)",
			cfg.Settle.Quiet, cfg.Settle.Max, cfg.Settle.Interval)
	}
	if cfg.DeferTools && !cfg.FindTools {
		return cfg, errors.New("mcpserver: DeferTools hides tools that only find_tools can reveal: turn FindTools on too")
	}
	modes, err := normalizeModes(cfg.Modes)
	if err != nil {
		return cfg, err
	}
	cfg.Modes = modes
	return cfg, nil
}

// buildTools defines the tools of the configured modes for s.space.
func (s *Server) buildTools() []Tool {
	var tools []Tool
	listTraits := false
	for _, m := range s.cfg.Modes {
		switch m {
		case ModeComputer:
			tools = append(tools, s.computerTool())
			listTraits = true
		case ModeTools:
			tools = append(tools, s.actionTools()...)
			listTraits = true
		case ModeCodeAct:
			tools = append(tools, s.scriptTool())
		case ModeOpenAI, ModeGemini, ModePyAutoGUI:
			tools = append(tools, s.dialectTools(m)...)
			listTraits = true
		}
	}
	// In codeact alone the traits are functions of run_script only: the
	// point of that mode is a short tool list.
	if listTraits {
		tools = append(tools, s.traitMCPTools()...)
	}
	if s.cfg.FindTools {
		tools = append(tools, s.findToolsTool())
	}
	if s.cfg.DeferTools {
		tools = append(tools, s.callToolTool())
	}
	return tools
}

// listed are the tools MCP's tools/list shows: all of them, or with
// DeferTools the entry points only.
func (s *Server) listed(tools []Tool) []Tool {
	if !s.cfg.DeferTools {
		return tools
	}
	var out []Tool
	for _, t := range tools {
		if entryTool(t.Name) {
			out = append(out, t)
		}
	}
	return out
}

func serverTools(tools []Tool) []server.ServerTool {
	out := make([]server.ServerTool, len(tools))
	for i, t := range tools {
		out[i] = t.ServerTool()
	}
	return out
}

// SpaceChanged re-describes the tools after the executor's model space
// changed (a resize, another model size): their descriptions and coordinate
// bounds carry it. Connected clients are told the tool list changed. Tools
// that extensions added through MCP() are left alone.
func (s *Server) SpaceChanged() error {
	sp := s.exec.Space()
	if err := sp.Check(); err != nil {
		return fmt.Errorf("mcpserver: the executor's new space: %w", err)
	}
	s.toolsMu.Lock()
	s.space = sp
	s.tools = s.buildTools()
	tools := s.tools
	s.toolsMu.Unlock()
	s.mcp.AddTools(serverTools(s.listed(tools))...)
	return nil
}

// normalizeModes defaults, checks and de-duplicates the configured modes.
func normalizeModes(in []Mode) ([]Mode, error) {
	if len(in) == 0 {
		return []Mode{ModeComputer, ModeTools}, nil
	}
	var out []Mode
	for _, m := range in {
		m = Mode(strings.ToLower(strings.TrimSpace(string(m))))
		switch m {
		case ModeComputer, ModeTools, ModeCodeAct, ModeOpenAI, ModeGemini, ModePyAutoGUI:
		default:
			return nil, fmt.Errorf("mcpserver: unknown mode %q: use %q (one Anthropic-shaped tool), %q (one tool per action), %q (run_script), "+
				"%q, %q or %q (those models' computer tools) or several", m, ModeComputer, ModeTools, ModeCodeAct, ModeOpenAI, ModeGemini, ModePyAutoGUI)
		}
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out, nil
}

// entryTool reports the tools DeferTools still lists: enough to look at the
// screen, act through one general tool, and find the rest.
func entryTool(name string) bool {
	switch name {
	case "find_tools", "call_tool", hci.ActScreenshot, "computer", "run_script", openAITool, pyautoguiTool:
		return true
	}
	return false
}

// reservedName reports names OpenEnv's MCP bridge keeps for itself.
func reservedName(name string) bool {
	switch name {
	case "reset", "step", "state", "close":
		return true
	}
	return false
}

func (s *Server) instructions() string {
	text := fmt.Sprintf("This server drives one Linux desktop. Screenshots are %dx%d pixels and every coordinate "+
		"you send is in that space (origin top-left). Key names follow xdotool (ctrl+s, Return, Page_Down).",
		s.space.ModelW, s.space.ModelH)
	if slices.Contains(s.cfg.Modes, ModeComputer) || slices.Contains(s.cfg.Modes, ModeTools) {
		text += " Actions that change the screen answer with a screenshot taken once the screen has settled."
	}
	if slices.Contains(s.cfg.Modes, ModeCodeAct) {
		text += " run_script runs a Starlark program with every action as a function; only what it prints and shows comes back."
	}
	if slices.Contains(s.cfg.Modes, ModeGemini) {
		text += " Gemini's functions (click_at, type_text_at, ...) take points on a 1000 x 1000 grid over the screenshot instead."
	}
	if slices.Contains(s.cfg.Modes, ModePyAutoGUI) {
		text += " The pyautogui tool takes pixels, or fractions of the screenshot given as floats from 0 to 1."
	}
	if s.cfg.FindTools {
		text += " find_tools searches the tools by words and returns their schemas."
	}
	if s.cfg.DeferTools {
		text += " More tools exist than are listed (clicks, typing, keys, scrolling and others): find them with find_tools and run them with call_tool."
	}
	return text
}

// Handler serves MCP over streamable HTTP, and OpenEnv's production-mode
// JSON-RPC beside it (plain.go). cmd/deskenv mounts it at /mcp; it answers
// on any path it is mounted at.
func (s *Server) Handler() http.Handler { return plainRPC{mcp: s.mcp, next: s.http} }

// Register puts MCP's streamable HTTP at /mcp behind the appliance's front
// door d, for agents: POST calls (a body up to the door's limit), a GET
// event stream and DELETE of a session; the token only in the header.
func (s *Server) Register(d *auth.Door) {
	d.Handle("/mcp", auth.Policy{Roles: []auth.Role{auth.RoleAgent}, Stream: true}, s.Handler())
}

// ServeStdio serves MCP over in and out (one JSON-RPC message per line) until
// in ends or ctx is done; both are a clean end and return nil.
//
// mcp-go keeps the stdio session in a package variable, so one process should
// run one ServeStdio at a time.
func (s *Server) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	std := server.NewStdioServer(s.mcp)
	std.SetErrorLogger(slog.NewLogLogger(s.log.Handler(), slog.LevelWarn))
	// One worker keeps tool calls in the order they were sent: it is one
	// desktop, and a click overtaking the type before it is a different task.
	server.WithWorkerPoolSize(1)(std)
	err := std.Listen(ctx, in, out)
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("mcp over stdio: %w", err)
	}
	return nil
}

// MCP is the underlying mcp-go server, for extensions that add tools,
// resources or prompts.
func (s *Server) MCP() *server.MCPServer { return s.mcp }

// Tools returns the tools this server offers, each defined once with its
// schema, annotations and handler, for other faces (scripts, tool search)
// that reuse them.
func (s *Server) Tools() []Tool {
	s.toolsMu.RLock()
	defer s.toolsMu.RUnlock()
	return slices.Clone(s.tools)
}
