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
	links []linkDesc
}

// linkDesc is one per-viewer series, labelled by viewer id (and transport
// where it says which). Viewers come and go, so their series exist only
// while they are connected.
type linkDesc struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(LinkStats) float64
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
		d("deskenv_stream_target_bitrate_kbps", "Bitrate congestion control aims the shared encode at (the lowest viewer's), kbit/s.", gauge, func(st Stats) float64 { return float64(st.TargetKbps) }),
		d("deskenv_stream_target_fps", "Frame rate congestion control allows the shared encode.", gauge, func(st Stats) float64 { return float64(st.TargetFPS) }),
		d("deskenv_stream_target_width", "Width of the video the shared encode sends (half the video size on congestion control's size rung).", gauge, func(st Stats) float64 { return float64(st.TargetWidth) }),
		d("deskenv_stream_target_height", "Height of the video the shared encode sends.", gauge, func(st Stats) float64 { return float64(st.TargetHeight) }),
		d("deskenv_stream_rate_changes_total", "Times congestion control moved the target bitrate, frame rate or video size.", counter, func(st Stats) float64 { return float64(st.RateChanges) }),
	}, links: linkDescs()}
}

func linkDescs() []linkDesc {
	l := func(name, help string, kind prometheus.ValueType, v func(LinkStats) float64) linkDesc {
		return linkDesc{prometheus.NewDesc(name, help, []string{"viewer", "transport"}, nil), kind, v}
	}
	gauge := prometheus.GaugeValue
	return []linkDesc{
		l("deskenv_viewer_rtt_seconds", "Round-trip time of the viewer's ICE pair (STUN consent checks).", gauge, func(st LinkStats) float64 { return st.RTTMillis / 1000 }),
		l("deskenv_viewer_estimate_bitrate_kbps", "GCC's estimate of the viewer's link, kbit/s (0 without congestion control).", gauge, func(st LinkStats) float64 { return float64(st.EstimateKbps) }),
		l("deskenv_viewer_sent_bitrate_kbps", "Video bits sent to the viewer in the last whole second, kbit/s.", gauge, func(st LinkStats) float64 { return st.SentKbps }),
		l("deskenv_viewer_fps", "Frames sent to the viewer in the last whole second.", gauge, func(st LinkStats) float64 { return st.FPS }),
		l("deskenv_viewer_loss_ratio", "Share of packets the viewer's last receiver report said were lost (0..1).", gauge, func(st LinkStats) float64 { return st.Loss }),
		l("deskenv_viewer_packets_lost", "Packets lost on the way to the viewer, as its receiver reports count them.", gauge, func(st LinkStats) float64 { return float64(st.PacketsLost) }),
		l("deskenv_viewer_keyframes_sent_total", "Keyframes sent to the viewer since it joined.", prometheus.CounterValue, func(st LinkStats) float64 { return float64(st.Keyframes) }),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d.desc
	}
	for _, d := range c.links {
		ch <- d.desc
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.Stats()
	for _, d := range c.descs {
		ch <- prometheus.MustNewConstMetric(d.desc, d.kind, d.value(st))
	}
	for _, ls := range c.s.Links() {
		for _, d := range c.links {
			ch <- prometheus.MustNewConstMetric(d.desc, d.kind, d.value(ls), ls.Viewer, ls.Transport)
		}
	}
}
