package task

import (
	"encoding/json"
	"strconv"
	"strings"
)

// site is where a step or check is in the file: its node, its fields by
// name and its path, and for checks the task file's directory (screen_region
// references are relative to it) and how deep the check is nested.
type site struct {
	n     *jnode
	f     map[string]*jnode
	path  string
	base  string
	depth int
}

// checkField decodes one field of a check. The fields are a vocabulary the
// check kinds share: a kind says which it takes, and each is decoded and
// checked the same way whichever kind takes it.
type checkField struct {
	name   string
	decode func(d *decoder, v *jnode, p string, c *Check, at site)
}

// checkFieldTable is every check field in the order they are decoded (a
// later field may look at an earlier one: matches at ignore_case, reference
// at region).
func checkFieldTable() []checkField {
	return []checkField{
		{"name", func(d *decoder, v *jnode, p string, c *Check, _ site) { c.Name = d.str(v, p) }},
		{"weight", decodeWeight},
		{"checks", decodeChecks},
		{"partial", func(d *decoder, v *jnode, p string, c *Check, _ site) { c.Partial = d.boolean(v, p) }},
		{"path", func(d *decoder, v *jnode, p string, c *Check, _ site) { c.Path = d.nonEmpty(v, p) }},
		{"contains", func(d *decoder, v *jnode, p string, c *Check, _ site) { c.Contains = d.nonEmpty(v, p) }},
		{"ignore_case", func(d *decoder, v *jnode, p string, c *Check, _ site) { c.IgnoreCase = d.boolean(v, p) }},
		{"matches", func(d *decoder, v *jnode, p string, c *Check, _ site) {
			c.Matches = d.str(v, p)
			c.re = d.regexp(v, p, c.Matches, c.IgnoreCase)
		}},
		{"command", func(d *decoder, v *jnode, p string, c *Check, _ site) { c.Command = d.script(v, p) }},
		{"exit_code", decodeExitCode},
		{"timeout", func(d *decoder, v *jnode, p string, c *Check, _ site) { c.Timeout = d.positiveDuration(v, p) }},
		{"selection", decodeSelection},
		{"tolerance", decodeTolerance},
		{"region", decodeRegion},
		{"reference", decodeReference},
		{"equals", decodeEquals},
		{"pointer", func(d *decoder, v *jnode, p string, c *Check, _ site) { c.Pointer = d.str(v, p) }},
		{"column", func(d *decoder, v *jnode, p string, c *Check, _ site) { c.Column = d.nonEmpty(v, p) }},
		{"row", func(d *decoder, v *jnode, p string, c *Check, _ site) { c.Row = d.integer(v, p) }},
		{"cell", func(d *decoder, v *jnode, p string, c *Check, _ site) { c.Cell = d.nonEmpty(v, p) }},
		{"range", func(d *decoder, v *jnode, p string, c *Check, _ site) { c.Range = d.nonEmpty(v, p) }},
		{"sheet", func(d *decoder, v *jnode, p string, c *Check, _ site) { c.Sheet = d.nonEmpty(v, p) }},
		{"formula", func(d *decoder, v *jnode, p string, c *Check, _ site) { c.Formula = d.nonEmpty(v, p) }},
		{"state", func(d *decoder, v *jnode, p string, c *Check, _ site) { c.State = d.nonEmpty(v, p) }},
		{"process", func(d *decoder, v *jnode, p string, c *Check, _ site) { c.Process = d.nonEmpty(v, p) }},
		{"selector", func(d *decoder, v *jnode, p string, c *Check, _ site) { c.Selector = d.nonEmpty(v, p) }},
		{"property", func(d *decoder, v *jnode, p string, c *Check, _ site) { c.Property = d.nonEmpty(v, p) }},
	}
}

// commonCheckFields are taken by every check kind.
var commonCheckFields = []string{"type", "name", "weight"}

// checkFields are all check fields, for the unknown-field message.
var checkFields = []string{"type", "name", "weight", "checks", "partial", "path", "contains", "matches",
	"ignore_case", "command", "exit_code", "timeout", "selection", "region", "reference", "tolerance",
	"equals", "pointer", "column", "row", "cell", "range", "sheet", "formula", "state", "process", "selector", "property"}

// maxCheckDepth is how deep and, or and not may nest.
const maxCheckDepth = 16

func decodeWeight(d *decoder, v *jnode, p string, c *Check, _ site) {
	w := d.number(v, p)
	if w < 0 {
		d.fail(v, p, "must not be negative, got %v", w)
	}
	c.Weight = &w
}

func decodeChecks(d *decoder, v *jnode, p string, c *Check, at site) {
	switch {
	case v.kind != jArray:
		d.fail(v, p, "must be an array of checks, got %s", v.kind)
	case at.depth >= maxCheckDepth:
		d.fail(v, p, "checks are nested more than %d deep", maxCheckDepth)
	default:
		for i, it := range v.items {
			c.Checks = append(c.Checks, d.check(it, index(p, i), at.base, at.depth+1))
		}
	}
}

func decodeExitCode(d *decoder, v *jnode, p string, c *Check, _ site) {
	code := d.integer(v, p)
	if code < 0 || code > 255 {
		d.fail(v, p, "must be an exit status between 0 and 255, got %d", code)
	}
	c.ExitCode = &code
}

func decodeSelection(d *decoder, v *jnode, p string, c *Check, _ site) {
	c.Selection = d.str(v, p)
	if v.kind == jString && c.Selection != "clipboard" && c.Selection != "primary" {
		d.fail(v, p, "must be \"clipboard\" or \"primary\", got %q", c.Selection)
	}
}

func decodeTolerance(d *decoder, v *jnode, p string, c *Check, _ site) {
	tol := d.number(v, p)
	if c.Type != CheckScreenRegion {
		// A tolerance between numbers (spreadsheet_cell, json_field, csv_column).
		if tol < 0 {
			d.fail(v, p, "must not be negative, got %v", tol)
		}
		c.Tolerance = &tol
		return
	}
	if tol < 0 || tol > 255 {
		d.fail(v, p, "must be a mean difference per colour channel between 0 and 255, got %v", tol)
	}
	c.Tolerance = &tol
}

// decodeEquals keeps any JSON value in one canonical form, so that a task
// written back by json.Marshal parses to the same Check; the kinds check its
// shape (validateSheet, validateCSV).
func decodeEquals(d *decoder, v *jnode, p string, c *Check, _ site) {
	val, err := decodeJSON(d.raw(v))
	if err != nil {
		d.fail(v, p, "%s", err.Error())
		return
	}
	b, err := json.Marshal(val)
	if err != nil {
		d.fail(v, p, "cannot be kept: %s", err.Error())
		return
	}
	c.Equals = b
}

func decodeRegion(d *decoder, v *jnode, p string, c *Check, _ site) {
	c.Region = d.intList(v, p)
	if v.kind != jArray {
		return
	}
	if len(c.Region) != 4 {
		d.fail(v, p, "must be [x, y, width, height] in screen pixels, got %d numbers", len(c.Region))
	} else if c.Region[0] < 0 || c.Region[1] < 0 || c.Region[2] <= 0 || c.Region[3] <= 0 {
		d.fail(v, p, "must be [x, y, width, height] with x, y >= 0 and width, height > 0, got %v", c.Region)
	}
}

// decodeReference loads the reference image, and checks that the region
// (decoded before it) has its size.
func decodeReference(d *decoder, v *jnode, p string, c *Check, at site) {
	c.Reference = d.str(v, p)
	if v.kind != jString {
		return
	}
	if c.Reference == "" {
		d.fail(v, p, "must not be empty")
		return
	}
	img, err := loadReference(at.base, c.Reference)
	if err != nil {
		d.fail(v, p, "%s", err.Error())
		return
	}
	c.ref = img
	if len(c.Region) == 4 && c.Region[2] > 0 && c.Region[3] > 0 {
		w, h := img.Bounds().Dx(), img.Bounds().Dy()
		if c.Region[2] != w || c.Region[3] != h {
			d.fail(at.f["region"], join(at.path, "region"), "is %dx%d but the reference image is %dx%d; they must be the same size", c.Region[2], c.Region[3], w, h)
		}
	}
}

// stepField decodes one field of a setup step, as checkField does for checks.
type stepField struct {
	name   string
	decode func(d *decoder, v *jnode, p string, s *Step)
}

// stepFieldTable is every step field in the order they are decoded.
func stepFieldTable() []stepField {
	return []stepField{
		{"argv", decodeArgv},
		{"command", func(d *decoder, v *jnode, p string, s *Step) { s.Command = d.script(v, p) }},
		{"path", func(d *decoder, v *jnode, p string, s *Step) { s.Path = d.nonEmpty(v, p) }},
		{"content", func(d *decoder, v *jnode, p string, s *Step) { s.Content = d.str(v, p) }},
		{"mode", decodeMode},
		{"url", decodeURL},
		{"with", decodeWith},
		{"contains", func(d *decoder, v *jnode, p string, s *Step) { s.Contains = d.nonEmpty(v, p) }},
		{"ignore_case", func(d *decoder, v *jnode, p string, s *Step) { s.IgnoreCase = d.boolean(v, p) }},
		{"matches", func(d *decoder, v *jnode, p string, s *Step) {
			s.Matches = d.str(v, p)
			s.re = d.regexp(v, p, s.Matches, s.IgnoreCase)
		}},
		{"duration", func(d *decoder, v *jnode, p string, s *Step) { s.Duration = d.positiveDuration(v, p) }},
		{"timeout", func(d *decoder, v *jnode, p string, s *Step) { s.Timeout = d.positiveDuration(v, p) }},
		{"dir", func(d *decoder, v *jnode, p string, s *Step) { s.Dir = d.nonEmpty(v, p) }},
		{"port", decodePort},
	}
}

// stepFields are all step fields, for the unknown-field message.
var stepFields = []string{"type", "argv", "command", "path", "content", "mode", "url", "with",
	"contains", "matches", "ignore_case", "duration", "timeout", "dir", "port"}

func decodeArgv(d *decoder, v *jnode, p string, s *Step) {
	s.Argv = d.strList(v, p)
	if v.kind == jArray && len(s.Argv) == 0 {
		d.fail(v, p, "must name a program, such as [\"xterm\", \"-T\", \"work\"]")
	} else if len(s.Argv) > 0 && s.Argv[0] == "" {
		d.fail(v, index(p, 0), "the program name must not be empty")
	}
}

func decodeMode(d *decoder, v *jnode, p string, s *Step) {
	if s.Mode = d.str(v, p); v.kind != jString {
		return
	}
	if m, err := strconv.ParseUint(s.Mode, 8, 32); err != nil || m > 0o7777 {
		d.fail(v, p, "%q is not a file mode: write the permission bits in octal, as a string such as \"0644\" or \"0755\"", s.Mode)
	}
}

func decodeURL(d *decoder, v *jnode, p string, s *Step) {
	if s.URL = d.str(v, p); v.kind == jString && !strings.Contains(s.URL, ":") {
		d.fail(v, p, "%q is not a URL: it needs a scheme, such as https://example.com or file:///tmp/page.html", s.URL)
	}
}

func decodeWith(d *decoder, v *jnode, p string, s *Step) {
	s.With = d.strList(v, p)
	if v.kind == jArray && (len(s.With) == 0 || s.With[0] == "") {
		d.fail(v, p, "must name a program, such as [\"mousepad\"]; leave it out to use xdg-open")
	}
}

// nonEmpty is a string field that must not be "".
func (d *decoder) nonEmpty(v *jnode, p string) string {
	s := d.str(v, p)
	if v.kind == jString && s == "" {
		d.fail(v, p, "must not be empty")
	}
	return s
}

// script is a shell script field: not empty, not only blanks.
func (d *decoder) script(v *jnode, p string) string {
	s := d.str(v, p)
	if v.kind == jString && strings.TrimSpace(s) == "" {
		d.fail(v, p, "must not be empty")
	}
	return s
}

// decodePort is a serve step's port: one a program without privileges may
// listen on.
func decodePort(d *decoder, v *jnode, p string, s *Step) {
	s.Port = d.integer(v, p)
	if v.kind == jNumber && (s.Port < 1024 || s.Port > 65535) {
		d.fail(v, p, "must be a port between 1024 and 65535, got %d", s.Port)
	}
}
