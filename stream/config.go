package stream

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/pion/webrtc/v4"

	"github.com/deskenv/deskenv/internal/wire"
	"github.com/deskenv/deskenv/lifecycle"
	"github.com/deskenv/deskenv/screen"
)

// Policy says who may act on the desktop: the agent, people, or both.
type Policy string

const (
	// PolicyShared lets the agent act and the one person in control too.
	PolicyShared Policy = "shared"
	// PolicyHuman refuses the agent's actions with a tool error while a
	// person has control; with nobody in control the agent acts.
	PolicyHuman Policy = "human"
	// PolicyAgent lets only the agent act; people watch.
	PolicyAgent Policy = "agent"
)

// ErrBadPolicy is wrapped by errors about unknown policy names.
var ErrBadPolicy = errors.New("unknown policy")

// ParsePolicy reads a policy name, case-insensitively; "" means shared.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(strings.ToLower(strings.TrimSpace(s))); p {
	case "":
		return PolicyShared, nil
	case PolicyShared, PolicyHuman, PolicyAgent:
		return p, nil
	}
	return "", fmt.Errorf("%w %s: use shared (agent and a person both act), human (only people act) or agent (people only watch)", ErrBadPolicy, wire.Quote(s))
}

// Config configures a stream Server. The zero value is usable: 30 fps, 4
// Mbit/s, the screen's size, no ICE servers, ephemeral UDP ports, 32 viewers,
// policy shared.
type Config struct {
	// Lifecycle, if set, is the appliance's lifecycle bus: the stream shows
	// the recorder's state from it and announces who holds control on it.
	Lifecycle *lifecycle.Bus
	// FPS is the most frames per second sent (1..60). Frames are only
	// captured and encoded when the screen changed.
	FPS int
	// BitrateKbps is the video's bitrate in kbit/s (100..100000), whichever
	// codec a viewer gets: where congestion control starts, and its ceiling
	// unless MaxBitrateKbps is higher; with FixedBitrate, the bitrate.
	BitrateKbps int
	// MinBitrateKbps is the floor congestion control goes down to (default
	// 300, or BitrateKbps if lower): below it a desktop is not worth
	// watching, and GCC's own estimate recovers faster from a floor than
	// from nothing.
	MinBitrateKbps int
	// MaxBitrateKbps is the ceiling congestion control goes up to; default
	// BitrateKbps.
	MaxBitrateKbps int
	// FixedBitrate turns congestion control off: BitrateKbps at FPS
	// whatever the link does (as before issue 18; for comparisons).
	FixedBitrate bool
	// Preset is the x264 speed preset for H.264 (ultrafast, superfast,
	// veryfast, faster, fast, medium); empty means DefaultPreset. VP8 runs
	// at libvpx's own real-time speed.
	Preset string
	// ICEServers are STUN/TURN URLs given to browsers and used by the
	// server: "stun:host:3478", "turn:user:password@host:3478?transport=udp".
	ICEServers []string
	// TURNSecret, when set, is the secret a TURN server shares with deskenv
	// (coturn's static-auth-secret with use-auth-secret): every TURN server
	// of ICEServers given without credentials gets, for each viewer, a user
	// name "<expiry>:deskenv-<viewer>" and its HMAC-SHA1 password, the TURN
	// REST scheme (draft-uberti-behave-turn-rest-00), so no static TURN
	// password reaches a page and what a viewer is given stops working after
	// TURNTTL.
	TURNSecret string
	// TURNTTL is how long minted TURN credentials last; zero means
	// DefaultTURNTTL. A TURN server refuses to refresh an allocation whose
	// credentials expired, so it bounds how long a relayed viewer can stay.
	TURNTTL time.Duration
	// NAT1To1IPs are public addresses announced as host candidates instead
	// of the machine's own, for a server behind a 1:1 NAT (a cloud VM).
	NAT1To1IPs []string
	// UDPPort, when non-zero, carries all WebRTC traffic of all viewers on
	// this one UDP port (for firewalls and containers); zero uses an
	// ephemeral port per viewer.
	UDPPort int
	// LoopbackOnly gathers only 127.0.0.1 candidates: for tests and for a
	// server reached only through localhost or an SSH tunnel.
	LoopbackOnly bool
	// MaxViewers bounds simultaneous viewers (default 32).
	MaxViewers int
	// Policy is the initial agent/person policy (default shared).
	Policy Policy
	// Logger receives lifecycle messages; nil means the display's logger.
	Logger *slog.Logger
	// VideoWidth and VideoHeight are the size of the video sent; zero means
	// the screen's (rounded down to even numbers, as 4:2:0 video needs). A
	// smaller video saves bandwidth and CPU; input is mapped back exactly.
	VideoWidth, VideoHeight int
	// KeyframeInterval is the least time between two IDR frames requested by
	// viewers (joins, PLI, FIR); default 500ms. Requests in between are
	// served when the interval has passed, never dropped.
	KeyframeInterval time.Duration
	// QueueFrames is the per-viewer queue of encoded frames (default 4): a
	// viewer whose queue is full skips to the next keyframe instead of
	// falling behind.
	QueueFrames int
	// MaxInputBytes is the largest input message accepted on the data
	// channel (default 65536).
	MaxInputBytes int
	// wsAckWait is how long websocket video frames may go unacknowledged
	// before the viewer is dropped (default wsDefaultAckWait); tests
	// shorten it.
	wsAckWait time.Duration
	// Capturer, when set, is shared with the rest of the appliance (it is
	// safe for concurrent use); otherwise the server makes its own. Either
	// way it is made once, up front: xgb registers extensions in
	// package-level maps its event readers use, so setting up MIT-SHM while
	// other X connections read events is a data race best kept to start-up.
	Capturer *screen.Capturer

	// settings, when set, adjusts pion's settings after the server's own:
	// the tests put the media on a virtual network (pion's vnet) with it.
	settings func(*webrtc.SettingEngine)
}

// Defaults for Config.
const (
	DefaultFPS           = 30
	DefaultBitrateKbps   = 4000
	DefaultMinBitrate    = 300
	DefaultPreset        = "superfast"
	DefaultMaxViewers    = 32
	DefaultQueueFrames   = 4
	DefaultMaxInputBytes = 64 << 10
	// DefaultKeyframeEvery bounds keyframes to two a second however many
	// PLIs a lossy link causes: an IDR costs several ordinary frames' bits,
	// so a storm of them would fill a thin link with keyframes that are
	// lost in turn; half a second is about one round trip of a bad mobile
	// link plus a decode, the soonest a second request can mean anything.
	DefaultKeyframeEvery = 500 * time.Millisecond
	// DefaultTURNTTL is the draft's suggested lifetime of TURN REST
	// credentials: a working day's session relayed without a reconnect.
	DefaultTURNTTL = 24 * time.Hour
)

var presets = []string{"ultrafast", "superfast", "veryfast", "faster", "fast", "medium"}

// withDefaults fills in zero fields and checks the rest; errors name the field.
func (c Config) withDefaults() (Config, error) {
	c.FPS = orDefault(c.FPS, DefaultFPS)
	c.BitrateKbps = orDefault(c.BitrateKbps, DefaultBitrateKbps)
	c.MinBitrateKbps = orDefault(c.MinBitrateKbps, min(DefaultMinBitrate, c.BitrateKbps))
	c.MaxBitrateKbps = orDefault(c.MaxBitrateKbps, c.BitrateKbps)
	c.Preset = strings.ToLower(orDefault(c.Preset, DefaultPreset))
	c.MaxViewers = orDefault(c.MaxViewers, DefaultMaxViewers)
	c.KeyframeInterval = orDefault(c.KeyframeInterval, DefaultKeyframeEvery)
	c.QueueFrames = orDefault(c.QueueFrames, DefaultQueueFrames)
	c.MaxInputBytes = orDefault(c.MaxInputBytes, DefaultMaxInputBytes)
	policy, policyErr := ParsePolicy(string(c.Policy))
	if policyErr == nil {
		c.Policy = policy
	}
	c.TURNTTL = orDefault(c.TURNTTL, DefaultTURNTTL)
	iceErr := firstErr(c.ICEServers, func(u string) error { _, err := parseICEServer(u, c.TURNSecret != ""); return err })
	if iceErr == nil && c.TURNSecret != "" && !slices.ContainsFunc(c.ICEServers, mintsFor) {
		iceErr = fmt.Errorf("stream: a TURN secret is set but no TURN server takes minted credentials: add turn:host:port (without user:password) to the ICE servers")
	}
	natErr := firstErr(c.NAT1To1IPs, checkIP)
	// In the order of the fields, so the first wrong one is reported.
	checks := []struct {
		bad bool
		err error
	}{
		{outside(c.FPS, 1, 60), fmt.Errorf("stream: FPS %d is out of range: use 1..60", c.FPS)},
		{outside(c.BitrateKbps, 100, 100000), fmt.Errorf("stream: BitrateKbps %d is out of range: use 100..100000 (kbit/s)", c.BitrateKbps)},
		{outside(c.MinBitrateKbps, 100, c.BitrateKbps), fmt.Errorf("stream: MinBitrateKbps %d is out of range: use 100..BitrateKbps (%d kbit/s)", c.MinBitrateKbps, c.BitrateKbps)},
		{outside(c.MaxBitrateKbps, c.BitrateKbps, 100000), fmt.Errorf("stream: MaxBitrateKbps %d is out of range: use BitrateKbps (%d)..100000 (kbit/s)", c.MaxBitrateKbps, c.BitrateKbps)},
		{!slices.Contains(presets, c.Preset), fmt.Errorf("stream: Preset %q is not known: use one of %s", c.Preset, strings.Join(presets, ", "))},
		{iceErr != nil, iceErr},
		{natErr != nil, natErr},
		{c.TURNTTL < time.Minute || c.TURNTTL > 7*24*time.Hour, fmt.Errorf("stream: TURNTTL %v is out of range: use 1m..168h", c.TURNTTL)},
		{outside(c.UDPPort, 0, 65535), fmt.Errorf("stream: UDPPort %d is out of range: use 1..65535, or 0 for ephemeral ports", c.UDPPort)},
		{c.MaxViewers < 1, fmt.Errorf("stream: MaxViewers %d must be at least 1", c.MaxViewers)},
		{policyErr != nil, fmt.Errorf("stream: Policy: %w", policyErr)},
		{!validVideoSize(c.VideoWidth, c.VideoHeight), fmt.Errorf("stream: video size %dx%d is not valid: give both VideoWidth and VideoHeight, or neither for the screen's size", c.VideoWidth, c.VideoHeight)},
		{c.KeyframeInterval < 0, fmt.Errorf("stream: KeyframeInterval %v must not be negative", c.KeyframeInterval)},
		{outside(c.QueueFrames, 1, 120), fmt.Errorf("stream: QueueFrames %d is out of range: use 1..120", c.QueueFrames)},
		{c.MaxInputBytes < 256, fmt.Errorf("stream: MaxInputBytes %d is too small: at least 256", c.MaxInputBytes)},
	}
	for _, ck := range checks {
		if ck.bad {
			return c, ck.err
		}
	}
	return c, nil
}

// orDefault is v, or def when v is zero.
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// outside tells whether v is outside lo..hi.
func outside(v, lo, hi int) bool { return v < lo || v > hi }

// validVideoSize accepts both sides given, or neither.
func validVideoSize(w, h int) bool { return w >= 0 && h >= 0 && (w == 0) == (h == 0) }

func checkIP(ip string) error {
	if net.ParseIP(ip) == nil {
		return fmt.Errorf("stream: NAT1To1IPs: %q is not an IP address", ip)
	}
	return nil
}

// firstErr is check's first error over items, or nil.
func firstErr(items []string, check func(string) error) error {
	for _, it := range items {
		if err := check(it); err != nil {
			return err
		}
	}
	return nil
}

// videoSize picks the video size for a screen: the configured size, or the
// screen's rounded down to even. It must fit in the screen, so every video
// pixel maps to a distinct screen pixel.
func (c Config) videoSize(sw, sh int) (int, int, error) {
	w, h := c.VideoWidth, c.VideoHeight
	if w == 0 {
		w, h = sw&^1, sh&^1
	}
	if w < 16 || h < 16 || w%2 != 0 || h%2 != 0 {
		return 0, 0, fmt.Errorf("stream: video size %dx%d is not valid: width and height must be even and at least 16", w, h)
	}
	if w > sw || h > sh {
		return 0, 0, fmt.Errorf("stream: video size %dx%d is larger than the %dx%d screen: it must fit in the screen", w, h, sw, sh)
	}
	return w, h, nil
}

// iceServer is one parsed ICEServers entry.
type iceServer struct {
	URL, Username, Credential string
	// Minted: a TURN server whose credentials are made for each viewer.
	Minted bool
}

// parseICEServer reads "stun:host:port" or "turn[s]:user:pass@host:port?..."
// and checks the scheme. A TURN server without credentials is taken only
// when they are minted (minted: a TURN secret is set).
func parseICEServer(s string, minted bool) (iceServer, error) {
	scheme, rest, ok := strings.Cut(s, ":")
	scheme = strings.ToLower(scheme)
	if !ok || rest == "" {
		return iceServer{}, fmt.Errorf("stream: ICE server %q is not a URL: use stun:host:port or turn:user:password@host:port", s)
	}
	switch scheme {
	case "stun", "stuns":
		return iceServer{URL: s}, nil
	case "turn", "turns":
	default:
		return iceServer{}, fmt.Errorf("stream: ICE server %q has scheme %q: use stun, stuns, turn or turns", s, scheme)
	}
	out := iceServer{URL: s}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		cred := rest[:at]
		out.URL = scheme + ":" + rest[at+1:]
		user, pass, _ := strings.Cut(cred, ":")
		var err error
		if out.Username, err = url.PathUnescape(user); err != nil {
			return iceServer{}, fmt.Errorf("stream: ICE server %q: user name: %w", s, err)
		}
		if out.Credential, err = url.PathUnescape(pass); err != nil {
			return iceServer{}, fmt.Errorf("stream: ICE server %q: password: %w", s, err)
		}
	}
	if out.Username == "" && !minted {
		return iceServer{}, fmt.Errorf("stream: TURN server %q has no credentials: use turn:user:password@host:port, or a TURN secret to mint them for each viewer", s)
	}
	out.Minted = out.Username == ""
	return out, nil
}

// mintsFor tells whether ICE server u is a TURN server that takes minted
// credentials (one given without user:password).
func mintsFor(u string) bool {
	is, err := parseICEServer(u, true)
	return err == nil && is.Minted
}
