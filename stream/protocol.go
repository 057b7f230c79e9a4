package stream

import "encoding/json"

// Wire messages of the stream protocol (docs/STREAM.md). Signalling messages
// travel as JSON text frames on the websocket; input messages as JSON text on
// the "input" data channel.

// Error codes sent in {"type":"error"} messages.
const (
	CodeBadMessage = "bad_message" // not JSON, wrong field types, unknown type
	CodeBadSDP     = "bad_sdp"     // an offer that cannot be used
	CodeBadICE     = "bad_candidate"
	CodeForbidden  = "forbidden" // the role or the policy does not allow it
	CodeConflict   = "conflict"  // someone else holds control
	CodeNotFound   = "not_found" // no such viewer
	CodeFull       = "full"      // MaxViewers reached
	CodeInternal   = "internal"  // the server failed; the message says how
)

// Roles a viewer can have. The auth callback may also return "local" (no
// tokens configured: everything allowed), which counts as operator.
const (
	RoleViewer   = "viewer"
	RoleOperator = "operator"
)

type sizeMsg struct {
	W int `json:"w"`
	H int `json:"h"`
}

type videoMsg struct {
	W     int    `json:"w"`
	H     int    `json:"h"`
	Codec string `json:"codec"`
}

type iceServerMsg struct {
	URLs       []string `json:"urls"`
	Username   string   `json:"username,omitempty"`
	Credential string   `json:"credential,omitempty"`
}

// ControlState is the shared control state every viewer is shown.
type ControlState struct {
	Holder  *string      `json:"holder"` // null when nobody has control
	Policy  Policy       `json:"policy"`
	Viewers []ViewerInfo `json:"viewers"`
	// Recording is "recording" or "paused" while the desktop is being
	// recorded, empty otherwise: everyone watching is shown it, whatever
	// their role, because they are being recorded too.
	Recording string `json:"recording,omitempty"`
}

type helloMsg struct {
	Type       string         `json:"type"` // "hello"
	ID         string         `json:"id"`
	Role       string         `json:"role"`
	ViewOnly   bool           `json:"view_only"`
	Screen     sizeMsg        `json:"screen"`
	Video      videoMsg       `json:"video"`
	ICEServers []iceServerMsg `json:"ice_servers"`
	Control    ControlState   `json:"control"`
}

type stateMsg struct {
	Type    string       `json:"type"` // "state"
	Control ControlState `json:"control"`
	You     string       `json:"you"`
}

type sdpMsg struct {
	Type string `json:"type"` // "answer"
	SDP  string `json:"sdp"`
	// Codec is the video the offer chose ("h264" or "vp8"), for the page
	// to show; the SDP says the same.
	Codec string `json:"codec"`
}

type candidateInit struct {
	Candidate        string  `json:"candidate"`
	SDPMid           *string `json:"sdpMid,omitempty"`
	SDPMLineIndex    *uint16 `json:"sdpMLineIndex,omitempty"`
	UsernameFragment *string `json:"usernameFragment,omitempty"`
}

type candidateMsg struct {
	Type      string         `json:"type"` // "candidate"
	Candidate *candidateInit `json:"candidate"`
}

type errorMsg struct {
	Type    string `json:"type"` // "error"
	Message string `json:"message"`
	Code    string `json:"code"`
}

type pongMsg struct {
	Type string   `json:"type"` // "pong"
	T    *float64 `json:"t"`
}

// clientMsg is any message a browser sends on the websocket. Fields are
// pointers or raw where "absent" and "wrong type" must be told apart.
type clientMsg struct {
	Type      string         `json:"type"`
	SDP       *string        `json:"sdp"`
	Candidate *candidateInit `json:"candidate"`
	Op        string         `json:"op"`
	Viewer    string         `json:"viewer"`
	Policy    string         `json:"policy"`
	T         *float64       `json:"t"`
	// Kind is the transport asked for ({"type":"transport"}).
	Kind string `json:"kind"`
	// Seq and DecodeMs acknowledge websocket video frames ({"type":"ack"}).
	Seq      *float64 `json:"seq"`
	DecodeMs *float64 `json:"decode_ms"`
	// Input is one input message on the websocket transport
	// ({"type":"input"}), kept raw for the input parser's own checks.
	Input json.RawMessage `json:"input,omitempty"`
}

// inputMsg is one message on the input data channel. Numbers are float64 so a
// browser that sends 10.0 or 10.5 gets a precise answer instead of a decode
// error about Go types.
type inputMsg struct {
	T    string   `json:"t"`
	K    *float64 `json:"k"`
	B    *float64 `json:"b"`
	X    *float64 `json:"x"`
	Y    *float64 `json:"y"`
	DX   *float64 `json:"dx"`
	DY   *float64 `json:"dy"`
	Text *string  `json:"text"`
}

type inputErrMsg struct {
	T       string `json:"t"` // "err"
	Message string `json:"message"`
}

type clipMsg struct {
	T    string `json:"t"` // "clip"
	Text string `json:"text"`
}
