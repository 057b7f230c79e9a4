package control

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"

	"github.com/deskenv/deskenv/display"
)

// The helpers here look at the desktop from outside, as a test must: the
// home tree, the X server's state, the processes on the display. The reset
// machinery itself is package baseline's.

func needTools(t testing.TB, tools ...string) {
	t.Helper()
	for _, tool := range append([]string{"Xvfb"}, tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is required for these tests (run scripts/install-deps.sh): %v", tool, err)
		}
	}
}

// spawnDetached starts argv on d the way a task or an agent's shell might:
// in its own session, so killing the session's process groups misses it.
func spawnDetached(t testing.TB, d *display.Display, argv ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = d.Env()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go cmd.Wait()
	t.Cleanup(func() { cmd.Process.Kill() })
	return cmd
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// treeOf describes every entry under root: type, mode, size, mtime, link
// target and content, one line per path, so two trees compare as strings.
func treeOf(t testing.TB, root string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		line := fmt.Sprintf("%s %s", rel, fi.Mode())
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			line += " -> " + l
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			line += fmt.Sprintf(" size=%d mtime=%d %q", fi.Size(), fi.ModTime().UnixNano(), b)
		case fi.IsDir():
			line += fmt.Sprintf(" mtime=%d", fi.ModTime().UnixNano())
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func writeFile(t testing.TB, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// seedHome builds a small home like a desktop user's.
func seedHome(t testing.TB) string {
	home := filepath.Join(t.TempDir(), "home")
	writeFile(t, filepath.Join(home, ".bashrc"), "export PS1='$ '\n", 0o644)
	writeFile(t, filepath.Join(home, "notes.txt"), "hello\n", 0o600)
	writeFile(t, filepath.Join(home, "Documents", "report.md"), "# report\n", 0o644)
	writeFile(t, filepath.Join(home, ".config", "app", "settings.ini"), "[a]\nb=1\n", 0o644)
	if err := os.Symlink("Documents/report.md", filepath.Join(home, "latest")); err != nil {
		t.Fatal(err)
	}
	old := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
		if d.Type()&fs.ModeSymlink == 0 {
			os.Chtimes(p, old, old)
		}
		return nil
	})
	for _, d := range []string{".config/app", ".config", "Documents", ""} {
		os.Chtimes(filepath.Join(home, d), old, old)
	}
	return home
}

// xlook is a test's own connection to the X server, to read what a reset
// must have put back.
type xlook struct {
	conn  *xgb.Conn
	root  xproto.Window
	atoms map[string]xproto.Atom
}

func openLook(t testing.TB, d *display.Display) *xlook {
	t.Helper()
	conn, err := xgb.NewConnDisplay(d.Name())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	return &xlook{conn: conn, root: xproto.Setup(conn).DefaultScreen(conn).Root, atoms: map[string]xproto.Atom{}}
}

func (x *xlook) atom(name string) xproto.Atom {
	if a, ok := x.atoms[name]; ok {
		return a
	}
	r, err := xproto.InternAtom(x.conn, false, uint16(len(name)), name).Reply()
	if err != nil {
		return 0
	}
	x.atoms[name] = r.Atom
	return r.Atom
}

// rootProp is one property of the root window.
type rootProp struct {
	typ  xproto.Atom
	data []byte
}

func (x *xlook) rootProps() (map[xproto.Atom]rootProp, error) {
	l, err := xproto.ListProperties(x.conn, x.root).Reply()
	if err != nil {
		return nil, err
	}
	out := map[xproto.Atom]rootProp{}
	for _, a := range l.Atoms {
		r, err := xproto.GetProperty(x.conn, false, x.root, a, xproto.GetPropertyTypeAny, 0, 1<<22).Reply()
		if err != nil || r.Type == xproto.AtomNone {
			continue
		}
		out[a] = rootProp{typ: r.Type, data: r.Value}
	}
	return out, nil
}

func (x *xlook) pointer() (int16, int16, error) {
	p, err := xproto.QueryPointer(x.conn, x.root).Reply()
	if err != nil {
		return 0, 0, err
	}
	return p.RootX, p.RootY, nil
}

func (x *xlook) selectionOwner(name string) xproto.Window {
	r, err := xproto.GetSelectionOwner(x.conn, x.atom(name)).Reply()
	if err != nil {
		return 0
	}
	return r.Owner
}

// displayProcesses are this user's processes, other than this one, whose
// environment says DISPLAY=name.
func displayProcesses(name string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		fi, err := os.Stat("/proc/" + e.Name())
		if err != nil || int(fi.Sys().(*syscall.Stat_t).Uid) != os.Getuid() {
			continue
		}
		env, _ := os.ReadFile("/proc/" + e.Name() + "/environ")
		env = append([]byte{0}, env...)
		if bytes.Contains(env, []byte("\x00DISPLAY="+name+"\x00")) || bytes.Contains(env, []byte("\x00DISPLAY="+name+".0\x00")) {
			out = append(out, pid)
		}
	}
	return out
}

// descendants are all processes below pid in the process tree.
func descendants(pid int) map[int]bool {
	children := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		if f := strings.Fields(string(b[i+1:])); i > 0 && len(f) > 1 {
			p, _ := strconv.Atoi(e.Name())
			pp, _ := strconv.Atoi(f[1])
			children[pp] = append(children[pp], p)
		}
	}
	out := map[int]bool{}
	var walk func(int)
	walk = func(p int) {
		for _, c := range children[p] {
			if !out[c] {
				out[c] = true
				walk(c)
			}
		}
	}
	walk(pid)
	return out
}
