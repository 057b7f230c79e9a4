package control

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the control plane's own series: resets, episodes, and the
// screenshots taken for agents and for reset observations. The appliance
// registers them (Control.Collector) on its registry beside the other
// features' series; actions and people's input are hci's (hci.Metrics), the
// stream's viewers and frames are the stream's.
type metrics struct {
	resets       *prometheus.CounterVec
	resetSeconds prometheus.Histogram
	episodes     *prometheus.CounterVec
	reward       prometheus.Histogram
	steps        prometheus.Histogram
	duration     prometheus.Histogram
	screenshots  *prometheus.CounterVec
	all          []prometheus.Collector
}

func newMetrics(c *Control) *metrics {
	m := &metrics{
		resets: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "deskenv_resets_total",
			Help: "Resets of the desktop, by result (ok, error)."}, []string{"result"}),
		resetSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "deskenv_reset_duration_seconds",
			Help:    "Time a reset took, clean-up and task setup included.",
			Buckets: []float64{0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 30}}),
		episodes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "deskenv_episodes_total",
			Help: "Finished episodes, by outcome (success, failure, unscored, interrupted)."}, []string{"outcome"}),
		reward: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "deskenv_episode_reward",
			Help: "Reward of scored episodes.", Buckets: []float64{0, 0.1, 0.25, 0.5, 0.75, 0.9, 1}}),
		steps: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "deskenv_episode_steps",
			Help: "Steps (agent and human actions) per finished episode.", Buckets: []float64{1, 5, 10, 25, 50, 100, 250, 500, 1000}}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "deskenv_episode_duration_seconds",
			Help: "Duration of finished episodes.", Buckets: []float64{1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}}),
		screenshots: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "deskenv_screenshots_total",
			Help: "Screenshots taken, by who asked (agent: screenshot and zoom actions; control: reset observations)."}, []string{"source"}),
	}
	running := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "deskenv_episode_running", Help: "1 while an episode runs."},
		func() float64 {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.current != nil {
				return 1
			}
			return 0
		})
	m.all = []prometheus.Collector{m.resets, m.resetSeconds, m.episodes, m.reward, m.steps, m.duration, m.screenshots, running}
	return m
}

// episodeEnded counts an episode that has ended.
func (m *metrics) episodeEnded(ep Episode) {
	outcome := "failure"
	switch {
	case ep.Status == statusInterrupted:
		outcome = statusInterrupted
	case ep.Reward == nil:
		outcome = "unscored"
	case ep.Success != nil && *ep.Success:
		outcome = "success"
	}
	m.episodes.WithLabelValues(outcome).Inc()
	if ep.Reward != nil {
		m.reward.Observe(*ep.Reward)
	}
	m.steps.Observe(float64(ep.Steps))
	m.duration.Observe(ep.DurationS)
}

// Describe and Collect make the set one prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.all {
		c.Describe(ch)
	}
}

func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.all {
		c.Collect(ch)
	}
}

// Collector is the control plane's series for the appliance's registry.
func (c *Control) Collector() prometheus.Collector { return c.metrics }
