package screen

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/jpeg"
	"sync"
	"sync/atomic"
	"time"
)

// Format is a screenshot encoding.
type Format string

const (
	PNG  Format = "png"
	JPEG Format = "jpeg"
)

// Shot is an encoded screenshot.
type Shot struct {
	Data          []byte
	MIME          string
	Width, Height int
	// Hash of the captured screen the shot was made from.
	Hash uint64
	// Changed is false when the screen was identical to the previous shot's,
	// in which case Data is that shot's encoding, reused.
	Changed  bool
	Captured time.Time
}

// ShooterOptions say how screenshots are made.
type ShooterOptions struct {
	Format      Format // png (default) or jpeg
	JPEGQuality int    // 1-100, default 80
	// ModelW and ModelH are the size screenshots are scaled to; zero means
	// the screen's size.
	ModelW, ModelH int
	// Pointer draws the mouse pointer into screenshots and zooms, as the
	// reference tool's screenshots (scrot -p) show it. A pointer that
	// cannot be read (no XFIXES) is left out, never an error.
	Pointer bool
}

// Shooter makes model-space screenshots: capture, scale, encode, with the last
// encoding cached by screen content so an unchanged screen is not re-encoded.
type Shooter struct {
	c *Capturer

	mu      sync.Mutex
	opt     ShooterOptions
	last    Shot
	hasLast bool
	frame   Frame
	spare   Frame // SettleShot's buffer, swapped with frame
	scaler  scaler
	png     pngEncoder

	encodes atomic.Int64
}

// NewShooter makes screenshots from c.
func NewShooter(c *Capturer, opt ShooterOptions) *Shooter {
	if opt.Format == "" {
		opt.Format = PNG
	}
	if opt.JPEGQuality <= 0 || opt.JPEGQuality > 100 {
		opt.JPEGQuality = 80
	}
	return &Shooter{c: c, opt: opt}
}

// SetModelSize changes the size screenshots are scaled to (zero: screen size).
func (s *Shooter) SetModelSize(w, h int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opt.ModelW, s.opt.ModelH = w, h
	s.hasLast = false
}

// DrawsPointer reports whether the shots show the mouse pointer
// (ShooterOptions.Pointer): a recording notes it, so a replay compares
// like with like.
func (s *Shooter) DrawsPointer() bool { return s.opt.Pointer }

// Encodes counts the screenshots actually encoded (not served from the cache).
func (s *Shooter) Encodes() int64 { return s.encodes.Load() }

// Shot captures the screen and returns it in model space.
func (s *Shooter) Shot(ctx context.Context) (Shot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.capture(ctx); err != nil {
		return Shot{}, err
	}
	return s.shotOfFrame()
}

// modelSize is the size f's shot has. Called with s.mu held.
func (s *Shooter) modelSize(f *Frame) (w, h int) {
	if s.opt.ModelW <= 0 || s.opt.ModelH <= 0 {
		return f.Width, f.Height
	}
	return s.opt.ModelW, s.opt.ModelH
}

// shotOfFrame encodes s.frame in model space, or hands back the last shot
// when the screen is the same. Called with s.mu held.
func (s *Shooter) shotOfFrame() (Shot, error) {
	w, h := s.modelSize(&s.frame)
	if s.hasLast && s.last.Hash == s.frame.Hash && s.last.Width == w && s.last.Height == h {
		shot := s.last
		shot.Changed = false
		shot.Captured = s.frame.Time
		return shot, nil
	}
	shot, err := s.encode(s.scaler.scale(&s.frame, w, h))
	if err != nil {
		return Shot{}, err
	}
	shot.Hash = s.frame.Hash
	shot.Changed = true
	s.last, s.hasLast = shot, true
	return shot, nil
}

// Zoom returns the screen-space rectangle r of the full-resolution screen,
// encoded at full resolution (never a crop of the downscaled shot).
func (s *Shooter) Zoom(ctx context.Context, r image.Rectangle) (Shot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.capture(ctx); err != nil {
		return Shot{}, err
	}
	bounds := image.Rect(0, 0, s.frame.Width, s.frame.Height)
	if r.Empty() || !r.In(bounds) {
		return Shot{}, fmt.Errorf("zoom region %v is not a non-empty part of the %dx%d screen", r, s.frame.Width, s.frame.Height)
	}
	shot, err := s.encode(Crop(&s.frame, r))
	if err != nil {
		return Shot{}, err
	}
	shot.Hash = s.frame.Hash
	shot.Changed = true
	return shot, nil
}

// capture grabs the screen into s.frame, with the pointer drawn in when
// the options ask for it. Called with s.mu held.
func (s *Shooter) capture(ctx context.Context) error {
	if err := s.c.CaptureInto(ctx, &s.frame); err != nil {
		return err
	}
	s.addPointer(ctx)
	return nil
}

// addPointer draws the pointer into s.frame when the options ask for it.
// Called with s.mu held.
func (s *Shooter) addPointer(ctx context.Context) {
	if !s.opt.Pointer {
		return
	}
	p, err := s.c.Pointer(ctx)
	if err != nil {
		return // a screenshot without the pointer beats none
	}
	p.DrawOn(&s.frame)
	s.frame.Hash = p.mix(s.c.seed, s.frame.Hash)
}

func (s *Shooter) encode(f *Frame) (Shot, error) {
	var buf bytes.Buffer
	shot := Shot{Width: f.Width, Height: f.Height, Captured: f.Time}
	switch s.opt.Format {
	case JPEG:
		if err := jpeg.Encode(&buf, f.RGBA(), &jpeg.Options{Quality: s.opt.JPEGQuality}); err != nil {
			return Shot{}, fmt.Errorf("encode JPEG: %w", err)
		}
		shot.MIME = "image/jpeg"
	case PNG:
		if err := s.png.encode(&buf, f); err != nil {
			return Shot{}, fmt.Errorf("encode PNG: %w", err)
		}
		shot.MIME = "image/png"
	default:
		return Shot{}, fmt.Errorf("unknown image format %q: use png or jpeg", s.opt.Format)
	}
	s.encodes.Add(1)
	shot.Data = buf.Bytes()
	return shot, nil
}
