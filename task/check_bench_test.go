package task

import (
	"os"
	"testing"
	"time"

	"github.com/deskenv/deskenv/internal/testrig"
)

// BenchmarkFileChecks times one check of each file kind against the files
// LibreOffice saved (testdata/office), reading included (a head process as
// the desktop user, as in a real evaluation):
//
//	go test ./task -run '^$' -bench BenchmarkFileChecks -benchtime 50x
func BenchmarkFileChecks(b *testing.B) {
	home := b.TempDir()
	for _, f := range []string{"budget.ods", "budget.xlsx", "budget.csv", "report.odt", "report.docx", "report.pdf"} {
		data := mustRead(b, "testdata/office/"+f)
		testrig.WriteFile(b, home+"/"+f, string(data), 0o644)
	}
	env := NewEnv(nil, home, nil)
	for _, bc := range []struct{ name, check string }{
		{"ods", `{"type":"spreadsheet_cell","path":"~/budget.ods","cell":"B4","equals":1550.75,"formula":"SUM("}`},
		{"xlsx", `{"type":"spreadsheet_cell","path":"~/budget.xlsx","cell":"B4","equals":1550.75,"formula":"SUM("}`},
		{"csv", `{"type":"csv_column","path":"~/budget.csv","column":"Cost","row":3,"equals":1550.75}`},
		{"odt", `{"type":"document_text","path":"~/report.odt","contains":"12 percent"}`},
		{"docx", `{"type":"document_text","path":"~/report.docx","contains":"12 percent"}`},
		{"pdf", `{"type":"document_text","path":"~/report.pdf","contains":"12 percent"}`},
	} {
		tk, err := Parse([]byte(`{"id":"t","instruction":"x","evaluator":`+bc.check+`}`), "t.json")
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bc.name, func(b *testing.B) {
			ctx := testrig.Context(b, time.Minute)
			for b.Loop() {
				out, err := tk.Evaluate(ctx, env)
				if err != nil || !out.Success {
					b.Fatalf("%v %+v", err, out.Reasons)
				}
			}
		})
	}
}

func mustRead(b testing.TB, name string) []byte {
	data, err := os.ReadFile(name)
	if err != nil {
		b.Fatal(err)
	}
	return data
}
