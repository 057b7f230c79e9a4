package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/deskenv/deskenv/internal/wire"
)

// Traits are optional tool groups beyond the screen, keyboard and mouse. Each
// is off unless configured: a deployment that wants its agent to see only the
// screen gets exactly that.
//
// Trait tools are listed as MCP tools when the computer or tools mode is on,
// and are bound as functions in run_script in every mode. They are not
// desktop input, so they are not published on the hci bus; each call is
// logged.
type Traits struct {
	// Bash adds bash: run a shell command as the desktop user.
	Bash *BashTrait
	// Files adds read_file, write_file and list_files inside the desktop
	// user's home.
	Files *FilesTrait
	// Clipboard adds clipboard_get and clipboard_set on the desktop's
	// CLIPBOARD selection.
	Clipboard Clipboard
}

// check refuses a trait configuration that could only fail at the first call.
func (t Traits) check() error {
	if t.Bash != nil {
		b := t.Bash.withDefaults()
		if _, err := exec.LookPath(b.Shell); err != nil {
			return fmt.Errorf("mcpserver: the bash trait's shell: %w", err)
		}
		if err := isDir(b.Dir); b.Dir != "" && err != nil {
			return fmt.Errorf("mcpserver: the bash trait's working directory: %w", err)
		}
	}
	if t.Files != nil {
		if !filepath.IsAbs(t.Files.Home) {
			return fmt.Errorf("mcpserver: the files trait's home %q must be an absolute path", t.Files.Home)
		}
		if err := isDir(t.Files.Home); err != nil {
			return fmt.Errorf("mcpserver: the files trait's home: %w", err)
		}
	}
	return nil
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

// Clipboard reads and sets the text of the desktop's clipboard. The
// appliance gives it an xsel.Clipboard (internal/xsel), the one clipboard
// owner the stream uses too.
type Clipboard interface {
	ReadClipboard(ctx context.Context) (string, error)
	WriteClipboard(ctx context.Context, text string) error
}

// traitParam is one argument of a trait tool, in the order a script passes
// it positionally.
type traitParam struct {
	name     string
	typ      string // JSON Schema type: string, integer or boolean
	desc     string
	required bool
}

// traitSpec is one trait tool, defined once for both faces: MCP (schema,
// handler) and run_script (bound function).
type traitSpec struct {
	name, title, desc string
	params            []traitParam
	returns           string // for run_script's description, e.g. "-> str"
	readOnly          bool
	destructive       bool
	idempotent        bool
	run               func(ctx context.Context, args traitArgs) (traitResult, error)
}

// traitArgs are checked arguments: string, int64 or bool by the param's type;
// absent optional params are missing from the map.
type traitArgs map[string]any

func (a traitArgs) str(name string) string {
	s, _ := a[name].(string)
	return s
}

func (a traitArgs) num(name string) (int64, bool) {
	n, ok := a[name].(int64)
	return n, ok
}

func (a traitArgs) flag(name string) bool {
	b, _ := a[name].(bool)
	return b
}

// traitResult is what a trait tool gives back: value for scripts (string,
// int64, bool, []any, or map[string]any, which becomes a struct) and text
// for the model.
type traitResult struct {
	value any
	text  string
}

// traitSpecs are the enabled trait tools, in tools/list order.
func (s *Server) traitSpecs() []traitSpec {
	var out []traitSpec
	t := s.cfg.Traits
	if t.Bash != nil {
		out = append(out, bashSpec(t.Bash))
	}
	if t.Files != nil {
		out = append(out, filesSpecs(t.Files)...)
	}
	if t.Clipboard != nil {
		out = append(out, clipboardSpecs(t.Clipboard)...)
	}
	return out
}

// traitTools are the trait tools as MCP tools.
func (s *Server) traitTools() []Tool {
	specs := s.traitSpecs()
	tools := make([]Tool, len(specs))
	for i, sp := range specs {
		props := map[string]any{}
		var req []string
		for _, p := range sp.params {
			props[p.name] = map[string]any{"type": p.typ, "description": p.desc}
			if p.required {
				req = append(req, p.name)
			}
		}
		tools[i] = Tool{
			Name: sp.name, Title: sp.title, Description: sp.desc,
			Schema:      mcp.ToolInputSchema{Type: "object", Properties: props, Required: req, AdditionalProperties: false},
			Annotations: annotations(sp.readOnly, sp.destructive, sp.idempotent),
			Handler:     s.traitHandler(sp),
		}
	}
	return tools
}

func (s *Server) traitHandler(sp traitSpec) func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		raw, err := rawArguments(req)
		if err != nil {
			return toolError(fmt.Errorf("%s: %w", sp.name, err)), nil
		}
		args, err := sp.parseJSON(raw)
		if err != nil {
			return toolError(err), nil
		}
		res, err := s.runTrait(ctx, sp, args)
		if err != nil {
			return toolError(err), nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(res.text)}}, nil
	}
}

// runTrait runs one trait call and logs it: trait calls are not on the hci
// bus, so the log is where an operator finds them. Commands and failures at
// info; file and clipboard calls, which a script may make by the hundred, at
// debug.
func (s *Server) runTrait(ctx context.Context, sp traitSpec, args traitArgs) (traitResult, error) {
	// A script's strings are Go strings as the script built them, and
	// Starlark indexes bytes ('é'[0] is half a character): check them here,
	// as rawArguments checks JSON.
	for _, k := range slices.Sorted(maps.Keys(args)) {
		if str, ok := args[k].(string); ok {
			if err := wire.CheckString(str); err != nil {
				return traitResult{}, fmt.Errorf("%s: %s: %w", sp.name, k, err)
			}
		}
	}
	res, err := sp.run(ctx, args)
	attrs := []any{"tool", sp.name}
	if c := args.str("command"); c != "" {
		attrs = append(attrs, "command", truncate(c, 200))
	}
	switch {
	case err != nil:
		s.log.Info("trait tool failed", append(attrs, "err", err)...)
	case sp.name == "bash":
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
func (sp traitSpec) parseJSON(raw json.RawMessage) (traitArgs, error) {
	var m map[string]json.RawMessage
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("%s: the arguments must be a JSON object: %w", sp.name, err)
		}
	}
	args := traitArgs{}
	for k, v := range m {
		p, ok := sp.param(k)
		if !ok {
			return nil, fmt.Errorf("%s: unknown argument %s; it takes %s", sp.name, wire.Quote(k), sp.paramList())
		}
		if string(v) == "null" {
			continue
		}
		var err error
		switch p.typ {
		case "string":
			var x string
			err = json.Unmarshal(v, &x)
			args[k] = x
		case "integer":
			var x int64
			err = json.Unmarshal(v, &x)
			args[k] = x
		case "boolean":
			var x bool
			err = json.Unmarshal(v, &x)
			args[k] = x
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %q must be a%s %s, got %s", sp.name, k, article(p.typ), p.typ, truncateJSON(v))
		}
	}
	return args, sp.checkRequired(args)
}

func article(typ string) string {
	if typ == "integer" {
		return "n"
	}
	return ""
}

func (sp traitSpec) param(name string) (traitParam, bool) {
	for _, p := range sp.params {
		if p.name == name {
			return p, true
		}
	}
	return traitParam{}, false
}

func (sp traitSpec) checkRequired(args traitArgs) error {
	for _, p := range sp.params {
		if _, ok := args[p.name]; p.required && !ok {
			return fmt.Errorf("%s: missing %q (%s)", sp.name, p.name, p.desc)
		}
	}
	return nil
}

func (sp traitSpec) paramList() string {
	if len(sp.params) == 0 {
		return "no arguments"
	}
	names := make([]string, len(sp.params))
	for i, p := range sp.params {
		names[i] = p.name
	}
	return strings.Join(names, ", ")
}

// signature is the bound function as run_script's description shows it,
// written as the actions' are.
func (sp traitSpec) signature() string {
	ps := make([]param, len(sp.params))
	for i, p := range sp.params {
		ps[i] = param{name: p.name, req: p.required}
	}
	return signature(sp.name, ps)
}

// clipboardSpecs are clipboard_get and clipboard_set.
func clipboardSpecs(c Clipboard) []traitSpec {
	return []traitSpec{
		{
			name: "clipboard_get", title: "Read the clipboard", readOnly: true, idempotent: true,
			desc:    "Read the text on the desktop's clipboard (what ctrl+v would paste). Empty when nothing holds it.",
			returns: "-> str",
			run: func(ctx context.Context, _ traitArgs) (traitResult, error) {
				text, err := c.ReadClipboard(ctx)
				if err != nil {
					return traitResult{}, fmt.Errorf("clipboard_get: %w", err)
				}
				// An app on the desktop may hold bytes that are not UTF-8;
				// JSON would hand the model U+FFFD in their place.
				if err := wire.CheckString(text); err != nil {
					return traitResult{}, fmt.Errorf("clipboard_get: the clipboard holds %d bytes that are not UTF-8 text: %w", len(text), err)
				}
				return traitResult{value: text, text: text}, nil
			},
		},
		{
			name: "clipboard_set", title: "Set the clipboard", idempotent: true,
			desc: "Put text on the desktop's clipboard, so ctrl+v in an app pastes it (faster than typing long text).",
			params: []traitParam{
				{name: "text", typ: "string", required: true, desc: "The text to put on the clipboard."},
			},
			run: func(ctx context.Context, a traitArgs) (traitResult, error) {
				text := a.str("text")
				if err := c.WriteClipboard(ctx, text); err != nil {
					return traitResult{}, fmt.Errorf("clipboard_set: %w", err)
				}
				return traitResult{value: nil, text: fmt.Sprintf("the clipboard now holds %d bytes of text", len(text))}, nil
			},
		},
	}
}
