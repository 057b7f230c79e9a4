// Command deskenv is the appliance: one desktop served to agents over MCP, to
// people over WebRTC in the browser, and to trainers over a control plane, all
// from one HTTP server.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	stdlog "log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jezek/xgb"
	"golang.org/x/net/netutil"

	"github.com/deskenv/deskenv/appliance"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if err := harden(); err != nil {
		fmt.Fprintln(os.Stderr, "deskenv:", err)
		os.Exit(1)
	}
	// Tokens given as flags are in /proc/PID/cmdline, which anyone on the
	// machine can read: run again without them (they go over a pipe).
	if err := reexecWithoutTokens(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "deskenv:", err)
		os.Exit(1)
	}
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	name, args := subcommand(args)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	err := fmt.Errorf("unknown command %q (try: deskenv --help)", name)
	if cmd, ok := commands()[name]; ok {
		err = cmd(ctx, args, stdin, stdout, stderr)
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "deskenv:", err)
		if errors.As(err, new(usageError)) {
			return 2
		}
		return 1
	}
	return 0
}

// subcommand splits the subcommand's name off args: serve when the first
// argument is a flag or there is none.
func subcommand(args []string) (name string, rest []string) {
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		return args[0], args[1:]
	}
	return "serve", args
}

// command is one subcommand of deskenv.
type command func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error

// commands are deskenv's subcommands by name (usage lists them).
func commands() map[string]command {
	return map[string]command{
		"serve": func(ctx context.Context, args []string, _ io.Reader, _, stderr io.Writer) error {
			return serveCmd(ctx, args, stderr)
		},
		"mcp": mcpCmd,
		"health": func(ctx context.Context, args []string, _ io.Reader, _, stderr io.Writer) error {
			return healthCmd(ctx, args, stderr)
		},
		"export": func(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
			return exportCmd(ctx, args, stdout, stderr)
		},
		"replay": func(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
			return replayCmd(ctx, args, stdout, stderr)
		},
		"tasks": func(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
			return tasksCmd(ctx, args, stdout, stderr)
		},
		"init": func(_ context.Context, args []string, _ io.Reader, _, _ io.Writer) error {
			return initCmd(args)
		},
		"version": func(_ context.Context, _ []string, _ io.Reader, stdout, _ io.Writer) error {
			_, err := fmt.Fprintln(stdout, "deskenv", version)
			return err
		},
		"help": func(_ context.Context, _ []string, _ io.Reader, stdout, stderr io.Writer) error {
			_, fs, _ := parseConfig("deskenv", nil, stderr)
			usage(fs, stdout)
			return nil
		},
	}
}

func serveCmd(ctx context.Context, args []string, stderr io.Writer) error {
	cfg, _, err := parseConfig("deskenv", args, stderr)
	if err != nil {
		return err
	}
	log := cfg.logger(stderr)
	quietXGB(log)
	app, err := startAppliance(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer app.Close()

	addr := listenAddr(cfg, app.local)
	warnExposure(cfg, addr, app.local, log)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s (set another with --addr): %w", addr, err)
	}
	// A cap on open connections: past it, new ones wait in the kernel's
	// backlog instead of taking a file descriptor each. Idle ones are
	// closed after --idle-timeout, so waiting ones get their turn.
	ln = netutil.LimitListener(ln, cfg.MaxConns)
	srv := newServer(cfg, app.Handler())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	where := displayAddr(ln.Addr().String())
	if cfg.Desktops > 1 {
		log.Info("deskenv is ready", "url", "http://"+where+"/", "leases", "http://"+where+"/leases", "mcp", "http://"+where+"/d/{i}/mcp", "display", app.display)
	} else {
		log.Info("deskenv is ready", "url", "http://"+where+"/", "mcp", "http://"+where+"/mcp", "display", app.display)
	}

	select {
	case err := <-errc:
		return fmt.Errorf("HTTP server on %s: %w", addr, err)
	case <-ctx.Done():
	}
	log.Info("shutting down")
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil {
		log.Warn("HTTP shutdown", "err", err)
	}
	return nil
}

// served is what serveCmd serves: one desktop or a pool of them, whether
// it has tokens, and its display(s) for the ready line.
type served struct {
	handlerCloser
	local   bool
	display string
}

// handlerCloser is an appliance.Desktop or an appliance.Pool.
type handlerCloser interface {
	Handler() http.Handler
	Close() error
}

// startAppliance starts a pool with --desktops above 1, else one desktop.
func startAppliance(ctx context.Context, cfg config, log *slog.Logger) (served, error) {
	if cfg.Desktops > 1 {
		p, err := appliance.NewPool(ctx, cfg.Config, log)
		if err != nil {
			return served{}, err
		}
		return served{p, p.Local(), fmt.Sprintf("%d desktops", p.Len())}, nil
	}
	a, err := appliance.New(ctx, cfg.Config, log)
	if err != nil {
		return served{}, err
	}
	return served{a, a.Local(), a.DisplayName()}, nil
}

// listenAddr is --addr, or :8080. Without tokens anyone who reaches the
// port may drive the desktop: only this machine may, unless the operator
// says otherwise.
func listenAddr(cfg config, local bool) string {
	switch {
	case cfg.Addr != "":
		return cfg.Addr
	case local:
		return "127.0.0.1:8080"
	default:
		return ":8080"
	}
}

// warnExposure says loudly when the appliance can be driven, or its tokens
// read, by more than its operator meant.
func warnExposure(cfg config, addr string, local bool, log *slog.Logger) {
	if isLoopback(addr) {
		return
	}
	if local {
		log.Warn("no tokens configured and listening beyond this machine: anyone who reaches the port can drive the desktop", "addr", addr)
	}
	if len(cfg.tokenFlags) > 0 {
		// Any local user (and the desktop's own programs) can read a
		// process's command line; variables and files are not on display.
		log.Warn("tokens given as flags can be read by anyone on this machine in the process list: use DESKENV_AGENT_TOKEN, DESKENV_OPERATOR_TOKEN and DESKENV_VIEWER_TOKEN, or --tokens-file, instead",
			"flags", strings.Join(cfg.tokenFlags, ","), "addr", addr)
	}
}

// newServer is the appliance's HTTP server. Headers must arrive within
// --read-header-timeout (also for a new connection's first request) and an
// idle keep-alive connection is closed after --idle-timeout. There is no
// server-wide ReadTimeout or WriteTimeout: they would cut websockets and
// MCP's event streams; the front door sets per-route deadlines instead
// (--body-read-timeout, --write-timeout).
func newServer(cfg config, h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		// The door asks who opened a connection (desktopRefusal).
		ConnContext: appliance.ConnContext,
	}
}

func mcpCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("deskenv mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	stdio := fs.Bool("stdio", false, "serve MCP over stdin/stdout")
	// The rest of the flags are the appliance's; split them off.
	var own, rest []string
	for _, a := range args {
		if a == "--stdio" || a == "-stdio" {
			own = append(own, a)
		} else {
			rest = append(rest, a)
		}
	}
	if err := fs.Parse(own); err != nil {
		return err
	}
	if !*stdio {
		return errors.New("deskenv mcp: only --stdio is supported here; for HTTP run `deskenv` and use /mcp")
	}
	cfg, _, err := parseConfig("deskenv mcp", rest, stderr)
	if err != nil {
		return err
	}
	// stdout carries the protocol: every log line goes to stderr.
	log := cfg.logger(stderr)
	quietXGB(log)
	cfg.NoStream = true
	app, err := appliance.New(ctx, cfg.Config, log)
	if err != nil {
		return err
	}
	defer app.Close()
	return app.ServeStdio(ctx, stdin, stdout)
}

func healthCmd(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("deskenv health", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "http://127.0.0.1:8080/health", "health endpoint to ask")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("health check: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("health check: %s: %s", resp.Status, body)
	}
	return nil
}

// quietXGB routes the X library's own messages ("Trying connection without
// authority info" on every connection) to the debug log instead of stderr.
// xgb keeps its logger in a package variable; main is the one place that may
// set it.
func quietXGB(log *slog.Logger) {
	xgb.Logger = stdlog.New(slogWriter{log}, "", 0)
}

type slogWriter struct{ log *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	w.log.Debug(strings.TrimSpace(string(p)), "from", "xgb")
	return len(p), nil
}

// isLoopback reports whether a listen address only accepts this machine.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// displayAddr turns a listen address into one a person can paste.
func displayAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}
