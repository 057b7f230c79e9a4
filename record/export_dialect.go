package record

import (
	"fmt"
	"slices"
	"strings"

	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/internal/wire"
)

// An export with ExportOptions.Dialect writes each step a second time, in
// another model's dialect (hci.Space.Say; docs/DIALECTS.md): the rows are
// DialectRows, Row's columns and five more. The canonical action_json stays
// as it was: the dialect is a translation beside it, not instead of it.

// DialectRow is a Row with its step said in a dialect.
type DialectRow struct {
	Row
	// Via is the dialect the step was recorded through (null: the computer
	// tool, or a person).
	Via *string `parquet:"via,optional" json:"via"`
	// Dialect is the dialect the next columns are in: openai, gemini or
	// pyautogui.
	Dialect string `parquet:"dialect" json:"dialect"`
	// DialectJSON is the step in the dialect: a JSON list of OpenAI action
	// objects, of Gemini function calls {name, args}, or of lines of
	// pyautogui code. Null when an earlier step's calls said this step too
	// (DialectOf) or the dialect cannot say it (DialectError).
	DialectJSON *string `parquet:"dialect_json,optional" json:"dialect_json"`
	// DialectOf is the step whose dialect_json also says this one (Gemini's
	// type_text_at is a click, typing and Return; an OpenAI drag along a
	// path a press, moves and a release).
	DialectOf *int32 `parquet:"dialect_of,optional" json:"dialect_of"`
	// DialectError says why the dialect cannot say the step.
	DialectError *string `parquet:"dialect_error,optional" json:"dialect_error"`
}

// checkDialect checks the dialect options.
func (opt ExportOptions) checkDialect() error {
	if opt.Dialect == "" {
		if opt.Fractions {
			return fmt.Errorf("fractions is for --dialect pyautogui: give the dialect too")
		}
		return nil
	}
	if !slices.Contains(hci.Dialects(), opt.Dialect) {
		return fmt.Errorf("dialect %s is not known: use %s", wire.Quote(opt.Dialect), strings.Join(hci.Dialects(), ", "))
	}
	switch opt.Format {
	case "", "parquet", "jsonl":
	default:
		return fmt.Errorf("dialect %s goes with the parquet and jsonl formats, not %s (agentnet is pyautogui code already)", opt.Dialect, opt.Format)
	}
	if opt.Fractions && opt.Dialect != hci.DialectPyAutoGUI {
		return fmt.Errorf("fractions is for the pyautogui dialect, not %s", opt.Dialect)
	}
	return nil
}

// dialectRowsOf says the steps of rec, whose rows are rows, in opt's
// dialect, and adds the steps it cannot say to unsaid.
func dialectRowsOf(rec *Recording, rows []Row, opt ExportOptions, unsaid *int) ([]DialectRow, error) {
	m := rec.Meta
	sp := hci.Space{ScreenW: m.Screen.W, ScreenH: m.Screen.H, ModelW: m.Model.W, ModelH: m.Model.H}
	if sp.ModelW <= 0 || sp.ModelH <= 0 {
		return nil, fmt.Errorf("episode %s has no model size, which its points are in", m.ID)
	}
	acts := make([]hci.Action, len(rec.Steps))
	for i, s := range rec.Steps {
		acts[i] = s.Action
	}
	said, err := sp.Say(opt.Dialect, acts, hci.SayOptions{Fractions: opt.Fractions})
	if err != nil {
		return nil, err
	}
	out := make([]DialectRow, len(rows))
	for i := range rows {
		out[i] = DialectRow{Row: rows[i], Dialect: opt.Dialect, Via: strPtr(rec.Steps[i].Via)}
	}
	for _, s := range said {
		first := &out[s.First]
		if s.Err != nil {
			msg := fmt.Sprintf("step %d: %v", rec.Steps[s.First].Step, s.Err)
			first.DialectError = &msg
			*unsaid++
			continue
		}
		b, err := wire.Marshal(s.Calls)
		if err != nil {
			return nil, fmt.Errorf("step %d in %s: %w", rec.Steps[s.First].Step, opt.Dialect, err)
		}
		js := strings.TrimSpace(string(b))
		first.DialectJSON = &js
		of := int32(rec.Steps[s.First].Step)
		for j := s.First + 1; j <= s.Last; j++ {
			out[j].DialectOf = &of
		}
	}
	return out, nil
}

// dialectFeatures are the Hugging Face features of DialectRow's own
// columns.
func dialectFeatures(f map[string]any) map[string]any {
	v := func(dtype string) map[string]any { return map[string]any{"dtype": dtype, "_type": "Value"} }
	f["via"], f["dialect"], f["dialect_json"] = v("string"), v("string"), v("string")
	f["dialect_of"], f["dialect_error"] = v("int32"), v("string")
	return f
}

// dialectCardColumns are the dataset card's rows for DialectRow's columns.
func dialectCardColumns(opt ExportOptions) [][3]string {
	what := map[string]string{
		hci.DialectOpenAI:    "a JSON list of OpenAI computer-use action objects ({\"type\": \"click\", \"x\": 405, \"y\": 157, \"button\": \"left\"}), pixels of the model space",
		hci.DialectGemini:    "a JSON list of Gemini computer-use function calls ({\"name\": \"click_at\", \"args\": {\"x\": 500, \"y\": 500}}), points on the 0-999 grid",
		hci.DialectPyAutoGUI: "a JSON list of lines of pyautogui code (pyautogui.click(640, 400)), pixels of the model space",
	}[opt.Dialect]
	if opt.Fractions {
		what = "a JSON list of lines of pyautogui code (pyautogui.click(x=0.500391, y=0.500625)), points as fractions of the model space at the pixel's centre"
	}
	return [][3]string{
		{"via", "string", "the dialect the step was recorded through (null: the computer tool, or a person)"},
		{"dialect", "string", "the dialect of the next columns: " + opt.Dialect},
		{"dialect_json", "string", "the step in " + opt.Dialect + ": " + what + "; null when dialect_of or dialect_error is set"},
		{"dialect_of", "int32", "the step whose dialect_json also says this one (one call of the dialect did several steps)"},
		{"dialect_error", "string", "why the dialect cannot say this step"},
	}
}
