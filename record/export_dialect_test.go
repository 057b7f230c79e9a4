package record

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/internal/wire"
)

// recordSaid records an agent episode on a real desktop: a click, typing
// and Return said in Gemini (via gemini), then a triple click through the
// computer tool, which neither OpenAI nor Gemini can say.
func recordSaid(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := newRig(t, 1920, 1200, "")
	dir := t.TempDir()
	rec := r.recorder(t, dir, Options{FPS: -1})
	one := 1.0
	if _, err := rec.Start(ctx, EpisodeInfo{ID: "said", TaskID: "hello-file", Instruction: "say hello", Source: "agent"}); err != nil {
		t.Fatal(err)
	}
	gemini := hci.WithVia(ctx, hci.DialectGemini)
	for _, s := range []string{`{"action":"left_click","coordinate":[640,400]}`, `{"action":"type","text":"echo 'hi' > ~/x"}`, `{"action":"key","text":"Return"}`} {
		if _, err := r.exec.Do(gemini, mustAction(t, s), hci.SourceAgent); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.exec.Do(ctx, mustAction(t, `{"action":"triple_click","coordinate":[10,20]}`), hci.SourceAgent); err != nil {
		t.Fatal(err)
	}
	if _, err := rec.Stop(ctx, &Outcome{Reward: &one, Done: true}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestExportDialect: an export with a dialect keeps every column of the
// plain export and adds the step in the dialect, as hci.Space.Say says it:
// grouped steps point at the step that says them, steps the dialect cannot
// say carry the reason; Parquet and JSON lines hold the same rows.
func TestExportDialect(t *testing.T) {
	dir := recordSaid(t)
	ctx := context.Background()
	sp := hci.Space{ScreenW: 1920, ScreenH: 1200, ModelW: 1280, ModelH: 800}
	str := func(s string) *string { return &s }
	i32 := func(n int32) *int32 { return &n }
	type want struct {
		json, err *string
		of        *int32
	}
	cases := []struct {
		opt  ExportOptions
		want []want
	}{
		{ExportOptions{Dialect: "openai"}, []want{
			{json: str(`[{"button":"left","type":"click","x":640,"y":400}]`)},
			{json: str(`[{"text":"echo 'hi' > ~/x","type":"type"}]`)},
			{json: str(`[{"keys":["ENTER"],"type":"keypress"}]`)},
			{err: str("step 3: triple_click cannot be said in openai: OpenAI's actions click once (click) or twice (double_click)")},
		}},
		{ExportOptions{Dialect: "gemini"}, []want{
			{json: str(`[{"name":"type_text_at","args":{"clear_before_typing":false,"press_enter":true,"text":"echo 'hi' > ~/x","x":500,"y":500}}]`)},
			{of: i32(0)}, {of: i32(0)},
			{err: str("step 3: triple_click cannot be said in gemini: its one click is click_at, a single left click")},
		}},
		{ExportOptions{Dialect: "pyautogui"}, []want{
			{json: str(`["pyautogui.click(640, 400)"]`)},
			{json: str(`["pyautogui.write('echo \\'hi\\' > ~/x')"]`)},
			{json: str(`["pyautogui.press('enter')"]`)},
			{json: str(`["pyautogui.tripleClick(10, 20)"]`)},
		}},
		{ExportOptions{Dialect: "pyautogui", Fractions: true}, []want{
			{json: str(`["pyautogui.click(x=0.500391, y=0.500625)"]`)}, {json: str(`["pyautogui.write('echo \\'hi\\' > ~/x')"]`)},
			{json: str(`["pyautogui.press('enter')"]`)}, {json: str(`["pyautogui.tripleClick(x=0.008203, y=0.025625)"]`)},
		}},
	}
	for _, c := range cases {
		for _, format := range []string{"parquet", "jsonl"} {
			name := c.opt.Dialect + map[bool]string{true: " fractions"}[c.opt.Fractions] + " " + format
			t.Run(name, func(t *testing.T) {
				opt := c.opt
				opt.Format = format
				out := filepath.Join(t.TempDir(), "train."+format)
				st, err := Export(ctx, dir, out, opt)
				if err != nil {
					t.Fatal(err)
				}
				rows := readDialectRows(t, out, format)
				if len(rows) != 4 || st.Rows != 4 {
					t.Fatalf("%d rows (%d said), want 4", len(rows), st.Rows)
				}
				unsaid := 0
				for _, w := range c.want {
					if w.err != nil {
						unsaid++
					}
				}
				if st.Unsaid != unsaid {
					t.Errorf("stats count %d steps not said, want %d", st.Unsaid, unsaid)
				}
				for i, r := range rows {
					w := c.want[i]
					if r.Dialect != opt.Dialect || !reflect.DeepEqual(r.DialectJSON, w.json) || !reflect.DeepEqual(r.DialectError, w.err) ||
						!reflect.DeepEqual(r.DialectOf, w.of) {
						t.Errorf("step %d: dialect %q json %v error %v of %v; want json %v error %v of %v", i, r.Dialect,
							deref(r.DialectJSON), deref(r.DialectError), r.DialectOf, deref(w.json), deref(w.err), w.of)
					}
					wantVia := map[bool]string{true: "gemini", false: "<nil>"}[i < 3]
					if deref(r.Via) != wantVia {
						t.Errorf("step %d: via %v, want %q", i, deref(r.Via), wantVia)
					}
					// The canonical action is there as in a plain export.
					a, err := hci.ParseAction([]byte(r.ActionJSON))
					if err != nil || a.Action != r.Action || r.EpisodeID != "said" || r.ModelW != 1280 {
						t.Errorf("step %d: canonical columns %+v: %v", i, r.Row, err)
					}
					// What was said is what Say says for the recorded actions.
					if w.json != nil && opt.Dialect == "openai" {
						said, _ := sp.Say(opt.Dialect, []hci.Action{a}, hci.SayOptions{})
						b, _ := wire.Marshal(said[0].Calls)
						if strings.TrimSpace(string(b)) != *r.DialectJSON {
							t.Errorf("step %d: %s, Say says %s", i, *r.DialectJSON, b)
						}
					}
				}
				card, _ := os.ReadFile(filepath.Join(filepath.Dir(out), "README.md"))
				if !strings.Contains(string(card), "| dialect_json | string | the step in "+opt.Dialect) {
					t.Errorf("the dataset card does not describe dialect_json:\n%s", card)
				}
			})
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func readDialectRows(t *testing.T, out, format string) []DialectRow {
	t.Helper()
	if format == "parquet" {
		rows, err := parquet.ReadFile[DialectRow](out)
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []DialectRow
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r DialectRow
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	return rows
}

// TestExportDialectErrors: dialect options that cannot be met are refused
// before anything is written, naming the way out.
func TestExportDialectErrors(t *testing.T) {
	for _, c := range []struct {
		opt  ExportOptions
		want string
	}{
		{ExportOptions{Dialect: "claude"}, `dialect "claude" is not known: use openai, gemini, pyautogui`},
		{ExportOptions{Dialect: "gemini", Format: "agentnet"}, "dialect gemini goes with the parquet and jsonl formats, not agentnet"},
		{ExportOptions{Dialect: "openai", Format: "lerobot"}, "not lerobot"},
		{ExportOptions{Dialect: "openai", Fractions: true}, "fractions is for the pyautogui dialect, not openai"},
		{ExportOptions{Fractions: true}, "fractions is for --dialect pyautogui"},
	} {
		out := filepath.Join(t.TempDir(), "o.parquet")
		_, err := Export(context.Background(), t.TempDir(), out, c.opt)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.opt, err, c.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%+v: wrote %s", c.opt, out)
		}
	}
}
