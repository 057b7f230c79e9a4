package codec

/*
#cgo pkg-config: x264
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <x264.h>

typedef struct {
	x264_t *enc;
	x264_param_t param; // the settings to open with, then as x264 last reported them
	// x264's warnings and errors since Go last took them. x264 may log from
	// its slice threads, hence the lock.
	pthread_mutex_t mu;
	char log[1024];
	size_t loglen;
} dk_enc;

static void dk_log(void *priv, int level, const char *fmt, va_list ap) {
	dk_enc *e = priv;
	if (level > X264_LOG_WARNING) return;
	pthread_mutex_lock(&e->mu);
	size_t room = sizeof e->log - e->loglen;
	if (room > 1) {
		int n = vsnprintf(e->log + e->loglen, room, fmt, ap);
		if (n > 0) e->loglen += (size_t)n < room ? (size_t)n : room - 1;
	}
	pthread_mutex_unlock(&e->mu);
}

// dk_take_log copies the collected messages into buf (NUL-terminated) and
// forgets them.
static void dk_take_log(dk_enc *e, char *buf, size_t size) {
	pthread_mutex_lock(&e->mu);
	size_t n = e->loglen < size - 1 ? e->loglen : size - 1;
	for (size_t i = 0; i < n; i++) buf[i] = e->log[i];
	buf[n] = 0;
	e->loglen = 0;
	pthread_mutex_unlock(&e->mu);
}

static dk_enc *dk_new(void) {
	dk_enc *e = calloc(1, sizeof *e);
	if (e) pthread_mutex_init(&e->mu, NULL);
	return e;
}

static const char *dk_preset_name(int i) { return x264_preset_names[i]; }

static int dk_vbv_kbit(int kbps, int fps) {
	// One and a half frames of buffer: a big frame (an IDR, a window
	// opening) is spread over at most that much extra time on the wire
	// instead of queueing behind itself for seconds.
	int vbv = kbps * 3 / (2 * fps);
	return vbv > 1 ? vbv : 1;
}

// dk_open fills in the settings and opens the encoder. Returns 0, or -1 for
// an unknown preset, -2 if the baseline profile cannot be applied, -3 if
// x264 refuses to open (its log says why).
static int dk_open(dk_enc *e, const char *preset, int w, int h, int fps, int kbps,
                   int threads, int slices, int level) {
	x264_param_t *p = &e->param;
	if (x264_param_default_preset(p, preset, "zerolatency") < 0) return -1;
	p->pf_log = dk_log;
	p->p_log_private = e;
	p->i_log_level = X264_LOG_WARNING;
	p->i_csp = X264_CSP_I420;
	p->i_width = w;
	p->i_height = h;
	p->i_fps_num = fps;
	p->i_fps_den = 1;
	// Timestamps in microseconds pass through. b_vfr_input stays off (as
	// zerolatency leaves it) although frames of an unchanged screen are
	// skipped: with it x264 holds every picture until the next arrives, to
	// learn its duration (x264_encoder_maximum_delayed_frames goes from 0 to
	// 1), one frame of latency. Rate control then budgets
	// each frame as 1/fps, so a screen that changes rarely simply costs
	// less than the target bitrate.
	p->i_timebase_num = 1;
	p->i_timebase_den = 1000000;
	p->b_vfr_input = 0;
	// Slice threads split each picture between threads, so a frame comes
	// out sooner; frame threads would add a frame of delay per thread.
	p->i_threads = threads;
	p->b_sliced_threads = 1;
	p->i_slice_count = slices;
	// One GOP for ever: IDRs only when asked (a new viewer, a lost frame).
	p->i_keyint_max = X264_KEYINT_MAX_INFINITE;
	p->i_scenecut_threshold = 0;
	p->b_intra_refresh = 0;
	p->i_bframe = 0;
	p->rc.i_lookahead = 0;
	p->i_sync_lookahead = 0;
	p->rc.b_mb_tree = 0;
	p->rc.i_rc_method = X264_RC_ABR;
	p->rc.i_bitrate = kbps;
	p->rc.i_vbv_max_bitrate = kbps;
	p->rc.i_vbv_buffer_size = dk_vbv_kbit(kbps, fps);
	p->i_nal_hrd = X264_NAL_HRD_NONE;
	p->b_repeat_headers = 1;
	p->b_annexb = 1;
	p->b_aud = 0;
	p->i_level_idc = level;
	// What libyuv produced: BT.601 matrix, limited range, from an sRGB
	// screen (BT.709 primaries, sRGB transfer).
	p->vui.b_fullrange = 0;
	p->vui.i_colmatrix = 6;
	p->vui.i_colorprim = 1;
	p->vui.i_transfer = 13;
	if (x264_param_apply_profile(p, "baseline") < 0) return -2;
	e->enc = x264_encoder_open(p);
	if (!e->enc) return -3;
	x264_encoder_parameters(e->enc, p);
	return 0;
}

// dk_encode encodes one picture; x264 copies it in before returning, so the
// planes need to live only for the call. The output NALs are contiguous in
// x264's memory and valid until the next call: the caller copies them out.
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
	x264_nal_t *nals = NULL;
	int nnal = 0;
	*out = NULL;
	*keyframe = 0;
	int size = x264_encoder_encode(e->enc, &nals, &nnal, &in, &pic_out);
	if (size <= 0 || nnal <= 0) return size;
	*keyframe = pic_out.b_keyframe;
	*out = nals[0].p_payload;
	return size;
}

// dk_bitrate takes effect from the next picture: x264 holds reconfigured
// settings until then.
static int dk_bitrate(dk_enc *e, int kbps, int fps) {
	x264_param_t p;
	x264_encoder_parameters(e->enc, &p);
	p.rc.i_bitrate = kbps;
	p.rc.i_vbv_max_bitrate = kbps;
	p.rc.i_vbv_buffer_size = dk_vbv_kbit(kbps, fps);
	return x264_encoder_reconfig(e->enc, &p);
}

// dk_params reads the settings x264 is using now into e->param.
static void dk_params(dk_enc *e) { x264_encoder_parameters(e->enc, &e->param); }

static int dk_delayed_max(dk_enc *e) { return x264_encoder_maximum_delayed_frames(e->enc); }

static void dk_free(dk_enc *e) {
	if (e->enc) x264_encoder_close(e->enc);
	pthread_mutex_destroy(&e->mu);
	free(e);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// H264Options configure an encoder for interactive desktop video. Zero
// values take the defaults given.
type H264Options struct {
	Width, Height int    // even, 16 to 4096
	FPS           int    // nominal frame rate, 1 to 120; default 30
	BitrateKbps   int    // target and VBV maximum, 50 to 200000; default 4000
	Preset        string // x264 speed preset; default "ultrafast"
	// Threads encode slices of one picture in parallel (1 to 4; default 1).
	// More threads cut the time to a finished frame, not the CPU it takes.
	Threads int
	// Slices per picture, 1 to 4; default Threads. With more than one
	// thread x264 codes exactly one slice per thread, so Slices must then
	// equal Threads. Chromium misbehaves with more than 4.
	Slices int
	// Logger receives x264's warnings; nil means slog.Default().
	Logger *slog.Logger
}

// H264Params are the settings x264 ended up with, read back from it.
type H264Params struct {
	Level          int    // level_idc, 32 = 3.2
	ProfileLevelID string // for the SDP, e.g. "42e020"
	Threads        int
	Slices         int
	BFrames        int // always 0
	Lookahead      int // always 0
	MaxDelayed     int // pictures x264 may hold before output: 0, one in one out
	BitrateKbps    int
	VBVBufferKbit  int
	KeyintMax      int
	CABAC          bool // always false: constrained baseline has none
}

// H264Encoder encodes I420 pictures into H.264 constrained baseline for
// interactive use: no B-frames and no lookahead (one picture in, one access
// unit out), rate control held by a VBV of 1.5 frames, one infinite GOP with
// an IDR (SPS and PPS in front) whenever ForceKeyframe asks. Its methods may be
// called from any goroutine and are serialised by a lock, but pictures must
// come from one goroutine at a time to stay in order.
type H264Encoder struct {
	mu     sync.Mutex
	c      *C.dk_enc // nil once closed
	opt    H264Options
	level  int
	log    *slog.Logger
	forceK atomic.Bool
}

// NewH264Encoder opens an encoder. Sizes must be even (see pictureLimits).
func NewH264Encoder(opt H264Options) (*H264Encoder, error) {
	opt = opt.withDefaults()
	if err := opt.check(); err != nil {
		return nil, err
	}
	level, err := Level(opt.Width, opt.Height, opt.FPS)
	if err != nil {
		return nil, err
	}
	c := C.dk_new()
	if c == nil {
		return nil, errors.New("H.264 encoder: out of memory")
	}
	e := &H264Encoder{c: c, opt: opt, level: level, log: orDefault(opt.Logger, slog.Default())}
	if err := e.open(); err != nil {
		C.dk_free(c)
		return nil, err
	}
	if p := e.paramsLocked(); p.Slices > 4 || p.BFrames != 0 || p.MaxDelayed != 0 {
		e.Close()
		return nil, fmt.Errorf("x264 changed the settings beyond what live video allows: %+v", p)
	}
	return e, nil
}

func (o H264Options) withDefaults() H264Options {
	o.FPS = orDefault(o.FPS, 30)
	o.BitrateKbps = orDefault(o.BitrateKbps, 4000)
	o.Preset = orDefault(o.Preset, "ultrafast")
	o.Threads = orDefault(o.Threads, 1)
	o.Slices = orDefault(o.Slices, o.Threads)
	return o
}

// check refuses options x264 would refuse or that live video cannot use.
func (o H264Options) check() error {
	limits := append(pictureLimits("H.264", o.Width, o.Height, o.FPS, o.BitrateKbps),
		limit{o.Threads < 1 || o.Threads > 4, fmt.Sprintf("H.264 encoder threads %d is out of range 1 to 4", o.Threads)},
		limit{o.Slices < 1 || o.Slices > 4, fmt.Sprintf("H.264 slices per frame %d is out of range 1 to 4 (Chromium's decoder misbehaves with more)", o.Slices)},
		limit{o.Threads > 1 && o.Slices != o.Threads, fmt.Sprintf("H.264 slices per frame %d with %d threads: x264 codes exactly one slice per thread, so set Slices to %d or use 1 thread", o.Slices, o.Threads, o.Threads)},
		limit{!knownPreset(o.Preset), fmt.Sprintf("unknown x264 preset %q (use one of %s; ultrafast or superfast for live video)", o.Preset, strings.Join(presets(), ", "))},
	)
	return firstFailure(limits)
}

// open hands the settings to x264; its warnings go to the log, its reason
// for refusing into the error.
func (e *H264Encoder) open() error {
	opt := e.opt
	preset := C.CString(opt.Preset)
	defer C.free(unsafe.Pointer(preset))
	r := C.dk_open(e.c, preset, C.int(opt.Width), C.int(opt.Height), C.int(opt.FPS), C.int(opt.BitrateKbps),
		C.int(opt.Threads), C.int(opt.Slices), C.int(e.level))
	msg := e.takeLog()
	if r != 0 {
		return fmt.Errorf("x264 refused %dx%d at %d fps, %d kbit/s, preset %s: %s", opt.Width, opt.Height, opt.FPS, opt.BitrateKbps, opt.Preset, orDefault(msg, fmt.Sprintf("code %d", int(r))))
	}
	if msg != "" {
		e.log.Warn("x264", "message", msg)
	}
	return nil
}

func presets() []string {
	var names []string
	for i := 0; ; i++ {
		p := C.dk_preset_name(C.int(i))
		if p == nil {
			return names
		}
		names = append(names, C.GoString(p))
	}
}

func knownPreset(name string) bool {
	for _, p := range presets() {
		if p == name {
			return true
		}
	}
	return false
}

// takeLog returns x264's messages since the last call, on one line.
func (e *H264Encoder) takeLog() string {
	var buf [1024]C.char
	C.dk_take_log(e.c, &buf[0], C.size_t(len(buf)))
	return strings.Join(strings.Fields(strings.ReplaceAll(C.GoString(&buf[0]), "\n", "; ")), " ")
}

// Level is the level_idc the stream is encoded at (see the function Level).
func (e *H264Encoder) Level() int { return e.level }

// ProfileLevelID is the SDP profile-level-id: constrained baseline, written
// the way browsers write it (42e0: constraint_set1 and set2 set; x264's SPS
// says 42c0, set1 only, the same profile), and the level.
func (e *H264Encoder) ProfileLevelID() string { return fmt.Sprintf("42e0%02x", e.level) }

// Params reports the settings x264 is using. After Close it reports nothing.
func (e *H264Encoder) Params() H264Params {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.c == nil {
		return H264Params{}
	}
	return e.paramsLocked()
}

func (e *H264Encoder) paramsLocked() H264Params {
	C.dk_params(e.c)
	p := &e.c.param
	return H264Params{
		Level:          int(p.i_level_idc),
		ProfileLevelID: fmt.Sprintf("42e0%02x", int(p.i_level_idc)),
		Threads:        int(p.i_threads),
		Slices:         int(p.i_slice_count),
		BFrames:        int(p.i_bframe),
		Lookahead:      int(p.rc.i_lookahead),
		MaxDelayed:     int(C.dk_delayed_max(e.c)),
		BitrateKbps:    int(p.rc.i_bitrate),
		VBVBufferKbit:  int(p.rc.i_vbv_buffer_size),
		KeyintMax:      int(p.i_keyint_max),
		CABAC:          p.b_cabac != 0,
	}
}

// ForceKeyframe makes the next picture an IDR with SPS and PPS in front. It
// does not wait for an Encode in progress.
func (e *H264Encoder) ForceKeyframe() { e.forceK.Store(true) }

// Encode compresses one picture taken at pts and returns its access unit in
// Annex-B form (start codes), a copy the caller owns; keyframe says it is an
// IDR. The unit may be empty when x264 has nothing to emit (not expected
// with these settings, but callers should skip it rather than fail). pts is
// passed through to x264 at microsecond resolution; pass the real capture
// time so skipped frames leave a gap.
func (e *H264Encoder) Encode(frame *I420, pts time.Duration) (nals []byte, keyframe bool, err error) {
	if err := checkFrame("H.264", frame, e.opt.Width, e.opt.Height); err != nil {
		return nil, false, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.c == nil {
		return nil, false, errors.New("H.264 encode: the encoder is closed")
	}
	force := 0
	if e.forceK.Swap(false) {
		force = 1
	}
	var out *C.uint8_t
	var key C.int
	n := C.dk_encode(e.c, ptr(frame.Y), C.int(frame.StrideY), ptr(frame.U), C.int(frame.StrideU),
		ptr(frame.V), C.int(frame.StrideV), C.int64_t(pts/time.Microsecond), C.int(force), &out, &key)
	if msg := e.takeLog(); msg != "" {
		e.log.Warn("x264", "message", msg)
	}
	if n < 0 {
		if force == 1 {
			e.forceK.Store(true) // the request still stands
		}
		return nil, false, fmt.Errorf("H.264 encode: x264 failed on the frame at %v (code %d)", pts, int(n))
	}
	if n == 0 || out == nil {
		return nil, false, nil
	}
	return C.GoBytes(unsafe.Pointer(out), n), key != 0, nil
}

// SetBitrate changes the target bitrate (and with it the VBV) from the next
// picture on; Params shows the change once that picture is encoded.
func (e *H264Encoder) SetBitrate(kbps int) error {
	if err := checkBitrate("H.264", kbps); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.c == nil {
		return errors.New("H.264 set bitrate: the encoder is closed")
	}
	r := C.dk_bitrate(e.c, C.int(kbps), C.int(e.opt.FPS))
	if msg := e.takeLog(); msg != "" {
		e.log.Warn("x264", "message", msg)
	}
	if r < 0 {
		return fmt.Errorf("x264 refused bitrate %d kbit/s (code %d)", kbps, int(r))
	}
	e.opt.BitrateKbps = kbps
	return nil
}

// Close frees the encoder and its threads. Closing twice is harmless; any
// later Encode returns an error.
func (e *H264Encoder) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.c == nil {
		return
	}
	C.dk_free(e.c)
	e.c = nil
}
