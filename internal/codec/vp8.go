package codec

/*
#cgo pkg-config: vpx
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <vpx/vpx_encoder.h>
#include <vpx/vp8cx.h>

typedef struct {
	vpx_codec_ctx_t ctx;
	vpx_codec_enc_cfg_t cfg;
	int open;
} dk_vpx;

static dk_vpx *dk_vpx_new(void) { return calloc(1, sizeof(dk_vpx)); }

// dk_vpx_open sets libvpx up for live desktop video and opens it. Returns 0,
// or libvpx's error code (vpx_codec_err_t) from the step that failed.
static int dk_vpx_open(dk_vpx *e, int w, int h, int fps, int kbps, int threads, int cpu) {
	vpx_codec_iface_t *iface = vpx_codec_vp8_cx();
	vpx_codec_err_t r = vpx_codec_enc_config_default(iface, &e->cfg, 0);
	if (r) return r;
	vpx_codec_enc_cfg_t *c = &e->cfg;
	c->g_w = w;
	c->g_h = h;
	// One tick per picture: rate control budgets each picture as 1/fps
	// however long the screen stood still before it, as with x264, so a
	// screen that changes rarely costs less than the target rather than
	// spending a pause's worth of bits on the next picture.
	c->g_timebase.num = 1;
	c->g_timebase.den = fps;
	c->g_threads = threads;
	c->g_pass = VPX_RC_ONE_PASS;
	c->g_lag_in_frames = 0;              // one picture in, one frame out
	c->g_error_resilient = VPX_ERROR_RESILIENT_DEFAULT; // a lost frame spoils less
	c->rc_end_usage = VPX_CBR;
	c->rc_target_bitrate = kbps;
	c->rc_dropframe_thresh = 0;          // every picture gives a frame
	c->rc_resize_allowed = 0;
	c->rc_min_quantizer = 2;
	c->rc_max_quantizer = 56;
	c->rc_undershoot_pct = 100;
	c->rc_overshoot_pct = 15;
	// A short buffer, in ms, as WebRTC's own VP8 sender uses: big frames are
	// spread over little time instead of queueing behind themselves.
	c->rc_buf_initial_sz = 500;
	c->rc_buf_optimal_sz = 600;
	c->rc_buf_sz = 1000;
	c->kf_mode = VPX_KF_DISABLED;        // keyframes only when asked (a new viewer, a loss)
	r = vpx_codec_enc_init(&e->ctx, iface, c, 0);
	if (r) return r;
	e->open = 1;
	// cpu-used from 4 up trades quality for speed in real-time mode; the
	// static threshold skips blocks that did not change, most of a desktop.
	if ((r = vpx_codec_control(&e->ctx, VP8E_SET_CPUUSED, cpu))) return r;
	if ((r = vpx_codec_control(&e->ctx, VP8E_SET_STATIC_THRESHOLD, 1))) return r;
	if ((r = vpx_codec_control(&e->ctx, VP8E_SET_NOISE_SENSITIVITY, 0))) return r;
	if ((r = vpx_codec_control(&e->ctx, VP8E_SET_SCREEN_CONTENT_MODE, 1))) return r;
	// A keyframe may take at most 3 frames' worth of bits at once.
	if ((r = vpx_codec_control(&e->ctx, VP8E_SET_MAX_INTRA_BITRATE_PCT, 300))) return r;
	return 0;
}

// dk_vpx_encode encodes one picture; libvpx copies it before returning, so
// the planes need to live only for the call (the image wrapping them is on
// this stack). The frame is in libvpx's memory until the next call: the
// caller copies it out. Returns the frame's size, 0 for no frame, or minus
// libvpx's error code.
static int dk_vpx_encode(dk_vpx *e, uint8_t *y, int sy, uint8_t *u, int su, uint8_t *v, int sv,
                         int64_t pts, int force_kf, uint8_t **out, int *keyframe) {
	vpx_image_t img;
	memset(&img, 0, sizeof img);
	if (!vpx_img_wrap(&img, VPX_IMG_FMT_I420, e->cfg.g_w, e->cfg.g_h, 1, y)) return -VPX_CODEC_INVALID_PARAM;
	img.planes[VPX_PLANE_Y] = y; img.stride[VPX_PLANE_Y] = sy;
	img.planes[VPX_PLANE_U] = u; img.stride[VPX_PLANE_U] = su;
	img.planes[VPX_PLANE_V] = v; img.stride[VPX_PLANE_V] = sv;
	*out = NULL;
	*keyframe = 0;
	vpx_codec_err_t r = vpx_codec_encode(&e->ctx, &img, pts, 1, force_kf ? VPX_EFLAG_FORCE_KF : 0, VPX_DL_REALTIME);
	if (r) return -(int)r;
	vpx_codec_iter_t it = NULL;
	const vpx_codec_cx_pkt_t *pkt;
	while ((pkt = vpx_codec_get_cx_data(&e->ctx, &it)) != NULL) {
		if (pkt->kind != VPX_CODEC_CX_FRAME_PKT) continue;
		*out = pkt->data.frame.buf;
		*keyframe = (pkt->data.frame.flags & VPX_FRAME_IS_KEY) != 0;
		return (int)pkt->data.frame.sz;
	}
	return 0;
}

static int dk_vpx_bitrate(dk_vpx *e, int kbps) {
	e->cfg.rc_target_bitrate = kbps;
	return vpx_codec_enc_config_set(&e->ctx, &e->cfg);
}

static const char *dk_vpx_error(dk_vpx *e) {
	const char *d = e->open ? vpx_codec_error_detail(&e->ctx) : NULL;
	return d ? d : "";
}

static void dk_vpx_free(dk_vpx *e) {
	if (e->open) vpx_codec_destroy(&e->ctx);
	free(e);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// VP8Options configure a VP8 encoder; zero values take the defaults given.
type VP8Options struct {
	Width, Height int // even, 16 to 4096
	FPS           int // nominal frame rate, 1 to 120; default 30
	BitrateKbps   int // target, 50 to 200000; default 4000
	// CPUUsed is libvpx's speed in real-time mode, 4 to 16; default 10.
	// Higher is faster and blurrier.
	CPUUsed int
	// Threads encode parts of a picture in parallel, 1 to 4; default 1.
	Threads int
}

// VP8Encoder encodes I420 pictures into VP8 for interactive use through
// libvpx in real-time mode: no lag (one picture in, one frame out),
// constant bitrate with no dropped frames, error resilient, and keyframes
// only when ForceKeyframe asks. Its methods may be called from any
// goroutine and are serialised by a lock.
type VP8Encoder struct {
	mu     sync.Mutex
	c      *C.dk_vpx // nil once closed
	opt    VP8Options
	n      int64 // pictures encoded: libvpx's clock (see dk_vpx_open)
	forceK atomic.Bool
}

// NewVP8Encoder opens an encoder.
func NewVP8Encoder(opt VP8Options) (*VP8Encoder, error) {
	opt = opt.withDefaults()
	if err := opt.check(); err != nil {
		return nil, err
	}
	c := C.dk_vpx_new()
	if c == nil {
		return nil, errors.New("VP8 encoder: out of memory")
	}
	r := C.dk_vpx_open(c, C.int(opt.Width), C.int(opt.Height), C.int(opt.FPS), C.int(opt.BitrateKbps), C.int(opt.Threads), C.int(opt.CPUUsed))
	if r != 0 {
		err := vpxError(c, int(r))
		C.dk_vpx_free(c)
		return nil, fmt.Errorf("libvpx refused VP8 %dx%d at %d fps, %d kbit/s: %w", opt.Width, opt.Height, opt.FPS, opt.BitrateKbps, err)
	}
	return &VP8Encoder{c: c, opt: opt}, nil
}

func (o VP8Options) withDefaults() VP8Options {
	o.FPS = orDefault(o.FPS, 30)
	o.BitrateKbps = orDefault(o.BitrateKbps, 4000)
	o.CPUUsed = orDefault(o.CPUUsed, 10)
	o.Threads = orDefault(o.Threads, 1)
	return o
}

func (o VP8Options) check() error {
	return firstFailure(append(pictureLimits("VP8", o.Width, o.Height, o.FPS, o.BitrateKbps),
		limit{o.CPUUsed < 4 || o.CPUUsed > 16, fmt.Sprintf("VP8 cpu-used %d is out of range 4 to 16 (real-time speeds)", o.CPUUsed)},
		limit{o.Threads < 1 || o.Threads > 4, fmt.Sprintf("VP8 encoder threads %d is out of range 1 to 4", o.Threads)},
	))
}

// vpxError words a libvpx error code with the encoder's detail, if any.
func vpxError(c *C.dk_vpx, code int) error {
	msg := C.GoString(C.vpx_codec_err_to_string(C.vpx_codec_err_t(code)))
	if d := C.GoString(C.dk_vpx_error(c)); d != "" {
		msg += ": " + d
	}
	return errors.New(msg)
}

// ForceKeyframe makes the next picture a keyframe. It does not wait for an
// Encode in progress.
func (e *VP8Encoder) ForceKeyframe() { e.forceK.Store(true) }

// Encode compresses one picture and returns the VP8 frame, a copy the
// caller owns. pts is not needed by libvpx (see dk_vpx_open) and only
// appears in errors.
func (e *VP8Encoder) Encode(frame *I420, pts time.Duration) (data []byte, keyframe bool, err error) {
	if err := checkFrame("VP8", frame, e.opt.Width, e.opt.Height); err != nil {
		return nil, false, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.c == nil {
		return nil, false, errors.New("VP8 encode: the encoder is closed")
	}
	force := 0
	if e.forceK.Swap(false) {
		force = 1
	}
	var out *C.uint8_t
	var key C.int
	n := C.dk_vpx_encode(e.c, ptr(frame.Y), C.int(frame.StrideY), ptr(frame.U), C.int(frame.StrideU),
		ptr(frame.V), C.int(frame.StrideV), C.int64_t(e.n), C.int(force), &out, &key)
	if n < 0 {
		if force == 1 {
			e.forceK.Store(true) // the request still stands
		}
		return nil, false, fmt.Errorf("VP8 encode: libvpx failed on the picture at %v: %w", pts, vpxError(e.c, -int(n)))
	}
	e.n++
	if n == 0 || out == nil {
		return nil, false, nil
	}
	return C.GoBytes(unsafe.Pointer(out), n), key != 0, nil
}

// SetBitrate changes the target bitrate from the next picture on.
func (e *VP8Encoder) SetBitrate(kbps int) error {
	if err := checkBitrate("VP8", kbps); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.c == nil {
		return errors.New("VP8 set bitrate: the encoder is closed")
	}
	if r := C.dk_vpx_bitrate(e.c, C.int(kbps)); r != 0 {
		return fmt.Errorf("libvpx refused bitrate %d kbit/s: %w", kbps, vpxError(e.c, int(r)))
	}
	e.opt.BitrateKbps = kbps
	return nil
}

// Close frees the encoder. Closing twice is harmless; any later Encode
// returns an error.
func (e *VP8Encoder) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.c == nil {
		return
	}
	C.dk_vpx_free(e.c)
	e.c = nil
}
