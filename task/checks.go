package task

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// builtinChecks is the table of check types docs/TASKS.md describes, one
// entry each; messages list the types in this order.
func builtinChecks() []CheckKind {
	file := Required("path", "the file, such as \"~/notes.txt\"")
	return append([]CheckKind{
		{Name: CheckAnd, Fields: []string{"checks", "partial"}, Needs: []Need{Required("checks", "the checks to combine")},
			Describe: describeAnd, combines: true, validate: validateAnd},
		{Name: CheckOr, Fields: []string{"checks"}, Needs: []Need{Required("checks", "the checks to combine")},
			combines: true, validate: validateAnd},
		{Name: CheckNot, Fields: []string{"checks"}, Needs: []Need{Required("checks", "the one check to negate")},
			combines: true, validate: validateNot},
		{Name: CheckFileExists, Fields: []string{"path"}, Needs: []Need{file},
			Describe: describePath, Evaluate: fileExists},
		{Name: CheckFileContains, Fields: []string{"path", "contains", "ignore_case"},
			Needs:    []Need{file, Required("contains", "the text the file must contain")},
			Describe: describePath, Evaluate: fileText},
		{Name: CheckFileMatches, Fields: []string{"path", "matches", "ignore_case"},
			Needs:    []Need{file, Required("matches", "the regular expression the file must match")},
			Describe: describePath, Evaluate: fileText},
		{Name: CheckCommand, Fields: []string{"command", "exit_code", "contains", "matches", "ignore_case", "timeout"},
			Needs:    []Need{Required("command", "the shell script to run")},
			Describe: describeCommand, Evaluate: commandCheck},
		{Name: CheckWindowTitle, Fields: []string{"contains", "matches", "ignore_case"}, Needs: []Need{OneOf("contains", "matches")},
			Describe: describeWindowTitle, Evaluate: windowTitle},
		{Name: CheckClipboardContains, Fields: []string{"contains", "ignore_case", "selection"},
			Needs:    []Need{Required("contains", "the text the clipboard must contain")},
			Describe: describeClipboard, Evaluate: clipboardText},
		{Name: CheckClipboardMatches, Fields: []string{"matches", "ignore_case", "selection"},
			Needs:    []Need{Required("matches", "the regular expression the clipboard must match")},
			Describe: describeClipboard, Evaluate: clipboardText},
		{Name: CheckScreenRegion, Fields: []string{"region", "reference", "tolerance"},
			Needs: []Need{Required("region", "[x, y, width, height] in screen pixels"),
				Required("reference", "a PNG file relative to the task file")},
			Describe: describeScreenRegion, Evaluate: screenRegion},
		{Name: CheckSpreadsheetCell, Fields: []string{"path", "sheet", "cell", "range", "equals", "tolerance", "formula", "contains", "matches", "ignore_case"},
			Needs:    []Need{file, OneOf("cell", "range")},
			Describe: describeSheet, Evaluate: spreadsheetCell, validate: validateSheet},
		{Name: CheckDocumentText, Fields: []string{"path", "contains", "matches", "ignore_case"},
			Needs:    []Need{file, OneOf("contains", "matches")},
			Describe: describeDoc, Evaluate: documentText},
		{Name: CheckJSONField, Fields: []string{"path", "pointer", "equals", "tolerance", "contains", "matches", "ignore_case"},
			Needs:    []Need{file},
			Describe: describeJSON, Evaluate: jsonField, validate: validateJSON},
		{Name: CheckCSVColumn, Fields: []string{"path", "column", "row", "equals", "tolerance", "contains", "matches", "ignore_case"},
			Needs:    []Need{file, Required("column", "the column's header, such as \"total\"")},
			Describe: describeCSV, Evaluate: csvColumn, validate: validateCSV},
		{Name: CheckWindowState, Fields: []string{"contains", "matches", "ignore_case", "state"},
			Needs: []Need{OneOf("contains", "matches"),
				Required("state", "one of \"focused\", \"maximized\", \"fullscreen\", \"above\", \"minimized\", \"exists\"")},
			Describe: describeWindowState, Evaluate: windowState, validate: validateWindowState},
		{Name: CheckProcessRunning, Fields: []string{"process", "contains", "matches", "ignore_case"},
			Describe: describeProcess, Evaluate: processRunning, validate: validateProcess},
	}, browserChecks()...)
}

// validateAnd checks what "and" and "or" need beyond their checks being
// given: at least one, and in a partial "and" some weight.
func validateAnd(d *decoder, at site, c *Check) {
	v, ok := at.f["checks"]
	if !ok || v.kind != jArray {
		return
	}
	if len(c.Checks) == 0 {
		d.fail(v, join(at.path, "checks"), "must hold at least one check")
	}
	if !c.Partial || len(c.Checks) == 0 {
		return
	}
	sum := 0.0
	for _, ch := range c.Checks {
		sum += ch.WeightOrDefault()
	}
	if sum == 0 {
		d.fail(v, join(at.path, "checks"), "all weights are 0, so a partial \"and\" could give no reward")
	}
}

func validateNot(d *decoder, at site, _ *Check) {
	if v, ok := at.f["checks"]; ok && v.kind == jArray && len(v.items) != 1 {
		d.fail(v, join(at.path, "checks"), "\"not\" takes exactly one check, got %d", len(v.items))
	}
}

func describeAnd(c *Check) string {
	if c.Partial {
		return "and (partial)"
	}
	return "and"
}

func describePath(c *Check) string    { return c.Type + " " + c.Path }
func describeCommand(c *Check) string { return "command " + quoteHead(c.Command, 80) }

func describeWindowTitle(c *Check) string {
	m, err := c.matcher()
	if err != nil {
		return "window_title matches " + quoteHead(c.Matches, 80)
	}
	return "window_title " + m.String()
}

func describeClipboard(c *Check) string {
	s := c.Type + " " + quoteHead(c.Contains+c.Matches, 80)
	if c.Selection == "primary" {
		s += " (primary selection)"
	}
	return s
}

func describeScreenRegion(c *Check) string {
	if len(c.Region) == 4 {
		return fmt.Sprintf("screen_region %d,%d %dx%d %s", c.Region[0], c.Region[1], c.Region[2], c.Region[3], c.Reference)
	}
	return "screen_region " + c.Reference
}

// fileExists is file_exists: the path is there, a file or a directory.
func fileExists(_ context.Context, env Env, c *Check) (bool, string, error) {
	st, err := os.Stat(expandPath(env.Home(), c.Path))
	switch {
	case err == nil && st.IsDir():
		return true, "exists (a directory)", nil
	case err == nil:
		return true, fmt.Sprintf("exists (%d bytes)", st.Size()), nil
	case errors.Is(err, fs.ErrNotExist):
		return false, "does not exist", nil
	default:
		return false, fmt.Sprintf("cannot be looked at: %v", err), nil
	}
}

// fileText is file_contains and file_matches: the file's first MaxFileRead
// bytes hold the text.
func fileText(ctx context.Context, env Env, c *Check) (bool, string, error) {
	data, err := env.ReadFile(ctx, expandPath(env.Home(), c.Path), MaxFileRead+1)
	if err != nil {
		return false, err.Error(), nil
	}
	note := ""
	if len(data) > MaxFileRead {
		data, note = data[:MaxFileRead], fmt.Sprintf(" (only the first %d bytes were looked at)", MaxFileRead)
	}
	m, err := c.matcher()
	if err != nil {
		return false, "", err
	}
	return textCheck("file", m, string(data), note)
}

// windowTitle is window_title: some top-level window's title matches.
func windowTitle(ctx context.Context, env Env, c *Check) (bool, string, error) {
	ws, err := env.Windows(ctx)
	if err != nil {
		return false, "", err
	}
	m, err := c.matcher()
	if err != nil {
		return false, "", err
	}
	for _, w := range ws {
		if m.match(w.Title) {
			return true, fmt.Sprintf("window 0x%x is titled %s", w.ID, quoteHead(w.Title, 120)), nil
		}
	}
	return false, fmt.Sprintf("no window title %s; windows: %s", m, windowTitles(ws)), nil
}

// clipboardText is clipboard_contains and clipboard_matches.
func clipboardText(ctx context.Context, env Env, c *Check) (bool, string, error) {
	sel, what := "CLIPBOARD", "clipboard"
	if c.Selection == "primary" {
		sel, what = "PRIMARY", "primary selection"
	}
	text, err := env.Selection(ctx, sel)
	if errors.Is(err, ErrNoText) {
		return false, fmt.Sprintf("the %s holds no text", what), nil
	}
	if err != nil {
		return false, "", err
	}
	if text == "" {
		return false, fmt.Sprintf("the %s is empty", what), nil
	}
	m, err := c.matcher()
	if err != nil {
		return false, "", err
	}
	return textCheck(what, m, text, "")
}

// screenRegion is screen_region: a part of the screen looks like the
// reference image.
func screenRegion(ctx context.Context, env Env, c *Check) (bool, string, error) {
	shot, err := env.Screenshot(ctx)
	if err != nil {
		return false, "", err
	}
	ok, detail := compareRegion(shot, c)
	return ok, detail, nil
}

// commandCheck is command: the script exits with the wanted status and, when
// the check says so, its stdout holds the text.
func commandCheck(ctx context.Context, env Env, c *Check) (bool, string, error) {
	limit := stepTimeout(c.Timeout, DefaultCheckTimeout)
	cctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	res, err := env.Run(cctx, c.Command)
	if err != nil {
		if ctx.Err() == nil && cctx.Err() != nil {
			return false, fmt.Sprintf("did not finish within %s%s", limit, outputTails(res)), nil
		}
		return false, "", err
	}
	want := 0
	if c.ExitCode != nil {
		want = *c.ExitCode
	}
	if res.ExitCode != want {
		return false, fmt.Sprintf("exited with status %d, want %d%s", res.ExitCode, want, outputTails(res)), nil
	}
	detail := fmt.Sprintf("exited with status %d", res.ExitCode)
	m, err := c.matcher()
	if err != nil {
		return false, "", err
	}
	if m.contains == "" && m.re == nil {
		return true, detail, nil
	}
	ok, out, _ := textCheck("stdout", m, res.Stdout, "")
	return ok, detail + "; " + out, nil
}
