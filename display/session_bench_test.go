package display_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jezek/xgb/xproto"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/internal/testrig"
)

// BenchmarkSessionCost is what one desktop costs in each session: the time
// from Start to the session being ready (the bare session: its xterm's
// window mapped; the desktop: the panel's dock window mapped, after the
// xterm), and the memory of the X server and the session's processes and
// everything they started (RSS summed over /proc, after 3 s to settle).
// docs/SCALE.md quotes it:
//
//	go test -run '^$' -bench BenchmarkSessionCost -benchtime 3x ./display/
func BenchmarkSessionCost(b *testing.B) {
	for _, session := range []string{display.SessionBare, display.SessionDesktop} {
		b.Run(session, func(b *testing.B) {
			testrig.NeedTools(b, "openbox", "xterm", "tint2")
			var ready time.Duration
			var rssKB int64
			for range b.N {
				cfg := display.Config{Home: b.TempDir(), Session: session,
					WindowManager: []string{"openbox"}, Apps: [][]string{{"xterm"}}, Logger: testrig.Logger(b)}
				start := time.Now()
				d, err := display.Start(context.Background(), cfg)
				if err != nil {
					b.Fatal(err)
				}
				for !sessionReady(d, session) {
					if time.Since(start) > 30*time.Second {
						d.Close()
						b.Fatalf("the %s session was not ready within 30 s", session)
					}
					time.Sleep(5 * time.Millisecond)
				}
				ready += time.Since(start)
				time.Sleep(3 * time.Second)
				rssKB += treeRSS(append(d.SessionPIDs(), d.ServerPID()))
				d.Close()
			}
			b.ReportMetric(float64(ready.Milliseconds())/float64(b.N), "ms-to-ready")
			b.ReportMetric(float64(rssKB)/1024/float64(b.N), "MB-RSS")
		})
	}
}

// sessionReady: the xterm's window is mapped, and in the desktop session
// the panel's dock window too.
func sessionReady(d *display.Display, session string) bool {
	mapped := mappedClasses(d)
	if mapped["XTerm"] == 0 {
		return false
	}
	return session != display.SessionDesktop || mapped["Tint2"] > 0
}

// mappedClasses counts the viewable windows by WM_CLASS class (or
// "title:" and WM_NAME for a window without a class), at the top and one
// level down (inside the window manager's frames).
func mappedClasses(d *display.Display) map[string]int {
	out := map[string]int{}
	c, err := d.Dial()
	if err != nil {
		return out
	}
	defer c.Close()
	var walk func(w xproto.Window, depth int)
	walk = func(w xproto.Window, depth int) {
		tree, err := xproto.QueryTree(c, w).Reply()
		if err != nil {
			return
		}
		for _, w := range tree.Children {
			if a, err := xproto.GetWindowAttributes(c, w).Reply(); err != nil || a.MapState != xproto.MapStateViewable {
				continue
			}
			if p, err := xproto.GetProperty(c, false, w, xproto.AtomWmClass, xproto.AtomString, 0, 64).Reply(); err == nil && len(p.Value) > 0 {
				// "instance\x00class\x00"
				if parts := strings.Split(string(p.Value), "\x00"); len(parts) > 1 {
					out[parts[1]]++
				}
			} else if p, err := xproto.GetProperty(c, false, w, xproto.AtomWmName, xproto.GetPropertyTypeAny, 0, 64).Reply(); err == nil && len(p.Value) > 0 {
				// Some toolkits set no class (mupdf-gl's freeglut): the title then.
				out["title:"+string(p.Value)]++
			}
			if depth < 1 {
				walk(w, depth+1)
			}
		}
	}
	walk(d.Root(), 0)
	return out
}

// treeRSS sums VmRSS (kB) over pids and all their descendants.
func treeRSS(pids []int) int64 {
	parent := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The fields after the command's closing parenthesis: state, ppid.
		f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
		if len(f) > 1 {
			parent[pid], _ = strconv.Atoi(f[1])
		}
	}
	in := map[int]bool{}
	for _, p := range pids {
		in[p] = true
	}
	var total int64
	for pid := range parent {
		for p := pid; p > 1; p = parent[p] {
			if in[p] {
				total += vmRSS(pid)
				break
			}
		}
	}
	return total
}

func vmRSS(pid int) int64 {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
