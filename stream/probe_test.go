package stream

import (
	"testing"
	"time"
)

// TestRateProbe plays the ladder's choices and the estimates of a few
// links through the probe, a reading every 250 ms as adapt makes them.
func TestRateProbe(t *testing.T) {
	type reading struct {
		at       time.Duration // since the start
		ladder   int           // the frame rate the ladder chose
		estKbps  int
		sentKbps float64
		want     int // the frame rate the probe returns
	}
	tests := []struct {
		name     string
		readings []reading
		half     map[int]bool // the readings where the ladder chose the size rung
	}{
		{"back from a thin spell: probe up, held while the estimate grows", []reading{
			{0, 15, 900, 600, 15},
			{time.Second, 15, 900, 600, 15},
			{2 * time.Second, 15, 900, 600, 30},         // 2 s of headroom: one step up
			{2500 * time.Millisecond, 15, 950, 800, 30}, // in grace, the estimate holds
			{4 * time.Second, 15, 1100, 810, 30},
			{5 * time.Second, 30, 1300, 810, 30}, // the ladder agrees now
			{9 * time.Second, 30, 1800, 900, 30},
		}, nil},
		{"the link cannot carry it: down after the grace, the next probe waits twice as long", []reading{
			{0, 15, 900, 600, 15},
			{2 * time.Second, 15, 900, 600, 30}, // headroom since 0 s: probe
			{3 * time.Second, 15, 900, 810, 30},
			{5250 * time.Millisecond, 15, 900, 810, 15}, // grace over, estimate did not grow
			{8 * time.Second, 15, 900, 600, 15},
			{11 * time.Second, 15, 900, 600, 15}, // 3 s of headroom: under the doubled 4 s
			{12 * time.Second, 15, 900, 600, 30},
		}, nil},
		{"congestion during the grace: down at once", []reading{
			{0, 15, 900, 600, 15},
			{2 * time.Second, 15, 900, 600, 30},
			{2250 * time.Millisecond, 15, 600, 700, 15}, // estimate fell by a third
		}, nil},
		{"the encoder leaves bits unused: the frame rate stays up", []reading{
			{0, 30, 1050, 300, 30},
			{250 * time.Millisecond, 15, 1000, 300, 30},
			{500 * time.Millisecond, 15, 1000, 850, 15}, // now it uses them: follow the ladder
		}, nil},
		{"estimate falls while bits are unused: follow the ladder", []reading{
			{0, 30, 2000, 300, 30},
			{250 * time.Millisecond, 15, 800, 300, 15},
		}, nil},
		{"from a quarter of the rate to half", []reading{
			{0, 7, 600, 300, 7},
			{2 * time.Second, 7, 600, 300, 15},
		}, nil},
		{"down to the size rung: followed even with bits unused", []reading{
			{0, 30, 1050, 100, 30},
			{250 * time.Millisecond, 7, 1000, 100, 7},
			{3 * time.Second, 7, 1000, 100, 7}, // no probe at half size
		}, map[int]bool{1: true, 2: true}},
		{"idle screen: nothing sent, no probe", []reading{
			{0, 15, 900, 0, 15},
			{10 * time.Second, 15, 900, 0, 15},
		}, nil},
		{"estimate near what is sent: no probe", []reading{
			{0, 15, 900, 660, 15},
			{10 * time.Second, 15, 900, 660, 15},
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newRateProbe(30)
			t0 := time.Unix(1000, 0)
			cur := rung{kbps: 500, fps: tt.readings[0].ladder}
			for i, rd := range tt.readings {
				next := rung{kbps: rd.estKbps * 9 / 10, fps: rd.ladder, half: tt.half[i]}
				got := p.step(t0.Add(rd.at), cur, next, rd.estKbps*1000, rd.sentKbps)
				if got.fps != rd.want {
					t.Fatalf("reading %d at %v (ladder %d fps, estimate %d, sent %.0f, from %d fps): %d fps, want %d",
						i, rd.at, rd.ladder, rd.estKbps, rd.sentKbps, cur.fps, got.fps, rd.want)
				}
				cur = got
			}
		})
	}
}
