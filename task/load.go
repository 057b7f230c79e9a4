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
	"strings"
)

// MaxFileSize is the largest task file Parse accepts.
const MaxFileSize = 4 << 20

// Load reads every *.json file under dir (subdirectories included, in path
// order), one task per file. It reports every problem it finds, each naming
// the file, line, column and field (a *FieldError), and returns no tasks
// unless all files are valid and all ids are unique.
func Load(dir string) ([]*Task, error) { return DefaultKinds().Load(dir) }

func load(k *Kinds, dir string) ([]*Task, error) {
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
		t, err := k.Parse(data, f)
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

// taskField is one top-level field of a task file: what to say when it is
// missing (empty: it may be left out) and how to decode it into the Task.
type taskField struct {
	name    string
	missing string
	decode  func(d *decoder, v *jnode, t *Task)
}

// taskFieldTable is the top-level fields in the order they are decoded and
// listed in messages.
func taskFieldTable() []taskField {
	return []taskField{
		{"id", "required: a name of letters, digits, '.', '_' and '-'", decodeID},
		{"instruction", "required: what the agent is asked to do", decodeInstruction},
		{"setup", "", decodeSetup},
		{"evaluator", "required: the check that judges the result", func(d *decoder, v *jnode, t *Task) {
			t.Evaluator = d.check(v, "evaluator", filepath.Dir(t.Path), 0)
		}},
		{"max_steps", "", decodeMaxSteps},
		{"timeout", "", func(d *decoder, v *jnode, t *Task) { t.Timeout = d.duration(v, "timeout", Duration(24*60*60*1e9)) }},
		{"tags", "", decodeTags},
		{"solution", "", decodeSolution},
		{"params", "", func(d *decoder, v *jnode, t *Task) { t.Params = d.params(v) }},
	}
}

// Parse decodes and validates one task with the built-in kinds. name is the
// file name used in errors and as the base for screen_region references; the
// error is a join of *FieldError values, one per problem.
func Parse(data []byte, name string) (*Task, error) { return DefaultKinds().Parse(data, name) }

func parse(k *Kinds, data []byte, name string) (*Task, error) {
	return parseWith(k, data, name, nil, nil)
}

// parseRendered decodes data, the rendering of the task file source with
// its parameters' values, with errors located in source.
func parseRendered(k *Kinds, data []byte, name string, source []byte, spans []span) (*Task, error) {
	return parseWith(k, data, name, source, spans)
}

func parseWith(k *Kinds, data []byte, name string, source []byte, spans []span) (*Task, error) {
	if len(data) > MaxFileSize {
		return nil, &FieldError{File: name, Msg: fmt.Sprintf("is %d bytes; a task file may have at most %d", len(data), MaxFileSize)}
	}
	d := newDecoder(name, data)
	d.kinds, d.checkTable, d.stepTable = k, checkFieldTable(), stepFieldTable()
	if source != nil {
		// The rendering of a task with parameters: errors point into the
		// file as written.
		src := newDecoder(name, source)
		d.src, d.lines, d.remap, d.spans = source, src.lines, remap(spans), spans
	}
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
	if source == nil && root.kind == jObject {
		// A task with parameters: check them and every template, and
		// decode the rendering with each parameter's first value, so a
		// template that cannot work fails the load, not an episode.
		for _, key := range root.keys {
			if key.name != "params" {
				continue
			}
			ps := d.params(key.val)
			if err := d.err(); err != nil {
				return nil, err
			}
			first := make(Values, len(ps))
			for n, p := range ps {
				first[n] = p.first()
			}
			out, spans := d.render(root, first)
			if err := d.err(); err != nil {
				return nil, err
			}
			if len(spans) == 0 {
				break // no templates: the file is its own rendering
			}
			t, err := parseRendered(k, out, name, data, spans)
			if err != nil {
				return nil, err
			}
			t.source, t.kinds = data, k
			return t, nil
		}
	}
	t := &Task{Path: name}
	fields := taskFieldTable()
	names := make([]string, len(fields))
	for i, tf := range fields {
		names[i] = tf.name
	}
	f := d.object(root, "", "a task", names)
	if f == nil {
		return nil, d.err()
	}
	for _, tf := range fields {
		if v, ok := f[tf.name]; ok {
			tf.decode(d, v, t)
		} else if tf.missing != "" {
			d.fail(root, tf.name, "%s", tf.missing)
		}
	}
	if err := d.err(); err != nil {
		return nil, err
	}
	return t, nil
}

func decodeID(d *decoder, n *jnode, t *Task) {
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

func decodeInstruction(d *decoder, n *jnode, t *Task) {
	if t.Instruction = d.str(n, "instruction"); n.kind == jString && strings.TrimSpace(t.Instruction) == "" {
		d.fail(n, "instruction", "must not be empty")
	}
}

func decodeSetup(d *decoder, n *jnode, t *Task) {
	if n.kind != jArray {
		d.fail(n, "setup", "must be an array of steps, got %s", n.kind)
		return
	}
	for i, it := range n.items {
		t.Setup = append(t.Setup, d.step(it, index("setup", i)))
	}
}

func decodeMaxSteps(d *decoder, n *jnode, t *Task) {
	t.MaxSteps = d.integer(n, "max_steps")
	if t.MaxSteps < 0 || t.MaxSteps > 100000 {
		d.fail(n, "max_steps", "must be between 0 (no limit of its own) and 100000, got %d", t.MaxSteps)
	}
}

func decodeTags(d *decoder, n *jnode, t *Task) {
	t.Tags = d.strList(n, "tags")
	for i, tag := range t.Tags {
		if strings.TrimSpace(tag) == "" && n.items[i].kind == jString {
			d.fail(n.items[i], index("tags", i), "must not be empty")
		}
	}
}

// decodeSolution keeps each action as raw JSON, checking only that it is
// an object naming an action: hci checks the rest when it is replayed.
func decodeSolution(d *decoder, n *jnode, t *Task) {
	if n.kind != jArray {
		d.fail(n, "solution", "must be an array of computer tool actions, got %s", n.kind)
		return
	}
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

// step decodes one setup step: its type names its kind, the kind says which
// fields it takes and needs, and the field table decodes them.
func (d *decoder) step(n *jnode, path string) Step {
	var s Step
	f := d.object(n, path, "a setup step", stepFields)
	if f == nil {
		return s
	}
	var ok bool
	if s.Type, ok = d.kindName(n, f, path, "step", d.kinds.stepNames); !ok {
		return s
	}
	k := d.kinds.steps[s.Type]
	if !d.usedBy(n, f, path, []string{"type"}, k.fields, fmt.Sprintf("%q steps", s.Type)) {
		return s
	}
	s.kind = k
	for _, sf := range d.stepTable {
		if v, ok := f[sf.name]; ok {
			sf.decode(d, v, join(path, sf.name), &s)
		}
	}
	d.needs(site{n: n, f: f, path: path}, k.needs)
	return s
}

// check decodes one check, as step does a step; and, or and not decode
// their checks through it again, at most maxCheckDepth deep.
func (d *decoder) check(n *jnode, path, base string, depth int) Check {
	var c Check
	f := d.object(n, path, "a check", checkFields)
	if f == nil {
		return c
	}
	var ok bool
	if c.Type, ok = d.kindName(n, f, path, "check", d.kinds.checkNames); !ok {
		return c
	}
	k := d.kinds.checks[c.Type]
	if !d.usedBy(n, f, path, commonCheckFields, k.Fields, fmt.Sprintf("%q checks", c.Type)) {
		return c
	}
	c.kind = k
	at := site{n: n, f: f, path: path, base: base, depth: depth}
	for _, cf := range d.checkTable {
		if v, ok := f[cf.name]; ok {
			cf.decode(d, v, join(path, cf.name), &c, at)
		}
	}
	d.needs(at, k.Needs)
	if k.validate != nil {
		k.validate(d, at, &c)
	}
	return c
}

// kindName reads the "type" of a step or check (noun) and reports it
// missing or unknown; ok says it names one of known.
func (d *decoder) kindName(n *jnode, f map[string]*jnode, path, noun string, known []string) (name string, ok bool) {
	tn, given := f["type"]
	if !given {
		d.fail(n, join(path, "type"), "required: one of %s", strings.Join(known, ", "))
		return "", false
	}
	name = d.str(tn, join(path, "type"))
	if slices.Contains(known, name) {
		return name, true
	}
	if tn.kind == jString {
		msg := fmt.Sprintf("unknown %s type %q", noun, name)
		if s := closest(name, known); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		d.fail(tn, join(path, "type"), "%s; %s types are %s", msg, noun, strings.Join(known, ", "))
	}
	return name, false
}

// needs reports the required fields a step or check lacks.
func (d *decoder) needs(at site, needs []Need) {
	for _, nd := range needs {
		if nd.other != "" {
			d.exactlyOne(at.n, at.f, at.path, nd.field, nd.other)
		} else {
			d.required(at.n, at.f, at.path, nd.field, nd.what)
		}
	}
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

func (d *decoder) required(n *jnode, f map[string]*jnode, path, field, what string) {
	if _, ok := f[field]; !ok {
		d.fail(n, join(path, field), "required: %s", what)
	}
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
