package task

import (
	"errors"
	"fmt"
	"image"
	"image/draw"
	"image/png"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// MaxFileSize is the largest task file Parse accepts.
const MaxFileSize = 4 << 20

// Load reads every *.json file under dir (subdirectories included, in path
// order), one task per file. It reports every problem it finds, each naming
// the file, line, column and field (a *FieldError), and returns no tasks
// unless all files are valid and all ids are unique.
func Load(dir string) ([]*Task, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("task directory: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("task directory %s is not a directory", dir)
	}
	var files []string
	err = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".json") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read task directory: %w", err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("task directory %s has no *.json task files", dir)
	}
	sort.Strings(files)
	var (
		tasks []*Task
		errs  []error
		seen  = map[string]*Task{}
	)
	for _, f := range files {
		data, err := readLimited(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		t, err := Parse(data, f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if prev, dup := seen[t.ID]; dup {
			fe := &FieldError{File: f, Field: "id", Msg: fmt.Sprintf("%q is already the id of %s; ids must be unique", t.ID, prev.Path)}
			fe.Line, fe.Col = idPosition(data)
			errs = append(errs, fe)
			continue
		}
		seen[t.ID] = t
		tasks = append(tasks, t)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return tasks, nil
}

func readLimited(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, &FieldError{File: name, Msg: fmt.Sprintf("cannot read: %v", err)}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, &FieldError{File: name, Msg: fmt.Sprintf("cannot read: %v", err)}
	}
	if st.Size() > MaxFileSize {
		return nil, &FieldError{File: name, Msg: fmt.Sprintf("is %d bytes; a task file may have at most %d", st.Size(), MaxFileSize)}
	}
	data := make([]byte, st.Size())
	if _, err := f.ReadAt(data, 0); err != nil && st.Size() > 0 {
		return nil, &FieldError{File: name, Msg: fmt.Sprintf("cannot read: %v", err)}
	}
	return data, nil
}

// idPosition finds the "id" field of a file that already parsed, for the
// duplicate-id error.
func idPosition(data []byte) (line, col int) {
	n, err := parseTree(data)
	if err != nil || n.kind != jObject {
		return 0, 0
	}
	d := newDecoder("", data)
	for _, k := range n.keys {
		if k.name == "id" {
			return d.pos(k.val.start)
		}
	}
	return 0, 0
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

var taskFields = []string{"id", "instruction", "setup", "evaluator", "max_steps", "timeout", "tags", "solution"}

// Parse decodes and validates one task. name is the file name used in errors
// and as the base for screen_region references; the error is a join of
// *FieldError values, one per problem.
func Parse(data []byte, name string) (*Task, error) {
	if len(data) > MaxFileSize {
		return nil, &FieldError{File: name, Msg: fmt.Sprintf("is %d bytes; a task file may have at most %d", len(data), MaxFileSize)}
	}
	d := newDecoder(name, data)
	root, err := parseTree(data)
	if err != nil {
		var oe *offsetError
		if errors.As(err, &oe) {
			d.failAt(oe.off, "", "%s", oe.msg)
		} else {
			d.fail(nil, "", "%s", err.Error())
		}
		return nil, d.err()
	}
	t := &Task{Path: name}
	f := d.object(root, "", "a task", taskFields)
	if f == nil {
		return nil, d.err()
	}
	if n, ok := f["id"]; !ok {
		d.fail(root, "id", "required: a name of letters, digits, '.', '_' and '-'")
	} else {
		t.ID = d.str(n, "id")
		switch {
		case n.kind != jString:
		case t.ID == "":
			d.fail(n, "id", "must not be empty")
		case len(t.ID) > 100:
			d.fail(n, "id", "is %d bytes long; at most 100", len(t.ID))
		case !idPattern.MatchString(t.ID):
			d.fail(n, "id", "%q may contain only letters, digits, '.', '_' and '-', and must start with a letter or digit", t.ID)
		}
	}
	if n, ok := f["instruction"]; !ok {
		d.fail(root, "instruction", "required: what the agent is asked to do")
	} else if t.Instruction = d.str(n, "instruction"); n.kind == jString && strings.TrimSpace(t.Instruction) == "" {
		d.fail(n, "instruction", "must not be empty")
	}
	if n, ok := f["setup"]; ok {
		if n.kind != jArray {
			d.fail(n, "setup", "must be an array of steps, got %s", n.kind)
		} else {
			for i, it := range n.items {
				t.Setup = append(t.Setup, d.step(it, index("setup", i)))
			}
		}
	}
	if n, ok := f["evaluator"]; !ok {
		d.fail(root, "evaluator", "required: the check that judges the result")
	} else {
		t.Evaluator = d.check(n, "evaluator", filepath.Dir(name), 0)
	}
	if n, ok := f["max_steps"]; ok {
		t.MaxSteps = d.integer(n, "max_steps")
		if t.MaxSteps < 0 || t.MaxSteps > 100000 {
			d.fail(n, "max_steps", "must be between 0 (no limit of its own) and 100000, got %d", t.MaxSteps)
		}
	}
	if n, ok := f["timeout"]; ok {
		t.Timeout = d.duration(n, "timeout", Duration(24*60*60*1e9))
	}
	if n, ok := f["tags"]; ok {
		t.Tags = d.strList(n, "tags")
		for i, tag := range t.Tags {
			if strings.TrimSpace(tag) == "" && n.items[i].kind == jString {
				d.fail(n.items[i], index("tags", i), "must not be empty")
			}
		}
	}
	if n, ok := f["solution"]; ok {
		if n.kind != jArray {
			d.fail(n, "solution", "must be an array of computer tool actions, got %s", n.kind)
		} else {
			for i, it := range n.items {
				p := index("solution", i)
				if it.kind != jObject {
					d.fail(it, p, "must be a computer tool action object such as {\"action\":\"key\",\"text\":\"Return\"}, got %s", it.kind)
					continue
				}
				var action *jnode
				for _, k := range it.keys {
					if k.name == "action" {
						action = k.val
					}
				}
				if action == nil {
					d.fail(it, join(p, "action"), "required: the action name, such as \"type\" or \"key\"")
				} else if action.kind != jString || action.str == "" {
					d.fail(action, join(p, "action"), "must be an action name such as \"type\" or \"key\", got %s", action.kind)
				}
				t.Solution = append(t.Solution, d.raw(it))
			}
		}
	}
	if err := d.err(); err != nil {
		return nil, err
	}
	return t, nil
}

var stepTypes = map[string][]string{
	StepLaunch:     {"argv", "command"},
	StepCommand:    {"command", "timeout"},
	StepWriteFile:  {"path", "content", "mode"},
	StepOpen:       {"path", "url", "with"},
	StepWaitWindow: {"contains", "matches", "ignore_case", "timeout"},
	StepSleep:      {"duration"},
}

var stepTypeNames = []string{StepLaunch, StepCommand, StepWriteFile, StepOpen, StepWaitWindow, StepSleep}

var stepFields = []string{"type", "argv", "command", "path", "content", "mode", "url", "with",
	"contains", "matches", "ignore_case", "duration", "timeout"}

func (d *decoder) step(n *jnode, path string) Step {
	var s Step
	f := d.object(n, path, "a setup step", stepFields)
	if f == nil {
		return s
	}
	tn, ok := f["type"]
	if !ok {
		d.fail(n, join(path, "type"), "required: one of %s", strings.Join(stepTypeNames, ", "))
		return s
	}
	s.Type = d.str(tn, join(path, "type"))
	uses, known := stepTypes[s.Type]
	if !known {
		if tn.kind == jString {
			msg := fmt.Sprintf("unknown step type %q", s.Type)
			if c := closest(s.Type, stepTypeNames); c != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", c)
			}
			d.fail(tn, join(path, "type"), "%s; step types are %s", msg, strings.Join(stepTypeNames, ", "))
		}
		return s
	}
	if !d.usedBy(n, f, path, []string{"type"}, uses, fmt.Sprintf("%q steps", s.Type)) {
		return s
	}
	get := func(name string) (*jnode, string, bool) {
		v, ok := f[name]
		return v, join(path, name), ok
	}
	if v, p, ok := get("argv"); ok {
		s.Argv = d.strList(v, p)
		if v.kind == jArray && len(s.Argv) == 0 {
			d.fail(v, p, "must name a program, such as [\"xterm\", \"-T\", \"work\"]")
		} else if len(s.Argv) > 0 && s.Argv[0] == "" {
			d.fail(v, index(p, 0), "the program name must not be empty")
		}
	}
	if v, p, ok := get("command"); ok {
		if s.Command = d.str(v, p); v.kind == jString && strings.TrimSpace(s.Command) == "" {
			d.fail(v, p, "must not be empty")
		}
	}
	if v, p, ok := get("path"); ok {
		if s.Path = d.str(v, p); v.kind == jString && s.Path == "" {
			d.fail(v, p, "must not be empty")
		}
	}
	if v, p, ok := get("content"); ok {
		s.Content = d.str(v, p)
	}
	if v, p, ok := get("mode"); ok {
		if s.Mode = d.str(v, p); v.kind == jString {
			if m, err := strconv.ParseUint(s.Mode, 8, 32); err != nil || m > 0o7777 {
				d.fail(v, p, "%q is not a file mode: write the permission bits in octal, as a string such as \"0644\" or \"0755\"", s.Mode)
			}
		}
	}
	if v, p, ok := get("url"); ok {
		if s.URL = d.str(v, p); v.kind == jString && !strings.Contains(s.URL, ":") {
			d.fail(v, p, "%q is not a URL: it needs a scheme, such as https://example.com or file:///tmp/page.html", s.URL)
		}
	}
	if v, p, ok := get("with"); ok {
		s.With = d.strList(v, p)
		if v.kind == jArray && (len(s.With) == 0 || s.With[0] == "") {
			d.fail(v, p, "must name a program, such as [\"mousepad\"]; leave it out to use xdg-open")
		}
	}
	if v, p, ok := get("contains"); ok {
		if s.Contains = d.str(v, p); v.kind == jString && s.Contains == "" {
			d.fail(v, p, "must not be empty")
		}
	}
	if v, p, ok := get("ignore_case"); ok {
		s.IgnoreCase = d.boolean(v, p)
	}
	if v, p, ok := get("matches"); ok {
		s.Matches = d.str(v, p)
		s.re = d.regexp(v, p, s.Matches, s.IgnoreCase)
	}
	if v, p, ok := get("duration"); ok {
		s.Duration = d.positiveDuration(v, p)
	}
	if v, p, ok := get("timeout"); ok {
		s.Timeout = d.positiveDuration(v, p)
	}
	switch s.Type {
	case StepLaunch:
		d.exactlyOne(n, f, path, "argv", "command")
	case StepCommand:
		d.required(n, f, path, "command", "the shell script to run")
	case StepWriteFile:
		d.required(n, f, path, "path", "the file to write")
	case StepOpen:
		d.exactlyOne(n, f, path, "path", "url")
	case StepWaitWindow:
		d.exactlyOne(n, f, path, "contains", "matches")
	case StepSleep:
		d.required(n, f, path, "duration", "how long to sleep, such as \"2s\"")
	}
	return s
}

// usedBy reports fields that exist but that this type does not use.
func (d *decoder) usedBy(n *jnode, f map[string]*jnode, path string, common, uses []string, what string) bool {
	ok := true
	for _, k := range n.keys {
		if _, present := f[k.name]; !present || slices.Contains(common, k.name) {
			continue
		}
		if !slices.Contains(uses, k.name) {
			d.failAt(k.off, join(path, k.name), "not used by %s (they use %s)", what, strings.Join(uses, ", "))
			ok = false
		}
	}
	return ok
}

func (d *decoder) required(n *jnode, f map[string]*jnode, path, field, what string) bool {
	if _, ok := f[field]; !ok {
		d.fail(n, join(path, field), "required: %s", what)
		return false
	}
	return true
}

func (d *decoder) exactlyOne(n *jnode, f map[string]*jnode, path, a, b string) {
	_, hasA := f[a]
	_, hasB := f[b]
	switch {
	case !hasA && !hasB:
		d.fail(n, join(path, a), "required: give %q or %q", a, b)
	case hasA && hasB:
		d.fail(f[b], join(path, b), "give either %q or %q, not both", a, b)
	}
}

func (d *decoder) regexp(n *jnode, path, expr string, ignoreCase bool) *regexp.Regexp {
	if n.kind != jString {
		return nil
	}
	if expr == "" {
		d.fail(n, path, "must not be empty")
		return nil
	}
	if ignoreCase {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		d.fail(n, path, "invalid regular expression (Go RE2 syntax): %s", strings.TrimPrefix(err.Error(), "error parsing regexp: "))
		return nil
	}
	return re
}

var commonCheckFields = []string{"type", "name", "weight"}

var checkTypes = map[string][]string{
	CheckAnd:               {"checks", "partial"},
	CheckOr:                {"checks"},
	CheckNot:               {"checks"},
	CheckFileExists:        {"path"},
	CheckFileContains:      {"path", "contains", "ignore_case"},
	CheckFileMatches:       {"path", "matches", "ignore_case"},
	CheckCommand:           {"command", "exit_code", "contains", "matches", "ignore_case", "timeout"},
	CheckWindowTitle:       {"contains", "matches", "ignore_case"},
	CheckClipboardContains: {"contains", "ignore_case", "selection"},
	CheckClipboardMatches:  {"matches", "ignore_case", "selection"},
	CheckScreenRegion:      {"region", "reference", "tolerance"},
}

var checkTypeNames = []string{CheckAnd, CheckOr, CheckNot, CheckFileExists, CheckFileContains, CheckFileMatches,
	CheckCommand, CheckWindowTitle, CheckClipboardContains, CheckClipboardMatches, CheckScreenRegion}

var checkFields = []string{"type", "name", "weight", "checks", "partial", "path", "contains", "matches",
	"ignore_case", "command", "exit_code", "timeout", "selection", "region", "reference", "tolerance"}

const maxCheckDepth = 16

func (d *decoder) check(n *jnode, path, base string, depth int) Check {
	var c Check
	f := d.object(n, path, "a check", checkFields)
	if f == nil {
		return c
	}
	tn, ok := f["type"]
	if !ok {
		d.fail(n, join(path, "type"), "required: one of %s", strings.Join(checkTypeNames, ", "))
		return c
	}
	c.Type = d.str(tn, join(path, "type"))
	uses, known := checkTypes[c.Type]
	if !known {
		if tn.kind == jString {
			msg := fmt.Sprintf("unknown check type %q", c.Type)
			if s := closest(c.Type, checkTypeNames); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			d.fail(tn, join(path, "type"), "%s; check types are %s", msg, strings.Join(checkTypeNames, ", "))
		}
		return c
	}
	if !d.usedBy(n, f, path, commonCheckFields, uses, fmt.Sprintf("%q checks", c.Type)) {
		return c
	}
	get := func(name string) (*jnode, string, bool) {
		v, ok := f[name]
		return v, join(path, name), ok
	}
	if v, p, ok := get("name"); ok {
		c.Name = d.str(v, p)
	}
	if v, p, ok := get("weight"); ok {
		w := d.number(v, p)
		if w < 0 {
			d.fail(v, p, "must not be negative, got %v", w)
		}
		c.Weight = &w
	}
	if v, p, ok := get("checks"); ok {
		switch {
		case v.kind != jArray:
			d.fail(v, p, "must be an array of checks, got %s", v.kind)
		case depth >= maxCheckDepth:
			d.fail(v, p, "checks are nested more than %d deep", maxCheckDepth)
		default:
			for i, it := range v.items {
				c.Checks = append(c.Checks, d.check(it, index(p, i), base, depth+1))
			}
		}
	}
	if v, p, ok := get("partial"); ok {
		c.Partial = d.boolean(v, p)
	}
	if v, p, ok := get("path"); ok {
		if c.Path = d.str(v, p); v.kind == jString && c.Path == "" {
			d.fail(v, p, "must not be empty")
		}
	}
	if v, p, ok := get("contains"); ok {
		if c.Contains = d.str(v, p); v.kind == jString && c.Contains == "" {
			d.fail(v, p, "must not be empty")
		}
	}
	if v, p, ok := get("ignore_case"); ok {
		c.IgnoreCase = d.boolean(v, p)
	}
	if v, p, ok := get("matches"); ok {
		c.Matches = d.str(v, p)
		c.re = d.regexp(v, p, c.Matches, c.IgnoreCase)
	}
	if v, p, ok := get("command"); ok {
		if c.Command = d.str(v, p); v.kind == jString && strings.TrimSpace(c.Command) == "" {
			d.fail(v, p, "must not be empty")
		}
	}
	if v, p, ok := get("exit_code"); ok {
		code := d.integer(v, p)
		if code < 0 || code > 255 {
			d.fail(v, p, "must be an exit status between 0 and 255, got %d", code)
		}
		c.ExitCode = &code
	}
	if v, p, ok := get("timeout"); ok {
		c.Timeout = d.positiveDuration(v, p)
	}
	if v, p, ok := get("selection"); ok {
		c.Selection = d.str(v, p)
		if v.kind == jString && c.Selection != "clipboard" && c.Selection != "primary" {
			d.fail(v, p, "must be \"clipboard\" or \"primary\", got %q", c.Selection)
		}
	}
	if v, p, ok := get("tolerance"); ok {
		tol := d.number(v, p)
		if tol < 0 || tol > 255 {
			d.fail(v, p, "must be a mean difference per colour channel between 0 and 255, got %v", tol)
		}
		c.Tolerance = &tol
	}
	if v, p, ok := get("region"); ok {
		c.Region = d.intList(v, p)
		if v.kind == jArray {
			if len(c.Region) != 4 {
				d.fail(v, p, "must be [x, y, width, height] in screen pixels, got %d numbers", len(c.Region))
			} else if c.Region[0] < 0 || c.Region[1] < 0 || c.Region[2] <= 0 || c.Region[3] <= 0 {
				d.fail(v, p, "must be [x, y, width, height] with x, y >= 0 and width, height > 0, got %v", c.Region)
			}
		}
	}
	if v, p, ok := get("reference"); ok {
		c.Reference = d.str(v, p)
		if v.kind == jString {
			if c.Reference == "" {
				d.fail(v, p, "must not be empty")
			} else if img, err := loadReference(base, c.Reference); err != nil {
				d.fail(v, p, "%s", err.Error())
			} else {
				c.ref = img
				if len(c.Region) == 4 && c.Region[2] > 0 && c.Region[3] > 0 {
					w, h := img.Bounds().Dx(), img.Bounds().Dy()
					if c.Region[2] != w || c.Region[3] != h {
						d.fail(f["region"], join(path, "region"), "is %dx%d but the reference image is %dx%d; they must be the same size", c.Region[2], c.Region[3], w, h)
					}
				}
			}
		}
	}

	switch c.Type {
	case CheckAnd, CheckOr:
		if d.required(n, f, path, "checks", "the checks to combine") && len(c.Checks) == 0 && f["checks"].kind == jArray {
			d.fail(f["checks"], join(path, "checks"), "must hold at least one check")
		}
		if c.Partial {
			sum := 0.0
			for _, ch := range c.Checks {
				sum += ch.WeightOrDefault()
			}
			if len(c.Checks) > 0 && sum == 0 {
				d.fail(f["checks"], join(path, "checks"), "all weights are 0, so a partial \"and\" could give no reward")
			}
		}
	case CheckNot:
		if d.required(n, f, path, "checks", "the one check to negate") && f["checks"].kind == jArray && len(f["checks"].items) != 1 {
			d.fail(f["checks"], join(path, "checks"), "\"not\" takes exactly one check, got %d", len(f["checks"].items))
		}
	case CheckFileExists:
		d.required(n, f, path, "path", "the file, such as \"~/notes.txt\"")
	case CheckFileContains:
		d.required(n, f, path, "path", "the file, such as \"~/notes.txt\"")
		d.required(n, f, path, "contains", "the text the file must contain")
	case CheckFileMatches:
		d.required(n, f, path, "path", "the file, such as \"~/notes.txt\"")
		d.required(n, f, path, "matches", "the regular expression the file must match")
	case CheckCommand:
		d.required(n, f, path, "command", "the shell script to run")
	case CheckWindowTitle:
		d.exactlyOne(n, f, path, "contains", "matches")
	case CheckClipboardContains:
		d.required(n, f, path, "contains", "the text the clipboard must contain")
	case CheckClipboardMatches:
		d.required(n, f, path, "matches", "the regular expression the clipboard must match")
	case CheckScreenRegion:
		d.required(n, f, path, "region", "[x, y, width, height] in screen pixels")
		d.required(n, f, path, "reference", "a PNG file relative to the task file")
	}
	return c
}

const maxReferenceSide = 8192

// loadReference reads a screen_region reference PNG.
func loadReference(base, name string) (*image.NRGBA, error) {
	p := name
	if !filepath.IsAbs(p) {
		p = filepath.Join(base, p)
	}
	f, err := os.Open(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("reference image %s does not exist (the path is relative to the task file)", p)
		}
		return nil, fmt.Errorf("cannot read reference image: %v", err)
	}
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	if err != nil {
		return nil, fmt.Errorf("reference image %s is not a PNG file: %v", p, err)
	}
	if cfg.Width > maxReferenceSide || cfg.Height > maxReferenceSide {
		return nil, fmt.Errorf("reference image %s is %dx%d; at most %dx%d", p, cfg.Width, cfg.Height, maxReferenceSide, maxReferenceSide)
	}
	if _, err := f.Seek(0, 0); err != nil {
		return nil, fmt.Errorf("cannot read reference image: %v", err)
	}
	img, err := png.Decode(f)
	if err != nil {
		return nil, fmt.Errorf("reference image %s is not a valid PNG file: %v", p, err)
	}
	if n, ok := img.(*image.NRGBA); ok && n.Rect.Min == (image.Point{}) {
		return n, nil
	}
	b := img.Bounds()
	out := image.NewNRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
	draw.Draw(out, out.Rect, img, b.Min, draw.Src)
	return out, nil
}
