package task

import (
	"fmt"
	"strings"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// maxFormatWidth bounds a width or precision in a template's format, so
// "%999999999d" cannot make a gigabyte string.
const maxFormatWidth = 1000

// printf is Python's format % args for templates: conversions d i o x X e
// E f F g G s r c and %%, with flags (- + space 0 #), width and precision.
// A left side that is not a string is Starlark's own % (ints: modulo).
func printf(_ *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) != 2 || len(kwargs) != 0 {
		return nil, fmt.Errorf("_format takes two arguments")
	}
	format, ok := args[0].(starlark.String)
	if !ok {
		return starlark.Binary(syntax.PERCENT, args[0], args[1])
	}
	var vals []starlark.Value
	if t, ok := args[1].(starlark.Tuple); ok {
		vals = t
	} else {
		vals = []starlark.Value{args[1]}
	}
	var b strings.Builder
	f := string(format)
	next := 0
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			b.WriteByte(f[i])
			continue
		}
		j := i + 1
		for j < len(f) && strings.IndexByte("-+ 0#", f[j]) >= 0 {
			j++
		}
		flags := f[i+1 : j]
		width, j := digits(f, j)
		prec := -1
		if j < len(f) && f[j] == '.' {
			prec, j = digits(f, j+1)
			prec = max(prec, 0)
		}
		if width > maxFormatWidth || prec > maxFormatWidth {
			return nil, fmt.Errorf("format width or precision above %d", maxFormatWidth)
		}
		if j >= len(f) {
			return nil, fmt.Errorf("incomplete format %q", f[i:])
		}
		conv := f[j]
		i = j
		if conv == '%' {
			b.WriteByte('%')
			continue
		}
		if next >= len(vals) {
			return nil, fmt.Errorf("not enough arguments for format string %q", f)
		}
		v := vals[next]
		next++
		spec := "%" + flags
		if width > 0 {
			spec += fmt.Sprint(width)
		}
		if prec >= 0 {
			spec += "." + fmt.Sprint(prec)
		}
		switch conv {
		case 'd', 'i', 'o', 'x', 'X':
			n, err := toInt(v)
			if err != nil {
				return nil, fmt.Errorf("%%%c: %w", conv, err)
			}
			c := conv
			if c == 'i' {
				c = 'd'
			}
			fmt.Fprintf(&b, spec+string(c), n)
		case 'e', 'E', 'f', 'F', 'g', 'G':
			x, ok := starlark.AsFloat(v)
			if !ok {
				return nil, fmt.Errorf("%%%c needs a number, got %s", conv, v.Type())
			}
			c := conv
			if c == 'F' {
				c = 'f'
			}
			fmt.Fprintf(&b, spec+string(c), x)
		case 's', 'r', 'c':
			s := v.String()
			if str, ok := v.(starlark.String); ok && conv != 'r' {
				s = string(str)
			}
			if conv == 'c' {
				n, err := toInt(v)
				if err != nil {
					return nil, err
				}
				s = string(rune(n))
			}
			fmt.Fprintf(&b, spec+"s", s)
		default:
			return nil, fmt.Errorf("unknown conversion %%%c in %q", conv, f)
		}
		if b.Len() > MaxFileSize {
			return nil, fmt.Errorf("format makes more than %d bytes", MaxFileSize)
		}
	}
	if next < len(vals) {
		return nil, fmt.Errorf("too many arguments for format string %q", f)
	}
	return starlark.String(b.String()), nil
}

func digits(s string, i int) (int, int) {
	n := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		if n <= maxFormatWidth {
			n = n*10 + int(s[i]-'0')
		}
		i++
	}
	return n, i
}

func toInt(v starlark.Value) (int64, error) {
	switch v := v.(type) {
	case starlark.Int:
		n, ok := v.Int64()
		if !ok {
			return 0, fmt.Errorf("%s is too large", v)
		}
		return n, nil
	case starlark.Float:
		return int64(v), nil
	}
	return 0, fmt.Errorf("needs a number, got %s", v.Type())
}
