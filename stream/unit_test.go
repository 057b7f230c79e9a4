package stream

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/pion/webrtc/v4"
)

func TestConfigDefaults(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		err  string
	}{
		{name: "zero", cfg: Config{}},
		{name: "fps", cfg: Config{FPS: 61}, err: "FPS 61 is out of range"},
		{name: "bitrate", cfg: Config{BitrateKbps: 10}, err: "BitrateKbps 10 is out of range"},
		{name: "preset", cfg: Config{Preset: "placebo"}, err: `Preset "placebo" is not known`},
		{name: "preset case", cfg: Config{Preset: "UltraFast"}},
		{name: "ice scheme", cfg: Config{ICEServers: []string{"http://x"}}, err: `has scheme "http"`},
		{name: "turn without credentials", cfg: Config{ICEServers: []string{"turn:host:3478"}}, err: "has no credentials"},
		{name: "turn", cfg: Config{ICEServers: []string{"turn:u:p@host:3478?transport=udp", "stun:stun.example:3478"}}},
		{name: "turn secret", cfg: Config{ICEServers: []string{"turn:host:3478"}, TURNSecret: "s3cret"}},
		{name: "turn secret, no server for it", cfg: Config{ICEServers: []string{"turn:u:p@host:3478"}, TURNSecret: "s3cret"}, err: "no TURN server takes minted credentials"},
		{name: "turn ttl", cfg: Config{ICEServers: []string{"turn:host:3478"}, TURNSecret: "s3cret", TURNTTL: time.Second}, err: "TURNTTL 1s is out of range"},
		{name: "nat ip", cfg: Config{NAT1To1IPs: []string{"1.2.3"}}, err: `"1.2.3" is not an IP address`},
		{name: "udp port", cfg: Config{UDPPort: 70000}, err: "UDPPort 70000 is out of range"},
		{name: "viewers", cfg: Config{MaxViewers: -1}, err: "MaxViewers -1"},
		{name: "policy", cfg: Config{Policy: "people"}, err: `unknown policy "people": use shared`},
		{name: "half video size", cfg: Config{VideoWidth: 640}, err: "give both VideoWidth and VideoHeight"},
		{name: "queue", cfg: Config{QueueFrames: 500}, err: "QueueFrames 500"},
		{name: "input limit", cfg: Config{MaxInputBytes: 10}, err: "MaxInputBytes 10 is too small"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tt.cfg.withDefaults()
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.FPS == 0 || c.BitrateKbps == 0 || c.Preset == "" || c.MaxViewers == 0 || c.Policy == "" {
				t.Errorf("defaults not filled: %+v", c)
			}
		})
	}
}

func TestParseICEServer(t *testing.T) {
	tests := []struct {
		in       string
		minted   bool // a TURN secret is set
		url      string
		user, pw string
		err      string
	}{
		{in: "stun:stun.l.google.com:19302", url: "stun:stun.l.google.com:19302"},
		{in: "turn:alice:s%40cret@turn.example:3478?transport=tcp", url: "turn:turn.example:3478?transport=tcp", user: "alice", pw: "s@cret"},
		{in: "turns:bob:pw@turn.example:5349", url: "turns:turn.example:5349", user: "bob", pw: "pw"},
		{in: "turn:turn.example", err: "no credentials"},
		{in: "turn:turn.example:3478", minted: true, url: "turn:turn.example:3478"},
		{in: "turn:carol:pw@turn.example:3478", minted: true, url: "turn:turn.example:3478", user: "carol", pw: "pw"},
		{in: "stun", err: "is not a URL"},
		{in: "ws://x", err: `scheme "ws"`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseICEServer(tt.in, tt.minted)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.URL != tt.url || got.Username != tt.user || got.Credential != tt.pw {
				t.Fatalf("got %+v, want url %q user %q password %q", got, tt.url, tt.user, tt.pw)
			}
		})
	}
}

func TestVideoSize(t *testing.T) {
	tests := []struct {
		cfg            Config
		sw, sh, vw, vh int
		err            string
	}{
		{sw: 1280, sh: 800, vw: 1280, vh: 800},
		{sw: 1281, sh: 801, vw: 1280, vh: 800},
		{cfg: Config{VideoWidth: 640, VideoHeight: 400}, sw: 1280, sh: 800, vw: 640, vh: 400},
		{cfg: Config{VideoWidth: 2560, VideoHeight: 1600}, sw: 1280, sh: 800, err: "larger than the 1280x800 screen"},
		{cfg: Config{VideoWidth: 641, VideoHeight: 400}, sw: 1280, sh: 800, err: "must be even"},
	}
	for _, tt := range tests {
		vw, vh, err := tt.cfg.videoSize(tt.sw, tt.sh)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%+v: err = %v, want %q", tt.cfg, err, tt.err)
			}
			continue
		}
		if err != nil || vw != tt.vw || vh != tt.vh {
			t.Errorf("%+v on %dx%d: got %dx%d, %v; want %dx%d", tt.cfg, tt.sw, tt.sh, vw, vh, err, tt.vw, tt.vh)
		}
	}
}

func TestParseInput(t *testing.T) {
	str := func(s string) webrtc.DataChannelMessage {
		return webrtc.DataChannelMessage{IsString: true, Data: []byte(s)}
	}
	tests := []struct {
		name string
		msg  webrtc.DataChannelMessage
		want input
		err  string
	}{
		{name: "key down", msg: str(`{"t":"kd","k":65293}`), want: input{t: "kd", keysym: 65293}},
		{name: "key up float", msg: str(`{"t":"ku","k":97.0}`), want: input{t: "ku", keysym: 97}},
		{name: "button", msg: str(`{"t":"bd","b":3}`), want: input{t: "bd", button: 3}},
		{name: "motion", msg: str(`{"t":"mm","x":639,"y":0}`), want: input{t: "mm", x: 639, y: 0}},
		{name: "motion fraction", msg: str(`{"t":"mm","x":10.7,"y":3.2}`), want: input{t: "mm", x: 10, y: 3}},
		{name: "wheel", msg: str(`{"t":"wh","dy":-2}`), want: input{t: "wh", dy: -2}},
		{name: "clip", msg: str(`{"t":"clip","text":"héllo"}`), want: input{t: "clip", text: "héllo"}},
		{name: "release", msg: str(`{"t":"release"}`), want: input{t: "release"}},
		{name: "extra fields ignored", msg: str(`{"t":"release","seq":4}`), want: input{t: "release"}},

		{name: "binary", msg: webrtc.DataChannelMessage{Data: []byte{1, 2}}, err: "JSON text; got 2 bytes of binary"},
		{name: "huge", msg: str(`{"t":"clip","text":"` + strings.Repeat("x", 70000) + `"}`), err: "too large: at most 65536"},
		{name: "garbage", msg: str(`\x00\x01garbage`), err: "not JSON"},
		{name: "array", msg: str(`[1,2]`), err: "not JSON of the expected shape"},
		{name: "two objects", msg: str(`{"t":"release"}{"t":"release"}`), err: "data after the JSON object"},
		{name: "no type", msg: str(`{"k":1}`), err: `no "t"`},
		{name: "unknown type", msg: str(`{"t":"teleport"}`), err: `unknown input type "teleport"`},
		{name: "type not string", msg: str(`{"t":5}`), err: "not JSON of the expected shape"},
		{name: "key missing", msg: str(`{"t":"kd"}`), err: `kd: "k" is missing`},
		{name: "key zero", msg: str(`{"t":"kd","k":0}`), err: `"k" is 0: it must be 1..536870911`},
		{name: "key fraction", msg: str(`{"t":"kd","k":65.5}`), err: "whole number"},
		{name: "key string", msg: str(`{"t":"kd","k":"a"}`), err: "not JSON of the expected shape"},
		{name: "button range", msg: str(`{"t":"bd","b":12}`), err: `"b" is 12: it must be 1..9`},
		{name: "wheel button", msg: str(`{"t":"bd","b":4}`), err: "is a wheel button"},
		{name: "motion outside", msg: str(`{"t":"mm","x":640,"y":0}`), err: "outside the 640x400 video"},
		{name: "motion negative", msg: str(`{"t":"mm","x":-1,"y":0}`), err: "outside the 640x400 video"},
		{name: "motion missing", msg: str(`{"t":"mm","x":1}`), err: `mm needs "x" and "y"`},
		{name: "wheel empty", msg: str(`{"t":"wh"}`), err: `wh needs "dx" and/or "dy"`},
		{name: "wheel far", msg: str(`{"t":"wh","dy":1000}`), err: `"dy" is 1000`},
		{name: "clip missing", msg: str(`{"t":"clip"}`), err: `clip needs "text"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseInput(tt.msg, DefaultMaxInputBytes, 640, 400)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// rgbToYUV is libyuv's BT.601 limited-range conversion (ARGBToI420), the
// reference the cursor blend must agree with.
func rgbToYUV(r, g, b int) (y, u, v int) {
	y = (66*r+129*g+25*b+128)>>8 + 16
	u = (-38*r-74*g+112*b+128)>>8 + 128
	v = (112*r-94*g-18*b+128)>>8 + 128
	return
}

func TestCursorBlend(t *testing.T) {
	tests := []struct {
		name       string
		bg         [3]int // background RGB
		argb       uint32 // premultiplied cursor pixel
		tolY, tolC int
	}{
		{name: "opaque black on white", bg: [3]int{255, 255, 255}, argb: 0xff000000},
		{name: "opaque white on black", bg: [3]int{0, 0, 0}, argb: 0xffffffff},
		{name: "opaque red on grey", bg: [3]int{128, 128, 128}, argb: 0xffff0000},
		{name: "half green on blue", bg: [3]int{0, 0, 255}, argb: 0x80008000},
		{name: "transparent", bg: [3]int{10, 200, 30}, argb: 0x00000000},
	}
	const w, h = 8, 8
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			y0, u0, v0 := rgbToYUV(tt.bg[0], tt.bg[1], tt.bg[2])
			p := planes{y: make([]byte, w*h), u: make([]byte, w*h/4), v: make([]byte, w*h/4), sy: w, su: w / 2, sv: w / 2, w: w, h: h}
			for i := range p.y {
				p.y[i] = byte(y0)
			}
			for i := range p.u {
				p.u[i], p.v[i] = byte(u0), byte(v0)
			}
			orig := planes{y: append([]byte(nil), p.y...), u: append([]byte(nil), p.u...), v: append([]byte(nil), p.v...)}
			// A 2x2 cursor covering exactly one chroma block at (2,2).
			img := []uint32{tt.argb, tt.argb, tt.argb, tt.argb}
			ci := newCursorImage(2, 2, 0, 0, img)
			var su saveUnder
			ci.draw(p, 2, 2, &su)

			a := int(tt.argb >> 24)
			blend := func(src, dst int) int { return src + dst*(255-a)/255 }
			r := blend(int(tt.argb>>16&0xff), tt.bg[0])
			g := blend(int(tt.argb>>8&0xff), tt.bg[1])
			b := blend(int(tt.argb&0xff), tt.bg[2])
			wy, wu, wv := rgbToYUV(r, g, b)
			if d := int(p.y[2*w+2]) - wy; d < -2 || d > 2 {
				t.Errorf("Y = %d, want %d (±2)", p.y[2*w+2], wy)
			}
			if d := int(p.u[1*w/2+1]) - wu; d < -2 || d > 2 {
				t.Errorf("U = %d, want %d (±2)", p.u[w/2+1], wu)
			}
			if d := int(p.v[1*w/2+1]) - wv; d < -2 || d > 2 {
				t.Errorf("V = %d, want %d (±2)", p.v[w/2+1], wv)
			}
			if p.y[0] != byte(y0) || p.u[0] != byte(u0) {
				t.Errorf("pixels outside the cursor changed")
			}
			su.restore(p)
			if string(p.y) != string(orig.y) || string(p.u) != string(orig.u) || string(p.v) != string(orig.v) {
				t.Errorf("restore did not put the picture back")
			}
		})
	}
}

func TestCursorClipped(t *testing.T) {
	// A cursor hanging off every edge must neither panic nor draw outside.
	const w, h = 16, 16
	img := make([]uint32, 10*10)
	for i := range img {
		img[i] = 0xffffffff
	}
	ci := newCursorImage(10, 10, 5, 5, img)
	for _, pt := range [][2]int{{0, 0}, {15, 15}, {-20, 3}, {3, 40}, {15, 0}, {7, 7}} {
		p := planes{y: make([]byte, w*h), u: make([]byte, w*h/4), v: make([]byte, w*h/4), sy: w, su: w / 2, sv: w / 2, w: w, h: h}
		var su saveUnder
		ci.draw(p, pt[0], pt[1], &su)
		su.restore(p)
		for i, b := range p.y {
			if b != 0 {
				t.Fatalf("cursor at %v: pixel %d not restored", pt, i)
			}
		}
	}
}

// TestFanOutDropsToKeyframe feeds frames to a viewer that does not read: once
// its queue is full it gets nothing until a keyframe, and asks for one.
func TestFanOutDropsToKeyframe(t *testing.T) {
	s := &Server{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	p := &pipeline{s: s, subs: map[*subscriber]struct{}{}, kick: make(chan struct{}, 1)}
	slow := &subscriber{id: "slow", q: make(chan *encFrame, 2), needKey: true}
	fast := &subscriber{id: "fast", q: make(chan *encFrame, 100), needKey: true}
	p.subs[slow] = struct{}{}
	p.subs[fast] = struct{}{}
	steps := []struct {
		key      bool
		slowGets bool // the frame lands in slow's queue
		askKey   bool // a keyframe is requested by this step
		drain    int  // slow reads this many frames after the step
	}{
		{key: false, slowGets: false},               // joined: waits for a keyframe
		{key: true, slowGets: true},                 // the keyframe
		{key: false, slowGets: true},                // queue now full (2)
		{key: false, slowGets: false, askKey: true}, // overflow: drop, ask for a keyframe
		{key: false, slowGets: false, drain: 2},     // still waiting for a keyframe, even with room
		{key: true, slowGets: true},                 // back in sync
		{key: false, slowGets: true},
	}
	for i, st := range steps {
		p.keyReq.Store(false)
		f := &encFrame{key: st.key, data: []byte{byte(i)}}
		n := len(slow.q)
		p.fanOut(f)
		got := len(slow.q) > n
		if got != st.slowGets {
			t.Errorf("step %d (key %v): slow got it %v, want %v", i, st.key, got, st.slowGets)
		}
		if p.keyReq.Load() != st.askKey {
			t.Errorf("step %d: keyframe requested %v, want %v", i, p.keyReq.Load(), st.askKey)
		}
		for j := 0; j < st.drain; j++ {
			<-slow.q
		}
	}
	// The fast viewer got everything from the first keyframe on, in order.
	var got []byte
	for len(fast.q) > 0 {
		got = append(got, (<-fast.q).data[0])
	}
	if want := []byte{1, 2, 3, 4, 5, 6}; string(got) != string(want) {
		t.Errorf("fast viewer got frames %v, want %v", got, want)
	}
	if d := p.counters.dropped.Load(); d != 4 {
		t.Errorf("dropped = %d, want 4 (1 before the first keyframe for each viewer, 2 for the slow one)", d)
	}
}
