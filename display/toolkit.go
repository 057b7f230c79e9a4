package display

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The session's toolkits are told that the desktop prefers no animation
// and no blinking text cursor.
// GTK (and Chromium, which reads GTK's settings on Linux) otherwise fades
// menus in, slides tabs open and spins a throbber while a page loads:
// Chromium drew for 220-250 ms after its window showed a task's page, in
// 15-20 frames, every one of which held a settle open (measured with a
// DAMAGE listener on Xvfb, 2026-11-27; off, it drew twice in 10 ms). An
// agent's screenshot caught halfway through such an animation is one the
// next action cannot rely on, and no two runs of an episode would match.
//
// The setting lives where GTK looks after the home
// ($XDG_CONFIG_DIRS/gtk-{3,4}.0/settings.ini), in deskenv's directory for
// the display: the agent cannot change it there, and a settings.ini in
// home (restored at every reset) still wins, as GTK has it.

// toolkitDir is the directory, beside the window manager's, put first in
// the session's $XDG_CONFIG_DIRS.
const toolkitDir = "xdg"

// toolkitSettings is GTK's settings.ini. The text cursor does not blink
// either: a blinking cursor redraws twice a second in every focused entry
// (GTK's and Chromium's), so one screenshot of a still screen differs from
// the next, a settle whose quiet period meets a blink waits one out, and the
// stream encodes a frame for each.
const toolkitSettings = "[Settings]\ngtk-enable-animations=false\ngtk-cursor-blink=false\n"

// writeToolkitSettings writes the GTK 3 and GTK 4 settings into dir's
// toolkit directory (this process's, readable by the session).
func writeToolkitSettings(dir string) error {
	for _, v := range []string{"gtk-3.0", "gtk-4.0"} {
		d := filepath.Join(dir, toolkitDir, v)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("write the session's toolkit settings: %w", err)
		}
		if err := os.WriteFile(filepath.Join(d, "settings.ini"), []byte(toolkitSettings), 0o644); err != nil {
			return fmt.Errorf("write the session's toolkit settings: %w", err)
		}
	}
	return nil
}

// toolkitConfigDirs is the session's $XDG_CONFIG_DIRS: the toolkit
// directory under dir, then this process's list (the specification's
// default, /etc/xdg, when it has none).
func toolkitConfigDirs(dir, inherited string) string {
	if strings.TrimSpace(inherited) == "" {
		inherited = "/etc/xdg"
	}
	return filepath.Join(dir, toolkitDir) + string(os.PathListSeparator) + inherited
}
