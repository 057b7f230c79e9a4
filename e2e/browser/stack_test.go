package browser_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/internal/xprobe"
	"github.com/deskenv/deskenv/stream"
	"github.com/deskenv/deskenv/web"
)

// Tokens of the test server: the page passes ?token= to the signalling.
const (
	tokenOperator = "op-secret"
	tokenViewer   = "viewer-secret"
	tokenViewOnly = "ro-secret"
)

// stack is a real desktop served to browsers: Xvfb, the hci executor, the
// stream and the page on one httptest server, with a probe window covering
// the screen and holding the focus.
type stack struct {
	d      *display.Display
	probe  *xprobe.Probe
	stream *stream.Server
	base   string // the test server's URL
	sw, sh int
}

func startStack(ctx context.Context, t *testing.T) *stack {
	t.Helper()
	return startStackConfig(ctx, t, stream.Config{LoopbackOnly: true})
}

// startStackConfig is startStack with the stream's configuration.
func startStackConfig(ctx context.Context, t *testing.T, cfg stream.Config) *stack {
	t.Helper()
	d := testrig.Display(t, display.Config{})
	exec, err := hci.NewExecutor(d, hci.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exec.Close() })
	ss, err := stream.New(d, exec, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	probe := testrig.Probe(t, d, xprobe.Options{Background: 0x202020})

	mux := http.NewServeMux()
	mux.Handle("/stream/signal", ss.SignalHandler(func(r *http.Request) (string, bool, error) {
		switch r.URL.Query().Get("token") {
		case tokenOperator:
			return stream.RoleOperator, false, nil
		case tokenViewer:
			return stream.RoleViewer, false, nil
		case tokenViewOnly:
			return stream.RoleViewer, true, nil
		}
		return "", false, errors.New("unknown token")
	}))
	mux.Handle("/", web.Handler())
	sw, sh := d.Size()
	return &stack{d: d, probe: probe, stream: ss, base: testrig.Serve(t, mux), sw: sw, sh: sh}
}

// url is the page's address with a token.
func (s *stack) url(token string) string { return s.base + "/?token=" + token }

// toScreen maps video pixels to screen pixels (the video is the screen's size
// unless configured smaller).
func (s *stack) toScreen(vx, vy int) (int, int) {
	vw, vh := s.sw&^1, s.sh&^1
	return vx * s.sw / vw, vy * s.sh / vh
}
