package stream

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/pion/ice/v4"
	"github.com/pion/interceptor"
	"github.com/pion/rtp/codecs"
	"github.com/pion/webrtc/v4"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/internal/xprobe"
)

// env is a display, an executor and a stream server behind a real HTTP
// server (at url), for tests.
type env struct {
	d    *display.Display
	exec *hci.Executor
	s    *Server
	url  string
}

type envOptions struct {
	width, height int
	restart       bool // restart Xvfb when it dies
	cfg           Config
	auth          func(r *http.Request) (string, bool, error)
}

func newEnv(t testing.TB, o envOptions) *env {
	t.Helper()
	d := testrig.Display(t, display.Config{Width: o.width, Height: o.height, RestartOnCrash: o.restart})
	exec, err := hci.NewExecutor(d, hci.Options{})
	if err != nil {
		t.Fatalf("executor: %v", err)
	}
	t.Cleanup(func() { exec.Close() })
	cfg := o.cfg
	cfg.LoopbackOnly = cfg.settings == nil // a virtual network has no loopback
	if cfg.Preset == "" {
		cfg.Preset = "ultrafast"
	}
	s, err := New(d, exec, cfg)
	if err != nil {
		t.Fatalf("stream.New: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	auth := o.auth
	if auth == nil {
		auth = func(r *http.Request) (string, bool, error) {
			switch r.URL.Query().Get("token") {
			case "op":
				return RoleOperator, false, nil
			case "watch":
				return RoleViewer, true, nil
			case "bad":
				return "", false, fmt.Errorf("the token is not valid")
			case "agent":
				return "agent", false, nil
			}
			return RoleViewer, false, nil
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/stream/signal", s.SignalHandler(auth))
	return &env{d: d, exec: exec, s: s, url: testrig.Serve(t, mux)}
}

func (e *env) wsURL(token string) string {
	u := "ws" + strings.TrimPrefix(e.url, "http") + "/stream/signal"
	if token != "" {
		u += "?token=" + token
	}
	return u
}

func (e *env) probe(t testing.TB) *xprobe.Probe {
	t.Helper()
	return testrig.Probe(t, e.d, xprobe.Options{})
}

// frame is one access unit received over RTP, as NAL units, or one VP8
// frame.
type frame struct {
	nals      [][]byte // without start codes
	vp8       []byte   // a VP8 frame, for a VP8 viewer
	timestamp uint32
	at        time.Time
}

func (f frame) types() []int {
	var ts []int
	for _, n := range f.nals {
		if len(n) > 0 {
			ts = append(ts, int(n[0]&0x1f))
		}
	}
	return ts
}

func (f frame) has(t int) bool {
	for _, x := range f.types() {
		if x == t {
			return true
		}
	}
	return false
}

// annexB is the frame with start codes, as a decoder reads it.
func (f frame) annexB() []byte {
	var b []byte
	for _, n := range f.nals {
		b = append(b, 0, 0, 0, 1)
		b = append(b, n...)
	}
	return b
}

// client is a WebRTC viewer made with pion, behaving like the browser page.
type client struct {
	t     testing.TB
	ws    *websocket.Conn
	pc    *webrtc.PeerConnection
	dc    *webrtc.DataChannel
	hello helloMsg

	wmu    sync.Mutex
	msgs   chan map[string]any // signalling messages other than answer and candidate
	frames chan frame
	dcMsgs chan map[string]any
	dcOpen chan struct{}
	done   chan struct{}

	mu       sync.Mutex
	codec    string   // what the answer said it sends
	cands    []string // the server's trickled candidates
	remoteOK bool
	pending  []webrtc.ICECandidateInit
}

type clientOptions struct {
	token   string
	noVideo bool // join signalling only
	vp8Only bool // offer VP8 only, like a browser without H.264
	// api, when set, makes the peer connection instead of clientAPI (a
	// viewer on a virtual network); onTrack, when set, reads the video
	// instead of the depacketizers.
	api     *webrtc.API
	onTrack func(*webrtc.TrackRemote, *webrtc.RTPReceiver)
	// relayOnly makes the peer connection with the hello's ICE servers and
	// relay candidates only, as a browser behind a NAT that only TURN gets
	// through.
	relayOnly bool
}

func clientAPI(t testing.TB, vp8Only bool) *webrtc.API {
	return clientAPIFor(t, vp8Only, nil)
}

// clientAPIWith is clientAPI's default codecs with more registered on the
// media engine by more (header extensions a browser offers, say).
func clientAPIWith(t testing.TB, more func(*webrtc.MediaEngine)) *webrtc.API {
	return clientAPIFor(t, false, more)
}

func clientAPIFor(t testing.TB, vp8Only bool, more func(*webrtc.MediaEngine)) *webrtc.API {
	m := &webrtc.MediaEngine{}
	var err error
	if vp8Only {
		err = m.RegisterCodec(webrtc.RTPCodecParameters{RTPCodecCapability: webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeVP8, ClockRate: 90000,
			RTCPFeedback: []webrtc.RTCPFeedback{{Type: "nack"}, {Type: "nack", Parameter: "pli"}}}, PayloadType: 96}, webrtc.RTPCodecTypeVideo)
	} else {
		err = m.RegisterDefaultCodecs()
	}
	if err != nil {
		t.Fatal(err)
	}
	if more != nil {
		more(m)
	}
	reg := &interceptor.Registry{}
	if err := webrtc.RegisterDefaultInterceptors(m, reg); err != nil {
		t.Fatal(err)
	}
	se := webrtc.SettingEngine{}
	se.SetICEMulticastDNSMode(ice.MulticastDNSModeDisabled)
	se.SetIncludeLoopbackCandidate(true)
	se.SetIPFilter(func(ip net.IP) bool { return ip.IsLoopback() })
	se.SetNetworkTypes([]webrtc.NetworkType{webrtc.NetworkTypeUDP4})
	return webrtc.NewAPI(webrtc.WithMediaEngine(m), webrtc.WithInterceptorRegistry(reg), webrtc.WithSettingEngine(se))
}

// dialWS opens the signalling websocket and reads the hello.
func dialWS(t testing.TB, url string) (*websocket.Conn, helloMsg) {
	t.Helper()
	ws, resp, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		if resp != nil {
			t.Fatalf("dial %s: %v (HTTP %d)", url, err, resp.StatusCode)
		}
		t.Fatalf("dial %s: %v", url, err)
	}
	ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	var h helloMsg
	if err := ws.ReadJSON(&h); err != nil {
		ws.Close()
		t.Fatalf("read hello: %v", err)
	}
	ws.SetReadDeadline(time.Time{})
	if h.Type != "hello" {
		ws.Close()
		t.Fatalf("first message is %q, want hello", h.Type)
	}
	return ws, h
}

func join(t testing.TB, e *env, o clientOptions) *client {
	t.Helper()
	ws, h := dialWS(t, e.wsURL(o.token))
	c := &client{t: t, ws: ws, hello: h, msgs: make(chan map[string]any, 1024), frames: make(chan frame, 1024),
		dcMsgs: make(chan map[string]any, 1024), dcOpen: make(chan struct{}), done: make(chan struct{})}
	go c.read()
	if o.noVideo {
		return c
	}
	api := o.api
	if api == nil {
		api = clientAPI(t, o.vp8Only)
	}
	var pcCfg webrtc.Configuration
	if o.relayOnly {
		pcCfg.ICETransportPolicy = webrtc.ICETransportPolicyRelay
		for _, is := range h.ICEServers {
			pcCfg.ICEServers = append(pcCfg.ICEServers, webrtc.ICEServer{URLs: is.URLs, Username: is.Username, Credential: is.Credential})
		}
	}
	pc, err := api.NewPeerConnection(pcCfg)
	if err != nil {
		t.Fatal(err)
	}
	c.pc = pc
	if _, err := pc.AddTransceiverFromKind(webrtc.RTPCodecTypeVideo, webrtc.RTPTransceiverInit{Direction: webrtc.RTPTransceiverDirectionRecvonly}); err != nil {
		t.Fatal(err)
	}
	ordered := true
	dc, err := pc.CreateDataChannel("input", &webrtc.DataChannelInit{Ordered: &ordered})
	if err != nil {
		t.Fatal(err)
	}
	c.dc = dc
	var openOnce sync.Once
	dc.OnOpen(func() { openOnce.Do(func() { close(c.dcOpen) }) })
	dc.OnMessage(func(m webrtc.DataChannelMessage) {
		var v map[string]any
		if json.Unmarshal(m.Data, &v) == nil {
			select {
			case c.dcMsgs <- v:
			default:
			}
		}
	})
	pc.OnICECandidate(func(ic *webrtc.ICECandidate) {
		if ic == nil {
			c.send(map[string]any{"type": "candidate", "candidate": nil})
			return
		}
		c.send(map[string]any{"type": "candidate", "candidate": ic.ToJSON()})
	})
	pc.OnTrack(func(tr *webrtc.TrackRemote, rcv *webrtc.RTPReceiver) {
		if o.onTrack != nil {
			go o.onTrack(tr, rcv)
			return
		}
		if strings.EqualFold(tr.Codec().MimeType, webrtc.MimeTypeVP8) {
			go c.readVP8(tr)
			return
		}
		go c.readVideo(tr)
	})
	offer, err := pc.CreateOffer(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := pc.SetLocalDescription(offer); err != nil {
		t.Fatal(err)
	}
	c.send(map[string]any{"type": "offer", "sdp": offer.SDP})
	return c
}

func (c *client) send(m any) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	c.ws.WriteJSON(m)
}

func (c *client) sendRaw(kind int, b []byte) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	c.ws.WriteMessage(kind, b)
}

// read handles signalling; answer and candidates go to the peer connection.
func (c *client) read() {
	defer close(c.done)
	for {
		_, b, err := c.ws.ReadMessage()
		if err != nil {
			return
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			c.t.Errorf("server sent non-JSON: %q", b)
			continue
		}
		switch m["type"] {
		case "answer":
			sdp, _ := m["sdp"].(string)
			if err := c.pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeAnswer, SDP: sdp}); err != nil {
				c.t.Errorf("set answer: %v", err)
			}
			c.mu.Lock()
			c.codec, _ = m["codec"].(string)
			c.remoteOK = true
			pend := c.pending
			c.pending = nil
			c.mu.Unlock()
			for _, ci := range pend {
				c.pc.AddICECandidate(ci)
			}
		case "candidate":
			var ci webrtc.ICECandidateInit
			if raw, ok := m["candidate"].(map[string]any); ok {
				b, _ := json.Marshal(raw)
				json.Unmarshal(b, &ci)
			}
			c.mu.Lock()
			if ci.Candidate != "" {
				c.cands = append(c.cands, ci.Candidate)
			}
			if !c.remoteOK {
				c.pending = append(c.pending, ci)
				c.mu.Unlock()
				continue
			}
			c.mu.Unlock()
			c.pc.AddICECandidate(ci)
		default:
			select {
			case c.msgs <- m:
			default:
			}
		}
	}
}

// readVideo depacketizes H.264 into access units.
func (c *client) readVideo(tr *webrtc.TrackRemote) {
	var dep codecs.H264Packet
	var cur []byte
	for {
		pkt, _, err := tr.ReadRTP()
		if err != nil {
			return
		}
		b, err := dep.Unmarshal(pkt.Payload)
		if err != nil {
			c.t.Errorf("depacketize H.264: %v", err)
			continue
		}
		cur = append(cur, b...)
		if pkt.Marker {
			f := frame{timestamp: pkt.Timestamp, at: time.Now()}
			for _, n := range splitAnnexB(cur) {
				f.nals = append(f.nals, append([]byte(nil), n...))
			}
			cur = cur[:0]
			select {
			case c.frames <- f:
			default:
			}
		}
	}
}

func splitAnnexB(b []byte) [][]byte {
	var out [][]byte
	start := -1
	for i := 0; i+3 <= len(b); {
		if b[i] == 0 && b[i+1] == 0 && b[i+2] == 1 {
			if start >= 0 {
				end := i
				for end > start && b[end-1] == 0 {
					end--
				}
				out = append(out, b[start:end])
			}
			i += 3
			start = i
			continue
		}
		i++
	}
	if start >= 0 && start < len(b) {
		out = append(out, b[start:])
	}
	return out
}

// waitMsg waits for a signalling message of type typ, skipping others.
func (c *client) waitMsg(typ string, timeout time.Duration) map[string]any {
	c.t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case m := <-c.msgs:
			if m["type"] == typ {
				return m
			}
		case <-deadline:
			c.t.Fatalf("no %q message within %v", typ, timeout)
			return nil
		}
	}
}

// waitState waits for a state message satisfying ok.
func (c *client) waitState(timeout time.Duration, ok func(cs ControlState) bool) ControlState {
	c.t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case m := <-c.msgs:
			if m["type"] != "state" {
				continue
			}
			b, _ := json.Marshal(m["control"])
			var cs ControlState
			json.Unmarshal(b, &cs)
			if ok(cs) {
				return cs
			}
		case <-deadline:
			c.t.Fatalf("no matching state message within %v", timeout)
			return ControlState{}
		}
	}
}

func (c *client) waitFrame(timeout time.Duration) frame {
	c.t.Helper()
	select {
	case f := <-c.frames:
		return f
	case <-time.After(timeout):
		c.t.Fatalf("no video frame within %v", timeout)
		return frame{}
	}
}

func (c *client) waitOpen(timeout time.Duration) {
	c.t.Helper()
	select {
	case <-c.dcOpen:
	case <-time.After(timeout):
		c.t.Fatalf("input channel did not open within %v", timeout)
	}
}

func (c *client) input(m any) {
	c.t.Helper()
	b, _ := json.Marshal(m)
	if err := c.dc.SendText(string(b)); err != nil {
		c.t.Fatalf("send input: %v", err)
	}
}

// waitInputErr waits for an {"t":"err"} on the data channel.
func (c *client) waitInputErr(timeout time.Duration) string {
	c.t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case m := <-c.dcMsgs:
			if m["t"] == "err" {
				s, _ := m["message"].(string)
				return s
			}
		case <-deadline:
			c.t.Fatalf("no input error within %v", timeout)
			return ""
		}
	}
}

func (c *client) close() {
	if c.pc != nil {
		c.pc.Close()
	}
	c.wmu.Lock()
	c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "bye"), time.Now().Add(time.Second))
	c.wmu.Unlock()
	c.ws.Close()
	<-c.done
}
