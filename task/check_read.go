package task

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// Limits on what the file checks (spreadsheet_cell, document_text,
// json_field, csv_column) read. The agent writes these files, so each is a
// bound on what a hostile file can make the grader do.
const (
	// MaxDocumentRead is the most bytes of a file these checks read; a
	// larger file fails the check rather than being half read.
	MaxDocumentRead = MaxFileRead
	// MaxUnzipped is the most bytes one member of an ODF or OOXML archive
	// may inflate to (a zip bomb stops here), and for XLSX the whole archive.
	MaxUnzipped = 64 << 20
	// MaxXLSXUnzipped is the most an XLSX workbook may inflate to in all.
	// excelize reads a whole worksheet into memory, about 25 times its XML
	// (a 60 MiB sheet, 850 KiB zipped, took 1.5 GiB and 10 s), so a
	// workbook gets less room than the streamed formats; 8 MiB of XML is
	// some 100,000 cells.
	MaxXLSXUnzipped = 8 << 20
	// maxXMLDepth is how deeply the XML readers follow nested elements;
	// office documents nest a few dozen deep at most.
	maxXMLDepth = 512
	// DefaultParseTimeout bounds parsing one document when ctx has no
	// earlier deadline.
	DefaultParseTimeout = 20 * time.Second
	// DefaultNumberTolerance is how far apart two numbers may be and still
	// be equal in spreadsheet_cell, json_field and csv_column.
	DefaultNumberTolerance = 1e-9
)

// errTooLarge says a file is past MaxDocumentRead.
var errTooLarge = fmt.Errorf("file is larger than %d MiB, more than a check reads", MaxDocumentRead>>20)

// readDocument reads the check's file through env (as the desktop user, see
// Env.ReadFile), whole or not at all.
func readDocument(ctx context.Context, env Env, path string) ([]byte, error) {
	data, err := env.ReadFile(ctx, expandPath(env.Home(), path), MaxDocumentRead+1)
	if err != nil {
		return nil, err
	}
	if len(data) > MaxDocumentRead {
		return nil, errTooLarge
	}
	return data, nil
}

// bounded runs parse in a goroutine and waits for it at most until ctx
// ends or DefaultParseTimeout passes. A panic in a parser (third-party ones
// included) becomes an error. A parser that does not come back is left
// running: Go cannot stop it, but the check answers and the process stays
// up; the size limits above keep that rare and finite.
func bounded[T any](ctx context.Context, what string, parse func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		defer func() {
			if p := recover(); p != nil {
				r.err = fmt.Errorf("%s: the file is malformed (the reader gave up: %v)", what, p)
			}
			done <- r
		}()
		r.v, r.err = parse()
	}()
	timer := time.NewTimer(DefaultParseTimeout)
	defer timer.Stop()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, fmt.Errorf("%s: not read in time: %w", what, ctx.Err())
	case <-timer.C:
		var zero T
		return zero, fmt.Errorf("%s: not read within %s; the file is too large or malformed", what, DefaultParseTimeout)
	}
}

// zipMember returns the inflated content of one member of a zip archive,
// at most MaxUnzipped bytes of it.
func zipMember(data []byte, name string) ([]byte, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("is not a zip archive as the format needs: %w", err)
	}
	for _, f := range zr.File {
		if f.Name != name {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return nil, fmt.Errorf("cannot open %s in the archive: %w", name, err)
		}
		defer rc.Close()
		// The header's size is the writer's word; the limit is ours.
		out, err := io.ReadAll(io.LimitReader(rc, MaxUnzipped+1))
		if err != nil {
			return nil, fmt.Errorf("cannot inflate %s in the archive: %w", name, err)
		}
		if len(out) > MaxUnzipped {
			return nil, fmt.Errorf("%s inflates to more than %d MiB", name, MaxUnzipped>>20)
		}
		return out, nil
	}
	return nil, fmt.Errorf("has no %s: it is not the format its name says", name)
}

// numberTolerance is the check's tolerance between numbers, or the default.
func (c *Check) numberTolerance() float64 {
	if c.Tolerance == nil {
		return DefaultNumberTolerance
	}
	return *c.Tolerance
}

// parseNumber reads s as a number the way a person writes one in a cell or
// a CSV field: surrounding blanks are ignored.
func parseNumber(s string) (float64, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// scalar is a wanted value of spreadsheet_cell or csv_column: a string or
// a number from the task file.
type scalar struct {
	s     string
	num   float64
	isNum bool // the file wrote a number, or a string that is one (a rendered param template)
}

func (v scalar) String() string {
	if v.isNum {
		return strconv.FormatFloat(v.num, 'g', -1, 64)
	}
	return strconv.Quote(v.s)
}

// decodeScalar reads a JSON string or number.
func decodeScalar(raw json.RawMessage) (scalar, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		n, ok := parseNumber(s)
		return scalar{s: s, num: n, isNum: ok}, nil
	}
	var n json.Number
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&n); err != nil {
		return scalar{}, fmt.Errorf("must be a string or a number, got %s", quoteHead(string(raw), 40))
	}
	f, err := n.Float64()
	if err != nil {
		return scalar{}, fmt.Errorf("number %s is out of range", n)
	}
	return scalar{s: n.String(), num: f, isNum: true}, nil
}

// equalsText compares a wanted value with what a cell or field holds: as
// numbers within tol when both are numbers, else as text with surrounding
// blanks ignored.
func (v scalar) equalsText(text string, num float64, isNum bool, tol float64) bool {
	if v.isNum && isNum {
		return math.Abs(v.num-num) <= tol
	}
	return strings.TrimSpace(v.s) == strings.TrimSpace(text)
}
