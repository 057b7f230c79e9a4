package stream

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/rtcp"
	"github.com/pion/webrtc/v4"
)

// LinkStats is what one viewer's link does: the numbers a person asks the
// page for ({"type":"stats"}) and /metrics carries per viewer.
type LinkStats struct {
	Viewer string `json:"viewer"`
	Codec  string `json:"codec"`
	// Transport is how the video travels: "udp", "tcp" (ICE-TCP) or
	// "relay" (through TURN); "" until ICE has chosen a pair; "websocket"
	// for the one-port fallback (wsvideo.go).
	Transport string `json:"transport"`
	// RTTMillis is the round trip of the chosen ICE pair, from STUN
	// consent checks (every few seconds); 0 until one was measured. On the
	// websocket it is from sending a frame to its acknowledgement, the
	// page's decode included.
	RTTMillis float64 `json:"rtt_ms"`
	// EstimateKbps is GCC's estimate of this viewer's link; 0 with
	// congestion control off.
	EstimateKbps int `json:"estimate_kbps"`
	// TargetKbps and TargetFPS are what the shared encoder aims at: the
	// rung of the viewer with the lowest estimate.
	TargetKbps int `json:"target_kbps"`
	TargetFPS  int `json:"target_fps"`
	// TargetWidth and TargetHeight are the size of the video the shared
	// encoder sends: the hello's video size, or half of it on the size
	// rung.
	TargetWidth  int `json:"target_width"`
	TargetHeight int `json:"target_height"`
	// FPS, SentKbps and Keyframes are what was sent to this viewer in the
	// last whole second (frames, encoded bits, keyframes among them).
	FPS       float64 `json:"fps"`
	SentKbps  float64 `json:"sent_kbps"`
	Keyframes uint64  `json:"keyframes_total"` // keyframes sent to this viewer since it joined
	// Loss is the share of packets lost, as the browser's last receiver
	// report said (0..1); PacketsLost is its running total.
	Loss        float64 `json:"loss"`
	PacketsLost int64   `json:"packets_lost"`
}

// linkStats is what a viewer's goroutines record about its link.
type linkStats struct {
	sent    secondMeter
	lossQ8  atomic.Uint32 // the receiver report's fraction lost, in 256ths
	lost    atomic.Int64
	reports atomic.Uint64
}

// receiverReport keeps the loss the browser reported for ssrc (the video
// stream; RTX's own reports are not the picture's loss).
func (l *linkStats) receiverReport(rr *rtcp.ReceiverReport, ssrc webrtc.SSRC) {
	for _, rep := range rr.Reports {
		if rep.SSRC == uint32(ssrc) {
			l.lossQ8.Store(uint32(rep.FractionLost))
			l.lost.Store(int64(rep.TotalLost))
			l.reports.Add(1)
		}
	}
}

// secondMeter counts frames, bytes and keyframes per wall-clock second and
// reports the last whole second: no goroutine, no ring, and a viewer
// nothing was sent to for two seconds reads as zero.
type secondMeter struct {
	mu        sync.Mutex
	sec       int64
	cur, last meterCount
	keyframes uint64
}

type meterCount struct{ frames, bytes, keys uint64 }

func (m *secondMeter) add(now time.Time, bytes int, key bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.roll(now.Unix())
	m.cur.frames++
	m.cur.bytes += uint64(bytes)
	if key {
		m.cur.keys++
		m.keyframes++
	}
}

// roll moves to second s.
func (m *secondMeter) roll(s int64) {
	switch {
	case s == m.sec:
		return
	case s == m.sec+1:
		m.last = m.cur
	default:
		m.last = meterCount{}
	}
	m.sec, m.cur = s, meterCount{}
}

// read is the last whole second's counts and the keyframes ever sent.
func (m *secondMeter) read(now time.Time) (meterCount, uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.roll(now.Unix())
	return m.last, m.keyframes
}

// linkStats reads what v's link does now.
func (v *viewer) linkStats(now time.Time) (LinkStats, bool) {
	v.mu.Lock()
	pc, out, video, w := v.pc, v.send, v.video, v.wsv
	v.mu.Unlock()
	if w != nil {
		return v.wsLinkStats(w, now), true
	}
	if pc == nil || out.codec == nil {
		return LinkStats{}, false
	}
	st := LinkStats{Viewer: v.id, Codec: out.codec.Name}
	v.s.video.setTarget(&st)
	if out.bwe != nil {
		st.EstimateKbps = out.bwe.GetTargetBitrate() / 1000
	}
	if video {
		c, keys := v.link.sent.read(now)
		st.FPS, st.SentKbps, st.Keyframes = float64(c.frames), float64(c.bytes)*8/1000, keys
	}
	st.Loss = float64(v.link.lossQ8.Load()) / 256
	st.PacketsLost = v.link.lost.Load()
	st.Transport, st.RTTMillis = transportOf(pc)
	return st, true
}

// setTarget fills in the shared encoder's target.
func (p *pipeline) setTarget(st *LinkStats) {
	target := p.target.Load()
	st.TargetKbps, st.TargetFPS = target.kbps, target.fps
	st.TargetWidth, st.TargetHeight = p.targetSize()
}

// transportOf names the ICE pair pc sends on and its round trip.
func transportOf(pc *webrtc.PeerConnection) (string, float64) {
	sctp := pc.SCTP()
	if sctp == nil || sctp.Transport() == nil || sctp.Transport().ICETransport() == nil {
		return "", 0
	}
	ice := sctp.Transport().ICETransport()
	pair, err := ice.GetSelectedCandidatePair()
	if err != nil || pair == nil || pair.Local == nil || pair.Remote == nil {
		return "", 0
	}
	kind := pair.Local.Protocol.String()
	if pair.Local.Typ == webrtc.ICECandidateTypeRelay || pair.Remote.Typ == webrtc.ICECandidateTypeRelay {
		kind = "relay"
	}
	rtt := 0.0
	if ps, ok := ice.GetSelectedCandidatePairStats(); ok {
		rtt = ps.CurrentRoundTripTime * 1000
	}
	return kind, rtt
}

// Links reports every viewer's link that negotiated video, in the order
// viewers joined.
func (s *Server) Links() []LinkStats {
	s.mu.Lock()
	vs := make([]*viewer, 0, len(s.viewers))
	for _, v := range s.viewers {
		vs = append(vs, v)
	}
	s.mu.Unlock()
	sort.Slice(vs, func(i, j int) bool {
		if !vs[i].since.Equal(vs[j].since) {
			return vs[i].since.Before(vs[j].since)
		}
		return vs[i].id < vs[j].id
	})
	now := time.Now()
	out := make([]LinkStats, 0, len(vs))
	for _, v := range vs {
		if st, ok := v.linkStats(now); ok {
			out = append(out, st)
		}
	}
	return out
}

// statsMsg answers {"type":"stats"}: the asking viewer's own link and the
// stream's shared target. Other viewers' links are not shown: where and
// how well someone else watches is theirs (operators read /metrics).
type statsMsg struct {
	Type string     `json:"type"` // "stats"
	Link *LinkStats `json:"link"` // null before the peer connection is negotiated
	// CongestionControl is false with FixedBitrate.
	CongestionControl bool `json:"congestion_control"`
}

func (v *viewer) onStats() {
	m := statsMsg{Type: "stats", CongestionControl: !v.s.cfg.FixedBitrate}
	if st, ok := v.linkStats(time.Now()); ok {
		m.Link = &st
	}
	v.sendJSON(m)
}
