package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/syntax"

	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/internal/wire"
)

// ModeCodeAct offers run_script: a Starlark program with every action bound
// as a function.
const ModeCodeAct Mode = "codeact"

// ScriptLimits bound one run_script call. Zero fields take the defaults.
type ScriptLimits struct {
	MaxSteps       uint64        // Starlark execution steps; default 10,000,000
	Timeout        time.Duration // wall time; default 2 minutes
	MaxOutputBytes int           // printed text; default 64 KiB
	MaxImages      int           // images attached with show; default 8
	MaxScriptBytes int           // the program's text; default 256 KiB
}

func (l ScriptLimits) withDefaults() ScriptLimits {
	if l.MaxSteps == 0 {
		l.MaxSteps = 10_000_000
	}
	if l.Timeout <= 0 {
		l.Timeout = 2 * time.Minute
	}
	if l.MaxOutputBytes <= 0 {
		l.MaxOutputBytes = 64 << 10
	}
	if l.MaxImages <= 0 {
		l.MaxImages = 8
	}
	if l.MaxScriptBytes <= 0 {
		l.MaxScriptBytes = 256 << 10
	}
	return l
}

// param is one argument of a bound function: which action field it fills and,
// for points, which element.
type param struct {
	name  string
	field string
	index int // element of a point or region; -1 for scalars
	req   bool
}

// scriptParams derives a bound function's signature from the action's tool
// definition, so the script face and the tool face cannot drift apart.
func scriptParams(sp actionSpec) []param {
	var first, rest []param
	for _, f := range sp.fields {
		switch f.name {
		case fStart:
			first = append([]param{{"x0", f.name, 0, f.required}, {"y0", f.name, 1, f.required}}, first...)
		case fCoordinate:
			if hasField(sp, fStart) {
				first = append(first, param{"x1", f.name, 0, f.required}, param{"y1", f.name, 1, f.required})
			} else {
				first = append(first, param{"x", f.name, 0, f.required}, param{"y", f.name, 1, f.required})
			}
		case fRegion:
			for i, n := range []string{"x0", "y0", "x1", "y1"} {
				first = append(first, param{n, f.name, i, f.required})
			}
		case fText:
			n := "text"
			switch {
			case sp.name == hci.ActKey || sp.name == hci.ActHoldKey:
				n = "keys"
			case f.desc == modifiersDesc:
				// On a click, drag or scroll the computer tool's text field
				// holds the modifiers.
				n = "modifiers"
			}
			rest = append(rest, param{n, f.name, -1, f.required})
		case fDirection:
			rest = append(rest, param{"direction", f.name, -1, f.required})
		case fAmount:
			rest = append(rest, param{"amount", f.name, -1, f.required})
		case fDuration:
			rest = append(rest, param{"seconds", f.name, -1, f.required})
		}
	}
	return append(first, rest...)
}

func hasField(sp actionSpec, name string) bool {
	for _, f := range sp.fields {
		if f.name == name {
			return true
		}
	}
	return false
}

func signature(name string, ps []param) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = p.name
		if !p.req {
			parts[i] += "=None"
		}
	}
	return name + "(" + strings.Join(parts, ", ") + ")"
}

// bindArgs puts a bound function's arguments, given by position or by name,
// in the order of names; an argument not given is nil.
func bindArgs(sig string, names []string, args starlark.Tuple, kw []starlark.Tuple) ([]starlark.Value, error) {
	if len(args) > len(names) {
		return nil, fmt.Errorf("%s takes at most %d arguments, got %d", sig, len(names), len(args))
	}
	vals := make([]starlark.Value, len(names))
	copy(vals, args)
	for _, kv := range kw {
		k := string(kv[0].(starlark.String))
		i := slices.Index(names, k)
		if i < 0 || vals[i] != nil {
			return nil, fmt.Errorf("%s: unexpected or repeated argument %s", sig, k)
		}
		vals[i] = kv[1]
	}
	return vals, nil
}

// scriptTool is run_script, described from the same action table.
func (s *Server) scriptTool() Tool {
	var b strings.Builder
	fmt.Fprintf(&b, "Run a Starlark program (Python-like; no imports, files or network) that drives a Linux desktop of %d x %d pixels "+
		"(coordinates in those pixels, origin top-left). Only what you print() and show() comes back, so loop, check and "+
		"filter in the script. Bound functions:\n", s.space.ModelW, s.space.ModelH)
	for _, sp := range actionSpecs() {
		ret := ""
		switch sp.name {
		case hci.ActScreenshot, hci.ActZoom:
			ret = " -> image"
		case hci.ActCursorPosition:
			ret = " -> (x, y)"
		}
		fmt.Fprintf(&b, "- %s%s: %s\n", signature(sp.name, scriptParams(sp)), ret, sp.desc)
	}
	for _, tt := range s.traitTools {
		fmt.Fprintf(&b, "- %s %s: %s\n", tt.signature(), tt.Returns, tt.Description)
	}
	b.WriteString("- screen_size() -> (w, h): the screen in the pixels coordinates use.\n")
	b.WriteString("- show(image): attach an image (from screenshot or zoom) to the result.\n")
	b.WriteString("- print(...): text for the result.\n")
	b.WriteString("Arguments can also be given by name, e.g. scroll(direction=\"down\", amount=5) scrolls where the pointer is. " +
		"Here no action (wait included) returns a screenshot: call screenshot() and show() it when you need to look.")
	return Tool{
		Name:        "run_script",
		Title:       "Run a script",
		Description: b.String(),
		Schema: mcp.ToolInputSchema{
			Type: "object",
			Properties: map[string]any{"script": map[string]any{"type": "string",
				"description": "The Starlark program."}},
			Required: []string{"script"}, AdditionalProperties: false,
		},
		Annotations: annotations(false, true, false),
		Handler:     s.handleScript,
	}
}

// imageValue is a picture a script holds: a screenshot or zoom crop.
type imageValue struct {
	content mcp.ImageContent
	w, h    int
}

func (v *imageValue) String() string        { return fmt.Sprintf("<image %dx%d>", v.w, v.h) }
func (v *imageValue) Type() string          { return "image" }
func (v *imageValue) Freeze()               {}
func (v *imageValue) Truth() starlark.Bool  { return true }
func (v *imageValue) Hash() (uint32, error) { return 0, errors.New("image is not hashable") }
func (v *imageValue) AttrNames() []string   { return []string{"height", "width"} }
func (v *imageValue) Attr(name string) (starlark.Value, error) {
	switch name {
	case "width":
		return starlark.MakeInt(v.w), nil
	case "height":
		return starlark.MakeInt(v.h), nil
	}
	return nil, nil
}

// scriptRun is the state of one run_script call.
type scriptRun struct {
	s      *Server
	ctx    context.Context
	lim    ScriptLimits
	out    strings.Builder
	images []mcp.Content
	dirty  bool   // a mutating action ran since the last screenshot
	stop   string // why the run was cut short by a limit, if it was
}

func (s *Server) handleScript(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	raw, err := rawArguments(req)
	if err != nil {
		return toolError(fmt.Errorf("run_script: %w", err)), nil
	}
	var args struct {
		Script *string `json:"script"`
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&args); err != nil || args.Script == nil {
		return toolError(errors.New(`run_script takes one argument, "script": the Starlark program as a string`)), nil
	}
	return s.RunScript(ctx, *args.Script), nil
}

// RunScript runs a Starlark program with the desktop's actions bound, as
// source "script" on the hci bus. Errors and limits come back as tool errors
// carrying the output printed so far.
func (s *Server) RunScript(ctx context.Context, src string) (res *mcp.CallToolResult) {
	lim := s.cfg.Script.withDefaults()
	if len(src) > lim.MaxScriptBytes {
		// Parsing is not bounded by the step limit: refuse before it.
		return toolError(fmt.Errorf("run_script: the script is %d bytes, more than %d; loop in the script instead of spelling every step out", len(src), lim.MaxScriptBytes))
	}
	ctx, cancel := context.WithTimeout(ctx, lim.Timeout)
	defer cancel()
	r := &scriptRun{s: s, ctx: ctx, lim: lim}
	th := &starlark.Thread{Name: "run_script"}
	th.SetMaxExecutionSteps(lim.MaxSteps)
	th.Print = r.print(th)
	th.Load = func(*starlark.Thread, string) (starlark.StringDict, error) {
		return nil, errors.New("load is not available in run_script: every function is already bound, nothing can be imported")
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			th.Cancel("wall time")
		case <-done:
		}
	}()
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("run_script panicked", "panic", p)
			res = r.result(fmt.Errorf("internal error in run_script: %v", p))
		}
	}()
	opts := &syntax.FileOptions{Set: true, While: true, TopLevelControl: true, GlobalReassign: true}
	_, err := starlark.ExecFileOptions(opts, th, "script", src, r.builtins())
	if err == nil {
		return r.result(nil)
	}
	switch {
	case r.stop != "":
		err = errors.New(r.stop)
	case ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		err = fmt.Errorf("the script ran past its wall time of %s and was stopped", lim.Timeout)
	case strings.Contains(err.Error(), "too many steps"):
		err = fmt.Errorf("the script ran more than %d Starlark steps and was stopped (an endless loop?)", lim.MaxSteps)
	default:
		var ee *starlark.EvalError
		if errors.As(err, &ee) {
			err = errors.New(ee.Backtrace())
		}
	}
	return r.result(err)
}

func (r *scriptRun) result(err error) *mcp.CallToolResult {
	var content []mcp.Content
	text := r.out.String()
	if err != nil {
		msg := "run_script stopped: " + err.Error()
		if text != "" {
			msg += "\n--- output before it stopped ---\n" + text
		} else {
			msg += "\n(no output before it stopped)"
		}
		content = append(content, mcp.NewTextContent(msg))
	} else if text != "" {
		content = append(content, mcp.NewTextContent(text))
	}
	content = append(content, r.images...)
	if len(content) == 0 {
		content = append(content, mcp.NewTextContent("done (the script printed nothing)"))
	}
	return &mcp.CallToolResult{Content: content, IsError: err != nil}
}

func (r *scriptRun) print(th *starlark.Thread) func(*starlark.Thread, string) {
	return func(_ *starlark.Thread, msg string) {
		if r.stop != "" {
			return
		}
		room := r.lim.MaxOutputBytes - r.out.Len()
		if len(msg)+1 > room {
			r.out.WriteString(msg[:max(0, min(len(msg), room))])
			r.stop = fmt.Sprintf("the script printed more than %d bytes and was stopped", r.lim.MaxOutputBytes)
			th.Cancel("output limit")
			return
		}
		r.out.WriteString(msg)
		r.out.WriteByte('\n')
	}
}

func (r *scriptRun) builtins() starlark.StringDict {
	d := starlark.StringDict{}
	for _, sp := range actionSpecs() {
		d[sp.name] = starlark.NewBuiltin(sp.name, r.action(sp, scriptParams(sp)))
	}
	for _, tt := range r.s.traitTools {
		d[tt.Name] = starlark.NewBuiltin(tt.Name, r.trait(tt))
	}
	d["screen_size"] = starlark.NewBuiltin("screen_size", func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
		if err := starlark.UnpackArgs(b.Name(), args, kw); err != nil {
			return nil, err
		}
		sp := r.s.exec.Space()
		return starlark.Tuple{starlark.MakeInt(sp.ModelW), starlark.MakeInt(sp.ModelH)}, nil
	})
	d["show"] = starlark.NewBuiltin("show", func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
		var v starlark.Value
		if err := starlark.UnpackArgs(b.Name(), args, kw, "image", &v); err != nil {
			return nil, err
		}
		img, ok := v.(*imageValue)
		if !ok {
			return nil, fmt.Errorf("show: wants an image from screenshot() or zoom(), got %s", v.Type())
		}
		if len(r.images) >= r.lim.MaxImages {
			return nil, fmt.Errorf("show: a script can attach at most %d images", r.lim.MaxImages)
		}
		r.images = append(r.images, img.content)
		return starlark.None, nil
	})
	return d
}

// action is the bound function of one action: its arguments become the
// computer tool's input, which runs through hci like any tool call.
func (r *scriptRun) action(sp actionSpec, ps []param) func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
	sig := signature(sp.name, ps)
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.name
	}
	return func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
		vals, err := bindArgs(sig, names, args, kw)
		if err != nil {
			return nil, err
		}
		fields := map[string]any{fAction: sp.name}
		points := map[string][]int{}
		for i, p := range ps {
			v := vals[i]
			if v == nil || v == starlark.None {
				if p.req {
					return nil, fmt.Errorf("%s: missing %s", sig, p.name)
				}
				continue
			}
			if p.index < 0 {
				if fields[p.field], err = scalarValue(sig, p, v); err != nil {
					return nil, err
				}
				continue
			}
			if err := setPoint(points, sig, p, v); err != nil {
				return nil, err
			}
		}
		if err := putPoints(fields, points, sig); err != nil {
			return nil, err
		}
		return r.do(sp.name, fields)
	}
}

// setPoint puts a script's integer in its element of a point or region.
func setPoint(points map[string][]int, sig string, p param, v starlark.Value) error {
	n, err := starlark.AsInt32(v)
	if err != nil {
		return fmt.Errorf("%s: %s must be an integer pixel, got %s", sig, p.name, v.Type())
	}
	pt := points[p.field]
	for len(pt) <= p.index {
		pt = append(pt, unset)
	}
	pt[p.index] = n
	points[p.field] = pt
	return nil
}

// putPoints puts the points and regions a script gave into fields, once
// each has all its numbers.
func putPoints(fields map[string]any, points map[string][]int, sig string) error {
	for f, pt := range points {
		want := 2
		if f == fRegion {
			want = 4
		}
		if len(pt) != want || slices.Contains(pt, unset) {
			return fmt.Errorf("%s: give all %d numbers of %s or none", sig, want, f)
		}
		fields[f] = pt
	}
	return nil
}

// scalarValue is a script's value for a scalar action field, as it goes
// into JSON for hci.ParseAction. It checks here what JSON would hide (a
// string of invalid UTF-8 would become U+FFFD, an Int past 64 bits 0) or
// cannot carry (NaN, Inf).
func scalarValue(sig string, p param, v starlark.Value) (any, error) {
	switch x := v.(type) {
	case starlark.String:
		if err := wire.CheckString(string(x)); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", sig, p.name, err)
		}
		return string(x), nil
	case starlark.Int:
		n, ok := x.Int64()
		if !ok || n < math.MinInt32 || n > math.MaxInt32 {
			return nil, fmt.Errorf("%s: %s is %s, out of range", sig, p.name, wire.Prefix(x.String(), 40))
		}
		return n, nil
	case starlark.Float:
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("%s: %s must be a finite number, got %v", sig, p.name, f)
		}
		return f, nil
	}
	return nil, fmt.Errorf("%s: %s cannot be a %s", sig, p.name, v.Type())
}

// unset marks a point element the script did not give.
const unset = math.MinInt

func (r *scriptRun) do(name string, fields map[string]any) (starlark.Value, error) {
	s := r.s
	raw, err := json.Marshal(fields)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	a, err := s.parseAction(raw)
	if err != nil {
		return nil, err
	}
	out, err := s.exec.Do(r.ctx, a, hci.SourceScript)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if a.Mutates() {
		r.dirty = true
	}
	switch name {
	case hci.ActCursorPosition:
		var x, y int
		if _, err := fmt.Sscanf(out.Text, "X=%d,Y=%d", &x, &y); err != nil {
			return nil, fmt.Errorf("cursor_position: unreadable answer %q", out.Text)
		}
		return starlark.Tuple{starlark.MakeInt(x), starlark.MakeInt(y)}, nil
	case hci.ActScreenshot, hci.ActZoom:
		if out.Zoom == nil && r.dirty {
			out.Settle = true
		}
		c, err := s.observe(r.ctx, out)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		r.dirty = false
		ic := c.(mcp.ImageContent)
		sp := s.exec.Space()
		w, h := sp.ModelW, sp.ModelH
		if out.Zoom != nil {
			w, h = out.Zoom.Dx(), out.Zoom.Dy()
		}
		return &imageValue{content: ic, w: w, h: h}, nil
	}
	return starlark.None, nil
}

// trait is the bound function of a trait tool: arguments by position in the
// tool's parameter order or by name, checked against the same types as the
// tool's schema.
func (r *scriptRun) trait(tt TraitTool) func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
	sig := tt.signature()
	names := make([]string, len(tt.Params))
	for i, p := range tt.Params {
		names[i] = p.Name
	}
	return func(_ *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
		vals, err := bindArgs(sig, names, args, kw)
		if err != nil {
			return nil, err
		}
		a := TraitArgs{}
		for i, p := range tt.Params {
			v := vals[i]
			if v == nil || v == starlark.None {
				continue
			}
			if a[p.Name], err = p.Type.fromStarlark(v); err != nil {
				return nil, fmt.Errorf("%s: %s %w", sig, p.Name, err)
			}
		}
		if err := tt.checkRequired(a); err != nil {
			return nil, err
		}
		res, err := r.s.runTrait(r.ctx, tt, a)
		if err != nil {
			return nil, err
		}
		return toStarlark(res.Value), nil
	}
}

// toStarlark converts a trait's result: objects become structs, so a script
// writes r.exit_code rather than r["exit_code"].
func toStarlark(v any) starlark.Value {
	switch x := v.(type) {
	case nil:
		return starlark.None
	case string:
		return starlark.String(x)
	case int64:
		return starlark.MakeInt64(x)
	case bool:
		return starlark.Bool(x)
	case []any:
		l := make([]starlark.Value, len(x))
		for i, e := range x {
			l[i] = toStarlark(e)
		}
		return starlark.NewList(l)
	case map[string]any:
		d := starlark.StringDict{}
		for k, e := range x {
			d[k] = toStarlark(e)
		}
		return starlarkstruct.FromStringDict(starlarkstruct.Default, d)
	}
	return starlark.String(fmt.Sprint(v))
}
