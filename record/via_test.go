package record

import (
	"encoding/json"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deskenv/deskenv/hci"
)

// TestViaKept: the dialect an agent spoke (hci.Event.Via) goes from the bus
// into input.jsonl's event and from there into the step, beside the
// canonical action; the computer tool's own actions carry none.
func TestViaKept(t *testing.T) {
	zero := time.Now()
	click := hci.Action{Action: hci.ActLeftClick, Coordinate: []int{10, 20}}
	key := hci.Action{Action: hci.ActKey, Text: "ctrl+l"}
	bus := []hci.Event{
		{Seq: 1, Time: zero.Add(time.Second), Source: hci.SourceAgent, Kind: hci.KindAction, Action: &click, Via: "gemini"},
		{Seq: 2, Time: zero.Add(2 * time.Second), Source: hci.SourceAgent, Kind: hci.KindAction, Action: &key},
	}
	var evs []Event
	for i, b := range bus {
		ev := fromBus(b, zero, i)
		line, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		// Read back as a reader of input.jsonl would.
		var back Event
		if err := json.Unmarshal(line, &back); err != nil {
			t.Fatal(err)
		}
		if back.Via != b.Via {
			t.Errorf("input.jsonl line %s: via %q, want %q", line, back.Via, b.Via)
		}
		evs = append(evs, back)
	}
	steps := Reduce(evs, space1280)
	if len(steps) != 2 {
		t.Fatalf("%d steps, want 2: %v", len(steps), actions(steps))
	}
	if steps[0].Via != "gemini" || steps[1].Via != "" {
		t.Errorf("steps' via %q, %q; want gemini, none", steps[0].Via, steps[1].Via)
	}
	line, err := json.Marshal(steps[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(line), `"via":"gemini"`) || !strings.Contains(string(line), `"action":{"action":"left_click","coordinate":[10,20]}`) {
		t.Errorf("steps.jsonl line %s: want the canonical action and via gemini", line)
	}
	if line, _ := json.Marshal(steps[1]); strings.Contains(string(line), "via") {
		t.Errorf("a computer tool step names a dialect: %s", line)
	}
}

// TestEpisodeDialects: episode.json counts the steps said in each dialect,
// when the recorder stops and when Repair rebuilds it; steps through the
// computer tool count for none.
func TestEpisodeDialects(t *testing.T) {
	dir := filepath.Join(recordSaid(t), "said")
	rec, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"gemini": 3}
	if !maps.Equal(rec.Meta.Dialects, want) {
		t.Errorf("episode.json dialects %v, want %v", rec.Meta.Dialects, want)
	}
	if got := dialectCounts(rec.Steps); !maps.Equal(got, want) {
		t.Errorf("counted from the steps (as Repair does): %v, want %v", got, want)
	}
	if got := dialectCounts(rec.Steps[3:]); got != nil {
		t.Errorf("a computer tool step counted as %v, want none", got)
	}
}
