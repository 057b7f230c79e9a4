package stream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/pion/webrtc/v4"

	"github.com/deskenv/deskenv/auth"
	"github.com/deskenv/deskenv/internal/wire"
)

// Signalling limits.
const (
	maxSignalBytes = 256 << 10 // an SDP offer is a few kB; this leaves room for many candidates
	signalQueue    = 256       // outgoing messages buffered per viewer before it counts as stuck
	writeWait      = 10 * time.Second
	pingEvery      = 15 * time.Second
	readWait       = 45 * time.Second // a browser answers our pings; three missed ones end the session
)

// viewer is one websocket session and the peer connection it negotiates. A
// reconnecting browser opens a new websocket and becomes a new viewer.
type viewer struct {
	s        *Server
	id       string
	role     string
	viewOnly bool
	since    time.Time
	remote   string
	log      *slog.Logger
	ice      []webrtc.ICEServer // its peer connection's, minted for it (viewerICE)

	ctx    context.Context
	cancel context.CancelFunc
	ws     *websocket.Conn
	out    chan []byte
	bin    chan []byte   // video messages of the websocket transport (wsvideo.go)
	done   chan struct{} // closed when the writer has finished

	closeOnce   sync.Once
	closeReason string

	mu       sync.Mutex
	pc       *webrtc.PeerConnection
	dc       *webrtc.DataChannel
	answered bool
	pending  []*candidateInit // local candidates found before the answer was sent
	video    bool             // connected and subscribed to the video
	sub      *subscriber
	send     videoOut // what the offer chose, set with pc
	link     *linkStats
	wsv      *wsVideo // set when the video travels on the websocket
}

func (v *viewer) info() ViewerInfo {
	v.mu.Lock()
	defer v.mu.Unlock()
	return ViewerInfo{ID: v.id, Role: v.role, ViewOnly: v.viewOnly, Since: v.since, Video: v.video, Remote: v.remote}
}

// Register puts the signalling websocket at /stream/signal behind the
// appliance's front door d, for viewers and operators (the token may come in
// the URL: a browser cannot set a header on a websocket). Who connects is
// the role the door let in (doorRole).
func (s *Server) Register(d *auth.Door) {
	d.Handle("/stream/signal", auth.Policy{Roles: []auth.Role{auth.RoleViewer}, URLToken: true, Stream: true},
		s.SignalHandler(doorRole))
}

// doorRole is who connects, from the role the front door let in: operators
// (and everyone in local mode) may take control; viewer tokens watch only.
// Annotators join as viewers who may act: they request control when it is
// free and release it, but never take it from someone, give it away or set
// the policy, which are the stream's operator powers.
// The door already refused agents' tokens (MCP alone).
func doorRole(r *http.Request) (role string, viewOnly bool, err error) {
	switch role := auth.RoleFrom(r.Context()); role {
	case auth.RoleOperator, auth.RoleLocal:
		return RoleOperator, false, nil
	case auth.RoleAnnotator:
		return RoleViewer, false, nil
	case auth.RoleViewer:
		return RoleViewer, true, nil
	default:
		return "", false, fmt.Errorf("a %s token cannot watch the desktop: use a viewer or operator token", role)
	}
}

// SignalHandler serves the signalling websocket (mounted at /stream/signal).
// roleOf decides who may connect: it returns the role ("viewer", "operator", or
// "local" for an appliance without tokens, which counts as operator) and
// whether the link is view-only; an error refuses the connection with 401.
// A nil roleOf lets everyone in as a viewer.
func (s *Server) SignalHandler(roleOf func(r *http.Request) (role string, viewOnly bool, err error)) http.Handler {
	up := websocket.Upgrader{
		ReadBufferSize:  4096,
		WriteBufferSize: 4096,
		// The default same-origin check stays: a page on another site must
		// not be able to open a session with the user's cookie.
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		role, viewOnly := RoleViewer, false
		if roleOf != nil {
			var err error
			role, viewOnly, err = roleOf(r)
			if err != nil {
				auth.WriteError(w, http.StatusUnauthorized, "stream: "+err.Error())
				return
			}
		}
		switch strings.ToLower(role) {
		case RoleOperator, "local":
			role = RoleOperator
		case RoleViewer, "":
			role = RoleViewer
		default:
			auth.WriteError(w, http.StatusForbidden, fmt.Sprintf("stream: role %s may not watch the desktop: use a viewer or operator token", wire.Quote(role)))
			return
		}
		if !websocket.IsWebSocketUpgrade(r) {
			auth.WriteError(w, http.StatusBadRequest, "stream: this is the signalling websocket: connect with a websocket client (see docs/STREAM.md)")
			return
		}
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return // the upgrader has answered with the reason
		}
		s.serveViewer(ws, r, role, viewOnly)
	})
}

// serveViewer runs one session until the websocket closes.
func (s *Server) serveViewer(ws *websocket.Conn, r *http.Request, role string, viewOnly bool) {
	ws.SetReadLimit(maxSignalBytes)
	v := &viewer{
		s: s, role: role, viewOnly: viewOnly, since: time.Now(), remote: r.RemoteAddr,
		ws: ws, out: make(chan []byte, signalQueue), bin: make(chan []byte, wsBinQueue), done: make(chan struct{}), link: &linkStats{},
	}
	v.ctx, v.cancel = context.WithCancel(s.ctx)

	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		refuse(ws, CodeInternal, "the server is shutting down", websocket.CloseGoingAway)
		return
	case len(s.viewers) >= s.cfg.MaxViewers:
		n := len(s.viewers)
		s.mu.Unlock()
		refuse(ws, CodeFull, fmt.Sprintf("the desktop already has %d viewers, the most allowed: try again later", n), websocket.CloseTryAgainLater)
		return
	}
	s.nextID++
	v.id = "v" + strconv.FormatUint(s.nextID, 10)
	v.log = s.log.With("viewer", v.id)
	ice, helloICE, err := s.viewerICE(v.id)
	if err != nil {
		s.mu.Unlock()
		refuse(ws, CodeInternal, err.Error(), websocket.CloseInternalServerErr)
		return
	}
	v.ice = ice
	s.viewers[v.id] = v
	s.sessions.Add(1)
	// The hello is queued before anyone else can broadcast to v, so it is
	// always the first message.
	vw, vh, sw, sh := s.video.sizes()
	hello := helloMsg{
		Type: "hello", ID: v.id, Role: role, ViewOnly: viewOnly,
		Screen:     sizeMsg{W: sw, H: sh},
		Video:      videoMsg{W: vw, H: vh, Codec: s.codecs[0].Name}, // preferred; the answer says which the offer got
		ICEServers: helloICE,
		Control:    s.controlStateLocked().forRole(role),
	}
	v.sendJSON(hello)
	s.mu.Unlock()
	defer s.sessions.Done()
	v.log.Info("viewer joined", "role", role, "view_only", viewOnly, "remote", v.remote)

	go v.writer()
	s.broadcastState()

	v.readLoop()
	v.close("")
	s.leave(v)
}

// refuse sends an error and closes a websocket that never became a viewer.
func refuse(ws *websocket.Conn, code, msg string, closeCode int) {
	b, _ := json.Marshal(errorMsg{Type: "error", Code: code, Message: msg})
	ws.SetWriteDeadline(time.Now().Add(writeWait))
	ws.WriteMessage(websocket.TextMessage, b)
	ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(closeCode, truncate(msg, 120)), time.Now().Add(writeWait))
	ws.Close()
}

// leave frees what v held: control, keys, video and the peer connection.
func (s *Server) leave(v *viewer) {
	s.actMu.Lock()
	s.revokeLocked(v.id)
	s.actMu.Unlock()
	v.mu.Lock()
	pc, sub := v.pc, v.sub
	v.pc, v.sub, v.video = nil, nil, false
	v.mu.Unlock()
	if sub != nil {
		s.video.unsubscribe(sub)
	}
	if pc != nil {
		if err := pc.Close(); err != nil {
			v.log.Debug("closing the peer connection", "err", err)
		}
	}
	s.mu.Lock()
	delete(s.viewers, v.id)
	s.mu.Unlock()
	<-v.done
	s.broadcastState()
	v.log.Info("viewer left", "reason", v.closeReason)
}

// close ends the session: the read loop returns and the writer sends a close
// frame with reason.
func (v *viewer) close(reason string) {
	v.closeOnce.Do(func() {
		v.closeReason = reason
		v.cancel()
		// Unblock the read loop; the writer sends the close frame first if
		// it can.
		go func() {
			select {
			case <-v.done:
			case <-time.After(writeWait):
			}
			v.ws.Close()
		}()
	})
}

// writer is the only goroutine that writes to the websocket.
func (v *viewer) writer() {
	defer close(v.done)
	ping := time.NewTicker(pingEvery)
	defer ping.Stop()
	for {
		select {
		case b := <-v.out:
			v.ws.SetWriteDeadline(time.Now().Add(writeWait))
			if err := v.ws.WriteMessage(websocket.TextMessage, b); err != nil {
				v.close("writing to the websocket: " + err.Error())
				return
			}
		case b := <-v.bin:
			v.ws.SetWriteDeadline(time.Now().Add(writeWait))
			if err := v.ws.WriteMessage(websocket.BinaryMessage, b); err != nil {
				v.close("writing video to the websocket: " + err.Error())
				return
			}
		case <-ping.C:
			if err := v.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeWait)); err != nil {
				v.close("ping: " + err.Error())
				return
			}
		case <-v.ctx.Done():
			// Flush what is queued (an error explaining the close), then say goodbye.
			for {
				select {
				case b := <-v.out:
					v.ws.SetWriteDeadline(time.Now().Add(writeWait))
					if v.ws.WriteMessage(websocket.TextMessage, b) != nil {
						return
					}
					continue
				default:
				}
				break
			}
			code := websocket.CloseNormalClosure
			if v.closeReason != "" {
				code = websocket.CloseGoingAway
			}
			v.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, truncate(v.closeReason, 120)), time.Now().Add(time.Second))
			return
		}
	}
}

// sendJSON queues a message for the browser without blocking. A viewer that
// does not read its messages is disconnected rather than allowed to hold
// memory or stall the others.
func (v *viewer) sendJSON(m any) {
	b, err := json.Marshal(m)
	if err != nil {
		v.log.Error("encoding a signalling message", "err", err)
		return
	}
	select {
	case <-v.ctx.Done():
	case v.out <- b:
	default:
		v.close("the browser does not read its signalling messages")
	}
}

func (v *viewer) sendError(code, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	v.log.Debug("signalling error", "code", code, "message", msg)
	v.sendJSON(errorMsg{Type: "error", Code: code, Message: msg})
}

// readLoop reads signalling messages until the websocket closes.
func (v *viewer) readLoop() {
	v.ws.SetReadDeadline(time.Now().Add(readWait))
	v.ws.SetPongHandler(func(string) error {
		v.ws.SetReadDeadline(time.Now().Add(readWait))
		return nil
	})
	for {
		kind, data, err := v.ws.ReadMessage()
		if err != nil {
			if errors.Is(err, websocket.ErrReadLimit) {
				v.close(fmt.Sprintf("a signalling message was larger than %d bytes", maxSignalBytes))
			} else if v.ctx.Err() == nil && !websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway, websocket.CloseNoStatusReceived) {
				v.log.Debug("websocket read", "err", err)
			}
			return
		}
		v.ws.SetReadDeadline(time.Now().Add(readWait))
		if kind != websocket.TextMessage {
			v.sendError(CodeBadMessage, "signalling messages are JSON text; got a binary message of %d bytes", len(data))
			continue
		}
		v.handle(data)
		if v.ctx.Err() != nil {
			return
		}
	}
}

// decodeSignal decodes one signalling message: one JSON object of
// clientMsg's shape, nothing after it. It is apart from handle so it can be
// fuzzed without a viewer.
func decodeSignal(data []byte) (clientMsg, error) {
	var m clientMsg
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&m); err != nil {
		return m, fmt.Errorf("signalling message is not valid JSON of the expected shape (%v): send {\"type\": \"offer\"|\"candidate\"|\"control\"|\"ping\", ...}", err)
	}
	if dec.More() {
		return m, errors.New("signalling message has data after the JSON object: send one object per message")
	}
	return m, nil
}

// handle dispatches one signalling message.
func (v *viewer) handle(data []byte) {
	m, err := decodeSignal(data)
	if err != nil {
		v.sendError(CodeBadMessage, "%v", err)
		return
	}
	switch m.Type {
	case "offer":
		v.onOffer(m)
	case "candidate":
		v.onCandidate(m)
	case "control":
		v.onControl(m)
	case "ping":
		v.sendJSON(pongMsg{Type: "pong", T: m.T})
	case "stats":
		v.onStats()
	case "transport":
		v.onTransport(m)
	case "ack":
		v.onAck(m)
	case "input":
		v.onWSInput(m)
	case "":
		v.sendError(CodeBadMessage, "signalling message has no \"type\": use offer, candidate, control, ping, stats, transport, ack or input")
	default:
		v.sendError(CodeBadMessage, "unknown signalling message type %q: use offer, candidate, control, ping, stats, transport, ack or input", truncate(m.Type, 40))
	}
}

// onControl handles {"type":"control","op":...}.
func (v *viewer) onControl(m clientMsg) {
	s := v.s
	switch m.Op {
	case "request":
		if err := s.request(v); err != nil {
			code := CodeForbidden
			if errors.Is(err, errHeld) {
				code = CodeConflict
			}
			v.sendError(code, "%v", err)
		}
	case "release":
		s.actMu.Lock()
		s.revokeLocked(v.id)
		s.actMu.Unlock()
	case "grant", "revoke", "policy":
		if v.role != RoleOperator {
			v.sendError(CodeForbidden, "control %s is for operators; your link has role %s", wire.Quote(m.Op), v.role)
			return
		}
		var err error
		switch m.Op {
		case "grant":
			if m.Viewer == "" {
				v.sendError(CodeBadMessage, "grant needs \"viewer\": the id of the viewer to give control to")
				return
			}
			err = s.Grant(m.Viewer)
		case "revoke":
			s.Revoke()
		case "policy":
			err = s.SetPolicy(Policy(m.Policy))
		}
		if err != nil {
			code := CodeForbidden
			if errors.Is(err, ErrNoViewer) {
				code = CodeNotFound
			} else if errors.Is(err, ErrBadPolicy) {
				code = CodeBadMessage
			}
			v.sendError(code, "%s", strings.TrimPrefix(err.Error(), "stream: "))
		}
	case "":
		v.sendError(CodeBadMessage, "control message has no \"op\": use request or release (operators also grant, revoke, policy)")
	default:
		v.sendError(CodeBadMessage, "unknown control op %q: use request or release (operators also grant, revoke, policy)", truncate(m.Op, 40))
	}
}

var errHeld = errors.New("someone else has control")

// request gives v control if it is free; an operator takes it from whoever
// has it.
func (s *Server) request(v *viewer) error {
	s.actMu.Lock()
	defer s.actMu.Unlock()
	if v.viewOnly {
		return errors.New("this is a view-only link: it can never control the desktop")
	}
	if s.Policy() == PolicyAgent {
		return errPeopleWatch
	}
	h := s.Holder()
	if h == v.id {
		return nil
	}
	if h != "" && v.role != RoleOperator {
		return fmt.Errorf("%s has control: ask them to release it, or an operator to give it to you (%w)", h, errHeld)
	}
	return s.grantLocked(v.id)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
