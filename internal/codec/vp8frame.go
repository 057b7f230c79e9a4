package codec

import (
	"errors"
	"fmt"
)

// VP8Header is what the first bytes of a VP8 frame say (RFC 6386 9.1).
type VP8Header struct {
	Key           bool // a keyframe, decodable on its own
	Version       int  // 0 to 3
	Show          bool // the frame is meant to be displayed
	FirstPartSize int  // bytes of the first partition
	// Width and Height are given by keyframes only; 0 otherwise.
	Width, Height int
}

// ParseVP8Header reads a VP8 frame's tag and, for a keyframe, its start
// code and size. It checks the header, not the frame.
func ParseVP8Header(frame []byte) (VP8Header, error) {
	if len(frame) < 3 {
		return VP8Header{}, fmt.Errorf("VP8 frame of %d bytes is shorter than its 3-byte tag", len(frame))
	}
	tag := int(frame[0]) | int(frame[1])<<8 | int(frame[2])<<16
	h := VP8Header{Key: tag&1 == 0, Version: tag >> 1 & 7, Show: tag>>4&1 == 1, FirstPartSize: tag >> 5}
	if h.Version > 3 {
		return h, fmt.Errorf("VP8 frame has version %d; versions are 0 to 3", h.Version)
	}
	if !h.Key {
		return h, nil
	}
	if len(frame) < 10 {
		return h, fmt.Errorf("VP8 keyframe of %d bytes is shorter than its 10-byte header", len(frame))
	}
	if frame[3] != 0x9d || frame[4] != 0x01 || frame[5] != 0x2a {
		return h, errors.New("VP8 keyframe lacks the start code 9d 01 2a")
	}
	h.Width = (int(frame[6]) | int(frame[7])<<8) & 0x3fff
	h.Height = (int(frame[8]) | int(frame[9])<<8) & 0x3fff
	if h.FirstPartSize > len(frame)-10 {
		return h, fmt.Errorf("VP8 keyframe says its first partition is %d bytes, but only %d follow the header", h.FirstPartSize, len(frame)-10)
	}
	return h, nil
}
