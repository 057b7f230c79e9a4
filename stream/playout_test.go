package stream

import (
	"testing"
	"time"

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
