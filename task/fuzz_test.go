package task

import (
	"bytes"
	"encoding/json"
	"errors"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/deskenv/deskenv/internal/hang"
)

// FuzzParse feeds task files to Parse, as Load reads them from --tasks.
// Every problem is a *FieldError naming the file, at a line and column
// inside it. An accepted task has a valid id, and encodes to JSON that
// parses back to the same task.
func FuzzParse(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("..", "tasks", "*.json"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no example tasks in ../tasks: %v", err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		`{"id":"a","instruction":"do","evaluator":{"type":"and","checks":[{"type":"file_exists","path":"~/x","weight":2},` +
			`{"type":"or","partial":true,"checks":[{"type":"file_matches","path":"~/y","matches":"^a+$","ignore_case":true},` +
			`{"type":"not","checks":[{"type":"command","command":"true","exit_code":1,"timeout":5}]}]},` +
			`{"type":"window_title","contains":"T"},{"type":"clipboard_matches","matches":"x","selection":"primary"},` +
			`{"type":"screen_region","region":[0,0,2,2],"reference":"ref.png","tolerance":1.5}]},` +
			`"setup":[{"type":"launch","argv":["xterm"]},{"type":"command","command":"true","timeout":"1m"},` +
			`{"type":"write_file","path":"~/x","content":"c","mode":"0600"},{"type":"open","url":"http://x/","with":["chromium"]},` +
			`{"type":"wait_window","matches":"a|b","ignore_case":true,"timeout":"5s"},{"type":"sleep","duration":0.5}],` +
			`"max_steps":3,"timeout":"1h","tags":["t"],"solution":[{"action":"key","text":"Return"}]}`,
		`{"id":"c","instruction":"do","evaluator":{"type":"or","checks":[` +
			`{"type":"spreadsheet_cell","path":"~/a.ods","sheet":"S","range":"A1:B2","equals":[[1,"x"],[2.50,"<&>"]],"tolerance":0.1,"formula":"SUM(","contains":"x"},` +
			`{"type":"document_text","path":"~/r.pdf","matches":"a+","ignore_case":true},` +
			`{"type":"json_field","path":"~/j.json","pointer":"/a~1b/0","equals":{"b":[1e2,null,true],"a":"\u00e9"}},` +
			`{"type":"csv_column","path":"~/c.csv","column":"total","row":2,"equals":"{{n}}"},` +
			`{"type":"window_state","contains":"T","state":"maximized"},{"type":"process_running","process":"galculator","matches":"x"}]}}`,
		`{"id": "a", "instruction": "do"`,
		`{"id":"a","instruction":"do","evaluator":{"type":"file_exists","path":"~/x"}} {}`,
		`{"id":7}`, `[]`, `{"id":"a","id":"b"}`, "\xef\xbb\xbf{}", `{"id":"a","timeout":1e300}`,
		`{"id":"a","instruction":"do","evaluator":{"type":"screen_region","region":[0,0,1,1],"reference":"/dev/null"}}`,
		strings.Repeat(`{"type":"not","checks":[`, 200),
	} {
		f.Add([]byte(s))
	}
	// screen_region references are read relative to the task file: give
	// them a directory of their own holding one small PNG.
	dir := f.TempDir()
	ref, err := os.Create(filepath.Join(dir, "ref.png"))
	if err != nil {
		f.Fatal(err)
	}
	if err := png.Encode(ref, image.NewNRGBA(image.Rect(0, 0, 2, 2))); err != nil {
		f.Fatal(err)
	}
	ref.Close()
	name := filepath.Join(dir, "t.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		defer hang.Guard(data)()
		task, err := Parse(data, name)
		if err != nil {
			checkFieldErrors(t, err, name, data)
			return
		}
		if !idPattern.MatchString(task.ID) || len(task.ID) > 100 {
			t.Fatalf("accepted id %q", task.ID)
		}
		b, err := json.Marshal(task)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		back, err := Parse(b, name)
		if err != nil {
			t.Fatalf("Parse of an accepted task's own JSON:\n%s\n%v", b, err)
		}
		compactSolutions(t, task)
		compactSolutions(t, back)
		if !reflect.DeepEqual(back, task) {
			t.Fatalf("round trip changed the task:\n got %+v\nwant %+v", back, task)
		}
	})
}

// compactSolutions rewrites each solution action in one canonical JSON
// form (json.Marshal escapes <, > and & in raw messages, and reorders
// nothing), so a round trip compares what the actions say.
func compactSolutions(t *testing.T, task *Task) {
	for i, s := range task.Solution {
		dec := json.NewDecoder(bytes.NewReader(s))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("solution[%d] %s is not JSON: %v", i, s, err)
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("solution[%d]: %v", i, err)
		}
		task.Solution[i] = b
	}
}

// checkFieldErrors asserts that err joins *FieldErrors about file, each at
// a position inside data or at none.
func checkFieldErrors(t *testing.T, err error, file string, data []byte) {
	t.Helper()
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	lines := bytes.Count(data, []byte("\n")) + 1
	for _, e := range errs {
		var fe *FieldError
		if !errors.As(e, &fe) {
			t.Fatalf("error %q is not a *FieldError", e)
		}
		if fe.File != file {
			t.Fatalf("error %q names file %q, not %q", e, fe.File, file)
		}
		if fe.Line < 0 || fe.Line > lines || fe.Col < 0 || (fe.Line > 0 && fe.Col == 0) {
			t.Fatalf("error %q is at %d:%d, outside the file's %d lines", e, fe.Line, fe.Col, lines)
		}
		if len(fe.Msg) > 4096 {
			t.Fatalf("error message of %d bytes", len(fe.Msg))
		}
	}
}
