package appliance

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/deskenv/deskenv/display"
)

// TestDisplaySession: --session picks the display's session; auto is the
// desktop when its programs are installed and the session was not pared
// down (--wm "" or --apps ""), else bare.
func TestDisplaySession(t *testing.T) {
	installed := len(display.MissingForDesktop()) == 0
	auto := display.SessionBare
	if installed {
		auto = display.SessionDesktop
	}
	tests := []struct {
		name, session, wm, apps string
		want, wantErr           string
	}{
		{"bare", "bare", "openbox", "xterm", display.SessionBare, ""},
		{"auto", "auto", "openbox", "xterm", auto, ""},
		{"auto without a window manager", "auto", "", "xterm", display.SessionBare, ""},
		{"auto without apps", "auto", "openbox", "", display.SessionBare, ""},
		{"desktop", "desktop", "openbox", "", display.SessionDesktop, ""},
	}
	if !installed {
		tests[len(tests)-1].want, tests[len(tests)-1].wantErr = "", "scripts/install-deps.sh apps"
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			c.Session, c.WM, c.Apps = tc.session, tc.wm, tc.apps
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			got, err := c.DisplaySession(slog.New(slog.DiscardHandler))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want it to mention %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("session %q (err %v), want %q", got, err, tc.want)
			}
		})
	}
	// Without the desktop's programs (an empty $PATH): auto is bare, and
	// says on the log what is missing and how to install it; desktop is an
	// error saying the same.
	t.Run("programs missing", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		var log strings.Builder
		c := DefaultConfig()
		got, err := c.DisplaySession(slog.New(slog.NewTextHandler(&log, nil)))
		if err != nil || got != display.SessionBare {
			t.Fatalf("auto without the programs: %q, %v; want bare", got, err)
		}
		if !strings.Contains(log.String(), "tint2") || !strings.Contains(log.String(), "scripts/install-deps.sh apps") {
			t.Errorf("the log does not say what is missing and how to install it: %s", log.String())
		}
		c.Session = "desktop"
		if _, err := c.DisplaySession(slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "tint2") {
			t.Errorf("--session desktop without the programs: %v, want an error naming tint2", err)
		}
	})
	c := DefaultConfig()
	c.Session = "gnome"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), `--session "gnome"`) {
		t.Fatalf("Validate of --session gnome: %v", err)
	}
}
