package task

import (
	"encoding/json"
	"fmt"
	"image"
	"regexp"
	"strconv"
	"time"
)

// Task is one task file: what the agent is asked to do, how the desktop is
// prepared for it and how its result is judged. The JSON tags are the file
// format, so json.Marshal of a Task gives a file Parse accepts again.
type Task struct {
	// ID names the task in the control plane and in episodes: letters, digits,
	// '.', '_' and '-', at most 100 bytes, unique in a task directory.
	ID string `json:"id"`
	// Instruction is what the agent (or person) is told to do.
	Instruction string `json:"instruction"`
	// Setup runs in order before the episode starts.
	Setup []Step `json:"setup,omitempty"`
	// Evaluator judges the desktop after the episode; see Evaluate.
	Evaluator Check `json:"evaluator"`
	// MaxSteps is the most actions an episode may take; 0 leaves it to the caller.
	MaxSteps int `json:"max_steps,omitempty"`
	// Timeout is the longest an episode may run; 0 leaves it to the caller.
	Timeout Duration `json:"timeout,omitempty"`
	// Tags are free labels for choosing tasks ("files", "browser", ...).
	Tags []string `json:"tags,omitempty"`
	// Solution is a list of computer-tool actions (the computer_20251124 input
	// shape, kept as raw JSON) that solve the task from the state setup leaves.
	// Tests replay it; agents never see it.
	Solution []json.RawMessage `json:"solution,omitempty"`

	// Params are the task's parameters by name (params.go): templates
	// {{ expr }} in the strings above use them, and Instantiate renders the
	// task for a seed. Parse gives the rendering with each parameter's first
	// value (the first choice, or min).
	Params map[string]Param `json:"params,omitempty"`

	// Path is the file the task came from (the name given to Parse).
	Path string `json:"-"`

	// source is the file as written when it has templates (nil otherwise),
	// and kinds the kinds it was parsed with, for Instantiate.
	source []byte
	kinds  *Kinds
}

// Step types.
const (
	StepLaunch     = "launch"
	StepCommand    = "command"
	StepWriteFile  = "write_file"
	StepOpen       = "open"
	StepWaitWindow = "wait_window"
	StepSleep      = "sleep"
	StepBrowser    = "browser"
	StepServe      = "serve"
)

// Step is one setup step. Which fields a step uses depends on Type; docs/TASKS.md
// lists them, and Parse rejects a field the type does not use.
type Step struct {
	Type string `json:"type"`

	// launch: the program and its arguments, run without a shell (a leading
	// "~" in an argument is expanded), or Command, run by sh -c. Either way it
	// runs in the background and the step does not wait for it.
	Argv []string `json:"argv,omitempty"`
	// command: a shell script run by sh -c that must exit 0; launch: see Argv.
	Command string `json:"command,omitempty"`

	// write_file: the file to write; open: the file to open.
	Path string `json:"path,omitempty"`
	// write_file: the file's content (may be empty).
	Content string `json:"content,omitempty"`
	// write_file: the permission bits in octal, such as "0644" (the default).
	Mode string `json:"mode,omitempty"`

	// open: the URL to open (instead of Path).
	URL string `json:"url,omitempty"`
	// open: the program (and leading arguments) to open Path or URL with;
	// empty means xdg-open.
	With []string `json:"with,omitempty"`

	// wait_window: a title substring, or a regular expression, to wait for.
	Contains   string `json:"contains,omitempty"`
	Matches    string `json:"matches,omitempty"`
	IgnoreCase bool   `json:"ignore_case,omitempty"`

	// sleep: how long.
	Duration Duration `json:"duration,omitempty"`
	// serve: the folder to serve and the loopback port (1024-65535). The
	// browser step takes URL or Path.
	Dir  string `json:"dir,omitempty"`
	Port int    `json:"port,omitempty"`
	// command and wait_window: how long the step may take (defaults 60s and 10s).
	Timeout Duration `json:"timeout,omitempty"`

	re   *regexp.Regexp
	kind *stepKind // set by Parse; a Step built in code finds its kind by Type
}

// Check types.
const (
	CheckAnd               = "and"
	CheckOr                = "or"
	CheckNot               = "not"
	CheckFileExists        = "file_exists"
	CheckFileContains      = "file_contains"
	CheckFileMatches       = "file_matches"
	CheckCommand           = "command"
	CheckWindowTitle       = "window_title"
	CheckClipboardContains = "clipboard_contains"
	CheckClipboardMatches  = "clipboard_matches"
	CheckScreenRegion      = "screen_region"
	CheckSpreadsheetCell   = "spreadsheet_cell"
	CheckDocumentText      = "document_text"
	CheckJSONField         = "json_field"
	CheckCSVColumn         = "csv_column"
	CheckWindowState       = "window_state"
	CheckProcessRunning    = "process_running"
	CheckBrowserURL        = "browser_url"
	CheckBrowserTitle      = "browser_title"
	CheckBrowserElement    = "browser_element"
	CheckBrowserBookmark   = "browser_bookmark"
	CheckBrowserDownload   = "browser_download"
)

// Check is one node of an evaluator tree: a combination (and, or, not) of
// Checks, or a leaf that looks at the desktop. Which fields a check uses
// depends on Type; Parse rejects a field the type does not use.
type Check struct {
	Type string `json:"type"`
	// Name replaces the generated description in Reasons.
	Name string `json:"name,omitempty"`
	// Weight counts this check in a partial "and" (default 1; 0 makes it
	// informational).
	Weight *float64 `json:"weight,omitempty"`

	// and, or, not: the checks combined (not: exactly one).
	Checks []Check `json:"checks,omitempty"`
	// and: the reward is the weighted mean of the checks' rewards instead of
	// their minimum.
	Partial bool `json:"partial,omitempty"`

	// file_* and the checks of files (spreadsheet_cell, document_text,
	// json_field, csv_column): the file, "~" is the desktop user's home;
	// relative paths are relative to it too.
	Path string `json:"path,omitempty"`
	// file_contains, command (stdout), window_title, clipboard_contains, and
	// the checks of files and windows (a window_state's title, a
	// process_running's command line): a substring that must occur.
	Contains string `json:"contains,omitempty"`
	// file_matches, command (stdout), window_title, clipboard_matches, and
	// where Contains is taken: a Go regular expression (RE2) that must match
	// somewhere.
	Matches string `json:"matches,omitempty"`
	// With Contains: compare case-insensitively.
	IgnoreCase bool `json:"ignore_case,omitempty"`

	// command: the shell script (sh -c, in the home directory).
	Command string `json:"command,omitempty"`
	// command: the exit status that passes (default 0).
	ExitCode *int `json:"exit_code,omitempty"`
	// command: how long it may run (default 10s); longer fails the check.
	Timeout Duration `json:"timeout,omitempty"`

	// clipboard_*: "clipboard" (the default) or "primary".
	Selection string `json:"selection,omitempty"`

	// screen_region: [x, y, width, height] in screen pixels; width and height
	// must be the reference image's.
	Region []int `json:"region,omitempty"`
	// screen_region: a PNG file, relative to the task file. Fully transparent
	// pixels in it are not compared.
	Reference string `json:"reference,omitempty"`
	// screen_region: the largest mean absolute difference per colour channel
	// (0-255) that still passes (default 4). spreadsheet_cell, json_field,
	// csv_column: how far apart two numbers may be and still be equal
	// (default 1e-9).
	Tolerance *float64 `json:"tolerance,omitempty"`

	// spreadsheet_cell, json_field, csv_column: the wanted value, as JSON: a
	// string or number (a cell, a CSV row), an array (a CSV column, a range's
	// rows) or any JSON value (json_field). Parse keeps it in one canonical
	// form (json.Marshal of its decoded value).
	Equals json.RawMessage `json:"equals,omitempty"`
	// json_field: an RFC 6901 JSON Pointer such as "/items/0/name"; "" (or
	// none) is the whole document.
	Pointer string `json:"pointer,omitempty"`
	// csv_column: the header of the column.
	Column string `json:"column,omitempty"`
	// csv_column: a data row, 1-based (the row under the header is 1).
	Row int `json:"row,omitempty"`
	// spreadsheet_cell: a cell such as "B7", or a range such as "A1:C3".
	Cell  string `json:"cell,omitempty"`
	Range string `json:"range,omitempty"`
	// spreadsheet_cell: the sheet's name; "" is the first sheet.
	Sheet string `json:"sheet,omitempty"`
	// spreadsheet_cell: a text the cell's formula must contain, such as
	// "SUM(" (case is ignored).
	Formula string `json:"formula,omitempty"`
	// window_state: "focused", "maximized", "fullscreen", "above",
	// "minimized" or "exists".
	State string `json:"state,omitempty"`
	// process_running: the program's name, such as "galculator".
	Process string `json:"process,omitempty"`
	// browser_element: a CSS selector, and the property of the first element
	// it matches: "text" (the default, its innerText), "value", "checked" or
	// any DOM property.
	Selector string `json:"selector,omitempty"`
	Property string `json:"property,omitempty"`

	re   *regexp.Regexp
	ref  *image.NRGBA
	kind *CheckKind // set by Parse; a Check built in code finds its kind by Type
}

// Default limits.
const (
	DefaultCommandTimeout    = 60 * time.Second // command step
	DefaultWaitWindowTimeout = 10 * time.Second // wait_window step
	DefaultStartTimeout      = 10 * time.Second // launch, open, write_file steps
	DefaultCheckTimeout      = 10 * time.Second // command check
	DefaultTolerance         = 4.0              // screen_region
	MaxStepTimeout           = 10 * time.Minute // any step, and sleep
)

// WeightOrDefault is the check's weight in a partial "and".
func (c *Check) WeightOrDefault() float64 {
	if c.Weight == nil {
		return 1
	}
	return *c.Weight
}

// Duration is a time.Duration written in task files as a Go duration string
// ("1m30s", "500ms") or a number of seconds.
type Duration time.Duration

// D is the duration as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes the duration as a string such as "1m30s".
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(strconv.Quote(time.Duration(d).String())), nil
}

// UnmarshalJSON accepts "1m30s" or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	v, err := parseDuration(b)
	if err != nil {
		return err
	}
	*d = v
	return nil
}

func parseDuration(b []byte) (Duration, error) {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("%q is not a duration: write it like \"30s\", \"1m30s\" or \"500ms\", or as a number of seconds", s)
		}
		return Duration(v), nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return 0, fmt.Errorf("must be a duration such as \"30s\" or a number of seconds, got %s", b)
	}
	if f > float64(1<<62)/float64(time.Second) || f < -float64(1<<62)/float64(time.Second) {
		return 0, fmt.Errorf("%s seconds is out of range", b)
	}
	return Duration(f * float64(time.Second)), nil
}

// Outcome is the result of evaluating a task.
type Outcome struct {
	// Reward is in [0, 1]; see Evaluate for how checks combine.
	Reward float64 `json:"reward"`
	// Success is true when the reward is 1.
	Success bool `json:"success"`
	// Reasons has one entry per check, the root first, in the order of the
	// evaluator tree.
	Reasons []Reason `json:"reasons"`
}

// Reason says how one check went.
type Reason struct {
	// Check describes the check, such as `file_contains ~/notes.txt`, or is
	// its Name.
	Check string `json:"check"`
	// Passed is true when the check's reward is 1.
	Passed bool `json:"passed"`
	// Detail says what was found, such as `file does not contain "hello" (it
	// has 10 bytes: "helo world")`.
	Detail string `json:"detail"`
	// Path locates the check in the task file, such as "evaluator.checks[1]".
	Path string `json:"path"`
	// Reward is the check's own reward.
	Reward float64 `json:"reward"`
}
