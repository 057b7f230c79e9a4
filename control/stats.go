package control

import (
	"math"
	"sort"
)

// Stats summarises the episode history like a run manager does.
type Stats struct {
	// Episodes counts finished episodes since start (the history may keep
	// fewer); the figures below are over the kept history.
	Episodes    int         `json:"episodes"`
	Running     bool        `json:"running"`
	InHistory   int         `json:"in_history"`
	Scored      int         `json:"scored"`
	Successes   int         `json:"successes"`
	SuccessRate *float64    `json:"success_rate"` // over scored episodes
	MeanReward  *float64    `json:"mean_reward"`  // over scored episodes
	Steps       int         `json:"steps"`
	MeanSteps   *float64    `json:"mean_steps"`
	Duration    Summary     `json:"duration_s"`
	Reset       Summary     `json:"reset_s"`
	ByTask      []TaskStats `json:"by_task,omitempty"`
}

// TaskStats is Stats for one task.
type TaskStats struct {
	TaskID      string   `json:"task_id"`
	Episodes    int      `json:"episodes"`
	Successes   int      `json:"successes"`
	SuccessRate *float64 `json:"success_rate"`
	MeanReward  *float64 `json:"mean_reward"`
	MeanSteps   *float64 `json:"mean_steps"`
}

// Summary is the distribution of a duration, in seconds.
type Summary struct {
	Count int      `json:"count"`
	Mean  *float64 `json:"mean"`
	P50   *float64 `json:"p50"`
	P95   *float64 `json:"p95"`
	Max   *float64 `json:"max"`
}

func summarize(v []float64) Summary {
	s := Summary{Count: len(v)}
	if len(v) == 0 {
		return s
	}
	sorted := append([]float64(nil), v...)
	sort.Float64s(sorted)
	sum := 0.0
	for _, x := range sorted {
		sum += x
	}
	mean, p50, p95, max := sum/float64(len(v)), quantile(sorted, 0.5), quantile(sorted, 0.95), sorted[len(sorted)-1]
	s.Mean, s.P50, s.P95, s.Max = &mean, &p50, &p95, &max
	return s
}

// quantile of sorted values by the nearest-rank method.
func quantile(sorted []float64, q float64) float64 {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	if i < 0 {
		i = 0
	}
	return sorted[i]
}

func ratio(a, b int) *float64 {
	if b == 0 {
		return nil
	}
	r := float64(a) / float64(b)
	return &r
}

func mean(sum float64, n int) *float64 {
	if n == 0 {
		return nil
	}
	m := sum / float64(n)
	return &m
}

// Stats computes the statistics of the episode history.
func (c *Control) Stats() Stats {
	c.mu.Lock()
	hist := append([]Episode(nil), c.history...)
	resets := append([]float64(nil), c.resetDur...)
	st := Stats{Episodes: c.finished, Running: c.current != nil, InHistory: len(c.history)}
	c.mu.Unlock()

	type acc struct {
		n, scored, ok, steps int
		reward               float64
	}
	per := map[string]*acc{}
	var durations []float64
	var rewardSum float64
	for _, ep := range hist {
		st.Steps += ep.Steps
		durations = append(durations, ep.DurationS)
		a := per[ep.TaskID]
		if a == nil {
			a = &acc{}
			per[ep.TaskID] = a
		}
		a.n++
		a.steps += ep.Steps
		if ep.Reward != nil {
			st.Scored++
			a.scored++
			rewardSum += *ep.Reward
			a.reward += *ep.Reward
			if ep.Success != nil && *ep.Success {
				st.Successes++
				a.ok++
			}
		}
	}
	st.SuccessRate = ratio(st.Successes, st.Scored)
	st.MeanReward = mean(rewardSum, st.Scored)
	st.MeanSteps = mean(float64(st.Steps), len(hist))
	st.Duration = summarize(durations)
	st.Reset = summarize(resets)
	ids := make([]string, 0, len(per))
	for id := range per {
		if id != "" {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		a := per[id]
		st.ByTask = append(st.ByTask, TaskStats{TaskID: id, Episodes: a.n, Successes: a.ok,
			SuccessRate: ratio(a.ok, a.scored), MeanReward: mean(a.reward, a.scored), MeanSteps: mean(float64(a.steps), a.n)})
	}
	return st
}
