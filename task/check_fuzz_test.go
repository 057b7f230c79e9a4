package task

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/deskenv/deskenv/internal/hang"
)

// officeFormats are the readers FuzzOfficeFiles drives, by file name.
var officeFormats = []string{"x.ods", "x.xlsx", "x.csv", "x.odt", "x.docx", "x.pdf", "x.html", "x.txt"}

// FuzzOfficeFiles feeds the document and spreadsheet readers files the agent
// could have written, starting from the ones LibreOffice saved: each input
// is read or refused with an error, without a panic of our own code and
// within hang.After. Panics inside third-party readers (the PDF reader
// panics on purpose at malformed input) are what bounded recovers from in a
// check, so they are recovered here too and count as a refusal.
func FuzzOfficeFiles(f *testing.F) {
	files, err := filepath.Glob("testdata/office/*")
	if err != nil || len(files) == 0 {
		f.Fatalf("no fixtures in testdata/office: %v", err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		for i, ext := range officeFormats {
			if strings.HasSuffix(name, filepath.Ext(ext)) {
				f.Add(uint8(i), b)
			}
		}
	}
	f.Add(uint8(0), odsOf(f, `<table:table table:name="T"><table:table-row table:number-rows-repeated="99999999"><table:table-cell table:number-columns-repeated="99999999"/></table:table-row></table:table>`))
	f.Fuzz(func(t *testing.T, format uint8, data []byte) {
		defer hang.Guard(data)()
		name := officeFormats[int(format)%len(officeFormats)]
		rect := cellRect{0, 0, 2, 3}
		if strings.HasSuffix(name, ".ods") {
			// Our own reader: no recover, a panic is a bug.
			if cells, _, err := readCells(data, name, "", rect); err == nil && (len(cells) != rect.rows() || len(cells[0]) != rect.cols()) {
				t.Fatalf("odsCells gave %dx? cells for a %dx%d rect", len(cells), rect.rows(), rect.cols())
			}
			return
		}
		func() {
			defer func() {
				if p := recover(); p != nil && !strings.HasSuffix(name, ".pdf") && !strings.HasSuffix(name, ".xlsx") {
					panic(fmt.Sprintf("%s reader panicked: %v", name, p))
				}
			}()
			switch name {
			case "x.xlsx", "x.csv":
				readCells(data, name, "", rect)
			default:
				plainText(context.Background(), data, name)
			}
		}()
	})
}

// FuzzJSONPointer resolves pointers in documents: an answer or an error,
// never a panic.
func FuzzJSONPointer(f *testing.F) {
	f.Add([]byte(`{"a":{"b":[1,{"c/d":"x"}]}}`), "/a/b/1/c~1d")
	f.Add([]byte(`[[[]]]`), "/0/0/-")
	f.Add([]byte(`{"":{"":1}}`), "//")
	f.Fuzz(func(t *testing.T, doc []byte, ptr string) {
		defer hang.Guard(doc)()
		v, err := decodeJSON(doc)
		if err != nil {
			return
		}
		if ptr != "" && ptr[0] != '/' {
			ptr = "/" + ptr
		}
		if got, err := jsonPointer(v, ptr); err == nil && !jsonEqual(got, got, 0) {
			t.Fatalf("the value at %q is not equal to itself: %v", ptr, got)
		}
	})
}
