package hci

import (
	"encoding/json"
	"testing"
)

// FuzzSay: any run of actions read from a file (an export reads steps.jsonl
// from disk) is said or refused in every dialect, never a panic, and the
// groups cover every action once, in order.
func FuzzSay(f *testing.F) {
	for _, seed := range []string{
		`[{"action":"left_click","coordinate":[640,400]},{"action":"type","text":"hi"},{"action":"key","text":"Return"}]`,
		`[{"action":"left_click_drag","coordinate":[1,1]}]`,
		`[{"action":"left_mouse_down","coordinate":[1,1]},{"action":"mouse_move","coordinate":[5000,1]},{"action":"left_mouse_up","coordinate":[3,3]}]`,
		`[{"action":"key","text":"ctrl+l"},{"action":"type","text":"a\nb"},{"action":"key","text":"Return"}]`,
		`[{"action":"scroll","coordinate":[0,0],"scroll_direction":"left","scroll_amount":100}]`,
		`[{"action":"key","text":"ctrl++"},{"action":"wait","duration":-1},{"action":"zoom"}]`,
	} {
		f.Add([]byte(seed))
	}
	sp, err := NewSpace(1920, 1200, "1280x800")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var acts []Action
		if json.Unmarshal(data, &acts) != nil {
			return
		}
		for _, d := range Dialects() {
			for _, frac := range []bool{false, true} {
				said, err := sp.Say(d, acts, SayOptions{Fractions: frac})
				if err != nil {
					t.Fatal(err)
				}
				next := 0
				for _, s := range said {
					if s.First != next || s.Last < s.First || (s.Err == nil) == (len(s.Calls) == 0) {
						t.Fatalf("%s: group %d..%d (err %v, %d calls) after %d", d, s.First, s.Last, s.Err, len(s.Calls), next-1)
					}
					if _, err := json.Marshal(s.Calls); err != nil {
						t.Fatalf("%s: calls do not marshal: %v", d, err)
					}
					next = s.Last + 1
				}
				if next != len(acts) {
					t.Fatalf("%s: groups end at %d of %d actions", d, next, len(acts))
				}
			}
		}
	})
}
