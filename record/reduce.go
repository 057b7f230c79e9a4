package record

import (
	"math"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/deskenv/deskenv/hci"
)

// Thresholds decide how a person's raw input is cut into actions. The
// defaults follow the recorders surveyed in docs/RECORDING.md.
type Thresholds struct {
	// TypePause ends a typing run (and a run of one repeated key): a key
	// pressed this long or longer after the previous event starts a new step.
	TypePause time.Duration
	// MultiClick is the longest time between the presses of a double or
	// triple click; MultiClickDist the farthest (screen pixels, Chebyshev)
	// the presses may be apart.
	MultiClick     time.Duration
	MultiClickDist int
	// DragDist: a left press released this far (screen pixels) or farther
	// from where it went down is a left_click_drag.
	DragDist int
	// LongPress: a left press held this long without becoming a drag is
	// left_mouse_down + left_mouse_up.
	LongPress time.Duration
	// ScrollGap ends a scroll burst: ticks closer than this in the same
	// direction add up to one scroll.
	ScrollGap time.Duration
	// MoveDist: pointer motion shorter than this (screen pixels) is jitter
	// and ignored; longer motion that comes to rest for TypePause without a
	// click is a mouse_move.
	MoveDist int
	// Idle: this long or longer without any input from the person becomes
	// a wait of that duration.
	Idle time.Duration
}

// DefaultThresholds are the thresholds documented in docs/RECORDING.md.
func DefaultThresholds() Thresholds {
	return Thresholds{
		TypePause:      500 * time.Millisecond,
		MultiClick:     500 * time.Millisecond,
		MultiClickDist: 5,
		DragDist:       8,
		LongPress:      time.Second,
		ScrollGap:      500 * time.Millisecond,
		MoveDist:       5,
		Idle:           2 * time.Second,
	}
}

func (th Thresholds) withDefaults() Thresholds {
	d := DefaultThresholds()
	if th.TypePause <= 0 {
		th.TypePause = d.TypePause
	}
	if th.MultiClick <= 0 {
		th.MultiClick = d.MultiClick
	}
	if th.MultiClickDist <= 0 {
		th.MultiClickDist = d.MultiClickDist
	}
	if th.DragDist <= 0 {
		th.DragDist = d.DragDist
	}
	if th.LongPress <= 0 {
		th.LongPress = d.LongPress
	}
	if th.ScrollGap <= 0 {
		th.ScrollGap = d.ScrollGap
	}
	if th.MoveDist <= 0 {
		th.MoveDist = d.MoveDist
	}
	if th.Idle <= 0 {
		th.Idle = d.Idle
	}
	return th
}

// Reduce turns an episode's raw events into steps with the default
// thresholds: actions (from any source) pass through as they are, a person's
// input primitives are reduced to the computer tool's vocabulary, and
// coordinates are converted to model space with space (the zero Space leaves
// them in screen space). It is a pure function of its arguments: the recorder
// runs the same Reducer as events arrive, so reducing input.jsonl again gives
// the steps it wrote, numbered from 0 and without observation links.
func Reduce(events []Event, space hci.Space) []Step {
	return DefaultThresholds().Reduce(events, space)
}

// Reduce is Reduce with these thresholds.
func (th Thresholds) Reduce(events []Event, space hci.Space) []Step {
	r := NewReducer(space, th)
	var out []Step
	for _, ev := range events {
		out = append(out, r.Add(ev)...)
	}
	out = append(out, r.Flush()...)
	for i := range out {
		out[i].Step = i
	}
	return out
}

// A Reducer reduces events as they arrive. Add returns the steps an event
// completes; Tick the steps that the passing of time completes (a typing run
// ends when no key follows within TypePause); Flush whatever is left at the
// end. Steps come out in the order they started, except that a step still
// being built when an agent's action arrives is finished first.
type Reducer struct {
	space hci.Space
	th    Thresholds

	out    []Step
	open   *building // the one step being built (typing run, repeated key, click group, scroll, motion)
	press  *pressing // a pointer button held down
	mods   []heldMod // modifiers held, in the order pressed
	px, py int       // the pointer, screen pixels
	// ptrX, ptrY is where the pointer was as of the last step emitted: motion
	// is measured from there.
	ptrX, ptrY int
	lastEnd    float64 // end of the person's last event
	haveLast   bool
}

// NewReducer returns a Reducer; zero thresholds take the defaults.
func NewReducer(space hci.Space, th Thresholds) *Reducer {
	return &Reducer{space: space, th: th.withDefaults()}
}

type buildKind int

const (
	bType buildKind = iota
	bKey
	bClick
	bScroll
	bMove
)

type building struct {
	kind        buildKind
	src         hci.Source
	t0, t1      float64 // first event's start, last event's end
	first, last int     // raw event lines
	text        []rune  // bType
	chord       string  // bKey: one chord; n: how many times
	n           int
	button      int // bClick: button, n presses
	x, y        int // bClick, bScroll: screen position
	lastPress   float64
	mods        string // bClick, bScroll: modifiers held
	dir         string // bScroll
}

type pressing struct {
	button      int
	src         hci.Source
	x, y        int
	t0          float64
	first, last int
	maxDist     int
	mods        string
	cont        bool // continues the open click group
	hold        bool // left_mouse_down already emitted
}

type heldMod struct {
	sym   hci.Keysym
	used  bool // a key, click or scroll happened while it was held
	t0    float64
	first int
}

// Add feeds one event and returns the steps it completes.
func (r *Reducer) Add(ev Event) []Step {
	switch {
	case ev.Kind == KindPause || ev.Kind == KindResume:
		r.closeOpen()
		r.haveLast = false
		// A pause drops key releases, so a modifier held into it (the
		// page's privacy key is Ctrl+Alt+P) would stay held for ever and
		// turn what is typed after it into chords. Its release, if it
		// comes after, matches nothing and makes no step.
		r.mods = nil
	case ev.Kind == hci.KindAction && ev.Action != nil:
		r.tick(ev.T)
		r.closeOpen()
		r.haveLast = false
		st := Step{Source: ev.Source, Action: *ev.Action, TStart: ev.T, TEnd: ev.End(), Events: []int{ev.I, ev.I}, Err: ev.Err, Via: ev.Via}
		r.out = append(r.out, st)
		if c := ev.Action.Coordinate; len(c) == 2 && ev.Err == "" {
			r.ptrX, r.ptrY = r.toScreen(c[0], c[1])
			r.px, r.py = r.ptrX, r.ptrY
		}
	case ev.Kind == hci.KindInput && ev.Input != nil && isHuman(ev.Source) && ev.Err == "":
		r.input(ev)
	}
	return r.take()
}

// isHuman tells a person's input from the releases scripts and resets send.
func isHuman(s hci.Source) bool {
	switch s {
	case hci.SourceAgent, hci.SourceScript, hci.SourceReplay, "":
		return false
	}
	return true
}

// Tick completes what has waited long enough at time now (episode seconds)
// and returns those steps.
func (r *Reducer) Tick(now float64) []Step {
	r.tick(now)
	return r.take()
}

func (r *Reducer) tick(now float64) {
	if o := r.open; o != nil && r.press == nil {
		var ref float64
		var window time.Duration
		switch o.kind {
		case bType, bKey:
			ref, window = o.t1, r.th.TypePause
		case bClick:
			ref, window = o.lastPress, r.th.MultiClick
		case bScroll:
			ref, window = o.t1, r.th.ScrollGap
		case bMove:
			ref, window = o.t1, r.th.TypePause
		}
		if now-ref >= window.Seconds() {
			r.closeOpen()
		}
	}
}

// PendingStart is the earliest start of a step not yet returned (one being
// built, a button or modifier held, or a wait that the next event could
// close), and whether there is one.
func (r *Reducer) PendingStart() (float64, bool) {
	t, ok := 0.0, false
	take := func(v float64) {
		if !ok || v < t {
			t, ok = v, true
		}
	}
	if r.open != nil {
		take(r.open.t0)
	}
	if r.press != nil {
		take(r.press.t0)
	}
	for _, m := range r.mods {
		take(m.t0)
	}
	if r.haveLast {
		take(r.lastEnd)
	}
	return t, ok
}

// Flush completes everything still being built, as at the end of an
// episode, and returns those steps.
func (r *Reducer) Flush() []Step {
	if p := r.press; p != nil && p.button == 1 && !p.hold {
		r.closeOpen()
		r.emitAt(p.src, hci.Action{Action: hci.ActLeftMouseDown, Coordinate: r.model(p.x, p.y)}, p.t0, p.t0, p.first, p.first)
	}
	r.press = nil
	r.closeOpen()
	return r.take()
}

func (r *Reducer) take() []Step {
	out := r.out
	r.out = nil
	return out
}

func (r *Reducer) input(ev Event) {
	in := ev.Input
	if r.haveLast && ev.T-r.lastEnd >= r.th.Idle.Seconds() && r.press == nil {
		r.tick(ev.T)
		r.closeOpen()
		r.emitWait(ev.Source, r.lastEnd, ev.T)
	}
	r.tick(ev.T)
	switch in.Type {
	case hci.InputMotion:
		r.motion(ev, in.X, in.Y)
	case hci.InputButtonDown:
		r.px, r.py = in.X, in.Y
		if dx, dy, ok := wheelButton(in.Button); ok {
			r.wheel(ev, dx, dy)
		} else {
			r.buttonDown(ev, in.Button)
		}
	case hci.InputButtonUp:
		if _, _, ok := wheelButton(in.Button); !ok {
			r.buttonUp(ev, in.Button, in.X, in.Y)
		}
	case hci.InputWheel:
		r.wheel(ev, in.DX, in.DY)
	case hci.InputKeyDown:
		r.keyDown(ev, in.Keysym)
	case hci.InputKeyUp:
		r.keyUp(ev, in.Keysym)
	}
	r.lastEnd = max(r.lastEnd, ev.End())
	if !r.haveLast {
		r.lastEnd = ev.End()
	}
	r.haveLast = true
}

// wheelButton is the scroll a wheel button (X's buttons 4 to 7: up, down,
// left, right) stands for; ok is false for the other buttons.
func wheelButton(b int) (dx, dy int, ok bool) {
	switch b {
	case 4:
		return 0, -1, true
	case 5:
		return 0, 1, true
	case 6:
		return -1, 0, true
	case 7:
		return 1, 0, true
	}
	return 0, 0, false
}

func (r *Reducer) motion(ev Event, x, y int) {
	r.px, r.py = x, y
	if p := r.press; p != nil {
		p.maxDist = max(p.maxDist, dist(p.x, p.y, x, y))
		p.last = ev.I
		return
	}
	if o := r.open; o != nil && o.kind == bMove {
		o.t1, o.last = ev.End(), ev.I
		return
	}
	if dist(r.ptrX, r.ptrY, x, y) < r.th.MoveDist {
		return // jitter
	}
	r.closeOpen()
	r.open = &building{kind: bMove, src: ev.Source, t0: ev.T, t1: ev.End(), first: ev.I, last: ev.I}
}

func (r *Reducer) buttonDown(ev Event, b int) {
	if r.press != nil {
		// A second button while one is held: the first is finished here as
		// a click at its position (the vocabulary has no chorded buttons).
		r.finishPress(ev, r.press.x, r.press.y, true)
	}
	if o := r.open; o != nil && o.kind == bMove {
		r.open = nil // the motion led to this press: the press carries the position
	}
	mods := r.modsText(true)
	cont := false
	if o := r.open; o != nil && o.kind == bClick && o.button == b && o.n < 3 && o.mods == mods &&
		dist(o.x, o.y, r.px, r.py) <= r.th.MultiClickDist {
		cont = true
	} else {
		r.closeOpen()
	}
	r.press = &pressing{button: b, src: ev.Source, x: r.px, y: r.py, t0: ev.T, first: ev.I, last: ev.I, mods: mods, cont: cont}
}

func (r *Reducer) buttonUp(ev Event, b, x, y int) {
	p := r.press
	if p == nil || p.button != b {
		if r.open != nil {
			r.open.last = max(r.open.last, ev.I)
		}
		return
	}
	r.px, r.py = x, y
	p.last = ev.I
	p.maxDist = max(p.maxDist, dist(p.x, p.y, x, y))
	r.finishPress(ev, x, y, false)
}

// finishPress decides what a press was once it is released at (x, y):
// a drag, a long hold, or one more click of a click group.
func (r *Reducer) finishPress(ev Event, x, y int, forced bool) {
	p := r.press
	r.press = nil
	end := ev.End()
	switch {
	case p.hold:
		r.closeOpen()
		r.emitAt(p.src, hci.Action{Action: hci.ActLeftMouseUp, Coordinate: r.model(x, y)}, ev.T, end, ev.I, ev.I)
		r.setPtr(x, y)
	case p.button == 1 && p.maxDist >= r.th.DragDist && !forced:
		r.closeOpen()
		a := hci.Action{Action: hci.ActLeftClickDrag, StartCoordinate: r.model(p.x, p.y), Coordinate: r.model(x, y), Text: p.mods}
		r.emitAt(p.src, a, p.t0, end, p.first, p.last)
		r.setPtr(x, y)
	case p.button == 1 && ev.T-p.t0 >= r.th.LongPress.Seconds() && !forced:
		r.closeOpen()
		r.emitAt(p.src, hci.Action{Action: hci.ActLeftMouseDown, Coordinate: r.model(p.x, p.y)}, p.t0, p.t0, p.first, p.first)
		r.emitAt(p.src, hci.Action{Action: hci.ActLeftMouseUp, Coordinate: r.model(x, y)}, ev.T, end, ev.I, ev.I)
		r.setPtr(x, y)
	case p.button > 3:
		// Back and forward (8, 9) have no action in the vocabulary; the raw
		// events keep them.
	case p.cont && r.open != nil:
		o := r.open
		o.n++
		o.lastPress = p.t0
		o.t1, o.last = end, p.last
	default:
		r.closeOpen()
		r.open = &building{kind: bClick, src: p.src, t0: p.t0, t1: end, first: p.first, last: p.last,
			button: p.button, n: 1, x: p.x, y: p.y, lastPress: p.t0, mods: p.mods}
	}
}

func (r *Reducer) wheel(ev Event, dx, dy int) {
	if p := r.press; p != nil {
		r.holdPress()
	}
	if o := r.open; o != nil && o.kind == bMove {
		r.open = nil
	}
	mods := r.modsText(true)
	tick := func(dir string, n int) {
		if n <= 0 {
			return
		}
		if o := r.open; o != nil && o.kind == bScroll && o.dir == dir && o.mods == mods {
			o.n += n
			o.t1, o.last = ev.End(), ev.I
		} else {
			r.closeOpen()
			r.open = &building{kind: bScroll, src: ev.Source, t0: ev.T, t1: ev.End(), first: ev.I, last: ev.I,
				x: r.px, y: r.py, dir: dir, n: n, mods: mods}
		}
		for r.open.n > hci.MaxScrollAmount {
			// One action scrolls at most MaxScrollAmount notches: split.
			rest := r.open.n - hci.MaxScrollAmount
			r.open.n = hci.MaxScrollAmount
			o := *r.open
			r.closeOpen()
			o.n, o.t0, o.first = rest, ev.T, ev.I
			r.open = &o
		}
	}
	switch {
	case dy < 0:
		tick("up", -dy)
	case dy > 0:
		tick("down", dy)
	}
	switch {
	case dx < 0:
		tick("left", -dx)
	case dx > 0:
		tick("right", dx)
	}
}

// holdPress turns a held left button into left_mouse_down when something
// else happens while it is held (a key, the wheel).
func (r *Reducer) holdPress() {
	p := r.press
	if p == nil || p.hold || p.button != 1 {
		return
	}
	r.closeOpen()
	r.emitAt(p.src, hci.Action{Action: hci.ActLeftMouseDown, Coordinate: r.model(p.x, p.y)}, p.t0, p.t0, p.first, p.first)
	p.hold = true
	p.cont = false
}

func (r *Reducer) keyDown(ev Event, k hci.Keysym) {
	if chordModifier(k) {
		r.modifierDown(ev, k)
		return
	}
	r.holdPress()
	if o := r.open; o != nil && o.kind == bMove {
		r.closeOpen()
	}
	typing := r.typingOnly()
	for i := range r.mods {
		r.mods[i].used = true
	}
	if ch, printable := k.Rune(); printable && typing {
		r.typeRune(ev, ch)
		return
	}
	chord := r.chord(k)
	if o := r.open; o != nil && o.kind == bKey && o.chord == chord {
		o.n++
		o.t1, o.last = ev.End(), ev.I
		return
	}
	r.closeOpen()
	r.open = &building{kind: bKey, src: ev.Source, t0: ev.T, t1: ev.End(), first: ev.I, last: ev.I, chord: chord, n: 1}
}

// modifierDown notes a modifier pressed, once: the X server repeats a held
// key, and a modifier that does not type (Ctrl, Alt, Super) ends the text
// being typed.
func (r *Reducer) modifierDown(ev Event, k hci.Keysym) {
	for _, m := range r.mods {
		if m.sym == k {
			return // auto-repeat of a held modifier
		}
	}
	if !typingModifier(k) {
		r.closeOpen()
	}
	r.mods = append(r.mods, heldMod{sym: k, t0: ev.T, first: ev.I})
}

// typingOnly reports whether every held modifier is one that types (Shift,
// AltGr): a printable key then types text rather than making a chord.
func (r *Reducer) typingOnly() bool {
	for _, m := range r.mods {
		if !typingModifier(m.sym) {
			return false
		}
	}
	return true
}

// typeRune adds ch to the text being typed, or starts a new type step.
func (r *Reducer) typeRune(ev Event, ch rune) {
	if o := r.open; o != nil && o.kind == bType {
		o.text = append(o.text, ch)
		o.t1, o.last = ev.End(), ev.I
		return
	}
	r.closeOpen()
	r.open = &building{kind: bType, src: ev.Source, t0: ev.T, t1: ev.End(), first: ev.I, last: ev.I, text: []rune{ch}}
}

func (r *Reducer) keyUp(ev Event, k hci.Keysym) {
	for i, m := range r.mods {
		if m.sym != k {
			continue
		}
		r.mods = append(r.mods[:i], r.mods[i+1:]...)
		if !m.used && !typingModifier(k) {
			// A modifier pressed and released on its own (Super opens a
			// menu, Alt focuses a menu bar): a key action of its own.
			r.closeOpen()
			r.emitAt(ev.Source, hci.Action{Action: hci.ActKey, Text: modName(k)}, m.t0, ev.End(), m.first, ev.I)
		} else if r.open != nil {
			r.open.last = max(r.open.last, ev.I)
		}
		return
	}
	if o := r.open; o != nil && (o.kind == bType || o.kind == bKey) {
		o.t1, o.last = max(o.t1, ev.End()), max(o.last, ev.I)
	}
}

// closeOpen emits the step being built, if any.
func (r *Reducer) closeOpen() {
	o := r.open
	if o == nil {
		return
	}
	r.open = nil
	switch o.kind {
	case bType:
		r.emitAt(o.src, hci.Action{Action: hci.ActType, Text: string(o.text)}, o.t0, o.t1, o.first, o.last)
	case bKey:
		text := o.chord
		for i := 1; i < o.n; i++ {
			text += " " + o.chord
		}
		r.emitAt(o.src, hci.Action{Action: hci.ActKey, Text: text}, o.t0, o.t1, o.first, o.last)
	case bClick:
		name := map[int]string{1: hci.ActLeftClick, 2: hci.ActMiddleClick, 3: hci.ActRightClick}[o.button]
		n := 1
		if o.button == 1 {
			name = [...]string{hci.ActLeftClick, hci.ActDoubleClick, hci.ActTripleClick}[min(o.n, 3)-1]
		} else {
			n = o.n // the vocabulary has no double right or middle click
		}
		for i := 0; i < n; i++ {
			r.emitAt(o.src, hci.Action{Action: name, Coordinate: r.model(o.x, o.y), Text: o.mods}, o.t0, o.t1, o.first, o.last)
		}
		r.setPtr(o.x, o.y)
	case bScroll:
		amount := o.n
		r.emitAt(o.src, hci.Action{Action: hci.ActScroll, Coordinate: r.model(o.x, o.y), ScrollDirection: o.dir,
			ScrollAmount: &amount, Text: o.mods}, o.t0, o.t1, o.first, o.last)
		r.setPtr(o.x, o.y)
	case bMove:
		if dist(r.ptrX, r.ptrY, r.px, r.py) >= r.th.MoveDist {
			r.emitAt(o.src, hci.Action{Action: hci.ActMouseMove, Coordinate: r.model(r.px, r.py)}, o.t0, o.t1, o.first, o.last)
			r.setPtr(r.px, r.py)
		}
	}
}

func (r *Reducer) emitWait(src hci.Source, from, to float64) {
	for from < to {
		d := math.Min(to-from, hci.MaxDuration)
		rounded := math.Round(d*10) / 10
		r.out = append(r.out, Step{Source: src, Action: hci.Action{Action: hci.ActWait, Duration: &rounded}, TStart: from, TEnd: from + d})
		from += d
	}
}

func (r *Reducer) emitAt(src hci.Source, a hci.Action, t0, t1 float64, first, last int) {
	if last < first {
		last = first
	}
	r.out = append(r.out, Step{Source: src, Action: a, TStart: t0, TEnd: t1, Events: []int{first, last}})
}

func (r *Reducer) setPtr(x, y int) { r.ptrX, r.ptrY = x, y }

// model converts a screen point to model space.
func (r *Reducer) model(x, y int) []int {
	if r.space.Check() != nil {
		return []int{x, y}
	}
	mx, my := r.space.ToModel(x, y)
	mx = min(max(mx, 0), r.space.ModelW-1)
	my = min(max(my, 0), r.space.ModelH-1)
	return []int{mx, my}
}

func (r *Reducer) toScreen(x, y int) (int, int) {
	if r.space.Check() != nil {
		return x, y
	}
	return r.space.ToScreen(x, y)
}

// modsText is the held modifiers as a chord ("ctrl+shift"), marking them
// used when use is set.
func (r *Reducer) modsText(use bool) string {
	var names []string
	for i, m := range r.mods {
		n := modName(m.sym)
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
		if use {
			r.mods[i].used = true
		}
	}
	return strings.Join(names, "+")
}

// chord names k with the modifiers held, as the key action takes it:
// "ctrl+c", "ctrl+shift+t", "shift+Tab", "Return".
func (r *Reducer) chord(k hci.Keysym) string {
	name := keyName(k)
	if m := r.modsText(false); m != "" {
		return m + "+" + name
	}
	return name
}

// keyName is the name of k inside a chord. A letter is named in lower case:
// its case comes from a shift the chord names, since xdotool (and hci) read
// "ctrl+T" as ctrl+shift+t.
func keyName(k hci.Keysym) string {
	if ch, ok := k.Rune(); ok && unicode.IsLetter(ch) && unicode.ToLower(ch) != unicode.ToUpper(ch) {
		return string(unicode.ToLower(ch))
	}
	if k == hci.Keysym(' ') {
		return "space"
	}
	return k.String()
}

// chordModifier reports whether k is held to change other keys (not the
// locks, which toggle and are keys of their own here).
func chordModifier(k hci.Keysym) bool {
	switch k {
	case 0xffe1, 0xffe2, // Shift
		0xffe3, 0xffe4, // Control
		0xffe7, 0xffe8, // Meta
		0xffe9, 0xffea, // Alt
		0xffeb, 0xffec, // Super
		0xffed, 0xffee, // Hyper
		0xfe03, 0xff7e: // ISO_Level3_Shift (AltGr), Mode_switch
		return true
	}
	return false
}

// typingModifier: keys typed with Shift or AltGr held are still typing.
func typingModifier(k hci.Keysym) bool {
	switch k {
	case 0xffe1, 0xffe2, 0xfe03, 0xff7e:
		return true
	}
	return false
}

func modName(k hci.Keysym) string {
	switch k {
	case 0xffe1, 0xffe2:
		return "shift"
	case 0xffe3, 0xffe4:
		return "ctrl"
	case 0xffe9, 0xffea:
		return "alt"
	case 0xffeb, 0xffec:
		return "super"
	}
	return k.String()
}

func dist(x0, y0, x1, y1 int) int {
	dx, dy := x1-x0, y1-y0
	if dx < 0 {
		dx = -dx
	}
	if dy < 0 {
		dy = -dy
	}
	return max(dx, dy)
}
