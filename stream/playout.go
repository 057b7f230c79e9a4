package stream

import (
	"fmt"

	"github.com/pion/interceptor"
	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"
)

// The playout delay header extension tells the browser how long it may
// hold a frame before showing it. A desktop is not a film: a frame held to
// smooth out the network's jitter is a frame the person sees late, and a
// click answered late. libwebrtc reads a minimum and a maximum of zero as
// "show each frame as soon as it is decoded" (what cloud gaming sends),
// instead of scheduling frames on a smoothed render clock, which in headless
// Chromium showed 43 of 58 decoded frames a second and added 11 ms at the
// median over the same frames shown by WebCodecs (docs/BENCHMARKS.md).
//
// http://www.webrtc.org/experiments/rtp-hdrext/playout-delay, pion/rtp's
// PlayoutDelayExtension; delays in units of 10 ms.
const playoutDelayURI = "http://www.webrtc.org/experiments/rtp-hdrext/playout-delay"

// configurePlayoutDelay offers the extension for video and adds the
// interceptor that puts it on every packet. Added after the NACK responder,
// so a retransmitted packet carries it as the original did.
func configurePlayoutDelay(m *webrtc.MediaEngine, reg *interceptor.Registry, d rtp.PlayoutDelayExtension) error {
	payload, err := d.Marshal()
	if err != nil {
		return fmt.Errorf("playout delay %+v: %w", d, err)
	}
	if err := m.RegisterHeaderExtension(webrtc.RTPHeaderExtensionCapability{URI: playoutDelayURI}, webrtc.RTPCodecTypeVideo); err != nil {
		return err
	}
	reg.Add(playoutDelayFactory{payload: payload})
	return nil
}

type playoutDelayFactory struct{ payload []byte }

func (f playoutDelayFactory) NewInterceptor(string) (interceptor.Interceptor, error) {
	return &playoutDelay{payload: f.payload}, nil
}

// playoutDelay sets the extension on the packets of each local stream for
// which the browser accepted it; the others pass untouched.
type playoutDelay struct {
	interceptor.NoOp
	payload []byte
}

func (p *playoutDelay) BindLocalStream(info *interceptor.StreamInfo, writer interceptor.RTPWriter) interceptor.RTPWriter {
	var id uint8
	for _, e := range info.RTPHeaderExtensions {
		if e.URI == playoutDelayURI && e.ID > 0 && e.ID < 256 {
			id = uint8(e.ID)
		}
	}
	if id == 0 {
		return writer
	}
	return interceptor.RTPWriterFunc(func(h *rtp.Header, payload []byte, a interceptor.Attributes) (int, error) {
		// SetExtension refuses an id that does not fit the header's
		// extension profile (an id over 14 beside one-byte extensions, as
		// an offer may ask): the packet then goes without it, late frames
		// rather than none.
		_ = h.SetExtension(id, p.payload)
		return writer.Write(h, payload, a)
	})
}
