package codec

import (
	"bytes"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// desktop paints frame i of a synthetic desktop as BGRX: a teal background,
// a title bar with a gradient, a static window of "text" and a second text
// window that moves 8 px right and 3 px down a frame, like a window being
// dragged. Text is what a desktop stream must keep legible.
func desktop(w, h, i int) []byte {
	pix := make([]byte, w*h*4)
	set := func(x, y int, r, g, b byte) {
		p := pix[(y*w+x)*4:]
		p[0], p[1], p[2], p[3] = b, g, r, 0
	}
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			set(x, y, 0, 128, 128)
		}
	}
	window := func(x0, y0, ww, wh int) {
		for y := max(y0, 0); y < min(y0+wh, h); y++ {
			for x := max(x0, 0); x < min(x0+ww, w); x++ {
				lx, ly := x-x0, y-y0
				switch {
				case ly < 20: // title bar
					set(x, y, byte(60+lx*100/ww), byte(80+lx*80/ww), 200)
				case glyph(lx, ly-20):
					set(x, y, 20, 20, 20)
				default:
					set(x, y, 250, 250, 245)
				}
			}
		}
	}
	window(w/10, h/10, w/3, h/2)
	ww, wh := w/3, h/3
	window(w/3+(i*8)%max(w-w/3-ww, 1), h/8+(i*3)%max(h-h/8-wh, 1), ww, wh)
	return pix
}

// glyph says whether pixel (x, y) of a text area is ink: 8x14 cells on
// 18-pixel lines, each cell a pseudo-random 4x6 bitmap of 2-pixel strokes.
func glyph(x, y int) bool {
	cx, cy, gx, gy := x/8, y/18, x%8, y%18
	if gx >= 6 || gy >= 12 || cx%11 == 10 { // gaps between letters, lines and words
		return false
	}
	hsh := uint32(cx*73856093) ^ uint32(cy*19349663) ^ uint32((gx/2)*83492791) ^ uint32((gy/2)*2654435761)
	return (hsh>>11)&3 == 0
}

// bitReader reads an RBSP (emulation prevention bytes removed).
type bitReader struct {
	b   []byte
	pos int
}

func newBitReader(nal []byte) *bitReader {
	var rbsp []byte
	zeros := 0
	for _, c := range nal[1:] { // skip the NAL header
		if zeros >= 2 && c == 3 {
			zeros = 0
			continue
		}
		if c == 0 {
			zeros++
		} else {
			zeros = 0
		}
		rbsp = append(rbsp, c)
	}
	return &bitReader{b: rbsp}
}

func (r *bitReader) u(n int) int {
	v := 0
	for ; n > 0; n-- {
		bit := 0
		if r.pos/8 < len(r.b) {
			bit = int(r.b[r.pos/8]>>(7-r.pos%8)) & 1
		}
		r.pos++
		v = v<<1 | bit
	}
	return v
}

func (r *bitReader) ue() int {
	n := 0
	for r.u(1) == 0 && n < 32 {
		n++
	}
	return (1<<n - 1) + r.u(n)
}

func (r *bitReader) se() int {
	v := r.ue()
	if v%2 == 1 {
		return (v + 1) / 2
	}
	return -v / 2
}

type spsInfo struct {
	profile, constraints, level int
	pocType, refFrames          int
	width, height               int
	vui, colourDesc             bool
	fullRange, matrix           int
}

// parseSPS reads what the tests check from a baseline-profile SPS (H.264
// 7.3.2.1.1 and E.1.1).
func parseSPS(nal []byte) spsInfo {
	r := newBitReader(nal)
	s := spsInfo{profile: r.u(8), constraints: r.u(8), level: r.u(8)}
	r.ue() // seq_parameter_set_id
	r.ue() // log2_max_frame_num_minus4
	s.pocType = r.ue()
	switch s.pocType {
	case 0:
		r.ue()
	case 1:
		r.u(1)
		r.se()
		r.se()
		for n := r.ue(); n > 0; n-- {
			r.se()
		}
	}
	s.refFrames = r.ue()
	r.u(1) // gaps_in_frame_num_value_allowed_flag
	mbw, mbh := r.ue()+1, r.ue()+1
	frameMBsOnly := r.u(1)
	if frameMBsOnly == 0 {
		r.u(1)
	}
	r.u(1) // direct_8x8_inference_flag
	var cl, cr, ct, cb int
	if r.u(1) == 1 {
		cl, cr, ct, cb = r.ue(), r.ue(), r.ue(), r.ue()
	}
	s.width = mbw*16 - 2*(cl+cr)
	s.height = (2-frameMBsOnly)*(mbh*16) - 2*(2-frameMBsOnly)*(ct+cb)
	s.vui = r.u(1) == 1
	if s.vui {
		if r.u(1) == 1 && r.u(8) == 255 { // aspect_ratio_info
			r.u(32)
		}
		if r.u(1) == 1 { // overscan_info
			r.u(1)
		}
		if r.u(1) == 1 { // video_signal_type
			r.u(3)
			s.fullRange = r.u(1)
			if s.colourDesc = r.u(1) == 1; s.colourDesc {
				r.u(8)
				r.u(8)
				s.matrix = r.u(8)
			}
		}
	}
	return s
}

// sliceHeader reads first_mb_in_slice and slice_type (0/5 P, 1/6 B, 2/7 I).
func sliceHeader(nal []byte) (firstMB, sliceType int) {
	r := newBitReader(nal)
	return r.ue(), r.ue() % 5
}

func requireTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s (Debian package ffmpeg) is needed to decode the stream with an independent decoder; run scripts/install-deps.sh test: %v", name, err)
	}
	return p
}

func TestEncoderOptions(t *testing.T) {
	tests := []struct {
		name string
		opt  H264Options
		want string
	}{
		{"odd width", H264Options{Width: 1281, Height: 800}, "even"},
		{"odd height", H264Options{Width: 1280, Height: 799}, "even"},
		{"tiny", H264Options{Width: 8, Height: 8}, "out of range"},
		{"huge", H264Options{Width: 8192, Height: 800}, "out of range"},
		{"too many slices", H264Options{Width: 640, Height: 480, Slices: 8}, "1 to 4"},
		{"slices differ from threads", H264Options{Width: 640, Height: 480, Threads: 2, Slices: 4}, "one slice per thread"},
		{"too many threads", H264Options{Width: 640, Height: 480, Threads: 16}, "threads 16"},
		{"unknown preset", H264Options{Width: 640, Height: 480, Preset: "ludicrous"}, "ultrafast, superfast"},
		{"frame rate", H264Options{Width: 640, Height: 480, FPS: 500}, "frame rate 500"},
		{"negative frame rate", H264Options{Width: 640, Height: 480, FPS: -1}, "frame rate -1"},
		{"bitrate", H264Options{Width: 640, Height: 480, BitrateKbps: 10}, "bitrate 10"},
		{"no level allows it", H264Options{Width: 4096, Height: 4096, FPS: 120}, "beyond every H.264 level"},
	}
	for _, tc := range tests {
		e, err := NewH264Encoder(tc.opt)
		if err == nil {
			e.Close()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to mention %q", tc.name, err, tc.want)
		}
	}
}

func TestLevel(t *testing.T) {
	tests := []struct {
		w, h, fps int
		want      int
		id        string
	}{
		{640, 480, 30, 30, "42e01e"},
		{1280, 720, 30, 31, "42e01f"},
		{1280, 800, 30, 32, "42e020"}, // 4000 MBs a frame: over 3.1's 3600
		{1280, 800, 15, 32, "42e020"}, // a lower rate does not help: frame size
		{1366, 768, 30, 32, "42e020"},
		{1920, 1080, 30, 40, "42e028"},
		{1920, 1080, 60, 42, "42e02a"},
		{3840, 2160, 30, 51, "42e033"},
		{4096, 16, 30, 40, "42e028"}, // 256 MBs wide: too wide for 3.x (sqrt(8*5120) = 202)
	}
	for _, tc := range tests {
		got, err := Level(tc.w, tc.h, tc.fps)
		if err != nil || got != tc.want {
			t.Errorf("Level(%d,%d,%d) = %d, %v; want %d", tc.w, tc.h, tc.fps, got, err, tc.want)
			continue
		}
		e, err := NewH264Encoder(H264Options{Width: tc.w, Height: tc.h, FPS: tc.fps})
		if err != nil {
			t.Errorf("%dx%d@%d: %v", tc.w, tc.h, tc.fps, err)
			continue
		}
		if e.ProfileLevelID() != tc.id || e.Params().Level != tc.want || e.Level() != tc.want {
			t.Errorf("%dx%d@%d: profile-level-id %s, x264 level %d; want %s", tc.w, tc.h, tc.fps, e.ProfileLevelID(), e.Params().Level, tc.id)
		}
		e.Close()
	}
	for _, bad := range [][3]int{{0, 10, 30}, {10, 10, 0}, {8192, 8192, 30}} {
		if _, err := Level(bad[0], bad[1], bad[2]); err == nil {
			t.Errorf("Level(%v) gave no error", bad)
		}
	}
}

// TestEncodeStream encodes a moving desktop and checks every access unit,
// then has FFmpeg decode the whole stream and compares the pictures.
func TestEncodeStream(t *testing.T) {
	const w, h, n, forceAt = 1280, 800, 45, 30
	tests := []struct {
		name   string
		opt    H264Options
		slices int
	}{
		{"ultrafast, 1 thread, 1 slice", H264Options{Preset: "ultrafast"}, 1},
		{"ultrafast, 1 thread, 4 slices", H264Options{Preset: "ultrafast", Slices: 4}, 4},
		{"superfast, 2 threads", H264Options{Preset: "superfast", Threads: 2}, 2},
	}
	ffprobe, ffmpeg := requireTool(t, "ffprobe"), requireTool(t, "ffmpeg")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opt := tc.opt
			opt.Width, opt.Height, opt.FPS, opt.BitrateKbps = w, h, 30, 4000
			enc, err := NewH264Encoder(opt)
			if err != nil {
				t.Fatal(err)
			}
			defer enc.Close()
			if p := enc.Params(); p.BFrames != 0 || p.Lookahead != 0 || p.MaxDelayed != 0 || p.CABAC || p.KeyintMax < 1<<20 || p.Slices != tc.slices {
				t.Errorf("x264 settings %+v: want no B-frames, no lookahead, no delay, no CABAC, an infinite GOP, %d slices", p, tc.slices)
			}
			pic := NewI420(w, h)
			var stream []byte
			for i := 0; i < n; i++ {
				if err := BGRXToI420(desktop(w, h, i), w*4, w, h, pic); err != nil {
					t.Fatal(err)
				}
				if i == forceAt {
					enc.ForceKeyframe()
				}
				au, key, err := enc.Encode(pic, time.Duration(i)*time.Second/30)
				if err != nil {
					t.Fatal(err)
				}
				if len(au) == 0 {
					t.Fatalf("frame %d: no output; without lookahead every picture must give an access unit at once", i)
				}
				stream = append(stream, au...)
				checkAccessUnit(t, i, au, key, i == 0 || i == forceAt, tc.slices, w, h)
			}

			file := filepath.Join(t.TempDir(), "out.h264")
			if err := os.WriteFile(file, stream, 0o644); err != nil {
				t.Fatal(err)
			}
			// FFmpeg's view of the frame types: I at 0 and forceAt, P elsewhere, never B.
			out, err := exec.Command(ffprobe, "-v", "error", "-show_entries", "frame=pict_type,key_frame",
				"-of", "csv=p=0", file).CombinedOutput()
			if err != nil {
				t.Fatalf("ffprobe: %v: %s", err, out)
			}
			// (ffprobe adds an empty field and blank lines for the SEI's side data.)
			var got, want []string
			for _, line := range strings.Fields(string(out)) {
				got = append(got, strings.TrimRight(line, ","))
			}
			for i := 0; i < n; i++ {
				want = append(want, map[bool]string{true: "1,I", false: "0,P"}[i == 0 || i == forceAt])
			}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("ffprobe frame types (key_frame,pict_type):\n%v\nwant:\n%v", got, want)
			}
			checkDecodes(t, ffmpeg, file, w, h, n, forceAt)
		})
	}
}

// checkAccessUnit looks inside one access unit: NAL types, the SPS, and the
// slice headers.
func checkAccessUnit(t *testing.T, i int, au []byte, key, wantKey bool, slices, w, h int) {
	t.Helper()
	if !bytes.HasPrefix(au, []byte{0, 0, 0, 1}) && !bytes.HasPrefix(au, []byte{0, 0, 1}) {
		t.Fatalf("frame %d does not start with an Annex-B start code: % x", i, au[:min(len(au), 8)])
	}
	if key != wantKey {
		t.Errorf("frame %d: keyframe=%v, want %v", i, key, wantKey)
	}
	types := map[int]int{}
	var firstMBs []int
	for _, nal := range SplitNALs(au) {
		typ := NALType(nal)
		types[typ]++
		switch typ {
		case NALSPS:
			s := parseSPS(nal)
			// constraint_set1 marks constrained baseline; x264 also sets set0.
			if s.profile != 66 || s.constraints&0x40 == 0 {
				t.Errorf("SPS profile_idc %d, constraints %#x: want 66 with constraint_set1 (constrained baseline)", s.profile, s.constraints)
			}
			if want, _ := Level(w, h, 30); s.level != want {
				t.Errorf("SPS level_idc %d, want %d", s.level, want)
			}
			// pic_order_cnt_type 2: output order is decoding order, so there
			// can be no B-frames to reorder.
			if s.pocType != 2 || s.refFrames != 1 {
				t.Errorf("SPS pic_order_cnt_type %d, max_num_ref_frames %d: want 2 (no reordering) and 1", s.pocType, s.refFrames)
			}
			if s.width != w || s.height != h {
				t.Errorf("SPS picture size %dx%d, want %dx%d", s.width, s.height, w, h)
			}
			if !s.vui || !s.colourDesc || s.matrix != 6 || s.fullRange != 0 {
				t.Errorf("SPS colour: vui %v, description %v, matrix %d, full range %d; want BT.601 (6), limited", s.vui, s.colourDesc, s.matrix, s.fullRange)
			}
		case NALSlice, NALIDR:
			first, st := sliceHeader(nal)
			firstMBs = append(firstMBs, first)
			if wantType := map[bool]int{true: 2, false: 0}[wantKey]; st != wantType {
				t.Errorf("frame %d: slice_type %d, want %d (0 P, 1 B, 2 I)", i, st, wantType)
			}
		}
	}
	if wantKey {
		if types[NALSPS] != 1 || types[NALPPS] != 1 || types[NALIDR] != slices || types[NALSlice] != 0 {
			t.Errorf("frame %d: NAL types %v, want one SPS, one PPS and %d IDR slices", i, types, slices)
		}
	} else if types[NALSlice] != slices || types[NALIDR]+types[NALSPS]+types[NALPPS] != 0 {
		t.Errorf("frame %d: NAL types %v, want %d non-IDR slices only", i, types, slices)
	}
	if len(firstMBs) == 0 || firstMBs[0] != 0 {
		t.Errorf("frame %d: slices start at macroblocks %v, want the first at 0", i, firstMBs)
	}
}

// checkDecodes decodes file with FFmpeg and compares each picture's luma
// with the source. An IDR gets only 1.5 frames' worth of bits (the VBV), so
// it is blurry; the P-frames after it refine the picture, which only works
// if FFmpeg decoded every reference exactly as the encoder meant.
func checkDecodes(t *testing.T, ffmpeg, file string, w, h, n, forceAt int) {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(ffmpeg, "-v", "error", "-i", file, "-f", "rawvideo", "-pix_fmt", "yuv420p", "-")
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("ffmpeg decode: %v: %s", err, stderr.String())
	}
	size := w * h * 3 / 2
	if len(raw) != n*size {
		t.Fatalf("ffmpeg decoded %d bytes, want %d frames of %d", len(raw), n, size)
	}
	src := NewI420(w, h)
	scores := make([]float64, n)
	for i := range scores {
		if err := BGRXToI420(desktop(w, h, i), w*4, w, h, src); err != nil {
			t.Fatal(err)
		}
		scores[i] = psnr(src.Y, raw[i*size:i*size+w*h])
	}
	t.Logf("luma PSNR (dB): first IDR %.1f, before the forced IDR %.1f, forced IDR %.1f, last %.1f",
		scores[0], scores[forceAt-1], scores[forceAt], scores[n-1])
	// Wrong pictures (garbage, a shifted plane, a lost reference) score far
	// below 15 dB.
	for i, p := range scores {
		if p < 18 {
			t.Errorf("frame %d decodes at %.1f dB luma PSNR, want at least 18", i, p)
		}
	}
	if scores[forceAt-1] < 40 || scores[n-1] < 38 {
		t.Errorf("P-frames did not refine the picture: %.1f dB before the forced IDR, %.1f dB at the end; want 40 and 38", scores[forceAt-1], scores[n-1])
	}
}

func psnr(a, b []byte) float64 {
	var se float64
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		se += d * d
	}
	if se == 0 {
		return 99
	}
	return 10 * math.Log10(255*255*float64(len(a))/se)
}

// plasma paints frame i of full-screen smooth motion (a video playing): it
// takes as many bits as it is given, so the rate control is what decides.
func plasma(w, h, i int) []byte {
	pix := make([]byte, w*h*4)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			p := pix[(y*w+x)*4:]
			f := float64(i)
			p[0] = byte(128 + 127*math.Sin(float64(x)/17+f/3)*math.Cos(float64(y)/13-f/5))
			p[1] = byte(128 + 127*math.Sin(float64(x+y)/23-f/4))
			p[2] = byte(128 + 127*math.Cos(float64(x-2*y)/29+f/6))
		}
	}
	return pix
}

// TestBitrate checks the rate control holds the stream to the target,
// including after SetBitrate, whatever the timestamps.
func TestBitrate(t *testing.T) {
	const w, h, fps = 1280, 800, 30
	frames := make([]*I420, 30)
	for i := range frames {
		frames[i] = NewI420(w, h)
		if err := BGRXToI420(plasma(w, h, i), w*4, w, h, frames[i]); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name       string
		start, set int // kbit/s; set 0 keeps start
		step       time.Duration
	}{
		{"1000 kbit/s", 1000, 0, time.Second / fps},
		{"4000 kbit/s", 4000, 0, time.Second / fps},
		{"4000 then 800 kbit/s", 4000, 800, time.Second / fps},
		{"frames skipped: pts 100 ms apart", 2000, 0, 100 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			enc, err := NewH264Encoder(H264Options{Width: w, Height: h, FPS: fps, BitrateKbps: tc.start})
			if err != nil {
				t.Fatal(err)
			}
			defer enc.Close()
			target := tc.start
			bytesSince, counted := 0, 0
			for i := 0; i < 3*fps; i++ {
				if i == fps && tc.set != 0 {
					if err := enc.SetBitrate(tc.set); err != nil {
						t.Fatal(err)
					}
					target = tc.set
				}
				au, _, err := enc.Encode(frames[i%len(frames)], time.Duration(i)*tc.step)
				if err != nil {
					t.Fatal(err)
				}
				if p := enc.Params(); p.BitrateKbps != target || p.VBVBufferKbit != target*3/(2*fps) {
					t.Fatalf("frame %d: x264 has %+v, want bitrate %d kbit/s and VBV %d kbit", i, p, target, target*3/(2*fps))
				}
				if i >= fps { // the last two seconds, after the IDR and any change
					bytesSince += len(au)
					counted++
				}
			}
			// The rate control budgets each picture as 1/FPS of a second.
			kbps := float64(bytesSince*8) / 1000 / (float64(counted) / fps)
			t.Logf("%.0f kbit/s for a target of %d", kbps, target)
			// A VBV of 1.5 frames makes x264 careful: it lands at 60-80% of
			// the target on this content, and must never be far above.
			if kbps > 1.1*float64(target) || kbps < 0.5*float64(target) {
				t.Errorf("%.0f kbit/s per nominal second, want at most 10%% over the target %d and not under half of it", kbps, target)
			}
		})
	}
}

func TestEncodeErrors(t *testing.T) {
	enc, err := NewH264Encoder(H264Options{Width: 320, Height: 240})
	if err != nil {
		t.Fatal(err)
	}
	good := NewI420(320, 240)
	_, _, wrongSize := enc.Encode(NewI420(640, 480), 0)
	_, _, nilFrame := enc.Encode(nil, 0)
	_, _, noPlanes := enc.Encode(&I420{Width: 320, Height: 240}, 0)
	lowRate := enc.SetBitrate(10)
	highRate := enc.SetBitrate(1 << 30)
	if _, _, err := enc.Encode(good, 0); err != nil {
		t.Fatalf("good frame after bad ones: %v", err)
	}
	enc.Close()
	_, _, closed := enc.Encode(good, time.Second)
	closedRate := enc.SetBitrate(1000)
	enc.ForceKeyframe() // harmless after Close
	enc.Close()         // twice is harmless
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"wrong size", wrongSize, "opened for 320x240"},
		{"nil frame", nilFrame, "nil"},
		{"no planes", noPlanes, "Y stride 0"},
		{"bitrate too low", lowRate, "bitrate 10"},
		{"bitrate too high", highRate, "out of range"},
		{"encode after close", closed, "closed"},
		{"bitrate after close", closedRate, "closed"},
	}
	for _, tc := range tests {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to mention %q", tc.name, tc.err, tc.want)
		}
	}
	if p := enc.Params(); p != (H264Params{}) {
		t.Errorf("Params after Close = %+v, want zero", p)
	}
}

// TestConcurrentUse has other goroutines ask for keyframes and close the
// encoder while one encodes: every call must either work or say the encoder
// is closed (run with -race to check the locking too).
func TestConcurrentUse(t *testing.T) {
	const w, h = 320, 240
	enc, err := NewH264Encoder(H264Options{Width: w, Height: h})
	if err != nil {
		t.Fatal(err)
	}
	pic := NewI420(w, h)
	if err := BGRXToI420(desktop(w, h, 0), w*4, w, h, pic); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				enc.ForceKeyframe()
				_ = enc.Params()
				runtime.Gosched()
			}
		}
	}()
	keys := 0
	var last error
	for i := 0; i < 2000 && last == nil; i++ {
		var key bool
		_, key, last = enc.Encode(pic, time.Duration(i)*time.Millisecond)
		if key {
			keys++
		}
		if i == 100 {
			go enc.Close()
		}
	}
	close(stop)
	wg.Wait()
	if last == nil || !strings.Contains(last.Error(), "closed") {
		t.Fatalf("encoding while another goroutine closes: last error %v, want the encoder to report it is closed", last)
	}
	if keys < 2 {
		t.Errorf("%d keyframes while ForceKeyframe was called all along, want several", keys)
	}
}

func rssBytes(t *testing.T) int {
	t.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	pages, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatal(err)
	}
	return pages * os.Getpagesize()
}

// TestNoLeaks encodes 2000 frames and opens and closes encoders, and checks
// the process's resident memory stays put. A leaked access unit a frame
// would be tens of megabytes; a leaked encoder several megabytes each.
func TestNoLeaks(t *testing.T) {
	const w, h = 640, 400
	frames := make([]*I420, 8)
	for i := range frames {
		frames[i] = NewI420(w, h)
		if err := BGRXToI420(desktop(w, h, i*5), w*4, w, h, frames[i]); err != nil {
			t.Fatal(err)
		}
	}
	loops := []struct {
		name  string
		warm  int
		count int
		run   func(i int) error
		limit int // MB of growth allowed
	}{
		{"encode 2000 frames", 200, 2000, func() func(int) error {
			enc, err := NewH264Encoder(H264Options{Width: w, Height: h, Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(enc.Close)
			return func(i int) error {
				if i%100 == 0 {
					enc.ForceKeyframe()
				}
				_, _, err := enc.Encode(frames[i%len(frames)], time.Duration(i)*time.Second/30)
				return err
			}
		}(), 8},
		{"open, encode, close 150 encoders", 20, 150, func(i int) error {
			enc, err := NewH264Encoder(H264Options{Width: w, Height: h, Threads: 1 + i%2})
			if err != nil {
				return err
			}
			defer enc.Close()
			_, _, err = enc.Encode(frames[0], 0)
			return err
		}, 16},
		{"scale 2000 frames", 20, 2000, func() func(int) error {
			src := desktop(1280, 800, 1)
			dst := NewI420(w, h)
			// A Scaler, as the stream keeps one: the package function
			// allocates its 1 MB scratch in Go on every call, and the GC's
			// heap growth (9 MB once, under load) is not the C leak this
			// looks for.
			var sc Scaler
			return func(int) error { return sc.ScaleBGRXToI420(src, 1280*4, 1280, 800, dst) }
		}(), 8},
	}
	for _, l := range loops {
		t.Run(l.name, func(t *testing.T) {
			for i := 0; i < l.warm; i++ {
				if err := l.run(i); err != nil {
					t.Fatal(err)
				}
			}
			before := rssBytes(t)
			for i := l.warm; i < l.warm+l.count; i++ {
				if err := l.run(i); err != nil {
					t.Fatal(err)
				}
			}
			after := rssBytes(t)
			t.Logf("RSS %.1f MB -> %.1f MB", float64(before)/(1<<20), float64(after)/(1<<20))
			if after-before > l.limit<<20 {
				t.Errorf("resident memory grew by %.1f MB over %d iterations, want under %d MB", float64(after-before)/(1<<20), l.count, l.limit)
			}
		})
	}
}
