package hci

//go:generate go run gen_keysyms.go

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/deskenv/deskenv/internal/wire"
)

// Keysym is an X keysym: the symbol on a key, independent of which key (keycode)
// carries it in the current layout.
type Keysym uint32

// Keysyms the executor itself needs.
const (
	KeysymBackSpace Keysym = 0xff08
	KeysymTab       Keysym = 0xff09
	KeysymReturn    Keysym = 0xff0d
	KeysymEscape    Keysym = 0xff1b
	KeysymDelete    Keysym = 0xffff
	KeysymShiftL    Keysym = 0xffe1
	KeysymShiftR    Keysym = 0xffe2
	KeysymControlL  Keysym = 0xffe3
	KeysymAltL      Keysym = 0xffe9
	KeysymSuperL    Keysym = 0xffeb

	// unicodeKeysymBase marks a keysym that is a Unicode code point (0x01000000|r).
	unicodeKeysymBase Keysym = 0x01000000
)

// keyAliases are the case-insensitive names people and models use for keys,
// beyond X's own keysym names (which are accepted as they are, and also
// case-insensitively when that is unambiguous). Keep doc.go's list in step.
var keyAliases = map[string]string{
	// Modifiers. "meta", "cmd", "win" and the browser's "Meta" all mean the key
	// next to Alt, which X desktops call Super (xdotool maps "meta" to Meta_L,
	// which on common layouts is Shift+Alt and rarely what was meant).
	"ctrl": "Control_L", "control": "Control_L", "lctrl": "Control_L", "leftctrl": "Control_L",
	"rctrl": "Control_R", "rightctrl": "Control_R",
	"shift": "Shift_L", "lshift": "Shift_L", "leftshift": "Shift_L",
	"rshift": "Shift_R", "rightshift": "Shift_R",
	"alt": "Alt_L", "lalt": "Alt_L", "leftalt": "Alt_L", "option": "Alt_L", "opt": "Alt_L",
	"ralt": "Alt_R", "rightalt": "Alt_R",
	"altgr": "ISO_Level3_Shift", "altgraph": "ISO_Level3_Shift",
	"super": "Super_L", "lsuper": "Super_L", "win": "Super_L", "windows": "Super_L", "lwin": "Super_L",
	"cmd": "Super_L", "command": "Super_L", "meta": "Super_L", "lmeta": "Super_L", "os": "Super_L",
	"rsuper": "Super_R", "rwin": "Super_R", "rcmd": "Super_R", "rmeta": "Super_R",
	"hyper": "Hyper_L",

	// Editing and navigation.
	"enter": "Return", "return": "Return", "ret": "Return", "newline": "Return",
	"esc": "Escape", "escape": "Escape",
	"tab":   "Tab",
	"space": "space", "spacebar": "space", "spc": "space",
	"backspace": "BackSpace", "bksp": "BackSpace", "bs": "BackSpace", "back_space": "BackSpace",
	"del": "Delete", "delete": "Delete", "forwarddelete": "Delete", "forward_delete": "Delete",
	"ins": "Insert", "insert": "Insert",
	"home": "Home", "end": "End",
	"pgup": "Prior", "pageup": "Prior", "page_up": "Prior", "prior": "Prior",
	"pgdn": "Next", "pgdown": "Next", "pagedown": "Next", "page_down": "Next", "next": "Next",
	"up": "Up", "arrowup": "Up", "up_arrow": "Up", "arrow_up": "Up",
	"down": "Down", "arrowdown": "Down", "down_arrow": "Down", "arrow_down": "Down",
	"left": "Left", "arrowleft": "Left", "left_arrow": "Left", "arrow_left": "Left",
	"right": "Right", "arrowright": "Right", "right_arrow": "Right", "arrow_right": "Right",

	// Locks and system keys.
	"capslock": "Caps_Lock", "caps": "Caps_Lock",
	"numlock": "Num_Lock", "scrolllock": "Scroll_Lock",
	"print": "Print", "printscreen": "Print", "prtsc": "Print", "prtscr": "Print", "prtscn": "Print", "prntscrn": "Print", "sysrq": "Sys_Req",
	"pause": "Pause", "break": "Break",
	"menu": "Menu", "apps": "Menu", "contextmenu": "Menu", "application": "Menu",

	// Punctuation by name (the X names, such as "minus", also work).
	"dot": "period", "quote": "apostrophe", "singlequote": "apostrophe", "doublequote": "quotedbl",
	"backquote": "grave", "backtick": "grave", "tilde": "asciitilde",
	"lbracket": "bracketleft", "rbracket": "bracketright", "lbrace": "braceleft", "rbrace": "braceright",
	"lparen": "parenleft", "rparen": "parenright", "pipe": "bar", "hash": "numbersign",
	"dollar_sign": "dollar", "at_sign": "at", "question_mark": "question", "underline": "underscore",

	// Media keys.
	"volumeup": "XF86AudioRaiseVolume", "volume_up": "XF86AudioRaiseVolume",
	"volumedown": "XF86AudioLowerVolume", "volume_down": "XF86AudioLowerVolume",
	"volumemute": "XF86AudioMute", "volume_mute": "XF86AudioMute", "mute": "XF86AudioMute",
	"playpause": "XF86AudioPlay", "mediaplaypause": "XF86AudioPlay",
	"nexttrack": "XF86AudioNext", "medianexttrack": "XF86AudioNext",
	"prevtrack": "XF86AudioPrev", "mediaprevioustrack": "XF86AudioPrev", "mediatrackprevious": "XF86AudioPrev",
	"mediatracknext": "XF86AudioNext", "mediastop": "XF86AudioStop",
	"browserback": "XF86Back", "browserforward": "XF86Forward", "browserrefresh": "XF86Reload",
}

// KeysymForRune returns the keysym that types r: Latin-1 characters are their
// own keysym, characters with a named X keysym get it (EuroSign 0x20ac,
// Cyrillic, Greek, ...), newline and carriage return are Return, tab is Tab,
// backspace BackSpace, escape Escape and DEL Delete, and every other
// printable character is its Unicode keysym 0x01000000|r. Other control
// characters have no keysym: the result is 0.
func KeysymForRune(r rune) Keysym {
	switch r {
	case '\n', '\r':
		return KeysymReturn
	case '\t':
		return KeysymTab
	case '\b':
		return KeysymBackSpace
	case 0x1b:
		return KeysymEscape
	case 0x7f:
		return KeysymDelete
	}
	switch {
	case r < 0x20 || (r >= 0x80 && r < 0xa0) || r > unicode.MaxRune || (r >= 0xd800 && r < 0xe000):
		return 0
	case r <= 0xff:
		return Keysym(r)
	}
	if k, ok := legacyKeysyms[r]; ok {
		return k
	}
	return unicodeKeysymBase | Keysym(r)
}

// Rune returns the printable character k types, if it types one (letters,
// digits, punctuation, any Unicode keysym); Return, Tab and other function
// keys are not characters here.
func (k Keysym) Rune() (rune, bool) {
	switch {
	case k >= 0x20 && k <= 0x7e, k >= 0xa0 && k <= 0xff:
		return rune(k), true
	case k >= unicodeKeysymBase+0xa0 && k <= unicodeKeysymBase+unicode.MaxRune:
		return rune(k - unicodeKeysymBase), true
	}
	if r, ok := keysymRunes[k]; ok && unicode.IsPrint(r) {
		return r, true
	}
	return 0, false
}

// String is the keysym's X name ("Return", "a", "EuroSign"), "U+XXXX" for a
// Unicode keysym without a name, or its hex value.
func (k Keysym) String() string {
	if n, ok := keysymNames[k]; ok {
		return n
	}
	if k&0xff000000 == unicodeKeysymBase {
		return fmt.Sprintf("U%04X", uint32(k&0xffffff))
	}
	return fmt.Sprintf("0x%x", uint32(k))
}

// IsModifier reports whether k is a modifier key (Shift, Control, Alt, Meta,
// Super, Hyper, the lock keys, AltGr).
func (k Keysym) IsModifier() bool {
	return (k >= 0xffe1 && k <= 0xffee) || k == 0xfe03 || k == 0xff7e || k == 0xff7f || k == 0xff14
}

// isFunctionKey reports whether k is a non-character key (Return, arrows, F5,
// keypad, modifiers, media keys): one whose meaning never depends on Shift.
func (k Keysym) isFunctionKey() bool {
	return (k >= 0xfd00 && k <= 0xffff) || (k >= 0x10080000 && k < 0x10090000)
}

// KeysymByName resolves one key name the way ParseChord does for each part of
// a chord: a single character, an X keysym name ("Page_Down"), an alias
// ("pgdn", "cmd", case-insensitive), "U20AC"/"U+20AC", or a hex value "0xff0d".
func KeysymByName(name string) (Keysym, error) {
	k, err := lookupKey(name)
	if err != nil {
		return 0, err
	}
	return k, nil
}

func lookupKey(name string) (Keysym, error) {
	if name == "" {
		return 0, fmt.Errorf("empty key name")
	}
	if utf8.RuneCountInString(name) == 1 {
		r, _ := utf8.DecodeRuneInString(name)
		if r == utf8.RuneError {
			return 0, fmt.Errorf("key name %s is not valid UTF-8", wire.Quote(name))
		}
		if k := KeysymForRune(r); k != 0 {
			return k, nil
		}
		return 0, fmt.Errorf("character %U has no key; name it instead (Return, Tab, ...)", r)
	}
	if k, ok := keysymByName[name]; ok {
		return k, nil
	}
	lower := strings.ToLower(name)
	if n, ok := keyAliases[lower]; ok {
		return keysymByName[n], nil
	}
	if k, ok := parseNumericKey(name); ok {
		return k, nil
	}
	// Case-insensitive X names ("return", "PAGE_DOWN", "kp_enter", "f5"), when
	// they name only one keysym.
	var found []string
	var sym Keysym
	for n, k := range keysymByName {
		if strings.EqualFold(n, name) {
			if len(found) > 0 && k == sym {
				continue
			}
			found = append(found, n)
			sym = k
		}
	}
	switch len(found) {
	case 1:
		return sym, nil
	case 0:
	default:
		sort.Strings(found)
		return 0, fmt.Errorf("key name %s is ambiguous: X names differ only in case here (%s); use the exact spelling", wire.Quote(name), strings.Join(found, ", "))
	}
	if s := suggestKey(name); s != "" {
		return 0, fmt.Errorf("unknown key name %s; did you mean %s?", wire.Quote(name), s)
	}
	return 0, fmt.Errorf("unknown key name %s: use an X keysym name such as Return, Page_Down or ctrl", wire.Quote(name))
}

// parseNumericKey accepts "U20AC", "U+20AC" (a Unicode character) and
// "0xff0d" (a raw keysym), as XStringToKeysym and xdotool do.
func parseNumericKey(name string) (Keysym, bool) {
	if len(name) > 2 && (name[:2] == "0x" || name[:2] == "0X") {
		v, err := strconv.ParseUint(name[2:], 16, 32)
		if err != nil || v == 0 || v > 0x1fffffff {
			return 0, false
		}
		return Keysym(v), true
	}
	if len(name) > 1 && (name[0] == 'U' || name[0] == 'u') {
		hex := strings.TrimPrefix(name[1:], "+")
		if len(hex) < 2 || len(hex) > 6 {
			return 0, false
		}
		v, err := strconv.ParseUint(hex, 16, 32)
		if err != nil {
			return 0, false
		}
		if k := KeysymForRune(rune(v)); k != 0 {
			return k, true
		}
	}
	return 0, false
}

// suggestKey finds the known name closest to a misspelt one, preferring X's
// own names on ties; "" when nothing is close.
func suggestKey(name string) string {
	lname := strings.ToLower(name)
	best, bestD := "", 3
	if len(lname) <= 4 {
		bestD = 2
	}
	consider := func(cand string, prefer bool) {
		d := editDistance(lname, strings.ToLower(cand))
		if d < bestD || (d == bestD && prefer && best != "" && !isXName(best)) {
			best, bestD = cand, d
		}
	}
	names := make([]string, 0, len(keysymByName))
	for n := range keysymByName {
		names = append(names, n)
	}
	sort.Strings(names) // deterministic among equals
	for _, n := range names {
		if len(n) > 1 {
			consider(n, true)
		}
	}
	aliases := make([]string, 0, len(keyAliases))
	for a := range keyAliases {
		aliases = append(aliases, a)
	}
	sort.Strings(aliases)
	for _, a := range aliases {
		consider(a, false)
	}
	if best == "" || bestD >= len(lname) {
		return ""
	}
	return best
}

func isXName(n string) bool { _, ok := keysymByName[n]; return ok }

// editDistance is the optimal string alignment distance: insertions,
// deletions, substitutions and transpositions of neighbours each cost one.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	if d := len(ra) - len(rb); d > 3 || d < -3 {
		return 4
	}
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}

// ParseChord parses one chord: key names joined by "+", pressed in order and
// released in reverse ("ctrl+shift+t", "Return", "super", "ctrl+é"). Names
// are resolved as by KeysymByName; spaces around names are ignored. The plus
// key itself is "plus", or "+" when it is the whole chord or its last key
// ("ctrl++"). Any unknown name fails the whole chord, naming the culprit.
func ParseChord(chord string) ([]Keysym, error) {
	if chord == "" {
		return nil, fmt.Errorf("empty key chord")
	}
	if strings.TrimSpace(chord) == "" {
		return []Keysym{' '}, nil // " " is the space bar
	}
	c := strings.TrimSpace(chord)
	var parts []string
	trailingPlus := false
	switch {
	case c == "+":
		return []Keysym{'+'}, nil
	case strings.HasSuffix(c, "++"):
		trailingPlus = true
		c = c[:len(c)-2]
	case strings.HasSuffix(c, "+"):
		return nil, fmt.Errorf("key chord %s ends with \"+\": name the last key (for the plus key itself write %s or %s)",
			wire.Quote(chord), wire.Quote(c+"+"), wire.Quote(c+"plus"))
	}
	if c != "" {
		parts = joinUnicodeNames(strings.Split(c, "+"))
	}
	keys := make([]Keysym, 0, len(parts)+1)
	for _, p := range parts {
		name := strings.TrimSpace(p)
		if name == "" {
			return nil, fmt.Errorf("key chord %s has an empty key name between \"+\" signs", wire.Quote(chord))
		}
		k, err := lookupKey(name)
		if err != nil {
			if len(parts) > 1 || trailingPlus {
				return nil, fmt.Errorf("%w in %s", err, wire.Quote(chord))
			}
			return nil, err
		}
		keys = append(keys, k)
	}
	if trailingPlus {
		keys = append(keys, '+')
	}
	if len(keys) > maxChordKeys {
		return nil, fmt.Errorf("key chord %s has %d keys; at most %d can be pressed together", wire.Quote(chord), len(keys), maxChordKeys)
	}
	return keys, nil
}

// joinUnicodeNames puts "U+20AC" back together after splitting on "+": a
// part "U" followed by four to six hex digits.
func joinUnicodeNames(parts []string) []string {
	out := parts[:0]
	for i := 0; i < len(parts); i++ {
		p := strings.TrimSpace(parts[i])
		if (p == "U" || p == "u") && i+1 < len(parts) && isHex(strings.TrimSpace(parts[i+1]), 4, 6) {
			out = append(out, "U+"+strings.TrimSpace(parts[i+1]))
			i++
			continue
		}
		out = append(out, parts[i])
	}
	return out
}

func isHex(s string, minLen, maxLen int) bool {
	if len(s) < minLen || len(s) > maxLen {
		return false
	}
	_, err := strconv.ParseUint(s, 16, 32)
	return err == nil
}

const (
	maxChordKeys = 8
	maxChords    = 100
)

// ParseKeys parses the text of a key action: one or more chords separated by
// spaces, pressed one after the other, as xdotool key does ("ctrl+a Delete").
// Spaces around "+" do not split a chord ("ctrl + s" is ctrl+s), and a text of
// only spaces is the space bar.
func ParseKeys(text string) ([][]Keysym, error) {
	if text == "" {
		return nil, fmt.Errorf("empty key text: name a key or chord such as Return or ctrl+s")
	}
	if strings.TrimSpace(text) == "" {
		return [][]Keysym{{' '}}, nil
	}
	var chords []string
	for _, f := range strings.Fields(text) {
		n := len(chords)
		if n > 0 && (strings.HasPrefix(f, "+") || (strings.HasSuffix(chords[n-1], "+") && chords[n-1] != "+" && !strings.HasSuffix(chords[n-1], "++"))) {
			chords[n-1] += f
			continue
		}
		chords = append(chords, f)
	}
	if len(chords) > maxChords {
		return nil, fmt.Errorf("key text has %d chords; at most %d are pressed in one action", len(chords), maxChords)
	}
	out := make([][]Keysym, 0, len(chords))
	for _, c := range chords {
		keys, err := ParseChord(c)
		if err != nil {
			return nil, err
		}
		out = append(out, keys)
	}
	return out, nil
}
