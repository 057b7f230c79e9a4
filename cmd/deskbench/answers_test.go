package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestJudge(t *testing.T) {
	start := time.Unix(100, 0)
	at := func(ms ...int) []time.Time {
		var out []time.Time
		for _, m := range ms {
			out = append(out, start.Add(time.Duration(m)*time.Millisecond))
		}
		return out
	}
	tests := []struct {
		name                 string
		draws                []time.Time
		first, gap, last     float64
		earlyAt40, earlyAt80 bool
		end80                float64 // when a settle of 80 ms alone ends
	}{
		{"nothing drawn", nil, -1, 0, 0, false, false, 80},
		{"one burst", at(5, 6, 9), 5, 3, 9, false, false, 89},
		{"slow to start", at(90, 95), 90, 5, 95, true, true, 80},
		{"a pause between bursts", at(5, 60, 62), 5, 55, 62, true, false, 142},
		{"a button released later", at(7, 107), 7, 100, 107, true, true, 87},
		{"a cursor blinking after", at(5, 8, 508, 1008), 5, 3, 8, false, false, 88},
		{"nothing until late", at(400, 405), -1, 0, 0, false, false, 80},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := judge("app", "step", start, tc.draws)
			if a.First != tc.first || a.Gap != tc.gap || a.Last != tc.last || a.Draws+a.Later != len(tc.draws) {
				t.Errorf("judge = %+v, want first %v, gap %v, last %v, %d draws in all", a, tc.first, tc.gap, tc.last, len(tc.draws))
			}
			if got := quietEnd(start, tc.draws, 80*time.Millisecond); got != tc.end80 {
				t.Errorf("a settle of 80 ms alone ends at %v ms, want %v", got, tc.end80)
			}
			if a.Draws > 0 {
				if got := a.wait() > 40; got != tc.earlyAt40 {
					t.Errorf("early at 40 ms = %v, want %v", got, tc.earlyAt40)
				}
				if got := a.wait() > 80; got != tc.earlyAt80 {
					t.Errorf("early at 80 ms = %v, want %v", got, tc.earlyAt80)
				}
			}
		})
	}
}

func TestPrintAnswers(t *testing.T) {
	c := answerConfig{rounds: 2, between: time.Second, quiet: []time.Duration{40 * time.Millisecond, 80 * time.Millisecond}, idleQuiet: 40 * time.Millisecond}
	rs := []answer{
		{App: "a", Step: "x", Draws: 2, First: 5, Gap: 50, Last: 55, Settled: 140, Quiet: 135},
		{App: "a", Step: "x", Draws: 2, First: 5, Gap: 30, Last: 35, Settled: 80, Quiet: 115},
		{App: "a", Step: "y", Draws: 0, First: -1, Settled: -1, Quiet: 80},
		{App: "a", Step: "y", Draws: 1, First: 120, Last: 120, Settled: 50, Quiet: 80},
	}
	var b bytes.Buffer
	printAnswers(&b, c, rs)
	out := b.String()
	for _, want := range []string{
		"| a | x | 2 | 5 ms | 50 ms | 55 ms | 0 | 1 of 2 | 0 of 2 | 0 of 2 | 140 ms | 135 ms |",
		"| a | y | 1 | 120 ms | 0 ms | 120 ms | 0 | 1 of 2 | 1 of 2 | 1 of 2 | 50 ms | 80 ms |",
		"quiet 40ms: 2 of 4 answers settled early",
		"quiet 80ms: 1 of 4 answers settled early",
		"real settles, quiet 80ms, 40ms idle: 1 of 4 answers settled early, 1 did not settle; settled at p50 80 ms after the action (quiet 80ms alone: 115 ms)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
}
