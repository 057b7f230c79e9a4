package hci

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/deskenv/deskenv/internal/wire"
)

// Action is exactly the input of Anthropic's computer_20251124 tool_use, so a
// model's tool call executes unchanged and a human demonstration reduces to
// the same thing.
type Action struct {
	Action          string   `json:"action"`
	Coordinate      []int    `json:"coordinate,omitempty"`       // [x,y] model space
	StartCoordinate []int    `json:"start_coordinate,omitempty"` // left_click_drag
	Region          []int    `json:"region,omitempty"`           // zoom [x0,y0,x1,y1] model space
	Text            string   `json:"text,omitempty"`             // type text / key chord / click+scroll modifiers
	Key             string   `json:"key,omitempty"`              // the quickstart demo's click modifiers (accept both text and key)
	ScrollDirection string   `json:"scroll_direction,omitempty"`
	ScrollAmount    *int     `json:"scroll_amount,omitempty"`
	Duration        *float64 `json:"duration,omitempty"`

	// emptyText records a type action whose text was given and empty: the
	// reference tool types nothing and answers with a screenshot, so this is
	// a no-op, not an error. Text alone cannot tell it from a missing text
	// (which stays an error), and MarshalJSON needs it to write "text": ""
	// back so a recorded no-op replays.
	emptyText bool
}

// The action names, as in computer_20251124.
const (
	ActScreenshot     = "screenshot"
	ActLeftClick      = "left_click"
	ActRightClick     = "right_click"
	ActMiddleClick    = "middle_click"
	ActDoubleClick    = "double_click"
	ActTripleClick    = "triple_click"
	ActMouseMove      = "mouse_move"
	ActLeftClickDrag  = "left_click_drag"
	ActLeftMouseDown  = "left_mouse_down"
	ActLeftMouseUp    = "left_mouse_up"
	ActScroll         = "scroll"
	ActType           = "type"
	ActKey            = "key"
	ActHoldKey        = "hold_key"
	ActWait           = "wait"
	ActCursorPosition = "cursor_position"
	ActZoom           = "zoom"
)

// Limits on action fields.
const (
	MaxTextBytes       = 64 << 10 // type text
	MaxKeyTextBytes    = 1 << 10  // key and hold_key chords, click modifiers
	MaxDuration        = 100.0    // seconds, hold_key and wait (the reference allows 0..100)
	MaxScrollAmount    = 100      // notches
	DefaultScrollNotch = 3        // scroll_amount when omitted, as in the reference best practices
)

// Actions returns the 17 action names in the order DESIGN.md lists them.
func Actions() []string { return append([]string(nil), actionNames...) }

// ParseAction decodes a tool_use input strictly: an unknown field, a field of
// the wrong JSON type or a non-integer coordinate is an error saying which
// field and what is allowed. A null field counts as absent, but a null inside
// a coordinate or region is an error (JavaScript sends NaN and Infinity as
// null: it must not click at 0). Text that is not valid UTF-8, or holds an
// unpaired surrogate escape, is an error too, found on the raw bytes before
// decoding would replace it with U+FFFD. It does not check values against a
// screen; call Validate for that.
//
// Every decoding of an Action goes through here: Action.UnmarshalJSON calls
// it, so a recording or a message decoded with encoding/json is as strict as
// a tool call.
func ParseAction(raw []byte) (Action, error) {
	var a Action
	fields, err := actionObject(raw)
	if err != nil {
		return a, err
	}
	if err := unknownFields(fields); err != nil {
		return a, err
	}
	if v, ok := present(fields, "action"); ok {
		if a.Action, err = decodeString("action", v); err != nil {
			return a, err
		}
	}
	if a.Action == "" {
		return a, fmt.Errorf("action is required: one of %s", strings.Join(actionNames, ", "))
	}
	if err := nullPoints(a.Action, fields); err != nil {
		return a, err
	}
	for _, fd := range fieldDecoders {
		if v, ok := present(fields, fd.name); ok {
			if err := fd.decode(v, &a); err != nil {
				return a, err
			}
		}
	}
	return a, nil
}

// actionObject reads raw as a JSON object, its fields by name, after
// checking its strings on the raw bytes.
func actionObject(raw []byte) (map[string]json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil, errors.New("empty action: expected a JSON object such as {\"action\":\"screenshot\"}")
	}
	if err := wire.CheckJSON(raw); err != nil {
		return nil, fmt.Errorf("action: %w", err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, fmt.Errorf("action must be a JSON object, got %s", te.Value)
		}
		return nil, fmt.Errorf("action is not valid JSON: %w", err)
	}
	if fields == nil {
		return nil, errors.New("action must be a JSON object, got null")
	}
	return fields, nil
}

// unknownFields names the fields no action takes, up to four of them.
func unknownFields(fields map[string]json.RawMessage) error {
	var unknown []string
	for k := range fields {
		if !slices.Contains(fieldNames, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	msg := "unknown field " + wire.Quote(unknown[0])
	if len(unknown) > 1 {
		quoted := make([]string, 0, 4)
		for _, u := range unknown[:min(len(unknown), 4)] {
			quoted = append(quoted, wire.Quote(u))
		}
		if len(unknown) > 4 {
			quoted = append(quoted, fmt.Sprintf("and %d more", len(unknown)-4))
		}
		msg = "unknown fields " + strings.Join(quoted, ", ")
	}
	if s := closestField(unknown[0]); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return fmt.Errorf("%s; allowed fields are %s", msg, strings.Join(fieldNames, ", "))
}

// present is the field's value unless it is absent or null.
func present(fields map[string]json.RawMessage, name string) (json.RawMessage, bool) {
	v, ok := fields[name]
	if !ok || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
		return nil, false
	}
	return v, true
}

// nullPoints refuses a null point or region that the action would use.
// Other null fields count as absent (harnesses fill unused fields with
// None), but a click whose coordinate came out null (NaN in JavaScript) must
// not land wherever the pointer happens to be.
func nullPoints(action string, fields map[string]json.RawMessage) error {
	for _, bit := range []int{fCoord, fStart, fRegion} {
		name := fieldLabel(bit)
		v, ok := fields[name]
		if ok && bytes.Equal(bytes.TrimSpace(v), []byte("null")) && actionFields[action].allowed&bit != 0 {
			return fmt.Errorf("%s: %s is null: give it as numbers, or leave it out%s", action, name, nullHint(bit))
		}
	}
	return nil
}

// fieldDecoders decode the fields after "action", in fieldNames order.
var fieldDecoders = []struct {
	name   string
	decode func(v json.RawMessage, a *Action) (err error)
}{
	{"coordinate", func(v json.RawMessage, a *Action) (err error) {
		a.Coordinate, err = decodeInts("coordinate", v, 2, "[x, y]")
		return err
	}},
	{"start_coordinate", func(v json.RawMessage, a *Action) (err error) {
		a.StartCoordinate, err = decodeInts("start_coordinate", v, 2, "[x, y]")
		return err
	}},
	{"region", func(v json.RawMessage, a *Action) (err error) {
		a.Region, err = decodeInts("region", v, 4, "[x0, y0, x1, y1]")
		return err
	}},
	{"text", func(v json.RawMessage, a *Action) (err error) {
		a.Text, err = decodeString("text", v)
		a.emptyText = err == nil && a.Text == "" && a.Action == ActType
		return err
	}},
	{"key", func(v json.RawMessage, a *Action) (err error) { a.Key, err = decodeString("key", v); return err }},
	{"scroll_direction", func(v json.RawMessage, a *Action) (err error) {
		a.ScrollDirection, err = decodeString("scroll_direction", v)
		return err
	}},
	{"scroll_amount", func(v json.RawMessage, a *Action) error {
		n, err := decodeInt("scroll_amount", v)
		if err == nil {
			a.ScrollAmount = &n
		}
		return err
	}},
	{"duration", func(v json.RawMessage, a *Action) error {
		var d float64
		if err := json.Unmarshal(v, &d); err != nil {
			return fmt.Errorf("duration must be a number of seconds, got %s", jsonKind(v))
		}
		a.Duration = &d
		return nil
	}},
}

// UnmarshalJSON decodes with ParseAction, so an Action read by
// encoding/json (a recording, a message) gets the same checks as a tool
// call. null leaves a unchanged, as encoding/json does for other types.
func (a *Action) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		return nil
	}
	x, err := ParseAction(b)
	if err != nil {
		return err
	}
	*a = x
	return nil
}

func closestField(name string) string {
	best, bestD := "", 3
	for _, f := range fieldNames {
		if d := editDistance(strings.ToLower(name), f); d < bestD {
			best, bestD = f, d
		}
	}
	// "coordinates", "startCoordinate" and similar are common slips.
	if best == "" {
		n := strings.ToLower(strings.ReplaceAll(name, "_", ""))
		for _, f := range fieldNames {
			if strings.ReplaceAll(f, "_", "") == n || strings.ReplaceAll(f, "_", "")+"s" == n {
				return f
			}
		}
	}
	return best
}

// jsonKind names the JSON type of v for error messages.
func jsonKind(v json.RawMessage) string {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return "nothing"
	}
	switch v[0] {
	case '"':
		return "string " + truncate(string(v), 40)
	case '[':
		return "array " + truncate(string(v), 40)
	case '{':
		return "object"
	case 't', 'f':
		return "boolean " + string(v)
	case 'n':
		return "null"
	default:
		return "number " + truncate(string(v), 40)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

func decodeString(name string, v json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", fmt.Errorf("%s must be a string, got %s", name, jsonKind(v))
	}
	return s, nil
}

// decodeInt accepts a JSON number with an integral value (3 or 3.0) that
// fits in 32 bits. null is not a number: encoding/json would leave 0.
func decodeInt(name string, v json.RawMessage) (int, error) {
	n, ok := jsonInt32(v)
	if !ok {
		return 0, fmt.Errorf("%s must be an integer, got %s", name, jsonKind(v))
	}
	return n, nil
}

// jsonInt32 reads v as a whole JSON number within int32.
func jsonInt32(v json.RawMessage) (int, bool) {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) {
		return 0, false // null, strings, arrays: Unmarshal into float64 would take null as 0
	}
	var f float64
	if err := json.Unmarshal(v, &f); err != nil {
		return 0, false
	}
	if f != math.Trunc(f) || f < math.MinInt32 || f > math.MaxInt32 {
		return 0, false
	}
	return int(f), true
}

func decodeInts(name string, v json.RawMessage, n int, shape string) ([]int, error) {
	want := fmt.Sprintf("%s must be an array of %d non-negative integers %s", name, n, shape)
	var raw []json.RawMessage
	if err := json.Unmarshal(v, &raw); err != nil {
		// Some models send "[500, 375]" or "500,375" as a string; say so plainly
		// rather than guessing.
		return nil, fmt.Errorf("%s, got %s", want, jsonKind(v))
	}
	if len(raw) != n {
		return nil, fmt.Errorf("%s, got %d values", want, len(raw))
	}
	out := make([]int, n)
	for i, e := range raw {
		n, ok := jsonInt32(e)
		if !ok {
			if k := jsonKind(e); k == "null" {
				return nil, fmt.Errorf("%s, got null at index %d (JavaScript sends NaN and Infinity as null)", want, i)
			}
			return nil, fmt.Errorf("%s, got %s at index %d", want, jsonKind(e), i)
		}
		out[i] = n
	}
	return out, nil
}

func (a Action) present() int {
	m := 0
	if a.Coordinate != nil {
		m |= fCoord
	}
	if a.StartCoordinate != nil {
		m |= fStart
	}
	if a.Region != nil {
		m |= fRegion
	}
	if a.Text != "" || a.emptyText {
		m |= fText
	}
	if a.Key != "" {
		m |= fKey
	}
	if a.ScrollDirection != "" {
		m |= fDir
	}
	if a.ScrollAmount != nil {
		m |= fAmount
	}
	if a.Duration != nil {
		m |= fDuration
	}
	return m
}

// Validate checks a against model space s: the action is known, its required
// fields are there and no others, coordinates and regions lie inside model
// space (an error, never a clamp), key names resolve, text is valid UTF-8 of
// at most MaxTextBytes with no control characters but newline and tab,
// duration is 0..100 s and scroll_amount 0..100 notches. As in the reference
// tool, scroll_amount 0 scrolls nothing (it still moves to coordinate) and a
// type of the empty text types nothing.
func (a Action) Validate(s Space) error {
	spec, err := lookupAction(a.Action)
	if err != nil {
		return err
	}
	if err := s.Check(); err != nil {
		return fmt.Errorf("cannot check %s: %w", a.Action, err)
	}
	if err := spec.checkFields(a.present()); err != nil {
		return err
	}
	for _, check := range valueChecks {
		if err := check(a, s); err != nil {
			return fmt.Errorf("%s: %w", a.Action, err)
		}
	}
	return nil
}

// lookupAction is the rule of a known action, or an error that names the
// nearest known one.
func lookupAction(name string) (actionRule, error) {
	if spec, ok := actionFields[name]; ok {
		return spec, nil
	}
	if name == "" {
		return actionRule{}, fmt.Errorf("action is required: one of %s", strings.Join(actionNames, ", "))
	}
	msg := "unknown action " + wire.Quote(name)
	best, bestD := "", 3
	for _, n := range actionNames {
		if d := editDistance(strings.ToLower(name), n); d < bestD {
			best, bestD = n, d
		}
	}
	if best != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", best)
	}
	return actionRule{}, fmt.Errorf("%s; known actions: %s", msg, strings.Join(actionNames, ", "))
}

// checkFields says which required field is missing or which given field the
// action does not take, first in fieldNames order.
func (r actionRule) checkFields(have int) error {
	for bit := fCoord; bit <= fDuration; bit <<= 1 {
		if r.required&bit != 0 && have&bit == 0 {
			return fmt.Errorf("%s requires %s%s", r.name, fieldLabel(bit), fieldHint(r.name, bit))
		}
		if r.allowed&bit == 0 && have&bit != 0 {
			return fmt.Errorf("%s does not take %s%s", r.name, fieldLabel(bit), notAllowedHint(r.name, bit))
		}
	}
	return nil
}

// valueChecks check the values of the fields an action has, in this order;
// Validate prefixes their errors with the action.
var valueChecks = []func(a Action, s Space) error{
	func(a Action, s Space) error { return checkPointField("coordinate", a.Coordinate, s) },
	func(a Action, s Space) error { return checkPointField("start_coordinate", a.StartCoordinate, s) },
	func(a Action, s Space) error {
		if a.Region == nil {
			return nil
		}
		return checkRegion(a.Region, s)
	},
	func(a Action, _ Space) error {
		if a.present()&(fText|fKey) == 0 {
			return nil
		}
		return a.checkText()
	},
	func(a Action, _ Space) error { return a.checkScroll() },
	func(a Action, _ Space) error { return a.checkDuration() },
}

func checkPointField(name string, p []int, s Space) error {
	if p == nil {
		return nil
	}
	return checkPoint(name, p, s)
}

func (a Action) checkScroll() error {
	if a.Action != ActScroll {
		return nil
	}
	switch a.ScrollDirection {
	case "up", "down", "left", "right":
	default:
		return fmt.Errorf("scroll_direction must be one of up, down, left, right, got %s", wire.Quote(a.ScrollDirection))
	}
	if a.ScrollAmount != nil && (*a.ScrollAmount < 0 || *a.ScrollAmount > MaxScrollAmount) {
		return fmt.Errorf("scroll_amount must be a number of wheel notches from 0 to %d, got %d", MaxScrollAmount, *a.ScrollAmount)
	}
	return nil
}

func (a Action) checkDuration() error {
	if a.Duration == nil {
		return nil
	}
	if d := *a.Duration; math.IsNaN(d) || d < 0 || d > MaxDuration {
		return fmt.Errorf("duration must be between 0 and %g seconds, got %g", MaxDuration, d)
	}
	return nil
}

func fieldHint(action string, bit int) string {
	switch {
	case bit == fCoord:
		return " [x, y] in screenshot pixels"
	case bit == fStart:
		return " [x, y]: where the drag starts (coordinate is where it ends)"
	case bit == fRegion:
		return " [x0, y0, x1, y1] in screenshot pixels"
	case bit == fText && action == ActType:
		return ": the text to type"
	case bit == fText:
		return ": key names joined by +, such as ctrl+s or Return"
	case bit == fDir:
		return ": up, down, left or right"
	case bit == fDuration:
		return " in seconds (0 to 100)"
	}
	return ""
}

func notAllowedHint(action string, bit int) string {
	switch {
	case action == ActKey && bit == fKey, action == ActHoldKey && bit == fKey:
		return " (put the chord in text)"
	case bit == fText && (action == ActLeftMouseDown || action == ActLeftMouseUp):
		return " (hold modifiers with hold_key, or use left_click with text)"
	}
	return ""
}

func checkPoint(name string, p []int, s Space) error {
	if len(p) != 2 {
		return fmt.Errorf("%s must be an array of 2 non-negative integers [x, y], got %d values", name, len(p))
	}
	x, y := p[0], p[1]
	if !s.InModel(x, y) {
		return fmt.Errorf("%s [%d, %d] is outside the %dx%d screenshot: x must be 0..%d and y 0..%d",
			name, x, y, s.ModelW, s.ModelH, s.ModelW-1, s.ModelH-1)
	}
	return nil
}

func checkRegion(r []int, s Space) error {
	if len(r) != 4 {
		return fmt.Errorf("region must be an array of 4 non-negative integers [x0, y0, x1, y1], got %d values", len(r))
	}
	x0, y0, x1, y1 := r[0], r[1], r[2], r[3]
	switch {
	case x0 < 0 || y0 < 0 || x1 < 0 || y1 < 0:
		return fmt.Errorf("region %v has a negative value: all four must be non-negative", r)
	case x0 >= x1 || y0 >= y1:
		return fmt.Errorf("region %v is empty or inverted: it must satisfy x0 < x1 and y0 < y1 ([left, top, right, bottom])", r)
	case x1 > s.ModelW || y1 > s.ModelH:
		return fmt.Errorf("region %v extends past the %dx%d screenshot: x1 must be at most %d and y1 at most %d",
			r, s.ModelW, s.ModelH, s.ModelW, s.ModelH)
	}
	return nil
}

func (a Action) checkText() error {
	if a.Text != "" && a.Key != "" && a.Text != a.Key {
		return fmt.Errorf("text %q and key %q both name modifiers; give one of them", truncate(a.Text, 40), truncate(a.Key, 40))
	}
	if err := wire.CheckString(a.Text); err != nil {
		return fmt.Errorf("text: %w", err)
	}
	if err := wire.CheckString(a.Key); err != nil {
		return fmt.Errorf("key: %w", err)
	}
	if a.Action == ActType {
		return checkTyped(a.Text)
	}
	return a.checkChord()
}

// checkTyped checks the text of a type action: not too long, and no
// control characters but newline and tab.
func checkTyped(text string) error {
	if len(text) > MaxTextBytes {
		return fmt.Errorf("text is %d bytes; at most %d (64 KiB) are typed in one action, split it", len(text), MaxTextBytes)
	}
	for i, r := range text {
		if r == '\n' || r == '\r' || r == '\t' {
			continue
		}
		if KeysymForRune(r) == 0 || r == '\b' || r == 0x1b || r == 0x7f {
			return fmt.Errorf("text has the control character %U at byte %d; only newline and tab are typed (press other keys with the key action)", r, i)
		}
	}
	return nil
}

// checkChord checks the keys of key and hold_key, or a click's modifiers.
func (a Action) checkChord() error {
	chord := a.Text
	if chord == "" {
		chord = a.Key
	}
	if len(chord) > MaxKeyTextBytes {
		return fmt.Errorf("key text is %d bytes; at most %d are allowed", len(chord), MaxKeyTextBytes)
	}
	if a.Action == ActKey || a.Action == ActHoldKey {
		_, err := ParseKeys(chord)
		return err
	}
	if _, err := ParseChord(chord); err != nil {
		return fmt.Errorf("modifiers: %w", err)
	}
	return nil
}

// Modifiers returns the keys to hold during a click, drag or scroll (from text
// or key), nil when none.
func (a Action) Modifiers() ([]Keysym, error) {
	m := a.Text
	if m == "" {
		m = a.Key
	}
	if m == "" {
		return nil, nil
	}
	return ParseChord(m)
}

// Mutates reports whether the action can change the desktop. screenshot,
// cursor_position, zoom and wait do not (wait still returns a screenshot).
func (a Action) Mutates() bool { return actionFields[a.Action].mutates }

// MarshalJSON writes the action as its JSON input, with <, > and & as typed
// (encoding/json's HTML escaping would change what a trainer reads), and the
// empty text of a no-op type, which the field's omitempty would drop.
func (a Action) MarshalJSON() ([]byte, error) {
	type plain Action // the fields without this method
	b, err := wire.Marshal(plain(a))
	if err != nil || !a.emptyText || a.Text != "" {
		return b, err
	}
	return append(b[:len(b)-1], `,"text":""}`...), nil
}

// String is the action as compact JSON, for logs.
func (a Action) String() string {
	b, err := wire.Marshal(a) // as typed: <, > and & unescaped
	if err != nil {
		return a.Action
	}
	return string(b)
}

// nullHint says what leaving a null field out means.
func nullHint(bit int) string {
	if bit == fCoord {
		return " (a click or scroll without it acts where the pointer is)"
	}
	return ""
}
