package task

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// Param is one declared parameter of a task: a list of choices, or an
// inclusive range of numbers (whole numbers unless Step is given).
type Param struct {
	// Choices are all strings or all numbers (int64 or float64).
	Choices []any `json:"choices,omitempty"`
	// Min and Max bound a range; Step is its spacing (default 1).
	Min  *float64 `json:"min,omitempty"`
	Max  *float64 `json:"max,omitempty"`
	Step *float64 `json:"step,omitempty"`
}

// Values are the values drawn for a task's parameters, by name: a string,
// an int64 or a float64.
type Values map[string]any

// Limits of templates. A template runs Starlark over values an author chose,
// but task files come from anyone who may write a task directory, so a
// template must not be able to hang a load or exhaust memory.
const (
	maxParams        = 64
	maxChoices       = 10000
	maxTemplateSteps = 1000000 // Starlark steps for all the templates of a task
	maxRepeat        = 1 << 20 // elements of a string or list made by * (and range)
)

// isStarlarkKeyword says whether name is one of Starlark's keywords or
// reserved words, which cannot name a value in an expression.
func isStarlarkKeyword(name string) bool {
	return slices.Contains(strings.Fields("and break continue def elif else for if in lambda load not or pass return while as assert async await class del except finally from global import is nonlocal raise try with yield None True False"), name)
}

var paramName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// paramFields are the fields a parameter may have.
var paramFields = []string{"choices", "min", "max", "step"}

// params decodes the "params" object: each name an identifier Starlark
// can use, each parameter either choices or a range.
func (d *decoder) params(n *jnode) map[string]Param {
	if n.kind != jObject {
		d.fail(n, "params", "must be an object of parameters such as {\"n\": {\"min\": 2, \"max\": 9}}, got %s", n.kind)
		return nil
	}
	if len(n.keys) > maxParams {
		d.fail(n, "params", "has %d parameters; at most %d", len(n.keys), maxParams)
		return nil
	}
	out := make(map[string]Param, len(n.keys))
	for _, k := range n.keys {
		path := join("params", k.name)
		if _, dup := out[k.name]; dup {
			d.failAt(k.off, path, "given twice")
			continue
		}
		if !paramName.MatchString(k.name) || isStarlarkKeyword(k.name) || isReserved(k.name) {
			d.failAt(k.off, path, "%q is not a usable parameter name: use letters, digits and '_', starting with a letter or '_', and not a Starlark keyword or %q", k.name, "range")
			continue
		}
		if p, ok := d.param(k.val, path); ok {
			out[k.name] = p
		}
	}
	return out
}

func isReserved(name string) bool {
	// Templates get a bounded range and a guard for repetition under these
	// names; a parameter may not shadow them.
	return name == "range" || name == "_repeat" || name == "_format"
}

func (d *decoder) param(n *jnode, path string) (Param, bool) {
	var p Param
	before := len(d.errs)
	f := d.object(n, path, "a parameter", paramFields)
	if f == nil || len(d.errs) > before {
		return p, false
	}
	if c, ok := f["choices"]; ok {
		for _, other := range []string{"min", "max", "step"} {
			if _, both := f[other]; both {
				d.fail(f[other], join(path, other), "give either \"choices\" or \"min\"/\"max\", not both")
			}
		}
		p.Choices = d.choices(c, join(path, "choices"))
		return p, len(d.errs) == before
	}
	lo, hasMin := f["min"]
	hi, hasMax := f["max"]
	if !hasMin || !hasMax {
		d.fail(n, path, "needs \"choices\" (a list) or both \"min\" and \"max\"")
		return p, false
	}
	vmin, vmax := d.number(lo, join(path, "min")), d.number(hi, join(path, "max"))
	p.Min, p.Max = &vmin, &vmax
	if s, ok := f["step"]; ok {
		v := d.number(s, join(path, "step"))
		if s.kind == jNumber && v <= 0 {
			d.fail(s, join(path, "step"), "must be more than 0, got %s", s.num)
		}
		p.Step = &v
	} else {
		for _, b := range []struct {
			n *jnode
			v float64
			f string
		}{{lo, vmin, "min"}, {hi, vmax, "max"}} {
			if b.n.kind == jNumber && b.v != math.Trunc(b.v) {
				d.fail(b.n, join(path, b.f), "must be a whole number (give \"step\" for a range of fractions), got %s", b.n.num)
			}
		}
	}
	if len(d.errs) > before {
		return p, false
	}
	if vmin > vmax {
		d.fail(lo, join(path, "min"), "%v is more than max %v", vmin, vmax)
		return p, false
	}
	if math.Abs(vmax) > 1<<53 || math.Abs(vmin) > 1<<53 {
		d.fail(lo, path, "min and max must lie within ±2^53")
		return p, false
	}
	if p.count() > 1<<53 {
		d.fail(n, path, "has too many values; use a larger step")
		return p, false
	}
	return p, true
}

// choices reads a non-empty list of all strings or all numbers.
func (d *decoder) choices(n *jnode, path string) []any {
	if n.kind != jArray {
		d.fail(n, path, "must be an array of strings or of numbers, got %s", n.kind)
		return nil
	}
	if len(n.items) == 0 {
		d.fail(n, path, "must not be empty")
		return nil
	}
	if len(n.items) > maxChoices {
		d.fail(n, path, "has %d choices; at most %d", len(n.items), maxChoices)
		return nil
	}
	out := make([]any, 0, len(n.items))
	first := n.items[0].kind
	for i, it := range n.items {
		p := index(path, i)
		switch {
		case it.kind != jString && it.kind != jNumber:
			d.fail(it, p, "must be a string or a number, got %s", it.kind)
		case it.kind != first:
			d.fail(it, p, "is %s but the first choice is %s; choices are all strings or all numbers", it.kind, first)
		case it.kind == jString:
			if strings.Contains(it.str, "{{") {
				d.fail(it, p, "must not contain \"{{\" (a choice is a value, not a template)")
			}
			out = append(out, it.str)
		default:
			// A whole number is an int64 however it is written (3, 3.0,
			// 3e0), so it reads the same after json.Marshal.
			if v, err := strconv.ParseInt(string(it.num), 10, 64); err == nil {
				out = append(out, v)
			} else if f := d.number(it, p); f == math.Trunc(f) && math.Abs(f) < 1<<53 {
				out = append(out, int64(f))
			} else {
				out = append(out, f)
			}
		}
	}
	return out
}

// count is how many values a range has.
func (p Param) count() float64 {
	step := 1.0
	if p.Step != nil {
		step = *p.Step
	}
	return math.Floor((*p.Max-*p.Min)/step+1e-9) + 1
}

// first is the value Parse renders with: the first choice or the minimum.
func (p Param) first() any {
	if p.Choices != nil {
		return p.Choices[0]
	}
	return p.at(0)
}

// at is the i-th value of a range.
func (p Param) at(i int64) any {
	if p.Step == nil {
		return int64(*p.Min) + i
	}
	v := *p.Min + float64(i)**p.Step
	// Whole min and step give whole numbers; otherwise round away the
	// float error of the multiplication (10 + 3*0.1 is 10.300000000000001).
	if *p.Min == math.Trunc(*p.Min) && *p.Step == math.Trunc(*p.Step) {
		return int64(v)
	}
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'f', 9, 64), 64)
	return r
}

// draw picks one value with rng.
func (p Param) draw(rng *rand.Rand) any {
	if p.Choices != nil {
		return p.Choices[rng.IntN(len(p.Choices))]
	}
	return p.at(rng.Int64N(int64(p.count())))
}

// Draw picks the values of the task's parameters for a seed. The generator
// is seeded from the seed and the task's id, and the parameters are drawn
// in name order, so a seed gives the same values for a task however many
// other tasks there are and whatever order its file lists them in.
func (t *Task) Draw(seed int64) Values {
	if len(t.Params) == 0 {
		return Values{}
	}
	h := fnv.New64a()
	h.Write([]byte(t.ID))
	rng := rand.New(rand.NewPCG(uint64(seed), h.Sum64()))
	names := make([]string, 0, len(t.Params))
	for n := range t.Params {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make(Values, len(names))
	for _, n := range names {
		out[n] = t.Params[n].draw(rng)
	}
	return out
}

// Instantiate renders the task for a seed: the values Draw picks replace
// the templates in every string of the instruction, setup, evaluator and
// solution, in a new Task (t is not changed). A task without parameters is
// returned as it is. An error is a rendered value the file format refuses
// (say, a template that makes an invalid regular expression for this seed).
func (t *Task) Instantiate(seed int64) (*Task, Values, error) {
	vals := t.Draw(seed)
	if t.source == nil {
		return t, vals, nil
	}
	nt, err := renderTask(t.kinds, t.source, t.Path, vals)
	if err != nil {
		return nil, nil, fmt.Errorf("task %s with seed %d (%s): %w", t.ID, seed, vals, err)
	}
	return nt, vals, nil
}

func (v Values) String() string {
	b, _ := json.Marshal(map[string]any(v))
	return string(b)
}

// renderTask renders a task file that declares parameters with vals and
// decodes the result as an ordinary file, its errors pointing into source.
func renderTask(k *Kinds, source []byte, name string, vals Values) (*Task, error) {
	root, err := parseTree(source)
	if err != nil {
		return nil, err
	}
	d := newDecoder(name, source)
	out, spans := d.render(root, vals)
	if err := d.err(); err != nil {
		return nil, err
	}
	// The rendering is a task of its own: it marshals as what it is.
	return parseRendered(k, out, name, source, spans)
}

// MarshalJSON writes a task with templates as its file was written (its
// params and templates, which Parse accepts again and renders the same),
// and any other task field by field.
func (t Task) MarshalJSON() ([]byte, error) {
	if t.source != nil {
		var b bytes.Buffer
		if err := json.Compact(&b, t.source); err != nil {
			return nil, err
		}
		return b.Bytes(), nil
	}
	type plain Task
	return json.Marshal(plain(t))
}

// templated is the parts of a task whose strings may be templates: the
// four the format names, and the two numbers an episode's size may
// depend on.
var templated = []string{"instruction", "setup", "evaluator", "solution", "max_steps", "timeout"}

// span is one replaced string: [at, at+newLen) in the rendered file was
// [orig, origEnd) in the source.
type span struct {
	at, newLen, orig, origEnd int
	number                    bool // rendered as a JSON number, not a string
}

// render replaces every string with a template under the templated fields
// by its rendering, recording errors at the string.
func (d *decoder) render(root *jnode, vals Values) ([]byte, []span) {
	var nodes []renderNode
	for _, k := range root.keys {
		if slices.Contains(templated, k.name) {
			collectStrings(k.val, k.name, k.name == "solution", "", &nodes)
		}
	}
	env, th := starlarkEnv(vals), templateThread()
	var (
		out   bytes.Buffer
		spans []span
		last  int
	)
	for _, rn := range nodes {
		n := rn.n
		if !strings.Contains(n.str, "{{") {
			continue
		}
		text, num, err := renderString(n.str, env, th, rn.keepString)
		if err != nil {
			d.fail(n, rn.path, "%s", err)
			continue
		}
		out.Write(d.data[last:n.start])
		s := span{at: out.Len(), orig: n.start, origEnd: n.end, number: num != ""}
		if num != "" {
			out.WriteString(num)
		} else {
			q, _ := json.Marshal(text)
			out.Write(q)
		}
		s.newLen = out.Len() - s.at
		spans = append(spans, s)
		last = n.end
	}
	out.Write(d.data[last:])
	return out.Bytes(), spans
}

type renderNode struct {
	n          *jnode
	path       string
	keepString bool
}

// collectStrings lists the string values under n in file order. In a
// solution, an action's "text" stays a string even when its template
// gives a number (typing "42" is typing text).
func collectStrings(n *jnode, path string, solution bool, key string, out *[]renderNode) {
	switch n.kind {
	case jString:
		*out = append(*out, renderNode{n, path, solution && (key == "text" || key == "action" || key == "key")})
	case jArray:
		for i, it := range n.items {
			collectStrings(it, index(path, i), solution, key, out)
		}
	case jObject:
		for _, k := range n.keys {
			collectStrings(k.val, join(path, k.name), solution, k.name, out)
		}
	}
}

// template is one {{ expr }} in a string, as byte offsets into it.
type template struct {
	start, end int // the whole "{{ ... }}"
	expr       string
}

func splitTemplates(s string) ([]template, error) {
	var out []template
	for i := 0; ; {
		j := strings.Index(s[i:], "{{")
		if j < 0 {
			return out, nil
		}
		j += i
		k := strings.Index(s[j+2:], "}}")
		if k < 0 {
			return nil, fmt.Errorf("template at byte %d has no closing \"}}\"", j)
		}
		k += j + 2
		expr := strings.TrimSpace(s[j+2 : k])
		if expr == "" {
			return nil, fmt.Errorf("template at byte %d is empty", j)
		}
		out = append(out, template{j, k + 2, expr})
		i = k + 2
	}
}

// renderString renders the templates in s. When s is exactly one template
// whose value is a number or boolean and keepString is false, num is its
// JSON text: that is how a number field takes a parameter.
func renderString(s string, env starlark.StringDict, th *starlark.Thread, keepString bool) (text, num string, err error) {
	tpls, err := splitTemplates(s)
	if err != nil {
		return "", "", err
	}
	var b strings.Builder
	last := 0
	for _, tp := range tpls {
		v, err := evalTemplate(tp.expr, env, th)
		if err != nil {
			return "", "", fmt.Errorf("template {{ %s }}: %w", tp.expr, err)
		}
		if len(tpls) == 1 && !keepString && s == s[tp.start:tp.end] {
			switch v := v.(type) {
			case starlark.Int:
				return "", v.String(), nil
			case starlark.Float:
				f := float64(v)
				if math.IsInf(f, 0) || math.IsNaN(f) {
					return "", "", fmt.Errorf("template {{ %s }} gives %v, which JSON cannot hold", tp.expr, f)
				}
				return "", strconv.FormatFloat(f, 'g', -1, 64), nil
			case starlark.Bool:
				return "", v.String(), nil
			}
		}
		b.WriteString(s[last:tp.start])
		if str, ok := v.(starlark.String); ok {
			b.WriteString(string(str))
		} else {
			b.WriteString(v.String())
		}
		if b.Len() > MaxFileSize {
			return "", "", fmt.Errorf("renders to more than %d bytes", MaxFileSize)
		}
		last = tp.end
	}
	b.WriteString(s[last:])
	return b.String(), "", nil
}

// templateThread runs the templates of one rendering. Its step count adds
// up over them, so the limit bounds the whole task file (a file of many
// templates cannot take longer than one).
func templateThread() *starlark.Thread {
	th := &starlark.Thread{
		Name:  "template",
		Print: func(*starlark.Thread, string) {},
		Load: func(*starlark.Thread, string) (starlark.StringDict, error) {
			return nil, fmt.Errorf("load is not allowed in templates")
		},
	}
	th.SetMaxExecutionSteps(maxTemplateSteps)
	return th
}

func starlarkEnv(vals Values) starlark.StringDict {
	env := starlark.StringDict{
		"range":   starlark.NewBuiltin("range", boundedRange),
		"_repeat": starlark.NewBuiltin("_repeat", guardedRepeat),
		"_format": starlark.NewBuiltin("_format", printf),
	}
	for k, v := range vals {
		switch v := v.(type) {
		case string:
			env[k] = starlark.String(v)
		case int64:
			env[k] = starlark.MakeInt64(v)
		case float64:
			env[k] = starlark.Float(v)
		}
	}
	return env
}

var templateOptions = &syntax.FileOptions{}

// evalTemplate evaluates one expression hermetically: only Starlark's core
// built-ins and the parameters, no load, print discarded, a bounded number
// of steps, and * and range bounded in size (Starlark allows a billion
// elements, which would take gigabytes before any step limit applies).
func evalTemplate(src string, env starlark.StringDict, th *starlark.Thread) (starlark.Value, error) {
	expr, err := templateOptions.ParseExpr("template", src, 0)
	if err != nil {
		return nil, fmt.Errorf("does not compile: %w", err)
	}
	expr = guardRepeats(expr)
	v, err := starlark.EvalExprOptions(templateOptions, th, expr, env)
	if err != nil {
		if ee, ok := err.(*starlark.EvalError); ok {
			return nil, fmt.Errorf("%s", ee.Msg)
		}
		return nil, err
	}
	return v, nil
}

// guardRepeats replaces every a * b by _repeat(a, b), so that the size of
// a repeated string or list is checked before it is made, and every a % b
// by _format(a, b), Python's printf (Starlark's % has no width or
// precision, and "%.2f" % price is how a price is written). It returns the
// expression to evaluate, which is e itself unless e is such an operation.
func guardRepeats(e syntax.Expr) syntax.Expr {
	call := func(p *syntax.Expr) {
		b, ok := (*p).(*syntax.BinaryExpr)
		if !ok || (b.Op != syntax.STAR && b.Op != syntax.PERCENT) {
			return
		}
		fn := "_repeat"
		if b.Op == syntax.PERCENT {
			fn = "_format"
		}
		*p = &syntax.CallExpr{
			Fn:     &syntax.Ident{NamePos: b.OpPos, Name: fn},
			Lparen: b.OpPos, Rparen: b.OpPos,
			Args: []syntax.Expr{b.X, b.Y},
		}
	}
	root := &syntax.ParenExpr{X: e}
	syntax.Walk(root, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.ParenExpr:
			call(&n.X)
		case *syntax.BinaryExpr:
			call(&n.X)
			call(&n.Y)
		case *syntax.UnaryExpr:
			if n.X != nil {
				call(&n.X)
			}
		case *syntax.CallExpr:
			call(&n.Fn)
			for i := range n.Args {
				call(&n.Args[i])
			}
		case *syntax.CondExpr:
			call(&n.Cond)
			call(&n.True)
			call(&n.False)
		case *syntax.Comprehension:
			call(&n.Body)
		case *syntax.ForClause:
			call(&n.X)
		case *syntax.IfClause:
			call(&n.Cond)
		case *syntax.DictEntry:
			call(&n.Key)
			call(&n.Value)
		case *syntax.DotExpr:
			call(&n.X)
		case *syntax.IndexExpr:
			call(&n.X)
			call(&n.Y)
		case *syntax.LambdaExpr:
			for i := range n.Params {
				call(&n.Params[i])
			}
			call(&n.Body)
		case *syntax.ListExpr:
			for i := range n.List {
				call(&n.List[i])
			}
		case *syntax.TupleExpr:
			for i := range n.List {
				call(&n.List[i])
			}
		case *syntax.SliceExpr:
			for _, p := range []*syntax.Expr{&n.X, &n.Lo, &n.Hi, &n.Step} {
				if *p != nil {
					call(p)
				}
			}
		}
		return true
	})
	return root.X
}

func guardedRepeat(_ *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) != 2 || len(kwargs) != 0 {
		return nil, fmt.Errorf("_repeat takes two arguments")
	}
	x, y := args[0], args[1]
	for _, p := range [][2]starlark.Value{{x, y}, {y, x}} {
		seq, isSeq := p[0].(starlark.Sequence)
		_, isStr := p[0].(starlark.String)
		n, isInt := p[1].(starlark.Int)
		if !(isSeq || isStr) || !isInt {
			continue
		}
		k, ok := n.Int64()
		size := int64(0)
		if isStr {
			size = int64(len(p[0].(starlark.String)))
		} else {
			size = int64(seq.Len())
		}
		if !ok || (k > 0 && size > 0 && (k > maxRepeat || size*k > maxRepeat)) {
			return nil, fmt.Errorf("repetition would make more than %d elements", maxRepeat)
		}
	}
	return starlark.Binary(syntax.STAR, x, y)
}

func boundedRange(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	r, err := starlark.Call(th, starlark.Universe["range"], args, kwargs)
	if err != nil {
		return nil, err
	}
	if r.(starlark.Sequence).Len() > maxRepeat {
		return nil, fmt.Errorf("range of more than %d elements", maxRepeat)
	}
	return r, nil
}

// remap turns an offset in the rendered file into one in the source: inside
// a replaced string, the string's start.
func remap(spans []span) func(int) int {
	return func(off int) int {
		shift := 0
		for _, s := range spans {
			if off < s.at {
				break
			}
			if off < s.at+s.newLen {
				return s.orig
			}
			shift = s.origEnd - (s.at + s.newLen)
		}
		return off + shift
	}
}

// numberFromTemplate says whether the number at off of the rendered file
// was a string holding one template, so a string field takes it as text.
func numberFromTemplate(spans []span, off int) bool {
	i := sort.Search(len(spans), func(i int) bool { return spans[i].at >= off })
	return i < len(spans) && spans[i].at == off && spans[i].number
}
