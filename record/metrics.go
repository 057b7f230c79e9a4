package record

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the recorder's series: episodes written, by status, and what
// the recording in progress holds, read from Status at scrape time.
type metrics struct {
	episodes *prometheus.CounterVec
	steps    *prometheus.CounterVec
	current  prometheus.Collector
}

func newMetrics(r *Recorder) *metrics {
	return &metrics{
		episodes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "deskenv_recorded_episodes_total",
			Help: "Episodes the recorder finished writing, by status (complete, incomplete) and source (agent, human, mixed)."},
			[]string{"status", "source"}),
		steps: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "deskenv_recorded_steps_total",
			Help: "Steps written into finished episodes, by the episode's source."}, []string{"source"}),
		current: &statusCollector{r: r,
			recording: prometheus.NewDesc("deskenv_recording", "1 while an episode is being recorded (paused or not).", nil, nil),
			paused:    prometheus.NewDesc("deskenv_recording_paused", "1 while the recording is paused (privacy).", nil, nil),
			steps:     prometheus.NewDesc("deskenv_recording_steps", "Steps in the episode being recorded.", nil, nil),
			frames:    prometheus.NewDesc("deskenv_recording_frames", "Video frames in the episode being recorded.", nil, nil),
		},
	}
}

// stopped counts an episode the recorder finished.
func (m *metrics) stopped(meta Meta) {
	m.episodes.WithLabelValues(meta.Status, meta.Source).Inc()
	m.steps.WithLabelValues(meta.Source).Add(float64(meta.Counts.Steps))
}

func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	m.episodes.Describe(ch)
	m.steps.Describe(ch)
	m.current.Describe(ch)
}

func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	m.episodes.Collect(ch)
	m.steps.Collect(ch)
	m.current.Collect(ch)
}

// statusCollector reads the recording in progress once per scrape.
type statusCollector struct {
	r                                *Recorder
	recording, paused, steps, frames *prometheus.Desc
}

func (c *statusCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.recording, c.paused, c.steps, c.frames} {
		ch <- d
	}
}

func (c *statusCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.r.Status()
	var steps, frames float64
	if st.Episode != nil {
		steps, frames = float64(st.Episode.Steps), float64(st.Episode.Frames)
	}
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	gauge(c.recording, one(st.Recording))
	gauge(c.paused, one(st.Paused))
	gauge(c.steps, steps)
	gauge(c.frames, frames)
}

func one(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Collector is the recorder's series for the appliance's registry.
func (r *Recorder) Collector() prometheus.Collector { return r.metrics }
