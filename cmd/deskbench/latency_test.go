package main

import (
	"os"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	s := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	tests := []struct {
		name string
		in   []float64
		p    float64
		want float64
	}{
		{"median of ten is the fifth", s, 50, 5},
		{"p95 of ten is the tenth", s, 95, 10},
		{"p0 is the smallest", s, 0, 1},
		{"p100 is the largest", s, 100, 10},
		{"one sample", []float64{42}, 95, 42},
		{"no samples", nil, 50, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := pct(tc.in, tc.p); got != tc.want {
				t.Errorf("pct(%v, %v) = %v, want %v", tc.in, tc.p, got, tc.want)
			}
		})
	}
}

func TestCPUTicks(t *testing.T) {
	// Burn CPU until the kernel's tick-based count shows some (or give up
	// after two seconds and let the check below fail).
	x := 0
	for start := time.Now(); cpuTicks(os.Getpid()) == 0 && time.Since(start) < 2*time.Second; {
		for i := 0; i < 1_000_000; i++ {
			x += i % 7
		}
	}
	_ = x
	tests := []struct {
		name     string
		pids     []int
		positive bool
	}{
		{"this process", []int{os.Getpid()}, true},
		{"no such process counts nothing", []int{1 << 30}, false},
		{"zero pid is skipped", []int{0}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := cpuTicks(tc.pids...); (got > 0) != tc.positive {
				t.Errorf("cpuTicks(%v) = %v, want positive=%v", tc.pids, got, tc.positive)
			}
		})
	}
}

func TestSplitComma(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"deskenv,novnc", []string{"deskenv", "novnc"}},
		{" deskenv , ,novnc ", []string{"deskenv", "novnc"}},
		{"", nil},
	}
	for _, tc := range tests {
		got := splitComma(tc.in)
		if len(got) != len(tc.want) {
			t.Fatalf("splitComma(%q) = %q, want %q", tc.in, got, tc.want)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Fatalf("splitComma(%q) = %q, want %q", tc.in, got, tc.want)
			}
		}
	}
}
