package task

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

const paramsTask = `{
  "id": "calc-sum",
  "params": {
    "name":  {"choices": ["alice", "bob", "carol"]},
    "n":     {"min": 2, "max": 9},
    "price": {"min": 10, "max": 99, "step": 0.5},
    "file":  {"choices": ["notes", "draft", "plan"]}
  },
  "instruction": "Write {{n * 3}} for {{name.upper()}} into ~/{{file}}.txt ({{\"%.2f\" % (price * n)}})",
  "setup": [{"type": "write_file", "path": "~/{{file}}.txt", "content": "hello {{name}}\n"},
            {"type": "sleep", "duration": "{{n}}"}],
  "evaluator": {"type": "and", "checks": [
     {"type": "file_contains", "path": "~/{{file}}.txt", "contains": "{{n * 3}}"},
     {"type": "json_field", "path": "~/{{file}}.json", "pointer": "/total", "equals": "{{n * 3}}"},
     {"type": "file_matches", "path": "~/{{file}}.txt", "matches": "^{{name}}$"}
  ]},
  "max_steps": "{{n * 10}}",
  "solution": [{"action": "type", "text": "{{n * 3}}"}, {"action": "left_click", "coordinate": ["{{n}}", 5]}]
}`

func TestParamsRender(t *testing.T) {
	tk, err := Parse([]byte(paramsTask), "calc-sum.json")
	if err != nil {
		t.Fatal(err)
	}
	// Parse renders with the first choice / min of every parameter.
	if want := "Write 6 for ALICE into ~/notes.txt (20.00)"; tk.Instruction != want {
		t.Errorf("Parse instruction = %q, want %q", tk.Instruction, want)
	}
	if len(tk.Params) != 4 || tk.MaxSteps != 20 {
		t.Errorf("params %v max_steps %d", tk.Params, tk.MaxSteps)
	}
	for seed := int64(0); seed < 20; seed++ {
		r, vals, err := tk.Instantiate(seed)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		n := vals["n"].(int64)
		name, file := vals["name"].(string), vals["file"].(string)
		price := vals["price"].(float64)
		want := fmt.Sprintf("Write %d for %s into ~/%s.txt (%.2f)", n*3, strings.ToUpper(name), file, price*float64(n))
		if r.Instruction != want {
			t.Errorf("seed %d instruction %q, want %q", seed, r.Instruction, want)
		}
		if r.Setup[0].Path != "~/"+file+".txt" || r.Setup[0].Content != "hello "+name+"\n" {
			t.Errorf("seed %d setup %+v", seed, r.Setup[0])
		}
		if r.Setup[1].Duration.D().Seconds() != float64(n) {
			t.Errorf("seed %d sleep %v, want %ds (a number field from a template)", seed, r.Setup[1].Duration, n)
		}
		c := r.Evaluator.Checks
		if c[0].Contains != fmt.Sprint(n*3) {
			t.Errorf("seed %d contains %q: a string field takes a template's number as text", seed, c[0].Contains)
		}
		if string(c[1].Equals) != fmt.Sprint(n*3) {
			t.Errorf("seed %d equals %s, want the number %d", seed, c[1].Equals, n*3)
		}
		if !c[2].re.MatchString(name) {
			t.Errorf("seed %d: regexp %v does not match %q", seed, c[2].re, name)
		}
		if r.MaxSteps != int(n*10) {
			t.Errorf("seed %d max_steps %d", seed, r.MaxSteps)
		}
		var a0, a1 map[string]any
		json.Unmarshal(r.Solution[0], &a0)
		json.Unmarshal(r.Solution[1], &a1)
		if a0["text"] != fmt.Sprint(n*3) {
			t.Errorf("seed %d solution text %#v: must stay a string", seed, a0["text"])
		}
		if co := a1["coordinate"].([]any); co[0] != float64(n) {
			t.Errorf("seed %d coordinate %#v: must be a number", seed, co)
		}
		if tk.Instruction != "Write 6 for ALICE into ~/notes.txt (20.00)" {
			t.Fatalf("Instantiate changed the task it was called on")
		}
	}
}

func TestParamsDeterministic(t *testing.T) {
	tk, err := Parse([]byte(paramsTask), "a.json")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for seed := int64(0); seed < 50; seed++ {
		a, b := tk.Draw(seed), tk.Draw(seed)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("seed %d drew %v then %v", seed, a, b)
		}
		for n, v := range a {
			p := tk.Params[n]
			switch v := v.(type) {
			case string:
				if !contains(p.Choices, v) {
					t.Errorf("%s=%q is not a choice", n, v)
				}
			case int64:
				if float64(v) < *p.Min || float64(v) > *p.Max {
					t.Errorf("%s=%d out of range", n, v)
				}
			case float64:
				if v < *p.Min || v > *p.Max || v*2 != float64(int64(v*2)) {
					t.Errorf("%s=%v out of range or off the 0.5 step", n, v)
				}
			}
		}
		seen[a.String()] = true
	}
	if len(seen) < 40 {
		t.Errorf("50 seeds gave only %d distinct draws", len(seen))
	}
	// The draw depends on the task's id, not on other tasks or key order.
	other := strings.Replace(paramsTask, `"calc-sum"`, `"calc-sum-2"`, 1)
	reordered := strings.Replace(paramsTask, `"name":  {"choices": ["alice", "bob", "carol"]},`, ``, 1)
	reordered = strings.Replace(reordered, `"file":  {"choices": ["notes", "draft", "plan"]}`, `"file":  {"choices": ["notes", "draft", "plan"]}, "name":  {"choices": ["alice", "bob", "carol"]}`, 1)
	t2, err := Parse([]byte(other), "b.json")
	if err != nil {
		t.Fatal(err)
	}
	t3, err := Parse([]byte(reordered), "c.json")
	if err != nil {
		t.Fatal(err)
	}
	differ := 0
	for seed := int64(0); seed < 20; seed++ {
		if !reflect.DeepEqual(tk.Draw(seed), t3.Draw(seed)) {
			t.Errorf("seed %d: reordering the params changed the draw", seed)
		}
		if !reflect.DeepEqual(tk.Draw(seed), t2.Draw(seed)) {
			differ++
		}
	}
	if differ < 15 {
		t.Errorf("another task id drew the same values for %d of 20 seeds", 20-differ)
	}
}

func contains(list []any, v any) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func TestParamsNone(t *testing.T) {
	// Without params "{{" is literal text, and Instantiate is the task.
	src := `{"id":"x","instruction":"write {{x}}","evaluator":{"type":"file_exists","path":"~/a"}}`
	tk, err := Parse([]byte(src), "x.json")
	if err != nil {
		t.Fatal(err)
	}
	r, vals, err := tk.Instantiate(7)
	if err != nil || r != tk || len(vals) != 0 || r.Instruction != "write {{x}}" {
		t.Errorf("Instantiate = %p %v %v %q", r, vals, err, r.Instruction)
	}
}

func TestParamsErrors(t *testing.T) {
	base := func(params, instruction string) string {
		return `{"id":"x",
"params": ` + params + `,
"instruction": "` + instruction + `",
"evaluator": {"type": "file_exists", "path": "~/a"}}`
	}
	cases := []struct {
		name, src, want string
	}{
		{"empty choices", base(`{"a": {"choices": []}}`, "x"), `x.json:2:29: params.a.choices: must not be empty`},
		{"mixed choices", base(`{"a": {"choices": ["a", 1]}}`, "x"), `x.json:2:35: params.a.choices[1]: is a number but the first choice is a string`},
		{"min>max", base(`{"a": {"min": 5, "max": 1}}`, "x"), `x.json:2:25: params.a.min: 5 is more than max 1`},
		{"step 0", base(`{"a": {"min": 1, "max": 5, "step": 0}}`, "x"), `x.json:2:46: params.a.step: must be more than 0`},
		{"fraction without step", base(`{"a": {"min": 1.5, "max": 5}}`, "x"), `params.a.min: must be a whole number`},
		{"bad name", base(`{"a-b": {"min": 1, "max": 5}}`, "x"), `x.json:2:12: params.a-b: "a-b" is not a usable parameter name`},
		{"keyword name", base(`{"for": {"min": 1, "max": 5}}`, "x"), `params.for: "for" is not a usable parameter name`},
		{"unknown key", base(`{"a": {"choice": ["x"]}}`, "x"), `x.json:2:18: params.a.choice: unknown field in a parameter (did you mean "choices"?)`},
		{"no range", base(`{"a": {"min": 1}}`, "x"), `params.a: needs "choices" (a list) or both "min" and "max"`},
		{"both", base(`{"a": {"choices": [1], "min": 1}}`, "x"), `params.a.min: give either "choices" or "min"/"max", not both`},
		{"not an object", base(`[1]`, "x"), `x.json:2:11: params: must be an object`},
		{"unknown param", base(`{"a": {"min": 1, "max": 5}}`, "{{b + 1}}"), `x.json:3:16: instruction: template {{ b + 1 }}: template:1:1: undefined: b`},
		{"syntax", base(`{"a": {"min": 1, "max": 5}}`, "{{a +}}"), `instruction: template {{ a + }}: does not compile`},
		{"unclosed", base(`{"a": {"min": 1, "max": 5}}`, "{{a"), `instruction: template at byte 0 has no closing "}}"`},
		{"runtime error", base(`{"a": {"min": 1, "max": 5}}`, "{{a + 'x'}}"), `instruction: template {{ a + 'x' }}: unknown binary op: int + string`},
		{"huge repeat", base(`{"a": {"min": 1, "max": 5}}`, "{{[1] * 1000000000}}"), `repetition would make more than 1048576 elements`},
		{"huge string", base(`{"a": {"choices": ["abc"]}}`, "{{len(a * 900000000)}}"), `repetition would make more than 1048576 elements`},
		{"huge range", base(`{"a": {"min": 1, "max": 5}}`, "{{len(list(range(1000000000)))}}"), `range of more than 1048576 elements`},
		{"long loop", base(`{"a": {"min": 1, "max": 5}}`, "{{[x for x in range(1000000) for y in range(1000000)]}}"), `too many steps`},
		{"load", base(`{"a": {"min": 1, "max": 5}}`, "{{load('x')}}"), `does not compile`},
		{"rendered regexp", `{"id":"x","params":{"a":{"choices":["("]}},"instruction":"i","evaluator":{"type":"file_matches","path":"~/a","matches":"{{a}}"}}`, `x.json:1:120: evaluator.matches: invalid regular expression`},
		{"rendered number in int field", `{"id":"x","params":{"a":{"choices":["z"]}},"instruction":"i","max_steps":"{{a}}","evaluator":{"type":"file_exists","path":"~/a"}}`, `x.json:1:74: max_steps: must be a whole number, got a string`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.src), "x.json")
			if err == nil {
				t.Fatalf("Parse accepted it")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error:\n%v\nwant it to contain:\n%s", err, c.want)
			}
		})
	}
}

func TestParamsPrintIsSilent(t *testing.T) {
	// print is Starlark core, but a template's print must go nowhere.
	src := `{"id":"x","params":{"a":{"min":1,"max":1}},"instruction":"{{print('leak') or a}}","evaluator":{"type":"file_exists","path":"~/a"}}`
	tk, err := Parse([]byte(src), "x.json")
	if err != nil {
		t.Fatal(err)
	}
	if tk.Instruction != "1" {
		t.Errorf("instruction %q", tk.Instruction)
	}
}

func TestParamsPrintf(t *testing.T) {
	cases := []struct{ expr, want string }{
		{`"%.2f" % p`, "7.50"},
		{`"%5.1f|%-4s|%03d|%x|%%" % (p, "ab", n, 255)`, "  7.5|ab  |007|ff|%"},
		{`"%s and %r" % ("a", "a")`, `a and "a"`},
		{`n % 4`, "3"},
		{`"%d items" % n * 2`, "7 items7 items"},
	}
	for _, c := range cases {
		src := `{"id":"x","params":{"p":{"choices":[7.5]},"n":{"choices":[7]}},"instruction":"{{` + strings.ReplaceAll(c.expr, `"`, `\"`) + `}}","evaluator":{"type":"file_exists","path":"~/a"}}`
		tk, err := Parse([]byte(src), "x.json")
		if err != nil {
			t.Errorf("%s: %v", c.expr, err)
			continue
		}
		if tk.Instruction != c.want {
			t.Errorf("%s = %q, want %q", c.expr, tk.Instruction, c.want)
		}
	}
	src := `{"id":"x","params":{"p":{"choices":[1]}},"instruction":"{{\"%999999d\" % p}}","evaluator":{"type":"file_exists","path":"~/a"}}`
	if _, err := Parse([]byte(src), "x.json"); err == nil || !strings.Contains(err.Error(), "format width or precision above 1000") {
		t.Errorf("a huge width: %v", err)
	}
}

func TestParamsRoundTrip(t *testing.T) {
	// json.Marshal of a task with templates is its file; of a rendering,
	// the rendering. Either parses back to the same task.
	tk, err := Parse([]byte(paramsTask), "a.json")
	if err != nil {
		t.Fatal(err)
	}
	r, _, err := tk.Instantiate(4)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []*Task{tk, r} {
		b, err := json.Marshal(x)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Parse(b, "a.json")
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if back.Instruction != x.Instruction || !reflect.DeepEqual(back.Params, x.Params) || back.MaxSteps != x.MaxSteps {
			t.Errorf("round trip of %q gave %q", x.Instruction, back.Instruction)
		}
	}
	if b, _ := json.Marshal(tk); !strings.Contains(string(b), "{{n * 3}}") {
		t.Errorf("a task with templates marshals without them: %s", b)
	}
}

func TestParamsStepBudgetIsPerTask(t *testing.T) {
	// Each template alone is cheap; together they pass the task's budget.
	var parts []string
	for range 40 {
		parts = append(parts, `{{len([x for x in range(100000)])}}`)
	}
	src := `{"id":"x","params":{"a":{"choices":[1]}},"instruction":"` + strings.Join(parts, " ") + `","evaluator":{"type":"file_exists","path":"~/a"}}`
	if _, err := Parse([]byte(src), "x.json"); err == nil || !strings.Contains(err.Error(), "too many steps") {
		t.Errorf("40 templates of 100000 steps each: %v", err)
	}
}
