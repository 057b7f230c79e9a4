package hci

import (
	"encoding/json"
	"slices"
	"testing"
)

// TestActionSpecs checks the table against what Validate and Mutates do:
// an action with its required fields (and each optional one) passes, and
// without one of them it does not.
func TestActionSpecs(t *testing.T) {
	specs := ActionSpecs()
	var names []string
	for _, sp := range specs {
		names = append(names, sp.Name)
	}
	if !slices.Equal(names, Actions()) {
		t.Fatalf("ActionSpecs names %v, want Actions() %v", names, Actions())
	}
	space, err := NewSpace(1280, 800, "off")
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]any{
		"coordinate": []int{10, 20}, "start_coordinate": []int{1, 2}, "region": []int{0, 0, 10, 10},
		"text": "shift", "key": "shift", "scroll_direction": "down", "scroll_amount": 2, "duration": 0.5,
	}
	build := func(name string, fields []string) Action {
		m := map[string]any{"action": name}
		for _, f := range fields {
			m[f] = values[f]
		}
		if _, ok := m["text"]; ok && name == ActType {
			m["text"] = "hello"
		}
		b, _ := json.Marshal(m)
		a, err := ParseAction(b)
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		return a
	}
	for _, sp := range specs {
		if sp.Summary == "" {
			t.Errorf("%s has no summary", sp.Name)
		}
		a := build(sp.Name, sp.Required)
		if err := a.Validate(space); err != nil {
			t.Errorf("%s with its required fields %v: %v", sp.Name, sp.Required, err)
		}
		if a.Mutates() != sp.Mutates {
			t.Errorf("%s: Mutates() %v, spec says %v", sp.Name, a.Mutates(), sp.Mutates)
		}
		for _, opt := range sp.Optional {
			if opt == "key" && slices.Contains(sp.Optional, "text") {
				continue // text and key name the same modifiers; either alone
			}
			if err := build(sp.Name, append(slices.Clone(sp.Required), opt)).Validate(space); err != nil {
				t.Errorf("%s with %s: %v", sp.Name, opt, err)
			}
		}
		for i := range sp.Required {
			less := slices.Delete(slices.Clone(sp.Required), i, i+1)
			if build(sp.Name, less).Validate(space) == nil {
				t.Errorf("%s without %s passed Validate", sp.Name, sp.Required[i])
			}
		}
	}
}
