package codec

import "fmt"

// Level is the lowest H.264 level (level_idc: 31 means 3.1) whose frame size
// and macroblock rate limits (Table A-1) allow w x h at fps, never below 3.0.
//
// Which level matters for the SDP's profile-level-id: 42e01f, the value
// browsers offer for constrained baseline, is level 3.1, which allows at most
// 3600 macroblocks a frame and 108000 a second. 1280x720@30 fits exactly;
// 1280x800 is 80x50 = 4000 macroblocks a frame, over 3.1's frame size before
// the rate (120000 MB/s) is even counted, so it needs 3.2 (42e020).
// 1920x1080 is 120x68 = 8160 macroblocks, 244800 a second at 30 fps: level
// 4.0 (42e028) and nothing lower. The encoder writes the level chosen here
// into its SPS, so the SDP and the bitstream agree.
//
// Bitrate limits are not considered: level 3.0's 10 Mbit/s, the lowest here,
// is above what a desktop stream is given.
func Level(w, h, fps int) (int, error) {
	if w <= 0 || h <= 0 || fps <= 0 {
		return 0, fmt.Errorf("H.264 level for %dx%d at %d fps: width, height and frame rate must be positive", w, h, fps)
	}
	limits := [...]struct{ idc, mbps, fs int }{
		{30, 40500, 1620}, {31, 108000, 3600}, {32, 216000, 5120}, {40, 245760, 8192},
		{42, 522240, 8704}, {50, 589824, 22080}, {51, 983040, 36864}, {52, 2073600, 36864},
	}
	mbw, mbh := (w+15)/16, (h+15)/16
	mbs := mbw * mbh
	for _, l := range limits {
		// A.3.1: neither side may exceed sqrt(8*MaxFS) macroblocks, so a
		// very wide strip cannot slip under the frame size limit.
		if mbs <= l.fs && mbw*mbw <= 8*l.fs && mbh*mbh <= 8*l.fs && mbs*fps <= l.mbps {
			return l.idc, nil
		}
	}
	return 0, fmt.Errorf("%dx%d at %d fps is beyond every H.264 level (at most 36864 macroblocks a frame, 2073600 a second)", w, h, fps)
}
