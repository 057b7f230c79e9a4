package stream

import (
	"context"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/deskenv/deskenv/internal/codec"
	"github.com/deskenv/deskenv/internal/xprobe"
	"github.com/deskenv/deskenv/screen"
)

// paintMoving draws frame i of a scene that changes a large part of a
// 1280x800 screen: a 480x320 striped box sliding across, and a column of
// "text lines" that scrolls.
func paintMoving(p *xprobe.Probe, i int) {
	x := (i * 12) % (1280 - 480)
	p.Fill(0, 0, 1280, 800, 0xf0f0f0)
	for s := 0; s < 8; s++ {
		p.Fill(x, 200+s*40, 480, 40, uint32(0x203040+s*0x101020+i*0x10))
	}
	for l := 0; l < 30; l++ {
		w := 200 + (l*37+i*13)%500
		p.Fill(40, 20+((l*24+i*6)%760), w, 10, 0x303030)
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPipelineFrame is the per-frame cost of the video loop at
// 1280x800 with moving content: capture (MIT-SHM), BGRX->I420, pointer
// blend, H.264 encode, at the default preset and bitrate. Painting the
// scene is not timed.
func BenchmarkPipelineFrame(b *testing.B) {
	for _, preset := range []string{"ultrafast", DefaultPreset} {
		b.Run(preset, func(b *testing.B) {
			e := newEnv(b, envOptions{width: 1280, height: 800})
			p := e.probe(b)
			capt, err := screen.NewCapturer(e.d)
			if err != nil {
				b.Fatal(err)
			}
			defer capt.Close()
			enc, err := codec.NewH264Encoder(codec.H264Options{Width: 1280, Height: 800, FPS: 30, BitrateKbps: DefaultBitrateKbps, Preset: preset})
			if err != nil {
				b.Fatal(err)
			}
			defer enc.Close()
			pic := codec.NewI420(1280, 800)
			pl := planesOf(pic)
			var frame screen.Frame
			var sc codec.Scaler
			cs := e.s.xw.cursor(0)
			ci := newCursorImage(cs.w, cs.h, cs.xhot, cs.yhot, cs.argb)
			var under saveUnder
			var capture, conv, encode time.Duration
			var bytes int
			ctx := context.Background()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				paintMoving(p, i)
				p.Sync(ctx)
				b.StartTimer()
				t0 := time.Now()
				if err := capt.CaptureInto(ctx, &frame); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if err := convert(&sc, &frame, pic); err != nil {
					b.Fatal(err)
				}
				under = saveUnder{y: under.y, u: under.u, v: under.v}
				ci.draw(pl, 300+i%200, 300, &under)
				t2 := time.Now()
				data, _, err := enc.Encode(pic, time.Duration(i)*time.Second/30)
				if err != nil {
					b.Fatal(err)
				}
				t3 := time.Now()
				capture += t1.Sub(t0)
				conv += t2.Sub(t1)
				encode += t3.Sub(t2)
				bytes += len(data)
			}
			n := float64(b.N)
			b.ReportMetric(float64(capture.Microseconds())/n/1000, "capture-ms/frame")
			b.ReportMetric(float64(conv.Microseconds())/n/1000, "convert-ms/frame")
			b.ReportMetric(float64(encode.Microseconds())/n/1000, "encode-ms/frame")
			b.ReportMetric(float64(bytes)/n/1024, "KiB/frame")
			b.ReportMetric(float64(capture+conv+encode)/float64(time.Second/30)/n*100, "%core@30fps")
		})
	}
}

// BenchmarkFanOut10 changes the screen and waits until each of 10 viewers
// has received the frame: one encode serves all (encodes/frame stays 1), and
// ms/op is the time from drawing to the last viewer holding the frame.
func BenchmarkFanOut10(b *testing.B) {
	e := newEnv(b, envOptions{width: 1280, height: 800})
	p := e.probe(b)
	const viewers = 10
	cs := make([]*client, viewers)
	for i := range cs {
		cs[i] = join(b, e, clientOptions{})
		defer cs[i].close()
		cs[i].waitFrame(10 * time.Second)
	}
	for _, c := range cs {
		c.collect(300 * time.Millisecond)
	}
	before := e.s.Stats()
	cpu0 := cpuTime()
	received := make([]int, viewers)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		paintMoving(p, i)
		var wg sync.WaitGroup
		for j, c := range cs {
			wg.Add(1)
			go func(j int, c *client) {
				defer wg.Done()
				c.waitFrame(5 * time.Second)
				received[j]++
			}(j, c)
		}
		wg.Wait()
		// A change drawn over several milliseconds can take two frames:
		// count those too.
		b.StopTimer()
		time.Sleep(40 * time.Millisecond)
		for j, c := range cs {
			received[j] += len(c.collect(time.Millisecond))
		}
		b.StartTimer()
	}
	b.StopTimer()
	after := e.s.Stats()
	encoded := after.FramesEncoded - before.FramesEncoded
	minRecv := received[0]
	for _, r := range received {
		minRecv = min(minRecv, r)
	}
	// Every viewer got every frame, and each was encoded once.
	b.ReportMetric(float64(encoded)/float64(minRecv), "encodes/frame")
	b.ReportMetric(float64(minRecv)/float64(b.N), "frames/change")
	b.ReportMetric(float64(after.FramesDropped-before.FramesDropped), "dropped")
	b.ReportMetric(float64(after.BytesSent-before.BytesSent)/float64(after.BytesEncoded-before.BytesEncoded), "sent/encoded-bytes")
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/change")
}

// BenchmarkIdleViewer is the CPU the process spends per second while one
// viewer watches a screen where nothing changes.
func BenchmarkIdleViewer(b *testing.B) {
	e := newEnv(b, envOptions{width: 1280, height: 800})
	e.probe(b)
	c := join(b, e, clientOptions{})
	defer c.close()
	c.waitFrame(10 * time.Second)
	c.collect(500 * time.Millisecond)
	before := e.s.Stats()
	cpu0 := cpuTime()
	t0 := time.Now()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		time.Sleep(time.Second / DefaultFPS)
	}
	b.StopTimer()
	wall := time.Since(t0)
	after := e.s.Stats()
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(wall)*100, "%core")
	b.ReportMetric(float64(after.FramesEncoded-before.FramesEncoded), "frames-encoded")
	b.ReportMetric(float64(after.FramesCaptured-before.FramesCaptured), "frames-captured")
}
