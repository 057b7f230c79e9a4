// Package stream serves one X display to people in the browser over WebRTC:
// the screen encoded once per codec in use (H.264, or VP8 for browsers
// without it) and fanned out to every viewer of that codec, input from
// a data channel executed through hci with source "human", a text clipboard
// both ways, and the hand-over of control between people and the agent.
//
// The protocol is in docs/STREAM.md.
package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/ice/v4"
	"github.com/pion/webrtc/v4"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/internal/wire"
	"github.com/deskenv/deskenv/screen"
)

// ErrPersonInControl is what the agent's actions fail with under PolicyHuman.
var ErrPersonInControl = errors.New("a person has control of the desktop (policy human): the agent may act again when they release it, or when an operator sets the policy to shared or agent")

// errPeopleWatch is what people's input fails with under PolicyAgent.
var errPeopleWatch = errors.New("the agent has control of the desktop (policy agent): people can only watch")

// ErrNoViewer is wrapped by Grant's error for an id that is not connected.
var ErrNoViewer = errors.New("no such viewer")

// ErrClosed is returned by a Server after Close.
var ErrClosed = errors.New("stream: server is closed")

// ViewerInfo describes one connected viewer.
type ViewerInfo struct {
	ID       string    `json:"id"`
	Role     string    `json:"role"` // "viewer" or "operator"
	ViewOnly bool      `json:"view_only"`
	Since    time.Time `json:"since"`
	Video    bool      `json:"video"` // its peer connection is up
	Remote   string    `json:"remote,omitempty"`
}

// Stats are counters since the server started, and the current state.
type Stats struct {
	Viewers         int           `json:"viewers"`
	Encoding        bool          `json:"encoding"` // the capture/encode loop runs
	FramesCaptured  uint64        `json:"frames_captured"`
	FramesEncoded   uint64        `json:"frames_encoded"`
	FramesSkipped   uint64        `json:"frames_skipped"`   // ticks with an unchanged screen: nothing captured or encoded
	FramesDropped   uint64        `json:"frames_dropped"`   // frames a viewer missed because its queue was full, summed over viewers
	FramesRefined   uint64        `json:"frames_refined"`   // a still picture encoded again to sharpen it
	FramesKeepalive uint64        `json:"frames_keepalive"` // a still picture encoded again so browsers do not time out
	Keyframes       uint64        `json:"keyframes"`
	EncodeTime      time.Duration `json:"encode_time"` // total time in convert + encode
	LastEncode      time.Duration `json:"last_encode"`
	BytesEncoded    uint64        `json:"bytes_encoded"`
	BytesSent       uint64        `json:"bytes_sent"` // RTP payload bytes written, summed over viewers
	PipelineStarts  uint64        `json:"pipeline_starts"`
	KeyframeRequest uint64        `json:"keyframe_requests"`
	// TargetKbps and TargetFPS are what congestion control aims the one
	// encode at (the lowest viewer's rung); with FixedBitrate, the
	// configured bitrate and rate.
	TargetKbps int `json:"target_kbps"`
	TargetFPS  int `json:"target_fps"`
	// TargetWidth and TargetHeight are the size of the video sent: the
	// hello's video size, or half of it on the size rung (input stays in
	// the hello's size either way).
	TargetWidth  int    `json:"target_width"`
	TargetHeight int    `json:"target_height"`
	RateChanges  uint64 `json:"rate_changes"` // times congestion control moved the target (bitrate, frame rate or size)
}

// Server streams one display. Create it with New, mount SignalHandler, and
// Close it when done.
type Server struct {
	d    *display.Display
	exec *hci.Executor
	cfg  Config
	log  *slog.Logger

	api     *webrtc.API
	codecs  []sendCodec // most preferred first
	udpConn net.PacketConn
	udpMux  ice.UDPMux
	ice     []iceServer // as configured; see viewerICE

	video    *pipeline
	bwes     estimators
	xw       *xwatch
	capt     *screen.Capturer
	ownsCapt bool
	// damage says when the screen was drawn on, from capt's one damage
	// subscription (shared with settles): it wakes the video loop.
	damage *screen.DamageFeed

	policy atomic.Value // Policy; read by the hci gate on every agent action
	// held mirrors holder != "" for the gate, which must not take mu: the
	// stream calls the executor with mu held.
	held atomic.Bool
	// ungate removes the gate from the executor.
	ungate func()

	// actMu serialises people's input with control changes, so an input
	// checked against the old holder cannot land after the hand-over has
	// released the old holder's keys.
	actMu sync.Mutex

	mu      sync.Mutex
	viewers map[string]*viewer
	nextID  uint64
	holder  string
	rec     string // ControlState.Recording
	// announced is the holder last published on the lifecycle bus.
	announced string
	unfollow  func()
	closed    bool

	ctx      context.Context
	cancel   context.CancelFunc
	sessions sync.WaitGroup
}

// New prepares streaming of d. Nothing is captured or encoded until a viewer
// connects. It installs a gate on exec that enforces the policy on the
// agent's actions; Close removes it.
func New(d *display.Display, exec *hci.Executor, cfg Config) (*Server, error) {
	if d == nil || exec == nil {
		return nil, errors.New("stream: New needs a display and an hci executor")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = d.Logger()
	}
	sw, sh := d.Size()
	vw, vh, err := cfg.videoSize(sw, sh)
	if err != nil {
		return nil, err
	}
	codecs, err := sendCodecs(vw, vh, cfg.FPS)
	if err != nil {
		return nil, err
	}
	s := &Server{d: d, exec: exec, cfg: cfg, log: cfg.Logger.With("component", "stream"), viewers: map[string]*viewer{},
		codecs: codecs}
	s.policy.Store(cfg.Policy)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	for _, u := range cfg.ICEServers {
		is, _ := parseICEServer(u, cfg.TURNSecret != "") // checked by withDefaults
		s.ice = append(s.ice, is)
	}
	s.capt = cfg.Capturer
	if s.capt == nil {
		if s.capt, err = screen.NewCapturer(d); err != nil {
			s.cancel()
			return nil, fmt.Errorf("stream: %w", err)
		}
		s.ownsCapt = true
	}
	if err := s.buildAPI(); err != nil {
		s.cancel()
		if s.ownsCapt {
			s.capt.Close()
		}
		return nil, err
	}
	s.damage = s.capt.DamageFeed()
	s.video = newPipeline(s)
	s.xw = newXWatch(s)
	s.ungate = exec.AddGate(s.gate)
	s.unfollow = s.follow()
	s.log.Info("stream ready", "fps", cfg.FPS, "bitrate_kbps", cfg.BitrateKbps, "preset", cfg.Preset,
		"policy", cfg.Policy, "udp_port", cfg.UDPPort, "ice_servers", len(cfg.ICEServers))
	return s, nil
}

// gate is installed on the executor: it refuses the agent under PolicyHuman
// while a person has control, and people under PolicyAgent. An agent's
// run_script acts as source script: it is the agent too.
func (s *Server) gate(src hci.Source, what string) error {
	switch s.Policy() {
	case PolicyHuman:
		if (src == hci.SourceAgent || src == hci.SourceScript) && s.held.Load() {
			return ErrPersonInControl
		}
	case PolicyAgent:
		if src == hci.SourceHuman {
			return errPeopleWatch
		}
	}
	return nil
}

// Close disconnects every viewer, stops the video and removes the gate.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	vs := make([]*viewer, 0, len(s.viewers))
	for _, v := range s.viewers {
		vs = append(vs, v)
	}
	s.mu.Unlock()
	for _, v := range vs {
		v.close("the server is shutting down")
	}
	s.sessions.Wait()
	s.cancel()
	s.video.stop()
	s.damage.Close()
	s.xw.close()
	if s.ownsCapt {
		s.capt.Close()
	}
	s.unfollow()
	s.ungate()
	var err error
	if s.udpMux != nil {
		err = s.udpMux.Close()
	}
	if s.udpConn != nil {
		if cerr := s.udpConn.Close(); err == nil && cerr != nil && !errors.Is(cerr, net.ErrClosed) {
			err = cerr
		}
	}
	return err
}

// Stats reports counters and current state.
func (s *Server) Stats() Stats {
	st := s.video.stats()
	s.mu.Lock()
	st.Viewers = len(s.viewers)
	s.mu.Unlock()
	return st
}

// Policy is the current agent/person policy.
func (s *Server) Policy() Policy { return s.policy.Load().(Policy) }

// SetPolicy changes the policy. Under PolicyAgent nobody keeps control: the
// holder loses it and whatever they held is released.
func (s *Server) SetPolicy(p Policy) error {
	p, err := ParsePolicy(string(p))
	if err != nil {
		return fmt.Errorf("stream: %w", err)
	}
	s.actMu.Lock()
	defer s.actMu.Unlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	old := s.Policy()
	s.policy.Store(p)
	var lost string
	if p == PolicyAgent {
		lost, s.holder = s.holder, ""
		s.held.Store(false)
	}
	s.mu.Unlock()
	if lost != "" {
		s.releaseHuman()
	}
	if old != p {
		s.log.Info("policy changed", "from", old, "to", p)
	}
	s.broadcastState()
	return nil
}

// Holder is the id of the viewer in control, or "".
func (s *Server) Holder() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.holder
}

// Grant gives control to viewer id, taking it from whoever had it.
func (s *Server) Grant(id string) error {
	s.actMu.Lock()
	defer s.actMu.Unlock()
	return s.grantLocked(id)
}

// grantLocked is Grant for callers holding actMu.
func (s *Server) grantLocked(id string) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	v := s.viewers[id]
	switch {
	case v == nil:
		s.mu.Unlock()
		return fmt.Errorf("stream: no viewer %s is connected (see Viewers): %w", wire.Quote(id), ErrNoViewer)
	case v.viewOnly:
		s.mu.Unlock()
		return fmt.Errorf("stream: viewer %s joined with a view-only link and can never take control", id)
	case s.Policy() == PolicyAgent:
		s.mu.Unlock()
		return fmt.Errorf("stream: cannot give control to %s: %w; set the policy to shared or human first", id, errPeopleWatch)
	}
	old := s.holder
	s.holder = id
	s.held.Store(true)
	s.mu.Unlock()
	if old != id {
		if old != "" {
			s.releaseHuman()
		}
		s.log.Info("control granted", "viewer", id, "from", old)
		s.broadcastState()
	}
	return nil
}

// Revoke takes control from whoever has it and releases what they held. It
// returns the id of the former holder ("" if nobody had control).
func (s *Server) Revoke() string {
	s.actMu.Lock()
	defer s.actMu.Unlock()
	return s.revokeLocked("")
}

// revokeLocked takes control from the holder, or only from only when it is
// not "" (so a leaving viewer does not take it from someone else).
func (s *Server) revokeLocked(only string) string {
	s.mu.Lock()
	old := s.holder
	if old == "" || (only != "" && old != only) {
		s.mu.Unlock()
		return ""
	}
	s.holder = ""
	s.held.Store(false)
	s.mu.Unlock()
	s.releaseHuman()
	s.log.Info("control released", "viewer", old)
	s.broadcastState()
	return old
}

// releaseHuman lets go of every key and button people hold. Only the holder
// can press anything, so these are the holder's.
func (s *Server) releaseHuman() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.exec.ReleaseHeldBy(ctx, hci.SourceHuman); err != nil && !errors.Is(err, hci.ErrClosed) {
		s.log.Warn("releasing keys and buttons held by people", "err", err)
	}
}

// Viewers lists the connected viewers in the order they joined.
func (s *Server) Viewers() []ViewerInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.viewersLocked()
}

func (s *Server) viewersLocked() []ViewerInfo {
	out := make([]ViewerInfo, 0, len(s.viewers))
	for _, v := range s.viewers {
		out = append(out, v.info())
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Since.Equal(out[j].Since) {
			return out[i].Since.Before(out[j].Since)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// SetRecording tells every viewer whether the desktop is being recorded:
// "recording", "paused", or "" for not.
func (s *Server) SetRecording(state string) error {
	switch state {
	case "", "recording", "paused":
	default:
		return fmt.Errorf("stream: recording state %s: use recording, paused or empty", wire.Quote(state))
	}
	s.mu.Lock()
	changed := s.rec != state
	s.rec = state
	s.mu.Unlock()
	if changed {
		s.broadcastState()
	}
	return nil
}

func (s *Server) controlStateLocked() ControlState {
	cs := ControlState{Policy: s.Policy(), Viewers: s.viewersLocked(), Recording: s.rec}
	if s.holder != "" {
		h := s.holder
		cs.Holder = &h
	}
	return cs
}

// ControlState is the state every viewer is shown.
func (s *Server) ControlState() ControlState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.controlStateLocked()
}

// forRole is the state as a viewer of role may see it: only operators see
// where the others connect from.
func (cs ControlState) forRole(role string) ControlState {
	if role == RoleOperator {
		return cs
	}
	out := cs
	out.Viewers = make([]ViewerInfo, len(cs.Viewers))
	for i, v := range cs.Viewers {
		v.Remote = ""
		out.Viewers[i] = v
	}
	return out
}

// broadcastState sends the control state to every viewer.
func (s *Server) broadcastState() {
	s.mu.Lock()
	cs := s.controlStateLocked()
	vs := make([]*viewer, 0, len(s.viewers))
	for _, v := range s.viewers {
		vs = append(vs, v)
	}
	s.mu.Unlock()
	s.announceHolder()
	public := cs.forRole(RoleViewer)
	for _, v := range vs {
		c := public
		if v.role == RoleOperator {
			c = cs
		}
		v.sendJSON(stateMsg{Type: "state", Control: c, You: v.id})
	}
}

// canAct says whether viewer v may send input now, and why not.
func (s *Server) canAct(v *viewer) error {
	if v.viewOnly {
		return errors.New("this is a view-only link: it can never control the desktop")
	}
	if s.Policy() == PolicyAgent {
		return errPeopleWatch
	}
	s.mu.Lock()
	h := s.holder
	s.mu.Unlock()
	if h != v.id {
		if h == "" {
			return errors.New("you do not have control: request it first")
		}
		return fmt.Errorf("you do not have control: %s has it", h)
	}
	return nil
}

// clipAudience counts viewers who are sent the desktop's clipboard: all but
// view-only ones, since a clipboard may hold what a watcher must not see.
func (s *Server) clipAudience() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, v := range s.viewers {
		if !v.viewOnly {
			n++
		}
	}
	return n
}

// broadcastClip sends the desktop's new clipboard text to every viewer but
// view-only ones and the one that set it.
func (s *Server) broadcastClip(text, except string) {
	s.mu.Lock()
	vs := make([]*viewer, 0, len(s.viewers))
	for _, v := range s.viewers {
		if !v.viewOnly && v.id != except {
			vs = append(vs, v)
		}
	}
	s.mu.Unlock()
	for _, v := range vs {
		v.sendInputJSON(clipMsg{T: "clip", Text: text})
	}
}
