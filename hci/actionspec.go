package hci

import (
	"fmt"
	"math/bits"
)

// ActionSpec describes one computer_20251124 action: the fields it requires
// and the others it takes (their JSON names), and what it does, in one line
// written for a model reading a tool description. ParseAction, Validate and
// the MCP server's tool descriptions all read the same table.
type ActionSpec struct {
	Name     string
	Required []string
	Optional []string
	// Summary is what the action does with its fields, such as "to
	// coordinate." for mouse_move. Actions that work alike share it word for
	// word (the five clicks), so a description can list them together.
	Summary string
	// Mutates is false for the actions that only look: screenshot,
	// cursor_position, zoom and wait.
	Mutates bool
}

// ActionSpecs returns the 17 actions' specs, in the order Actions lists them.
func ActionSpecs() []ActionSpec {
	out := make([]ActionSpec, len(actionTable))
	for i, r := range actionTable {
		out[i] = ActionSpec{
			Name:     r.name,
			Required: fieldsOf(r.required),
			Optional: fieldsOf(r.allowed &^ r.required),
			Summary:  r.summary,
			Mutates:  r.mutates,
		}
	}
	return out
}

// field presence bits, in the order of fieldNames after "action".
const (
	fCoord = 1 << iota
	fStart
	fRegion
	fText
	fKey
	fDir
	fAmount
	fDuration
)

// fieldNames are the fields of an action, "action" first; the one after it
// is the field of bit 1, and so on.
var fieldNames = []string{"action", "coordinate", "start_coordinate", "region", "text", "key",
	"scroll_direction", "scroll_amount", "duration"}

// fieldLabel is the JSON name of the field of one presence bit.
func fieldLabel(bit int) string { return fieldNames[1+bits.TrailingZeros(uint(bit))] }

// fieldsOf names the fields of a presence mask, in fieldNames order.
func fieldsOf(mask int) []string {
	var out []string
	for bit := fCoord; bit <= fDuration; bit <<= 1 {
		if mask&bit != 0 {
			out = append(out, fieldLabel(bit))
		}
	}
	return out
}

// actionRule is one row of the action table.
type actionRule struct {
	name              string
	required, allowed int // presence masks
	summary           string
	mutates           bool
}

const (
	clickSummary  = "at coordinate (or where the pointer is); text holds modifiers (ctrl, shift+alt)."
	buttonSummary = "press or release the left button, after moving to coordinate if given."
	clickFields   = fCoord | fText | fKey
)

// actionTable is the one list of actions, in the order DESIGN.md gives them.
// Nothing changes it after it is made.
var actionTable = []actionRule{
	{ActScreenshot, 0, 0, "the whole screen.", false},
	{ActLeftClick, 0, clickFields, clickSummary, true},
	{ActRightClick, 0, clickFields, clickSummary, true},
	{ActMiddleClick, 0, clickFields, clickSummary, true},
	{ActDoubleClick, 0, clickFields, clickSummary, true},
	{ActTripleClick, 0, clickFields, clickSummary, true},
	{ActMouseMove, fCoord, fCoord, "to coordinate.", true},
	{ActLeftClickDrag, fCoord | fStart, fCoord | fStart | fText | fKey, "press at start_coordinate, release at coordinate.", true},
	{ActLeftMouseDown, 0, fCoord, buttonSummary, true},
	{ActLeftMouseUp, 0, fCoord, buttonSummary, true},
	{ActScroll, fDir, fCoord | fDir | fAmount | fText | fKey,
		fmt.Sprintf("scroll_direction up/down/left/right, scroll_amount notches (default %d), at coordinate if given.", DefaultScrollNotch), true},
	{ActType, fText, fText, "type text.", true},
	{ActKey, fText, fText, "press a chord in text, xdotool names such as ctrl+s, Return, alt+Tab, Page_Down.", true},
	{ActHoldKey, fText | fDuration, fText | fDuration, "hold the chord in text for duration seconds.", true},
	{ActWait, fDuration, fDuration, "wait duration seconds, then screenshot.", false},
	{ActCursorPosition, 0, 0, "the pointer's position as X=..,Y=..", false},
	{ActZoom, fRegion, fRegion, "region [x0, y0, x1, y1] at the screen's full resolution; later coordinates still refer to the full screenshot.", false},
}

// actionFields is actionTable by name.
var actionFields = func() map[string]actionRule {
	m := make(map[string]actionRule, len(actionTable))
	for _, r := range actionTable {
		m[r.name] = r
	}
	return m
}()

// actionNames are the names in table order.
var actionNames = func() []string {
	out := make([]string, len(actionTable))
	for i, r := range actionTable {
		out[i] = r.name
	}
	return out
}()
