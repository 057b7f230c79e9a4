package task

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// maxCSVFields is the most fields a CSV file may have in all; each is a
// string the parser allocates, so a file of commas stops here.
const maxCSVFields = 1 << 21

// parseCSV reads CSV data as a spreadsheet saves it: an optional UTF-8 byte
// order mark, quotes where needed, rows of any length. The delimiter is a
// comma unless the first line has none and has semicolons or tabs (what
// LibreOffice and Excel write in locales whose decimal mark is a comma).
func parseCSV(data []byte) ([][]string, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = -1
	r.LazyQuotes = true
	r.ReuseRecord = false
	first, _, _ := bytes.Cut(data, []byte("\n"))
	if !bytes.ContainsRune(first, ',') {
		switch {
		case bytes.ContainsRune(first, ';'):
			r.Comma = ';'
		case bytes.ContainsRune(first, '\t'):
			r.Comma = '\t'
		}
	}
	var out [][]string
	fields := 0
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("is not CSV: %w", err)
		}
		if fields += len(rec); fields > maxCSVFields {
			return nil, fmt.Errorf("has more than %d fields, more than a check reads", maxCSVFields)
		}
		out = append(out, rec)
	}
}

func describeCSV(c *Check) string {
	s := fmt.Sprintf("csv_column %s %q", c.Path, c.Column)
	if c.Row > 0 {
		s += fmt.Sprintf(" row %d", c.Row)
	}
	return s
}

// csvColumn is csv_column: the column named by its header holds the
// wanted values, or its row-th value is the wanted one, or the column's
// text satisfies contains / matches.
func csvColumn(ctx context.Context, env Env, c *Check) (bool, string, error) {
	data, err := readDocument(ctx, env, c.Path)
	if err != nil {
		return false, err.Error(), nil
	}
	records, err := bounded(ctx, "CSV", func() ([][]string, error) { return parseCSV(data) })
	if err != nil {
		return false, err.Error(), nil
	}
	if len(records) == 0 {
		return false, "the file is empty: no header row", nil
	}
	col := -1
	for i, h := range records[0] {
		if strings.TrimSpace(h) == c.Column {
			col = i
			break
		}
	}
	if col < 0 {
		return false, fmt.Sprintf("no column is headed %q (the header is %s)", c.Column, quoteList(records[0])), nil
	}
	// Trailing blank lines are no data: a spreadsheet adds them.
	rows := records[1:]
	for len(rows) > 0 && strings.TrimSpace(strings.Join(rows[len(rows)-1], "")) == "" {
		rows = rows[:len(rows)-1]
	}
	values := make([]string, len(rows))
	for i, rec := range rows {
		if col < len(rec) {
			values[i] = rec[col]
		}
	}
	tol := c.numberTolerance()
	var found []string
	if c.Equals != nil {
		ok, detail, err := csvEquals(c, values, tol)
		if err != nil || !ok {
			return ok, detail, err
		}
		found = append(found, detail)
	}
	if c.Contains != "" || c.Matches != "" {
		text := strings.Join(values, "\n")
		what := fmt.Sprintf("column %q", c.Column)
		if c.Row > 0 {
			if c.Row > len(values) {
				return false, fmt.Sprintf("column %q has %d rows, not %d", c.Column, len(values), c.Row), nil
			}
			text, what = values[c.Row-1], fmt.Sprintf("column %q row %d", c.Column, c.Row)
		}
		m, err := c.matcher()
		if err != nil {
			return false, "", err
		}
		ok, detail, _ := textCheck(what, m, text, "")
		if !ok {
			return false, detail, nil
		}
		found = append(found, detail)
	}
	return true, strings.Join(found, "; "), nil
}

// csvEquals compares the column (or its row-th value) with equals.
func csvEquals(c *Check, values []string, tol float64) (bool, string, error) {
	want, err := wantedColumn(c.Equals, c.Row > 0)
	if err != nil {
		return false, "", err
	}
	if c.Row > 0 {
		if c.Row > len(values) {
			return false, fmt.Sprintf("column %q has %d rows, not %d", c.Column, len(values), c.Row), nil
		}
		got := values[c.Row-1]
		n, isNum := parseNumber(got)
		if !want[0].equalsText(got, n, isNum, tol) {
			return false, fmt.Sprintf("column %q row %d is %q, want %s", c.Column, c.Row, got, want[0]), nil
		}
		return true, fmt.Sprintf("column %q row %d is %q", c.Column, c.Row, got), nil
	}
	if len(values) != len(want) {
		return false, fmt.Sprintf("column %q has %d values, want %d: %s", c.Column, len(values), len(want), quoteList(values)), nil
	}
	for i, got := range values {
		n, isNum := parseNumber(got)
		if !want[i].equalsText(got, n, isNum, tol) {
			return false, fmt.Sprintf("column %q row %d is %q, want %s", c.Column, i+1, got, want[i]), nil
		}
	}
	return true, fmt.Sprintf("column %q holds the %d values wanted", c.Column, len(want)), nil
}

// wantedColumn is csv_column's equals: one value with row, else an array.
func wantedColumn(raw json.RawMessage, single bool) ([]scalar, error) {
	if single {
		v, err := decodeScalar(raw)
		if err != nil {
			return nil, fmt.Errorf("with \"row\", equals %w", err)
		}
		return []scalar{v}, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("without \"row\", equals must be an array of the column's values, such as [\"a\", 2]; with \"row\" a single value")
	}
	out := make([]scalar, len(items))
	for i, it := range items {
		v, err := decodeScalar(it)
		if err != nil {
			return nil, fmt.Errorf("equals[%d] %w", i, err)
		}
		out[i] = v
	}
	return out, nil
}

func validateCSV(d *decoder, at site, c *Check) {
	if v, ok := at.f["row"]; ok && v.kind == jNumber && c.Row < 1 {
		d.fail(v, join(at.path, "row"), "must be a data row number from 1 (the row under the header), got %d", c.Row)
	}
	if v, ok := at.f["equals"]; ok {
		if _, err := wantedColumn(c.Equals, c.Row > 0); err != nil {
			d.fail(v, join(at.path, "equals"), "%s", strings.TrimPrefix(err.Error(), "equals "))
		}
	}
	needCondition(d, at, "equals", "contains", "matches")
}

func describeJSON(c *Check) string { return fmt.Sprintf("json_field %s %q", c.Path, c.Pointer) }

// jsonField is json_field: the value at pointer equals the wanted JSON
// value, or (a string's text, another value's JSON) satisfies contains /
// matches.
func jsonField(ctx context.Context, env Env, c *Check) (bool, string, error) {
	data, err := readDocument(ctx, env, c.Path)
	if err != nil {
		return false, err.Error(), nil
	}
	doc, err := bounded(ctx, "JSON", func() (any, error) { return decodeJSON(data) })
	if err != nil {
		return false, err.Error(), nil
	}
	v, err := jsonPointer(doc, c.Pointer)
	if err != nil {
		return false, err.Error(), nil
	}
	shown := jsonText(v)
	var found []string
	if c.Equals != nil {
		want, err := decodeJSON(c.Equals)
		if err != nil {
			return false, "", fmt.Errorf("equals: %w", err)
		}
		if !jsonEqual(want, v, c.numberTolerance()) {
			return false, fmt.Sprintf("%q is %s, want %s", c.Pointer, cutText(shown, 200), compactJSON(c.Equals)), nil
		}
		found = append(found, fmt.Sprintf("%q is %s", c.Pointer, cutText(shown, 200)))
	}
	if c.Contains != "" || c.Matches != "" {
		text := shown
		if s, ok := v.(string); ok {
			text = s
		}
		m, err := c.matcher()
		if err != nil {
			return false, "", err
		}
		ok, detail, _ := textCheck(fmt.Sprintf("%q", c.Pointer), m, text, "")
		if !ok {
			return false, detail, nil
		}
		found = append(found, detail)
	}
	return true, strings.Join(found, "; "), nil
}

// decodeJSON decodes one JSON document keeping numbers exact.
func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("is not JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("is not JSON: more follows the first value")
	}
	return v, nil
}

// jsonPointer resolves an RFC 6901 pointer in doc.
func jsonPointer(doc any, ptr string) (any, error) {
	if ptr == "" {
		return doc, nil
	}
	v := doc
	at := ""
	for _, raw := range strings.Split(ptr[1:], "/") {
		tok := strings.ReplaceAll(strings.ReplaceAll(raw, "~1", "/"), "~0", "~")
		switch t := v.(type) {
		case map[string]any:
			next, ok := t[tok]
			if !ok {
				return nil, fmt.Errorf("%q: the object at %q has no member %q (it has %s)", ptr, at, tok, quoteList(slices.Sorted(maps.Keys(t))))
			}
			v = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || (len(tok) > 1 && tok[0] == '0') || tok[0] == '+' {
				return nil, fmt.Errorf("%q: %q is not an index into the array at %q", ptr, tok, at)
			}
			if i >= len(t) {
				return nil, fmt.Errorf("%q: the array at %q has %d items, no index %d", ptr, at, len(t), i)
			}
			v = t[i]
		default:
			return nil, fmt.Errorf("%q: the value at %q is %s, not an object or array", ptr, at, quoteHead(jsonText(v), 80))
		}
		at += "/" + raw
	}
	return v, nil
}

// cutText is s, or its first n bytes and an ellipsis.
func cutText(s string, n int) string {
	if len(s) > n {
		return strings.ToValidUTF8(s[:n], "") + "…"
	}
	return s
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// jsonEqual compares JSON values: numbers by value within tol (3 equals
// 3.0), a wanted string that is a number (a rendered param template such as
// "{{n * 3}}") equal to that number, objects and arrays member by member.
func jsonEqual(want, got any, tol float64) bool {
	switch w := want.(type) {
	case json.Number:
		g, ok := got.(json.Number)
		return ok && numbersEqual(string(w), string(g), tol)
	case string:
		if g, ok := got.(json.Number); ok {
			return numbersEqual(w, string(g), tol)
		}
		g, ok := got.(string)
		return ok && g == w
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok || !jsonEqual(wv, gv, tol) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !jsonEqual(w[i], g[i], tol) {
				return false
			}
		}
		return true
	default: // bool, nil
		return want == got
	}
}

func numbersEqual(a, b string, tol float64) bool {
	if a == b {
		return true
	}
	x, ok1 := parseNumber(a)
	y, ok2 := parseNumber(b)
	return ok1 && ok2 && math.Abs(x-y) <= tol
}

func validateJSON(d *decoder, at site, c *Check) {
	if v, ok := at.f["pointer"]; ok && v.kind == jString && c.Pointer != "" && c.Pointer[0] != '/' {
		d.fail(v, join(at.path, "pointer"), "%q is not a JSON Pointer: it starts with \"/\", such as \"/settings/theme\" or \"/items/0\" (\"\" is the whole document)", c.Pointer)
	}
	needCondition(d, at, "equals", "contains", "matches")
}
