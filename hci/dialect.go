package hci

import (
	"fmt"
	"math"
	"strings"
)

// Canonical actions said in other models' dialects (docs/DIALECTS.md): the
// other direction of mcpserver's dialect tools, so a recorded episode can be
// exported, and re-run, in the dialect of another model. It lives here,
// beside the grid and fraction conversions it uses, so that record (which
// writes exports) and mcpserver (which reads the dialects) share one
// vocabulary without importing each other.

// The dialects, as --mcp-tools and deskenv export --dialect name them.
const (
	DialectOpenAI    = "openai"
	DialectGemini    = "gemini"
	DialectPyAutoGUI = "pyautogui"
)

// Dialects are the dialect names, in the order the docs list them.
func Dialects() []string { return []string{DialectOpenAI, DialectGemini, DialectPyAutoGUI} }

// GeminiGrid is the size of Gemini's grid: points are cells 0..999 each way.
const GeminiGrid = 1000

// Dialect timings: OpenAI's wait and Gemini's wait_5_seconds carry no
// duration, so a canonical wait is said as as many of them as cover it.
const (
	OpenAIWaitSeconds = 2.0
	GeminiWaitSeconds = 5.0
	// GeminiAddressBarWait is how long Gemini's navigate waits between
	// focusing the address bar and typing the URL, as a person pauses:
	// typed at once, Chromium's address bar lost the URL's first characters
	// to the page (e2e/dialect TestGeminiSeesTheURL).
	GeminiAddressBarWait = 0.3
)

// ScrollPixelsPerNotch turns the pixel distances OpenAI's scroll and
// Gemini's scroll_at give into wheel notches (rounded up), and back.
const ScrollPixelsPerNotch = 100

// GeminiCall is one Gemini function call: the function's name and its args.
type GeminiCall struct {
	Name string         `json:"name"`
	Args map[string]any `json:"args"`
}

// Said is what a dialect says for the canonical actions First..Last of a
// sequence (indices, inclusive): usually one action, several where the
// dialect's one call does several (Gemini's type_text_at is a click, the
// typing and Return; an OpenAI drag along a path is a press, moves and a
// release). Calls are OpenAI action objects (map[string]any), Gemini
// function calls (GeminiCall) or lines of pyautogui code (string), in
// order; Err says why the dialect cannot say the actions, and Calls is
// then empty.
type Said struct {
	First, Last int
	Calls       []any
	Err         error
}

// SayOptions change how a dialect is written.
type SayOptions struct {
	// Fractions writes pyautogui points as fractions of the model space at
	// the pixel's centre (ToFraction), as AgentNet and OpenCUA do, rather
	// than as pixels. Both read back to the same pixel.
	Fractions bool
}

// sayRun is what a dialect's sayer sees: the run of actions being said,
// the one to say next (acts[i]), the space and the options.
type sayRun struct {
	sp   Space
	acts []Action
	i    int
	opt  SayOptions
}

func (r sayRun) a() Action { return r.acts[r.i] }

// sayFunc says r.a(), and maybe the actions after it: n is how many it
// said.
type sayFunc func(r sayRun) (n int, calls []any, err error)

// sayer is one dialect's writer: a sayFunc per action it can say, and why
// it cannot say the others.
type sayer struct {
	name   string
	say    map[string]sayFunc
	cannot map[string]string
}

func sayerOf(dialect string) (sayer, error) {
	switch dialect {
	case DialectOpenAI:
		return openAISayer(), nil
	case DialectGemini:
		return geminiSayer(), nil
	case DialectPyAutoGUI:
		return pyautoguiSayer(), nil
	}
	return sayer{}, fmt.Errorf("dialect %q is not known: use %s", dialect, strings.Join(Dialects(), ", "))
}

func (d sayer) sayOne(r sayRun) (int, []any, error) {
	a := r.a()
	if f, ok := d.say[a.Action]; ok {
		return f(r)
	}
	why, ok := d.cannot[a.Action]
	if !ok {
		why = "it has no way to say it"
	}
	return 0, nil, cannot(d.name, a, why)
}

// Say writes the canonical actions acts, taken in model space s, in
// dialect: one Said per group of actions the dialect says in one go, in
// order, covering every action. An action the dialect cannot say has a
// Said of its own with Err set; the others are still said.
func (s Space) Say(dialect string, acts []Action, opt SayOptions) ([]Said, error) {
	d, err := sayerOf(dialect)
	if err != nil {
		return nil, err
	}
	// A recorded step is checked as the executor would check it: an export
	// reads steps from disk, and a step that is not a valid action in its
	// model space is said by no dialect. It is blanked in the copy the
	// sayers see, so no group reaches across it.
	checked := make([]Action, len(acts))
	bad := make([]error, len(acts))
	for i, a := range acts {
		if bad[i] = a.Validate(s); bad[i] == nil {
			checked[i] = a
		}
	}
	var out []Said
	for i := 0; i < len(acts); {
		if bad[i] != nil {
			out = append(out, Said{First: i, Last: i, Err: fmt.Errorf("not a valid action, so not said in %s: %w", dialect, bad[i])})
			i++
			continue
		}
		n, calls, err := d.sayOne(sayRun{sp: s, acts: checked, i: i, opt: opt})
		if err != nil {
			n, calls = 1, nil
		}
		out = append(out, Said{First: i, Last: i + n - 1, Calls: calls, Err: err})
		i += n
	}
	return out, nil
}

// cannot is the error for an action a dialect has no way to say.
func cannot(dialect string, a Action, why string) error {
	return fmt.Errorf("%s cannot be said in %s: %s", a.Action, dialect, why)
}

// modifiers are the keys a click, drag or scroll holds: text, or key in the
// quickstart demo's spelling.
func modifiers(a Action) string {
	if a.Text != "" {
		return a.Text
	}
	return a.Key
}

// waits is how many waits of each seconds cover d seconds (at least one).
func waits(d *float64, each float64) int {
	if d == nil || *d <= 0 {
		return 1
	}
	return max(1, int(math.Ceil(*d/each-1e-9)))
}

// notchesOf is a scroll's effective number of notches.
func notchesOf(a Action) int {
	if a.ScrollAmount != nil {
		return *a.ScrollAmount
	}
	return DefaultScrollNotch
}

// one is a single call saying one action.
func one(call any, err error) (int, []any, error) {
	if err != nil {
		return 0, nil, err
	}
	return 1, []any{call}, nil
}

// repeated is n copies of what call makes.
func repeated(n int, call func() any) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = call()
	}
	return out
}
