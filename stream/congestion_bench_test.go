package stream

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkCongestion streams a 320x240 screen of random pixels (the
// encoder always spends all it is given) for benchSeconds over a vnet link
// per profile, with congestion control and with the fixed bitrate of
// before, and reports per second what reached the viewer: frames (their
// last packet arrived), video sent, keyframes, and the loss the viewer's
// receiver reports gave. b.N repeats the whole run; use -benchtime=1x.
func BenchmarkCongestion(b *testing.B) {
	const benchSeconds = 15
	profiles := []struct {
		name    string
		rateBps int
		delay   time.Duration // one way
		lossPct int
	}{
		{"3Mbit-40ms-1loss", 3_000_000, 40 * time.Millisecond, 1},
		{"1Mbit-75ms-3loss", 1_000_000, 75 * time.Millisecond, 3},
	}
	for _, pr := range profiles {
		for _, fixed := range []bool{true, false} {
			mode := "cc"
			if fixed {
				mode = "fixed"
			}
			b.Run(fmt.Sprintf("%s/%s", pr.name, mode), func(b *testing.B) {
				for range b.N {
					link := newDelayedLinks(b, pr.delay, pr.lossPct, pr.rateBps)
					e := newEnv(b, envOptions{width: 320, height: 240, cfg: Config{FixedBitrate: fixed, settings: link.serverSettings}})
					ctx, cancel := context.WithCancel(context.Background())
					noise(ctx, b, e, 30)
					var frames atomic.Int64
					c := join(b, e, clientOptions{api: link.viewerAPI(b), onTrack: countFrames(&frames, nil)})
					// Measure from the first frame on: joining is not what
					// is compared.
					if _, ok := watchTarget(e, 20*time.Second, func(Stats) bool { return frames.Load() > 0 }); !ok {
						b.Fatalf("no video within 20 s")
					}
					s0, f0, t0 := e.s.Stats(), frames.Load(), time.Now()
					time.Sleep(benchSeconds * time.Second)
					s1, f1, secs := e.s.Stats(), frames.Load(), time.Since(t0).Seconds()
					var loss float64
					if ls := e.s.Links(); len(ls) == 1 {
						loss = ls[0].Loss
					}
					c.close()
					cancel()
					b.ReportMetric(float64(f1-f0)/secs, "frames/s")
					b.ReportMetric(float64(s1.BytesSent-s0.BytesSent)*8/1000/secs, "kbit/s")
					b.ReportMetric(float64(s1.Keyframes-s0.Keyframes), "keyframes")
					b.ReportMetric(float64(s1.KeyframeRequest-s0.KeyframeRequest), "key-requests")
					b.ReportMetric(loss*100, "%loss")
					b.ReportMetric(float64(s1.TargetKbps), "target-kbit/s")
				}
			})
		}
	}
}
