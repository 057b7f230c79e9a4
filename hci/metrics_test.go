package hci_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/internal/testrig"
)

// sample is one series of a gathered family: its label values and value.
func sample(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
					continue series
				}
			}
			return value(f.GetType(), m), true
		}
	}
	return 0, false
}

func value(kind dto.MetricType, m *dto.Metric) float64 {
	switch kind {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue()
	case dto.MetricType_HISTOGRAM:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return 0
}

func TestMetricsCountTheBus(t *testing.T) {
	d := testrig.Display(t, display.Config{})
	w, h := d.Size()
	space, err := hci.NewSpace(w, h, "off")
	if err != nil {
		t.Fatal(err)
	}
	exec, err := hci.NewExecutor(d, hci.Options{Space: space})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exec.Close() })
	m := hci.NewMetrics(exec)
	t.Cleanup(func() { m.Close() })
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)

	ctx := context.Background()
	for _, a := range []hci.Action{
		{Action: hci.ActMouseMove, Coordinate: []int{10, 10}},
		{Action: hci.ActMouseMove, Coordinate: []int{20, 20}},
		{Action: hci.ActKey, Text: "no_such_key"}, // fails
	} {
		exec.Do(ctx, a, hci.SourceAgent)
	}
	if err := exec.KeyDown(ctx, 0x61, hci.SourceHuman); err != nil {
		t.Fatal(err)
	}
	exec.KeyUp(ctx, 0x61, hci.SourceHuman)

	want := []struct {
		name   string
		labels map[string]string
		value  float64
	}{
		{"deskenv_actions_total", map[string]string{"action": "mouse_move", "source": "agent"}, 2},
		{"deskenv_actions_total", map[string]string{"action": "key", "source": "agent"}, 1},
		{"deskenv_action_errors_total", map[string]string{"action": "key", "source": "agent"}, 1},
		{"deskenv_action_duration_seconds", map[string]string{"action": "mouse_move"}, 2},
		{"deskenv_inputs_total", map[string]string{"type": hci.InputKeyDown, "source": "human"}, 1},
		{"deskenv_inputs_total", map[string]string{"type": hci.InputKeyUp, "source": "human"}, 1},
		{"deskenv_bus_dropped_events", nil, 0},
	}
	// The counter reads the bus on its own goroutine: wait until it has
	// seen the last event, then every figure must be exact.
	testrig.WaitFor(t, "the counter to see the key release", func() bool {
		v, _ := sample(t, reg, "deskenv_inputs_total", map[string]string{"type": hci.InputKeyUp})
		return v == 1
	})
	for _, w := range want {
		got, ok := sample(t, reg, w.name, w.labels)
		if !ok || got != w.value {
			t.Errorf("%s%v = %v (present %v), want %v", w.name, w.labels, got, ok, w.value)
		}
	}
}
