package task

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"

	"github.com/deskenv/deskenv/internal/xsel"
	"github.com/deskenv/deskenv/internal/xwin"
)

// Window states a window_state check asks for.
const (
	StateExists     = "exists"
	StateFocused    = "focused"
	StateMaximized  = "maximized"
	StateFullscreen = "fullscreen"
	StateAbove      = "above"
	StateMinimized  = "minimized"
)

// windowStates are the states window_state takes, in the order the docs
// list them.
var windowStates = []string{StateFocused, StateMaximized, StateFullscreen, StateAbove, StateMinimized, StateExists}

// WindowState is a top-level window with the states a window manager keeps
// for it.
type WindowState struct {
	Window
	// States holds the states of windowStates the window is in, besides
	// "exists": "maximized" needs both _NET_WM_STATE_MAXIMIZED_VERT and
	// _HORZ; "minimized" is _NET_WM_STATE_HIDDEN or an iconic WM_STATE.
	States []string
}

// WindowStater is an Env that can tell windows' states; DisplayEnv is one.
// It is an interface of its own so that an Env of a caller's (a test's)
// need not have it.
type WindowStater interface {
	WindowStates(ctx context.Context) ([]WindowState, error)
}

// WindowStates lists the top-level windows as Windows does, with their
// _NET_WM_STATE, WM_STATE, and whether the root's _NET_ACTIVE_WINDOW (or,
// with no window manager, the input focus) is the window.
func (e *DisplayEnv) WindowStates(ctx context.Context) ([]WindowState, error) {
	var out []WindowState
	err := e.withX(ctx, "read window states", func(x *xstate) error {
		ws, err := x.lister.Windows()
		if err != nil {
			return err
		}
		out, err = windowStatesOf(x.conn, ws)
		return err
	})
	return out, err
}

// ewmhStates maps the _NET_WM_STATE atoms a check reads to their state.
var ewmhStates = map[string]string{
	"_NET_WM_STATE_FULLSCREEN": StateFullscreen,
	"_NET_WM_STATE_ABOVE":      StateAbove,
	"_NET_WM_STATE_HIDDEN":     StateMinimized,
}

func windowStatesOf(c *xgb.Conn, ws []xwin.Window) ([]WindowState, error) {
	names := []string{"_NET_WM_STATE", "_NET_ACTIVE_WINDOW", "WM_STATE", "_NET_WM_STATE_MAXIMIZED_VERT", "_NET_WM_STATE_MAXIMIZED_HORZ"}
	for n := range ewmhStates {
		names = append(names, n)
	}
	atoms, err := xsel.InternAtoms(c, names...)
	if err != nil {
		return nil, err
	}
	root := xproto.Setup(c).DefaultScreen(c).Root
	active, haveActive := xproto.Window(0), false
	if r, err := xproto.GetProperty(c, false, root, atoms["_NET_ACTIVE_WINDOW"], xproto.AtomWindow, 0, 1).Reply(); err == nil && r.Format == 32 && len(r.Value) >= 4 {
		active, haveActive = xproto.Window(xgb.Get32(r.Value)), true
	}
	if !haveActive {
		if f, err := xproto.GetInputFocus(c).Reply(); err == nil {
			active = f.Focus
		}
	}
	// Both properties of every window at once: one round trip.
	type cookies struct{ net, wm xproto.GetPropertyCookie }
	cks := make([]cookies, len(ws))
	for i, w := range ws {
		cks[i] = cookies{
			net: xproto.GetProperty(c, false, xproto.Window(w.ID), atoms["_NET_WM_STATE"], xproto.AtomAtom, 0, 64),
			wm:  xproto.GetProperty(c, false, xproto.Window(w.ID), atoms["WM_STATE"], atoms["WM_STATE"], 0, 2),
		}
	}
	out := make([]WindowState, 0, len(ws))
	for i, w := range ws {
		st := WindowState{Window: Window{ID: w.ID, Title: w.Title, Instance: w.Instance, Class: w.Class}}
		if xproto.Window(w.ID) == active && active != 0 {
			st.States = append(st.States, StateFocused)
		}
		vert, horz := false, false
		if r, err := cks[i].net.Reply(); err == nil && r.Format == 32 {
			for j := 0; j+4 <= len(r.Value); j += 4 {
				a := xproto.Atom(xgb.Get32(r.Value[j:]))
				switch a {
				case atoms["_NET_WM_STATE_MAXIMIZED_VERT"]:
					vert = true
				case atoms["_NET_WM_STATE_MAXIMIZED_HORZ"]:
					horz = true
				}
				for name, state := range ewmhStates {
					if a == atoms[name] && !slices.Contains(st.States, state) {
						st.States = append(st.States, state)
					}
				}
			}
		}
		if vert && horz {
			st.States = append(st.States, StateMaximized)
		}
		// WM_STATE IconicState (3): an ICCCM window manager's minimised.
		if r, err := cks[i].wm.Reply(); err == nil && r.Format == 32 && len(r.Value) >= 4 && xgb.Get32(r.Value) == 3 && !slices.Contains(st.States, StateMinimized) {
			st.States = append(st.States, StateMinimized)
		}
		slices.SortFunc(st.States, func(a, b string) int { return slices.Index(windowStates, a) - slices.Index(windowStates, b) })
		out = append(out, st)
	}
	return out, nil
}

func describeWindowState(c *Check) string {
	m, err := c.matcher()
	if err != nil {
		return "window_state " + c.State
	}
	return fmt.Sprintf("window_state %s, title %s", c.State, m)
}

// windowState is window_state: some window whose title satisfies the
// condition is in the state.
func windowState(ctx context.Context, env Env, c *Check) (bool, string, error) {
	ws, ok := env.(WindowStater)
	if !ok {
		return false, "", errors.New("this environment cannot read window states")
	}
	wins, err := ws.WindowStates(ctx)
	if err != nil {
		return false, "", err
	}
	m, err := c.matcher()
	if err != nil {
		return false, "", err
	}
	var seen []string
	for _, w := range wins {
		if !m.match(w.Title) {
			continue
		}
		if c.State == StateExists || slices.Contains(w.States, c.State) {
			return true, fmt.Sprintf("window 0x%x %s is %s", w.ID, quoteHead(w.Title, 120), c.State), nil
		}
		states := "in no state a check reads"
		if len(w.States) > 0 {
			states = strings.Join(w.States, ", ")
		}
		seen = append(seen, fmt.Sprintf("0x%x %s: %s", w.ID, quoteHead(w.Title, 80), states))
	}
	if len(seen) == 0 {
		titles := make([]Window, len(wins))
		for i, w := range wins {
			titles[i] = w.Window
		}
		return false, fmt.Sprintf("no window title %s; windows: %s", m, windowTitles(titles)), nil
	}
	return false, fmt.Sprintf("no window titled so is %s: %s", c.State, strings.Join(seen, "; ")), nil
}

func validateWindowState(d *decoder, at site, c *Check) {
	if v, ok := at.f["state"]; ok && v.kind == jString && !slices.Contains(windowStates, c.State) {
		d.fail(v, join(at.path, "state"), "%q is not a window state: use one of %s", c.State, orList(windowStates))
	}
}
