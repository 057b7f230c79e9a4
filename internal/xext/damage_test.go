package xext_test

import (
	"testing"

	"github.com/jezek/xgb/damage"
	"github.com/jezek/xgb/xproto"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/internal/xext"
	"github.com/deskenv/deskenv/internal/xprobe"
)

// TestDamageRoot: drawing in a window reaches the root window's damage
// object at the level asked for: every drawing request at RawRectangles
// (deskbench answers times each), only the first at NonEmpty while nobody
// empties the region (the settle).
func TestDamageRoot(t *testing.T) {
	d := testrig.Display(t, display.Config{Width: 320, Height: 240})
	p := testrig.Probe(t, d, xprobe.Options{})
	tests := []struct {
		name  string
		level byte
		// how many events two fills raise (a drawing may be reported in
		// more than one raw rectangle)
		least, most int
	}{
		{"RawRectangles", damage.ReportLevelRawRectangles, 2, 1 << 10},
		{"NonEmpty", damage.ReportLevelNonEmpty, 1, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := d.Dial()
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			id, err := xext.DamageRoot(c, tc.level)
			if err != nil {
				t.Fatal(err)
			}
			for i, rgb := range []uint32{0xff0000, 0x00ff00} {
				if err := p.Fill(10*i, 10*i, 40, 30, rgb); err != nil {
					t.Fatal(err)
				}
			}
			// Fill waits for the server to have drawn; a round trip on c
			// then has every event the drawing raised queued before it.
			if _, err := xproto.GetInputFocus(c).Reply(); err != nil {
				t.Fatal(err)
			}
			got := 0
			for {
				ev, err := c.PollForEvent()
				if err != nil {
					t.Fatal(err)
				}
				if ev == nil {
					break
				}
				n, ok := ev.(damage.NotifyEvent)
				if !ok || n.Damage != id {
					continue
				}
				// The top bit says more events of this drawing follow.
				if lvl := n.Level &^ 0x80; lvl != tc.level {
					t.Errorf("event at level %d, want %d", lvl, tc.level)
				}
				got++
			}
			if got < tc.least || got > tc.most {
				t.Errorf("%d damage events for two fills, want %d to %d", got, tc.least, tc.most)
			}
		})
	}
}
