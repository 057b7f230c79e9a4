package appliance

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/deskenv/deskenv/internal/testrig"
)

// BenchmarkLease measures POST /leases from request to answer, as a
// trainer's client sees it over HTTP, on a pool of 2 desktops as deskenv
// starts them by default (openbox and an xterm, no stream): cold (every
// lease waits for its reset) and warm (--warm 2), for no task, for a task
// whose setup starts a window (warmTaskJSON) and for one whose setup opens
// a page in Chromium (warmWebJSON). Between leases a warm
// pool is given the time to refill (not measured): the figures are a lease
// that finds a warm desktop. Reports p50 and p95 in milliseconds:
//
//	go test ./appliance/ -run '^$' -bench BenchmarkLease -benchtime 40x
func BenchmarkLease(b *testing.B) {
	cases := []struct {
		name string
		warm int
		task string // the task leased (and warmed into, when warm)
	}{
		{"cold", 0, ""},
		{"warm", 2, ""},
		{"cold-task", 0, "warm-term"},
		{"warm-task", 2, "warm-term"},
		{"cold-chromium", 0, "warm-web"},
		{"warm-chromium", 2, "warm-web"},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			warmTask := ""
			if tc.warm > 0 {
				warmTask = tc.task
			}
			p, base := benchPool(b, 2, tc.warm, warmTask)
			var body map[string]any
			if tc.task != "" {
				body = map[string]any{"task_id": tc.task}
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				if tc.warm > 0 {
					b.StopTimer()
					testrig.WaitWithin(b, time.Minute, "the pool refilled", func() bool { return p.counts()[slotWarm] == tc.warm })
					b.StartTimer()
				}
				var l warmLease
				start := time.Now()
				code := doJSON(b, "POST", base+"/leases", testOperator, body, &l)
				lat = append(lat, time.Since(start))
				if code != http.StatusCreated || l.Warm != (tc.warm > 0) {
					b.Fatalf("lease: %d, warm %v", code, l.Warm)
				}
				b.StopTimer()
				if code := doJSON(b, "DELETE", base+"/leases/"+l.ID, testOperator, nil, nil); code != http.StatusNoContent {
					b.Fatalf("release: %d", code)
				}
				b.StartTimer()
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
			b.ReportMetric(ms(lat[(len(lat)*95)/100]), "p95-ms")
		})
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// benchPool is startWarmPool with the default desktop (openbox, xterm):
// a reset then restores what a real session has.
func benchPool(b *testing.B, n, warm int, task string) (*Pool, string) {
	b.Helper()
	cfg := DefaultConfig()
	cfg.Desktops, cfg.NoStream = n, true
	cfg.Warm, cfg.WarmTask = warm, task
	return servePool(b, cfg)
}
