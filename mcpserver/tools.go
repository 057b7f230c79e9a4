package mcpserver

import (
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/deskenv/deskenv/hci"
)

// Tool is one tool, defined once: what tools/list shows (name, description,
// schema, annotations) and the handler that runs it. Every face that offers
// tools (MCP, scripts, tool search) builds on this table.
type Tool struct {
	Name        string
	Title       string
	Description string
	Schema      mcp.ToolInputSchema
	Annotations mcp.ToolAnnotation
	Handler     server.ToolHandlerFunc
}

// MCPTool is the tool as tools/list shows it.
func (t Tool) MCPTool() mcp.Tool {
	return mcp.Tool{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: t.Schema, Annotations: t.Annotations}
}

// ServerTool is the tool and its handler, ready for mcp-go's AddTools.
func (t Tool) ServerTool() server.ServerTool {
	return server.ServerTool{Tool: t.MCPTool(), Handler: t.Handler}
}

// Field names of the computer tool's input (hci.Action's JSON names), plus the
// granular tools' own screenshot switch.
const (
	fAction     = "action"
	fCoordinate = "coordinate"
	fStart      = "start_coordinate"
	fRegion     = "region"
	fText       = "text"
	fKey        = "key"
	fDirection  = "scroll_direction"
	fAmount     = "scroll_amount"
	fDuration   = "duration"
	fScreenshot = "screenshot"
)

// field is one input field of a granular tool: the computer tool's field of
// that name, with a description written for this tool.
type field struct {
	name     string
	required bool
	desc     string
}

// actionSpec describes the granular tool for one action. Its fields are the
// computer tool's, so a call becomes an hci.Action by adding "action".
type actionSpec struct {
	name        string
	title       string
	desc        string
	fields      []field
	readOnly    bool
	destructive bool
	idempotent  bool
}

const (
	modifiersDesc = "Modifier keys held down during the action, xdotool names joined by +: shift, ctrl, alt, super (e.g. ctrl+shift). Omit for none."
	clickAtDesc   = "Where to click: [x, y] in screenshot pixels."
)

// actionSpecs is the table of granular tools, one per computer_20251124
// action. Which fields each takes and requires follows hci.Action.Validate
// (a test holds them together); coordinates are required for clicks here,
// where hci would click at the pointer, because a model that names the point
// it means is right more often.
func actionSpecs() []actionSpec {
	click := func(name, title, what string) actionSpec {
		return actionSpec{
			name: name, title: title, destructive: true,
			desc: what + " at a point of the screen.",
			fields: []field{
				{fCoordinate, true, clickAtDesc},
				{fText, false, modifiersDesc},
			},
		}
	}
	return []actionSpec{
		{
			name: hci.ActScreenshot, title: "Screenshot", readOnly: true, idempotent: true,
			desc: "Take a screenshot of the whole screen.",
		},
		click(hci.ActLeftClick, "Left click", "Click the left mouse button"),
		click(hci.ActRightClick, "Right click", "Click the right mouse button"),
		click(hci.ActMiddleClick, "Middle click", "Click the middle mouse button"),
		click(hci.ActDoubleClick, "Double click", "Double-click the left mouse button"),
		click(hci.ActTripleClick, "Triple click", "Triple-click the left mouse button (selects a line or paragraph)"),
		{
			name: hci.ActMouseMove, title: "Move the mouse", idempotent: true,
			desc: "Move the mouse pointer to a point of the screen without clicking (hovering can open menus and tooltips).",
			fields: []field{
				{fCoordinate, true, "Where to move the pointer: [x, y] in screenshot pixels."},
			},
		},
		{
			name: hci.ActLeftClickDrag, title: "Drag", destructive: true,
			desc: "Press the left mouse button at start_coordinate, move to coordinate and release there.",
			fields: []field{
				{fStart, true, "Where the drag starts: [x, y] in screenshot pixels."},
				{fCoordinate, true, "Where the drag ends: [x, y] in screenshot pixels."},
				{fText, false, modifiersDesc},
			},
		},
		{
			name: hci.ActLeftMouseDown, title: "Press the left button", destructive: true,
			desc: "Press and hold the left mouse button (release it with left_mouse_up), for drags that need intermediate moves.",
			fields: []field{
				{fCoordinate, false, "Move here first: [x, y] in screenshot pixels. Omit to press where the pointer is."},
			},
		},
		{
			name: hci.ActLeftMouseUp, title: "Release the left button", destructive: true,
			desc: "Release the left mouse button pressed with left_mouse_down.",
			fields: []field{
				{fCoordinate, false, "Move here first: [x, y] in screenshot pixels. Omit to release where the pointer is."},
			},
		},
		{
			name: hci.ActScroll, title: "Scroll", destructive: false,
			desc: "Turn the mouse wheel: scroll the content under the pointer.",
			fields: []field{
				{fDirection, true, "Which way to scroll: up, down, left or right."},
				{fAmount, false, fmt.Sprintf("How many wheel notches (0 to %d, default %d; 0 only moves to coordinate).", hci.MaxScrollAmount, hci.DefaultScrollNotch)},
				{fCoordinate, false, "Move the pointer here first: [x, y] in screenshot pixels. Omit to scroll where the pointer is."},
				{fText, false, modifiersDesc},
			},
		},
		{
			name: hci.ActType, title: "Type text", destructive: true,
			desc: "Type text with the keyboard into the focused window. Any Unicode text types as is, whatever the keyboard layout; newline presses Return and tab presses Tab.",
			fields: []field{
				{fText, true, "The text to type."},
			},
		},
		{
			name: hci.ActKey, title: "Press keys", destructive: true,
			desc: "Press and release a key or key chord, such as Return, ctrl+s, alt+Tab or Page_Down (xdotool key names; enter, esc and cmd are understood too).",
			fields: []field{
				{fText, true, "The key or chord: xdotool key names joined by +, e.g. ctrl+shift+t. Several chords separated by spaces are pressed one after the other (\"ctrl+a Delete\")."},
			},
		},
		{
			name: hci.ActHoldKey, title: "Hold keys", destructive: true,
			desc: "Hold a key or chord down for a while, then release it.",
			fields: []field{
				{fText, true, "The key or chord to hold: xdotool key names joined by +, e.g. shift or ctrl+alt."},
				{fDuration, true, fmt.Sprintf("How long to hold, in seconds (0 to %g).", hci.MaxDuration)},
			},
		},
		{
			name: hci.ActWait, title: "Wait", readOnly: true, idempotent: true,
			desc: "Wait, then take a screenshot: for pages and programs that are still loading.",
			fields: []field{
				{fDuration, true, fmt.Sprintf("How long to wait, in seconds (0 to %g).", hci.MaxDuration)},
			},
		},
		{
			name: hci.ActCursorPosition, title: "Pointer position", readOnly: true, idempotent: true,
			desc: "Report where the mouse pointer is, as X=..,Y=.. in screenshot pixels.",
		},
		{
			name: hci.ActZoom, title: "Zoom", readOnly: true, idempotent: true,
			desc: "Look closely at a region of the screen: returns that region at the screen's full resolution. Coordinates in later actions still refer to the full screenshot.",
			fields: []field{
				{fRegion, true, "The region to inspect: [x0, y0, x1, y1] in screenshot pixels (left, top, right, bottom; x0 < x1, y0 < y1)."},
			},
		},
	}
}

// property is the JSON Schema of a field in this server's model space. desc
// overrides the generic description.
func (s *Server) property(name, desc string) map[string]any {
	w, h := s.space.ModelW, s.space.ModelH
	point := func(d string) map[string]any {
		return map[string]any{
			"type":        "array",
			"description": fmt.Sprintf("%s x is 0..%d, y is 0..%d (origin top-left).", d, w-1, h-1),
			"items":       map[string]any{"type": "integer", "minimum": 0, "maximum": max(w, h) - 1},
			"minItems":    2,
			"maxItems":    2,
		}
	}
	or := func(def string) string {
		if desc != "" {
			return desc
		}
		return def
	}
	switch name {
	case fAction:
		return map[string]any{"type": "string", "enum": hci.Actions(), "description": or("The action to perform.")}
	case fCoordinate:
		return point(or("[x, y] in screenshot pixels: where to click, move, scroll or end a drag."))
	case fStart:
		return point(or("[x, y] in screenshot pixels where left_click_drag starts."))
	case fRegion:
		return map[string]any{
			"type": "array",
			"description": fmt.Sprintf("%s x0 < x1 <= %d, y0 < y1 <= %d.",
				or("For zoom: [x0, y0, x1, y1] in screenshot pixels (left, top, right, bottom)."), w, h),
			"items":    map[string]any{"type": "integer", "minimum": 0, "maximum": max(w, h)},
			"minItems": 4,
			"maxItems": 4,
		}
	case fText:
		return map[string]any{"type": "string", "description": or(
			"For type: the text to type. For key and hold_key: xdotool key names joined by + (ctrl+s, Return, Page_Down). " +
				"For clicks, drags and scroll: modifier keys held during the action (shift, ctrl+alt).")}
	case fKey:
		return map[string]any{"type": "string", "description": or(
			"For clicks, drags and scroll: modifier keys held during the action, as text (accepted for the quickstart demo's sake).")}
	case fDirection:
		return map[string]any{"type": "string", "enum": []string{"up", "down", "left", "right"}, "description": or("For scroll: which way.")}
	case fAmount:
		return map[string]any{"type": "integer", "minimum": 0, "maximum": hci.MaxScrollAmount, "default": hci.DefaultScrollNotch,
			"description": or(fmt.Sprintf("For scroll: how many wheel notches (default %d).", hci.DefaultScrollNotch))}
	case fDuration:
		return map[string]any{"type": "number", "minimum": 0, "maximum": hci.MaxDuration,
			"description": or("For hold_key and wait: seconds.")}
	case fScreenshot:
		return map[string]any{"type": "boolean", "default": true, "description": or(
			"Answer with a screenshot taken once the screen has settled (default). Set false to chain actions faster and look later.")}
	}
	panic("mcpserver: no schema for field " + name) // the tables above name only known fields
}

// computerTool is the single Anthropic-shaped tool.
func (s *Server) computerTool() Tool {
	names := []string{fAction, fCoordinate, fStart, fRegion, fText, fKey, fDirection, fAmount, fDuration}
	props := make(map[string]any, len(names))
	for _, n := range names {
		props[n] = s.property(n, "")
	}
	return Tool{
		Name:        "computer",
		Title:       "Computer",
		Description: s.computerDescription(),
		Schema: mcp.ToolInputSchema{
			Type: "object", Properties: props, Required: []string{fAction},
			AdditionalProperties: false, PropertyOrder: names,
		},
		Annotations: annotations(false, true, false),
		Handler:     s.handleComputer,
	}
}

// computerDescription is the computer tool's description: the screen, then
// one line per action from hci's action table, actions that share a summary
// (the five clicks) on one line.
func (s *Server) computerDescription() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Use a mouse and keyboard to interact with a Linux desktop, and take screenshots. "+
		"The screen is %d x %d pixels; coordinates are [x, y] in those pixels, origin top-left. "+
		"Actions that change the screen answer with a screenshot taken once the screen has settled.\n\nActions:",
		s.space.ModelW, s.space.ModelH)
	specs := hci.ActionSpecs()
	for i := 0; i < len(specs); {
		names := []string{specs[i].Name}
		j := i + 1
		for ; j < len(specs) && specs[j].Summary == specs[i].Summary; j++ {
			names = append(names, specs[j].Name)
		}
		fmt.Fprintf(&b, "\n- %s: %s", strings.Join(names, ", "), specs[i].Summary)
		i = j
	}
	return b.String()
}

// actionTools are the granular tools, one per action.
func (s *Server) actionTools() []Tool {
	specs := actionSpecs()
	tools := make([]Tool, 0, len(specs))
	for _, sp := range specs {
		props := map[string]any{}
		var required, order []string
		for _, f := range sp.fields {
			props[f.name] = s.property(f.name, f.desc)
			order = append(order, f.name)
			if f.required {
				required = append(required, f.name)
			}
		}
		if !sp.readOnly {
			props[fScreenshot] = s.property(fScreenshot, "")
			order = append(order, fScreenshot)
		}
		desc := sp.desc
		if sp.name == hci.ActScreenshot || sp.name == hci.ActWait {
			desc += fmt.Sprintf(" Screenshots are %d x %d pixels, the space of every coordinate.", s.space.ModelW, s.space.ModelH)
		} else {
			desc += fmt.Sprintf(" Coordinates are in the %d x %d pixels of the screenshot.", s.space.ModelW, s.space.ModelH)
		}
		tools = append(tools, Tool{
			Name:        sp.name,
			Title:       sp.title,
			Description: desc,
			Schema: mcp.ToolInputSchema{
				Type: "object", Properties: props, Required: required,
				AdditionalProperties: false, PropertyOrder: order,
			},
			Annotations: annotations(sp.readOnly, sp.destructive, sp.idempotent),
			Handler:     s.actionHandler(sp),
		})
	}
	return tools
}

// annotations are the MCP behaviour hints. The desktop is a closed world:
// nothing here reaches out to the internet by itself (openWorldHint false),
// whatever the apps on it may do.
func annotations(readOnly, destructive, idempotent bool) mcp.ToolAnnotation {
	return mcp.ToolAnnotation{
		ReadOnlyHint:    mcp.ToBoolPtr(readOnly),
		DestructiveHint: mcp.ToBoolPtr(destructive && !readOnly),
		IdempotentHint:  mcp.ToBoolPtr(idempotent),
		OpenWorldHint:   mcp.ToBoolPtr(false),
	}
}
