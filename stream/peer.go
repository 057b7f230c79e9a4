package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"

	"github.com/pion/ice/v4"
	"github.com/pion/interceptor"
	"github.com/pion/interceptor/pkg/cc"
	"github.com/pion/logging"
	"github.com/pion/rtcp"
	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"
)

// buildAPI sets up the one pion API all viewers share: the codecs of
// s.codecs, NACK responder and RTCP reports, and the network settings of
// Config.
func (s *Server) buildAPI() error {
	m := &webrtc.MediaEngine{}
	if err := registerCodecs(m, s.codecs); err != nil {
		return err
	}
	reg := &interceptor.Registry{}
	// NACK first: an interceptor writes through those registered before it,
	// and the congestion controller's pacer knows only the media SSRC, so a
	// retransmission on the RTX SSRC written through it was refused
	// (ErrUnknownStream) and never sent: every loss then waited for a
	// keyframe. Registered first, retransmissions go straight to the
	// transport, uncounted by transport-wide feedback (deskbench network
	// found it: 73-113 NACKs and PLIs for 3-5 lost packets; after, one NACK
	// a loss and no PLI).
	if err := webrtc.ConfigureNack(m, reg); err != nil {
		return fmt.Errorf("stream: NACK: %w", err)
	}
	if !s.cfg.FixedBitrate {
		if err := s.registerCC(m, reg); err != nil {
			return fmt.Errorf("stream: congestion control: %w", err)
		}
	}
	if err := webrtc.ConfigureRTCPReports(reg); err != nil {
		return fmt.Errorf("stream: RTCP reports: %w", err)
	}
	if err := configurePlayoutDelay(m, reg, rtp.PlayoutDelayExtension{}); err != nil {
		return fmt.Errorf("stream: playout delay: %w", err)
	}

	se := webrtc.SettingEngine{LoggerFactory: pionLogs{s.log}}
	// mDNS would open a multicast socket per peer connection for nothing:
	// browsers reach our host candidates directly, and theirs appear to us as
	// peer-reflexive ones.
	se.SetICEMulticastDNSMode(ice.MulticastDNSModeDisabled)
	se.SetIncludeLoopbackCandidate(true)
	se.SetNetworkTypes([]webrtc.NetworkType{webrtc.NetworkTypeUDP4, webrtc.NetworkTypeUDP6})
	if s.cfg.LoopbackOnly {
		se.SetIPFilter(func(ip net.IP) bool { return ip.IsLoopback() })
	} else {
		// Docker and libvirt bridges are never the way a browser comes in.
		se.SetInterfaceFilter(func(name string) bool {
			return !strings.HasPrefix(name, "docker") && !strings.HasPrefix(name, "br-") && !strings.HasPrefix(name, "veth") && !strings.HasPrefix(name, "virbr")
		})
	}
	if len(s.cfg.NAT1To1IPs) > 0 {
		// Deprecated in favour of address rewrite rules, but the rules'
		// behaviour across the pinned v4.2.20 is not tested here yet;
		// this is the call the NAT tests cover.
		//lint:ignore SA1019 the tested call until the rewrite rules are
		se.SetNAT1To1IPs(s.cfg.NAT1To1IPs, webrtc.ICECandidateTypeHost)
	}
	if s.cfg.UDPPort != 0 {
		host := ""
		if s.cfg.LoopbackOnly {
			host = "127.0.0.1"
		}
		conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(host), Port: s.cfg.UDPPort})
		if err != nil {
			return fmt.Errorf("stream: UDPPort %d: %w", s.cfg.UDPPort, err)
		}
		s.udpConn = conn
		s.udpMux = webrtc.NewICEUDPMux(se.LoggerFactory.NewLogger("udpmux"), conn)
		se.SetICEUDPMux(s.udpMux)
	}
	if s.cfg.settings != nil {
		s.cfg.settings(&se)
	}
	s.api = webrtc.NewAPI(webrtc.WithMediaEngine(m), webrtc.WithInterceptorRegistry(reg), webrtc.WithSettingEngine(se))
	return nil
}

// videoOut is what a viewer is sent: the codec its offer chose and the
// track carrying it.
type videoOut struct {
	codec *sendCodec
	track *webrtc.TrackLocalStaticRTP
	bwe   cc.BandwidthEstimator // nil without congestion control
	link  *linkStats
	// ws is set for the websocket transport (wsvideo.go): frames go to it
	// instead of track, and gone ends the viewer when its page stops
	// acknowledging them.
	ws   *wsVideo
	gone func(error)
}

// onOffer answers the browser's offer: one peer connection per websocket.
func (v *viewer) onOffer(m clientMsg) {
	s := v.s
	if m.SDP == nil || strings.TrimSpace(*m.SDP) == "" {
		v.sendError(CodeBadSDP, "offer has no \"sdp\": send the offer's SDP text")
		return
	}
	v.mu.Lock()
	busy, onWS := v.pc != nil, v.wsv != nil
	v.mu.Unlock()
	if onWS {
		v.sendError(CodeBadMessage, "this session receives its video on the websocket: open a new websocket to use WebRTC")
		return
	}
	if busy {
		v.sendError(CodeBadMessage, "this session already negotiated its peer connection: open a new websocket to start over")
		return
	}
	pc, bwe, err := s.bwes.newPeer(s.api, webrtc.Configuration{ICEServers: v.ice})
	if err != nil {
		v.sendError(CodeInternal, "cannot create a peer connection: %v", err)
		return
	}
	ok := false
	defer func() {
		if !ok {
			pc.Close()
		}
	}()
	v.watchPeer(pc)
	out, sender, code, err := v.accept(pc, *m.SDP)
	if err != nil {
		v.sendError(code, "%s", err)
		return
	}
	v.mu.Lock()
	if v.ctx.Err() != nil {
		v.mu.Unlock()
		return
	}
	out.bwe, out.link = bwe, v.link
	v.pc, v.send = pc, out
	ok = true
	v.mu.Unlock()
	v.log.Debug("video negotiated", "codec", out.codec.Name)
	go v.readRTCP(sender)

	v.sendJSON(sdpMsg{Type: "answer", SDP: pc.LocalDescription().SDP, Codec: out.codec.Name})
	v.mu.Lock()
	v.answered = true
	pending := v.pending
	v.pending = nil
	v.mu.Unlock()
	for _, c := range pending {
		v.sendJSON(candidateMsg{Type: "candidate", Candidate: c})
	}
}

// watchPeer follows pc: its candidates go to the browser (held until the
// answer is sent), its state starts and ends the viewer's video, and the
// browser's "input" data channel is attached.
func (v *viewer) watchPeer(pc *webrtc.PeerConnection) {
	pc.OnICECandidate(func(c *webrtc.ICECandidate) {
		var ci *candidateInit
		if c != nil {
			j := c.ToJSON()
			ci = &candidateInit{Candidate: j.Candidate, SDPMid: j.SDPMid, SDPMLineIndex: j.SDPMLineIndex}
		}
		v.mu.Lock()
		if !v.answered {
			v.pending = append(v.pending, ci)
			v.mu.Unlock()
			return
		}
		v.mu.Unlock()
		v.sendJSON(candidateMsg{Type: "candidate", Candidate: ci})
	})
	pc.OnConnectionStateChange(func(st webrtc.PeerConnectionState) {
		v.log.Debug("peer connection", "state", st.String())
		v.mu.Lock()
		current, out := v.pc == pc, v.send
		v.mu.Unlock()
		if !current {
			return // a connection for an offer that failed, closing
		}
		switch st {
		case webrtc.PeerConnectionStateConnected:
			v.startVideo(out)
		case webrtc.PeerConnectionStateFailed:
			v.close("the peer connection failed")
		case webrtc.PeerConnectionStateClosed:
			v.close("the peer connection closed")
		}
	})
	pc.OnDataChannel(func(dc *webrtc.DataChannel) {
		if dc.Label() != "input" {
			v.log.Debug("closing an unexpected data channel", "label", dc.Label())
			dc.Close()
			return
		}
		v.attachInput(dc)
	})
}

// accept takes the offer, picks the codec for it (codecFor) and sets the
// answer as pc's local description. Errors come with the code to send.
func (v *viewer) accept(pc *webrtc.PeerConnection, sdp string) (videoOut, *webrtc.RTPSender, string, error) {
	s := v.s
	if err := pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeOffer, SDP: sdp}); err != nil {
		return videoOut{}, nil, CodeBadSDP, fmt.Errorf("the offer's SDP cannot be used: %v", err)
	}
	if !hasVideo(pc) {
		return videoOut{}, nil, CodeBadSDP, errors.New("the offer has no video section: add a recvonly video transceiver before creating the offer")
	}
	want := "it must offer " + codecNames(s.codecs) + "; H.264 as constrained baseline with packetization-mode=1"
	c, found := s.codecFor(pc)
	if !found {
		return videoOut{}, nil, CodeBadSDP, fmt.Errorf("the offer accepts none of the video this server sends (%s)", want)
	}
	track, err := webrtc.NewTrackLocalStaticRTP(c.cap, "video", "deskenv")
	if err != nil {
		return videoOut{}, nil, CodeInternal, fmt.Errorf("cannot create the video track: %v", err)
	}
	sender, err := pc.AddTrack(track)
	if err != nil {
		return videoOut{}, nil, CodeBadSDP, fmt.Errorf("cannot send video on this offer: %v", err)
	}
	answer, err := pc.CreateAnswer(nil)
	if err == nil {
		err = pc.SetLocalDescription(answer)
	}
	if err != nil {
		return videoOut{}, nil, CodeBadSDP, fmt.Errorf("cannot answer the offer (%s): %v", want, err)
	}
	if !hasCodec(sender.GetParameters().Codecs, c.MimeType) {
		return videoOut{}, nil, CodeBadSDP, fmt.Errorf("the offer does not accept %s, the video chosen for it (%s)", c.Name, want)
	}
	return videoOut{codec: c, track: track}, sender, "", nil
}

func hasVideo(pc *webrtc.PeerConnection) bool {
	for _, t := range pc.GetTransceivers() {
		if t.Kind() == webrtc.RTPCodecTypeVideo {
			return true
		}
	}
	return false
}

// onCandidate adds a remote ICE candidate; null means the browser has no
// more.
func (v *viewer) onCandidate(m clientMsg) {
	v.mu.Lock()
	pc := v.pc
	v.mu.Unlock()
	if pc == nil {
		v.sendError(CodeBadICE, "candidate before a successful offer: send the offer first")
		return
	}
	init := webrtc.ICECandidateInit{}
	if m.Candidate != nil {
		init = webrtc.ICECandidateInit{Candidate: m.Candidate.Candidate, SDPMid: m.Candidate.SDPMid, SDPMLineIndex: m.Candidate.SDPMLineIndex, UsernameFragment: m.Candidate.UsernameFragment}
	}
	if err := pc.AddICECandidate(init); err != nil {
		v.sendError(CodeBadICE, "ICE candidate %q refused: %v", truncate(init.Candidate, 80), err)
	}
}

// readRTCP reads what the browser reports about the video: the interceptors
// act on NACKs and receiver reports as it passes, and PLI/FIR ask for a
// keyframe. It returns when the peer connection closes.
func (v *viewer) readRTCP(sender *webrtc.RTPSender) {
	var ssrc webrtc.SSRC
	if enc := sender.GetParameters().Encodings; len(enc) > 0 {
		ssrc = enc[0].SSRC
	}
	for {
		pkts, _, err := sender.ReadRTCP()
		if err != nil {
			return
		}
		for _, p := range pkts {
			switch p := p.(type) {
			case *rtcp.ReceiverReport:
				v.link.receiverReport(p, ssrc)
			case *rtcp.PictureLossIndication, *rtcp.FullIntraRequest:
				v.mu.Lock()
				sub := v.sub
				v.mu.Unlock()
				if sub != nil {
					v.s.video.requestKeyframe(sub.codec, "the viewer lost a picture (PLI/FIR)")
				}
			}
		}
	}
}

// startVideo subscribes the viewer to the encoded video once its peer
// connection is up; frames sent earlier would be lost.
func (v *viewer) startVideo(out videoOut) {
	v.mu.Lock()
	if v.sub != nil || v.ctx.Err() != nil {
		v.mu.Unlock()
		return
	}
	sub := v.s.video.subscribe(v.id, out)
	v.sub = sub
	v.video = true
	v.mu.Unlock()
	if sub == nil {
		v.close("the server is shutting down")
	}
}

// pionLogs sends pion's log lines to slog at debug level: pion reports
// routine events (a peer going away, a late packet) as warnings and errors.
type pionLogs struct{ log *slog.Logger }

func (p pionLogs) NewLogger(scope string) logging.LeveledLogger {
	return pionLogger{log: p.log.With("pion", scope)}
}

type pionLogger struct{ log *slog.Logger }

func (l pionLogger) enabled() bool { return l.log.Enabled(context.Background(), slog.LevelDebug) }
func (l pionLogger) Trace(string)  {}
func (l pionLogger) Tracef(string, ...any) {
}
func (l pionLogger) Debug(string)          {}
func (l pionLogger) Debugf(string, ...any) {}
func (l pionLogger) Info(msg string) {
	if l.enabled() {
		l.log.Debug(msg)
	}
}
func (l pionLogger) Infof(f string, a ...any) {
	if l.enabled() {
		l.log.Debug(fmt.Sprintf(f, a...))
	}
}
func (l pionLogger) Warn(msg string) { l.Info(msg) }
func (l pionLogger) Warnf(f string, a ...any) {
	l.Infof(f, a...)
}
func (l pionLogger) Error(msg string) { l.Info(msg) }
func (l pionLogger) Errorf(f string, a ...any) {
	l.Infof(f, a...)
}
