package hci

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The dialects' key names, both ways: dialectKeys reads them (mcpserver's
// dialect tools, through DialectKey), dialectKeyNames writes them (Say). One
// file, so a name added to one is seen beside the other; mcpserver's
// TestSayRoundTrip holds that what Say writes reads back to the same key.

// dialectKeys names keys the way OpenAI's action objects (CTRL, ENTER,
// ARROWLEFT; OpenAI's computer-use guide and CUA sample app, 2025),
// Gemini's key_combination (Playwright's names: Control, PageDown; the
// reference implementation's PLAYWRIGHT_KEY_MAP) and pyautogui
// (KEYBOARD_KEYS: ctrlleft, pgdn, num0) spell them, lower-cased, mapped to
// the xdotool names the canonical key action uses. A name not here goes to
// hci's own names (X keysym names and its aliases, such as F5, Page_Down or
// cmd); a name neither knows is an error naming it (mcpserver's keyName).
var dialectKeys = map[string]string{
	// Modifiers.
	"ctrl": "ctrl", "control": "ctrl", "ctrlleft": "ctrl", "ctrlright": "Control_R",
	"shift": "shift", "shiftleft": "shift", "shiftright": "Shift_R",
	"alt": "alt", "option": "alt", "altleft": "alt", "altright": "Alt_R", "optionleft": "alt", "optionright": "Alt_R",
	"cmd": "super", "command": "super", "meta": "super", "super": "super", "win": "super", "winleft": "super", "winright": "Super_R",
	// Editing and navigation.
	"enter": "Return", "return": "Return", "esc": "Escape", "escape": "Escape", "tab": "Tab", "space": "space",
	"backspace": "BackSpace", "delete": "Delete", "del": "Delete", "insert": "Insert", "home": "Home", "end": "End",
	"pageup": "Page_Up", "pagedown": "Page_Down", "pgup": "Page_Up", "pgdn": "Page_Down",
	"arrowup": "Up", "arrowdown": "Down", "arrowleft": "Left", "arrowright": "Right",
	"up": "Up", "down": "Down", "left": "Left", "right": "Right",
	"capslock": "Caps_Lock", "numlock": "Num_Lock", "scrolllock": "Scroll_Lock",
	"printscreen": "Print", "prntscrn": "Print", "prtsc": "Print", "prtscr": "Print", "apps": "Menu",
	// Characters by name (Playwright, pyautogui) and the two OpenAI's sample app maps.
	" ": "space", "\n": "Return", "\r": "Return", "\t": "Tab",
	"semicolon": "semicolon", "equals": "equal", "/": "slash", "\\": "backslash", "+": "plus",
	"-": "minus", "=": "equal", ",": "comma", ".": "period", ";": "semicolon", "'": "apostrophe",
	"`": "grave", "[": "bracketleft", "]": "bracketright",
	// The keypad (Playwright's and pyautogui's names).
	"multiply": "KP_Multiply", "add": "KP_Add", "separator": "KP_Separator", "subtract": "KP_Subtract",
	"decimal": "KP_Decimal", "divide": "KP_Divide",
	"num0": "KP_0", "num1": "KP_1", "num2": "KP_2", "num3": "KP_3", "num4": "KP_4",
	"num5": "KP_5", "num6": "KP_6", "num7": "KP_7", "num8": "KP_8", "num9": "KP_9",
}

// DialectKey maps a key as OpenAI, Gemini or pyautogui names it (any case)
// to its canonical (xdotool) name, if the dialects' table knows it.
func DialectKey(name string) (string, bool) {
	n, ok := dialectKeys[strings.ToLower(name)]
	return n, ok
}

// dialectKeyNames are canonical (xdotool) key names, lower-cased, as each
// dialect spells them: {OpenAI, Gemini (Playwright's names),
// pyautogui}. Names not here are written as they are: X keysym names (F5,
// KP_Add, Control_R) and characters, which every dialect's reader takes.
var dialectKeyNames = map[string][3]string{
	"return": {"ENTER", "Enter", "enter"}, "escape": {"ESC", "Escape", "esc"}, "tab": {"TAB", "Tab", "tab"},
	"space": {"SPACE", "Space", "space"}, "backspace": {"BACKSPACE", "Backspace", "backspace"},
	"delete": {"DELETE", "Delete", "delete"}, "insert": {"INSERT", "Insert", "insert"},
	"home": {"HOME", "Home", "home"}, "end": {"END", "End", "end"},
	"page_up": {"PAGEUP", "PageUp", "pageup"}, "prior": {"PAGEUP", "PageUp", "pageup"},
	"page_down": {"PAGEDOWN", "PageDown", "pagedown"}, "next": {"PAGEDOWN", "PageDown", "pagedown"},
	"up": {"ARROWUP", "ArrowUp", "up"}, "down": {"ARROWDOWN", "ArrowDown", "down"},
	"left": {"ARROWLEFT", "ArrowLeft", "left"}, "right": {"ARROWRIGHT", "ArrowRight", "right"},
	"ctrl": {"CTRL", "Control", "ctrl"}, "control": {"CTRL", "Control", "ctrl"}, "control_l": {"CTRL", "Control", "ctrl"},
	"shift": {"SHIFT", "Shift", "shift"}, "shift_l": {"SHIFT", "Shift", "shift"},
	"alt": {"ALT", "Alt", "alt"}, "alt_l": {"ALT", "Alt", "alt"},
	"super": {"META", "Meta", "win"}, "super_l": {"META", "Meta", "win"}, "cmd": {"META", "Meta", "win"},
	"meta": {"META", "Meta", "win"}, "win": {"META", "Meta", "win"},
	"caps_lock": {"CAPSLOCK", "CapsLock", "capslock"}, "print": {"PRINTSCREEN", "PrintScreen", "printscreen"},
}

// pyautoguiKeyNames are canonical names pyautogui spells in its own way
// (KEYBOARD_KEYS) and the other dialects take as they are: its right-hand
// modifiers, the keypad's Enter, and punctuation keys by their character.
// The AgentNet export (package record) writes keys through SayKey too, so a
// name added here is said alike in both.
var pyautoguiKeyNames = map[string]string{
	"control_r": "ctrlright", "shift_r": "shiftright", "alt_r": "altright", "super_r": "winright",
	"kp_enter": "enter", "iso_left_tab": "tab", "esc": "esc", "del": "delete", "menu": "apps",
	"minus": "-", "equal": "=", "plus": "+", "comma": ",", "period": ".", "slash": "/",
	"backslash": "\\", "semicolon": ";", "apostrophe": "'", "grave": "`", "bracketleft": "[", "bracketright": "]",
}

// SayKey spells one canonical key name (an xdotool name or one of hci's
// aliases) as dialect names it; a name no table knows is written as it is.
func SayKey(dialect, name string) (string, error) { return sayKey(dialect, name) }

// sayKey spells one canonical key name in dialect.
func sayKey(dialect, k string) (string, error) {
	if k == "" {
		return "", fmt.Errorf("an empty key name in a chord")
	}
	col := map[string]int{DialectOpenAI: 0, DialectGemini: 1, DialectPyAutoGUI: 2}[dialect]
	if n, ok := dialectKeyNames[strings.ToLower(k)]; ok {
		return n[col], nil
	}
	if n, ok := pyautoguiKeyNames[strings.ToLower(k)]; ok && dialect == DialectPyAutoGUI {
		return n, nil
	}
	if r, size := utf8.DecodeRuneInString(k); size == len(k) && unicode.IsLetter(r) && dialect != DialectPyAutoGUI {
		// OpenAI and Gemini name a letter key in capitals, without case.
		return string(unicode.ToUpper(r)), nil
	}
	return k, nil
}

// chordKeys spells a canonical chord ("ctrl+shift+t") as a dialect's list
// of key names. OpenAI and Gemini name letters without case, so an upper
// case letter is said with shift held, which is what the executor presses
// for it.
func chordKeys(dialect, chord string) ([]string, error) {
	parts := strings.Split(chord, "+")
	if chord == "+" || strings.HasSuffix(chord, "++") {
		parts = append(strings.Split(strings.TrimSuffix(chord, "++"), "+"), "+")
		if chord == "+" {
			parts = []string{"+"}
		}
	}
	var out []string
	for _, p := range parts {
		if r, size := utf8.DecodeRuneInString(p); dialect != DialectPyAutoGUI && size == len(p) && unicode.IsUpper(r) {
			shift, _ := sayKey(dialect, "shift")
			out = append(out, shift)
		}
		n, err := sayKey(dialect, p)
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", chord, err)
		}
		out = append(out, n)
	}
	return out, nil
}
