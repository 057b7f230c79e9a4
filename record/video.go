package record

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/deskenv/deskenv/internal/codec"
	"github.com/deskenv/deskenv/screen"
)

// recordCodec is what recordings are written in: H.264, which every player
// and training pipeline reads; the segment files are named after it.
func recordCodec() codec.Codec { return codec.H264() }

// video captures the screen at the configured rate and encodes the frames
// that changed into H.264 segments: video/NNNNNN.h264, each an Annex-B byte
// stream that starts with an IDR frame (SPS and PPS included), so every
// segment plays on its own (ffplay, ffmpeg -i). frames.jsonl indexes every
// frame with its capture time on the episode's clock.
//
// It has its own encoder rather than tapping the stream's: recording then
// works with no viewer and no stream at all, and a viewer's bitrate changes
// or keyframe requests never touch the recording.
func (ep *Episode) video(ctx context.Context) {
	defer close(ep.videoDone)
	opt := ep.r.opt
	v := ep.meta.Video
	log := ep.r.log.With("episode", ep.id)
	defer func() {
		if err := ep.frames.close(); err != nil {
			log.Error("recording: closing the frame index", "err", err)
		}
	}()
	enc, err := recordCodec().NewEncoder(codec.Options{Width: v.Width, Height: v.Height, FPS: v.FPS, BitrateKbps: v.BitrateKbps, Logger: log})
	if err != nil {
		log.Error("recording: no video, the encoder would not start", "err", err)
		return
	}
	defer enc.Close()
	pic := codec.NewI420(v.Width, v.Height)
	var sc codec.Scaler
	var f screen.Frame
	w := segmentWriter{dir: filepath.Join(ep.dir, VideoDir)}
	defer func() {
		if err := w.close(); err != nil {
			log.Error("recording: closing a video segment", "err", err)
		}
	}()
	segLen := time.Duration(opt.SegmentSeconds) * time.Second
	tick := time.NewTicker(time.Second / time.Duration(opt.FPS))
	defer tick.Stop()
	syncT := time.NewTicker(opt.SyncEvery)
	defer syncT.Stop()
	var lastHash uint64
	have, warned := false, false
	for {
		select {
		case <-ctx.Done():
			return
		case <-syncT.C:
			if err := w.sync(); err != nil {
				log.Error("recording: syncing video", "err", err)
			}
			if err := ep.frames.sync(); err != nil {
				log.Error("recording: syncing the frame index", "err", err)
			}
			continue
		case <-tick.C:
		}
		if ep.paused.Load() {
			// Nothing is recorded while paused; the next frame opens a new
			// segment with a keyframe.
			if err := w.close(); err != nil {
				log.Error("recording: closing a video segment", "err", err)
			}
			have = false
			continue
		}
		if err := ep.r.capt.CaptureInto(ctx, &f); err != nil {
			if !warned && !errors.Is(err, context.Canceled) {
				log.Warn("recording: a video capture failed (will retry)", "err", err)
				warned = true
			}
			continue
		}
		if have && f.Hash == lastHash {
			continue
		}
		pts := f.Time.Sub(ep.zero)
		if w.f == nil || pts-w.start >= segLen {
			if err := w.next(pts); err != nil {
				log.Error("recording: no more video, a segment could not be made", "err", err)
				return
			}
			ep.nSegments.Add(1)
			enc.ForceKeyframe()
		}
		if err := sc.ScaleBGRXToI420(f.Pix, f.Stride, f.Width, f.Height, pic); err != nil {
			log.Error("recording: converting a frame", "err", err)
			continue
		}
		au, key, err := enc.Encode(pic, pts)
		if err != nil {
			log.Error("recording: encoding a frame", "err", err)
			continue
		}
		if len(au) == 0 {
			continue
		}
		off, err := w.write(au)
		if err != nil {
			log.Error("recording: no more video, writing a segment failed", "err", err)
			return
		}
		fr := Frame{N: int(ep.nFrames.Load()), Segment: w.seg, Index: w.frames - 1, PTS: pts.Microseconds(), Key: key, Offset: off, Size: len(au)}
		if err := ep.frames.write(fr); err != nil {
			log.Error("recording: no more video, writing the frame index failed", "err", err)
			return
		}
		ep.nFrames.Add(1)
		lastHash, have = f.Hash, true
	}
}

// segmentWriter writes the numbered segment files.
type segmentWriter struct {
	dir    string
	f      *os.File
	seg    int // number of the open segment
	made   int // segments made so far
	start  time.Duration
	off    int64
	frames int
	dirty  bool
}

func (w *segmentWriter) next(pts time.Duration) error {
	if err := w.close(); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(w.dir, fmt.Sprintf("%06d.%s", w.made, recordCodec().Name)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	w.f, w.seg, w.start, w.off, w.frames = f, w.made, pts, 0, 0
	w.made++
	return nil
}

func (w *segmentWriter) write(au []byte) (int64, error) {
	off := w.off
	if _, err := w.f.Write(au); err != nil {
		return 0, err
	}
	w.off += int64(len(au))
	w.frames++
	w.dirty = true
	return off, nil
}

func (w *segmentWriter) sync() error {
	if w.f == nil || !w.dirty {
		return nil
	}
	w.dirty = false
	return w.f.Sync()
}

func (w *segmentWriter) close() error {
	if w.f == nil {
		return nil
	}
	err := w.sync()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	w.f = nil
	return err
}
