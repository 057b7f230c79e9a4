// Package testrig starts, for real, what deskenv's tests stand on: an Xvfb
// on a free display (always -noreset, through display.Start), a probe X
// client that records what the server delivered, and an HTTP server on a
// free port. Every piece is closed when the test ends.
//
// It exists so a package's tests do not each carry a near copy of the same
// start-up code (issue 12 counted thirteen). Tests never mock X: what a test
// checks is what the X server received.
package testrig

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/internal/xprobe"
)

// Display starts an X server for the test and closes it at cleanup. Unlike
// display.Start, a Config that names neither a window manager nor apps gets
// a bare server: most tests want an empty screen they paint themselves.
// Ask for openbox and xterm explicitly to get the appliance's session. The
// logger is quiet unless the test runs with -v.
func Display(t testing.TB, cfg display.Config) *display.Display {
	t.Helper()
	if cfg.WindowManager == nil && cfg.Apps == nil {
		cfg.WindowManager, cfg.Apps = []string{}, [][]string{}
	}
	if cfg.Logger == nil {
		cfg.Logger = Logger(t)
	}
	d, err := display.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("testrig: start an X server: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// Probe maps a probe window on d (the whole screen when opt's size is zero)
// and closes it at cleanup.
func Probe(t testing.TB, d *display.Display, opt xprobe.Options) *xprobe.Probe {
	t.Helper()
	if opt.Width == 0 && opt.Height == 0 {
		opt.Width, opt.Height = d.Size()
	}
	p, err := xprobe.Open(d.Name(), opt)
	if err != nil {
		t.Fatalf("testrig: open the probe window: %v", err)
	}
	t.Cleanup(p.Close)
	return p
}

// Serve serves h on a free loopback port until the test ends and returns
// its base URL (http://127.0.0.1:port).
func Serve(t testing.TB, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// FreePort is a loopback TCP port that was free a moment ago, for a server
// a test starts on a port it must name (a task's serve step, a listener in a
// container); another process may take it first, which the test then sees
// as "address already in use".
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Logger is a logger for the code under test: discarded, unless the test
// runs with -v or DESKENV_TEST_LOG is set, when it goes to stderr. Messages
// from a failing test's desktop are worth having; from a passing one, noise.
func Logger(t testing.TB) *slog.Logger {
	t.Helper()
	if testing.Verbose() || os.Getenv("DESKENV_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}
