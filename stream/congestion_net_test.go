package stream

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
	"github.com/pion/ice/v4"
	"github.com/pion/interceptor"
	"github.com/pion/logging"
	"github.com/pion/rtcp"
	"github.com/pion/transport/v4/vnet"
	"github.com/pion/webrtc/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/deskenv/deskenv/internal/xprobe"
)

// shapedLink is a virtual network (pion's vnet) with the server on one side
// and viewers on the other, each viewer's downlink (everything the server
// sends it) through a token bucket whose rate the test may change, and
// optionally a loss filter: tc tbf and a lossy hop, in Go, with no traffic
// beyond the process.
type shapedLink struct {
	server *vnet.Net
	viewer *vnet.Net      // the first viewer's
	tbf    *vnet.TBFQueue // the first viewer's
	views  []shapedViewer
}

type shapedViewer struct {
	net *vnet.Net
	tbf *vnet.TBFQueue
}

func newShapedLink(t testing.TB, rateBps, lossPct int) *shapedLink {
	return newShapedLinks(t, lossPct, rateBps)
}

// newShapedLinks is a link with one viewer per rate, all with lossPct loss.
func newShapedLinks(t testing.TB, lossPct int, ratesBps ...int) *shapedLink {
	t.Helper()
	return newDelayedLinks(t, 0, lossPct, ratesBps...)
}

// newDelayedLinks is newShapedLinks with a one-way delay on every packet.
func newDelayedLinks(t testing.TB, delay time.Duration, lossPct int, ratesBps ...int) *shapedLink {
	t.Helper()
	lf := logging.NewDefaultLoggerFactory()
	lf.DefaultLogLevel = logging.LogLevelDisabled
	router, err := vnet.NewRouter(&vnet.RouterConfig{CIDR: "10.18.0.0/24", LoggerFactory: lf, MinDelay: delay})
	if err != nil {
		t.Fatal(err)
	}
	l := &shapedLink{}
	if l.server, err = vnet.NewNet(&vnet.NetConfig{StaticIPs: []string{"10.18.0.1"}}); err != nil {
		t.Fatal(err)
	}
	if err := router.AddNet(l.server); err != nil {
		t.Fatal(err)
	}
	var queues []*vnet.Queue
	for i, rate := range ratesBps {
		v := shapedViewer{}
		if v.net, err = vnet.NewNet(&vnet.NetConfig{StaticIPs: []string{fmt.Sprintf("10.18.0.%d", 2+i)}}); err != nil {
			t.Fatal(err)
		}
		// The queue holds about 150 ms at 4 Mbit/s, a second at 500
		// kbit/s: a home router's buffer, so a sender that overshoots sees
		// delay first and tail drops after.
		v.tbf = vnet.NewTBFQueue(rate, 8*1200, 75_000)
		q, err := vnet.NewQueue(v.net, v.tbf)
		if err != nil {
			t.Fatal(err)
		}
		queues = append(queues, q)
		var nic vnet.NIC = q
		if lossPct > 0 {
			if nic, err = vnet.NewLossFilter(q, lossPct); err != nil {
				t.Fatal(err)
			}
		}
		if err := router.AddNet(nic); err != nil {
			t.Fatal(err)
		}
		l.views = append(l.views, v)
	}
	l.viewer, l.tbf = l.views[0].net, l.views[0].tbf
	if err := router.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, q := range queues {
			q.Close()
		}
		router.Stop()
	})
	return l
}

// serverSettings puts the stream's media on the link's server side.
func (l *shapedLink) serverSettings(se *webrtc.SettingEngine) {
	se.SetNet(l.server)
	se.SetIPFilter(nil)
	se.SetInterfaceFilter(nil)
}

// viewerAPI is a pion viewer like clientAPI's (default interceptors: NACK,
// receiver reports, transport-wide feedback as a browser sends it) on the
// link's viewer side.
func (l *shapedLink) viewerAPI(t testing.TB) *webrtc.API {
	t.Helper()
	return viewerAPIOn(t, l.viewer)
}

func viewerAPIOn(t testing.TB, n *vnet.Net) *webrtc.API {
	t.Helper()
	// H.264 without RTX: pion's own transport-wide feedback reports the
	// RTX stream in feedback of its own that marks every packet of the
	// video stream in its range lost (pion/webrtc#2830), which a browser
	// does not do and which would make GCC see most packets lost.
	// Retransmissions then travel on the video stream itself.
	m := &webrtc.MediaEngine{}
	if err := m.RegisterCodec(webrtc.RTPCodecParameters{RTPCodecCapability: webrtc.RTPCodecCapability{
		MimeType: webrtc.MimeTypeH264, ClockRate: 90000,
		SDPFmtpLine:  "level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f",
		RTCPFeedback: []webrtc.RTCPFeedback{{Type: "nack"}, {Type: "nack", Parameter: "pli"}, {Type: webrtc.TypeRTCPFBTransportCC}},
	}, PayloadType: 102}, webrtc.RTPCodecTypeVideo); err != nil {
		t.Fatal(err)
	}
	reg := &interceptor.Registry{}
	if err := webrtc.RegisterDefaultInterceptors(m, reg); err != nil {
		t.Fatal(err)
	}
	se := webrtc.SettingEngine{}
	se.SetNet(n)
	se.SetICEMulticastDNSMode(ice.MulticastDNSModeDisabled)
	se.SetNetworkTypes([]webrtc.NetworkType{webrtc.NetworkTypeUDP4})
	return webrtc.NewAPI(webrtc.WithMediaEngine(m), webrtc.WithInterceptorRegistry(reg), webrtc.WithSettingEngine(se))
}

// noise keeps a w x h window of random pixels changing at about fps until
// ctx ends: the worst case for an encoder, so it always spends all the
// bitrate it is given and the link is the limit.
func noise(ctx context.Context, t testing.TB, e *env, fps int) {
	t.Helper()
	p := e.probe(t)
	c, err := xgb.NewConnDisplay(e.d.Name())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	gc, err := xproto.NewGcontextId(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := xproto.CreateGCChecked(c, gc, xproto.Drawable(p.Window()), 0, nil).Check(); err != nil {
		t.Fatal(err)
	}
	_, _, w, h := p.Bounds()
	go paintNoise(ctx, c, p, gc, w, h, fps)
}

func paintNoise(ctx context.Context, c *xgb.Conn, p *xprobe.Probe, gc xproto.Gcontext, w, h, fps int) {
	const strip = 32 // rows per PutImage: well under the core request limit
	buf := make([]byte, w*strip*4)
	tick := time.NewTicker(time.Second / time.Duration(fps))
	defer tick.Stop()
	rnd := rand.New(rand.NewPCG(1, 2))
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for y := 0; y < h; y += strip {
			rows := min(strip, h-y)
			for i := 0; i+8 <= len(buf); i += 8 {
				v := rnd.Uint64()
				for k := 0; k < 8; k++ {
					buf[i+k] = byte(v >> (8 * k))
				}
			}
			if err := xproto.PutImageChecked(c, xproto.ImageFormatZPixmap, xproto.Drawable(p.Window()), gc,
				uint16(w), uint16(rows), 0, int16(y), 0, 24, buf[:w*rows*4]).Check(); err != nil {
				return // the display went away with the test
			}
		}
	}
}

// countFrames reads a track and counts the frames (marker bits) that came.
// With pli, it also asks for a keyframe at every gap in the sequence
// numbers, before NACK had a chance to repair it: a storm, worse than a
// browser, which asks only when it cannot decode.
func countFrames(n *atomic.Int64, pli *atomic.Int64) func(*webrtc.TrackRemote, *webrtc.RTPReceiver) {
	return func(tr *webrtc.TrackRemote, rcv *webrtc.RTPReceiver) {
		var last uint16
		started := false
		for {
			pkt, _, err := tr.ReadRTP()
			if err != nil {
				return
			}
			if pkt.Marker {
				n.Add(1)
			}
			gap := started && int16(pkt.SequenceNumber-last) > 1
			if int16(pkt.SequenceNumber-last) > 0 || !started {
				last, started = pkt.SequenceNumber, true
			}
			if gap && pli != nil {
				if _, err := rcv.Transport().WriteRTCP([]rtcp.Packet{&rtcp.PictureLossIndication{MediaSSRC: uint32(tr.SSRC())}}); err == nil {
					pli.Add(1)
				}
			}
		}
	}
}

// watchTarget samples the stream's target while cond is false, up to
// within; it returns the last stats and whether cond held.
func watchTarget(e *env, within time.Duration, cond func(Stats) bool) (Stats, bool) {
	deadline := time.Now().Add(within)
	for {
		st := e.s.Stats()
		if cond(st) || time.Now().After(deadline) {
			return st, cond(st)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestBitrateFollowsLink steps the viewer's link from 4 Mbit/s to 500
// kbit/s and back: the encoder's target follows it down, with the frame
// rate, and up again. The windows are generous (a shared, noisy machine);
// what is asserted is the direction and the bounds, and the times taken are
// logged.
func TestBitrateFollowsLink(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test runs for about a minute (it waits for GCC to follow a link)")
	}
	link := newShapedLink(t, 4_000_000, 0)
	e := newEnv(t, envOptions{width: 320, height: 240, cfg: Config{BitrateKbps: 3000, MinBitrateKbps: 150, settings: link.serverSettings}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	noise(ctx, t, e, 30)
	var frames atomic.Int64
	c := join(t, e, clientOptions{api: link.viewerAPI(t), onTrack: countFrames(&frames, nil)})
	defer c.close()

	t0 := time.Now()
	st, ok := watchTarget(e, 20*time.Second, func(st Stats) bool { return frames.Load() > 30 })
	if !ok {
		t.Fatalf("no video over the 4 Mbit/s link within 20 s (%d frames; stats %+v)", frames.Load(), st)
	}
	time.Sleep(3 * time.Second)
	high := e.s.Stats()
	if high.TargetKbps < 1500 || high.TargetFPS != 30 {
		t.Fatalf("over a 4 Mbit/s link the target is %d kbit/s at %d fps: want at least 1500 at 30", high.TargetKbps, high.TargetFPS)
	}
	t.Logf("4 Mbit/s: target %d kbit/s at %d fps after %v", high.TargetKbps, high.TargetFPS, time.Since(t0).Round(time.Millisecond))

	link.tbf.SetRate(500_000)
	t1 := time.Now()
	low, ok := watchTarget(e, 20*time.Second, func(st Stats) bool { return st.TargetKbps <= 700 })
	if !ok {
		t.Fatalf("the link went to 500 kbit/s but after 20 s the target is %d kbit/s: want 700 or less", low.TargetKbps)
	}
	t.Logf("500 kbit/s: target %d kbit/s at %d fps after %v", low.TargetKbps, low.TargetFPS, time.Since(t1).Round(time.Millisecond))
	low, ok = watchTarget(e, 10*time.Second, func(st Stats) bool { return st.TargetFPS < 30 })
	if !ok {
		t.Errorf("at %d kbit/s the frame rate stayed at %d: want it stepped down below 750 kbit/s", low.TargetKbps, low.TargetFPS)
	}
	var stats statsMsg
	c.send(map[string]any{"type": "stats"})
	b, _ := json.Marshal(c.waitMsg("stats", 5*time.Second))
	if err := json.Unmarshal(b, &stats); err != nil || stats.Link == nil {
		t.Fatalf("stats message %s: %v", b, err)
	}
	l := stats.Link
	if !stats.CongestionControl || l.Transport != "udp" || l.EstimateKbps <= 0 || l.EstimateKbps > 1000 || l.TargetKbps <= 0 {
		t.Errorf("stats at 500 kbit/s: %s; want congestion control on, transport udp, an estimate under 1000 kbit/s", b)
	}
	t.Logf("stats at 500 kbit/s: %s", b)

	link.tbf.SetRate(4_000_000)
	t2 := time.Now()
	up, ok := watchTarget(e, 60*time.Second, func(st Stats) bool { return st.TargetKbps >= 1500 && st.TargetFPS == 30 })
	if !ok {
		t.Fatalf("the link went back to 4 Mbit/s but after 60 s the target is %d kbit/s at %d fps: want at least 1500 at 30", up.TargetKbps, up.TargetFPS)
	}
	t.Logf("back to 4 Mbit/s: target %d kbit/s at %d fps after %v", up.TargetKbps, up.TargetFPS, time.Since(t2).Round(time.Millisecond))
	if n := frames.Load(); n < 100 {
		t.Errorf("only %d frames reached the viewer", n)
	}
}

// TestRateHoldsUnderRandomLoss streams over a 3 Mbit/s link that loses 5 %
// of packets at random, not from congestion: the target climbs half as much
// again over where it started. GCC's loss controller alone could never let it: it
// raises its rate only while loss stays under 2 % and caps the estimate, so
// from a 400 kbit/s start it stays at or under 400. (The climb is not
// smooth in pion's virtual network: its delay controller reads the
// retransmissions' late arrivals as overuse now and then and falls back to
// what was received; the peak is what is asserted.)
func TestRateHoldsUnderRandomLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test streams for up to a minute over a lossy link")
	}
	link := newShapedLink(t, 3_000_000, 5)
	e := newEnv(t, envOptions{width: 320, height: 240, cfg: Config{BitrateKbps: 400, MinBitrateKbps: 150, MaxBitrateKbps: 2500, settings: link.serverSettings}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	noise(ctx, t, e, 30)
	var frames atomic.Int64
	c := join(t, e, clientOptions{api: link.viewerAPI(t), onTrack: countFrames(&frames, nil)})
	defer c.close()
	if _, ok := watchTarget(e, 20*time.Second, func(Stats) bool { return frames.Load() > 10 }); !ok {
		t.Fatalf("no video over the lossy link within 20 s")
	}
	t0 := time.Now()
	peak := 0
	st, ok := watchTarget(e, 60*time.Second, func(st Stats) bool {
		peak = max(peak, st.TargetKbps)
		return st.TargetKbps >= 600
	})
	if !ok {
		t.Fatalf("over a 3 Mbit/s link with 5 %% random loss the target peaked at %d kbit/s in 60 s: want it to reach 600 (half as much again as the start)", peak)
	}
	t.Logf("3 Mbit/s, 5 %% loss: target %d kbit/s at %d fps after %v", st.TargetKbps, st.TargetFPS, time.Since(t0).Round(time.Millisecond))
}

// TestKeyframesBoundedUnderLoss sends the video over a link that loses 5 %
// of packets: NACK and RTX repair most of it, the browser asks for a
// keyframe when they cannot, and the keyframe rate stays within the
// limit (KeyframeInterval) however often it asks.
func TestKeyframesBoundedUnderLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test streams for 20 s over a lossy link")
	}
	link := newShapedLink(t, 8_000_000, 5)
	// The floor at the start rate: since retransmissions repair losses
	// (NACK before GCC), GCC still backs off on 5 % loss, and at its floor
	// so few packets go out that the viewer's gaps (and requests) no longer
	// make the storm this test needs.
	e := newEnv(t, envOptions{width: 320, height: 240, cfg: Config{BitrateKbps: 2000, MinBitrateKbps: 2000, settings: link.serverSettings}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	noise(ctx, t, e, 30)
	var frames, plis atomic.Int64
	c := join(t, e, clientOptions{api: link.viewerAPI(t), onTrack: countFrames(&frames, &plis)})
	defer c.close()
	if _, ok := watchTarget(e, 20*time.Second, func(Stats) bool { return frames.Load() > 10 }); !ok {
		t.Fatalf("no video over the lossy link within 20 s")
	}
	before := e.s.Stats()
	f0 := frames.Load()
	const run = 20 * time.Second
	start := time.Now()
	time.Sleep(run)
	after := e.s.Stats()
	keys := after.Keyframes - before.Keyframes
	asked := after.KeyframeRequest - before.KeyframeRequest
	// One keyframe per KeyframeInterval at most, and one more for a request
	// that straddles the window's start.
	bound := uint64(time.Since(start)/DefaultKeyframeEvery) + 1
	t.Logf("5%% loss over %v: %d keyframes sent for %d requests (%d PLIs sent; bound %d), %d frames received, target %d kbit/s", run, keys, asked, plis.Load(), bound, frames.Load()-f0, after.TargetKbps)
	if asked <= bound {
		t.Errorf("only %d keyframe requests in %v: the storm this test is about did not happen", asked, run)
	}
	if keys > bound {
		t.Errorf("%d keyframes in %v under 5%% loss: want at most %d (one per %v)", keys, run, bound, DefaultKeyframeEvery)
	}
	if got := frames.Load() - f0; got < int64(run.Seconds())*5 {
		t.Errorf("only %d frames reached the viewer in %v under 5%% loss", got, run)
	}
	links := e.s.Links()
	if len(links) != 1 || links[0].Loss == 0 && links[0].PacketsLost == 0 {
		t.Errorf("links %+v: want one viewer whose receiver reports show loss", links)
	}
	checkViewerSeries(t, e)
}

// checkViewerSeries reads the collector as /metrics would: one viewer's
// series, labelled with its id and transport, with the values it has.
func checkViewerSeries(t *testing.T, e *env) {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(e.s.Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["viewer"] != "v1" || labels["transport"] != "udp" {
				continue
			}
			v := m.GetGauge().GetValue()
			if m.GetCounter() != nil {
				v = m.GetCounter().GetValue()
			}
			got[mf.GetName()] = v
		}
	}
	for _, name := range []string{"deskenv_viewer_estimate_bitrate_kbps", "deskenv_viewer_fps", "deskenv_viewer_sent_bitrate_kbps", "deskenv_viewer_packets_lost", "deskenv_viewer_keyframes_sent_total"} {
		if got[name] <= 0 {
			t.Errorf("%s{viewer=\"v1\",transport=\"udp\"} = %v, want above 0 (series: %v)", name, got[name], got)
		}
	}
	if _, ok := got["deskenv_viewer_rtt_seconds"]; !ok {
		t.Errorf("no deskenv_viewer_rtt_seconds for v1 (series: %v)", got)
	}
}

// TestLowestViewerSets watches with two viewers, one on an 8 Mbit/s link
// and one on 500 kbit/s: the one encode follows the thin link (both get
// the same frames), and once the thin viewer leaves it goes back up for
// the other.
func TestLowestViewerSets(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test runs for about half a minute (it waits for GCC)")
	}
	link := newShapedLinks(t, 0, 8_000_000, 500_000)
	e := newEnv(t, envOptions{width: 320, height: 240, cfg: Config{BitrateKbps: 3000, settings: link.serverSettings}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	noise(ctx, t, e, 30)
	var wideFrames, thinFrames atomic.Int64
	wide := join(t, e, clientOptions{api: viewerAPIOn(t, link.views[0].net), onTrack: countFrames(&wideFrames, nil)})
	defer wide.close()
	thin := join(t, e, clientOptions{api: viewerAPIOn(t, link.views[1].net), onTrack: countFrames(&thinFrames, nil)})
	st, ok := watchTarget(e, 30*time.Second, func(st Stats) bool { return thinFrames.Load() > 10 && st.TargetKbps <= 700 })
	if !ok {
		thin.close()
		t.Fatalf("with a viewer on 500 kbit/s the target is %d kbit/s after 30 s (%d frames to it): want 700 or less", st.TargetKbps, thinFrames.Load())
	}
	links := e.s.Links()
	if len(links) != 2 || links[0].EstimateKbps <= links[1].EstimateKbps {
		t.Errorf("links %+v: want the wide viewer's estimate above the thin one's", links)
	}
	t.Logf("two viewers: target %d kbit/s at %d fps; estimates %d and %d kbit/s", st.TargetKbps, st.TargetFPS, links[0].EstimateKbps, links[len(links)-1].EstimateKbps)
	thin.close()
	up, ok := watchTarget(e, 60*time.Second, func(st Stats) bool { return st.TargetKbps >= 1500 })
	if !ok {
		t.Fatalf("the thin viewer left but after 60 s the target is %d kbit/s: want the wide viewer's, at least 1500", up.TargetKbps)
	}
	t.Logf("thin viewer gone: target %d kbit/s at %d fps", up.TargetKbps, up.TargetFPS)
}
