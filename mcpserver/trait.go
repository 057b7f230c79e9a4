package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"go.starlark.net/starlark"

	"github.com/deskenv/deskenv/internal/wire"
)

// Trait is an optional tool group beyond the screen, keyboard and mouse:
// bash (BashTrait), files (FilesTrait), the clipboard (ClipboardTrait), or
// one a caller writes. Config.Traits lists the enabled ones; none is on
// unless listed, so a deployment that wants its agent to see only the
// screen gets exactly that.
//
// A trait's tools are listed as MCP tools when the computer or tools mode
// is on, and are bound as functions in run_script in every mode; both faces
// are built from the same TraitTool, so a parameter or a check is written
// once. They are not desktop input, so they are not published on the hci
// bus; each call is logged.
type Trait interface {
	// Name names the trait (as the appliance's --mcp-traits does); it is
	// unique among a server's traits.
	Name() string
	// Check refuses a configuration that could only fail at the first call
	// (a missing shell, a home that is not a directory). New calls it once.
	Check() error
	// Tools are the trait's tools, in tools/list order. New calls it once,
	// after Check.
	Tools() []TraitTool
}

// ParamType is the JSON Schema type of a trait tool's parameter.
type ParamType string

// The types a trait tool's parameter can have, and what TraitArgs holds for
// each: string, int64, bool.
const (
	ParamString  ParamType = "string"
	ParamInteger ParamType = "integer"
	ParamBoolean ParamType = "boolean"
)

// TraitParam is one argument of a trait tool, in the order a script passes
// it positionally.
type TraitParam struct {
	Name        string
	Type        ParamType
	Description string
	Required    bool
}

// TraitTool is one trait tool, defined once for both faces: MCP (a schema
// built from Params, a handler around Run) and run_script (a bound function
// with the same parameters).
type TraitTool struct {
	Name, Title, Description string
	Params                   []TraitParam
	// Returns is what the bound function gives a script, for run_script's
	// description ("-> str").
	Returns string
	// The MCP behaviour hints.
	ReadOnly, Destructive, Idempotent bool
	// Loud logs every call at info rather than debug: a shell command is
	// worth an operator's eye, a file read a script makes by the hundred is
	// not.
	Loud bool
	// LogArg names the argument logged with each call (bash's command),
	// cut to 200 bytes; empty for none.
	LogArg string
	// Run runs one call. Its arguments are checked against Params first: no
	// unknown ones, every required one present, each of its type, strings
	// valid UTF-8. A failure is an error worded for the model.
	Run func(ctx context.Context, args TraitArgs) (TraitResult, error)
}

// TraitArgs are a call's checked arguments: a string, int64 or bool by the
// param's type; absent optional params are missing from the map.
type TraitArgs map[string]any

// Str is the string argument name, or "" when absent.
func (a TraitArgs) Str(name string) string {
	s, _ := a[name].(string)
	return s
}

// Int is the integer argument name and whether it was given.
func (a TraitArgs) Int(name string) (int64, bool) {
	n, ok := a[name].(int64)
	return n, ok
}

// Bool is the boolean argument name, false when absent.
func (a TraitArgs) Bool(name string) bool {
	b, _ := a[name].(bool)
	return b
}

// TraitResult is what a trait tool gives back: Value for scripts (nil,
// string, int64, bool, []any, or map[string]any, which becomes a struct) and
// Text for the model.
type TraitResult struct {
	Value any
	Text  string
}

func isDir(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", p)
	}
	return nil
}

// identifier is what a trait or tool name, and a parameter's, must be: a
// script calls the tool by that name and passes arguments by those.
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// builtinNames are the names a trait tool cannot take: the server's own
// tools and run_script's own functions (the actions, screen_size, show,
// print and Starlark's universe), which a trait tool would shadow.
func builtinNames() []string {
	names := []string{"computer", "run_script", "find_tools", "call_tool", "screen_size", "show", "print"}
	for _, sp := range actionSpecs() {
		names = append(names, sp.name)
	}
	names = append(names, dialectToolNames()...)
	return append(names, slices.Collect(maps.Keys(starlark.Universe))...)
}

// traitTools checks the configured traits and gathers their tools, in the
// order the traits were listed: a nil trait, a name given twice (trait or
// tool), a tool that takes a built-in or reserved name, or a tool a script
// could not call is refused here rather than at the first call.
func traitTools(traits []Trait) ([]TraitTool, error) {
	var out []TraitTool
	seen := map[string]string{} // tool name -> its trait
	for _, n := range builtinNames() {
		seen[n] = "the server"
	}
	traitSeen := map[string]bool{}
	for i, tr := range traits {
		if tr == nil {
			return nil, fmt.Errorf("mcpserver: trait %d of %d is nil", i+1, len(traits))
		}
		name := tr.Name()
		if !identifier.MatchString(name) {
			return nil, fmt.Errorf("mcpserver: trait name %s: use letters, digits and _ (at most 64)", wire.Quote(name))
		}
		if traitSeen[name] {
			return nil, fmt.Errorf("mcpserver: the %s trait is listed twice", name)
		}
		traitSeen[name] = true
		if err := tr.Check(); err != nil {
			return nil, err
		}
		for _, tt := range tr.Tools() {
			if err := tt.check(); err != nil {
				return nil, fmt.Errorf("mcpserver: the %s trait's tool %s: %w", name, wire.Quote(tt.Name), err)
			}
			if owner, ok := seen[tt.Name]; ok {
				return nil, fmt.Errorf("mcpserver: the %s trait's tool %s: %s has a tool of that name", name, tt.Name, owner)
			}
			if reservedName(tt.Name) {
				return nil, fmt.Errorf("mcpserver: the %s trait's tool %s: the name is reserved by OpenEnv", name, tt.Name)
			}
			seen[tt.Name] = "the " + name + " trait"
			out = append(out, tt)
		}
	}
	return out, nil
}

// check refuses a tool definition that could not be listed or called.
func (tt TraitTool) check() error {
	if !identifier.MatchString(tt.Name) {
		return errors.New("a tool name is letters, digits and _ (at most 64), as a script calls it")
	}
	if tt.Run == nil {
		return errors.New("it has no Run")
	}
	var names []string
	for _, p := range tt.Params {
		switch {
		case !identifier.MatchString(p.Name):
			return fmt.Errorf("parameter %s: a name is letters, digits and _ (at most 64)", wire.Quote(p.Name))
		case slices.Contains(names, p.Name):
			return fmt.Errorf("parameter %s is given twice", p.Name)
		case p.Type != ParamString && p.Type != ParamInteger && p.Type != ParamBoolean:
			return fmt.Errorf("parameter %s: type %s: use %s, %s or %s", p.Name, wire.Quote(string(p.Type)), ParamString, ParamInteger, ParamBoolean)
		}
		names = append(names, p.Name)
	}
	return nil
}

// traitMCPTools are the trait tools as MCP tools.
func (s *Server) traitMCPTools() []Tool {
	tools := make([]Tool, len(s.traitTools))
	for i, tt := range s.traitTools {
		props := map[string]any{}
		var req []string
		for _, p := range tt.Params {
			props[p.Name] = map[string]any{"type": string(p.Type), "description": p.Description}
			if p.Required {
				req = append(req, p.Name)
			}
		}
		tools[i] = Tool{
			Name: tt.Name, Title: tt.Title, Description: tt.Description,
			Schema:      mcp.ToolInputSchema{Type: "object", Properties: props, Required: req, AdditionalProperties: false},
			Annotations: annotations(tt.ReadOnly, tt.Destructive, tt.Idempotent),
			Handler:     s.traitHandler(tt),
		}
	}
	return tools
}

func (s *Server) traitHandler(tt TraitTool) func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		raw, err := rawArguments(req)
		if err != nil {
			return toolError(fmt.Errorf("%s: %w", tt.Name, err)), nil
		}
		args, err := tt.parseJSON(raw)
		if err != nil {
			return toolError(err), nil
		}
		res, err := s.runTrait(ctx, tt, args)
		if err != nil {
			return toolError(err), nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(res.Text)}}, nil
	}
}

// runTrait runs one trait call and logs it: trait calls are not on the hci
// bus, so the log is where an operator finds them. Loud tools and failures
// at info, the rest at debug.
func (s *Server) runTrait(ctx context.Context, tt TraitTool, args TraitArgs) (TraitResult, error) {
	// A script's strings are Go strings as the script built them, and
	// Starlark indexes bytes ('é'[0] is half a character): check them here,
	// as rawArguments checks JSON.
	for _, k := range slices.Sorted(maps.Keys(args)) {
		if str, ok := args[k].(string); ok {
			if err := wire.CheckString(str); err != nil {
				return TraitResult{}, fmt.Errorf("%s: %s: %w", tt.Name, k, err)
			}
		}
	}
	res, err := tt.Run(ctx, args)
	attrs := []any{"tool", tt.Name}
	if c := args.Str(tt.LogArg); tt.LogArg != "" && c != "" {
		attrs = append(attrs, tt.LogArg, truncate(c, 200))
	}
	switch {
	case err != nil:
		s.log.Info("trait tool failed", append(attrs, "err", err)...)
	case tt.Loud:
		s.log.Info("trait tool", attrs...)
	default:
		s.log.Debug("trait tool", attrs...)
	}
	return res, err
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "..."
}

// parseJSON checks a call's arguments against the tool's params: no unknown
// fields, every required one present, each of its declared type.
func (tt TraitTool) parseJSON(raw json.RawMessage) (TraitArgs, error) {
	var m map[string]json.RawMessage
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("%s: the arguments must be a JSON object: %w", tt.Name, err)
		}
	}
	args := TraitArgs{}
	for k, v := range m {
		p, ok := tt.param(k)
		if !ok {
			return nil, fmt.Errorf("%s: unknown argument %s; it takes %s", tt.Name, wire.Quote(k), tt.paramList())
		}
		if string(v) == "null" {
			continue
		}
		x, err := p.Type.fromJSON(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %q must be a%s %s, got %s", tt.Name, k, article(p.Type), p.Type, truncateJSON(v))
		}
		args[k] = x
	}
	return args, tt.checkRequired(args)
}

// fromJSON decodes v as a value of type t.
func (t ParamType) fromJSON(v json.RawMessage) (any, error) {
	switch t {
	case ParamString:
		var x string
		err := json.Unmarshal(v, &x)
		return x, err
	case ParamInteger:
		var x int64
		err := json.Unmarshal(v, &x)
		return x, err
	case ParamBoolean:
		var x bool
		err := json.Unmarshal(v, &x)
		return x, err
	}
	return nil, fmt.Errorf("unknown parameter type %q", t) // refused at New
}

// fromStarlark converts a script's value to type t, or says what it got.
func (t ParamType) fromStarlark(v starlark.Value) (any, error) {
	switch t {
	case ParamString:
		if str, ok := starlark.AsString(v); ok {
			return str, nil
		}
		return nil, fmt.Errorf("must be a string, got %s", v.Type())
	case ParamInteger:
		n, err := starlark.AsInt32(v)
		if err != nil {
			return nil, fmt.Errorf("must be an integer, got %s", v.Type())
		}
		return int64(n), nil
	case ParamBoolean:
		if b, ok := v.(starlark.Bool); ok {
			return bool(b), nil
		}
		return nil, fmt.Errorf("must be True or False, got %s", v.Type())
	}
	return nil, fmt.Errorf("unknown parameter type %q", t) // refused at New
}

func article(typ ParamType) string {
	if typ == ParamInteger {
		return "n"
	}
	return ""
}

func (tt TraitTool) param(name string) (TraitParam, bool) {
	for _, p := range tt.Params {
		if p.Name == name {
			return p, true
		}
	}
	return TraitParam{}, false
}

func (tt TraitTool) checkRequired(args TraitArgs) error {
	for _, p := range tt.Params {
		if _, ok := args[p.Name]; p.Required && !ok {
			return fmt.Errorf("%s: missing %q (%s)", tt.Name, p.Name, p.Description)
		}
	}
	return nil
}

func (tt TraitTool) paramList() string {
	if len(tt.Params) == 0 {
		return "no arguments"
	}
	names := make([]string, len(tt.Params))
	for i, p := range tt.Params {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}

// signature is the bound function as run_script's description shows it,
// written as the actions' are.
func (tt TraitTool) signature() string {
	ps := make([]param, len(tt.Params))
	for i, p := range tt.Params {
		ps[i] = param{name: p.Name, req: p.Required}
	}
	return signature(tt.Name, ps)
}
