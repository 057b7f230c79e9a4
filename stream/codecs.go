package stream

import (
	"fmt"
	"strings"

	"github.com/pion/webrtc/v4"

	"github.com/deskenv/deskenv/internal/codec"
)

// firstPT is the payload type registered for the most preferred codec; each
// codec takes two (its own and its RTX). Browsers pick their own in the
// offer and pion answers with theirs.
const firstPT = 102

// transport-cc asks the browser for transport-wide feedback, which GCC
// estimates the link from; it only sends it when the TWCC header extension
// is negotiated too (registerCC), so with FixedBitrate it stays silent.
var videoFeedback = []webrtc.RTCPFeedback{
	{Type: "goog-remb"}, {Type: webrtc.TypeRTCPFBTransportCC}, {Type: webrtc.TypeRTCPFBCCM, Parameter: "fir"},
	{Type: webrtc.TypeRTCPFBNACK}, {Type: webrtc.TypeRTCPFBNACK, Parameter: "pli"},
}

// sendCodec is one codec the stream can send, as registered with pion for
// this server's video size and rate.
type sendCodec struct {
	codec.Codec
	pt  webrtc.PayloadType
	cap webrtc.RTPCodecCapability
}

// sendCodecs are codec.Codecs for w x h at fps, most preferred first.
func sendCodecs(w, h, fps int) ([]sendCodec, error) {
	var out []sendCodec
	for i, c := range codec.Codecs() {
		fmtp, err := c.FMTP(w, h, fps)
		if err != nil {
			return nil, fmt.Errorf("stream: %s: %w", c.Name, err)
		}
		out = append(out, sendCodec{Codec: c, pt: webrtc.PayloadType(firstPT + 2*i), cap: webrtc.RTPCodecCapability{
			MimeType: c.MimeType, ClockRate: c.ClockRate, SDPFmtpLine: fmtp, RTCPFeedback: videoFeedback}})
	}
	return out, nil
}

// registerCodecs registers every codec and an RTX stream for each: RTX lets
// retransmissions travel on their own stream, so the browser's jitter buffer
// tells repairs from late packets.
func registerCodecs(m *webrtc.MediaEngine, cs []sendCodec) error {
	for _, c := range cs {
		if err := m.RegisterCodec(webrtc.RTPCodecParameters{RTPCodecCapability: c.cap, PayloadType: c.pt}, webrtc.RTPCodecTypeVideo); err != nil {
			return fmt.Errorf("stream: register %s: %w", c.Name, err)
		}
		if err := m.RegisterCodec(webrtc.RTPCodecParameters{
			RTPCodecCapability: webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeRTX, ClockRate: c.ClockRate, SDPFmtpLine: fmt.Sprintf("apt=%d", c.pt)},
			PayloadType:        c.pt + 1,
		}, webrtc.RTPCodecTypeVideo); err != nil {
			return fmt.Errorf("stream: register RTX for %s: %w", c.Name, err)
		}
	}
	return nil
}

// codecNames lists the codecs for messages: "H.264 or VP8".
func codecNames(cs []sendCodec) string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = strings.TrimPrefix(c.MimeType, "video/")
	}
	return strings.Join(names, " or ")
}

// codecFor picks a viewer's codec once its offer is set: the server's most
// preferred codec among those pion matched in the offer's video section. So
// a browser that offers H.264 gets H.264, whatever order it offers codecs
// in, and one without it gets VP8.
func (s *Server) codecFor(pc *webrtc.PeerConnection) (*sendCodec, bool) {
	var offered []webrtc.RTPCodecParameters
	for _, t := range pc.GetTransceivers() {
		if t.Kind() == webrtc.RTPCodecTypeVideo && t.Receiver() != nil {
			offered = append(offered, t.Receiver().GetParameters().Codecs...)
		}
	}
	for i := range s.codecs {
		if hasCodec(offered, s.codecs[i].MimeType) {
			return &s.codecs[i], true
		}
	}
	return nil, false
}

func hasCodec(cs []webrtc.RTPCodecParameters, mime string) bool {
	for _, c := range cs {
		if strings.EqualFold(c.MimeType, mime) {
			return true
		}
	}
	return false
}
