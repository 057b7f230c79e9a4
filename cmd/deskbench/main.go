// Command deskbench measures deskenv against the usual alternatives on this
// machine, side by side in one run.
//
//	deskbench latency [flags]   glass-to-glass latency, fps and CPU: deskenv's browser stream vs x11vnc + noVNC
//	deskbench network [flags]   the same behind shaped links: fps, latency, freezes, bitrate, keyframes (root)
//	deskbench pool [flags]      pool mode: memory per desktop, start rate, throughput with many agents
//	deskbench ways [flags]      one task solved as tools, computer and codeact: calls, turns, observation bytes
//	deskbench answers [flags]   how long the desktop's applications take to answer an action, against settle quiet periods
//	deskbench all               every benchmark with its defaults
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// subcommand is one benchmark: it parses its own flags from args.
type subcommand struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func subcommands() []subcommand {
	return []subcommand{
		{"latency", "glass-to-glass latency, fps and CPU of the browser stream vs x11vnc + noVNC", runLatency},
		{"pool", "pool mode: memory per idle desktop, start rate, actions/s with 8 agents, screenshot p50 under load", runPool},
		{"ways", "one task (edit-todo) solved as tools, computer and codeact: tool calls, turns, observation bytes", runWays},
		{"answers", "how long the desktop's applications take to answer an action: first draw, longest pause, last draw, against settle quiet periods", runAnswers},
		// Last in "all": it needs root, and says so, after the others ran.
		{"network", "the stream behind shaped links (rate, delay, loss) beside the fixed bitrate and noVNC; root", runNetwork},
		// "serve" is the latency benchmark's server child (one process per
		// stack, so its CPU can be read from /proc); not for people to call.
		{latencyServeCmd, "", runLatencyServe},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "deskbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return fmt.Errorf("name a benchmark")
		}
		return nil
	}
	if args[0] == "all" {
		for _, s := range subcommands() {
			if s.summary == "" {
				continue
			}
			fmt.Fprintf(stdout, "== %s\n", s.name)
			if err := s.run(ctx, nil, stdout, stderr); err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
		}
		return nil
	}
	for _, s := range subcommands() {
		if s.name == args[0] {
			return s.run(ctx, args[1:], stdout, stderr)
		}
	}
	usage(stderr)
	return fmt.Errorf("unknown benchmark %q", args[0])
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: deskbench BENCHMARK [flags]   (deskbench BENCHMARK -h for its flags)")
	fmt.Fprintln(w, "  all        every benchmark with its defaults")
	for _, s := range subcommands() {
		if s.summary != "" {
			fmt.Fprintf(w, "  %-10s %s\n", s.name, s.summary)
		}
	}
}
