package hci

import (
	"fmt"
	"strings"
)

// Gemini's computer-use function calls (google-gemini/computer-use-preview's
// agent.py), points on the 0..999 grid (ToGrid): the other direction of
// mcpserver's dialect_gemini.go. Where one of its functions does several
// canonical actions (type_text_at, navigate), the run of actions it does is
// said as that one call.

func geminiSayer() sayer {
	call := func(name string, args map[string]any) []any { return []any{GeminiCall{Name: name, Args: args}} }
	at := func(name string) sayFunc {
		return func(r sayRun) (int, []any, error) {
			args, err := geminiAt(r.sp, r.a())
			if err != nil {
				return 0, nil, err
			}
			return 1, call(name, args), nil
		}
	}
	return sayer{
		name: DialectGemini,
		say: map[string]sayFunc{
			ActScreenshot: func(sayRun) (int, []any, error) { return 1, call("open_web_browser", map[string]any{}), nil },
			ActLeftClick: func(r sayRun) (int, []any, error) {
				args, err := geminiAt(r.sp, r.a())
				if err != nil {
					return 0, nil, err
				}
				if n, typed := geminiTypeAt(r.acts, r.i, args); n > 0 {
					return n, call("type_text_at", typed), nil
				}
				return 1, call("click_at", args), nil
			},
			ActMouseMove: at("hover_at"),
			ActLeftClickDrag: func(r sayRun) (int, []any, error) {
				a := r.a()
				args, err := geminiAt(r.sp, a)
				if err != nil {
					return 0, nil, err
				}
				gx, gy := r.sp.ToGrid(a.StartCoordinate[0], a.StartCoordinate[1], GeminiGrid)
				args["destination_x"], args["destination_y"] = args["x"], args["y"]
				args["x"], args["y"] = gx, gy
				return 1, call("drag_and_drop", args), nil
			},
			ActScroll: func(r sayRun) (int, []any, error) {
				a := r.a()
				args, err := geminiAt(r.sp, a)
				if err != nil {
					return 0, nil, err
				}
				m, err := r.sp.geminiMagnitude(a)
				if err != nil {
					return 0, nil, err
				}
				args["direction"], args["magnitude"] = a.ScrollDirection, m
				return 1, call("scroll_at", args), nil
			},
			ActKey: geminiKeys,
			ActWait: func(r sayRun) (int, []any, error) {
				n := waits(r.a().Duration, GeminiWaitSeconds)
				return 1, repeated(n, func() any { return GeminiCall{Name: "wait_5_seconds", Args: map[string]any{}} }), nil
			},
		},
		cannot: map[string]string{
			ActType:           "Gemini types only at a point it clicks first (type_text_at), and the step before this one is not such a click",
			ActRightClick:     "its one click is click_at, a single left click",
			ActMiddleClick:    "its one click is click_at, a single left click",
			ActDoubleClick:    "its one click is click_at, a single left click",
			ActTripleClick:    "its one click is click_at, a single left click",
			ActLeftMouseDown:  "it presses and releases the button only together, in drag_and_drop",
			ActLeftMouseUp:    "it presses and releases the button only together, in drag_and_drop",
			ActHoldKey:        "key_combination presses keys and lets them go",
			ActZoom:           "it only observes, and Gemini's functions all answer with a screenshot",
			ActCursorPosition: "it only observes, and Gemini's functions all answer with a screenshot",
		},
	}
}

// geminiAt is the grid cell of a's point, as x and y arguments.
func geminiAt(sp Space, a Action) (map[string]any, error) {
	if len(a.Coordinate) != 2 {
		return nil, cannot(DialectGemini, a, "its functions name a point, and this one has none")
	}
	if modifiers(a) != "" {
		return nil, cannot(DialectGemini, a, "its functions hold no keys while clicking, dragging or scrolling")
	}
	gx, gy := sp.ToGrid(a.Coordinate[0], a.Coordinate[1], GeminiGrid)
	return map[string]any{"x": gx, "y": gy}, nil
}

// geminiTypeAt finds type_text_at's shape from acts[i], a left click at
// args: the click, then ctrl+a and Delete (clear_before_typing), the
// typing, and Return (press_enter) if one follows; n is how many actions
// it covers, 0 if they are not that shape.
func geminiTypeAt(acts []Action, i int, args map[string]any) (int, map[string]any) {
	key := func(j int, text string) bool {
		return j < len(acts) && acts[j].Action == ActKey && acts[j].Text == text
	}
	j, clear := i+1, false
	if key(j, "ctrl+a") && key(j+1, "Delete") {
		j, clear = j+2, true
	}
	if j >= len(acts) || acts[j].Action != ActType {
		return 0, nil
	}
	out := map[string]any{"x": args["x"], "y": args["y"], "text": acts[j].Text, "clear_before_typing": clear, "press_enter": false}
	j++
	if key(j, "Return") {
		out["press_enter"] = true
		j++
	}
	return j - i, out
}

// geminiKeys says a key action: navigate when it is ctrl+l, a URL typed
// and Return, with or without a short wait before the URL (what navigate
// does: the tool waits GeminiAddressBarWait); go_back and go_forward for
// their keys; key_combination for any other chord, one call per chord of a
// sequence.
func geminiKeys(r sayRun) (int, []any, error) {
	acts, i, a := r.acts, r.i, r.a()
	if a.Text == "ctrl+l" {
		j := i + 1
		if j < len(acts) && acts[j].Action == ActWait && acts[j].Duration != nil && *acts[j].Duration <= GeminiAddressBarWait {
			j++
		}
		if j+1 < len(acts) && acts[j].Action == ActType && acts[j+1].Action == ActKey && acts[j+1].Text == "Return" &&
			strings.TrimSpace(acts[j].Text) != "" && !strings.ContainsAny(acts[j].Text, "\r\n\t") {
			return j + 2 - i, []any{GeminiCall{Name: "navigate", Args: map[string]any{"url": acts[j].Text}}}, nil
		}
	}
	if name, ok := map[string]string{"alt+Left": "go_back", "alt+Right": "go_forward"}[a.Text]; ok {
		return 1, []any{GeminiCall{Name: name, Args: map[string]any{}}}, nil
	}
	var calls []any
	for _, c := range strings.Fields(a.Text) {
		keys, err := chordKeys(DialectGemini, c)
		if err != nil {
			return 0, nil, err
		}
		calls = append(calls, GeminiCall{Name: "key_combination", Args: map[string]any{"keys": strings.Join(keys, "+")}})
	}
	return 1, calls, nil
}

// geminiMagnitude is the scroll_at magnitude, in grid units along the
// scroll's axis, that mcpserver turns back into the same notches:
// ceil(floor(m·axis/1000) / 100) == n.
func (s Space) geminiMagnitude(a Action) (int, error) {
	n := notchesOf(a)
	axis := s.ModelH
	if a.ScrollDirection == "left" || a.ScrollDirection == "right" {
		axis = s.ModelW
	}
	m := n * ScrollPixelsPerNotch * GeminiGrid / axis
	if m > GeminiGrid {
		return 0, cannot(DialectGemini, a, fmt.Sprintf("%d notches is more than scroll_at's longest scroll, the whole screen (%d pixels, %d notches)",
			n, axis, axis/ScrollPixelsPerNotch))
	}
	return m, nil
}
