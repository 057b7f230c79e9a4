package stream

import (
	"testing"

	"github.com/pion/interceptor/pkg/cc"
)

// TestRateLadder checks the rung an estimate gives: the bitrate between the
// floor and the ceiling, the frame rate stepping down below the thresholds
// and back up only clearly above them.
func TestRateLadder(t *testing.T) {
	l := rateLimits{minKbps: 300, maxKbps: 4000, fps: 30}
	full := rung{kbps: 4000, fps: 30}
	tests := []struct {
		name   string
		prev   rung
		estBps int
		want   rung
	}{
		{"a wide link is held at the ceiling", full, 20_000_000, rung{4000, 30}},
		{"the estimate less headroom", full, 3_000_000, rung{2700, 30}},
		{"at 1 Mbit/s the rate halves", full, 1_000_000, rung{900, 15}},
		{"below 400 kbit/s a quarter", full, 400_000, rung{360, 7}},
		{"never below the floor", full, 50_000, rung{300, 7}},
		{"no estimate yet is the floor", rung{}, 0, rung{300, 7}},
		{"a thin link stays at a quarter just above the step", rung{360, 7}, 500_000, rung{450, 7}},
		{"and goes to half clearly above it", rung{360, 7}, 600_000, rung{540, 15}},
		{"half stays half just above 1 Mbit/s", rung{900, 15}, 1_300_000, rung{1170, 15}},
		{"and goes back to full clearly above", rung{900, 15}, 1_500_000, rung{1350, 30}},
		{"from a quarter straight to full when the link is back", rung{360, 7}, 4_000_000, rung{3600, 30}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := l.next(tt.prev, tt.estBps); got != tt.want {
				t.Errorf("next(%+v, %d) = %+v, want %+v", tt.prev, tt.estBps, got, tt.want)
			}
		})
	}
}

// TestEncoderKbps: an encoder opened at 30 fps budgets each frame as a
// thirtieth of a second, so at 15 fps it must be told twice the bitrate.
func TestEncoderKbps(t *testing.T) {
	tests := []struct {
		r    rung
		want int
	}{
		{rung{2000, 30}, 2000},
		{rung{900, 15}, 1800},
		{rung{360, 7}, 1542},
		{rung{300, 0}, 300},
	}
	for _, tt := range tests {
		if got := tt.r.encoderKbps(30); got != tt.want {
			t.Errorf("%+v.encoderKbps(30) = %d, want %d", tt.r, got, tt.want)
		}
	}
}

// TestCongestionConfig: the floor and the ceiling default from BitrateKbps
// and wrong ones are refused with the field's name.
func TestCongestionConfig(t *testing.T) {
	c, err := Config{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.MinBitrateKbps != 300 || c.MaxBitrateKbps != 4000 {
		t.Errorf("defaults: floor %d ceiling %d, want 300 and 4000", c.MinBitrateKbps, c.MaxBitrateKbps)
	}
	c, err = Config{BitrateKbps: 200}.withDefaults()
	if err != nil || c.MinBitrateKbps != 200 {
		t.Errorf("BitrateKbps 200: floor %d, err %v; want the floor at 200", c.MinBitrateKbps, err)
	}
	for _, bad := range []Config{{MinBitrateKbps: 5000}, {MinBitrateKbps: 50}, {MaxBitrateKbps: 1000}, {MaxBitrateKbps: 200000}} {
		if _, err := bad.withDefaults(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// fakeGCC answers what pion's GCC would: its combined target and the stats
// it keeps.
type fakeGCC struct {
	cc.BandwidthEstimator // nil: only the two methods below are called
	target                int
	stats                 map[string]any
}

func (f fakeGCC) GetTargetBitrate() int    { return f.target }
func (f fakeGCC) GetStats() map[string]any { return f.stats }

// TestLossTolerant: random loss under the severe threshold does not hold the
// stream below the delay controller's estimate; severe loss, or stats that
// are not there yet, leave GCC's own target.
func TestLossTolerant(t *testing.T) {
	tests := []struct {
		name   string
		target int
		stats  map[string]any
		want   int
	}{
		{"3 % loss: the delay controller's rate", 300_000, map[string]any{"delayTargetBitrate": 900_000, "averageLoss": 0.03}, 900_000},
		{"no loss: the same either way", 900_000, map[string]any{"delayTargetBitrate": 900_000, "averageLoss": 0.0}, 900_000},
		{"delay lower than loss", 400_000, map[string]any{"delayTargetBitrate": 400_000, "averageLoss": 0.01}, 400_000},
		{"severe loss: the draft's cut of the delay rate", 100_000, map[string]any{"delayTargetBitrate": 900_000, "averageLoss": 0.2}, 810_000},
		{"all lost", 100_000, map[string]any{"delayTargetBitrate": 900_000, "averageLoss": 1.0}, 450_000},
		{"no delay estimate yet", 1_000_000, map[string]any{"delayTargetBitrate": 0, "averageLoss": 0.0}, 1_000_000},
		{"stats of another shape", 700_000, map[string]any{}, 700_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := lossTolerant{fakeGCC{target: tt.target, stats: tt.stats}}.GetTargetBitrate()
			if got != tt.want {
				t.Errorf("target %d: want %d", got, tt.want)
			}
		})
	}
}
