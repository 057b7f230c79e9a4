package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/hci"
	deskimage "github.com/deskenv/deskenv/image"
	"github.com/deskenv/deskenv/mcpserver"
)

// app is one desktop and everything served from it. Pool mode will hold
// several.
type app struct {
	cfg     config
	log     *slog.Logger
	display *display.Display
	exec    *hci.Executor
	capt    *deskimage.Capturer
	shooter *deskimage.Shooter
	mcp     *mcpserver.Server
	closers []func() error
	started time.Time
}

func newApp(ctx context.Context, cfg config, log *slog.Logger) (a *app, err error) {
	a = &app{cfg: cfg, log: log, started: time.Now()}
	defer func() {
		if err != nil {
			a.Close()
		}
	}()
	w, h, depth, _ := cfg.screenSize()
	a.display, err = display.Start(ctx, display.Config{
		Attach: cfg.Display, Width: w, Height: h, Depth: depth,
		WindowManager: cfg.wm(), Apps: cfg.apps(), Home: cfg.Home,
		Logger: log, RestartOnCrash: true,
	})
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

	a.capt, err = deskimage.NewCapturer(a.display)
	if err != nil {
		return nil, err
	}
	a.closers = append(a.closers, a.capt.Close)
	a.shooter = deskimage.NewShooter(a.capt, deskimage.ShooterOptions{
		Format: deskimage.Format(cfg.ImageFormat), JPEGQuality: cfg.JPEGQuality,
		ModelW: space.ModelW, ModelH: space.ModelH,
	})

	var modes []mcpserver.Mode
	for _, m := range splitList(cfg.MCPTools, ",") {
		modes = append(modes, mcpserver.Mode(m))
	}
	a.mcp, err = mcpserver.New(a.exec, a.shooter, a.capt, mcpserver.Config{
		Modes:   modes,
		Settle:  deskimage.SettleOptions{Quiet: cfg.SettleQuiet, Max: cfg.SettleMax},
		Name:    "deskenv",
		Version: version,
		Logger:  log,
	})
	if err != nil {
		return nil, err
	}
	log.Info("desktop ready", "display", a.display.Name(), "screen", fmt.Sprintf("%dx%d", sw, sh),
		"model", fmt.Sprintf("%dx%d", space.ModelW, space.ModelH), "mcp_tools", cfg.MCPTools)
	return a, nil
}

func (a *app) hasTokens() bool {
	return a.cfg.AgentToken != "" || a.cfg.OperatorToken != "" || a.cfg.ViewerToken != "" || a.cfg.TokensFile != ""
}

// Handler is the one HTTP surface of the appliance.
func (a *app) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/mcp", a.mcp.Handler())
	mux.HandleFunc("GET /health", a.health)
	return mux
}

func (a *app) health(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	w.Header().Set("Content-Type", "application/json")
	if err := a.display.Health(ctx); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		json.NewEncoder(w).Encode(map[string]string{"status": "unhealthy", "error": err.Error()})
		return
	}
	json.NewEncoder(w).Encode(map[string]string{"status": "healthy"})
}

// Close stops everything in the reverse order it was started.
func (a *app) Close() error {
	for i := len(a.closers) - 1; i >= 0; i-- {
		if err := a.closers[i](); err != nil {
			a.log.Warn("shutdown", "err", err)
		}
	}
	a.closers = nil
	return nil
}
