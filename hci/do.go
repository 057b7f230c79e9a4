package hci

import (
	"context"
	"fmt"
	"time"
	"unicode"

	"github.com/jezek/xgb/xproto"
)

func toLowerRune(r rune) rune { return unicode.ToLower(r) }

// typeChunk is how many characters are typed per hold of the executor's lock,
// so a long text does not shut a person's input out until it is done.
const typeChunk = 32

// Do validates a against the current space and runs it. Actions that only
// observe (screenshot, zoom) do nothing here: the Result says what the caller
// must return. wait sleeps for its duration; hold_key holds its keys for its
// duration without blocking other input meanwhile. Every call that passes the
// gate is published on the bus once it finishes, with its error if it failed.
func (e *Executor) Do(ctx context.Context, a Action, src Source) (Result, error) {
	name := a.Action
	if name == "" {
		name = "action"
	}
	if err := e.allow(src, name); err != nil {
		return Result{}, err
	}
	start := time.Now()
	res, err := e.do(ctx, a, src)
	ac := a
	ev := Event{Time: start, Mono: start.Sub(e.start), Source: src, Kind: KindAction, Action: &ac, Duration: time.Since(start), Via: ViaOf(ctx)}
	if err != nil {
		ev.Err = err.Error()
	}
	res.Seq = e.bus.publish(ev).Seq
	return res, err
}

func (e *Executor) do(ctx context.Context, a Action, src Source) (Result, error) {
	s := e.Space()
	if err := a.Validate(s); err != nil {
		return Result{}, fmt.Errorf("hci: %w", err)
	}
	if w, h := e.d.Size(); w != s.ScreenW || h != s.ScreenH {
		return Result{}, fmt.Errorf("hci: the executor's space is for a %dx%d screen but the screen is %dx%d; set a new space", s.ScreenW, s.ScreenH, w, h)
	}
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("hci: %s: %w", a.Action, err)
	}
	res := Result{
		Screenshot: a.Action != ActCursorPosition && a.Action != ActZoom,
		Settle:     a.Mutates(),
	}
	var err error
	switch a.Action {
	case ActScreenshot:
	case ActZoom:
		r := s.RegionToScreen(a.Region[0], a.Region[1], a.Region[2], a.Region[3])
		res.Zoom = &r
	case ActWait:
		err = sleepCtx(ctx, seconds(*a.Duration))
	case ActCursorPosition:
		var x, y int
		if x, y, err = e.CursorPosition(ctx); err == nil {
			mx, my := s.ToModel(x, y)
			res.Text = fmt.Sprintf("X=%d,Y=%d", mx, my)
		}
	case ActLeftClick, ActRightClick, ActMiddleClick, ActDoubleClick, ActTripleClick:
		err = e.click(ctx, a, s, src)
	case ActMouseMove:
		err = e.locked(ctx, func(x *xconn) error {
			motionTo(x, s, a.Coordinate)
			return nil
		})
	case ActLeftClickDrag:
		err = e.drag(ctx, a, s, src)
	case ActLeftMouseDown, ActLeftMouseUp:
		err = e.locked(ctx, func(x *xconn) error {
			if a.Coordinate != nil {
				motionTo(x, s, a.Coordinate)
			}
			if a.Action == ActLeftMouseDown {
				e.pressButton(x, 1, src)
			} else {
				e.releaseButton(x, 1, src)
			}
			return nil
		})
	case ActScroll:
		err = e.scroll(ctx, a, s, src)
	case ActType:
		err = e.typeText(ctx, a.Text, src)
	case ActKey:
		err = e.pressChords(ctx, a.Text, src)
	case ActHoldKey:
		err = e.holdKey(ctx, a.Text, seconds(*a.Duration), src)
	default:
		err = fmt.Errorf("action %q is not implemented", a.Action)
	}
	if err != nil {
		return res, fmt.Errorf("hci: %s: %w", a.Action, err)
	}
	return res, nil
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func toScreen(s Space, p []int) (int, int) { return s.ToScreen(p[0], p[1]) }

func motionTo(x *xconn, s Space, p []int) {
	sx, sy := toScreen(s, p)
	fakeMotion(x, sx, sy)
}

// locked runs f with the executor's lock and connection, then waits for the
// server to have processed what f sent.
func (e *Executor) locked(ctx context.Context, f func(x *xconn) error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, err := e.conn(ctx)
	if err != nil {
		return err
	}
	ferr := f(x)
	_, _, serr := e.sync(ctx, x)
	if ferr != nil {
		return ferr
	}
	return serr
}

// pressed is a stack of keys pressed during one action, released in reverse
// whatever happens.
type pressed struct {
	codes []xproto.Keycode
}

// prepareAll binds every keysym of syms the layout lacks, or fails: keys
// pressed together must all be on the keyboard at once.
func (e *Executor) prepareAll(ctx context.Context, x *xconn, syms []Keysym) error {
	n, err := e.prepare(ctx, x, syms)
	if err == nil && n < len(syms) {
		err = fmt.Errorf("keys %v need more spare keycodes than are free", syms)
	}
	return err
}

// pressTyped presses sym for src as a typist would: with Shift when the
// layout has it on the shifted level (unless Shift is already down).
func (e *Executor) pressTyped(ctx context.Context, x *xconn, sym Keysym, src Source, p *pressed) error {
	code, shift, err := e.resolveTyped(ctx, x, sym)
	if err != nil {
		return err
	}
	return e.pressResolved(ctx, x, sym, code, shift, src, p)
}

// pressResolved is pressTyped with sym's key already found (resolveTyped):
// code, and shift when it is on the shifted level.
func (e *Executor) pressResolved(ctx context.Context, x *xconn, sym Keysym, code xproto.Keycode, shift bool, src Source, p *pressed) error {
	if shift && !e.shiftHeld() {
		sc, _, err := e.resolveTyped(ctx, x, KeysymShiftL)
		if err != nil {
			return err
		}
		e.pressKey(x, sc, KeysymShiftL, src)
		p.codes = append(p.codes, sc)
	}
	e.pressKey(x, code, sym, src)
	p.codes = append(p.codes, code)
	return nil
}

func (e *Executor) releasePressed(x *xconn, src Source, p *pressed) {
	for i := len(p.codes) - 1; i >= 0; i-- {
		e.releaseKey(x, p.codes[i], src)
	}
	p.codes = p.codes[:0]
}

// withModifiers presses mods, runs f, and releases the modifiers even when f
// fails.
func (e *Executor) withModifiers(ctx context.Context, x *xconn, mods []Keysym, src Source, f func() error) error {
	var p pressed
	defer e.releasePressed(x, src, &p)
	if err := e.prepareAll(ctx, x, mods); err != nil {
		return err
	}
	for _, m := range mods {
		if err := e.pressTyped(ctx, x, m, src, &p); err != nil {
			return err
		}
	}
	return f()
}

var clickButtons = map[string]struct{ button, count int }{
	ActLeftClick: {1, 1}, ActRightClick: {3, 1}, ActMiddleClick: {2, 1},
	ActDoubleClick: {1, 2}, ActTripleClick: {1, 3},
}

func (e *Executor) click(ctx context.Context, a Action, s Space, src Source) error {
	mods, err := a.Modifiers()
	if err != nil {
		return err
	}
	cb := clickButtons[a.Action]
	return e.locked(ctx, func(x *xconn) error {
		if a.Coordinate != nil {
			motionTo(x, s, a.Coordinate)
		}
		return e.withModifiers(ctx, x, mods, src, func() error {
			for i := 0; i < cb.count; i++ {
				e.pressButton(x, cb.button, src)
				e.releaseButton(x, cb.button, src)
			}
			return nil
		})
	})
}

func (e *Executor) drag(ctx context.Context, a Action, s Space, src Source) error {
	mods, err := a.Modifiers()
	if err != nil {
		return err
	}
	x0, y0 := toScreen(s, a.StartCoordinate)
	x1, y1 := toScreen(s, a.Coordinate)
	return e.locked(ctx, func(x *xconn) error {
		fakeMotion(x, x0, y0)
		return e.withModifiers(ctx, x, mods, src, func() error {
			e.pressButton(x, 1, src)
			defer e.releaseButton(x, 1, src)
			n := e.opt.DragSteps
			for i := 1; i <= n; i++ {
				fakeMotion(x, x0+(x1-x0)*i/n, y0+(y1-y0)*i/n)
				if _, _, err := e.sync(ctx, x); err != nil {
					return err
				}
				if err := sleepCtx(ctx, e.opt.DragStepDelay); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

var scrollButtons = map[string]int{"up": 4, "down": 5, "left": 6, "right": 7}

func (e *Executor) scroll(ctx context.Context, a Action, s Space, src Source) error {
	mods, err := a.Modifiers()
	if err != nil {
		return err
	}
	n := DefaultScrollNotch
	if a.ScrollAmount != nil {
		n = *a.ScrollAmount
	}
	b := scrollButtons[a.ScrollDirection]
	return e.locked(ctx, func(x *xconn) error {
		if a.Coordinate != nil {
			motionTo(x, s, a.Coordinate)
		}
		return e.withModifiers(ctx, x, mods, src, func() error {
			for i := 0; i < n; i++ {
				fakeButton(x, b, true)
				fakeButton(x, b, false)
			}
			return nil
		})
	})
}

// repeatGap parts two presses of one key in a row. X applications tell an
// autorepeat from a key's release followed by its press at the same server
// time, and typed at full speed a doubled letter arrives just so:
// LibreOffice dropped the second one ("Meeting 11 apples" came out "Meting
// 1 aples"). Before pressing the key it just released, the executor makes a
// round trip (the release has been processed) and waits this long, so the
// press has a server time of its own.
const repeatGap = 2 * time.Millisecond

// typeText types text character by character. "\r\n" and "\r" are one
// Return, "\t" is Tab.
func (e *Executor) typeText(ctx context.Context, text string, src Source) error {
	syms := make([]Keysym, 0, len(text))
	prevCR := false
	for _, r := range text {
		if r == '\n' && prevCR {
			prevCR = false
			continue
		}
		prevCR = r == '\r'
		syms = append(syms, KeysymForRune(r))
	}
	var last xproto.Keycode // the key the last character pressed
	for i := 0; i < len(syms); {
		var n int
		err := e.locked(ctx, func(x *xconn) error {
			// Bind what this stretch needs from spare keycodes in one batch,
			// then type it.
			ready, err := e.prepare(ctx, x, syms[i:min(i+typeChunk, len(syms))])
			if err != nil {
				return fmt.Errorf("character %d (%s): %w", i, syms[i], err)
			}
			for j, sym := range syms[i : i+ready] {
				if err := ctx.Err(); err != nil {
					return err
				}
				if j > 0 && e.opt.TypeDelay > 0 {
					if err := sleepCtx(ctx, e.opt.TypeDelay); err != nil {
						return err
					}
				}
				// The key is found once, for the repeat gap and the press:
				// nothing between them reloads the keymap (only locked does).
				code, shift, err := e.resolveTyped(ctx, x, sym)
				if err != nil {
					return fmt.Errorf("character %d (%s): %w", i+j, sym, err)
				}
				if code == last && e.opt.TypeDelay < repeatGap {
					if _, _, err := e.sync(ctx, x); err != nil {
						return err
					}
					if err := sleepCtx(ctx, repeatGap); err != nil {
						return err
					}
				}
				var p pressed
				err = e.pressResolved(ctx, x, sym, code, shift, src, &p)
				if len(p.codes) > 0 {
					last = p.codes[len(p.codes)-1]
				}
				e.releasePressed(x, src, &p)
				if err != nil {
					return fmt.Errorf("character %d (%s): %w", i+j, sym, err)
				}
				n++
			}
			return nil
		})
		if err != nil {
			return err
		}
		i += n
		if e.opt.TypeDelay > 0 && i < len(syms) {
			if err := sleepCtx(ctx, e.opt.TypeDelay); err != nil {
				return err
			}
		}
	}
	return nil
}

// pressChords presses each chord of a key action in turn: keys down in order, up in
// reverse, as xdotool key does.
func (e *Executor) pressChords(ctx context.Context, text string, src Source) error {
	chords, err := ParseKeys(text)
	if err != nil {
		return err
	}
	return e.locked(ctx, func(x *xconn) error {
		for _, chord := range chords {
			if err := e.prepareAll(ctx, x, chord); err != nil {
				return err
			}
			var p pressed
			for _, sym := range chord {
				if err := e.pressTyped(ctx, x, sym, src, &p); err != nil {
					e.releasePressed(x, src, &p)
					return err
				}
			}
			e.releasePressed(x, src, &p)
		}
		return nil
	})
}

// holdKey presses the keys, lets go of the executor's lock while they are
// held (so a person's input is not blocked), and releases them after d or when
// ctx ends, whichever comes first.
func (e *Executor) holdKey(ctx context.Context, text string, d time.Duration, src Source) error {
	chords, err := ParseKeys(text)
	if err != nil {
		return err
	}
	var p pressed
	err = e.locked(ctx, func(x *xconn) error {
		var all []Keysym
		for _, chord := range chords {
			all = append(all, chord...)
		}
		if err := e.prepareAll(ctx, x, all); err != nil {
			return err
		}
		for _, chord := range chords {
			for _, sym := range chord {
				if err := e.pressTyped(ctx, x, sym, src, &p); err != nil {
					return err
				}
			}
		}
		return nil
	})
	var waitErr error
	if err == nil {
		waitErr = sleepCtx(ctx, d)
	}
	// Release even when ctx has ended: keys must not stay down.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	rerr := e.locked(rctx, func(x *xconn) error {
		e.releasePressed(x, src, &p)
		return nil
	})
	switch {
	case err != nil:
		return err
	case waitErr != nil:
		return waitErr
	}
	return rerr
}
