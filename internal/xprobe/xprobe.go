// Package xprobe is a small X client for tests: it maps a window, records every
// input event the X server delivers to it, and paints content on request. Tests
// check what the server actually received through it, never a mock of X.
package xprobe

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
)

// Kind names an event type the probe records.
type Kind string

const (
	KeyPress      Kind = "key_press"
	KeyRelease    Kind = "key_release"
	ButtonPress   Kind = "button_press"
	ButtonRelease Kind = "button_release"
	Motion        Kind = "motion"
)

// Event is one input event as the probe window received it.
type Event struct {
	Kind    Kind
	Keycode byte   // key events
	Keysym  uint32 // key events: the keysym of Keycode at the time the event was read, shift level applied
	Button  byte   // button events
	X, Y    int    // root (screen) coordinates
	State   uint16 // modifier and button mask at the time of the event
}

func (e Event) String() string {
	switch e.Kind {
	case KeyPress, KeyRelease:
		return fmt.Sprintf("%s(keysym=0x%x code=%d state=0x%x)", e.Kind, e.Keysym, e.Keycode, e.State)
	case ButtonPress, ButtonRelease:
		return fmt.Sprintf("%s(button=%d at %d,%d state=0x%x)", e.Kind, e.Button, e.X, e.Y, e.State)
	default:
		return fmt.Sprintf("%s(%d,%d)", e.Kind, e.X, e.Y)
	}
}

// Probe is a recording window on one display.
type Probe struct {
	conn   *xgb.Conn
	win    xproto.Window
	gc     xproto.Gcontext
	root   xproto.Window
	x, y   int
	w, h   int
	marker xproto.Atom

	mu       sync.Mutex
	events   []Event
	times    []xproto.Timestamp // the server time of each event in events (0 for motion)
	keymap   [][]xproto.Keysym  // index keycode-minKeycode
	minCode  byte
	perCode  byte
	syncs    map[uint32]chan struct{}
	nextSync atomic.Uint32
	done     chan struct{}
}

// Options place the probe window. Zero width or height means the whole screen.
type Options struct {
	X, Y, Width, Height int
	// Background is the 0xRRGGBB fill colour.
	Background uint32
}

// Open connects to display (such as ":51"), maps an override-redirect window
// (so no window manager moves it), gives it the input focus and starts
// recording.
func Open(display string, opt Options) (*Probe, error) {
	conn, err := xgb.NewConnDisplay(display)
	if err != nil {
		return nil, fmt.Errorf("probe: connect to %s: %w", display, err)
	}
	p := &Probe{conn: conn, syncs: map[uint32]chan struct{}{}, done: make(chan struct{})}
	if err := p.setup(opt); err != nil {
		conn.Close()
		return nil, err
	}
	go p.read()
	// Map, focus and wait for the server to have done both before the test acts.
	if err := p.Sync(context.Background()); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

func (p *Probe) setup(opt Options) error {
	setup := xproto.Setup(p.conn)
	screen := setup.DefaultScreen(p.conn)
	p.root = screen.Root
	p.x, p.y, p.w, p.h = opt.X, opt.Y, opt.Width, opt.Height
	if p.w <= 0 || p.h <= 0 {
		p.x, p.y, p.w, p.h = 0, 0, int(screen.WidthInPixels), int(screen.HeightInPixels)
	}
	if err := p.loadKeymap(byte(setup.MinKeycode), byte(int(setup.MaxKeycode)-int(setup.MinKeycode)+1)); err != nil {
		return err
	}
	atom, err := xproto.InternAtom(p.conn, false, uint16(len("DESKENV_PROBE_SYNC")), "DESKENV_PROBE_SYNC").Reply()
	if err != nil {
		return fmt.Errorf("probe: intern atom: %w", err)
	}
	p.marker = atom.Atom

	win, err := xproto.NewWindowId(p.conn)
	if err != nil {
		return err
	}
	p.win = win
	mask := uint32(xproto.EventMaskKeyPress | xproto.EventMaskKeyRelease | xproto.EventMaskButtonPress |
		xproto.EventMaskButtonRelease | xproto.EventMaskPointerMotion | xproto.EventMaskExposure)
	if err := xproto.CreateWindowChecked(p.conn, screen.RootDepth, win, p.root,
		int16(p.x), int16(p.y), uint16(p.w), uint16(p.h), 0,
		xproto.WindowClassInputOutput, screen.RootVisual,
		xproto.CwBackPixel|xproto.CwOverrideRedirect|xproto.CwEventMask,
		[]uint32{opt.Background, 1, mask}).Check(); err != nil {
		return fmt.Errorf("probe: create window: %w", err)
	}
	gc, err := xproto.NewGcontextId(p.conn)
	if err != nil {
		return err
	}
	p.gc = gc
	if err := xproto.CreateGCChecked(p.conn, gc, xproto.Drawable(win), xproto.GcForeground, []uint32{opt.Background}).Check(); err != nil {
		return fmt.Errorf("probe: create gc: %w", err)
	}
	if err := xproto.MapWindowChecked(p.conn, win).Check(); err != nil {
		return fmt.Errorf("probe: map window: %w", err)
	}
	xproto.ConfigureWindow(p.conn, win, xproto.ConfigWindowStackMode, []uint32{xproto.StackModeAbove})
	if err := xproto.SetInputFocusChecked(p.conn, xproto.InputFocusPointerRoot, win, xproto.TimeCurrentTime).Check(); err != nil {
		return fmt.Errorf("probe: focus window: %w", err)
	}
	return nil
}

func (p *Probe) loadKeymap(first, count byte) error {
	km, err := xproto.GetKeyboardMapping(p.conn, xproto.Keycode(first), count).Reply()
	if err != nil {
		return fmt.Errorf("probe: keyboard mapping: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	per := int(km.KeysymsPerKeycode)
	if p.keymap == nil {
		p.minCode, p.perCode = first, km.KeysymsPerKeycode
		setup := xproto.Setup(p.conn)
		p.keymap = make([][]xproto.Keysym, int(setup.MaxKeycode)-int(first)+1)
	}
	for i := 0; i < int(count); i++ {
		idx := int(first) + i - int(p.minCode)
		if idx < 0 || idx >= len(p.keymap) {
			continue
		}
		p.keymap[idx] = append([]xproto.Keysym(nil), km.Keysyms[i*per:(i+1)*per]...)
	}
	return nil
}

// keysym resolves a keycode the way a simple core-protocol client does: the
// second column when Shift is down and the key has a shifted symbol, else the
// first (lower-case letters when the first column is upper case and no shift).
func (p *Probe) keysym(code byte, state uint16) uint32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	idx := int(code) - int(p.minCode)
	if idx < 0 || idx >= len(p.keymap) {
		return 0
	}
	syms := p.keymap[idx]
	get := func(i int) uint32 {
		if i < len(syms) {
			return uint32(syms[i])
		}
		return 0
	}
	lower, upper := get(0), get(1)
	if upper == 0 {
		upper = lower
		// Latin letters listed once are upper-case in the map; fold them.
		if lower >= 'A' && lower <= 'Z' {
			lower += 'a' - 'A'
		}
	}
	if state&xproto.ModMaskShift != 0 {
		return upper
	}
	return lower
}

func (p *Probe) read() {
	defer close(p.done)
	for {
		ev, err := p.conn.WaitForEvent()
		if ev == nil && err == nil {
			return // connection closed
		}
		if err != nil {
			continue // an X error for some request: not an input event
		}
		switch e := ev.(type) {
		case xproto.KeyPressEvent:
			p.addAt(Event{Kind: KeyPress, Keycode: byte(e.Detail), Keysym: p.keysym(byte(e.Detail), e.State), X: int(e.RootX), Y: int(e.RootY), State: e.State}, e.Time)
		case xproto.KeyReleaseEvent:
			p.addAt(Event{Kind: KeyRelease, Keycode: byte(e.Detail), Keysym: p.keysym(byte(e.Detail), e.State), X: int(e.RootX), Y: int(e.RootY), State: e.State}, e.Time)
		case xproto.ButtonPressEvent:
			p.add(Event{Kind: ButtonPress, Button: byte(e.Detail), X: int(e.RootX), Y: int(e.RootY), State: e.State})
		case xproto.ButtonReleaseEvent:
			p.add(Event{Kind: ButtonRelease, Button: byte(e.Detail), X: int(e.RootX), Y: int(e.RootY), State: e.State})
		case xproto.MotionNotifyEvent:
			p.add(Event{Kind: Motion, X: int(e.RootX), Y: int(e.RootY), State: e.State})
		case xproto.MappingNotifyEvent:
			// Key events after this one in the stream were generated with the
			// new mapping, so it must be in place before they are resolved.
			if e.Request == xproto.MappingKeyboard {
				p.loadKeymap(byte(e.FirstKeycode), e.Count)
			}
		case xproto.ClientMessageEvent:
			if e.Type == p.marker {
				id := e.Data.Data32[0]
				p.mu.Lock()
				if ch, ok := p.syncs[id]; ok {
					close(ch)
					delete(p.syncs, id)
				}
				p.mu.Unlock()
			}
		}
	}
}

func (p *Probe) add(e Event) { p.addAt(e, 0) }

// addAt records e with its server time (key events; applications compare
// them to tell autorepeat from typing).
func (p *Probe) addAt(e Event, t xproto.Timestamp) {
	p.mu.Lock()
	p.events = append(p.events, e)
	p.times = append(p.times, t)
	p.mu.Unlock()
}

// Sync returns once every event the server generated before the call has been
// recorded. Call it after an action returns and before reading Events.
func (p *Probe) Sync(ctx context.Context) error {
	id := p.nextSync.Add(1)
	ch := make(chan struct{})
	p.mu.Lock()
	p.syncs[id] = ch
	p.mu.Unlock()
	ev := xproto.ClientMessageEvent{
		Format: 32, Window: p.win, Type: p.marker,
		Data: xproto.ClientMessageDataUnionData32New([]uint32{id, 0, 0, 0, 0}),
	}
	if err := xproto.SendEventChecked(p.conn, false, p.win, 0, string(ev.Bytes())).Check(); err != nil {
		return fmt.Errorf("probe: send sync marker: %w", err)
	}
	select {
	case <-ch:
		return nil
	case <-p.done:
		return errors.New("probe: connection closed")
	case <-ctx.Done():
		return fmt.Errorf("probe: sync: %w", ctx.Err())
	}
}

// Events returns a copy of everything recorded so far.
func (p *Probe) Events() []Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Event(nil), p.events...)
}

// Take returns everything recorded so far and forgets it.
func (p *Probe) Take() []Event {
	ev, _ := p.TakeTimed()
	return ev
}

// TakeTimed is Take with each event's X server time in milliseconds (key
// events; 0 for the others).
func (p *Probe) TakeTimed() ([]Event, []xproto.Timestamp) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ev, ts := p.events, p.times
	p.events, p.times = nil, nil
	return ev, ts
}

// Reset forgets the recorded events.
func (p *Probe) Reset() { p.Take() }

// Window is the probe's window id.
func (p *Probe) Window() xproto.Window { return p.win }

// Bounds is the window's rectangle in screen coordinates.
func (p *Probe) Bounds() (x, y, w, h int) { return p.x, p.y, p.w, p.h }

// Focus gives the probe window the input focus again (after a test moved it).
func (p *Probe) Focus() error {
	return xproto.SetInputFocusChecked(p.conn, xproto.InputFocusPointerRoot, p.win, xproto.TimeCurrentTime).Check()
}

// Fill paints a rectangle of the window (window coordinates) in 0xRRGGBB and
// waits until the server has done it.
func (p *Probe) Fill(x, y, w, h int, rgb uint32) error {
	xproto.ChangeGC(p.conn, p.gc, xproto.GcForeground, []uint32{rgb})
	err := xproto.PolyFillRectangleChecked(p.conn, xproto.Drawable(p.win), p.gc,
		[]xproto.Rectangle{{X: int16(x), Y: int16(y), Width: uint16(w), Height: uint16(h)}}).Check()
	if err != nil {
		return fmt.Errorf("probe: fill: %w", err)
	}
	return nil
}

// Close unmaps the window and closes the connection.
func (p *Probe) Close() {
	xproto.DestroyWindow(p.conn, p.win)
	p.conn.Close()
	<-p.done
}
