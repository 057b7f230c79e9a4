package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/internal/wire"
)

// Dialects are other models' computer tools spoken natively (docs/DIALECTS.md):
// OpenAI's computer-use action objects (ModeOpenAI, dialect_openai.go),
// Gemini's computer-use functions (ModeGemini, dialect_gemini.go) and the
// pyautogui code open models write (ModePyAutoGUI, dialect_pyautogui.go).
// Each translates its input into canonical actions (the computer tool's
// input, hci.Action) and runs them here, through the computer tool's own
// parsing and hci.Executor.Do as the agent, so validation, the bus, the
// recorder and the gates see exactly what an Anthropic agent's call would
// have produced.

// The dialect modes.
const (
	ModeOpenAI    Mode = "openai"
	ModeGemini    Mode = "gemini"
	ModePyAutoGUI Mode = "pyautogui"
)

// step is one canonical action as the computer tool's JSON input: a map
// rather than an hci.Action so that what a dialect says goes through
// hci.ParseAction exactly as a computer tool call would (an empty type
// text included).
type step map[string]any

func (st step) name() string { s, _ := st[fAction].(string); return s }

// maxSteps bounds the canonical actions of one dialect call (an OpenAI
// batch, a pyautogui program's calls), so one call cannot hold the desktop
// for ever.
const maxSteps = 200

// checkSteps parses and validates every step before any runs: a batch with
// one bad action does nothing, and says which.
func (s *Server) checkSteps(steps []step) ([]hci.Action, error) {
	if len(steps) > maxSteps {
		return nil, fmt.Errorf("%d actions in one call; at most %d, split them over several calls", len(steps), maxSteps)
	}
	out := make([]hci.Action, len(steps))
	for i, st := range steps {
		a, err := s.checkStep(st)
		if err != nil {
			if len(steps) == 1 {
				return nil, err
			}
			return nil, fmt.Errorf("action %d of %d (%s): %w; nothing was done", i+1, len(steps), st.name(), err)
		}
		out[i] = a
	}
	return out, nil
}

// checkStep parses one step as the computer tool parses its input.
func (s *Server) checkStep(st step) (hci.Action, error) {
	raw, err := json.Marshal(st)
	if err != nil {
		return hci.Action{}, fmt.Errorf("%s: %w", st.name(), err)
	}
	return s.parseAction(raw)
}

// runSteps runs a dialect call's canonical actions in order as the agent,
// marked as said in dialect (hci.WithVia), then answers as the dialects
// expect: with a screenshot taken once the screen has settled. A step that
// fails stops the rest; the error says which ran, and a left button a
// failed drag left pressed is released.
func (s *Server) runSteps(ctx context.Context, dialect Mode, tool string, steps []step) (res *mcp.CallToolResult) {
	ctx = hci.WithVia(ctx, string(dialect))
	start := time.Now()
	defer func() {
		// A bug in a translation must cost the model one call, not the server.
		if r := recover(); r != nil {
			s.log.Error("mcp tool call panicked", "tool", tool, "panic", r)
			res = toolError(fmt.Errorf("internal error in %s: %v", tool, r))
		}
		s.log.Debug("mcp tool call", "tool", tool, "actions", len(steps), "error", res.IsError, "took", time.Since(start))
	}()
	actions, err := s.checkSteps(steps)
	if err != nil {
		return toolError(fmt.Errorf("%s: %w", tool, err))
	}
	var last hci.Result
	var texts []string
	settle := false
	for i, a := range actions {
		out, err := s.exec.Do(ctx, a, hci.SourceAgent)
		if err != nil {
			s.releaseButton(dialect, actions[:i])
			return toolError(stepError(tool, i, actions, err))
		}
		settle = settle || a.Mutates()
		if out.Text != "" {
			texts = append(texts, out.Text)
		}
		last = out
	}
	if dialect == ModeGemini {
		texts = append(texts, s.pageURL(ctx)...)
	}
	return s.answer(ctx, tool, texts, last, settle)
}

// pageURL is Gemini's current URL as a text item, {"url": "..."}, when the
// desktop's browser is known (Config.Page); none otherwise. The URL is read
// before the screenshot, after the actions: what the model sees next.
func (s *Server) pageURL(ctx context.Context) []string {
	if s.cfg.Page == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	u, err := s.cfg.Page.PageURL(ctx)
	if err != nil {
		s.log.Debug("no current URL for the Gemini answer", "err", err)
		return nil
	}
	b, err := wire.Marshal(map[string]string{"url": u})
	if err != nil {
		return nil
	}
	return []string{string(b)}
}

// stepError says which step failed and what had been done before it, so the
// model neither repeats nor skips what ran.
func stepError(tool string, i int, actions []hci.Action, err error) error {
	if len(actions) == 1 {
		return fmt.Errorf("%s: %w", tool, err)
	}
	done := "nothing before it was done"
	if i > 0 {
		names := make([]string, i)
		for j, a := range actions[:i] {
			names[j] = a.Action
		}
		done = "done before it: " + strings.Join(names, ", ")
	}
	return fmt.Errorf("%s: action %d of %d (%s) failed: %w; %s", tool, i+1, len(actions), actions[i].Action, err, done)
}

// releaseButton lets go of the left button when the steps that ran pressed
// it and did not release it (a drag along a path stopped half way), so a
// failed call does not leave the desktop dragging.
func (s *Server) releaseButton(dialect Mode, ran []hci.Action) {
	down := false
	for _, a := range ran {
		switch a.Action {
		case hci.ActLeftMouseDown:
			down = true
		case hci.ActLeftMouseUp:
			down = false
		}
	}
	if !down {
		return
	}
	// A fresh context: the call's own may be what failed.
	ctx, cancel := context.WithTimeout(hci.WithVia(context.Background(), string(dialect)), 5*time.Second)
	defer cancel()
	if _, err := s.exec.Do(ctx, hci.Action{Action: hci.ActLeftMouseUp}, hci.SourceAgent); err != nil {
		s.log.Warn("releasing the left button after a failed drag", "err", err)
	}
}

// answer is a dialect call's result: any text the actions produced, then the
// screenshot (after the screen settles if an action may have changed it),
// which every dialect's model expects after each call.
func (s *Server) answer(ctx context.Context, tool string, texts []string, last hci.Result, settle bool) *mcp.CallToolResult {
	var content []mcp.Content
	for _, t := range texts {
		content = append(content, mcp.NewTextContent(t))
	}
	img, err := s.observe(ctx, hci.Result{Seq: last.Seq, Screenshot: true, Settle: settle})
	if err != nil {
		if settle {
			return toolError(fmt.Errorf("%s: the actions were done, but the screenshot after them failed: %w", tool, err))
		}
		return toolError(fmt.Errorf("%s: the screenshot failed: %w", tool, err))
	}
	return &mcp.CallToolResult{Content: append(content, img)}
}

// keyName maps one key, as a dialect names it, to its canonical (xdotool)
// name, through hci's table of the dialects' key names (hci.DialectKey); errors start with dialect, if given. lowerLetters makes a single letter the key rather than the
// character: OpenAI sends ["CTRL", "C"] for ctrl+c, not ctrl+shift+c.
func keyName(dialect, k string, lowerLetters bool) (string, error) {
	if n, ok := hci.DialectKey(k); ok {
		return n, nil
	}
	t := strings.TrimSpace(k)
	if t == "" {
		return "", prefixed(dialect, errors.New("an empty key name"))
	}
	if n, ok := hci.DialectKey(t); ok {
		return n, nil
	}
	if r, size := utf8.DecodeRuneInString(t); size == len(t) {
		if lowerLetters && unicode.IsLetter(r) {
			return string(unicode.ToLower(r)), nil
		}
		return t, nil
	}
	if strings.ContainsAny(t, " +\t\n") {
		return "", prefixed(dialect, fmt.Errorf("key %s is not one key name", wire.Quote(k)))
	}
	if _, err := hci.KeysymByName(t); err != nil {
		return "", prefixed(dialect, err)
	}
	return t, nil
}

// prefixed puts what failed before err, if there is a what.
func prefixed(what string, err error) error {
	if what == "" {
		return err
	}
	return fmt.Errorf("%s: %w", what, err)
}

// chord maps keys pressed together to a canonical chord, "ctrl+c". A key
// given as a chord itself ("ctrl+c" as one entry of OpenAI's keys, which
// models write now and then) is its keys.
func chord(dialect string, keys []string, lowerLetters bool) (string, error) {
	if len(keys) == 0 {
		return "", prefixed(dialect, errors.New("no keys given"))
	}
	var names []string
	for _, k := range keys {
		parts := []string{k}
		if k != "+" && strings.Contains(k, "+") {
			parts = strings.Split(k, "+")
		}
		for _, p := range parts {
			n, err := keyName(dialect, p, lowerLetters)
			if err != nil {
				return "", err
			}
			names = append(names, n)
		}
	}
	return strings.Join(names, "+"), nil
}

// scrollPixelsPerNotch turns the pixel distances OpenAI's scroll and
// Gemini's scroll_at give into wheel notches: 100 pixels a notch, rounded
// up, about what a browser scrolls per notch.
const scrollPixelsPerNotch = hci.ScrollPixelsPerNotch

func notches(pixels int) int {
	if pixels < 0 {
		pixels = -pixels
	}
	return (pixels + scrollPixelsPerNotch - 1) / scrollPixelsPerNotch
}

// fieldTypeError words a JSON decoding error for the model: which field
// had which wrong kind of value.
func fieldTypeError(raw json.RawMessage, err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		want := te.Type.String()
		switch te.Type.Kind() {
		case reflect.Int, reflect.Int64:
			want = "an integer"
		case reflect.String:
			want = "a string"
		case reflect.Slice:
			want = "a list"
		case reflect.Bool:
			want = "true or false"
		case reflect.Float64:
			want = "a number"
		}
		return fmt.Errorf("%s must be %s, got %s", te.Field, want, te.Value)
	}
	return fmt.Errorf("%s: %w", truncateJSON(raw), err)
}

// dialectTools are the tools of one dialect mode.
func (s *Server) dialectTools(m Mode) []Tool {
	switch m {
	case ModeOpenAI:
		return []Tool{s.openAISpec()}
	case ModeGemini:
		return s.geminiTools()
	case ModePyAutoGUI:
		return []Tool{s.pyautoguiSpec()}
	}
	return nil
}

// dialectToolNames are every dialect's tool names, which a trait's tools
// cannot take.
func dialectToolNames() []string {
	names := []string{openAITool, pyautoguiTool}
	for _, fn := range geminiFuncs() {
		names = append(names, fn.name)
	}
	return names
}
