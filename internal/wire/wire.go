// Package wire checks input as it comes off the wire, before decoding hides
// what was sent, and quotes bad input briefly in error messages.
//
// encoding/json replaces invalid UTF-8 and unpaired UTF-16 surrogate escapes
// in strings with U+FFFD without a word, so text typed or put on the
// clipboard would silently differ from what the client sent: CheckJSON looks
// at the raw bytes first. Errors that echo a client's input quote at most a
// short prefix of it (Quote), so a megabyte of garbage does not come back in
// the answer or the log.
package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// QuoteBytes is how much of a bad input an error message quotes.
const QuoteBytes = 64

// Quote is s quoted as %q does, cut to its first QuoteBytes bytes (on a rune
// boundary) with "…" and the full length after it when it was longer.
func Quote(s string) string {
	if len(s) <= QuoteBytes {
		return strconv.Quote(s)
	}
	cut := QuoteBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%q… (%d bytes)", s[:cut], len(s))
}

// Prefix is s cut to its first n bytes on a rune boundary with "…" when it
// was longer, for messages that show raw input (JSON) rather than a string.
func Prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// TextError says where JSON text or a string is not valid Unicode.
type TextError struct {
	Offset int    // byte offset of the first bad byte or escape
	Reason string // what is wrong there
}

func (e *TextError) Error() string {
	return fmt.Sprintf("not valid UTF-8: %s at byte %d", e.Reason, e.Offset)
}

// CheckString reports whether s is valid UTF-8.
func CheckString(s string) error {
	if utf8.ValidString(s) {
		return nil
	}
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 {
			return &TextError{Offset: i, Reason: fmt.Sprintf("the byte 0x%02x", s[i])}
		}
		i += n
	}
	return nil
}

// CheckJSON reports whether the JSON text raw is valid UTF-8 and its strings
// hold no unpaired UTF-16 surrogate escape (\ud800 alone), both of which
// encoding/json would turn into U+FFFD. It does not check the JSON syntax:
// the decoder that comes next does.
func CheckJSON(raw []byte) error {
	if err := checkUTF8(raw); err != nil {
		return err
	}
	inString := false
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case !inString:
			inString = c == '"'
		case c == '"':
			inString = false
		case c == '\\':
			n, err := escape(raw, i)
			if err != nil || n < 0 {
				return err
			}
			i += n
		}
	}
	return nil
}

// checkUTF8 names the first byte of raw that is not UTF-8.
func checkUTF8(raw []byte) error {
	if utf8.Valid(raw) {
		return nil
	}
	for i := 0; i < len(raw); {
		r, n := utf8.DecodeRune(raw[i:])
		if r == utf8.RuneError && n <= 1 {
			return &TextError{Offset: i, Reason: fmt.Sprintf("the byte 0x%02x", raw[i])}
		}
		i += n
	}
	return nil
}

// escape looks at the escape sequence starting with the backslash at raw[i]
// and returns how many bytes after the backslash it covers, or -1 when the
// rest cannot be checked (bad syntax, which the decoder reports). An
// unpaired surrogate escape is an error; a pair is one sequence.
func escape(raw []byte, i int) (int, error) {
	if i+1 >= len(raw) {
		return -1, nil
	}
	if raw[i+1] != 'u' {
		return 1, nil // \" \\ \n ...: skip the escaped byte
	}
	r, ok := hex4(raw, i+2)
	if !ok {
		return -1, nil
	}
	if !utf16.IsSurrogate(r) {
		return 5, nil
	}
	// A high surrogate must be followed by a low one.
	if r < 0xdc00 && i+11 < len(raw) && raw[i+6] == '\\' && raw[i+7] == 'u' {
		if lo, ok := hex4(raw, i+8); ok && lo >= 0xdc00 && lo <= 0xdfff {
			return 11, nil
		}
	}
	return 0, &TextError{Offset: i, Reason: fmt.Sprintf("the unpaired UTF-16 surrogate escape \\u%04x", r)}
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[at:at+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	return rune(n), true
}

// Seconds turns a client's number of seconds into a Duration, refusing what
// is not a number between lo and hi (NaN, ±Inf, negative, or so large the
// conversion would overflow) instead of letting the conversion wrap.
func Seconds(name string, s, lo, hi float64) (time.Duration, error) {
	if math.IsNaN(s) || math.IsInf(s, 0) || s < lo || s > hi {
		return 0, fmt.Errorf("%s must be a number of seconds from %g to %g, got %g", name, lo, hi, s)
	}
	// hi is a caller's bound; a hi past the Duration range is clipped.
	if s*float64(time.Second) >= math.MaxInt64 {
		return 0, fmt.Errorf("%s of %g seconds is too long", name, s)
	}
	return time.Duration(s * float64(time.Second)), nil
}

// Marshal is json.Marshal without HTML escaping, for every place deskenv
// writes an action or text a model or a person typed. encoding/json's
// default turns <, > and & into \u003c, \u003e and \u0026: valid JSON, but a
// dataset column holding it teaches a model to type "\u003e" (issue 13).
// There is no trailing newline, as with json.Marshal.
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'}), nil
}
