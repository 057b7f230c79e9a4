package display

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestToolkitAnimations asks GTK itself (gtk-query-settings, from
// libgtk-3-bin, run in the session's environment on a real Xvfb) whether
// it animates and blinks its text cursor: not by default, yes with
// Config.Animations, and yes when the home's own settings.ini says so (GTK reads the home after
// $XDG_CONFIG_DIRS; an agent may turn them on for its episode, and the
// reset's home restore turns them off again).
func TestToolkitAnimations(t *testing.T) {
	needXvfb(t)
	if _, err := exec.LookPath("gtk-query-settings"); err != nil {
		t.Fatalf("gtk-query-settings is required for this test (libgtk-3-bin; run scripts/install-deps.sh test): %v", err)
	}
	tests := []struct {
		name       string
		animations bool
		homeINI    string
		want       string
	}{
		{"default: off", false, "", "FALSE"},
		{"Config.Animations", true, "", "TRUE"},
		{"the home's settings win", false, "[Settings]\ngtk-enable-animations=true\ngtk-cursor-blink=true\n", "TRUE"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			if tc.homeINI != "" {
				dir := filepath.Join(home, ".config", "gtk-3.0")
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "settings.ini"), []byte(tc.homeINI), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			d, err := Start(context.Background(), Config{WindowManager: []string{}, Apps: [][]string{}, Home: home, Animations: tc.animations})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			for _, setting := range []string{"gtk-enable-animations", "gtk-cursor-blink"} {
				cmd := exec.Command("gtk-query-settings", setting)
				cmd.Env = d.Env()
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("gtk-query-settings: %v\n%s", err, out)
				}
				// It prints every setting whose name starts with the one
				// asked for (gtk-cursor-blink-time...), one per line.
				got, found := "", false
				for _, line := range strings.Split(string(out), "\n") {
					if v, ok := strings.CutPrefix(strings.TrimSpace(line), setting+":"); ok {
						got, found = strings.TrimSpace(v), true
					}
				}
				if !found {
					t.Fatalf("gtk-query-settings printed %q", out)
				}
				if got != tc.want {
					t.Errorf("%s = %s, want %s", setting, got, tc.want)
				}
			}
		})
	}
}

func TestToolkitConfigDirs(t *testing.T) {
	for _, tc := range []struct{ inherited, want string }{
		{"", "/run/d/xdg:/etc/xdg"},
		{"  ", "/run/d/xdg:/etc/xdg"},
		{"/opt/xdg:/etc/xdg", "/run/d/xdg:/opt/xdg:/etc/xdg"},
	} {
		if got := toolkitConfigDirs("/run/d", tc.inherited); got != tc.want {
			t.Errorf("toolkitConfigDirs(%q) = %q, want %q", tc.inherited, got, tc.want)
		}
	}
}
