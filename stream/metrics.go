package stream

import (
	"github.com/prometheus/client_golang/prometheus"
)

// collector exposes the stream's Stats as Prometheus series, read once per
// scrape: the counters already exist for /api/stats-style readers, so the
// pipeline keeps counting in one place and nothing on its hot path touches
// the registry.
type collector struct {
	s     *Server
	descs []streamDesc
}

type streamDesc struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(Stats) float64
}

// Collector is the stream's series for the appliance's registry.
func (s *Server) Collector() prometheus.Collector {
	d := func(name, help string, kind prometheus.ValueType, v func(Stats) float64) streamDesc {
		return streamDesc{prometheus.NewDesc(name, help, nil, nil), kind, v}
	}
	counter, gauge := prometheus.CounterValue, prometheus.GaugeValue
	return &collector{s: s, descs: []streamDesc{
		d("deskenv_viewers", "People watching the desktop.", gauge, func(st Stats) float64 { return float64(st.Viewers) }),
		d("deskenv_stream_encoding", "1 while the capture and encode loop runs (someone watches).", gauge, func(st Stats) float64 {
			if st.Encoding {
				return 1
			}
			return 0
		}),
		d("deskenv_stream_frames_captured_total", "Frames captured from the screen for the stream.", counter, func(st Stats) float64 { return float64(st.FramesCaptured) }),
		d("deskenv_stream_frames_encoded_total", "Frames encoded, refinements and keep-alives included.", counter, func(st Stats) float64 { return float64(st.FramesEncoded) }),
		d("deskenv_stream_frames_skipped_total", "Capture ticks with an unchanged screen: nothing encoded.", counter, func(st Stats) float64 { return float64(st.FramesSkipped) }),
		d("deskenv_stream_frames_dropped_total", "Frames a viewer missed because its queue was full, summed over viewers.", counter, func(st Stats) float64 { return float64(st.FramesDropped) }),
		d("deskenv_stream_keyframes_total", "Keyframes encoded.", counter, func(st Stats) float64 { return float64(st.Keyframes) }),
		d("deskenv_stream_keyframe_requests_total", "Keyframes viewers asked for (PLI, FIR, a new viewer).", counter, func(st Stats) float64 { return float64(st.KeyframeRequest) }),
		d("deskenv_stream_encode_seconds_total", "Time spent converting and encoding frames.", counter, func(st Stats) float64 { return st.EncodeTime.Seconds() }),
		d("deskenv_stream_encoded_bytes_total", "Bytes the encoder produced.", counter, func(st Stats) float64 { return float64(st.BytesEncoded) }),
		d("deskenv_stream_sent_bytes_total", "RTP payload bytes written, summed over viewers.", counter, func(st Stats) float64 { return float64(st.BytesSent) }),
	}}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d.desc
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.Stats()
	for _, d := range c.descs {
		ch <- prometheus.MustNewConstMetric(d.desc, d.kind, d.value(st))
	}
}
