package hci

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics counts what crosses an executor's bus: actions by name and source,
// their failures and durations, and people's input events. It is a
// prometheus.Collector for the appliance's registry.
//
// It reads the bus like every other feature does, through a subscription of
// its own, rather than being called by the executor: the executor then knows
// nothing of metrics, and a slow scrape can never slow an action. The price
// is that a subscription that falls behind loses events; the bus counts them
// (deskenv_bus_dropped_events) so an undercount shows.
type Metrics struct {
	actions *prometheus.CounterVec
	errors  *prometheus.CounterVec
	inputs  *prometheus.CounterVec
	seconds *prometheus.HistogramVec
	dropped prometheus.GaugeFunc

	cancel func()
	done   chan struct{}
	once   sync.Once
}

// NewMetrics starts counting the events of e's bus. Close stops it.
func NewMetrics(e *Executor) *Metrics {
	bus := e.Bus()
	m := &Metrics{
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "deskenv_actions_total",
			Help: "Actions executed on the desktop, by action name and source (agent, human, script, replay)."}, []string{"action", "source"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "deskenv_action_errors_total",
			Help: "Actions that failed, by action name and source."}, []string{"action", "source"}),
		inputs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "deskenv_inputs_total",
			Help: "Low-level input events from people (key, button, motion, wheel), by type and source."}, []string{"type", "source"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "deskenv_action_duration_seconds",
			Help:    "Time to execute an action, from the executor's start to its finish, by action name.",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}}, []string{"action"}),
		dropped: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "deskenv_bus_dropped_events",
			Help: "Events the bus's subscribers (recorder, control plane, metrics) lost because they fell behind; counts and steps may be short by as many."},
			func() float64 { return float64(bus.Dropped()) }),
		done: make(chan struct{}),
	}
	ch, cancel := bus.Subscribe(4096)
	m.cancel = cancel
	go m.count(ch)
	return m
}

func (m *Metrics) count(ch <-chan Event) {
	defer close(m.done)
	for ev := range ch {
		m.observe(ev)
	}
}

func (m *Metrics) observe(ev Event) {
	src := string(ev.Source)
	switch {
	case ev.Kind == KindAction && ev.Action != nil:
		name := ev.Action.Action
		m.actions.WithLabelValues(name, src).Inc()
		m.seconds.WithLabelValues(name).Observe(ev.Duration.Seconds())
		if ev.Err != "" {
			m.errors.WithLabelValues(name, src).Inc()
		}
	case ev.Kind == KindInput && ev.Input != nil:
		m.inputs.WithLabelValues(ev.Input.Type, src).Inc()
	}
}

// Close stops counting and waits for the counter to finish.
func (m *Metrics) Close() error {
	m.once.Do(m.cancel)
	<-m.done
	return nil
}

// Describe and Collect make Metrics a prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.actions, m.errors, m.inputs, m.seconds, m.dropped}
}
