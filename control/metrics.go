package control

import (
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Metrics holds the appliance's counters and histograms and writes them in
// the Prometheus text exposition format (version 0.0.4). It is written here
// rather than with client_golang: a handful of series does not justify the
// dependency, and the format is small and stable.
type Metrics struct {
	mu       sync.Mutex
	counters map[string]*family
	hists    map[string]*histFamily
	gauges   []gaugeFunc
	order    []string // family names in registration order
	help     map[string]string
	kind     map[string]string
}

type family struct {
	labels []string
	values map[string]float64 // key: label values joined by \x00
}

type histFamily struct {
	labels  []string
	buckets []float64
	series  map[string]*histSeries
}

type histSeries struct {
	counts []uint64 // per bucket, not cumulative
	count  uint64
	sum    float64
}

type gaugeFunc struct {
	name, help string
	f          func() float64
}

// Metric names.
const (
	mActions        = "deskenv_actions_total"
	mActionErrors   = "deskenv_action_errors_total"
	mInputs         = "deskenv_inputs_total"
	mActionSeconds  = "deskenv_action_duration_seconds"
	mScreenshots    = "deskenv_screenshots_total"
	mResets         = "deskenv_resets_total"
	mResetSeconds   = "deskenv_reset_duration_seconds"
	mEpisodes       = "deskenv_episodes_total"
	mEpisodeReward  = "deskenv_episode_reward"
	mEpisodeSteps   = "deskenv_episode_steps"
	mEpisodeSeconds = "deskenv_episode_duration_seconds"
)

var (
	latencyBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}
	resetBuckets   = []float64{0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 30}
	rewardBuckets  = []float64{0, 0.1, 0.25, 0.5, 0.75, 0.9, 1}
	stepBuckets    = []float64{1, 5, 10, 25, 50, 100, 250, 500, 1000}
	episodeBuckets = []float64{1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}
)

// NewMetrics returns the appliance's metric set, every family declared.
func NewMetrics() *Metrics {
	m := &Metrics{counters: map[string]*family{}, hists: map[string]*histFamily{}, help: map[string]string{}, kind: map[string]string{}}
	m.counter(mActions, "Actions executed on the desktop, by action name and source (agent, human, script, replay).", "action", "source")
	m.counter(mActionErrors, "Actions that failed, by action name and source.", "action", "source")
	m.counter(mInputs, "Low-level input events from people (key, button, motion, wheel), by type and source.", "type", "source")
	m.histogram(mActionSeconds, "Time to execute an action, from the executor's start to its finish, by action name.", latencyBuckets, "action")
	m.counter(mScreenshots, "Screenshots taken, by who asked (agent: screenshot and zoom actions; control: reset observations).", "source")
	m.counter(mResets, "Resets of the desktop, by result (ok, error).", "result")
	m.histogram(mResetSeconds, "Time a reset took, clean-up and task setup included.", resetBuckets)
	m.counter(mEpisodes, "Finished episodes, by outcome (success, failure, unscored, interrupted).", "outcome")
	m.histogram(mEpisodeReward, "Reward of scored episodes.", rewardBuckets)
	m.histogram(mEpisodeSteps, "Steps (agent and human actions) per finished episode.", stepBuckets)
	m.histogram(mEpisodeSeconds, "Duration of finished episodes.", episodeBuckets)
	return m
}

func (m *Metrics) counter(name, help string, labels ...string) {
	m.counters[name] = &family{labels: labels, values: map[string]float64{}}
	m.order = append(m.order, name)
	m.help[name], m.kind[name] = help, "counter"
}

func (m *Metrics) histogram(name, help string, buckets []float64, labels ...string) {
	m.hists[name] = &histFamily{labels: labels, buckets: buckets, series: map[string]*histSeries{}}
	m.order = append(m.order, name)
	m.help[name], m.kind[name] = help, "histogram"
}

// Gauge registers a gauge read at scrape time, such as the number of viewers.
// Registering a name again replaces its function.
func (m *Metrics) Gauge(name, help string, f func() float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, g := range m.gauges {
		if g.name == name {
			m.gauges[i] = gaugeFunc{name, help, f}
			return
		}
	}
	m.gauges = append(m.gauges, gaugeFunc{name, help, f})
}

// Add adds v to a counter.
func (m *Metrics) Add(name string, v float64, labelValues ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.counters[name]
	if f == nil || len(labelValues) != len(f.labels) {
		return
	}
	f.values[strings.Join(labelValues, "\x00")] += v
}

// Observe records v in a histogram.
func (m *Metrics) Observe(name string, v float64, labelValues ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.hists[name]
	if h == nil || len(labelValues) != len(h.labels) {
		return
	}
	key := strings.Join(labelValues, "\x00")
	s := h.series[key]
	if s == nil {
		s = &histSeries{counts: make([]uint64, len(h.buckets))}
		h.series[key] = s
	}
	for i, b := range h.buckets {
		if v <= b {
			s.counts[i]++
			break
		}
	}
	s.count++
	s.sum += v
}

// Value reads a counter (for tests and the stats endpoint).
func (m *Metrics) Value(name string, labelValues ...string) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if f := m.counters[name]; f != nil {
		return f.values[strings.Join(labelValues, "\x00")]
	}
	return 0
}

// WriteTo writes every family in the text exposition format.
func (m *Metrics) WriteTo(w io.Writer) (int64, error) {
	var b strings.Builder
	m.mu.Lock()
	for _, name := range m.order {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", name, escapeHelp(m.help[name]), name, m.kind[name])
		if f := m.counters[name]; f != nil {
			for _, key := range slices.Sorted(maps.Keys(f.values)) {
				fmt.Fprintf(&b, "%s%s %s\n", name, labelText(f.labels, key, "", ""), formatFloat(f.values[key]))
			}
			continue
		}
		h := m.hists[name]
		keys := make([]string, 0, len(h.series))
		for k := range h.series {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, key := range keys {
			s := h.series[key]
			var cum uint64
			for i, le := range h.buckets {
				cum += s.counts[i]
				fmt.Fprintf(&b, "%s_bucket%s %d\n", name, labelText(h.labels, key, "le", formatFloat(le)), cum)
			}
			fmt.Fprintf(&b, "%s_bucket%s %d\n", name, labelText(h.labels, key, "le", "+Inf"), s.count)
			fmt.Fprintf(&b, "%s_sum%s %s\n", name, labelText(h.labels, key, "", ""), formatFloat(s.sum))
			fmt.Fprintf(&b, "%s_count%s %d\n", name, labelText(h.labels, key, "", ""), s.count)
		}
	}
	gauges := append([]gaugeFunc(nil), m.gauges...)
	m.mu.Unlock()
	// Gauge functions run without the lock: they call into other packages.
	for _, g := range gauges {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n%s %s\n", g.name, escapeHelp(g.help), g.name, g.name, formatFloat(g.f()))
	}
	n, err := io.WriteString(w, b.String())
	return int64(n), err
}

// ServeHTTP serves the exposition.
func (m *Metrics) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	m.WriteTo(w)
}

func labelText(names []string, key, extraName, extraValue string) string {
	var parts []string
	if len(names) > 0 {
		values := strings.Split(key, "\x00")
		for i, n := range names {
			parts = append(parts, n+`="`+escapeLabel(values[i])+`"`)
		}
	}
	if extraName != "" {
		parts = append(parts, extraName+`="`+extraValue+`"`)
	}
	if len(parts) == 0 {
		return ""
	}
	return "{" + strings.Join(parts, ",") + "}"
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
var helpEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`)

func escapeLabel(s string) string { return labelEscaper.Replace(s) }
func escapeHelp(s string) string  { return helpEscaper.Replace(s) }

func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

func seconds(d time.Duration) float64 { return d.Seconds() }
