package task

import (
	"archive/zip"
	"bytes"
	"compress/zlib"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"

	"github.com/deskenv/deskenv/internal/testrig"
)

// evalCheck parses one check (as a task file's evaluator) and evaluates it
// against env: the reward's pass and the check's detail.
func evalCheck(t *testing.T, env Env, check string) (bool, string) {
	t.Helper()
	tk, err := Parse([]byte(`{"id":"t","instruction":"x","evaluator":`+check+`}`), "t.json")
	if err != nil {
		t.Fatalf("parse %s: %v", check, err)
	}
	out, err := tk.Evaluate(testrig.Context(t, 30*time.Second), env)
	if err != nil {
		t.Fatalf("evaluate %s: %v (%+v)", check, err, out.Reasons)
	}
	return out.Success, out.Reasons[0].Detail
}

// fileCase is one check against the files of a home directory: whether it
// holds, and a piece of the detail that says why.
type fileCase struct {
	check  string
	want   bool
	detail string
}

func runFileCases(t *testing.T, env Env, cases []fileCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.check, func(t *testing.T) {
			ok, detail := evalCheck(t, env, tc.check)
			if ok != tc.want || !strings.Contains(detail, tc.detail) {
				t.Errorf("passed %v, want %v; detail %q, want it to contain %q", ok, tc.want, detail, tc.detail)
			}
		})
	}
}

// officeHome is a home holding the fixtures LibreOffice made (testdata/office:
// budget.fods and report.html converted by soffice --headless --convert-to).
func officeHome(t *testing.T) (string, Env) {
	home := t.TempDir()
	files, err := filepath.Glob("testdata/office/*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures in testdata/office: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		testrig.WriteFile(t, filepath.Join(home, filepath.Base(f)), string(b), 0o644)
	}
	return home, NewEnv(nil, home, nil)
}

// TestSpreadsheetCell reads the same budget as LibreOffice saved it in ODS,
// XLSX and CSV: values, a formula (recalculated by LibreOffice on save), a
// range, a merged cell, cells after repeated empty ones, a second sheet.
func TestSpreadsheetCell(t *testing.T) {
	home, env := officeHome(t)
	testrig.WriteFile(t, filepath.Join(home, "budget.xls"), "not read", 0o644)
	var cases []fileCase
	for _, f := range []string{"budget.ods", "budget.xlsx", "budget.csv"} {
		c := func(rest string) string { return `{"type":"spreadsheet_cell","path":"~/` + f + `",` + rest + `}` }
		cases = append(cases,
			fileCase{c(`"cell":"B4","equals":1550.75`), true, "equals 1550.75"},
			fileCase{c(`"cell":"B4","equals":"1550.75"`), true, "B4"},
			fileCase{c(`"cell":"b4","equals":1550`), false, `B4 is "1550.75"`},
			fileCase{c(`"cell":"B4","equals":1550,"tolerance":1`), true, "B4"},
			fileCase{c(`"cell":"A1","equals":"Item"`), true, "A1"},
			fileCase{c(`"cell":"A1","equals":"Cost"`), false, `want "Cost"`},
			fileCase{c(`"range":"A2:B3","equals":[["Rent",1200.5],["Food",350.25]]`), true, "A2:B3"},
			fileCase{c(`"range":"A2:B3","equals":[["Rent",1200.5],["Food",350]]`), false, `B3 is "350.25", want 350`},
			fileCase{c(`"cell":"C2","contains":"merged"`), true, `contains "merged"`},
			fileCase{c(`"cell":"D2","equals":""`), true, "D2"},
			fileCase{c(`"cell":"D5","equals":"far right"`), true, "D5"},
			fileCase{c(`"cell":"Z99","equals":"x"`), false, "Z99 is empty"},
			fileCase{c(`"range":"A1:C1","matches":"^Item\tCost\tNote$"`), true, "matches"},
		)
	}
	for _, f := range []string{"budget.ods", "budget.xlsx"} {
		c := func(rest string) string { return `{"type":"spreadsheet_cell","path":"~/` + f + `",` + rest + `}` }
		cases = append(cases,
			fileCase{c(`"cell":"B4","formula":"sum(","equals":1550.75`), true, `has a formula with "sum("`},
			fileCase{c(`"cell":"B2","formula":"SUM("`), false, "B2 has no formula"},
			fileCase{c(`"cell":"B4","formula":"AVERAGE("`), false, `does not contain "AVERAGE("`},
			fileCase{c(`"sheet":"Second","cell":"A1","equals":"two  spaces"`), true, "Second!A1"},
			fileCase{c(`"sheet":"Budget","cell":"A2","equals":"Rent"`), true, "Budget!A2"},
			fileCase{c(`"sheet":"Nope","cell":"A1","equals":"x"`), false, `no sheet "Nope" (it has "Budget", "Second")`},
		)
	}
	cases = append(cases,
		fileCase{`{"type":"spreadsheet_cell","path":"~/missing.ods","cell":"A1","equals":1}`, false, "does not exist"},
		fileCase{`{"type":"spreadsheet_cell","path":"~/report.odt","cell":"A1","equals":1}`, false, `not ".odt"`},
		fileCase{`{"type":"spreadsheet_cell","path":"~/report.pdf","cell":"A1","equals":1}`, false, `not ".pdf"`},
		// The hand-written source of the fixtures: LibreOffice's flat XML, its SUM not yet computed.
		fileCase{`{"type":"spreadsheet_cell","path":"~/budget.fods","cell":"B4","equals":0,"formula":"of:=SUM([.B2:.B3])"}`, true, "B4"},
		fileCase{`{"type":"spreadsheet_cell","path":"~/budget.fods","range":"A3:C3","equals":[["Food",350.25,""]]}`, true, "A3:C3"},
		fileCase{`{"type":"spreadsheet_cell","path":"~/budget.xls","cell":"A1","equals":1}`, false, `not ".xls"`},
	)
	runFileCases(t, env, cases)
}

// TestDocumentText reads the report LibreOffice made from report.html as
// ODT, DOCX and PDF, and the HTML itself.
func TestDocumentText(t *testing.T) {
	home, env := officeHome(t)
	testrig.WriteFile(t, filepath.Join(home, "notes.md"), "# Notes\nremember the milk\n", 0o644)
	var cases []fileCase
	for _, f := range []string{"report.odt", "report.docx", "report.pdf", "report.html"} {
		c := func(rest string) string { return `{"type":"document_text","path":"~/` + f + `",` + rest + `}` }
		cases = append(cases,
			fileCase{c(`"contains":"Revenue grew by 12 percent"`), true, "document contains"},
			fileCase{c(`"matches":"total is [0-9.]+ euros"`), true, "1550.75 euros"},
			fileCase{c(`"contains":"THE THIRD QUARTER","ignore_case":true`), true, "document contains"},
			fileCase{c(`"contains":"The Third Quarter"`), false, "does not contain"},
			fileCase{c(`"contains":"14 percent"`), false, "does not contain"},
		)
	}
	for _, f := range []string{"report.odt", "report.docx", "report.html"} {
		// Paragraphs and list items are lines of their own (a DOCX list
		// paragraph's tab stops are no text).
		cases = append(cases, fileCase{`{"type":"document_text","path":"~/` + f + `","matches":"(?m)^Second point$"}`, true, "matches"})
	}
	cases = append(cases,
		fileCase{`{"type":"document_text","path":"~/notes.md","contains":"the milk"}`, true, "line 2"},
		fileCase{`{"type":"document_text","path":"~/budget.xlsx","contains":"Rent"}`, false, "is not a text document"},
		fileCase{`{"type":"document_text","path":"~/nothing.odt","contains":"x"}`, false, "does not exist"},
	)
	runFileCases(t, env, cases)
}

// TestJSONField compares JSON values at pointers.
func TestJSONField(t *testing.T) {
	home := t.TempDir()
	env := NewEnv(nil, home, nil)
	testrig.WriteFile(t, filepath.Join(home, "settings.json"), `{"settings":{"theme":"dark","size":3.0,"a/b":true,"m~n":null},
		"items":[{"name":"first","tags":["x","y"]},{"name":"second"}],"count":12}`, 0o644)
	testrig.WriteFile(t, filepath.Join(home, "broken.json"), `{"a":`, 0o644)
	c := func(rest string) string { return `{"type":"json_field","path":"~/settings.json",` + rest + `}` }
	runFileCases(t, env, []fileCase{
		{c(`"pointer":"/settings/theme","equals":"dark"`), true, `"/settings/theme" is "dark"`},
		{c(`"pointer":"/settings/theme","equals":"light"`), false, `want "light"`},
		{c(`"pointer":"/settings/size","equals":3`), true, "is 3.0"},
		{c(`"pointer":"/count","equals":"12"`), true, "is 12"}, // a rendered param template
		{c(`"pointer":"/count","equals":11.5,"tolerance":0.5`), true, "is 12"},
		{c(`"pointer":"/settings/a~1b","equals":true`), true, "is true"},
		{c(`"pointer":"/settings/m~0n","equals":null`), true, "is null"},
		{c(`"pointer":"/items/0/tags","equals":["x","y"]`), true, `["x","y"]`},
		{c(`"pointer":"/items/0/tags","equals":["y","x"]`), false, "want"},
		{c(`"pointer":"/items/1","equals":{"name":"second"}`), true, "second"},
		{c(`"pointer":"/items/1/name","matches":"^sec"`), true, "matches"},
		{c(`"pointer":"/items/2/name","equals":"x"`), false, "has 2 items, no index 2"},
		{c(`"pointer":"/items/01","equals":"x"`), false, "not an index"},
		{c(`"pointer":"/settings/colour","equals":"x"`), false, `no member "colour" (it has "a/b", "m~n", "size", "theme")`},
		{c(`"pointer":"/count/x","equals":"x"`), false, "not an object or array"},
		{c(`"contains":"second"`), true, "contains"},
		{`{"type":"json_field","path":"~/broken.json","equals":1}`, false, "is not JSON"},
	})
}

// TestCSVColumn reads the CSV LibreOffice saved from the budget, and a
// semicolon-separated one with a byte order mark.
func TestCSVColumn(t *testing.T) {
	home, env := officeHome(t)
	testrig.WriteFile(t, filepath.Join(home, "semi.csv"), "\xef\xbb\xbfname;score\nana;1,5\nbo;\"2\"\n\n", 0o644)
	c := func(rest string) string { return `{"type":"csv_column","path":"~/budget.csv",` + rest + `}` }
	runFileCases(t, env, []fileCase{
		{c(`"column":"Cost","equals":[1200.5,"350.25",1550.75,""]`), true, "holds the 4 values"},
		{c(`"column":"Cost","equals":[1200.5,350.25,1550.75]`), false, "has 4 values, want 3"},
		{c(`"column":"Cost","equals":[1200.5,350.2,1550.75,""]`), false, `row 2 is "350.25", want 350.2`},
		{c(`"column":"Cost","equals":[1200.5,350.2,1550.75,""],"tolerance":0.1`), true, "holds"},
		{c(`"column":"Cost","row":3,"equals":1550.75`), true, `row 3 is "1550.75"`},
		{c(`"column":"Cost","row":9,"equals":1`), false, "has 4 rows, not 9"},
		{c(`"column":"Item","contains":"Food\nTotal"`), true, "contains"},
		{c(`"column":"Item","row":2,"matches":"^F"`), true, "matches"},
		{c(`"column":"Price","equals":[1]`), false, `no column is headed "Price"`},
		{`{"type":"csv_column","path":"~/semi.csv","column":"name","equals":["ana","bo"]}`, true, "holds the 2 values"},
		{`{"type":"csv_column","path":"~/semi.csv","column":"score","row":2,"equals":2}`, true, `row 2 is "2"`},
	})
}

// TestLoadNewCheckErrors checks the messages Load gives for the new checks'
// fields of the wrong type or shape.
func TestLoadNewCheckErrors(t *testing.T) {
	for _, tc := range []struct{ check, want string }{
		{`{"type":"spreadsheet_cell","path":"a.ods","cell":5,"equals":1}`, "cell: must be a string, got a number"},
		{`{"type":"spreadsheet_cell","path":"a.ods","cell":"B0","equals":1}`, `"B0" is not a cell`},
		{`{"type":"spreadsheet_cell","path":"a.ods","cell":"7B","equals":1}`, `"7B" is not a cell`},
		{`{"type":"spreadsheet_cell","path":"a.ods","cell":"B7"}`, `need something to compare: give "equals", "formula", "contains" or "matches"`},
		{`{"type":"spreadsheet_cell","path":"a.ods","cell":"B7","range":"A1:B2","equals":1}`, "not both"},
		{`{"type":"spreadsheet_cell","path":"a.ods","range":"A1:B2","equals":[[1,2]]}`, "equals: has 1 rows but the range has 2"},
		{`{"type":"spreadsheet_cell","path":"a.ods","range":"A1:B2","equals":[[1,2],[3]]}`, "row 2 has 1 values but the range has 2 columns"},
		{`{"type":"spreadsheet_cell","path":"a.ods","cell":"A1","equals":{"a":1}}`, "must be a string or a number for a cell"},
		{`{"type":"spreadsheet_cell","path":"a.ods","range":"A1:Z1000","equals":1}`, "more than the 10000"},
		{`{"type":"spreadsheet_cell","path":"a.ods","cell":"A1","equals":1,"tolerance":-1}`, "tolerance: must not be negative"},
		{`{"type":"spreadsheet_cell","path":"a.ods","cell":"A1","equals":1,"selector":"x"}`, `selector: not used by "spreadsheet_cell" checks`},
		{`{"type":"document_text","path":"a.odt"}`, "contains"},
		{`{"type":"document_text","path":"a.odt","contains":"x","equals":1}`, "equals"},
		{`{"type":"json_field","path":"a.json","pointer":"a/b","equals":1}`, `"a/b" is not a JSON Pointer`},
		{`{"type":"json_field","path":"a.json","pointer":"/a"}`, "need something to compare"},
		{`{"type":"json_field","path":"a.json","pointer":7,"equals":1}`, "pointer: must be a string, got a number"},
		{`{"type":"csv_column","path":"a.csv","equals":[1]}`, `column`},
		{`{"type":"csv_column","path":"a.csv","column":"x","equals":1}`, "without \"row\", equals must be an array"},
		{`{"type":"csv_column","path":"a.csv","column":"x","row":1,"equals":[1]}`, "with \"row\", equals must be a string or a number"},
		{`{"type":"csv_column","path":"a.csv","column":"x","row":0,"equals":1}`, "must be a data row number from 1"},
		{`{"type":"csv_column","path":"a.csv","column":"x","row":"2","equals":1}`, "row: must be a whole number, got a string"},
		{`{"type":"window_state","contains":"x","state":"big"}`, `"big" is not a window state`},
		{`{"type":"window_state","contains":"x"}`, "state"},
		{`{"type":"window_state","state":"focused"}`, "contains"},
		{`{"type":"process_running"}`, `give "process", "contains" or "matches"`},
		{`{"type":"process_running","process":"/usr/bin/x"}`, "without a folder"},
		{`{"type":"process_running","process":true}`, "process: must be a string, got a boolean"},
	} {
		t.Run(tc.check, func(t *testing.T) {
			_, err := Parse([]byte(`{"id":"t","instruction":"x","evaluator":`+tc.check+`}`), "t.json")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
			if !strings.Contains(err.Error(), "t.json:1:") {
				t.Errorf("error %v does not say where", err)
			}
		})
	}
}

// odsOf is an ODS file whose content.xml holds body inside its
// office:spreadsheet.
func odsOf(t testing.TB, body string) []byte {
	return zipOf(t, "content.xml", `<?xml version="1.0" encoding="UTF-8"?>
<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"><office:body><office:spreadsheet>`+body+`</office:spreadsheet></office:body></office:document-content>`)
}

func zipOf(t testing.TB, name, content string) []byte {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	w, err := zw.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte(content)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// pdfWith is a one-page PDF whose page content is the zlib-compressed
// stream content, with a correct cross-reference table.
func pdfWith(t testing.TB, content string) []byte {
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write([]byte(content))
	zw.Close()
	objs := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
		fmt.Sprintf("<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream", z.Len(), z.Bytes()),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
	}
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offsets := make([]int, len(objs))
	for i, o := range objs {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	return b.Bytes()
}

// withMember is the zip archive data with member name's content replaced.
func withMember(t testing.TB, data []byte, name, content string) []byte {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, f := range zr.File {
		w, err := zw.Create(f.Name)
		if err != nil {
			t.Fatal(err)
		}
		if f.Name == name {
			w.Write([]byte(content))
			continue
		}
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(w, rc); err != nil {
			t.Fatal(err)
		}
		rc.Close()
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestODSTricky reads hand-written ODS files with what LibreOffice writes
// that a naive reader gets wrong: rows and columns repeated a million
// times, comments inside cells, cells spanning, text:s and line breaks.
func TestODSTricky(t *testing.T) {
	cell := func(attrs, text string) string {
		return `<table:table-cell ` + attrs + `><text:p>` + text + `</text:p></table:table-cell>`
	}
	body := `<table:table table:name="T"><table:table-column table:number-columns-repeated="1024"/>` +
		`<table:table-row table:number-rows-repeated="2">` + cell(`table:number-columns-repeated="3" office:value-type="float" office:value="7"`, "7") + `</table:table-row>` +
		`<table:table-row>` + `<table:table-cell table:number-columns-repeated="16000"/>` + cell(`office:value-type="string"`, "far") + `</table:table-row>` +
		`<table:table-row>` + `<table:table-cell office:value-type="string"><office:annotation><text:p>a comment</text:p></office:annotation><text:p>a<text:s text:c="3"/>b<text:line-break/>c</text:p><text:p>second</text:p></table:table-cell>` + `</table:table-row>` +
		`<table:table-row table:number-rows-repeated="1048000"><table:table-cell table:number-columns-repeated="1024"/></table:table-row>` +
		`<table:table-row>` + cell(`office:value-type="percentage" office:value="0.25"`, "25%") + `</table:table-row>` +
		`</table:table>`
	for _, tc := range []struct {
		rect string
		want [][]string
	}{
		{"A1:D2", [][]string{{"7", "7", "7", ""}, {"7", "7", "7", ""}}},
		{"WQJ3", [][]string{{""}}},    // column 16000
		{"WQK3", [][]string{{"far"}}}, // column 16001
		{"A4", [][]string{{"a   b\nc\nsecond"}}},
		{"A500000", [][]string{{""}}},
		{"A1048005", [][]string{{"25%"}}},
	} {
		rect, err := parseRange(tc.rect)
		if err != nil {
			t.Fatal(err)
		}
		cells, sheet, err := readCells(odsOf(t, body), "t.ods", "", rect)
		if err != nil {
			t.Fatalf("%s: %v", tc.rect, err)
		}
		if sheet != "T" {
			t.Errorf("sheet %q, want T", sheet)
		}
		for i, row := range tc.want {
			for j, w := range row {
				if got := cells[i][j].text; got != w {
					t.Errorf("%s: cell [%d][%d] is %q, want %q", tc.rect, i, j, got, w)
				}
			}
		}
	}
	cells, _, err := readCells(odsOf(t, body), "t.ods", "T", cellRect{0, 1048004, 0, 1048004})
	if err != nil || !cells[0][0].isNum || cells[0][0].num != 0.25 {
		t.Errorf("the percentage cell is %+v (%v), want the number 0.25", cells, err)
	}
}

// TestHostileFiles feeds the readers files an agent could leave to hurt
// the grader; each must fail the check with a reason, promptly.
func TestHostileFiles(t *testing.T) {
	home := t.TempDir()
	env := NewEnv(nil, home, nil)
	write := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(home, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A zip bomb: content.xml inflates past MaxUnzipped.
	var bomb bytes.Buffer
	zw := zip.NewWriter(&bomb)
	w, _ := zw.Create("content.xml")
	chunk := bytes.Repeat([]byte(" "), 1<<20)
	for i := 0; i < MaxUnzipped>>20+2; i++ {
		w.Write(chunk)
	}
	zw.Close()
	write("bomb.ods", bomb.Bytes())
	write("bomb.odt", bomb.Bytes())
	// XML nested far deeper than any document.
	deep := strings.Repeat("<text:span>", 100000)
	write("deep.odt", odsOf(t, `<text:p>`+deep))
	write("deep.ods", odsOf(t, `<table:table table:name="T"><table:table-row><table:table-cell><text:p>`+deep))
	// A file over the size limit.
	big, err := os.Create(filepath.Join(home, "big.xlsx"))
	if err != nil {
		t.Fatal(err)
	}
	big.Truncate(MaxDocumentRead + 10)
	big.Close()
	// An XLSX whose sheet inflates past MaxXLSXUnzipped: excelize would
	// hold it all in memory many times over.
	xf := excelize.NewFile()
	var xb bytes.Buffer
	if err := xf.Write(&xb); err != nil {
		t.Fatal(err)
	}
	write("huge.xlsx", withMember(t, xb.Bytes(), "xl/worksheets/sheet1.xml",
		`<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>`+
			strings.Repeat(`<row><c><v>1</v></c><c><v>2</v></c></row>`, MaxXLSXUnzipped/40)+`</sheetData></worksheet>`))
	write("small.pdf", pdfWith(t, "BT /F1 12 Tf 72 700 Td (hello from a hand-made PDF) Tj ET"))
	write("bomb.pdf", pdfWith(t, "BT /F1 12 Tf "+strings.Repeat("(aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa) Tj ", MaxUnzipped/38+1000)+"ET"))
	write("garbage.pdf", []byte("%PDF-1.4\n1 0 obj << /Type /Pages /Kids [1 0 R] /Count 1 >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF"))
	write("garbage.xlsx", []byte("PK\x03\x04 not really"))
	write("deep.json", []byte(strings.Repeat("[", 200000)))
	os.Symlink("/dev/zero", filepath.Join(home, "zero.csv"))
	runFileCases(t, env, []fileCase{
		{`{"type":"spreadsheet_cell","path":"~/bomb.ods","cell":"A1","equals":1}`, false, "inflates to more than 64 MiB"},
		{`{"type":"document_text","path":"~/bomb.odt","contains":"x"}`, false, "inflates to more than 64 MiB"},
		{`{"type":"document_text","path":"~/deep.odt","contains":"x"}`, false, "nests more than 512"},
		{`{"type":"spreadsheet_cell","path":"~/deep.ods","cell":"A1","equals":1}`, false, "nests more than 512"},
		{`{"type":"spreadsheet_cell","path":"~/big.xlsx","cell":"A1","equals":1}`, false, "larger than 16 MiB"},
		{`{"type":"spreadsheet_cell","path":"~/huge.xlsx","cell":"A1","equals":1}`, false, "inflates to more than 8 MiB"},
		{`{"type":"spreadsheet_cell","path":"~/garbage.xlsx","cell":"A1","equals":1}`, false, "is not an XLSX workbook"},
		{`{"type":"document_text","path":"~/small.pdf","contains":"hello from a hand-made PDF"}`, true, "contains"},
		{`{"type":"document_text","path":"~/bomb.pdf","contains":"x"}`, false, "streams inflate to more than 64 MiB"},
		{`{"type":"document_text","path":"~/garbage.pdf","contains":"x"}`, false, ""},
		{`{"type":"json_field","path":"~/deep.json","equals":1}`, false, "is not JSON"},
		{`{"type":"csv_column","path":"~/zero.csv","column":"x","equals":[1]}`, false, "not a regular file"},
	})
}

// TestXLSXWrittenByExcelize reads a workbook excelize writes, as another
// spreadsheet program would save one: formulas without cached values, a
// shared-string cell that looks like a number, a named second sheet.
func TestXLSXWrittenByExcelize(t *testing.T) {
	f := excelize.NewFile()
	f.SetCellValue("Sheet1", "A1", 2)
	f.SetCellValue("Sheet1", "A2", 3.5)
	f.SetCellFormula("Sheet1", "A3", "A1*A2")
	f.SetCellStr("Sheet1", "B1", "007")
	f.NewSheet("Data")
	f.SetCellValue("Data", "C3", "hello")
	var b bytes.Buffer
	if err := f.Write(&b); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	env := NewEnv(nil, home, nil)
	testrig.WriteFile(t, filepath.Join(home, "x.xlsx"), b.String(), 0o644)
	c := func(rest string) string { return `{"type":"spreadsheet_cell","path":"~/x.xlsx",` + rest + `}` }
	runFileCases(t, env, []fileCase{
		{c(`"range":"A1:A2","equals":[[2],[3.5]]`), true, "A1:A2"},
		{c(`"cell":"A3","formula":"A1*A2"`), true, "has a formula"},
		{c(`"cell":"B1","equals":"007"`), true, "B1"},
		{c(`"cell":"B1","equals":7`), false, `B1 is "007", want 7`},
		{c(`"sheet":"Data","cell":"C3","equals":"hello"`), true, "Data!C3"},
	})
}

// TestBoundedParse checks that a parser that panics or never returns gives
// an error, not a crash or a hang.
func TestBoundedParse(t *testing.T) {
	_, err := bounded(context.Background(), "x", func() (int, error) { panic("boom") })
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("a panicking parser gave %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	block := make(chan struct{})
	defer close(block)
	_, err = bounded(ctx, "x", func() (int, error) { <-block; return 0, nil })
	if err == nil || !strings.Contains(err.Error(), "not read in time") {
		t.Errorf("a parser that does not return gave %v", err)
	}
}

// TestLibreOfficeSaves has LibreOffice itself save a spreadsheet and a
// document while the test runs (soffice --headless, a profile of the
// test's own), and checks them: what a task's agent leaves is what Calc
// and Writer write, whichever version is installed.
func TestLibreOfficeSaves(t *testing.T) {
	testrig.NeedTools(t, "soffice")
	home := t.TempDir()
	env := NewEnv(nil, home, nil)
	testrig.WriteFile(t, filepath.Join(home, "in.csv"), "Item,Cost\nRent,1200.5\nFood,350.25\nTotal,=SUM(B2:B3)\n", 0o644)
	testrig.WriteFile(t, filepath.Join(home, "in.html"), "<html><body><h2>Minutes</h2><p>Decided: ship on Friday.</p></body></html>", 0o644)
	ctx := testrig.Context(t, 3*time.Minute)
	for _, conv := range [][2]string{{"ods", "in.csv"}, {"xlsx", "in.csv"}, {"odt:writer8", "in.html"}, {"docx:MS Word 2007 XML", "in.html"}} {
		cmd := exec.CommandContext(ctx, "soffice", "-env:UserInstallation=file://"+filepath.Join(home, ".lo-profile"),
			"--headless", "--convert-to", conv[0], "--outdir", home, filepath.Join(home, conv[1]))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("soffice --convert-to %s: %v\n%s", conv[0], err, out)
		}
	}
	runFileCases(t, env, []fileCase{
		{`{"type":"spreadsheet_cell","path":"~/in.ods","cell":"B4","equals":1550.75,"formula":"SUM("}`, true, "has a formula"},
		{`{"type":"spreadsheet_cell","path":"~/in.xlsx","cell":"B4","equals":1550.75,"formula":"SUM("}`, true, "has a formula"},
		{`{"type":"spreadsheet_cell","path":"~/in.ods","range":"A2:A3","equals":[["Rent"],["Food"]]}`, true, "A2:A3"},
		{`{"type":"document_text","path":"~/in.odt","matches":"(?m)^Minutes\nDecided: ship on Friday\\.$"}`, true, "matches"},
		{`{"type":"document_text","path":"~/in.docx","contains":"ship on Friday"}`, true, "contains"},
	})
}
