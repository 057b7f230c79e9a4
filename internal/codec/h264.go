package codec

/*
#cgo pkg-config: x264
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <x264.h>

typedef struct {
	x264_t *enc;
	x264_param_t param;
} dk_enc;

static int dk_open(dk_enc *e, const char *preset, int w, int h, int fps, int kbps,
                   int threads, int slices, int level) {
	x264_param_t *p = &e->param;
	if (x264_param_default_preset(p, preset, "zerolatency") < 0) return -1;
	p->i_log_level = X264_LOG_NONE;
	p->i_csp = X264_CSP_I420;
	p->i_width = w;
	p->i_height = h;
	p->i_fps_num = fps;
	p->i_fps_den = 1;
	// Timestamps in microseconds pass through to the caller. b_vfr_input
	// stays off although frames of an unchanged screen are skipped: with it,
	// x264's rate control holds every frame back until the next one arrives to
	// learn its duration, one frame of latency we will not pay. Rate control
	// then budgets each frame as 1/fps, which only matters after an idle gap.
	p->i_timebase_num = 1;
	p->i_timebase_den = 1000000;
	p->b_vfr_input = 0;
	p->i_threads = threads;
	p->b_sliced_threads = threads > 1;
	p->i_slice_count = slices;
	p->i_keyint_max = X264_KEYINT_MAX_INFINITE;
	p->i_keyint_min = 1;
	p->i_scenecut_threshold = 0;
	p->i_bframe = 0;
	p->rc.i_lookahead = 0;
	p->i_sync_lookahead = 0;
	p->rc.b_mb_tree = 0;
	p->rc.i_rc_method = X264_RC_ABR;
	p->rc.i_bitrate = kbps;
	p->rc.i_vbv_max_bitrate = kbps;
	// About one and a half frames of buffer: bursts stay short on the wire.
	int vbv = kbps * 3 / (2 * fps);
	p->rc.i_vbv_buffer_size = vbv > 1 ? vbv : 1;
	p->b_repeat_headers = 1;
	p->b_annexb = 1;
	p->b_aud = 0;
	p->i_level_idc = level;
	if (x264_param_apply_profile(p, "baseline") < 0) return -2;
	e->enc = x264_encoder_open(p);
	if (!e->enc) return -3;
	return 0;
}

// dk_encode encodes one picture. The output NALs are contiguous in x264's
// memory, valid until the next call; the caller copies them out.
static int dk_encode(dk_enc *e, uint8_t *y, int sy, uint8_t *u, int su, uint8_t *v, int sv,
                     int64_t pts, int force_idr, uint8_t **out, int *keyframe) {
	x264_picture_t in, pic_out;
	x264_picture_init(&in);
	in.img.i_csp = X264_CSP_I420;
	in.img.i_plane = 3;
	in.img.plane[0] = y; in.img.i_stride[0] = sy;
	in.img.plane[1] = u; in.img.i_stride[1] = su;
	in.img.plane[2] = v; in.img.i_stride[2] = sv;
	in.i_pts = pts;
	in.i_type = force_idr ? X264_TYPE_IDR : X264_TYPE_AUTO;
	x264_nal_t *nals;
	int nnal = 0;
	int size = x264_encoder_encode(e->enc, &nals, &nnal, &in, &pic_out);
	if (size < 0) return size;
	*keyframe = pic_out.b_keyframe;
	*out = size > 0 ? nals[0].p_payload : NULL;
	return size;
}

static int dk_bitrate(dk_enc *e, int kbps, int fps) {
	e->param.rc.i_bitrate = kbps;
	e->param.rc.i_vbv_max_bitrate = kbps;
	int vbv = kbps * 3 / (2 * fps);
	e->param.rc.i_vbv_buffer_size = vbv > 1 ? vbv : 1;
	return x264_encoder_reconfig(e->enc, &e->param);
}

static void dk_close(dk_enc *e) {
	if (e->enc) x264_encoder_close(e->enc);
	e->enc = NULL;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"
)

// H264Options configure an encoder for interactive desktop video.
type H264Options struct {
	Width, Height int
	FPS           int    // nominal frame rate, default 30
	BitrateKbps   int    // default 4000
	Preset        string // x264 preset, default "ultrafast"
	Threads       int    // default 1
	Slices        int    // slices per frame, default 1; Chromium misbehaves above 4
}

// H264Encoder encodes I420 pictures to H.264 constrained baseline with no
// B-frames and no lookahead (one picture in, one access unit out), an
// infinite GOP and IDR frames on request. Safe for concurrent use.
type H264Encoder struct {
	mu     sync.Mutex
	c      *C.dk_enc
	opt    H264Options
	level  int
	forceK bool
}

// NewH264Encoder opens an encoder.
func NewH264Encoder(opt H264Options) (*H264Encoder, error) {
	if opt.FPS == 0 {
		opt.FPS = 30
	}
	if opt.BitrateKbps == 0 {
		opt.BitrateKbps = 4000
	}
	if opt.Preset == "" {
		opt.Preset = "ultrafast"
	}
	if opt.Threads <= 0 {
		opt.Threads = 1
	}
	if opt.Slices <= 0 {
		opt.Slices = 1
	}
	switch {
	case opt.Width < 16 || opt.Height < 16 || opt.Width > 4096 || opt.Height > 4096:
		return nil, fmt.Errorf("H.264 picture size %dx%d is out of range: width and height must be 16 to 4096", opt.Width, opt.Height)
	case opt.Width%2 != 0 || opt.Height%2 != 0:
		return nil, fmt.Errorf("H.264 picture size %dx%d must have even width and height (4:2:0 chroma)", opt.Width, opt.Height)
	case opt.FPS < 1 || opt.FPS > 120:
		return nil, fmt.Errorf("frame rate %d is out of range 1 to 120", opt.FPS)
	case opt.BitrateKbps < 50 || opt.BitrateKbps > 200000:
		return nil, fmt.Errorf("bitrate %d kbit/s is out of range 50 to 200000", opt.BitrateKbps)
	case opt.Slices > 4:
		return nil, fmt.Errorf("%d slices per frame: at most 4 (Chromium's decoder misbehaves with more)", opt.Slices)
	}
	level, err := Level(opt.Width, opt.Height, opt.FPS)
	if err != nil {
		return nil, err
	}
	e := &H264Encoder{c: (*C.dk_enc)(C.calloc(1, C.sizeof_dk_enc)), opt: opt, level: level}
	preset := C.CString(opt.Preset)
	defer C.free(unsafe.Pointer(preset))
	switch r := C.dk_open(e.c, preset, C.int(opt.Width), C.int(opt.Height), C.int(opt.FPS), C.int(opt.BitrateKbps),
		C.int(opt.Threads), C.int(opt.Slices), C.int(level)); r {
	case 0:
		return e, nil
	case -1:
		C.free(unsafe.Pointer(e.c))
		return nil, fmt.Errorf("unknown x264 preset %q (use ultrafast, superfast, veryfast, faster, fast or medium)", opt.Preset)
	default:
		C.free(unsafe.Pointer(e.c))
		return nil, fmt.Errorf("x264 refused the settings for %dx%d@%d %d kbit/s (code %d)", opt.Width, opt.Height, opt.FPS, opt.BitrateKbps, int(r))
	}
}

// levels are H.264's limits (Table A-1): max macroblocks per second and per
// frame, with level_idc.
var levels = [...]struct{ idc, mbps, fs int }{
	{30, 40500, 1620}, {31, 108000, 3600}, {32, 216000, 5120}, {40, 245760, 8192},
	{42, 522240, 8704}, {50, 589824, 22080}, {51, 983040, 36864}, {52, 2073600, 36864},
}

// Level is the lowest H.264 level_idc that allows w x h at fps. 1280x800 at
// 30 fps is 4000 macroblocks a frame, over level 3.1's 3600, so it needs 3.2;
// a decoder told 3.1 (profile-level-id 42e01f) may refuse it.
func Level(w, h, fps int) (int, error) {
	mbs := ((w + 15) / 16) * ((h + 15) / 16)
	for _, l := range levels {
		if mbs <= l.fs && mbs*fps <= l.mbps {
			return l.idc, nil
		}
	}
	return 0, fmt.Errorf("%dx%d at %d fps is beyond every H.264 level", w, h, fps)
}

// Level is the level_idc the stream is encoded at, for the SDP's profile-level-id.
func (e *H264Encoder) Level() int { return e.level }

// ProfileLevelID is the SDP profile-level-id: constrained baseline (42e0) and the level.
func (e *H264Encoder) ProfileLevelID() string { return fmt.Sprintf("42e0%02x", e.level) }

// ForceKeyframe makes the next picture an IDR with SPS and PPS.
func (e *H264Encoder) ForceKeyframe() {
	e.mu.Lock()
	e.forceK = true
	e.mu.Unlock()
}

// Encode compresses one picture taken at pts and returns its access unit in
// Annex-B form (start codes), which may be empty when x264 has nothing to say.
func (e *H264Encoder) Encode(p *I420, pts time.Duration) (annexB []byte, keyframe bool, err error) {
	if err := p.check(); err != nil {
		return nil, false, err
	}
	if p.Width != e.opt.Width || p.Height != e.opt.Height {
		return nil, false, fmt.Errorf("picture is %dx%d, the encoder %dx%d", p.Width, p.Height, e.opt.Width, e.opt.Height)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.c == nil || e.c.enc == nil {
		return nil, false, errors.New("encoder is closed")
	}
	force := 0
	if e.forceK {
		force, e.forceK = 1, false
	}
	var out *C.uint8_t
	var key C.int
	n := C.dk_encode(e.c,
		(*C.uint8_t)(unsafe.Pointer(&p.Y[0])), C.int(p.StrideY),
		(*C.uint8_t)(unsafe.Pointer(&p.U[0])), C.int(p.StrideU),
		(*C.uint8_t)(unsafe.Pointer(&p.V[0])), C.int(p.StrideV),
		C.int64_t(pts/time.Microsecond), C.int(force), &out, &key)
	if n < 0 {
		return nil, false, fmt.Errorf("x264 failed to encode a frame (code %d)", int(n))
	}
	if n == 0 {
		return nil, false, nil
	}
	return C.GoBytes(unsafe.Pointer(out), n), key != 0, nil
}

// SetBitrate changes the target bitrate on the fly.
func (e *H264Encoder) SetBitrate(kbps int) error {
	if kbps < 50 || kbps > 200000 {
		return fmt.Errorf("bitrate %d kbit/s is out of range 50 to 200000", kbps)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.c == nil {
		return errors.New("encoder is closed")
	}
	if r := C.dk_bitrate(e.c, C.int(kbps), C.int(e.opt.FPS)); r < 0 {
		return fmt.Errorf("x264 refused bitrate %d kbit/s (code %d)", kbps, int(r))
	}
	e.opt.BitrateKbps = kbps
	return nil
}

// Close frees the encoder. Closing twice is harmless.
func (e *H264Encoder) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.c == nil {
		return
	}
	C.dk_close(e.c)
	C.free(unsafe.Pointer(e.c))
	e.c = nil
}

// SplitNALs cuts an Annex-B byte stream at its start codes (3 or 4 bytes) and
// returns the NAL units without them.
func SplitNALs(b []byte) [][]byte {
	var nals [][]byte
	start := -1
	for i := 0; i+2 < len(b); {
		if b[i] == 0 && b[i+1] == 0 && b[i+2] == 1 {
			if start >= 0 {
				end := i
				if end > start && b[end-1] == 0 {
					end-- // the leading zero of a 4-byte start code
				}
				nals = append(nals, b[start:end])
			}
			i += 3
			start = i
			continue
		}
		i++
	}
	if start >= 0 && start < len(b) {
		nals = append(nals, b[start:])
	}
	return nals
}

// NALType is the nal_unit_type: 1 non-IDR slice, 5 IDR slice, 7 SPS, 8 PPS.
func NALType(nal []byte) int {
	if len(nal) == 0 {
		return -1
	}
	return int(nal[0] & 0x1f)
}
