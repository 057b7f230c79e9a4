package task

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// FieldError is a problem in a task file, located by file, line, column and
// field path (such as "evaluator.checks[1].path").
type FieldError struct {
	File      string
	Line, Col int    // 1-based; 0 when unknown
	Field     string // empty for the file as a whole
	Msg       string
}

func (e *FieldError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", e.Line, e.Col)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

type jkind int

const (
	jNull jkind = iota
	jBool
	jNumber
	jString
	jArray
	jObject
)

func (k jkind) String() string {
	return [...]string{"null", "a boolean", "a number", "a string", "an array", "an object"}[k]
}

// jnode is a parsed JSON value that remembers where it was in the file, so
// problems found after parsing (a missing field, a wrong type) still point at
// a line and column.
type jnode struct {
	start, end int
	kind       jkind
	str        string
	num        json.Number
	b          bool
	keys       []jkey // objects, in file order
	items      []*jnode
}

type jkey struct {
	name string
	off  int
	val  *jnode
}

const maxDepth = 64

// parseTree parses data as exactly one JSON value.
func parseTree(data []byte) (*jnode, error) {
	// encoding/json's validity scan places syntax errors exactly (the
	// offending byte is at Offset-1); the token stream below is less exact, so
	// it only ever sees valid JSON.
	if err := json.Unmarshal(data, new(json.RawMessage)); err != nil {
		var se *json.SyntaxError
		if !errors.As(err, &se) {
			return nil, &offsetError{0, "invalid JSON: " + err.Error()}
		}
		off := max(int(se.Offset)-1, 0)
		if int(se.Offset) >= len(data) && strings.Contains(se.Error(), "unexpected end") {
			return nil, &offsetError{off, "invalid JSON: the file ends in the middle of a value (a missing } or ]?)"}
		}
		msg := strings.TrimPrefix(se.Error(), "json: ")
		if strings.Contains(msg, "after top-level value") {
			msg = "unexpected data after the task object (a file holds exactly one task)"
		} else {
			msg = "invalid JSON: " + msg
		}
		return nil, &offsetError{off, msg}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	n, err := parseValue(dec, data, 0)
	if err != nil {
		return nil, err
	}
	off := skipSpace(data, int(dec.InputOffset()))
	if _, err := dec.Token(); err != io.EOF {
		return nil, &offsetError{off, "unexpected data after the task object (a file holds exactly one task)"}
	}
	return n, nil
}

// offsetError is a syntax problem at a byte offset.
type offsetError struct {
	off int
	msg string
}

func (e *offsetError) Error() string { return e.msg }

func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\r', '\n', ':', ',':
			i++
		default:
			return i
		}
	}
	return i
}

func parseValue(dec *json.Decoder, data []byte, depth int) (*jnode, error) {
	if depth > maxDepth {
		return nil, &offsetError{int(dec.InputOffset()), fmt.Sprintf("nested more than %d levels deep", maxDepth)}
	}
	start := skipSpace(data, int(dec.InputOffset()))
	tok, err := dec.Token()
	if err != nil {
		return nil, tokenError(err, start, len(data))
	}
	n := &jnode{start: start}
	switch t := tok.(type) {
	case nil:
		n.kind = jNull
	case bool:
		n.kind, n.b = jBool, t
	case json.Number:
		n.kind, n.num = jNumber, t
	case string:
		n.kind, n.str = jString, t
	case json.Delim:
		switch t {
		case '{':
			n.kind = jObject
			for dec.More() {
				koff := skipSpace(data, int(dec.InputOffset()))
				ktok, err := dec.Token()
				if err != nil {
					return nil, tokenError(err, koff, len(data))
				}
				key, ok := ktok.(string)
				if !ok {
					return nil, &offsetError{koff, "expected a field name in double quotes"}
				}
				val, err := parseValue(dec, data, depth+1)
				if err != nil {
					return nil, err
				}
				n.keys = append(n.keys, jkey{key, koff, val})
			}
		case '[':
			n.kind = jArray
			for dec.More() {
				val, err := parseValue(dec, data, depth+1)
				if err != nil {
					return nil, err
				}
				n.items = append(n.items, val)
			}
		default:
			return nil, &offsetError{start, fmt.Sprintf("unexpected %q", string(t))}
		}
		closeOff := skipSpace(data, int(dec.InputOffset()))
		if _, err := dec.Token(); err != nil {
			return nil, tokenError(err, closeOff, len(data))
		}
	}
	n.end = int(dec.InputOffset())
	return n, nil
}

func tokenError(err error, off, size int) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return &offsetError{int(se.Offset), "invalid JSON: " + strings.TrimPrefix(se.Error(), "json: ")}
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		if off >= size && size > 0 {
			off = size - 1
		}
		return &offsetError{off, "invalid JSON: the file ends in the middle of a value (a missing } or ]?)"}
	}
	return &offsetError{off, "invalid JSON: " + err.Error()}
}

// decoder turns a jnode tree into Go values, collecting every problem with
// its position instead of stopping at the first.
type decoder struct {
	file  string
	data  []byte
	lines []int // byte offset of each line start (of src)
	errs  []error

	// A task with parameters is decoded from its rendering (params.go):
	// src is the file as written, and remap turns an offset in data into
	// one in src, so errors point at what the author wrote. Without
	// parameters src is data and remap nil.
	src   []byte
	remap func(int) int
	spans []span

	// kinds are the step and check types the file may use, with the field
	// tables that decode them.
	kinds      *Kinds
	checkTable []checkField
	stepTable  []stepField
}

const maxErrorsPerFile = 20

func newDecoder(file string, data []byte) *decoder {
	d := &decoder{file: file, data: data, src: data, lines: []int{0}}
	for i, c := range data {
		if c == '\n' {
			d.lines = append(d.lines, i+1)
		}
	}
	return d
}

func (d *decoder) pos(off int) (line, col int) {
	if d.remap != nil {
		off = d.remap(off)
	}
	i := sort.Search(len(d.lines), func(i int) bool { return d.lines[i] > off }) - 1
	if i < 0 {
		i = 0
	}
	// Columns count characters, not bytes, as editors do.
	return i + 1, 1 + utf8.RuneCount(d.src[d.lines[i]:min(off, len(d.src))])
}

// fail records a problem with the value n (nil: the file as a whole).
func (d *decoder) fail(n *jnode, field, format string, args ...any) {
	off := -1
	if n != nil {
		off = n.start
	}
	d.failAt(off, field, format, args...)
}

func (d *decoder) failAt(off int, field, format string, args ...any) {
	if len(d.errs) == maxErrorsPerFile {
		d.errs = append(d.errs, &FieldError{File: d.file, Msg: "too many problems; fix these first"})
	}
	if len(d.errs) > maxErrorsPerFile {
		return
	}
	e := &FieldError{File: d.file, Field: field, Msg: fmt.Sprintf(format, args...)}
	if off >= 0 {
		e.Line, e.Col = d.pos(off)
	}
	d.errs = append(d.errs, e)
}

func (d *decoder) err() error { return errors.Join(d.errs...) }

func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// object checks that n is an object whose fields are all in allowed, each
// given once, and returns them by name.
func (d *decoder) object(n *jnode, path, what string, allowed []string) map[string]*jnode {
	if n.kind != jObject {
		d.fail(n, path, "must be %s, got %s", what, n.kind)
		return nil
	}
	fields := make(map[string]*jnode, len(n.keys))
	for _, k := range n.keys {
		if _, dup := fields[k.name]; dup {
			d.failAt(k.off, join(path, k.name), "given twice")
			continue
		}
		if !slices.Contains(allowed, k.name) {
			msg := fmt.Sprintf("unknown field in %s", what)
			if s := closest(k.name, allowed); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			d.failAt(k.off, join(path, k.name), "%s; allowed fields are %s", msg, strings.Join(allowed, ", "))
			continue
		}
		fields[k.name] = k.val
	}
	return fields
}

func (d *decoder) str(n *jnode, path string) string {
	if n.kind == jNumber && numberFromTemplate(d.spans, n.start) {
		// "{{n * 3}}" in a string field: the number's text.
		return string(n.num)
	}
	if n.kind != jString {
		d.fail(n, path, "must be a string, got %s", n.kind)
		return ""
	}
	return n.str
}

func (d *decoder) strList(n *jnode, path string) []string {
	if n.kind != jArray {
		d.fail(n, path, "must be an array of strings, got %s", n.kind)
		return nil
	}
	out := make([]string, 0, len(n.items))
	for i, it := range n.items {
		out = append(out, d.str(it, index(path, i)))
	}
	return out
}

func (d *decoder) boolean(n *jnode, path string) bool {
	if n.kind != jBool {
		d.fail(n, path, "must be true or false, got %s", n.kind)
		return false
	}
	return n.b
}

func (d *decoder) integer(n *jnode, path string) int {
	if n.kind != jNumber {
		d.fail(n, path, "must be a whole number, got %s", n.kind)
		return 0
	}
	v, err := strconv.ParseInt(string(n.num), 10, 32)
	if err != nil {
		d.fail(n, path, "must be a whole number between %d and %d, got %s", math.MinInt32, math.MaxInt32, n.num)
		return 0
	}
	return int(v)
}

func (d *decoder) number(n *jnode, path string) float64 {
	if n.kind != jNumber {
		d.fail(n, path, "must be a number, got %s", n.kind)
		return 0
	}
	v, err := n.num.Float64()
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		d.fail(n, path, "number %s is out of range", n.num)
		return 0
	}
	return v
}

func (d *decoder) intList(n *jnode, path string) []int {
	if n.kind != jArray {
		d.fail(n, path, "must be an array of whole numbers, got %s", n.kind)
		return nil
	}
	out := make([]int, 0, len(n.items))
	for i, it := range n.items {
		out = append(out, d.integer(it, index(path, i)))
	}
	return out
}

// duration reads a Go duration string or a number of seconds, between 0 and
// limit.
func (d *decoder) duration(n *jnode, path string, limit Duration) Duration {
	if n.kind != jString && n.kind != jNumber {
		d.fail(n, path, "must be a duration such as \"30s\" or a number of seconds, got %s", n.kind)
		return 0
	}
	v, err := parseDuration(d.data[n.start:n.end])
	if err != nil {
		d.fail(n, path, "%s", err.Error())
		return 0
	}
	if v < 0 {
		d.fail(n, path, "must not be negative, got %s", v)
		return 0
	}
	if limit > 0 && v > limit {
		d.fail(n, path, "%s is too long: at most %s", v, limit)
		return 0
	}
	return v
}

// positiveDuration is a step or check duration: more than 0, at most
// MaxStepTimeout.
func (d *decoder) positiveDuration(n *jnode, path string) Duration {
	before := len(d.errs)
	v := d.duration(n, path, Duration(MaxStepTimeout))
	if v == 0 && len(d.errs) == before {
		d.fail(n, path, "must be more than 0")
	}
	return v
}

func (d *decoder) raw(n *jnode) json.RawMessage {
	return append(json.RawMessage(nil), d.data[n.start:n.end]...)
}

// closest suggests the allowed name nearest to a misspelt one.
func closest(name string, allowed []string) string {
	best, bestD := "", 3
	for _, a := range allowed {
		if d := editDistance(strings.ToLower(name), a); d < bestD {
			best, bestD = a, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
