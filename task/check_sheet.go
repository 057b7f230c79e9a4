package task

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/xuri/excelize/v2"
)

// maxRangeCells is the most cells a spreadsheet_cell range may cover; a
// task compares a table, not a sheet.
const maxRangeCells = 10000

// Spreadsheet limits, as LibreOffice and Excel have them.
const (
	maxSheetCols = 16384
	maxSheetRows = 1 << 20
)

// cellRect is a block of cells, 0-based and inclusive.
type cellRect struct{ c0, r0, c1, r1 int }

func (r cellRect) rows() int { return r.r1 - r.r0 + 1 }
func (r cellRect) cols() int { return r.c1 - r.c0 + 1 }

// parseCellName reads "B7" or "$B$7" as 0-based column and row.
func parseCellName(s string) (col, row int, err error) {
	t := strings.ToUpper(strings.ReplaceAll(s, "$", ""))
	i := 0
	for i < len(t) && t[i] >= 'A' && t[i] <= 'Z' {
		col = col*26 + int(t[i]-'A'+1)
		i++
		if col > maxSheetCols {
			return 0, 0, fmt.Errorf("%q: the column is past XFD, the last a spreadsheet has", s)
		}
	}
	if i == 0 || i == len(t) {
		return 0, 0, fmt.Errorf("%q is not a cell: write a column and a row, such as \"B7\"", s)
	}
	row, err = strconv.Atoi(t[i:])
	if err != nil || row < 1 || row > maxSheetRows || t[i] == '+' || t[i] == '-' {
		return 0, 0, fmt.Errorf("%q is not a cell: the row must be a number from 1 to %d, such as \"B7\"", s, maxSheetRows)
	}
	return col - 1, row - 1, nil
}

// cellName is the A1 name of 0-based col and row.
func cellName(col, row int) string {
	name := ""
	for c := col + 1; c > 0; c = (c - 1) / 26 {
		name = string(rune('A'+(c-1)%26)) + name
	}
	return name + strconv.Itoa(row+1)
}

// parseRange reads "A1:C3" (either corner first) or a single cell.
func parseRange(s string) (cellRect, error) {
	a, b, isRange := strings.Cut(s, ":")
	c0, r0, err := parseCellName(a)
	if err != nil {
		return cellRect{}, err
	}
	c1, r1 := c0, r0
	if isRange {
		if c1, r1, err = parseCellName(b); err != nil {
			return cellRect{}, err
		}
	}
	r := cellRect{min(c0, c1), min(r0, r1), max(c0, c1), max(r0, r1)}
	if n := r.rows() * r.cols(); n > maxRangeCells {
		return cellRect{}, fmt.Errorf("%q covers %d cells, more than the %d a check compares", s, n, maxRangeCells)
	}
	return r, nil
}

// sheetCell is what a spreadsheet shows in a cell and what it holds.
type sheetCell struct {
	text    string  // the shown text
	num     float64 // the number, when isNum
	isNum   bool
	value   string // another spelling of the value: an ODS date, time or boolean as stored
	formula string
}

// rect is the check's cell or range.
func (c *Check) rect() (cellRect, string, error) {
	if c.Range != "" {
		r, err := parseRange(c.Range)
		return r, c.Range, err
	}
	col, row, err := parseCellName(c.Cell)
	return cellRect{col, row, col, row}, c.Cell, err
}

// describeSheet names a spreadsheet_cell check: `spreadsheet_cell ~/a.ods Sheet1!B7`.
func describeSheet(c *Check) string {
	where := c.Cell + c.Range
	if c.Sheet != "" {
		where = c.Sheet + "!" + where
	}
	return "spreadsheet_cell " + c.Path + " " + where
}

// spreadsheetCell is spreadsheet_cell: the cell, or every cell of the range,
// satisfies equals, formula and the text condition, as many as are given.
func spreadsheetCell(ctx context.Context, env Env, c *Check) (bool, string, error) {
	rect, where, err := c.rect()
	if err != nil {
		return false, "", err
	}
	data, err := readDocument(ctx, env, c.Path)
	if err != nil {
		return false, err.Error(), nil
	}
	type sheetRead struct {
		cells [][]sheetCell
		sheet string
	}
	got, err := bounded(ctx, "spreadsheet", func() (sheetRead, error) {
		cells, sheet, err := readCells(data, c.Path, c.Sheet, rect)
		return sheetRead{cells, sheet}, err
	})
	if err != nil {
		return false, err.Error(), nil
	}
	if got.sheet != "" {
		where = got.sheet + "!" + where
	}
	return judgeCells(c, rect, where, got.cells)
}

// judgeCells applies the check's conditions to the cells read.
func judgeCells(c *Check, rect cellRect, where string, cells [][]sheetCell) (bool, string, error) {
	tol := c.numberTolerance()
	var found []string
	if c.Equals != nil {
		want, err := wantedCells(c.Equals, rect)
		if err != nil {
			return false, "", err
		}
		for i, row := range want {
			for j, v := range row {
				got := cells[i][j]
				if !v.equalsText(got.text, got.num, got.isNum, tol) && !(got.value != "" && v.equalsText(got.value, 0, false, tol)) {
					return false, fmt.Sprintf("%s is %s, want %s", cellName(rect.c0+j, rect.r0+i), showCell(got), v), nil
				}
			}
		}
		found = append(found, "equals "+string(compactJSON(c.Equals)))
	}
	if c.Formula != "" {
		for i, row := range cells {
			for j, got := range row {
				name := cellName(rect.c0+j, rect.r0+i)
				if got.formula == "" {
					return false, fmt.Sprintf("%s has no formula (it holds %s)", name, showCell(got)), nil
				}
				// Function names are case-insensitive in every spreadsheet.
				if !strings.Contains(strings.ToUpper(got.formula), strings.ToUpper(c.Formula)) {
					return false, fmt.Sprintf("%s's formula %s does not contain %q", name, quoteHead(got.formula, 120), c.Formula), nil
				}
			}
		}
		found = append(found, fmt.Sprintf("has a formula with %q", c.Formula))
	}
	if c.Contains != "" || c.Matches != "" {
		m, err := c.matcher()
		if err != nil {
			return false, "", err
		}
		ok, detail, _ := textCheck(where, m, cellsText(cells), "")
		if !ok {
			return false, detail, nil
		}
		found = append(found, detail)
	}
	return true, where + " " + strings.Join(found, "; "), nil
}

// showCell words a cell's content for a detail.
func showCell(s sheetCell) string {
	switch {
	case s.formula != "":
		return fmt.Sprintf("%q (formula %s)", s.text, quoteHead(s.formula, 80))
	case s.text == "" && !s.isNum:
		return "empty"
	}
	return strconv.Quote(s.text)
}

// cellsText is the shown text of a block: cells joined by tabs, rows by
// newlines, as a copy from a spreadsheet gives it.
func cellsText(cells [][]sheetCell) string {
	var b strings.Builder
	for i, row := range cells {
		if i > 0 {
			b.WriteByte('\n')
		}
		for j, cell := range row {
			if j > 0 {
				b.WriteByte('\t')
			}
			b.WriteString(cell.text)
		}
	}
	return b.String()
}

func compactJSON(raw json.RawMessage) []byte {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}

// wantedCells is "equals" as rows of values the size of rect: a single
// value for a cell, an array of rows for a range.
func wantedCells(raw json.RawMessage, rect cellRect) ([][]scalar, error) {
	if rect.rows() == 1 && rect.cols() == 1 {
		if v, err := decodeScalar(raw); err == nil {
			return [][]scalar{{v}}, nil
		}
	}
	var rows []json.RawMessage
	if err := json.Unmarshal(raw, &rows); err != nil {
		return nil, fmt.Errorf("equals must be a string or a number for a cell, or an array of rows for a range")
	}
	if len(rows) != rect.rows() {
		return nil, fmt.Errorf("equals has %d rows but the range has %d", len(rows), rect.rows())
	}
	out := make([][]scalar, len(rows))
	for i, r := range rows {
		var vals []json.RawMessage
		if err := json.Unmarshal(r, &vals); err != nil {
			return nil, fmt.Errorf("equals row %d must be an array of values", i+1)
		}
		if len(vals) != rect.cols() {
			return nil, fmt.Errorf("equals row %d has %d values but the range has %d columns", i+1, len(vals), rect.cols())
		}
		for _, v := range vals {
			s, err := decodeScalar(v)
			if err != nil {
				return nil, fmt.Errorf("equals row %d: %w", i+1, err)
			}
			out[i] = append(out[i], s)
		}
	}
	return out, nil
}

// validateSheet checks what a spreadsheet_cell needs beyond its fields:
// a cell name or range that parses, an equals of the range's shape, and
// something to compare.
func validateSheet(d *decoder, at site, c *Check) {
	if c.Cell != "" && c.Range != "" {
		return // Needs says to give one
	}
	field := "cell"
	if c.Range != "" {
		field = "range"
	}
	v, ok := at.f[field]
	if !ok || v.kind != jString {
		return
	}
	rect, _, err := c.rect()
	if err != nil {
		d.fail(v, join(at.path, field), "%s", err.Error())
		return
	}
	if ev, ok := at.f["equals"]; ok {
		if _, err := wantedCells(c.Equals, rect); err != nil {
			d.fail(ev, join(at.path, "equals"), "%s", strings.TrimPrefix(err.Error(), "equals "))
		}
	}
	needCondition(d, at, "equals", "formula", "contains", "matches")
}

// needCondition fails a check that gives none of the conditions.
func needCondition(d *decoder, at site, fields ...string) {
	for _, f := range fields {
		if _, ok := at.f[f]; ok {
			return
		}
	}
	d.fail(at.n, at.path, "%q checks need something to compare: give %s", at.f["type"].str, orList(fields))
}

func orList(fields []string) string {
	q := make([]string, len(fields))
	for i, f := range fields {
		q[i] = strconv.Quote(f)
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// readCells reads rect of a sheet (name, or the first sheet) of the
// spreadsheet data, by the file's extension. It returns the rows of rect
// and the sheet's name.
func readCells(data []byte, path, sheet string, rect cellRect) ([][]sheetCell, string, error) {
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".xlsx", ".xlsm":
		return xlsxCells(data, sheet, rect)
	case ".ods":
		content, err := zipMember(data, "content.xml")
		if err != nil {
			return nil, "", err
		}
		return odsCells(content, sheet, rect)
	case ".fods": // LibreOffice's flat XML: the content.xml and the rest in one file
		return odsCells(data, sheet, rect)
	case ".csv", ".tsv":
		records, err := parseCSV(data)
		if err != nil {
			return nil, "", err
		}
		return csvCells(records, rect), "", nil
	default:
		return nil, "", fmt.Errorf("spreadsheet_cell reads .xlsx, .ods, .fods and .csv files, not %q", ext)
	}
}

// xlsxCells reads an XLSX workbook with excelize.
func xlsxCells(data []byte, sheet string, rect cellRect) ([][]sheetCell, string, error) {
	// Both limits the same: no worksheet goes to a temporary file.
	f, err := excelize.OpenReader(bytes.NewReader(data), excelize.Options{UnzipSizeLimit: MaxXLSXUnzipped, UnzipXMLSizeLimit: MaxXLSXUnzipped})
	if err != nil && strings.Contains(err.Error(), "unzip size exceeds") {
		return nil, "", fmt.Errorf("the workbook inflates to more than %d MiB, more than a check reads", MaxXLSXUnzipped>>20)
	}
	if err != nil {
		return nil, "", fmt.Errorf("is not an XLSX workbook: %w", err)
	}
	defer f.Close()
	sheets := f.GetSheetList()
	if len(sheets) == 0 {
		return nil, "", fmt.Errorf("the workbook has no sheets")
	}
	if sheet == "" {
		sheet = sheets[0]
	} else if idx, _ := f.GetSheetIndex(sheet); idx < 0 {
		return nil, "", fmt.Errorf("the workbook has no sheet %q (it has %s)", sheet, quoteList(sheets))
	}
	// excelize gives every cell of a merged block the block's value; a
	// spreadsheet holds it in the first cell only (as the ODS reader sees
	// it), so the others read as empty here too.
	merged := map[string]bool{}
	if mcs, err := f.GetMergeCells(sheet, true); err == nil {
		for _, mc := range mcs {
			if r, err := parseRange(mc.GetStartAxis() + ":" + mc.GetEndAxis()); err == nil {
				for y := max(r.r0, rect.r0); y <= min(r.r1, rect.r1); y++ {
					for x := max(r.c0, rect.c0); x <= min(r.c1, rect.c1); x++ {
						if x != r.c0 || y != r.r0 {
							merged[cellName(x, y)] = true
						}
					}
				}
			}
		}
	}
	out := newCells(rect)
	for i := range out {
		for j := range out[i] {
			name := cellName(rect.c0+j, rect.r0+i)
			if merged[name] {
				continue
			}
			cell := &out[i][j]
			if cell.text, err = f.GetCellValue(sheet, name); err != nil {
				return nil, "", fmt.Errorf("read %s!%s: %w", sheet, name, err)
			}
			raw, _ := f.GetCellValue(sheet, name, excelize.Options{RawCellValue: true})
			typ, _ := f.GetCellType(sheet, name)
			if typ != excelize.CellTypeSharedString && typ != excelize.CellTypeInlineString {
				cell.num, cell.isNum = parseNumber(raw)
			}
			cell.formula, _ = f.GetCellFormula(sheet, name)
		}
	}
	return out, sheet, nil
}

func newCells(rect cellRect) [][]sheetCell {
	out := make([][]sheetCell, rect.rows())
	for i := range out {
		out[i] = make([]sheetCell, rect.cols())
	}
	return out
}

func quoteList(names []string) string {
	q := make([]string, 0, len(names))
	for i, n := range names {
		if i == 20 {
			q = append(q, "…")
			break
		}
		q = append(q, strconv.Quote(n))
	}
	return strings.Join(q, ", ")
}

// csvCells is rect of a CSV file's records (the header is row 1).
func csvCells(records [][]string, rect cellRect) [][]sheetCell {
	out := newCells(rect)
	for i := range out {
		r := rect.r0 + i
		for j := range out[i] {
			col := rect.c0 + j
			if r < len(records) && col < len(records[r]) {
				t := records[r][col]
				out[i][j] = sheetCell{text: t}
				out[i][j].num, out[i][j].isNum = parseNumber(t)
			}
		}
	}
	return out
}

// OpenDocument namespaces.
const (
	nsOffice = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"
	nsTable  = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"
	nsText   = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
)

// odsCells reads rect of a sheet of an ODS file from its content.xml (or a
// flat .fods file, which holds the same elements).
//
// No Go library that reads ODS is kept up (the few there are were last
// changed years ago and read whole sheets into memory, expanding
// LibreOffice's repeated rows, which number a million for a sheet's empty
// tail), so this is a small streaming reader: it walks the tables' rows and
// cells, counting repeated rows and columns arithmetically, and keeps only
// the cells of rect.
func odsCells(content []byte, sheet string, rect cellRect) ([][]sheetCell, string, error) {
	r := &odsReader{want: sheet, rect: rect, out: newCells(rect)}
	if err := r.read(content); err != nil {
		return nil, "", err
	}
	if !r.found {
		if len(r.names) == 0 {
			return nil, "", fmt.Errorf("the file has no sheets (is it a spreadsheet?)")
		}
		return nil, "", fmt.Errorf("the file has no sheet %q (it has %s)", sheet, quoteList(r.names))
	}
	return r.out, r.sheet, nil
}

// odsReader is the state of one walk through content.xml.
type odsReader struct {
	want  string
	rect  cellRect
	out   [][]sheetCell
	names []string // the sheets seen
	found bool
	sheet string // the sheet read

	row, col int      // where the next row / cell starts in the sheet being read
	rowRep   int      // how often the current row repeats
	cell     *odsCell // the cell being read, nil outside one
	reading  bool     // inside the wanted table
}

// odsCell is a cell being read: where it lies and what it holds.
type odsCell struct {
	col, rep int
	c        sheetCell
	paras    int // paragraphs begun
	inPara   int // paragraphs open: only their text is the cell's
	text     strings.Builder
}

func attr(se xml.StartElement, space, local string) (string, bool) {
	for _, a := range se.Attr {
		if a.Name.Space == space && a.Name.Local == local {
			return a.Value, true
		}
	}
	return "", false
}

// repeat reads a number-*-repeated attribute: at least 1.
func repeat(se xml.StartElement, local string) int {
	v, ok := attr(se, nsTable, local)
	if !ok {
		return 1
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 1
	}
	return min(n, maxSheetRows*maxSheetCols) // no overflow when added up
}

func (r *odsReader) read(content []byte) error {
	d := xml.NewDecoder(bytes.NewReader(content))
	depth, tableDepth, skip := 0, 0, 0
	for {
		tok, err := d.Token()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("content.xml is not well-formed XML: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if depth++; depth > maxXMLDepth {
				return fmt.Errorf("content.xml nests more than %d elements deep", maxXMLDepth)
			}
			if skip > 0 {
				skip++
				continue
			}
			if done := r.start(t, &tableDepth, &skip, depth); done {
				return nil
			}
		case xml.EndElement:
			depth--
			if skip > 0 {
				skip--
				continue
			}
			r.end(t, &tableDepth, depth)
		case xml.CharData:
			if skip == 0 && r.cell != nil && r.cell.inPara > 0 {
				r.cell.text.Write(t)
			}
		}
	}
}

// start handles an opening tag; done says the wanted rect is read.
func (r *odsReader) start(t xml.StartElement, tableDepth, skip *int, depth int) (done bool) {
	switch {
	case t.Name.Space == nsTable && t.Name.Local == "table":
		if *tableDepth > 0 || r.cell != nil {
			*skip = 1 // a table inside a cell: not the sheet's cells
			return false
		}
		*tableDepth = depth
		name, _ := attr(t, nsTable, "name")
		r.names = append(r.names, name)
		if !r.found && (r.want == "" || name == r.want) {
			r.found, r.reading, r.sheet, r.row = true, true, name, 0
		}
	case !r.reading:
	case t.Name.Space == nsOffice && t.Name.Local == "annotation":
		*skip = 1 // a comment's text is not the cell's
	case t.Name.Space == nsTable && t.Name.Local == "table-row":
		if r.row > r.rect.r1 {
			return true
		}
		r.rowRep, r.col = repeat(t, "number-rows-repeated"), 0
	case t.Name.Space == nsTable && (t.Name.Local == "table-cell" || t.Name.Local == "covered-table-cell"):
		r.cell = &odsCell{col: r.col, rep: repeat(t, "number-columns-repeated")}
		r.cellAttrs(t)
	case r.cell != nil && t.Name.Space == nsText:
		switch t.Name.Local {
		case "p", "h":
			if r.cell.paras > 0 {
				r.cell.text.WriteByte('\n')
			}
			r.cell.paras++
			r.cell.inPara++
		case "s":
			n := 1
			if v, ok := attr(t, nsText, "c"); ok {
				if c, err := strconv.Atoi(v); err == nil && c > 0 {
					n = min(c, 1000)
				}
			}
			r.cell.text.WriteString(strings.Repeat(" ", n))
		case "tab":
			r.cell.text.WriteByte('\t')
		case "line-break":
			r.cell.text.WriteByte('\n')
		}
	}
	return false
}

// cellAttrs reads the value and formula of a cell from its attributes.
func (r *odsReader) cellAttrs(t xml.StartElement) {
	c := &r.cell.c
	c.formula, _ = attr(t, nsTable, "formula")
	typ, _ := attr(t, nsOffice, "value-type")
	switch typ {
	case "float", "percentage", "currency":
		v, _ := attr(t, nsOffice, "value")
		c.num, c.isNum = parseNumber(v)
	case "date":
		c.value, _ = attr(t, nsOffice, "date-value")
	case "time":
		c.value, _ = attr(t, nsOffice, "time-value")
	case "boolean":
		c.value, _ = attr(t, nsOffice, "boolean-value")
	}
}

func (r *odsReader) end(t xml.EndElement, tableDepth *int, depth int) {
	switch {
	case t.Name.Space == nsTable && t.Name.Local == "table" && depth+1 == *tableDepth:
		*tableDepth = 0
		r.reading = false
	case !r.reading:
	case t.Name.Space == nsTable && t.Name.Local == "table-row":
		r.row += r.rowRep
	case r.cell != nil && t.Name.Space == nsText && (t.Name.Local == "p" || t.Name.Local == "h"):
		r.cell.inPara--
	case r.cell != nil && t.Name.Space == nsTable && (t.Name.Local == "table-cell" || t.Name.Local == "covered-table-cell"):
		r.place()
		r.col += r.cell.rep
		r.cell = nil
	}
}

// place copies the finished cell into every position of rect it covers
// (its repeats across the columns, its row's repeats down the rows).
func (r *odsReader) place() {
	cell := r.cell.c
	cell.text = r.cell.text.String()
	rows0, rows1 := max(r.row, r.rect.r0), min(r.row+r.rowRep-1, r.rect.r1)
	cols0, cols1 := max(r.cell.col, r.rect.c0), min(r.cell.col+r.cell.rep-1, r.rect.c1)
	for i := rows0; i <= rows1; i++ {
		for j := cols0; j <= cols1; j++ {
			r.out[i-r.rect.r0][j-r.rect.c0] = cell
		}
	}
}
