package control

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"

	"github.com/deskenv/deskenv/display"
)

// The helpers here look at the desktop from outside, as a test must: the
// home tree, the X server's state, the processes on the display. The reset
// machinery itself is package baseline's.

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
