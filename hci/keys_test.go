package hci

import (
	"os"
	"strings"
	"testing"
)

func TestParseChord(t *testing.T) {
	tests := []struct {
		chord string
		want  []Keysym
	}{
		{"Return", []Keysym{0xff0d}},
		{"return", []Keysym{0xff0d}},
		{"RETURN", []Keysym{0xff0d}},
		{"enter", []Keysym{0xff0d}},
		{"Enter", []Keysym{0xff0d}},
		{"KP_Enter", []Keysym{0xff8d}},
		{"kp_enter", []Keysym{0xff8d}},
		{"Page_Down", []Keysym{0xff56}},
		{"Next", []Keysym{0xff56}},
		{"pgdn", []Keysym{0xff56}},
		{"pagedown", []Keysym{0xff56}},
		{"PageDown", []Keysym{0xff56}},
		{"Page_Up", []Keysym{0xff55}},
		{"pgup", []Keysym{0xff55}},
		{"esc", []Keysym{0xff1b}},
		{"Escape", []Keysym{0xff1b}},
		{"tab", []Keysym{0xff09}},
		{"space", []Keysym{0x20}},
		{" ", []Keysym{0x20}},
		{"BackSpace", []Keysym{0xff08}},
		{"backspace", []Keysym{0xff08}},
		{"bksp", []Keysym{0xff08}},
		{"del", []Keysym{0xffff}},
		{"Delete", []Keysym{0xffff}},
		{"Home", []Keysym{0xff50}},
		{"end", []Keysym{0xff57}},
		{"Up", []Keysym{0xff52}},
		{"down", []Keysym{0xff54}},
		{"ArrowLeft", []Keysym{0xff51}},
		{"right", []Keysym{0xff53}},
		{"F1", []Keysym{0xffbe}},
		{"f5", []Keysym{0xffc2}},
		{"F12", []Keysym{0xffc9}},
		{"F24", []Keysym{0xffd5}},
		{"super", []Keysym{0xffeb}},
		{"Super_L", []Keysym{0xffeb}},
		{"cmd", []Keysym{0xffeb}},
		{"win", []Keysym{0xffeb}},
		{"meta", []Keysym{0xffeb}},
		{"Meta_L", []Keysym{0xffe7}},
		{"option", []Keysym{0xffe9}},
		{"alt", []Keysym{0xffe9}},
		{"altgr", []Keysym{0xfe03}},
		{"ctrl", []Keysym{0xffe3}},
		{"Control_R", []Keysym{0xffe4}},
		{"ctrl+s", []Keysym{0xffe3, 's'}},
		{"ctrl+shift+t", []Keysym{0xffe3, 0xffe1, 't'}},
		{"Ctrl+Shift+T", []Keysym{0xffe3, 0xffe1, 'T'}},
		{"alt+Tab", []Keysym{0xffe9, 0xff09}},
		{"ctrl + s", []Keysym{0xffe3, 's'}},
		{"super+Return", []Keysym{0xffeb, 0xff0d}},
		{"a", []Keysym{'a'}},
		{"A", []Keysym{'A'}},
		{"1", []Keysym{'1'}},
		{"+", []Keysym{'+'}},
		{"plus", []Keysym{'+'}},
		{"ctrl++", []Keysym{0xffe3, '+'}},
		{"ctrl+plus", []Keysym{0xffe3, '+'}},
		{"ctrl+minus", []Keysym{0xffe3, '-'}},
		{"ctrl+-", []Keysym{0xffe3, '-'}},
		{"é", []Keysym{0xe9}},
		{"€", []Keysym{0x20ac}},
		{"EuroSign", []Keysym{0x20ac}},
		{"日", []Keysym{0x01000000 | 0x65e5}},
		{"U20AC", []Keysym{0x20ac}},
		{"U+65E5", []Keysym{0x010065e5}},
		{"0xff0d", []Keysym{0xff0d}},
		{"ctrl+U+20AC", []Keysym{0xffe3, 0x20ac}},
		{"shift+u", []Keysym{0xffe1, 'u'}},
		{"shift+u+a", []Keysym{0xffe1, 'u', 'a'}},
		{"XF86AudioMute", []Keysym{0x1008ff12}},
		{"volumeup", []Keysym{0x1008ff13}},
		{"Print", []Keysym{0xff61}},
		{"printscreen", []Keysym{0xff61}},
		{"Menu", []Keysym{0xff67}},
		{"Insert", []Keysym{0xff63}},
		{"capslock", []Keysym{0xffe5}},
		{"KP_0", []Keysym{0xffb0}},
		{"KP_Add", []Keysym{0xffab}},
		{"comma", []Keysym{','}},
		{"slash", []Keysym{'/'}},
		{"grave", []Keysym{'`'}},
	}
	for _, tt := range tests {
		got, err := ParseChord(tt.chord)
		if err != nil {
			t.Errorf("ParseChord(%q): %v", tt.chord, err)
			continue
		}
		if !equalSyms(got, tt.want) {
			t.Errorf("ParseChord(%q) = %v, want %v", tt.chord, got, tt.want)
		}
	}
}

func equalSyms(a, b []Keysym) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestParseChordErrors(t *testing.T) {
	tests := []struct{ chord, want string }{
		{"Retrun", `unknown key name "Retrun"; did you mean Return?`},
		{"ctrl+Retrun", `unknown key name "Retrun"; did you mean Return? in "ctrl+Retrun"`},
		{"Page_Dwon", "did you mean Page_Down?"},
		{"ctlr+s", "did you mean ctrl?"},
		{"escpae", "did you mean"},
		{"qqqqqqqq", `unknown key name "qqqqqqqq": use an X keysym name`},
		{"", "empty key chord"},
		{"ctrl+", `ends with "+"`},
		{"ctrl++a", `empty key name between "+" signs`},
		{"ctrl+ +s", `empty key name`},
		{"AACUTE", "ambiguous"},
		{"a+b+c+d+e+f+g+h+i", "at most 8"},
		{"\x01", "has no key"},
	}
	for _, tt := range tests {
		_, err := ParseChord(tt.chord)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseChord(%q) error = %v, want one containing %q", tt.chord, err, tt.want)
		}
	}
}

func TestParseKeys(t *testing.T) {
	tests := []struct {
		text string
		want [][]Keysym
		err  string
	}{
		{text: "Return", want: [][]Keysym{{0xff0d}}},
		{text: "ctrl+a Delete", want: [][]Keysym{{0xffe3, 'a'}, {0xffff}}},
		{text: "ctrl + a", want: [][]Keysym{{0xffe3, 'a'}}},
		{text: "ctrl +a", want: [][]Keysym{{0xffe3, 'a'}}},
		{text: " ", want: [][]Keysym{{' '}}},
		{text: "Down Down Down", want: [][]Keysym{{0xff54}, {0xff54}, {0xff54}}},
		{text: "ctrl++ a", want: [][]Keysym{{0xffe3, '+'}, {'a'}}},
		{text: "", err: "empty key text"},
		{text: "Return Retrun", err: `unknown key name "Retrun"`},
		{text: strings.Repeat("a ", 101), err: "at most 100"},
	}
	for _, tt := range tests {
		got, err := ParseKeys(tt.text)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseKeys(%q) error = %v, want one containing %q", tt.text, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseKeys(%q): %v", tt.text, err)
			continue
		}
		if len(got) != len(tt.want) {
			t.Errorf("ParseKeys(%q) = %v, want %v", tt.text, got, tt.want)
			continue
		}
		for i := range got {
			if !equalSyms(got[i], tt.want[i]) {
				t.Errorf("ParseKeys(%q)[%d] = %v, want %v", tt.text, i, got[i], tt.want[i])
			}
		}
	}
}

func TestAliasesResolve(t *testing.T) {
	for alias, name := range keyAliases {
		want, ok := keysymByName[name]
		if !ok {
			t.Errorf("alias %q names %q, which is not an X keysym", alias, name)
			continue
		}
		// An alias spelt exactly like an X name would never be reached.
		if k, ok := keysymByName[alias]; ok && k != want {
			t.Errorf("alias %q is shadowed by the X keysym %s", alias, k)
		}
		got, err := KeysymByName(strings.ToUpper(alias))
		if err != nil || got != want {
			t.Errorf("KeysymByName(%q) = %v, %v; want %s", strings.ToUpper(alias), got, err, want)
		}
	}
}

func TestKeysymForRune(t *testing.T) {
	tests := []struct {
		r    rune
		want Keysym
	}{
		{'a', 'a'}, {'Z', 'Z'}, {' ', 0x20}, {'~', '~'}, {'é', 0xe9}, {'ÿ', 0xff}, {'\u00a0', 0xa0},
		{'€', 0x20ac}, {'\n', 0xff0d}, {'\r', 0xff0d}, {'\t', 0xff09}, {'\b', 0xff08}, {0x1b, 0xff1b},
		{0x7f, 0xffff}, {'ж', 0x6d6}, {'α', 0x7e1}, {'ア', 0x4b1}, {'日', 0x10065e5}, {'😀', 0x101f600},
		{'Ł', 0x1a3}, {'œ', 0x13bd}, {0x01, 0}, {0x85, 0}, {0xd800, 0},
	}
	for _, tt := range tests {
		if got := KeysymForRune(tt.r); got != tt.want {
			t.Errorf("KeysymForRune(%U) = 0x%x, want 0x%x", tt.r, uint32(got), uint32(tt.want))
		}
		if tt.want == 0 || tt.r < 0x20 || tt.r == 0x7f {
			continue
		}
		if r, ok := tt.want.Rune(); !ok || r != tt.r {
			t.Errorf("Keysym(0x%x).Rune() = %U, %v; want %U", uint32(tt.want), r, ok, tt.r)
		}
	}
}

func TestKeysymString(t *testing.T) {
	tests := []struct {
		k    Keysym
		want string
	}{
		{0xff0d, "Return"}, {0xff56, "Next"}, {'a', "a"}, {0x20ac, "EuroSign"}, {0x10065e5, "U65E5"},
		{0x1008ff12, "XF86AudioMute"}, {0x12345678, "0x12345678"},
	}
	for _, tt := range tests {
		if got := tt.k.String(); got != tt.want {
			t.Errorf("Keysym(0x%x).String() = %q, want %q", uint32(tt.k), got, tt.want)
		}
	}
}

// TestAliasesDocumented keeps doc.go's alias list complete.
func TestAliasesDocumented(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	words := map[string]bool{}
	for _, w := range strings.FieldsFunc(string(src), func(r rune) bool {
		return r == ' ' || r == '\t' || r == '\n' || r == ',' || r == '/' || r == '('
	}) {
		words[w] = true
	}
	for alias := range keyAliases {
		if !words[alias] {
			t.Errorf("alias %q is not listed in doc.go", alias)
		}
	}
}
