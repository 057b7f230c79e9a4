package stream

import (
	"encoding/json"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/internal/hang"
	"github.com/pion/webrtc/v4"
)

// FuzzParseInput feeds data channel messages to parseInput, on a normal
// and a one-pixel video. Whatever it accepts is within the protocol's
// ranges: a known type, keysyms 1..0x1fffffff, buttons 1-3, 8, 9, a pointer
// inside the video, at most MaxWheelNotches per axis, clipboard text that is
// valid UTF-8.
func FuzzParseInput(f *testing.F) {
	for _, s := range []string{
		`{"t":"kd","k":65293}`, `{"t":"ku","k":97.0}`, `{"t":"bd","b":3}`, `{"t":"bu","b":9}`,
		`{"t":"mm","x":639,"y":0}`, `{"t":"mm","x":10.7,"y":3.2}`, `{"t":"mm","x":1279.999,"y":799.5}`,
		`{"t":"wh","dy":-2}`, `{"t":"wh","dx":100,"dy":-100}`, `{"t":"clip","text":"héllo"}`,
		`{"t":"clip","text":"\ud800"}`, `{"t":"release"}`, `{"t":"release","seq":4}`,
		`{"t":"kd","k":1e308}`, `{"t":"kd","k":-0}`, `{"t":"mm","x":-0.5,"y":0}`, `{"t":"mm","x":null,"y":null}`,
		`{"t":"bd","b":4}`, `{"t":"release"}{"t":"release"}`, `[1,2]`, `{"t":5}`, `{"k":1}`,
	} {
		f.Add([]byte(s), true, uint16(1280), uint16(800))
	}
	f.Add([]byte{1, 2}, false, uint16(1280), uint16(800))
	f.Add([]byte(`{"t":"mm","x":0,"y":0}`), true, uint16(1), uint16(1))
	f.Fuzz(func(t *testing.T, data []byte, isString bool, w, h uint16) {
		vw, vh := int(w), int(h)
		if vw == 0 || vh == 0 {
			return // a video always has pixels
		}
		in, err := parseInput(webrtc.DataChannelMessage{IsString: isString, Data: data}, DefaultMaxInputBytes, vw, vh)
		if err != nil {
			if len(err.Error()) > 1000 {
				t.Fatalf("error message of %d bytes quotes too much input", len(err.Error()))
			}
			return
		}
		if !isString || len(data) > DefaultMaxInputBytes {
			t.Fatalf("accepted a binary or oversized message: %d bytes, string %v", len(data), isString)
		}
		switch in.t {
		case "kd", "ku":
			if in.keysym < 1 || in.keysym > 0x1fffffff {
				t.Fatalf("%s keysym %#x out of range", in.t, uint32(in.keysym))
			}
		case "bd", "bu":
			switch in.button {
			case 1, 2, 3, 8, 9:
			default:
				t.Fatalf("%s button %d accepted", in.t, in.button)
			}
		case "mm":
			if in.x < 0 || in.y < 0 || in.x >= vw || in.y >= vh {
				t.Fatalf("mm (%d, %d) accepted on a %dx%d video", in.x, in.y, vw, vh)
			}
		case "wh":
			if in.dx < -hci.MaxWheelNotches || in.dx > hci.MaxWheelNotches || in.dy < -hci.MaxWheelNotches || in.dy > hci.MaxWheelNotches {
				t.Fatalf("wh (%d, %d) accepted", in.dx, in.dy)
			}
		case "clip":
			if !utf8.ValidString(in.text) {
				t.Fatalf("clip text %q is not UTF-8", in.text)
			}
		case "release":
		default:
			t.Fatalf("unknown type %q accepted", in.t)
		}
	})
}

// FuzzSignalMessage feeds websocket messages to decodeSignal. A message it
// accepts encodes to JSON that decodes to the same message.
func FuzzSignalMessage(f *testing.F) {
	for _, s := range []string{
		`{"type":"offer","sdp":"v=0\r\n"}`,
		`{"type":"candidate","candidate":{"candidate":"candidate:1 1 udp 2130706431 127.0.0.1 5000 typ host","sdpMid":"0","sdpMLineIndex":0}}`,
		`{"type":"candidate","candidate":null}`,
		`{"type":"control","op":"request"}`, `{"type":"control","op":"grant","viewer":"v2"}`,
		`{"type":"control","op":"policy","policy":"shared"}`, `{"type":"ping","t":12.5}`,
		`{"type":"ping"} {"type":"ping"}`, `{"type":5}`, `[]`, `{"type":"candidate","candidate":{"sdpMLineIndex":70000}}`,
		`{"type":"transport","kind":"websocket"}`, `{"type":"ack","seq":3,"decode_ms":1.25}`,
		`{"type":"input","input":{ "t" : "mm", "x": 1, "y": 2 }}`, `{"type":"input","input":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decodeSignal(data)
		if err != nil {
			return
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("Marshal(%+v): %v", m, err)
		}
		back, err := decodeSignal(b)
		if err != nil {
			t.Fatalf("decodeSignal(%s) of an accepted message's own JSON: %v", b, err)
		}
		// The raw input comes back compacted: compare what it says.
		if !sameJSON(back.Input, m.Input) {
			t.Fatalf("round trip changed the input: got %s, want %s", back.Input, m.Input)
		}
		back.Input, m.Input = nil, nil
		if !reflect.DeepEqual(back, m) {
			t.Fatalf("round trip changed the message:\n got %+v\nwant %+v", back, m)
		}
	})
}

// sameJSON reports whether two raw JSON values (either may be absent) say
// the same thing.
func sameJSON(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// FuzzWSMessages feeds the websocket transport's messages to their
// parsers: a transport request accepted asks for the websocket; an ack
// accepted holds a frame number 1..2^32-1 and a decode time 0..60 s; the
// video message header reads back what wsFrame wrote.
func FuzzWSMessages(f *testing.F) {
	for _, s := range []string{
		`{"type":"transport","kind":"websocket"}`, `{"type":"transport","kind":"webrtc"}`, `{"type":"transport"}`,
		`{"type":"ack","seq":1}`, `{"type":"ack","seq":4294967295,"decode_ms":60000}`, `{"type":"ack","seq":0}`,
		`{"type":"ack","seq":1e300,"decode_ms":-1}`, `{"type":"ack","seq":"1"}`,
		"\x01\x01\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x01\x67",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if seq, key, at, au, err := wsFrameInfo(data); err == nil {
			back := wsFrame(seq, key, at, au)
			want := append([]byte(nil), data...)
			want[1] &= wsFlagKey // other flag bits are reserved and ignored
			if at.UnixMicro() >= 0 && string(back) != string(want) {
				t.Fatalf("wsFrame(wsFrameInfo(%x)) = %x", data, back)
			}
		}
		m, err := decodeSignal(data)
		if err != nil {
			return
		}
		if parseTransport(m) == nil && m.Kind != "websocket" {
			t.Fatalf("transport %q accepted", m.Kind)
		}
		a, err := parseAck(m)
		if err != nil {
			return
		}
		if a.seq == 0 || float64(a.seq) != *m.Seq {
			t.Fatalf("ack %+v from seq %v", a, *m.Seq)
		}
		if a.decodeMs != -1 && (a.decodeMs < 0 || a.decodeMs > wsMaxDecodeMillis) {
			t.Fatalf("ack decode time %v accepted", a.decodeMs)
		}
	})
}

// fuzzAPI is the stream's pion API as buildAPI makes it, without a display.
func fuzzAPI(t testing.TB) *Server {
	codecs, err := sendCodecs(1280, 720, 30)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{cfg: Config{LoopbackOnly: true}, log: slog.New(slog.DiscardHandler), codecs: codecs}
	if err := s.buildAPI(); err != nil {
		t.Fatal(err)
	}
	return s
}

// browserOffer is an offer as the page makes one: a recvonly video
// transceiver and the "input" data channel, from a pion peer standing in
// for the browser.
func browserOffer(t testing.TB) string {
	pc, err := webrtc.NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if _, err := pc.AddTransceiverFromKind(webrtc.RTPCodecTypeVideo, webrtc.RTPTransceiverInit{Direction: webrtc.RTPTransceiverDirectionRecvonly}); err != nil {
		t.Fatal(err)
	}
	if _, err := pc.CreateDataChannel("input", nil); err != nil {
		t.Fatal(err)
	}
	offer, err := pc.CreateOffer(nil)
	if err != nil {
		t.Fatal(err)
	}
	return offer.SDP
}

// FuzzOffer runs offers' SDP through what onOffer does with them up to the
// answer (SetRemoteDescription, AddTrack, CreateAnswer) on the stream's own
// pion API. An unrecovered panic there would take the whole appliance down;
// the only property is that none happens. The answer is not set as the
// local description, which would start ICE towards the offer's addresses.
func FuzzOffer(f *testing.F) {
	s := fuzzAPI(f)
	offer := browserOffer(f)
	f.Add(offer)
	f.Add(strings.Replace(offer, "H264", "VP8", -1))
	f.Add(strings.Replace(offer, "m=video", "m=audio", 1))
	f.Add("v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n")
	f.Add("v=0\r\n")
	f.Fuzz(func(t *testing.T, sdp string) {
		defer hang.Guard(sdp)()
		pc, err := s.api.NewPeerConnection(webrtc.Configuration{})
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		track, err := webrtc.NewTrackLocalStaticRTP(s.codecs[0].cap, "video", "deskenv")
		if err != nil {
			t.Fatal(err)
		}
		if err := pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeOffer, SDP: sdp}); err != nil {
			return
		}
		if _, err := pc.AddTrack(track); err != nil {
			return
		}
		pc.CreateAnswer(nil)
	})
}

// FuzzCandidate adds remote ICE candidates, as onCandidate does, to a peer
// connection that accepted the browser's offer; a fresh one every 500
// candidates, so they do not pile up.
func FuzzCandidate(f *testing.F) {
	s := fuzzAPI(f)
	offer := browserOffer(f)
	var pc *webrtc.PeerConnection
	added := 0
	f.Cleanup(func() {
		if pc != nil {
			pc.Close()
		}
	})
	for _, c := range []string{
		"candidate:1 1 udp 2130706431 127.0.0.1 5000 typ host",
		"candidate:842163049 1 udp 1677729535 203.0.113.7 61284 typ srflx raddr 0.0.0.0 rport 0 generation 0 ufrag abcd network-cost 999",
		"candidate:2 1 tcp 1518280447 127.0.0.1 9 typ host tcptype active",
		"candidate:3 1 udp 2113937151 3c1f1a9e-2d3c-4b5a-8f7e-6d5c4b3a2f1e.local 51234 typ host",
		"candidate:4 1 udp 33562367 198.51.100.1 3478 typ relay raddr 203.0.113.7 rport 61284",
		"", "candidate:", "candidate:1 1 udp 1 ::1 99999 typ host",
	} {
		f.Add(c, "0", uint16(0))
	}
	f.Fuzz(func(t *testing.T, cand, mid string, line uint16) {
		if pc == nil || added%500 == 0 {
			if pc != nil {
				pc.Close()
			}
			var err error
			if pc, err = s.api.NewPeerConnection(webrtc.Configuration{}); err != nil {
				t.Fatal(err)
			}
			if err := pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeOffer, SDP: offer}); err != nil {
				t.Fatal(err)
			}
		}
		added++
		pc.AddICECandidate(webrtc.ICECandidateInit{Candidate: cand, SDPMid: &mid, SDPMLineIndex: &line})
	})
}
