package stream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/pion/webrtc/v4"

	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/internal/wire"
)

// maxErrBuffered: above this many bytes queued on the data channel, error
// replies are dropped rather than let a flood of bad input grow memory.
const maxErrBuffered = 256 << 10

// attachInput wires the browser's "input" data channel to the desktop.
func (v *viewer) attachInput(dc *webrtc.DataChannel) {
	v.mu.Lock()
	if v.dc != nil {
		v.mu.Unlock()
		v.log.Debug("closing a second input channel")
		dc.Close()
		return
	}
	v.dc = dc
	v.mu.Unlock()
	dc.OnMessage(func(m webrtc.DataChannelMessage) {
		if err := v.onInput(m); err != nil {
			v.inputError(dc, err)
		}
	})
}

// inputError tells the browser why an input was refused.
func (v *viewer) inputError(dc *webrtc.DataChannel, err error) {
	v.s.video.counters.inputErrors.Add(1)
	if dc.BufferedAmount() > maxErrBuffered {
		return
	}
	b, _ := json.Marshal(inputErrMsg{T: "err", Message: err.Error()})
	if serr := dc.SendText(string(b)); serr != nil {
		v.log.Debug("sending an input error", "err", serr)
	}
}

// sendInputJSON sends a message on the input channel if it is open.
func (v *viewer) sendInputJSON(m any) {
	v.mu.Lock()
	dc, ws := v.dc, v.wsv != nil
	v.mu.Unlock()
	if ws {
		v.sendJSON(inputEnvelope{Type: "input", Input: m})
		return
	}
	if dc == nil || dc.ReadyState() != webrtc.DataChannelStateOpen || dc.BufferedAmount() > maxErrBuffered {
		return
	}
	b, _ := json.Marshal(m)
	if err := dc.SendText(string(b)); err != nil {
		v.log.Debug("sending on the input channel", "err", err)
	}
}

// input is a validated input message.
type input struct {
	t      string
	keysym hci.Keysym
	button int
	x, y   int // video pixels
	dx, dy int
	text   string
}

// parseInput checks one data channel message against the protocol.
func parseInput(m webrtc.DataChannelMessage, maxBytes, vw, vh int) (input, error) {
	msg, err := decodeInput(m, maxBytes)
	if err != nil {
		return input{}, err
	}
	parse := inputKind(msg.T)
	if parse == nil {
		return input{t: msg.T}, unknownInput(msg.T)
	}
	return parse(msg, input{t: msg.T}, vw, vh)
}

// decodeInput reads one message's JSON: text, at most maxBytes, one object,
// valid UTF-8.
func decodeInput(m webrtc.DataChannelMessage, maxBytes int) (inputMsg, error) {
	var msg inputMsg
	if !m.IsString {
		return msg, fmt.Errorf("input messages are JSON text; got %d bytes of binary", len(m.Data))
	}
	if len(m.Data) > maxBytes {
		return msg, fmt.Errorf("input message of %d bytes is too large: at most %d", len(m.Data), maxBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(m.Data))
	if err := dec.Decode(&msg); err != nil {
		return msg, fmt.Errorf("input message is not JSON of the expected shape (%s): send e.g. {\"t\":\"kd\",\"k\":65293}", wire.Prefix(err.Error(), 200))
	}
	if dec.More() {
		return msg, errors.New("input message has data after the JSON object: send one object per message")
	}
	// On the raw bytes: decoding put U+FFFD in place of bytes that are not
	// UTF-8 (or of a lone surrogate escape) without a word.
	if err := wire.CheckJSON(m.Data); err != nil {
		return msg, fmt.Errorf("input message: %w", err)
	}
	return msg, nil
}

// inputParser reads the fields of one kind of input message into in.
type inputParser func(msg inputMsg, in input, vw, vh int) (input, error)

// inputKind is the parser of input type t, or nil for an unknown type.
func inputKind(t string) inputParser {
	switch t {
	case "kd", "ku":
		return parseKey
	case "bd", "bu":
		return parseButton
	case "mm":
		return parseMove
	case "wh":
		return parseWheel
	case "clip":
		return parseClip
	case "release":
		return func(_ inputMsg, in input, _, _ int) (input, error) { return in, nil }
	}
	return nil
}

func unknownInput(t string) error {
	if t == "" {
		return errors.New("input message has no \"t\": use kd, ku, bd, bu, mm, wh, clip or release")
	}
	return fmt.Errorf("unknown input type %q: use kd, ku, bd, bu, mm, wh, clip or release", truncate(t, 40))
}

func parseKey(msg inputMsg, in input, _, _ int) (input, error) {
	k, err := integer("k", msg.K, 1, 0x1fffffff)
	if err != nil {
		return in, fmt.Errorf("%s: %w (an X keysym)", msg.T, err)
	}
	in.keysym = hci.Keysym(k)
	return in, nil
}

func parseButton(msg inputMsg, in input, _, _ int) (input, error) {
	var err error
	if in.button, err = integer("b", msg.B, 1, 9); err != nil {
		return in, fmt.Errorf("%s: %w: 1 left, 2 middle, 3 right, 8 back, 9 forward", msg.T, err)
	}
	if in.button >= 4 && in.button <= 7 {
		return in, fmt.Errorf("%s: button %d is a wheel button: send {\"t\":\"wh\"} instead", msg.T, in.button)
	}
	return in, nil
}

func parseMove(msg inputMsg, in input, vw, vh int) (input, error) {
	if msg.X == nil || msg.Y == nil {
		return in, errors.New("mm needs \"x\" and \"y\" in video pixels")
	}
	if *msg.X < 0 || *msg.Y < 0 || *msg.X >= float64(vw) || *msg.Y >= float64(vh) {
		return in, fmt.Errorf("mm (%g, %g) is outside the %dx%d video: x must be 0..%d and y 0..%d", *msg.X, *msg.Y, vw, vh, vw-1, vh-1)
	}
	in.x, in.y = int(math.Floor(*msg.X)), int(math.Floor(*msg.Y))
	return in, nil
}

func parseWheel(msg inputMsg, in input, _, _ int) (input, error) {
	if msg.DX == nil && msg.DY == nil {
		return in, errors.New("wh needs \"dx\" and/or \"dy\" in wheel notches (+dy down, +dx right)")
	}
	var err error
	if in.dx, err = optionalNotches("dx", msg.DX); err != nil {
		return in, fmt.Errorf("wh: %w", err)
	}
	if in.dy, err = optionalNotches("dy", msg.DY); err != nil {
		return in, fmt.Errorf("wh: %w", err)
	}
	return in, nil
}

// optionalNotches reads a wheel axis that may be absent (0).
func optionalNotches(name string, f *float64) (int, error) {
	if f == nil {
		return 0, nil
	}
	return integer(name, f, -hci.MaxWheelNotches, hci.MaxWheelNotches)
}

func parseClip(msg inputMsg, in input, _, _ int) (input, error) {
	if msg.Text == nil {
		return in, errors.New("clip needs \"text\"")
	}
	in.text = *msg.Text
	return in, nil
}

// integer reads a required whole number within [lo, hi].
func integer(name string, f *float64, lo, hi int) (int, error) {
	if f == nil {
		return 0, fmt.Errorf("%q is missing", name)
	}
	if *f != math.Trunc(*f) {
		return 0, fmt.Errorf("%q is %g: it must be a whole number", name, *f)
	}
	if *f < float64(lo) || *f > float64(hi) {
		return 0, fmt.Errorf("%q is %g: it must be %d..%d", name, *f, lo, hi)
	}
	return int(*f), nil
}

// onInput validates and executes one input message.
func (v *viewer) onInput(m webrtc.DataChannelMessage) error {
	s := v.s
	g := s.video.geometry()
	in, err := parseInput(m, s.cfg.MaxInputBytes, g.space.ModelW, g.space.ModelH)
	if err != nil {
		return err
	}
	s.video.counters.inputs.Add(1)
	s.actMu.Lock()
	defer s.actMu.Unlock()
	if err := s.canAct(v); err != nil {
		switch in.t {
		case "ku", "bu", "release":
			// Letting go is never an error: a browser that lost control
			// releases what it thinks it holds, and hci already did.
			return nil
		}
		return err
	}
	// No deadline: a person's input waits for the X server as long as it
	// takes (a loaded machine can stall it for seconds), and the inputs
	// after it wait in the data channel, in order. Giving up would lose or
	// misrecord keys the desktop still receives. Only the viewer leaving
	// ends the wait.
	ctx := v.ctx
	src := hci.SourceHuman
	switch in.t {
	case "kd":
		return s.exec.KeyDown(ctx, in.keysym, src)
	case "ku":
		return s.exec.KeyUp(ctx, in.keysym, src)
	case "bd":
		return s.exec.ButtonDown(ctx, in.button, src)
	case "bu":
		return s.exec.ButtonUp(ctx, in.button, src)
	case "mm":
		x, y := g.space.ToScreen(in.x, in.y)
		return s.exec.MoveTo(ctx, x, y, src)
	case "wh":
		return s.exec.Wheel(ctx, in.dx, in.dy, src)
	case "release":
		return s.exec.ReleaseHeldBy(ctx, src)
	case "clip":
		return s.xw.setClipboard(ctx, in.text, v.id)
	}
	return nil
}
