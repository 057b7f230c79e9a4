// Package xsel reads and owns X selections (the clipboard) the way ordinary X
// clients do, each on an X connection of its own: Read asks the owner of a
// selection for its text as a pasting client would, and an Owner holds a
// selection with text and answers other clients' paste requests.
//
// It knows nothing about displays beyond their names, so anything that needs
// the desktop's clipboard (task checks, the MCP clipboard trait) can use it
// without going through the browser stream.
package xsel

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
)

// Limits.
const (
	// DefaultTimeout bounds Read and Set when their context has no deadline:
	// an owner that never answers must not hang the caller.
	DefaultTimeout = 3 * time.Second
	// DefaultMaxBytes is what Read takes at most when given no limit.
	DefaultMaxBytes = 16 << 20
	// MaxSetBytes is the longest text an Owner holds. Each answer is a single
	// ChangeProperty, which must stay under the core protocol's 256 KiB request
	// limit, so no INCR transfer is needed.
	MaxSetBytes = 200 << 10
)

// ErrNoText says a selection's owner offered no text (an image, say).
var ErrNoText = errors.New("the selection holds no text")

// ErrClosed is returned by Set after Close.
var ErrClosed = errors.New("the selection owner is closed")

// selectionName checks a selection name and returns its atom name.
func selectionName(name string) (string, error) {
	sel := strings.ToUpper(name)
	switch sel {
	case "CLIPBOARD", "PRIMARY", "SECONDARY":
		return sel, nil
	}
	return "", fmt.Errorf("%q is not a selection; use CLIPBOARD, PRIMARY or SECONDARY", name)
}

// withDefaultTimeout gives ctx DefaultTimeout when it has no deadline.
func withDefaultTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, DefaultTimeout)
}

// InternAtoms interns names in one round trip.
func InternAtoms(c *xgb.Conn, names ...string) (map[string]xproto.Atom, error) {
	cookies := make([]xproto.InternAtomCookie, len(names))
	for i, n := range names {
		cookies[i] = xproto.InternAtom(c, false, uint16(len(n)), n)
	}
	atoms := make(map[string]xproto.Atom, len(names))
	var first error
	for i, ck := range cookies {
		r, err := ck.Reply()
		if err != nil {
			// Keep reading the other replies so none is left queued.
			if first == nil {
				first = fmt.Errorf("intern X atom %s: %w", names[i], err)
			}
			continue
		}
		atoms[names[i]] = r.Atom
	}
	if first != nil {
		return nil, first
	}
	return atoms, nil
}

// DecodeText turns an 8-bit text property into a Go string: UTF8_STRING as
// is, STRING as Latin-1, anything else (COMPOUND_TEXT) as UTF-8 when it is
// valid and Latin-1 when not.
func DecodeText(b []byte, typ, utf8Atom xproto.Atom) string {
	if typ == utf8Atom || (typ != xproto.AtomString && utf8.Valid(b)) {
		return strings.ToValidUTF8(string(b), "\uFFFD")
	}
	r := make([]rune, len(b))
	for i, c := range b {
		r[i] = rune(c)
	}
	return string(r)
}

// latin1 encodes text for the STRING target, which is Latin-1 by
// definition; characters it lacks become '?', as a client asking for STRING
// could not show them anyway.
func latin1(text []byte) []byte {
	out := make([]byte, 0, len(text))
	for _, r := range string(text) {
		if r > 0xff {
			r = '?'
		}
		out = append(out, byte(r))
	}
	return out
}
