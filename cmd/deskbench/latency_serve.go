package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/gorilla/websocket"
)

// latencyServeCmd is the child process that serves one stack to the browser,
// alone in its process so its CPU can be read from /proc.
const latencyServeCmd = "latency-serve"

//go:embed latency_novnc.html
var noVNCPage []byte

type serveConfig struct {
	mode    string // deskenv or novnc
	display string
	addr    string
	vnc     string // x11vnc's host:port (novnc)
	novnc   string // @novnc/novnc package directory (novnc)
	fps     int
	bitrate int
	// For deskbench network: the one UDP port on 127.0.0.1, the address
	// announced instead (the relay's), and congestion control off.
	udpPort int
	nat     string
	fixed   bool
}

func runLatencyServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c serveConfig
	fs := flag.NewFlagSet(latencyServeCmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.mode, "mode", "", "deskenv or novnc")
	fs.StringVar(&c.display, "display", "", "X display to attach to (deskenv)")
	fs.StringVar(&c.addr, "addr", "127.0.0.1:0", "listen address")
	fs.StringVar(&c.vnc, "vnc", "", "VNC server host:port to bridge to (novnc)")
	fs.StringVar(&c.novnc, "novnc", "", "directory of the @novnc/novnc package (novnc)")
	fs.IntVar(&c.fps, "fps", 30, "video frames per second (deskenv)")
	fs.IntVar(&c.bitrate, "bitrate", 4000, "video bitrate in kbit/s (deskenv)")
	fs.IntVar(&c.udpPort, "udp-port", 0, "all WebRTC traffic on this UDP port of 127.0.0.1 (deskenv)")
	fs.StringVar(&c.nat, "nat-1to1", "", "address announced as the host candidate instead of 127.0.0.1 (deskenv)")
	fs.BoolVar(&c.fixed, "fixed-bitrate", false, "congestion control off (deskenv)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	var h http.Handler
	var closeFn func() error
	switch c.mode {
	case "deskenv":
		if c.display == "" {
			return errors.New("--display is required with --mode deskenv")
		}
		var err error
		h, closeFn, err = deskenvServer(ctx, c, log)
		if err != nil {
			return err
		}
	case "novnc":
		if c.vnc == "" || c.novnc == "" {
			return errors.New("--vnc and --novnc are required with --mode novnc")
		}
		if _, err := os.Stat(filepath.Join(c.novnc, "core", "rfb.js")); err != nil {
			return fmt.Errorf("--novnc %s has no core/rfb.js: run `npm ci --prefix e2e/browser`: %w", c.novnc, err)
		}
		h = noVNCServer(c, log)
	default:
		return fmt.Errorf("--mode %q: use deskenv or novnc", c.mode)
	}
	if closeFn != nil {
		defer closeFn()
	}
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", c.addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	fmt.Fprintf(stdout, "URL http://%s/\n", ln.Addr())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// noVNCServer serves the noVNC library, a page that uses it, and a
// websocket-to-TCP bridge to the VNC server (what websockify does).
func noVNCServer(c serveConfig, log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(noVNCPage)
	})
	mux.Handle("GET /novnc/", http.StripPrefix("/novnc/", http.FileServer(http.Dir(c.novnc))))
	up := websocket.Upgrader{
		Subprotocols:    []string{"binary"},
		CheckOrigin:     func(*http.Request) bool { return true }, // loopback benchmark only
		ReadBufferSize:  64 << 10,
		WriteBufferSize: 64 << 10,
	}
	mux.HandleFunc("GET /websockify", func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		tcp, err := net.Dial("tcp", c.vnc)
		if err != nil {
			log.Warn("bridge: dial VNC server", "addr", c.vnc, "err", err)
			return
		}
		defer tcp.Close()
		tcp.(*net.TCPConn).SetNoDelay(true)
		done := make(chan struct{}, 2)
		go func() {
			defer func() { done <- struct{}{} }()
			buf := make([]byte, 256<<10)
			for {
				n, err := tcp.Read(buf)
				if n > 0 {
					if werr := ws.WriteMessage(websocket.BinaryMessage, buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
		go func() {
			defer func() { done <- struct{}{} }()
			for {
				_, msg, err := ws.ReadMessage()
				if err != nil {
					return
				}
				if _, err := tcp.Write(msg); err != nil {
					return
				}
			}
		}()
		<-done
	})
	return mux
}
