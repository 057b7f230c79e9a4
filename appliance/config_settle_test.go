package appliance

import (
	"context"
	"testing"
	"time"

	"github.com/deskenv/deskenv/screen"
)

// busyMeter is an Activity that is never asked: settle only passes it on.
type busyMeter struct{}

func (busyMeter) Used(context.Context) (time.Duration, error) { return 0, nil }

// TestSettleOptions: the idle quiet period reaches a settle only when it
// is shorter than the quiet period and the desktop's programs can be
// measured.
func TestSettleOptions(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name        string
		quiet, idle time.Duration
		act         screen.Activity
		want        bool
	}{
		{"default", 80 * ms, 40 * ms, busyMeter{}, true},
		{"off", 80 * ms, 0, busyMeter{}, false},
		{"not shorter than quiet", 40 * ms, 40 * ms, busyMeter{}, false},
		{"programs unknown (an attached display)", 80 * ms, 40 * ms, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{SettleQuiet: tc.quiet, SettleMax: 2 * time.Second, SettleIdleQuiet: tc.idle}
			opt := c.settle(tc.act)
			if got := opt.Activity != nil; got != tc.want {
				t.Errorf("settle(%v) with quiet %s, idle quiet %s: activity given %v, want %v", tc.act, tc.quiet, tc.idle, got, tc.want)
			}
			if opt.Quiet != tc.quiet || opt.Max != 2*time.Second {
				t.Errorf("settle = %+v: quiet and max not as configured", opt)
			}
			if tc.want && opt.IdleQuiet != tc.idle {
				t.Errorf("settle idle quiet = %s, want %s", opt.IdleQuiet, tc.idle)
			}
		})
	}
}
