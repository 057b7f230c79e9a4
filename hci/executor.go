package hci

import (
	"context"
	"errors"
	"fmt"
	"image"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
	"github.com/jezek/xgb/xtest"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/internal/xext"
)

// Result tells the caller of Do what to return besides any error.
type Result struct {
	// Text is the textual output: for cursor_position "X=12,Y=34" in model
	// space, as Anthropic's reference implementation returns it.
	Text string
	// Screenshot: the caller should return a screenshot (every action but
	// cursor_position and zoom).
	Screenshot bool
	// Zoom is the screen-space rectangle to crop at full resolution, for zoom.
	Zoom *image.Rectangle
	// Settle: the action may have changed the screen; wait for it to settle
	// before the screenshot.
	Settle bool
	// Seq is the bus sequence number of the action's event: a caller that
	// shows a screenshot after it says so with Observed(Seq, ...).
	Seq uint64
}

// Options configure an Executor. The zero value is usable.
type Options struct {
	// Space maps model to screen coordinates. The zero value means
	// NewSpace(screen size, "auto").
	Space Space
	// TypeDelay is the pause between typed characters. Zero types as fast as
	// the X server takes events; every app measured (xterm, GTK, Chromium)
	// keeps up, since X queues events per client and drops none.
	TypeDelay time.Duration
	// DragSteps is the number of intermediate pointer motions in
	// left_click_drag (default 8), DragStepDelay the pause after each
	// (default 5ms): toolkits start a drag only after seeing motion with the
	// button down, and some (HTML5 drag and drop) only after time passes.
	DragSteps     int
	DragStepDelay time.Duration
	// SpareReuseAge is how long a spare keycode keeps its binding at least
	// before it is bound to another keysym (default 100ms). A client reads a
	// key event with the mapping it fetches when it gets round to it; rebinding
	// sooner could make a slow client see the later symbol. Only text with more
	// distinct characters outside the layout than there are spare keycodes
	// (19 on Xvfb's default layout) ever waits for it.
	SpareReuseAge time.Duration
	// BindSettle is the pause after rebinding spare keycodes before keys are
	// pressed (default 30ms): Chromium applies a new mapping asynchronously
	// and types the old symbol for keys that follow too closely (measured: 0
	// garbles, 5ms was enough on an idle machine).
	BindSettle time.Duration
	// Logger receives warnings (X errors, connection changes); nil means the
	// display's logger.
	Logger *slog.Logger
}

// Executor injects actions and input primitives into one display through
// XTEST, serialised, and publishes each on its Bus. It is safe for concurrent
// use.
type Executor struct {
	d     *display.Display
	log   *slog.Logger
	opt   Options
	bus   *Bus
	start time.Time

	cfgMu    sync.RWMutex
	space    Space
	gates    []gateEntry // replaced, never changed in place
	nextGate uint64

	mu        sync.Mutex // serialises everything sent to X and the held state
	f         *display.Follower
	x         *xconn
	keys      map[xproto.Keycode]*heldKey
	buttons   map[int]map[Source]bool
	spareUsed map[xproto.Keycode]time.Time
	closed    bool
}

type heldKey struct {
	sym Keysym
	by  map[Source]bool
}

// xconn is the executor's own X connection (a display.Follower's) and what
// it set up on it. It is separate from the display's shared one because the
// executor must read the events it is sent (MappingNotify, errors from
// unchecked requests), and reading them from a shared connection would steal
// them from other readers.
type xconn struct {
	c      *xgb.Conn
	gen    uint64 // the Follower's generation of c
	root   xproto.Window
	km     *keymap
	broken bool
}

// ErrClosed is returned by an Executor after Close.
var ErrClosed = errors.New("hci: executor is closed")

// NewExecutor connects an executor to d. It checks that the server has XTEST
// and reads the keyboard mapping before returning.
func NewExecutor(d *display.Display, opt Options) (*Executor, error) {
	if d == nil {
		return nil, errors.New("hci: NewExecutor needs a display")
	}
	if opt.Logger == nil {
		opt.Logger = d.Logger()
	}
	if opt.DragSteps <= 0 {
		opt.DragSteps = 8
	}
	if opt.DragStepDelay <= 0 {
		opt.DragStepDelay = 5 * time.Millisecond
	}
	if opt.BindSettle <= 0 {
		opt.BindSettle = 30 * time.Millisecond
	}
	if opt.SpareReuseAge <= 0 {
		opt.SpareReuseAge = 100 * time.Millisecond
	}
	if opt.TypeDelay < 0 {
		opt.TypeDelay = 0
	}
	w, h := d.Size()
	if opt.Space == (Space{}) {
		s, err := NewSpace(w, h, "auto")
		if err != nil {
			return nil, fmt.Errorf("hci: %w", err)
		}
		opt.Space = s
	}
	if err := opt.Space.Check(); err != nil {
		return nil, fmt.Errorf("hci: %w", err)
	}
	e := &Executor{
		d: d, log: opt.Logger.With("component", "hci"), opt: opt, bus: newBus(), start: time.Now(),
		space: opt.Space, keys: map[xproto.Keycode]*heldKey{}, buttons: map[int]map[Source]bool{},
		spareUsed: map[xproto.Keycode]time.Time{}, f: d.Follow(display.ReadEvents),
	}
	e.mu.Lock()
	_, err := e.conn(context.Background())
	e.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return e, nil
}

// Space returns the current model/screen space.
func (e *Executor) Space() Space {
	e.cfgMu.RLock()
	defer e.cfgMu.RUnlock()
	return e.space
}

// SetSpace changes the model/screen space for later actions (after a resize,
// or when the model's screenshots change size). An invalid space makes Do
// fail with the reason until a valid one is set.
func (e *Executor) SetSpace(s Space) {
	e.cfgMu.Lock()
	e.space = s
	e.cfgMu.Unlock()
}

// A Gate is a policy that may refuse actions and inputs: it gets the source
// and the action name or input type and returns nil to allow.
type Gate func(src Source, what string) error

// AddGate installs g and returns the function that removes it. Every gate
// must allow a call; the first refusal is the error. Refused calls do
// nothing and are not published. Releasing what the same source holds is
// never refused, so a source that loses control cannot leave keys stuck.
// Several parts of the appliance gate at once: the stream (who may act under
// its policy) and the control plane (nobody during a reset).
func (e *Executor) AddGate(g Gate) (remove func()) {
	e.cfgMu.Lock()
	defer e.cfgMu.Unlock()
	e.nextGate++
	id := e.nextGate
	// A new slice each time: allow reads it without the lock held.
	e.gates = append(slices.Clone(e.gates), gateEntry{id, g})
	return func() {
		e.cfgMu.Lock()
		defer e.cfgMu.Unlock()
		e.gates = slices.DeleteFunc(slices.Clone(e.gates), func(ge gateEntry) bool { return ge.id == id })
	}
}

type gateEntry struct {
	id uint64
	g  Gate
}

func (e *Executor) allow(src Source, what string) error {
	if src == "" {
		return fmt.Errorf("hci: %s without a source: pass SourceAgent, SourceHuman, SourceScript or SourceReplay", what)
	}
	e.cfgMu.RLock()
	gates := e.gates
	e.cfgMu.RUnlock()
	for _, ge := range gates {
		if err := ge.g(src, what); err != nil {
			return fmt.Errorf("hci: %s from %s refused: %w", what, src, err)
		}
	}
	return nil
}

// Bus is where every executed action and input is published.
func (e *Executor) Bus() *Bus { return e.bus }

// Display is the display the executor drives.
func (e *Executor) Display() *display.Display { return e.d }

// KeymapChanges counts the spare keycodes bound so far on the current
// connection (a measure of how much text needed keys the layout lacks).
func (e *Executor) KeymapChanges() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.x == nil {
		return 0
	}
	return e.x.km.changes
}

// conn returns the X connection for the display's current server, with the
// keymap read on it, setting both up again when the Follower hands out a new
// connection (the server was restarted, or the last one broke). Callers hold
// e.mu.
func (e *Executor) conn(ctx context.Context) (*xconn, error) {
	if e.closed {
		return nil, ErrClosed
	}
	if e.x != nil && e.x.broken {
		e.f.Drop(e.x.gen)
	}
	c, gen, err := e.f.Get(ctx)
	if err != nil {
		return nil, fmt.Errorf("hci: %w", err)
	}
	if e.x != nil && e.x.gen == gen {
		e.drain(e.x)
		if err := e.x.km.refresh(); err != nil {
			e.x.broken = true
			return nil, fmt.Errorf("hci: %w", err)
		}
		return e.x, nil
	}
	e.forgetHeld()
	if err := xext.Init(c, "XTEST", xtest.Init); err != nil {
		e.f.Drop(gen)
		return nil, fmt.Errorf("hci: display %s has no XTEST extension, which input injection needs: %w", e.d.Name(), err)
	}
	km, err := newKeymap(c)
	if err != nil {
		e.f.Drop(gen)
		return nil, fmt.Errorf("hci: %w", err)
	}
	e.x = &xconn{c: c, gen: gen, root: xproto.Setup(c).DefaultScreen(c).Root, km: km}
	e.log.Debug("input connection ready", "generation", gen, "spare_keycodes", len(km.spares))
	return e.x, nil
}

// forgetHeld forgets the connection and the keys and buttons held through
// it: they went with its server. Callers hold e.mu.
func (e *Executor) forgetHeld() {
	if e.x == nil {
		return
	}
	e.x = nil
	if len(e.keys) > 0 || len(e.buttons) > 0 {
		e.log.Warn("X connection replaced; forgetting held keys and buttons", "keys", len(e.keys), "buttons", len(e.buttons))
	}
	e.keys = map[xproto.Keycode]*heldKey{}
	e.buttons = map[int]map[Source]bool{}
	e.spareUsed = map[xproto.Keycode]time.Time{}
}

// drain handles every event and error the server has sent so far and returns
// the errors. Events must be read: xgb stops reading replies once its event
// queue is full.
func (e *Executor) drain(x *xconn) []error {
	var errs []error
	for {
		ev, xerr := x.c.PollForEvent()
		if ev == nil && xerr == nil {
			return errs
		}
		if xerr != nil {
			errs = append(errs, xerr)
			continue
		}
		if mn, ok := ev.(xproto.MappingNotifyEvent); ok && mn.Request == xproto.MappingKeyboard {
			x.km.mappingNotify(mn.FirstKeycode, mn.Count)
		}
	}
}

// sync waits until the server has processed everything sent so far (one round
// trip) and reports X errors it raised. It returns the pointer position, which
// the round trip gets for free. ctx bounds the wait; after a cancellation the
// events may still take effect.
func (e *Executor) sync(ctx context.Context, x *xconn) (px, py int, err error) {
	ck := xproto.QueryPointer(x.c, x.root)
	var rep *xproto.QueryPointerReply
	if ctx.Done() == nil {
		rep, err = ck.Reply()
	} else {
		type res struct {
			r   *xproto.QueryPointerReply
			err error
		}
		ch := make(chan res, 1)
		go func() { r, err := ck.Reply(); ch <- res{r, err} }()
		select {
		case r := <-ch:
			rep, err = r.r, r.err
		case <-ctx.Done():
			return 0, 0, unconfirmedError{ctx.Err()}
		}
	}
	if err != nil || rep == nil {
		x.broken = true
		if err == nil {
			err = errors.New("connection closed")
		}
		return 0, 0, fmt.Errorf("hci: X server did not answer: %w", err)
	}
	if errs := e.drain(x); len(errs) > 0 {
		return int(rep.RootX), int(rep.RootY), fmt.Errorf("hci: X server rejected input: %v", errs[0])
	}
	return int(rep.RootX), int(rep.RootY), nil
}

func fakeKey(x *xconn, code xproto.Keycode, down bool) {
	t := byte(xproto.KeyRelease)
	if down {
		t = xproto.KeyPress
	}
	xtest.FakeInput(x.c, t, byte(code), 0, x.root, 0, 0, 0)
}

func fakeButton(x *xconn, button int, down bool) {
	t := byte(xproto.ButtonRelease)
	if down {
		t = xproto.ButtonPress
	}
	xtest.FakeInput(x.c, t, byte(button), 0, x.root, 0, 0, 0)
}

func fakeMotion(x *xconn, sx, sy int) {
	// Detail 0: absolute coordinates on the root window.
	xtest.FakeInput(x.c, xproto.MotionNotify, 0, 0, x.root, int16(sx), int16(sy), 0)
}

// ---- held state (callers hold e.mu) ----

func (e *Executor) codeHeld(code xproto.Keycode) bool { return e.keys[code] != nil }

func (e *Executor) shiftHeld() bool {
	for _, h := range e.keys {
		if h.sym == KeysymShiftL || h.sym == KeysymShiftR {
			return true
		}
	}
	return false
}

// pressKey presses code for src. The press reaches X unless another source
// already holds the key (a second press would read as auto-repeat to apps);
// the same source pressing again is a deliberate repeat and is sent.
func (e *Executor) pressKey(x *xconn, code xproto.Keycode, sym Keysym, src Source) {
	h := e.keys[code]
	if h == nil {
		h = &heldKey{sym: sym, by: map[Source]bool{}}
		e.keys[code] = h
	}
	if len(h.by) == 0 || h.by[src] {
		fakeKey(x, code, true)
	}
	h.by[src] = true
	if _, spare := x.km.bound[sym]; spare {
		e.spareUsed[code] = time.Now()
	}
}

// releaseKey lets go of code for src; the release reaches X when nobody holds
// the key any more. It reports whether src held it.
func (e *Executor) releaseKey(x *xconn, code xproto.Keycode, src Source) bool {
	h := e.keys[code]
	if h == nil || !h.by[src] {
		return false
	}
	delete(h.by, src)
	if len(h.by) == 0 {
		delete(e.keys, code)
		fakeKey(x, code, false)
		if _, ok := e.spareUsed[code]; ok {
			e.spareUsed[code] = time.Now()
		}
	}
	return true
}

func (e *Executor) pressButton(x *xconn, b int, src Source) {
	by := e.buttons[b]
	if by == nil {
		by = map[Source]bool{}
		e.buttons[b] = by
	}
	if len(by) == 0 || by[src] {
		fakeButton(x, b, true)
	}
	by[src] = true
}

func (e *Executor) releaseButton(x *xconn, b int, src Source) bool {
	by := e.buttons[b]
	if by == nil || !by[src] {
		return false
	}
	delete(by, src)
	if len(by) == 0 {
		delete(e.buttons, b)
		fakeButton(x, b, false)
	}
	return true
}

// bindSpares binds each of syms to a spare keycode (those already bound stay
// where they are). Two delays keep clients reading the right symbols:
//
//   - a keycode is only rebound once SpareReuseAge has passed since it was
//     last pressed, since Xlib clients (xterm) fetch the new mapping when they
//     read the MappingNotify and apply it to key events still queued before it;
//   - after rebinding, it waits BindSettle before any key is pressed, since
//     Chromium updates its keymap asynchronously and resolves key events that
//     follow a MappingNotify too closely with the old one.
//
// Binding a whole batch first pays each delay once per batch, not per key.
func (e *Executor) bindSpares(ctx context.Context, x *xconn, syms []Keysym) error {
	keep := map[Keysym]bool{}
	var todo []Keysym
	for _, s := range syms {
		if keep[s] {
			continue
		}
		keep[s] = true
		if code, ok := x.km.boundCode(s); ok {
			x.km.touch(code)
			continue
		}
		todo = append(todo, s)
	}
	if len(todo) == 0 {
		return nil
	}
	victims := x.km.victims(len(todo), e.codeHeld, keep)
	if len(victims) < len(todo) {
		if len(x.km.spares) == 0 {
			return fmt.Errorf("keysym %s is not on the keyboard layout and the layout has no unused keycode to map it to", todo[0])
		}
		return fmt.Errorf("%d keysyms missing from the layout are needed at once but only %d of %d spare keycodes are free: %w",
			len(todo), len(victims), len(x.km.spares), errNoSpare)
	}
	var wait time.Duration
	for _, code := range victims {
		if used, ok := e.spareUsed[code]; ok {
			wait = max(wait, e.opt.SpareReuseAge-time.Since(used))
		}
	}
	if wait > 0 {
		if _, _, err := e.sync(ctx, x); err != nil {
			return err
		}
		if err := sleepCtx(ctx, wait); err != nil {
			return err
		}
	}
	rebound := false
	for i, s := range todo {
		if x.km.bindTo(s, victims[i]) {
			rebound = true
		}
	}
	if rebound {
		if _, _, err := e.sync(ctx, x); err != nil {
			return err
		}
		return sleepCtx(ctx, e.opt.BindSettle)
	}
	return nil
}

// bindSpare binds one keysym (see bindSpares) and returns its keycode.
func (e *Executor) bindSpare(ctx context.Context, x *xconn, sym Keysym) (xproto.Keycode, error) {
	if err := e.bindSpares(ctx, x, []Keysym{sym}); err != nil {
		return 0, err
	}
	code, ok := x.km.boundCode(sym)
	if !ok {
		return 0, fmt.Errorf("binding keysym %s to a spare keycode did not take", sym)
	}
	return code, nil
}

// prepare binds, in one batch, the keysyms missing from the layout that
// syms needs, as far into syms as the spare keycodes reach, and returns how
// many leading keysyms are now ready to type.
func (e *Executor) prepare(ctx context.Context, x *xconn, syms []Keysym) (int, error) {
	free := len(x.km.victims(len(x.km.spares), e.codeHeld, nil))
	seen := map[Keysym]bool{}
	var need []Keysym
	n := 0
	for ; n < len(syms); n++ {
		s := syms[n]
		if seen[s] || x.km.onLayout(s) {
			continue
		}
		if len(need) == free {
			break
		}
		seen[s] = true
		need = append(need, s)
	}
	if n == 0 && len(syms) > 0 {
		_, err := e.bindSpare(ctx, x, syms[0]) // for its error message
		return 0, err
	}
	return n, e.bindSpares(ctx, x, need)
}

// resolveTyped finds the keycode that types sym with no modifier held but
// Shift: level 0 of a key, level 1 with Shift (shift true), or a spare keycode
// bound to it.
func (e *Executor) resolveTyped(ctx context.Context, x *xconn, sym Keysym) (xproto.Keycode, bool, error) {
	if code, shift, ok := x.km.find(sym); ok {
		return code, shift, nil
	}
	code, err := e.bindSpare(ctx, x, sym)
	return code, false, err
}

// resolveHeld finds the keycode for a person's key press: one that yields sym
// with the modifiers they hold right now. Function keys (Return, arrows, Tab)
// mean the same whatever Shift does, so any key carrying them will do;
// characters must come out as sent, so when Shift would change them a spare
// keycode carrying the character on both levels is used instead.
func (e *Executor) resolveHeld(ctx context.Context, x *xconn, sym Keysym) (xproto.Keycode, error) {
	if sym.isFunctionKey() {
		if code, _, ok := x.km.find(sym); ok {
			return code, nil
		}
	} else if code, ok := x.km.findAt(sym, e.shiftHeld()); ok {
		return code, nil
	}
	return e.bindSpare(ctx, x, sym)
}

// ---- primitives for people ----

// unconfirmedError is sync giving up on the X server's answer: the requests
// before it were written to the server and will take effect once it runs
// again.
type unconfirmedError struct{ err error }

func (e unconfirmedError) Error() string { return "hci: waiting for the X server: " + e.err.Error() }
func (e unconfirmedError) Unwrap() error { return e.err }

// publishInput tells the bus about a person's input. An input the X server
// was sent but did not confirm in time is published as done, not failed:
// the desktop will receive it, so the recording must hold it (issue 13: a
// stalled server made the recorder drop keys the desktop got).
func (e *Executor) publishInput(start time.Time, src Source, in Input, err error) {
	ev := Event{Time: start, Mono: start.Sub(e.start), Source: src, Kind: KindInput, Input: &in, Duration: time.Since(start)}
	if err != nil && !errors.As(err, new(unconfirmedError)) {
		ev.Err = err.Error()
	}
	e.bus.publish(ev)
}

// KeyDown presses the key that yields keysym k for src (see resolveHeld for
// how the key is chosen).
func (e *Executor) KeyDown(ctx context.Context, k Keysym, src Source) error {
	if k == 0 {
		return errors.New("hci: key_down: keysym 0 (NoSymbol) is not a key")
	}
	if err := e.allow(src, InputKeyDown); err != nil {
		return err
	}
	start := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	in := Input{Type: InputKeyDown, Keysym: k}
	err := e.keyDownLocked(ctx, k, src, &in)
	e.publishInput(start, src, in, err)
	return err
}

func (e *Executor) keyDownLocked(ctx context.Context, k Keysym, src Source, in *Input) error {
	x, err := e.conn(ctx)
	if err != nil {
		return err
	}
	code := e.heldCode(k, src)
	if code == 0 {
		if code, err = e.resolveHeld(ctx, x, k); err != nil {
			return fmt.Errorf("hci: key_down %s: %w", k, err)
		}
	}
	e.pressKey(x, code, k, src)
	in.X, in.Y, err = e.sync(ctx, x)
	return err
}

// heldCode finds the keycode src already holds for k (so a repeat presses the
// same key), or 0.
func (e *Executor) heldCode(k Keysym, src Source) xproto.Keycode {
	for code, h := range e.keys {
		if h.sym == k && h.by[src] {
			return code
		}
	}
	return 0
}

// KeyUp releases the key src pressed for keysym k. A browser may report the
// release under the other case of a letter (shift let go first), so a held
// key whose symbol differs from k only in case also matches. Releasing a key
// src does not hold is a no-op.
func (e *Executor) KeyUp(ctx context.Context, k Keysym, src Source) error {
	start := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	code := e.findHeldKey(k, src)
	if code == 0 {
		// Nothing of src's to release: only a gate check and no event.
		if err := e.allow(src, InputKeyUp); err != nil {
			return err
		}
		return nil
	}
	if src == "" {
		return errors.New("hci: key_up without a source")
	}
	in := Input{Type: InputKeyUp, Keysym: e.keys[code].sym}
	x, err := e.conn(ctx)
	if err == nil {
		e.releaseKey(x, code, src)
		in.X, in.Y, err = e.sync(ctx, x)
	}
	e.publishInput(start, src, in, err)
	return err
}

func (e *Executor) findHeldKey(k Keysym, src Source) xproto.Keycode {
	var fold xproto.Keycode
	for code, h := range e.keys {
		if !h.by[src] {
			continue
		}
		if h.sym == k {
			return code
		}
		if sameLetter(h.sym, k) {
			fold = code
		}
	}
	return fold
}

func sameLetter(a, b Keysym) bool {
	ra, ok1 := a.Rune()
	rb, ok2 := b.Rune()
	if !ok1 || !ok2 || ra == rb {
		return false
	}
	return toLowerRune(ra) == toLowerRune(rb)
}

// ButtonDown presses pointer button 1..9 (1 left, 2 middle, 3 right, 4-7 the
// wheel, 8-9 back and forward) for src.
func (e *Executor) ButtonDown(ctx context.Context, button int, src Source) error {
	if button < 1 || button > 9 {
		return fmt.Errorf("hci: button_down: button %d is not valid: use 1 (left), 2 (middle), 3 (right), 4-7 (wheel), 8-9 (back, forward)", button)
	}
	if err := e.allow(src, InputButtonDown); err != nil {
		return err
	}
	start := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	in := Input{Type: InputButtonDown, Button: button}
	x, err := e.conn(ctx)
	if err == nil {
		e.pressButton(x, button, src)
		in.X, in.Y, err = e.sync(ctx, x)
	}
	e.publishInput(start, src, in, err)
	return err
}

// ButtonUp releases a button src pressed; releasing one it does not hold is a
// no-op.
func (e *Executor) ButtonUp(ctx context.Context, button int, src Source) error {
	if button < 1 || button > 9 {
		return fmt.Errorf("hci: button_up: button %d is not valid: use 1..9", button)
	}
	start := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.buttons[button][src] {
		return e.allow(src, InputButtonUp)
	}
	in := Input{Type: InputButtonUp, Button: button}
	x, err := e.conn(ctx)
	if err == nil {
		e.releaseButton(x, button, src)
		in.X, in.Y, err = e.sync(ctx, x)
	}
	e.publishInput(start, src, in, err)
	return err
}

// MoveTo moves the pointer to screen pixel (x, y); a point off the screen is
// an error.
func (e *Executor) MoveTo(ctx context.Context, x, y int, src Source) error {
	w, h := e.d.Size()
	if x < 0 || y < 0 || x >= w || y >= h {
		return fmt.Errorf("hci: motion to (%d, %d) is off the %dx%d screen: x must be 0..%d and y 0..%d", x, y, w, h, w-1, h-1)
	}
	if err := e.allow(src, InputMotion); err != nil {
		return err
	}
	start := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	in := Input{Type: InputMotion, X: x, Y: y}
	xc, err := e.conn(ctx)
	if err == nil {
		fakeMotion(xc, x, y)
		_, _, err = e.sync(ctx, xc)
	}
	e.publishInput(start, src, in, err)
	return err
}

// MaxWheelNotches bounds one Wheel call in each direction.
const MaxWheelNotches = 100

// Wheel turns the wheel by notches: +dy down, -dy up, +dx right, -dx left
// (X buttons 5, 4, 7, 6).
func (e *Executor) Wheel(ctx context.Context, dx, dy int, src Source) error {
	if dx < -MaxWheelNotches || dx > MaxWheelNotches || dy < -MaxWheelNotches || dy > MaxWheelNotches {
		return fmt.Errorf("hci: wheel (%d, %d) is too far: at most %d notches each way per event", dx, dy, MaxWheelNotches)
	}
	if dx == 0 && dy == 0 {
		return nil
	}
	if err := e.allow(src, InputWheel); err != nil {
		return err
	}
	start := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	in := Input{Type: InputWheel, DX: dx, DY: dy}
	x, err := e.conn(ctx)
	if err == nil {
		wheelClicks(x, dx, dy)
		in.X, in.Y, err = e.sync(ctx, x)
	}
	e.publishInput(start, src, in, err)
	return err
}

func wheelClicks(x *xconn, dx, dy int) {
	click := func(b, n int) {
		for i := 0; i < n; i++ {
			fakeButton(x, b, true)
			fakeButton(x, b, false)
		}
	}
	if dy < 0 {
		click(4, -dy)
	} else {
		click(5, dy)
	}
	if dx < 0 {
		click(6, -dx)
	} else {
		click(7, dx)
	}
}

// CursorPosition is the pointer's position in screen pixels.
func (e *Executor) CursorPosition(ctx context.Context) (x, y int, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	xc, err := e.conn(ctx)
	if err != nil {
		return 0, 0, err
	}
	return e.sync(ctx, xc)
}

// Held lists the keys (by keysym) and buttons held down now, by anyone.
func (e *Executor) Held() (keys []Keysym, buttons []int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, h := range e.keys {
		keys = append(keys, h.sym)
	}
	for b := range e.buttons {
		buttons = append(buttons, b)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	sort.Ints(buttons)
	return keys, buttons
}

// ReleaseAll releases every held key and button, whoever holds them. The
// releases are published with src as their source. It is never gated.
func (e *Executor) ReleaseAll(ctx context.Context, src Source) error {
	return e.release(ctx, src, func(Source) bool { return true })
}

// ReleaseHeldBy releases what src holds (a viewer leaving, control passing
// on). Keys another source also holds stay down.
func (e *Executor) ReleaseHeldBy(ctx context.Context, src Source) error {
	return e.release(ctx, src, func(s Source) bool { return s == src })
}

func (e *Executor) release(ctx context.Context, src Source, match func(Source) bool) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	return e.releaseLocked(ctx, src, match)
}

func (e *Executor) releaseLocked(ctx context.Context, src Source, match func(Source) bool) error {
	if len(e.keys) == 0 && len(e.buttons) == 0 {
		return nil
	}
	start := time.Now()
	x, err := e.conn(ctx)
	if err != nil {
		return err
	}
	var released []Input
	for b, by := range e.buttons {
		for s := range by {
			if match(s) && e.releaseButton(x, b, s) && e.buttons[b] == nil {
				released = append(released, Input{Type: InputButtonUp, Button: b})
			}
		}
	}
	for code, h := range e.keys {
		sym := h.sym
		for s := range h.by {
			if match(s) && e.releaseKey(x, code, s) && e.keys[code] == nil {
				released = append(released, Input{Type: InputKeyUp, Keysym: sym})
			}
		}
	}
	px, py, err := e.sync(ctx, x)
	for _, in := range released {
		in.X, in.Y = px, py
		e.publishInput(start, src, in, err)
	}
	return err
}

// Close releases everything still held, restores the keycodes it bound and
// closes its X connection and the bus. The display stays up.
func (e *Executor) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var err error
	if _, gen, ok := e.f.Current(); ok && e.x != nil && !e.x.broken && e.x.gen == gen {
		err = e.releaseLocked(ctx, SourceScript, func(Source) bool { return true })
		e.x.km.unbindAll()
		if _, _, serr := e.sync(ctx, e.x); err == nil {
			err = serr
		}
	}
	e.x = nil
	e.f.Close()
	e.closed = true
	e.bus.close()
	return err
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
