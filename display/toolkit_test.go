package display

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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

// TestToolkitSettingsSessionUser plays the agent against the toolkit
// settings: deskenv writes them where the session's programs, which run as
// the session user, cannot change them, so an agent cannot turn the
// animations back on for every episode (its home's own settings.ini is
// restored at every reset; deskenv's directory is not). Each case runs a
// copy of this test binary as the session user, as the session's programs
// are started, and the attempt must fail for want of permission and leave
// deskenv's directory as it was. A file created in xdg/ would be worse than
// one in gtk-3.0/: xdg/ comes first in the session's $XDG_CONFIG_DIRS, so
// any XDG program in the session would read it ahead of /etc/xdg.
func TestToolkitSettingsSessionUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run the session as the unprivileged user nobody")
	}
	needXvfb(t)
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody to run the session as: %v", err)
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		t.Fatal(err)
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Start(context.Background(), Config{WindowManager: []string{}, Apps: [][]string{}, User: "nobody",
		Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	dir := d.auth.dir
	xdg := filepath.Join(dir, toolkitDir)
	ini3 := filepath.Join(xdg, "gtk-3.0", "settings.ini")
	ini4 := filepath.Join(xdg, "gtk-4.0", "settings.ini")

	// The agent's own directory, beside deskenv's so that renaming its
	// file over the settings is refused for permission and not because
	// the two are on different file systems. The helper binary is copied
	// here because the go command's build directory is closed to others.
	agent, err := os.MkdirTemp(filepath.Dir(dir), "deskenv-agent-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(agent) })
	if err := os.Chown(agent, uid, gid); err != nil {
		t.Fatal(err)
	}
	own := filepath.Join(agent, "settings.ini")
	helper := filepath.Join(agent, "display.test")
	copyExecutable(t, helper)

	before := dirState(t, dir)
	if !strings.Contains(before, toolkitSettings) {
		t.Fatalf("deskenv's directory holds no toolkit settings:\n%s", before)
	}
	for _, tc := range []struct {
		name     string
		op       string
		path, to string
		allowed  bool
	}{
		// The control: the helper does run as the session user and can
		// write where that user may.
		{"write its own file", "write", own, "", true},

		{"write the GTK 3 settings", "write", ini3, "", false},
		{"write the GTK 4 settings", "write", ini4, "", false},
		{"replace the GTK 3 settings with its own", "rename", own, ini3, false},
		{"replace the GTK 4 settings with its own", "rename", own, ini4, false},
		{"remove the GTK 3 settings", "remove", ini3, "", false},
		{"remove the GTK 4 settings", "remove", ini4, "", false},
		{"make the GTK 3 settings writable", "chmod", ini3, "", false},
		{"move the GTK 3 directory aside", "rename", filepath.Dir(ini3), filepath.Join(xdg, "gtk-3.0.old"), false},
		{"create a file beside the GTK 3 settings", "create", filepath.Join(xdg, "gtk-3.0", "gtk.css"), "", false},
		{"create a file in the session's first XDG config directory", "create", filepath.Join(xdg, "mimeapps.list"), "", false},
		{"create a file in the display's directory", "create", filepath.Join(dir, "settings.ini"), "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Afresh for every case: one that wrongly succeeded in moving
			// it away must not make the next fail for another reason.
			if err := os.WriteFile(own, []byte(agentSettings), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(own, uid, gid); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(helper, "-test.run=^TestToolkitSessionUserHelper$")
			cmd.Env = append(d.Env(), "TOOLKIT_TEST_OP="+tc.op, "TOOLKIT_TEST_PATH="+tc.path, "TOOLKIT_TEST_TO="+tc.to)
			cmd.SysProcAttr = d.SysProcAttr()
			cmd.Dir = agent
			out, err := cmd.CombinedOutput()
			var result string
			for _, line := range strings.Split(string(out), "\n") {
				if r, ok := strings.CutPrefix(line, helperResult+" "); ok {
					result = r
				}
			}
			if result == "" {
				t.Fatalf("the helper reported nothing (%v):\n%s", err, out)
			}
			t.Logf("%s", result)
			if want := fmt.Sprintf("uid=%d ", uid); !strings.HasPrefix(result, want) {
				t.Fatalf("the helper ran as %q, want the session user's %s", result, want)
			}
			switch kind := strings.Fields(result)[1]; {
			case tc.allowed && kind != "done:":
				t.Errorf("the session user could not %s: %s", tc.name, result)
			case !tc.allowed && kind == "done:":
				t.Errorf("the session user could %s", tc.name)
			case !tc.allowed && kind != "permission:":
				t.Errorf("%s failed, but not for want of permission: %s", tc.name, result)
			}
			if after := dirState(t, dir); after != before {
				t.Errorf("deskenv's directory changed:\n%s\nwas:\n%s", after, before)
				before = after // the next case answers for its own changes only
			}
		})
	}
}

// agentSettings is what the agent would have the session's GTK read.
const agentSettings = "[Settings]\ngtk-enable-animations=true\ngtk-cursor-blink=true\n"

// helperResult starts the line TestToolkitSessionUserHelper reports on.
const helperResult = "toolkit-session-user-helper:"

// TestToolkitSessionUserHelper is not a test of its own: it does nothing
// unless TestToolkitSettingsSessionUser runs it, in a copy of this binary
// as the session user, to try one operation on one path and report
// whether it was done, refused for want of permission, or failed
// otherwise.
func TestToolkitSessionUserHelper(t *testing.T) {
	op, path, to := os.Getenv("TOOLKIT_TEST_OP"), os.Getenv("TOOLKIT_TEST_PATH"), os.Getenv("TOOLKIT_TEST_TO")
	if op == "" {
		return
	}
	var err error
	switch op {
	case "write":
		// O_TRUNC without O_CREATE: a refused open leaves the file whole.
		var f *os.File
		if f, err = os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0); err == nil {
			_, err = f.WriteString(agentSettings)
			err = errors.Join(err, f.Close())
		}
	case "create":
		var f *os.File
		if f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644); err == nil {
			err = f.Close()
		}
	case "rename":
		err = os.Rename(path, to)
	case "remove":
		err = os.Remove(path)
	case "chmod":
		err = os.Chmod(path, 0o666)
	default:
		err = fmt.Errorf("unknown operation %q", op)
	}
	kind := "done"
	switch {
	case errors.Is(err, fs.ErrPermission):
		kind = "permission"
	case err != nil:
		kind = "other"
	}
	fmt.Printf("%s uid=%d %s: %v\n", helperResult, os.Geteuid(), kind, err)
}

// copyExecutable copies this test binary to dst, executable by everyone.
func copyExecutable(t *testing.T, dst string) {
	t.Helper()
	src, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// dirState describes every entry under dir (name, mode, owner, inode) and
// the content of the toolkit settings, so a file replaced by another with
// the same content, or one whose mode changed, shows as well.
func dirState(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		rel, _ := filepath.Rel(dir, p)
		fmt.Fprintf(&b, "%s %v %d:%d inode %d\n", rel, fi.Mode(), st.Uid, st.Gid, st.Ino)
		if e.Name() == "settings.ini" {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b.Write(data)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("describe %s: %v", dir, err)
	}
	return b.String()
}
