package hci

import (
	"errors"
	"fmt"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
)

// keymap is the executor's copy of the server's keyboard mapping
// (keycode -> keysyms per shift level) and its pool of spare keycodes: keycodes
// with no symbol at all, which it binds on demand to keysyms the layout lacks.
//
// Why a pool and LRU reuse rather than xdotool's bind-type-unbind: a client
// resolves a KeyPress with the mapping it has when it gets round to reading
// the event; changing the same keycode again right away can make a slow client
// see the later symbol. Cycling through every spare keycode gives each binding
// the longest possible life.
type keymap struct {
	conn    *xgb.Conn
	min     xproto.Keycode
	max     xproto.Keycode
	syms    [][]Keysym // index: keycode - min
	stale   bool       // someone else changed the mapping; reload before use
	spares  []xproto.Keycode
	bound   map[Keysym]xproto.Keycode // keysyms we bound to spare keycodes
	pending map[xproto.Keycode]int    // MappingNotify events our own changes will cause
	changes int                       // keycode bindings made, for tests and metrics
}

func newKeymap(c *xgb.Conn) (*keymap, error) {
	setup := xproto.Setup(c)
	km := &keymap{conn: c, min: setup.MinKeycode, max: setup.MaxKeycode,
		bound: map[Keysym]xproto.Keycode{}, pending: map[xproto.Keycode]int{}}
	if err := km.load(); err != nil {
		return nil, err
	}
	return km, nil
}

// load reads the whole mapping and rebuilds the spare pool, keeping our own
// bindings that are still in place (in their LRU order).
func (km *keymap) load() error {
	count := int(km.max) - int(km.min) + 1
	rep, err := xproto.GetKeyboardMapping(km.conn, km.min, byte(count)).Reply()
	if err != nil {
		return fmt.Errorf("read the keyboard mapping: %w", err)
	}
	per := int(rep.KeysymsPerKeycode)
	km.syms = make([][]Keysym, count)
	for i := 0; i < count; i++ {
		row := make([]Keysym, per)
		for j := 0; j < per && i*per+j < len(rep.Keysyms); j++ {
			row[j] = Keysym(rep.Keysyms[i*per+j])
		}
		km.syms[i] = row
	}
	for sym, code := range km.bound {
		if km.at(code, 0) != sym {
			delete(km.bound, sym) // someone else rebound it
		}
	}
	ours := map[xproto.Keycode]bool{}
	for _, code := range km.bound {
		ours[code] = true
	}
	var spares []xproto.Keycode
	inPool := map[xproto.Keycode]bool{}
	for _, code := range km.spares { // keep the LRU order of the old pool
		if ours[code] || km.empty(code) {
			spares = append(spares, code)
			inPool[code] = true
		}
	}
	for code := int(km.min); code <= int(km.max); code++ {
		c := xproto.Keycode(code)
		if !inPool[c] && km.empty(c) {
			// New spare codes go to the front: used first, as they hold nothing.
			spares = append([]xproto.Keycode{c}, spares...)
		}
	}
	km.spares = spares
	km.stale = false
	return nil
}

func (km *keymap) at(code xproto.Keycode, level int) Keysym {
	i := int(code) - int(km.min)
	if i < 0 || i >= len(km.syms) || level >= len(km.syms[i]) {
		return 0
	}
	return km.syms[i][level]
}

func (km *keymap) empty(code xproto.Keycode) bool {
	i := int(code) - int(km.min)
	if i < 0 || i >= len(km.syms) {
		return false
	}
	for _, s := range km.syms[i] {
		if s != 0 {
			return false
		}
	}
	return true
}

// effective is the keysym a core client reads from code with or without Shift:
// the second column when Shift is down and it is set, else the first (with
// the usual case folding of a lone letter).
func (km *keymap) effective(code xproto.Keycode, shift bool) Keysym {
	lo, hi := km.at(code, 0), km.at(code, 1)
	if hi == 0 {
		if shift {
			return upperKeysym(lo)
		}
		return lo
	}
	if shift {
		return hi
	}
	return lo
}

func upperKeysym(k Keysym) Keysym {
	if k >= 'a' && k <= 'z' {
		return k - 'a' + 'A'
	}
	return k
}

// mappingNotify records a MappingNotify for the keyboard; those our own
// ChangeKeyboardMapping caused need no reload.
func (km *keymap) mappingNotify(first xproto.Keycode, count byte) {
	if count == 1 && km.pending[first] > 0 {
		km.pending[first]--
		return
	}
	km.stale = true
}

func (km *keymap) refresh() error {
	if km.stale {
		return km.load()
	}
	return nil
}

// find returns a keycode carrying sym at shift level 0 (shift false) or, failing
// that, level 1 (shift true); ok false when the layout lacks it.
func (km *keymap) find(sym Keysym) (code xproto.Keycode, shift bool, ok bool) {
	for level := 0; level < 2; level++ {
		for i, row := range km.syms {
			if level < len(row) && row[level] == sym {
				c := xproto.Keycode(int(km.min) + i)
				if level == 0 {
					km.touch(c)
				}
				return c, level == 1, true
			}
		}
	}
	// A lone lower-case letter on a key implies its upper case under Shift.
	if sym >= 'A' && sym <= 'Z' {
		for i, row := range km.syms {
			if len(row) > 0 && row[0] == sym-'A'+'a' && (len(row) < 2 || row[1] == 0) {
				return xproto.Keycode(int(km.min) + i), true, true
			}
		}
	}
	return 0, false, false
}

// findAt returns a keycode that yields sym in the given shift state without
// any change of modifiers.
func (km *keymap) findAt(sym Keysym, shift bool) (xproto.Keycode, bool) {
	for i := range km.syms {
		c := xproto.Keycode(int(km.min) + i)
		if km.effective(c, shift) == sym {
			km.touch(c)
			return c, true
		}
	}
	return 0, false
}

// touch moves a spare keycode to the back of the LRU order.
func (km *keymap) touch(code xproto.Keycode) {
	for i, c := range km.spares {
		if c == code {
			copy(km.spares[i:], km.spares[i+1:])
			km.spares[len(km.spares)-1] = code
			return
		}
	}
}

var errNoSpare = errors.New("no spare keycode is free")

// boundCode is the spare keycode sym is bound to, if it still is.
func (km *keymap) boundCode(sym Keysym) (xproto.Keycode, bool) {
	code, ok := km.bound[sym]
	if ok && km.at(code, 0) == sym {
		return code, true
	}
	return 0, false
}

// onLayout reports whether the layout itself (not one of our spare bindings)
// has sym on level 0 or 1 of some key.
func (km *keymap) onLayout(sym Keysym) bool {
	code, _, ok := km.find(sym)
	if !ok {
		return false
	}
	if b, isBound := km.boundCode(sym); isBound && b == code {
		return false
	}
	return true
}

// victims returns n spare keycodes to bind, least recently used first,
// skipping held ones and those whose binding keep says to keep.
func (km *keymap) victims(n int, held func(xproto.Keycode) bool, keep map[Keysym]bool) []xproto.Keycode {
	var out []xproto.Keycode
	for _, code := range km.spares {
		if len(out) == n {
			break
		}
		if held(code) || keep[km.at(code, 0)] {
			continue
		}
		out = append(out, code)
	}
	return out
}

// bindTo maps sym onto spare keycode code and reports whether the code held
// another symbol before (a rebinding, which clients must catch up with). Both
// shift levels carry sym, so it types the same whatever modifiers a person is
// holding (and XKB keeps [É, É] as is, where a lone É would get a lower-case
// first level).
func (km *keymap) bindTo(sym Keysym, code xproto.Keycode) (rebound bool) {
	old := km.at(code, 0)
	if old != 0 {
		delete(km.bound, old)
	}
	xproto.ChangeKeyboardMapping(km.conn, 1, code, 2, []xproto.Keysym{xproto.Keysym(sym), xproto.Keysym(sym)})
	km.pending[code]++
	row := km.syms[int(code)-int(km.min)]
	for j := range row {
		row[j] = 0
	}
	for j := 0; j < 2 && j < len(row); j++ {
		row[j] = sym
	}
	km.bound[sym] = code
	km.touch(code)
	km.changes++
	return old != 0
}

// unbindAll clears the keycodes we bound, leaving the layout as we found it.
func (km *keymap) unbindAll() {
	for sym, code := range km.bound {
		if km.at(code, 0) == sym {
			xproto.ChangeKeyboardMapping(km.conn, 1, code, 1, []xproto.Keysym{0})
		}
	}
	km.bound = map[Keysym]xproto.Keycode{}
}
