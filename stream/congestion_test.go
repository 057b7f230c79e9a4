package stream

import (
	"testing"
	"time"

	"github.com/pion/interceptor/pkg/cc"
)

// full and half are rungs at full and at half size, for the tables.
func full(kbps, fps int) rung { return rung{kbps: kbps, fps: fps} }
func half(kbps, fps int) rung { return rung{kbps: kbps, fps: fps, half: true} }

// TestRateLadder checks the rung an estimate gives: the bitrate between the
// floor and the ceiling, the frame rate stepping down below the thresholds
// and back up only clearly above them. These limits cannot halve the
// video (TestSizeLadder has the size rung).
func TestRateLadder(t *testing.T) {
	l := rateLimits{minKbps: 300, maxKbps: 4000, fps: 30}
	top := full(4000, 30)
	tests := []struct {
		name   string
		prev   rung
		estBps int
		want   rung
	}{
		{"a wide link is held at the ceiling", top, 20_000_000, full(4000, 30)},
		{"the estimate less headroom", top, 3_000_000, full(2700, 30)},
		{"at 1 Mbit/s the rate stays full", top, 1_000_000, full(900, 30)},
		{"under 750 kbit/s it halves", top, 800_000, full(720, 15)},
		{"below 400 kbit/s a quarter", top, 400_000, full(360, 7)},
		{"never below the floor", top, 50_000, full(300, 7)},
		{"no estimate yet is the floor", rung{}, 0, full(300, 7)},
		{"a thin link stays at a quarter just above the step", full(360, 7), 500_000, full(450, 7)},
		{"and goes to half clearly above it", full(360, 7), 600_000, full(540, 15)},
		{"half stays half just above the step", full(720, 15), 1_000_000, full(900, 15)},
		{"and goes back to full clearly above", full(720, 15), 1_100_000, full(990, 30)},
		{"from a quarter straight to full when the link is back", full(360, 7), 4_000_000, full(3600, 30)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := l.next(tt.prev, tt.estBps); got != tt.want {
				t.Errorf("next(%+v, %d) = %+v, want %+v", tt.prev, tt.estBps, got, tt.want)
			}
		})
	}
}

// TestSizeLadder walks the size rung below the frame rate's: under
// halfSizeKbps (the estimate less headroom, before the floor) the video
// goes at half size, at the bottom frame rate, with a floor a quarter of
// the full-size one; it comes back to full size only clearly above the
// threshold, and never while a change is held (sizeHold).
func TestSizeLadder(t *testing.T) {
	l := rateLimits{minKbps: 300, maxKbps: 4000, fps: 30, halve: true}
	held := l
	held.holdSize = true
	small := rateLimits{minKbps: 300, maxKbps: 4000, fps: 30} // a video too small to halve
	tests := []struct {
		name   string
		l      rateLimits
		prev   rung
		estBps int
		want   rung
	}{
		// Down.
		{"a wide link stays at full size", l, full(4000, 30), 20_000_000, full(4000, 30)},
		{"at the quarter rate above the step the size holds", l, full(360, 7), 300_000, full(300, 7)},
		{"just above the step, floor and all", l, full(300, 7), 280_000, full(300, 7)},
		{"under 250 kbit/s the size halves", l, full(300, 7), 270_000, half(243, 7)},
		{"from full rate straight down to half size", l, full(4000, 30), 150_000, half(135, 7)},
		{"the floor at half size is a quarter of the floor", l, full(300, 7), 30_000, half(75, 7)},
		{"no estimate yet: half size at its floor", l, rung{}, 0, half(75, 7)},
		// Up, with hysteresis: 250 * 1.25 = 312 kbit/s, an estimate of 347.
		{"at half size just above the step it stays half", l, half(135, 7), 300_000, half(270, 7)},
		{"and under the way back", l, half(135, 7), 340_000, half(306, 7)},
		{"and goes back to full clearly above it", l, half(135, 7), 360_000, full(324, 7)},
		{"from half size straight to full rate", l, half(135, 7), 4_000_000, full(3600, 30)},
		// Held or not possible.
		{"a change held keeps half size on a wide link", held, half(135, 7), 4_000_000, half(3600, 7)},
		{"a change held keeps full size on a thin link", held, full(300, 7), 150_000, full(300, 7)},
		{"a video too small to halve stays at the floor", small, full(300, 7), 150_000, full(300, 7)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.l.next(tt.prev, tt.estBps); got != tt.want {
				t.Errorf("next(%+v, %d) = %+v, want %+v", tt.prev, tt.estBps, got, tt.want)
			}
		})
	}
}

// TestSizeGate: a step up in size waits until it has been due for
// sizeUpAfter without a break; a step up undone within sizeJudge doubles
// the next wait (up to sizeMaxWait), one that holds sets it back; a step
// down is never held. An idle stream at half size probes full size after
// the same wait and keeps it unless the estimate falls.
func TestSizeGate(t *testing.T) {
	t0 := time.Unix(1000, 0)
	type step struct {
		at               float64 // seconds
		cur, ladder, idl bool    // sizes: true is half
		est              int     // kbit/s
		want             bool
	}
	const H, F = true, false
	tests := []struct {
		name  string
		steps []step
	}{
		{"down at once, up after the wait without a break", []step{
			{0, F, H, false, 150, H},
			{1, H, H, false, 200, H},
			{2, H, F, false, 400, H}, // due: the wait starts
			{5, H, F, false, 400, H}, // 3 s
			{5.5, H, H, false, 250, H},
			{6, H, F, false, 400, H}, // starts again
			{9.9, H, F, false, 400, H},
			{10, H, F, false, 420, F}, // 4 s without a break
		}},
		{"a step up undone doubles the wait, one that holds sets it back", []step{
			{0, H, F, false, 400, H},
			{4, H, F, false, 400, F}, // up
			{7, F, H, false, 150, H}, // undone within 10 s: 8 s now
			{8, H, F, false, 400, H}, //
			{15.9, H, F, false, 400, H},
			{16, H, F, false, 400, F}, // 8 s: up
			{25, F, H, false, 150, H}, // undone 9 s later: 16 s now
			{26, H, F, false, 400, H},
			{41.9, H, F, false, 400, H},
			{42, H, F, false, 400, F}, // 16 s
			{53, F, F, false, 900, F}, // held 11 s: the wait is back to 4 s
			{54, F, H, false, 150, H}, // down long after: no doubling
			{55, H, F, false, 400, H},
			{59, H, F, false, 400, F}, // 4 s
		}},
		{"an idle stream probes, and keeps full size while the estimate holds", []step{
			{0, H, H, true, 75, H},
			{3.9, H, H, true, 75, H},
			{4, H, H, true, 75, F},    // the probe
			{5, F, H, false, 70, F},   // the ladder says half but the estimate did not fall
			{8, F, H, false, 200, F},  //
			{9, F, F, false, 400, F},  // the estimate caught up: an ordinary full size
			{20, F, H, false, 200, H}, // from here the ladder decides again
		}},
		{"a probe the link cannot carry goes back down and backs off", []step{
			{0, H, H, true, 140, H},
			{4, H, H, true, 140, F},  // the probe
			{5, F, H, false, 110, H}, // the estimate fell under 85 %: down, the wait doubles
			{6, H, H, true, 120, H},
			{13.9, H, H, true, 120, H},
			{14, H, H, true, 120, F}, // 8 s
		}},
		{"a busy stream at half size on a thin link does not probe", []step{
			{0, H, H, false, 140, H},
			{30, H, H, false, 140, H},
			{60, H, H, false, 140, H},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newSizeGate()
			for i, st := range tt.steps {
				at := t0.Add(time.Duration(st.at * float64(time.Second)))
				if got := g.half(at, st.cur, st.ladder, st.idl, st.est*1000); got != st.want {
					t.Errorf("step %d at %vs: half(cur %v, ladder %v, idle %v, %d kbit/s) = %v, want %v", i, st.at, st.cur, st.ladder, st.idl, st.est, got, st.want)
				}
			}
		})
	}
	// The backoff stops at sizeMaxWait.
	g := newSizeGate()
	g.up.wait, g.up.at = sizeMaxWait, t0
	g.half(t0.Add(time.Second), false, true, false, 150_000)
	if g.up.wait != sizeMaxWait {
		t.Errorf("after a failed step up at the longest wait the wait is %v, want %v", g.up.wait, sizeMaxWait)
	}
}

// TestSizes: the halved size stays even (4:2:0), and a video under twice
// minHalfSide is not halved.
func TestSizes(t *testing.T) {
	tests := []struct {
		w, h, hw, hh int
		can          bool
	}{
		{1280, 800, 640, 400, true},
		{1366, 768, 682, 384, true},
		{1918, 1078, 958, 538, true},
		{1026, 770, 512, 384, true},
		{320, 240, 160, 120, true},
		{126, 240, 62, 120, false},
	}
	for _, tt := range tests {
		hw, hh := halfSize(tt.w, tt.h)
		if hw != tt.hw || hh != tt.hh || hw%2 != 0 || hh%2 != 0 {
			t.Errorf("halfSize(%d, %d) = %d, %d; want %d, %d", tt.w, tt.h, hw, hh, tt.hw, tt.hh)
		}
		if got := canHalve(tt.w, tt.h); got != tt.can {
			t.Errorf("canHalve(%d, %d) = %v, want %v", tt.w, tt.h, got, tt.can)
		}
	}
}

// TestHalvedCursor: the pointer's picture at half size averages each 2x2
// block (odd sizes round up) and halves the hotspot.
func TestHalvedCursor(t *testing.T) {
	c := cursorShape{w: 3, h: 2, xhot: 2, yhot: 1, argb: []uint32{
		0xff000000, 0xffffffff, 0x80808080,
		0xff000000, 0xffffffff, 0x00000000,
	}}
	got := c.halved()
	want := cursorShape{w: 2, h: 1, xhot: 1, yhot: 0, argb: []uint32{0xff808080, 0x40404040}}
	if got.w != want.w || got.h != want.h || got.xhot != want.xhot || got.yhot != want.yhot || len(got.argb) != 2 ||
		got.argb[0] != want.argb[0] || got.argb[1] != want.argb[1] {
		t.Errorf("halved = %+v, want %+v", got, want)
	}
}

// TestEncoderKbps: an encoder opened at 30 fps budgets each frame as a
// thirtieth of a second, so at 15 fps it must be told twice the bitrate.
func TestEncoderKbps(t *testing.T) {
	tests := []struct {
		r    rung
		want int
	}{
		{full(2000, 30), 2000},
		{full(900, 15), 1800},
		{full(360, 7), 1542},
		{full(300, 0), 300},
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
