package stream

import (
	"context"
	"fmt"
	"image"
	"time"

	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/internal/codec"
	"github.com/deskenv/deskenv/screen"
)

// damageGrace is how long the loop waits after the first damage before it
// captures: drawing comes as a burst of requests, and capturing the burst
// whole saves sending a half-drawn frame and then the rest.
const damageGrace = 2 * time.Millisecond

// refineFrames is how many times a still picture is encoded again once the
// screen has been still for refineAfter, one per tick (half a second at 30
// fps). Rate control caps a
// frame's size, so a screen of text that changed at once (a new window, a
// scroll) first arrives blurred; nothing would ever send it again, since it
// no longer changes.
// Encoding the same picture again spends the bits the still screen saves on
// sharpening it: measured on an xterm full of text, PSNR goes from 21 dB to
// 34 dB over 11 frames, at about 10 kB each. Refinement waits for a pause
// because its frames, decoded just before a change, delay the change in the
// browser (measured glass-to-glass p95 with refinement right after every
// change: 106 ms; without: 31 ms); and a change during refinement goes out
// at once, refinement takes free ticks only.
const (
	refineFrames = 15
	refineAfter  = 300 * time.Millisecond
)

// keepAlive is the longest a viewer goes without a frame. Chromium asks for
// a keyframe when it has decoded nothing for 3 s, so a still screen would
// cost an IDR (and its refinement) every 3 s per viewer; the same picture
// encoded again is a few hundred bytes of skipped blocks.
const keepAlive = 2 * time.Second

// An idle screen (no frame for idleAfter) is polled every idlePoll for a
// pointer moved by a program that does not go through hci.
const (
	idleAfter = 500 * time.Millisecond
	idlePoll  = 200 * time.Millisecond
)

// retryWait is the pause before the loop tries again after the display or
// the encoder failed.
const retryWait = 500 * time.Millisecond

// loop captures, converts, encodes and fans out frames until ctx ends. A tick
// with an unchanged screen and pointer costs a damage check and a pointer
// query, nothing more.
func (p *pipeline) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	for ctx.Err() == nil {
		err := p.run(ctx)
		if err == nil || ctx.Err() != nil {
			return
		}
		p.s.log.Warn("video loop failed; restarting it", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(retryWait):
		}
	}
}

// run is one life of the loop: one screen size, and an encoder for each
// codec viewers use. It returns an error when it must start over.
func (p *pipeline) run(ctx context.Context) error {
	r := p.newRun()
	defer r.close()
	if err := r.syncEncoders(); err != nil {
		return err
	}
	p.s.log.Info("video started", "screen", fmt.Sprintf("%dx%d", r.g.sw, r.g.sh), "video", fmt.Sprintf("%dx%d", r.g.vw, r.g.vh),
		"sent", fmt.Sprintf("%dx%d", r.pic.Width, r.pic.Height), "fps", p.s.cfg.FPS)
	defer p.s.log.Info("video stopped")
	for r.wait(ctx) {
		if err := r.step(ctx); err != nil {
			return err
		}
	}
	return nil
}

// videoRun is the state of one run: the picture being sent, the pointer
// drawn into it, the pacing, and the encoders.
type videoRun struct {
	p        *pipeline
	g        *geometry
	frame    screen.Frame
	scaler   codec.Scaler
	pic      *codec.I420 // at the size sent: g's video size, or half of it on the size rung
	pl       planes
	have     bool   // pic holds a converted frame
	lastHash uint64 // of the last converted capture
	cur      cursorState
	// dirty is the part of frame the last capture wrote (the whole frame
	// after a full capture): what compose converts.
	dirty    image.Rectangle
	curShape cursorShape  // the pointer's picture as X gave it, for drawing it again at another size
	curImg   *cursorImage // curShape at the size sent
	under    saveUnder
	lastKey  time.Time
	start    time.Time
	refine   int // still frames left to re-encode after a change

	interval, minGap time.Duration
	// lastFrame is the last frame of any kind; lastShown the last that showed
	// something new. Refinement never holds a change back: changes are only
	// spaced from each other; refinement takes ticks nothing else needs.
	lastFrame, lastShown time.Time
	tick                 *time.Ticker
	fast                 bool
	// Input executed through hci (people's and the agent's) wakes the loop
	// at once to show where the pointer went.
	bus   <-chan hci.Event
	unsub func()

	encs   []liveEncoder // in the order of Server.codecs
	encGen uint64        // the pipeline's codecGen encs were made for

	// rung is what congestion control set the encoders to; lastAdapt when
	// it last looked.
	rung      rung
	lastAdapt time.Time
	// probe steers the frame rate where the estimate cannot (probe.go).
	probe rateProbe
	// sizeAt is when the size last changed (sizeHold); newKey makes the
	// next frame of every encoder a keyframe, after a change of size.
	sizeAt   time.Time
	newKey   bool
	sizeGate sizeGate
	encoded  encodedRate
}

// cursorShape is the pointer's picture from XFIXES.
type cursorShape struct {
	w, h, xhot, yhot int
	argb             []uint32
}

// liveEncoder is the encoder of one codec in use.
type liveEncoder struct {
	codec string
	enc   codec.Encoder
}

func (p *pipeline) newRun() *videoRun {
	g := p.refreshGeometry()
	interval := time.Second / time.Duration(p.s.cfg.FPS)
	r := &videoRun{p: p, g: g, start: time.Now(),
		interval: interval, minGap: interval * 9 / 10, tick: time.NewTicker(interval), fast: true}
	// Each run starts where congestion control left the last one: a
	// resized screen does not make the link any wider.
	r.rung = *p.target.Load()
	r.probe, r.sizeGate = newRateProbe(p.s.cfg.FPS), newSizeGate()
	if r.rung.half && !canHalve(g.vw, g.vh) {
		// The screen became too small to halve.
		r.rung.half = false
		p.target.Store(&r.rung)
	}
	r.pic = codec.NewI420(encodeSize(g, r.rung.half))
	if r.rung.fps != p.s.cfg.FPS {
		r.interval = time.Second / time.Duration(r.rung.fps)
		r.minGap = r.interval * 9 / 10
		r.tick.Reset(r.interval)
	}
	r.pl = planesOf(r.pic)
	r.bus, r.unsub = p.s.exec.Bus().Subscribe(256)
	return r
}

func (r *videoRun) close() {
	r.unsub()
	r.tick.Stop()
	for _, e := range r.encs {
		e.enc.Close()
	}
}

// syncEncoders opens an encoder for each codec that gained its first
// viewer and closes those that lost their last.
func (r *videoRun) syncEncoders() error {
	gen := r.p.codecGen.Load()
	if r.encs != nil && gen == r.encGen {
		return nil
	}
	inUse := r.p.codecsInUse()
	kept := make([]liveEncoder, 0, len(r.p.s.codecs))
	for _, c := range r.p.s.codecs {
		e, open := r.encoder(c.Name)
		switch {
		case inUse[c.Name] && open:
			kept = append(kept, e)
		case inUse[c.Name]:
			enc, err := c.NewEncoder(codec.Options{Width: r.pic.Width, Height: r.pic.Height, FPS: r.p.s.cfg.FPS,
				BitrateKbps: r.rung.encoderKbps(r.p.s.cfg.FPS), Preset: r.p.s.cfg.Preset, Logger: r.p.s.log})
			if err != nil {
				for _, old := range r.encs {
					old.enc.Close() // closing twice is harmless
				}
				r.encs = kept // closed by close
				return fmt.Errorf("%s encoder: %w", c.Name, err)
			}
			r.p.s.log.Debug("video encoder opened", "codec", c.Name)
			kept = append(kept, liveEncoder{codec: c.Name, enc: enc})
		case open:
			e.enc.Close()
			r.p.s.log.Debug("video encoder closed: its last viewer left", "codec", c.Name)
		}
	}
	r.encs, r.encGen = kept, gen
	return nil
}

func (r *videoRun) encoder(name string) (liveEncoder, bool) {
	for _, e := range r.encs {
		if e.codec == name {
			return e, true
		}
	}
	return liveEncoder{}, false
}

// wait blocks until there may be a frame to send; false means stop. Damage
// wakes the loop at once, so a change is not held back until the next
// tick; ticks poll the pointer (moved by programs outside hci), serve
// keyframe requests and refine. Frames showing something new stay at least
// about one interval apart.
func (r *videoRun) wait(ctx context.Context) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case <-r.tick.C:
			if time.Since(r.lastFrame) >= r.minGap {
				return true
			}
		case <-r.p.s.damage.Wake():
			return sleepCtx(ctx, max(damageGrace, r.interval-time.Since(r.lastShown))) == nil
		case <-r.p.kick:
			return sleepCtx(ctx, r.interval-time.Since(r.lastShown)) == nil
		case ev, ok := <-r.bus:
			if !ok {
				r.bus = nil // the executor closed
				continue
			}
			if movesPointer(ev) {
				return sleepCtx(ctx, r.interval-time.Since(r.lastShown)) == nil
			}
		}
	}
}

// step sends one frame if anything calls for it: a change of the screen or
// the pointer, a keyframe request, refinement or keep-alive.
func (r *videoRun) step(ctx context.Context) error {
	r.pace()
	r.adapt(time.Now())
	if err := r.syncEncoders(); err != nil {
		return err
	}
	now := time.Now()
	keys := r.takeKeyRequest(now)
	wantKey := len(keys) > 0
	screenChanged, err := r.capture(ctx)
	if err != nil {
		return err
	}
	cs, cursorChanged := r.pointer()
	refining, send := r.plan(screenChanged, cursorChanged, wantKey)
	if !send {
		return nil
	}
	t0 := time.Now()
	// When refining, pic is encoded again as it is, pointer included:
	// the encoder spends the bits the still screen saves on sharpening it.
	if !refining {
		if err := r.compose(screenChanged, cs); err != nil {
			return err
		}
	}
	return r.encode(now, t0, keys, refining)
}

// pace polls an idle screen a few times a second instead of at the frame
// rate: anything but a pointer moved outside hci wakes the loop by itself.
func (r *videoRun) pace() {
	idle := time.Since(r.lastFrame) > idleAfter && !r.p.keyReq.Load() && r.refine == 0
	if idle != r.fast {
		return
	}
	r.fast = !idle
	if idle {
		r.tick.Reset(idlePoll)
	} else {
		r.tick.Reset(r.interval)
	}
}

// takeKeyRequest serves pending keyframe requests once KeyframeInterval
// has passed since the last keyframe: it returns the codecs that need one.
func (r *videoRun) takeKeyRequest(now time.Time) map[string]bool {
	if !r.p.keyReq.Load() || now.Sub(r.lastKey) < r.p.s.cfg.KeyframeInterval {
		return nil
	}
	r.p.keyReq.Store(false)
	// A request names its codec before it raises keyReq, so keyReq with no
	// codec left means the last take already served it.
	return r.p.takeKeyWant()
}

// capture grabs the screen if it was drawn on (or nothing was captured
// yet) and tells whether it changed.
//
// Once there is a frame, only the area damage reports is grabbed and
// written over it (screen.Capturer.CaptureAreaInto), and compose converts
// only that area: a typed letter or a moved window costs its own pixels,
// not the whole screen's (issue 19).
func (r *videoRun) capture(ctx context.Context) (bool, error) {
	damaged, area, whole := r.p.s.damage.TakeArea()
	if !damaged && r.have {
		return false, nil
	}
	var changed bool
	if whole || !r.have {
		if err := r.p.s.capt.CaptureInto(ctx, &r.frame); err != nil {
			return false, fmt.Errorf("capture: %w", err)
		}
		changed = !r.have || r.frame.Hash != r.lastHash
		r.dirty = image.Rect(0, 0, r.frame.Width, r.frame.Height)
	} else {
		var err error
		if changed, r.dirty, err = r.p.s.capt.CaptureAreaInto(ctx, &r.frame, area); err != nil {
			return false, fmt.Errorf("capture: %w", err)
		}
	}
	r.p.counters.captured.Add(1)
	if r.frame.Width != r.g.sw || r.frame.Height != r.g.sh {
		return false, fmt.Errorf("the screen changed size from %dx%d to %dx%d", r.g.sw, r.g.sh, r.frame.Width, r.frame.Height)
	}
	return changed, nil
}

// pointer reads where the pointer is and what it looks like.
func (r *videoRun) pointer() (cursorState, bool) {
	cs := r.p.s.xw.cursor(r.cur.serial)
	if cs.imageChanged {
		r.curShape = cursorShape{w: cs.w, h: cs.h, xhot: cs.xhot, yhot: cs.yhot, argb: cs.argb}
		r.curImg = r.cursorImage()
	}
	return cs, cs.ok != r.cur.ok || cs.x != r.cur.x || cs.y != r.cur.y || cs.serial != r.cur.serial
}

// plan says whether this tick sends a frame, and whether that frame is the
// same picture again (refinement or keep-alive).
func (r *videoRun) plan(screenChanged, cursorChanged, wantKey bool) (refining, send bool) {
	if screenChanged || wantKey {
		r.refine = refineFrames
	}
	if screenChanged || cursorChanged || wantKey {
		return false, true
	}
	switch {
	case r.refine > 0 && time.Since(r.lastShown) >= refineAfter:
		r.refine--
		r.p.counters.refined.Add(1)
	case time.Since(r.lastFrame) >= keepAlive:
		r.p.counters.keepalive.Add(1)
	default:
		r.p.counters.skipped.Add(1)
		return false, false
	}
	return true, true
}

// compose makes the picture to send: the new capture converted, or the old
// one with the pointer taken off, and the pointer drawn where it is now.
func (r *videoRun) compose(screenChanged bool, cs cursorState) error {
	if screenChanged {
		if area := r.dirty; r.have && area != image.Rect(0, 0, r.frame.Width, r.frame.Height) &&
			r.pic.Width == r.frame.Width && r.pic.Height == r.frame.Height {
			// Only area is converted: the old pointer, wherever it is,
			// comes off first (where it overlaps area the conversion
			// then writes the new pixels over what was under it).
			r.under.restore(r.pl)
			if err := convertArea(&r.frame, r.pic, area); err != nil {
				return err
			}
		} else {
			if err := convert(&r.scaler, &r.frame, r.pic); err != nil {
				return err
			}
			r.under = saveUnder{y: r.under.y, u: r.under.u, v: r.under.v} // the conversion painted over the old pointer
		}
		r.lastHash, r.have = r.frame.Hash, true
	} else {
		r.under.restore(r.pl)
	}
	if cs.ok && r.curImg != nil {
		hx, hy := r.g.space.ToModel(cs.x, cs.y)
		if r.pic.Width != r.g.vw {
			// The size rung: video pixels (the protocol's, input's) to
			// the pixels sent.
			hx, hy = hx*r.pic.Width/r.g.vw, hy*r.pic.Height/r.g.vh
		}
		r.curImg.draw(r.pl, hx, hy, &r.under)
	}
	r.cur = cs
	r.cur.argb = nil
	return nil
}

// encode compresses the picture once per codec in use, a keyframe for
// the codecs in keys, and offers each frame to that codec's viewers. t0 is
// when making the picture began.
func (r *videoRun) encode(now, t0 time.Time, keys map[string]bool, refining bool) error {
	sent := false
	for _, e := range r.encs {
		if keys[e.codec] || r.newKey {
			e.enc.ForceKeyframe()
		}
		data, key, err := e.enc.Encode(r.pic, now.Sub(r.start))
		if err != nil {
			return fmt.Errorf("encode %s: %w", e.codec, err)
		}
		if len(data) == 0 {
			continue // the encoder buffered it (it should not with these settings)
		}
		sent = true
		r.p.counters.encoded.Add(1)
		r.p.counters.bytesEncoded.Add(uint64(len(data)))
		if key {
			r.p.counters.keyframes.Add(1)
			r.lastKey = now
		}
		r.p.fanOut(&encFrame{codec: e.codec, data: data, key: key, at: now})
	}
	r.newKey = false
	d := time.Since(t0)
	r.p.counters.encodeNanos.Add(int64(d))
	r.p.counters.lastEncodeNanos.Store(int64(d))
	if sent {
		r.lastFrame = now
		if !refining {
			r.lastShown = now
		}
	}
	return nil
}

// resize moves the run to the size of the rung (half or full): the picture
// is made again at the new size from the next capture, and the encoders
// are closed, so syncEncoders opens them at the new size, their first
// frame a keyframe with the new size in its headers. A clean switch: no
// frame of the old size follows one of the new.
func (r *videoRun) resize(half bool) {
	for _, e := range r.encs {
		e.enc.Close()
	}
	r.encs = nil
	r.pic = codec.NewI420(encodeSize(r.g, half))
	r.pl = planesOf(r.pic)
	r.have = false // the next step captures and converts whatever the damage says
	r.under = saveUnder{}
	r.rung.half = half
	r.curImg = r.cursorImage()
	r.cur = cursorState{} // drawn again at the new size
	r.newKey = true
}

// encodeSize is the size sent: g's video size, or half of it.
func encodeSize(g *geometry, half bool) (int, int) {
	if half {
		return halfSize(g.vw, g.vh)
	}
	return g.vw, g.vh
}

// cursorImage is the pointer's picture at the size sent: halved (a box
// filter) on the size rung, where the page scales the video up twice and a
// pointer drawn at its own size would show twice as big.
func (r *videoRun) cursorImage() *cursorImage {
	c := r.curShape
	if c.argb == nil {
		return nil
	}
	if r.rung.half {
		c = c.halved()
	}
	return newCursorImage(c.w, c.h, c.xhot, c.yhot, c.argb)
}

// halved is c at half its width and height, each pixel the mean of the
// (up to) four it covers. XFIXES images are premultiplied, so averaging
// the channels is right for the edges too.
func (c cursorShape) halved() cursorShape {
	w, h := (c.w+1)/2, (c.h+1)/2
	out := cursorShape{w: w, h: h, xhot: c.xhot / 2, yhot: c.yhot / 2, argb: make([]uint32, w*h)}
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			var sum [4]uint32
			n := uint32(0)
			for dy := 0; dy < 2; dy++ {
				for dx := 0; dx < 2; dx++ {
					sx, sy := 2*x+dx, 2*y+dy
					if sx >= c.w || sy >= c.h {
						continue
					}
					p := c.argb[sy*c.w+sx]
					for k := range sum {
						sum[k] += p >> (8 * k) & 0xff
					}
					n++
				}
			}
			var p uint32
			for k := range sum {
				p |= (sum[k] + n/2) / n << (8 * k)
			}
			out.argb[y*w+x] = p
		}
	}
	return out
}

// convertArea converts area of the capture (even edges, inside both) into
// the same area of the picture, which has the capture's size.
func convertArea(f *screen.Frame, pic *codec.I420, area image.Rectangle) error {
	sub, err := pic.Area(area)
	if err != nil {
		return fmt.Errorf("colour conversion: %w", err)
	}
	if err := codec.BGRXToI420(f.Pix[area.Min.Y*f.Stride+area.Min.X*4:], f.Stride, area.Dx(), area.Dy(), sub); err != nil {
		return fmt.Errorf("colour conversion of %v: %w", area, err)
	}
	return nil
}

// convert turns a BGRX capture into the I420 picture, scaling when the
// picture is smaller than the screen (a configured video size, the size
// rung).
func convert(sc *codec.Scaler, f *screen.Frame, pic *codec.I420) error {
	if pic.Width == f.Width && pic.Height == f.Height {
		if err := codec.BGRXToI420(f.Pix, f.Stride, f.Width, f.Height, pic); err != nil {
			return fmt.Errorf("colour conversion: %w", err)
		}
		return nil
	}
	if err := sc.ScaleBGRXToI420(f.Pix, f.Stride, f.Width, f.Height, pic); err != nil {
		return fmt.Errorf("scaling: %w", err)
	}
	return nil
}

func planesOf(pic *codec.I420) planes {
	return planes{y: pic.Y, u: pic.U, v: pic.V, sy: pic.StrideY, su: pic.StrideU, sv: pic.StrideV, w: pic.Width, h: pic.Height}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// movesPointer tells whether an hci event may have moved the pointer.
func movesPointer(ev hci.Event) bool {
	if ev.Input != nil {
		return ev.Input.Type == hci.InputMotion
	}
	return ev.Action != nil
}
