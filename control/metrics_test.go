package control

import (
	"strings"
	"testing"
)

func TestMetricsExposition(t *testing.T) {
	m := NewMetrics()
	m.Add(mActions, 1, "left_click", "agent")
	m.Add(mActions, 2, "left_click", "agent")
	m.Add(mActions, 1, "type", "human")
	m.Add(mActions, 1, "too", "many", "labels") // ignored, never a panic
	m.Add("no_such_metric", 1)
	m.Observe(mActionSeconds, 0.003, "left_click")
	m.Observe(mActionSeconds, 0.2, "left_click")
	m.Observe(mResetSeconds, 42)
	m.Add(mInputs, 1, "key_down", `we"ird\label`)
	m.Gauge("deskenv_viewers", "People watching the desktop.", func() float64 { return 3 })
	m.Gauge("deskenv_viewers", "People watching the desktop.", func() float64 { return 2 })

	var b strings.Builder
	m.WriteTo(&b)
	out := b.String()
	for _, want := range []string{
		"# TYPE deskenv_actions_total counter\n",
		`deskenv_actions_total{action="left_click",source="agent"} 3` + "\n",
		`deskenv_actions_total{action="type",source="human"} 1` + "\n",
		"# TYPE deskenv_action_duration_seconds histogram\n",
		`deskenv_action_duration_seconds_bucket{action="left_click",le="0.0025"} 0` + "\n",
		`deskenv_action_duration_seconds_bucket{action="left_click",le="0.005"} 1` + "\n",
		`deskenv_action_duration_seconds_bucket{action="left_click",le="0.25"} 2` + "\n",
		`deskenv_action_duration_seconds_bucket{action="left_click",le="+Inf"} 2` + "\n",
		`deskenv_action_duration_seconds_count{action="left_click"} 2` + "\n",
		`deskenv_action_duration_seconds_sum{action="left_click"} 0.203` + "\n",
		`deskenv_reset_duration_seconds_bucket{le="30"} 0` + "\n",
		`deskenv_reset_duration_seconds_bucket{le="+Inf"} 1` + "\n",
		`deskenv_inputs_total{type="key_down",source="we\"ird\\label"} 1` + "\n",
		"# TYPE deskenv_viewers gauge\ndeskenv_viewers 2\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("exposition lacks %q\n%s", want, out)
		}
	}
	if strings.Contains(out, `"too"`) || strings.Contains(out, "no_such_metric") {
		t.Errorf("exposition has a series from a bad call:\n%s", out)
	}
	if strings.Count(out, "# TYPE deskenv_viewers") != 1 {
		t.Errorf("a gauge registered twice is listed twice:\n%s", out)
	}
}
