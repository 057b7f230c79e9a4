package stream

import (
	"testing"
	"time"

	"github.com/pion/interceptor"
	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"
)

// TestPlayoutDelay: a viewer that offers the playout delay extension, as
// Chromium does, gets every video packet with a minimum and a maximum of
// zero (show each frame once decoded); one that does not offer it gets
// none and the video all the same.
func TestPlayoutDelay(t *testing.T) {
	tests := []struct {
		name  string
		offer bool
	}{
		{"offered", true},
		{"not offered", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOptions{width: 320, height: 240})
			api := clientAPI(t, false)
			if tc.offer {
				api = clientAPIWith(t, func(m *webrtc.MediaEngine) {
					if err := m.RegisterHeaderExtension(webrtc.RTPHeaderExtensionCapability{URI: playoutDelayURI}, webrtc.RTPCodecTypeVideo); err != nil {
						t.Fatal(err)
					}
				})
			}
			type seen struct {
				n, with int
				delay   rtp.PlayoutDelayExtension
				err     string
			}
			got := make(chan seen, 1)
			c := join(t, e, clientOptions{api: api, onTrack: func(tr *webrtc.TrackRemote, rcv *webrtc.RTPReceiver) {
				var id int
				for _, x := range rcv.GetParameters().HeaderExtensions {
					if x.URI == playoutDelayURI {
						id = x.ID
					}
				}
				var s seen
				for s.n < 20 {
					pkt, _, err := tr.ReadRTP()
					if err != nil {
						s.err = err.Error()
						break
					}
					s.n++
					if id == 0 {
						continue
					}
					if raw := pkt.GetExtension(uint8(id)); raw != nil {
						s.with++
						if err := s.delay.Unmarshal(raw); err != nil {
							s.err = err.Error()
						}
					}
				}
				got <- s
			}})
			defer c.close()
			select {
			case s := <-got:
				if s.err != "" {
					t.Fatalf("reading the video: %s", s.err)
				}
				want := 0
				if tc.offer {
					want = s.n
				}
				if s.with != want || s.delay != (rtp.PlayoutDelayExtension{}) {
					t.Errorf("%d of %d packets carry the playout delay (last %+v), want %d with min 0 and max 0", s.with, s.n, s.delay, want)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("no video within 20 s")
			}
		})
	}
}

// TestPlayoutDelayIDOutOfProfile: an id the header's one-byte extensions
// cannot hold (one a viewer's offer may name) leaves the packet without the
// extension, written all the same, never refused.
func TestPlayoutDelayIDOutOfProfile(t *testing.T) {
	var wrote []*rtp.Header
	next := interceptor.RTPWriterFunc(func(h *rtp.Header, _ []byte, _ interceptor.Attributes) (int, error) {
		wrote = append(wrote, h)
		return 0, nil
	})
	for _, tc := range []struct {
		name string
		id   int
		want bool
	}{
		{"one-byte id", 5, true},
		{"id beyond one-byte beside a one-byte extension", 200, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wrote = nil
			p := &playoutDelay{payload: []byte{0, 0, 0}}
			w := p.BindLocalStream(&interceptor.StreamInfo{RTPHeaderExtensions: []interceptor.RTPHeaderExtension{{URI: playoutDelayURI, ID: tc.id}}}, next)
			h := &rtp.Header{}
			if err := h.SetExtension(3, []byte{1, 2}); err != nil { // a transport-cc style one-byte extension
				t.Fatal(err)
			}
			if _, err := w.Write(h, nil, nil); err != nil {
				t.Fatalf("write: %v", err)
			}
			if len(wrote) != 1 {
				t.Fatalf("%d packets written, want 1", len(wrote))
			}
			if got := wrote[0].GetExtension(uint8(tc.id)) != nil; got != tc.want {
				t.Errorf("extension %d set: %v, want %v", tc.id, got, tc.want)
			}
		})
	}
}
