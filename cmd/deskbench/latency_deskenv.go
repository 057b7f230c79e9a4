package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/stream"
	"github.com/deskenv/deskenv/web"
)

// deskenvServer wires the browser client and the stream on the display named
// in c, as the appliance does (no tokens: local mode).
func deskenvServer(ctx context.Context, c serveConfig, log *slog.Logger) (http.Handler, func() error, error) {
	d, err := display.Start(ctx, display.Config{Attach: c.display, Logger: log})
	if err != nil {
		return nil, nil, err
	}
	exec, err := hci.NewExecutor(d, hci.Options{Logger: log})
	if err != nil {
		d.Close()
		return nil, nil, err
	}
	cfg := stream.Config{FPS: c.fps, BitrateKbps: c.bitrate, LoopbackOnly: true, Logger: log,
		UDPPort: c.udpPort, FixedBitrate: c.fixed}
	if c.nat != "" {
		cfg.NAT1To1IPs = []string{c.nat}
	}
	srv, err := stream.New(d, exec, cfg)
	if err != nil {
		exec.Close()
		d.Close()
		return nil, nil, fmt.Errorf("stream: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/stream/signal", srv.SignalHandler(func(*http.Request) (string, bool, error) { return "local", false, nil }))
	mux.Handle("/", web.Handler())
	// deskbench network reads the keyframes sent from here (127.0.0.1, not
	// through its relay).
	mux.HandleFunc("GET /deskbench/links", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(srv.Links())
	})
	closeAll := func() error {
		return errors.Join(srv.Close(), exec.Close(), d.Close())
	}
	return mux, closeAll, nil
}
