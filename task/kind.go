package task

import (
	"context"
	"fmt"
	"maps"
	"slices"
)

// CheckKind is one type of check, described once: the fields it takes, which
// of them it needs, how a reader names it and how it looks at the desktop.
// Parse, the error messages for a bad task file and Evaluate all read it, so a
// new checker is one CheckKind and the function it evaluates with.
type CheckKind struct {
	// Name is the "type" a task file gives.
	Name string
	// Fields are the Check fields it takes (their JSON names), besides type,
	// name and weight, which every check takes. Parse rejects any other.
	Fields []string
	// Needs are the fields that must be given.
	Needs []Need
	// Describe names the check in Reasons, such as `file_contains ~/a.txt`;
	// nil uses the type.
	Describe func(c *Check) string
	// Evaluate looks at the desktop through env: ok when the check holds, a
	// detail saying what was found, and an error only when it could not look.
	Evaluate func(ctx context.Context, env Env, c *Check) (ok bool, detail string, err error)

	// combines marks and, or and not, whose reward comes from their checks'.
	combines bool
	// validate checks what Needs cannot say, such as "exactly one check".
	validate func(d *decoder, at site, c *Check)
}

// stepKind is one type of setup step: its fields, the fields it needs and
// how it runs.
type stepKind struct {
	name   string
	fields []string
	needs  []Need
	run    func(ctx context.Context, r *setupRun, s *Step) error
}

// Need is a condition on the fields a step or check gives: one field that
// is required, or a choice of exactly one of two.
type Need struct {
	field, other string // other: the alternative of a choice
	what         string // for a required field: what to give, in the error
}

// Required is a field that must be given; what says what it holds, such as
// "the file, such as \"~/notes.txt\"".
func Required(field, what string) Need { return Need{field: field, what: what} }

// OneOf is a choice: exactly one of a and b must be given.
func OneOf(a, b string) Need { return Need{field: a, other: b} }

// Kinds is the set of step and check types a task file may use. The zero
// value knows none; DefaultKinds has the built-in ones, and a caller (a
// test, a program with checks of its own) adds more with AddCheck. A Kinds
// is not safe to change while it parses.
type Kinds struct {
	checks     map[string]*CheckKind
	checkNames []string // in the order they were added, for messages
	steps      map[string]*stepKind
	stepNames  []string
}

// builtin is the built-in kinds, made once. Nothing changes it: DefaultKinds
// hands out copies. Sharing the kinds keeps two parses of one file equal.
var builtin = newBuiltin()

// DefaultKinds returns a new Kinds with the built-in step and check types,
// the ones docs/TASKS.md describes.
func DefaultKinds() *Kinds { return builtin.Clone() }

func newBuiltin() *Kinds {
	k := &Kinds{checks: map[string]*CheckKind{}, steps: map[string]*stepKind{}}
	for _, ck := range builtinChecks() {
		if err := k.AddCheck(ck); err != nil {
			panic("task: built-in check kind: " + err.Error()) // the table in checks.go is wrong
		}
	}
	for _, sk := range builtinSteps() {
		k.steps[sk.name] = &sk
		k.stepNames = append(k.stepNames, sk.name)
	}
	return k
}

// Clone returns a copy that can be extended without changing k.
func (k *Kinds) Clone() *Kinds {
	return &Kinds{
		checks: maps.Clone(k.checks), checkNames: slices.Clone(k.checkNames),
		steps: maps.Clone(k.steps), stepNames: slices.Clone(k.stepNames),
	}
}

// AddCheck adds a check type. Its name must be new, its fields Check fields
// and its Needs among its fields, and it must have an Evaluate.
func (k *Kinds) AddCheck(ck CheckKind) error {
	if ck.Name == "" {
		return fmt.Errorf("check kind has no name")
	}
	if _, dup := k.checks[ck.Name]; dup {
		return fmt.Errorf("check kind %q exists already", ck.Name)
	}
	if ck.Evaluate == nil && !ck.combines {
		return fmt.Errorf("check kind %q has no Evaluate", ck.Name)
	}
	for _, f := range ck.Fields {
		if !slices.Contains(checkFields, f) || slices.Contains(commonCheckFields, f) {
			return fmt.Errorf("check kind %q: %q is not a field a check kind may take (those are %v)", ck.Name, f, checkFields[len(commonCheckFields):])
		}
	}
	for _, n := range ck.Needs {
		if !slices.Contains(ck.Fields, n.field) || (n.other != "" && !slices.Contains(ck.Fields, n.other)) {
			return fmt.Errorf("check kind %q needs a field it does not take: %+v", ck.Name, n)
		}
	}
	k.checks[ck.Name] = &ck
	k.checkNames = append(k.checkNames, ck.Name)
	return nil
}

// Parse decodes and validates one task using these kinds; see the package
// function Parse.
func (k *Kinds) Parse(data []byte, name string) (*Task, error) { return parse(k, data, name) }

// Load reads a task directory using these kinds; see the package function
// Load.
func (k *Kinds) Load(dir string) ([]*Task, error) { return load(k, dir) }

// kindOf is the kind of c: the one Parse found, or for a Check built in code
// the built-in one of its type (nil when there is none).
func (c *Check) kindOf() *CheckKind {
	if c.kind != nil {
		return c.kind
	}
	return builtin.checks[c.Type]
}

// kindOf is the kind of s, as for a Check.
func (s *Step) kindOf() *stepKind {
	if s.kind != nil {
		return s.kind
	}
	return builtin.steps[s.Type]
}
