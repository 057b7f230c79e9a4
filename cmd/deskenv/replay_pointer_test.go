package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestReplayFollowsThePointer: a replay draws the mouse pointer into its
// screenshots exactly when the episode's observations show it (episode.json's
// "pointer"; episodes from before the setting show none), unless
// --screenshot-pointer says otherwise: screens compare only like with like.
func TestReplayFollowsThePointer(t *testing.T) {
	episode := func(pointer string) string {
		dir := t.TempDir()
		meta := `{"schema_version":1,"id":"p","source":"agent","screen":{"width":640,"height":480},"model":{"width":640,"height":480},` +
			pointer + `"clock":{"wall":"2026-11-26T00:00:00Z","monotonic_ns":1},"status":"complete","started_at":"2026-11-26T00:00:00Z","duration_s":1,"counts":{}}`
		if err := os.WriteFile(filepath.Join(dir, "episode.json"), []byte(meta), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	tests := []struct {
		name    string
		pointer string
		args    []string
		want    bool
	}{
		{"recorded with the pointer", `"pointer":true,`, nil, true},
		{"recorded without", ``, nil, false},
		{"told to draw it", ``, []string{"--screenshot-pointer"}, true},
		{"told not to", `"pointer":true,`, []string{"--screenshot-pointer=false"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := parseReplay(append(tt.args, "--home", t.TempDir(), episode(tt.pointer)), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			defer r.cleanup()
			if r.cfg.ScreenshotPointer != tt.want {
				t.Errorf("the replay draws the pointer: %v, want %v", r.cfg.ScreenshotPointer, tt.want)
			}
		})
	}
}

// TestReplayFollowsTheSession: a replay starts the desktop session the
// episode was recorded on (episode.json's "session" and "animations"),
// unless --session or --animations says otherwise; an episode that does not
// say gets the defaults (auto, no animations).
func TestReplayFollowsTheSession(t *testing.T) {
	episode := func(session string) string {
		dir := t.TempDir()
		meta := `{"schema_version":1,"id":"s","source":"agent","screen":{"width":640,"height":480},"model":{"width":640,"height":480},` +
			session + `"clock":{"wall":"2026-11-26T00:00:00Z","monotonic_ns":1},"status":"complete","started_at":"2026-11-26T00:00:00Z","duration_s":1,"counts":{}}`
		if err := os.WriteFile(filepath.Join(dir, "episode.json"), []byte(meta), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	tests := []struct {
		name, session  string
		args           []string
		want           string
		wantAnimations bool
	}{
		{"recorded on the bare desktop", `"session":"bare",`, nil, "bare", false},
		{"recorded on the full desktop", `"session":"desktop",`, nil, "desktop", false},
		{"not recorded", ``, nil, "auto", false},
		{"told", `"session":"desktop",`, []string{"--session", "bare"}, "bare", false},
		{"recorded with animations", `"session":"desktop","animations":true,`, nil, "desktop", true},
		{"told no animations", `"session":"desktop","animations":true,`, []string{"--animations=false"}, "desktop", false},
		{"told animations", `"session":"desktop",`, []string{"--animations"}, "desktop", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := parseReplay(append(tt.args, "--home", t.TempDir(), episode(tt.session)), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			defer r.cleanup()
			if r.cfg.Session != tt.want {
				t.Errorf("the replay's session is %q, want %q", r.cfg.Session, tt.want)
			}
			if r.cfg.Animations != tt.wantAnimations {
				t.Errorf("the replay's animations are %v, want %v", r.cfg.Animations, tt.wantAnimations)
			}
		})
	}
}
