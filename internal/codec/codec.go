package codec

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/pion/rtp"
	"github.com/pion/rtp/codecs"
)

// Encoder compresses I420 pictures into a codec's frames for interactive
// video: one picture in, one frame out, keyframes only when asked for. Every
// encoder here is safe to call from several goroutines, but pictures must
// come from one at a time to stay in order.
type Encoder interface {
	// Encode compresses one picture taken at pts (pass the real capture
	// time, so skipped pictures leave a gap) and returns the frame, a copy
	// the caller owns, in the codec's own form (H.264: an Annex-B access
	// unit; VP8: one frame). keyframe says the frame decodes on its own. An
	// empty frame means the encoder emitted nothing; skip it.
	Encode(frame *I420, pts time.Duration) (data []byte, keyframe bool, err error)
	// ForceKeyframe makes the next picture a keyframe.
	ForceKeyframe()
	// SetBitrate changes the target bitrate from the next picture on.
	SetBitrate(kbps int) error
	// Close frees the encoder; closing twice is harmless and later
	// Encode calls fail.
	Close()
}

// Options configure any Encoder; zero values take each codec's defaults.
type Options struct {
	Width, Height int          // even, 16 to 4096
	FPS           int          // nominal frame rate, 1 to 120; default 30
	BitrateKbps   int          // target, 50 to 200000; default 4000
	Preset        string       // x264's speed preset; codecs without presets ignore it
	Logger        *slog.Logger // for encoders that log (x264); nil is slog.Default()
}

// Codec describes one video codec the appliance can send: what WebRTC
// negotiates it by, how its frames become RTP payloads, and how to make its
// encoder. Values come from H264 and VP8; the fields are read, not changed.
type Codec struct {
	Name      string // short name the page and logs use: "h264", "vp8"
	MimeType  string // as in SDP and pion's RTPCodecCapability: "video/H264"
	ClockRate uint32 // RTP clock, 90 kHz for video
	// FMTP gives the SDP format parameters for video of w x h at fps;
	// "" when the codec has none.
	FMTP func(w, h, fps int) (string, error)
	// NewPayloader makes one viewer's packetiser: each keeps its own state
	// (VP8's picture ID), so viewers do not share one.
	NewPayloader func() rtp.Payloader
	// NewEncoder opens an encoder.
	NewEncoder func(Options) (Encoder, error)
}

// H264 is H.264 constrained baseline with packetization mode 1, through
// x264: the codec every browser this appliance is used with decodes in
// hardware or with OpenH264, and the one recordings are written in.
func H264() Codec {
	return Codec{
		Name: "h264", MimeType: "video/H264", ClockRate: 90000,
		FMTP: h264FMTP,
		// H.264 packets carry no per-viewer state, but one payloader per
		// viewer keeps the rule simple.
		NewPayloader: func() rtp.Payloader { return &codecs.H264Payloader{} },
		NewEncoder: func(o Options) (Encoder, error) {
			return NewH264Encoder(H264Options{Width: o.Width, Height: o.Height, FPS: o.FPS, BitrateKbps: o.BitrateKbps, Preset: o.Preset, Logger: o.Logger})
		},
	}
}

// VP8 is VP8 through libvpx, for browsers without H.264 (Chromium builds
// without proprietary codecs, some Linux distributions' browsers).
func VP8() Codec {
	return Codec{
		Name: "vp8", MimeType: "video/VP8", ClockRate: 90000,
		FMTP: func(int, int, int) (string, error) { return "", nil },
		// The picture ID lets the browser tell a lost frame from a late one
		// and ask for a keyframe only when it must.
		NewPayloader: func() rtp.Payloader { return &codecs.VP8Payloader{EnablePictureID: true} },
		NewEncoder: func(o Options) (Encoder, error) {
			return NewVP8Encoder(VP8Options{Width: o.Width, Height: o.Height, FPS: o.FPS, BitrateKbps: o.BitrateKbps})
		},
	}
}

// Codecs are the codecs a stream offers, most preferred first: H.264 when
// the browser takes it, VP8 otherwise.
func Codecs() []Codec { return []Codec{H264(), VP8()} }

// Lookup finds a codec by Name or MimeType, case-insensitively.
func Lookup(name string) (Codec, bool) {
	for _, c := range Codecs() {
		if strings.EqualFold(name, c.Name) || strings.EqualFold(name, c.MimeType) {
			return c, true
		}
	}
	return Codec{}, false
}

// h264FMTP announces constrained baseline, packetization mode 1, at the
// level the encoder uses for the video size and rate (1280x800 at 30 fps
// needs 3.2, 42e020). pion matches H.264 by profile and packetization mode,
// not level, and answers with the browser's own parameters; browsers decode
// the level the SPS signals.
func h264FMTP(w, h, fps int) (string, error) {
	level, err := Level(w, h, fps)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e0%02x", level), nil
}

// limit is one range check on an option.
type limit struct {
	bad bool
	msg string
}

// firstFailure returns the message of the first limit broken, or nil.
func firstFailure(limits []limit) error {
	for _, l := range limits {
		if l.bad {
			return fmt.Errorf("%s", l.msg)
		}
	}
	return nil
}

// pictureLimits are the checks every encoder makes on size, rate and
// bitrate, worded with the codec's name. Sizes must be even: 4:2:0 has one
// chroma sample per 2x2 pixels, and the encoders will not guess whether to
// crop or pad, so neither does this; the caller picks its video size.
func pictureLimits(name string, w, h, fps, kbps int) []limit {
	return []limit{
		{w < 16 || h < 16 || w > 4096 || h > 4096, fmt.Sprintf("%s picture size %dx%d is out of range: width and height must be 16 to 4096", name, w, h)},
		{w%2 != 0 || h%2 != 0, fmt.Sprintf("%s picture size %dx%d must have even width and height (4:2:0 chroma); round the video size down", name, w, h)},
		{fps < 1 || fps > 120, fmt.Sprintf("%s frame rate %d is out of range 1 to 120", name, fps)},
		{kbps < 50 || kbps > 200000, fmt.Sprintf("%s bitrate %d kbit/s is out of range 50 to 200000", name, kbps)},
	}
}

// orDefault is v, or def when v is zero.
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// checkFrame refuses a picture the encoder was not opened for.
func checkFrame(name string, frame *I420, w, h int) error {
	if err := frame.check(); err != nil {
		return fmt.Errorf("%s encode: %w", name, err)
	}
	if frame.Width != w || frame.Height != h {
		return fmt.Errorf("%s encode: picture is %dx%d but the encoder was opened for %dx%d", name, frame.Width, frame.Height, w, h)
	}
	return nil
}

// checkBitrate is the range SetBitrate accepts.
func checkBitrate(name string, kbps int) error {
	if kbps < 50 || kbps > 200000 {
		return fmt.Errorf("%s bitrate %d kbit/s is out of range 50 to 200000", name, kbps)
	}
	return nil
}
