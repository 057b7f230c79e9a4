package hci

import "strings"

// OpenAI's computer-use action objects (openai-python's
// types/responses/computer_action.py), in pixels of the model space: the
// other direction of mcpserver's dialect_openai.go.

func openAISayer() sayer {
	click := func(button string) sayFunc {
		return func(r sayRun) (int, []any, error) {
			o, err := openAIAt(r.a(), "click")
			if err == nil {
				o["button"] = button
			}
			return one(o, err)
		}
	}
	at := func(typ string) sayFunc {
		return func(r sayRun) (int, []any, error) { return one(openAIAt(r.a(), typ)) }
	}
	return sayer{
		name: DialectOpenAI,
		say: map[string]sayFunc{
			ActScreenshot:  func(sayRun) (int, []any, error) { return one(map[string]any{"type": "screenshot"}, nil) },
			ActLeftClick:   click("left"),
			ActRightClick:  click("right"),
			ActMiddleClick: click("wheel"),
			ActDoubleClick: at("double_click"),
			ActMouseMove:   at("move"),
			ActLeftClickDrag: func(r sayRun) (int, []any, error) {
				a := r.a()
				o, err := openAIAt(a, "drag")
				if err == nil {
					delete(o, "x")
					delete(o, "y")
					o["path"] = []map[string]int{openAIPoint(a.StartCoordinate), openAIPoint(a.Coordinate)}
				}
				return one(o, err)
			},
			ActLeftMouseDown: openAIPath,
			ActScroll:        openAIScroll,
			ActType: func(r sayRun) (int, []any, error) {
				return one(map[string]any{"type": "type", "text": r.a().Text}, nil)
			},
			ActKey: openAIKeys,
			ActWait: func(r sayRun) (int, []any, error) {
				n := waits(r.a().Duration, OpenAIWaitSeconds)
				return 1, repeated(n, func() any { return map[string]any{"type": "wait"} }), nil
			},
		},
		cannot: map[string]string{
			ActTripleClick:    "OpenAI's actions click once (click) or twice (double_click)",
			ActLeftMouseUp:    "a release is said only as the end of a drag's path, after a press and a move",
			ActHoldKey:        "OpenAI's actions hold keys only during a click, drag, move or scroll",
			ActZoom:           "it only observes, and OpenAI's one observing action is screenshot",
			ActCursorPosition: "it only observes, and OpenAI's one observing action is screenshot",
		},
	}
}

func openAIPoint(c []int) map[string]int { return map[string]int{"x": c[0], "y": c[1]} }

// openAIAt is an action object of typ at a's point, holding a's modifiers
// as keys (a move holds none).
func openAIAt(a Action, typ string) (map[string]any, error) {
	if len(a.Coordinate) != 2 {
		return nil, cannot(DialectOpenAI, a, "its actions name a point, and this one has none (it acted where the pointer was)")
	}
	o := map[string]any{"type": typ, "x": a.Coordinate[0], "y": a.Coordinate[1]}
	if m := modifiers(a); m != "" && a.Action != ActMouseMove {
		keys, err := chordKeys(DialectOpenAI, m)
		if err != nil {
			return nil, err
		}
		o["keys"] = keys
	}
	return o, nil
}

// openAIScroll: notches as pixels, 100 a notch, negative up and left.
func openAIScroll(r sayRun) (int, []any, error) {
	a := r.a()
	o, err := openAIAt(a, "scroll")
	if err != nil {
		return 0, nil, err
	}
	px := notchesOf(a) * ScrollPixelsPerNotch
	dx := map[string]int{"left": -px, "right": px}[a.ScrollDirection]
	dy := map[string]int{"up": -px, "down": px}[a.ScrollDirection]
	o["scroll_x"], o["scroll_y"] = dx, dy
	return 1, []any{o}, nil
}

// openAIKeys: one keypress per chord.
func openAIKeys(r sayRun) (int, []any, error) {
	var calls []any
	for _, c := range strings.Fields(r.a().Text) {
		keys, err := chordKeys(DialectOpenAI, c)
		if err != nil {
			return 0, nil, err
		}
		calls = append(calls, map[string]any{"type": "keypress", "keys": keys})
	}
	return 1, calls, nil
}

// openAIPath says a press, at least one move and a release, each at a
// point and holding nothing, as one drag along their points: the only way
// OpenAI's actions press and release the button apart.
func openAIPath(r sayRun) (int, []any, error) {
	var path []map[string]int
	for j := r.i; j < len(r.acts); j++ {
		a := r.acts[j]
		if len(a.Coordinate) != 2 || modifiers(a) != "" {
			break
		}
		if a.Action == ActLeftMouseUp && len(path) >= 2 {
			path = append(path, openAIPoint(a.Coordinate))
			return j - r.i + 1, []any{map[string]any{"type": "drag", "path": path}}, nil
		}
		want := map[bool]string{true: ActLeftMouseDown, false: ActMouseMove}[j == r.i]
		if a.Action != want {
			break
		}
		path = append(path, openAIPoint(a.Coordinate))
	}
	return 0, nil, cannot(DialectOpenAI, r.a(), "a press is said only as the start of a drag's path: a press, moves and a release, each at a point")
}
