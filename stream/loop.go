package stream

import (
	"context"
	"fmt"
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

// run is one life of the loop: one encoder for one screen size. It returns
// an error when the encoder must be rebuilt.
func (p *pipeline) run(ctx context.Context) error {
	g := p.refreshGeometry()
	capt := p.s.capt
	enc, err := codec.NewH264Encoder(codec.H264Options{
		Width: g.vw, Height: g.vh, FPS: p.s.cfg.FPS, BitrateKbps: p.s.cfg.BitrateKbps,
		Preset: p.s.cfg.Preset,
	})
	if err != nil {
		return fmt.Errorf("H.264 encoder: %w", err)
	}
	defer enc.Close()
	p.s.log.Info("video started", "screen", fmt.Sprintf("%dx%d", g.sw, g.sh), "video", fmt.Sprintf("%dx%d", g.vw, g.vh), "fps", p.s.cfg.FPS)
	defer p.s.log.Info("video stopped")

	var (
		frame    screen.Frame
		scaler   codec.Scaler
		pic      = codec.NewI420(g.vw, g.vh)
		pl       = planesOf(pic)
		have     bool   // pic holds a converted frame
		lastHash uint64 // of the last converted capture
		cur      cursorState
		curImg   *cursorImage
		under    saveUnder
		lastKey  time.Time
		start    = time.Now()
		refine   int // still frames left to re-encode after a change
	)
	interval := time.Second / time.Duration(p.s.cfg.FPS)
	minGap := interval * 9 / 10
	// lastFrame is the last frame of any kind; lastShown the last that showed
	// something new. Refinement never holds a change back: changes are only
	// spaced from each other; refinement takes ticks nothing else needs.
	var lastFrame, lastShown time.Time
	tick := time.NewTicker(interval)
	defer tick.Stop()
	fast := true
	// Input executed through hci (people's and the agent's) wakes the loop
	// at once to show where the pointer went.
	bus, unsub := p.s.exec.Bus().Subscribe(256)
	defer unsub()
	for {
		// Damage wakes the loop at once, so a change is not held back until
		// the next tick; ticks poll the pointer (moved by programs outside
		// hci), serve keyframe requests and refine. Frames showing something
		// new stay at least about one interval apart.
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if time.Since(lastFrame) < minGap {
				continue
			}
		case <-p.s.xw.wake:
			if err := sleepCtx(ctx, max(damageGrace, interval-time.Since(lastShown))); err != nil {
				return nil
			}
		case <-p.kick:
			if err := sleepCtx(ctx, interval-time.Since(lastShown)); err != nil {
				return nil
			}
		case ev, ok := <-bus:
			if !ok {
				bus = nil // the executor closed
				continue
			}
			if !movesPointer(ev) {
				continue
			}
			if err := sleepCtx(ctx, interval-time.Since(lastShown)); err != nil {
				return nil
			}
		}
		// An idle screen is polled a few times a second instead of at the
		// frame rate: anything but a pointer moved outside hci wakes the
		// loop by itself.
		if idle := time.Since(lastFrame) > idleAfter && !p.keyReq.Load() && refine == 0; idle == fast {
			fast = !idle
			if idle {
				tick.Reset(idlePoll)
			} else {
				tick.Reset(interval)
			}
		}
		now := time.Now()
		wantKey := false
		if p.keyReq.Load() && now.Sub(lastKey) >= p.s.cfg.KeyframeInterval {
			p.keyReq.Store(false)
			wantKey = true
		}

		screenChanged := false
		if p.s.xw.takeDamage() || !have {
			if err := capt.CaptureInto(ctx, &frame); err != nil {
				return fmt.Errorf("capture: %w", err)
			}
			p.counters.captured.Add(1)
			if frame.Width != g.sw || frame.Height != g.sh {
				return fmt.Errorf("the screen changed size from %dx%d to %dx%d", g.sw, g.sh, frame.Width, frame.Height)
			}
			screenChanged = !have || frame.Hash != lastHash
		}

		cs := p.s.xw.cursor(cur.serial)
		if cs.imageChanged {
			curImg = newCursorImage(cs.w, cs.h, cs.xhot, cs.yhot, cs.argb)
		}
		cursorChanged := cs.ok != cur.ok || cs.x != cur.x || cs.y != cur.y || cs.serial != cur.serial

		refining := false // pic goes out again as it is
		if !screenChanged && !cursorChanged && !wantKey {
			switch {
			case refine > 0 && time.Since(lastShown) >= refineAfter:
				refine--
				p.counters.refined.Add(1)
			case time.Since(lastFrame) >= keepAlive:
				p.counters.keepalive.Add(1)
			default:
				p.counters.skipped.Add(1)
				continue
			}
			refining = true
		}
		if screenChanged || wantKey {
			refine = refineFrames
		}

		t0 := time.Now()
		// When refining, pic is encoded again as it is, pointer included:
		// the encoder spends the bits the still screen saves on sharpening it.
		if !refining {
			if screenChanged {
				if err := convert(&scaler, &frame, pic, g); err != nil {
					return err
				}
				lastHash, have = frame.Hash, true
				under = saveUnder{y: under.y, u: under.u, v: under.v} // the conversion painted over the old pointer
			} else {
				under.restore(pl)
			}
			if cs.ok && curImg != nil {
				hx, hy := g.space.ToModel(cs.x, cs.y)
				curImg.draw(pl, hx, hy, &under)
			}
			cur = cs
			cur.argb = nil
		}

		if wantKey {
			enc.ForceKeyframe()
		}
		data, key, err := enc.Encode(pic, now.Sub(start))
		if err != nil {
			return fmt.Errorf("encode: %w", err)
		}
		d := time.Since(t0)
		p.counters.encodeNanos.Add(int64(d))
		p.counters.lastEncodeNanos.Store(int64(d))
		if len(data) == 0 {
			continue // the encoder buffered it (it should not with zerolatency)
		}
		lastFrame = now
		if !refining {
			lastShown = now
		}
		p.counters.encoded.Add(1)
		p.counters.bytesEncoded.Add(uint64(len(data)))
		if key {
			p.counters.keyframes.Add(1)
			lastKey = now
		}
		p.fanOut(&encFrame{data: data, key: key, at: now})
	}
}

// convert turns a BGRX capture into the I420 picture, scaling when the video
// is smaller than the screen.
func convert(sc *codec.Scaler, f *screen.Frame, pic *codec.I420, g *geometry) error {
	if g.vw == g.sw && g.vh == g.sh {
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
