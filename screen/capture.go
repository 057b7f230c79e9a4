// Package screen captures the screen of a display, scales it between screen and
// model space, encodes it (PNG, JPEG), crops zooms, and tells when the screen
// changed or settled.
//
// Capture goes through MIT-SHM with one persistent shared-memory segment per
// display, so a full-screen grab is one request and a copy, not a 4 MB reply
// through the socket.
package screen

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"image"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/shm"
	"github.com/jezek/xgb/xproto"
	"golang.org/x/sys/unix"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/internal/xext"
)

// Frame is one screen image in the X server's 32-bit layout: bytes B, G, R, X
// per pixel, rows Stride bytes apart.
type Frame struct {
	Pix           []byte
	Stride        int
	Width, Height int
	Time          time.Time
	// Hash identifies the content: equal frames of one Capturer have equal hashes.
	Hash uint64

	// bands are the hashes of Pix's bands of hashRows rows, which Hash is
	// the hash of, kept so that a capture of an area rehashes the bands it
	// wrote and not the whole screen (4 MB at 1280x800: 0.45 ms of a 0.52
	// ms area capture went to hashing it). bandsOf is the Pix they were
	// computed for: a Frame copied with new pixels starts over.
	bands   []uint64
	bandsOf *byte
}

// hashRows is the height of the bands a Frame's hash is made of.
const hashRows = 16

// rehash brings Hash up to date after rows [y0, y1) of Pix were written:
// the bands those rows touch are hashed again (all of them when the bands
// were not computed for this Pix), then the band hashes are hashed into
// Hash. A frame hashed whole and one brought up to date band by band have
// the same Hash when their pixels are the same.
func (f *Frame) rehash(seed maphash.Seed, y0, y1 int) {
	n := (f.Height + hashRows - 1) / hashRows
	if len(f.Pix) == 0 || f.Height <= 0 {
		f.Hash = maphash.Bytes(seed, nil)
		return
	}
	if len(f.bands) != n || f.bandsOf != &f.Pix[0] {
		// A new slice, not the old one's array: a copy of this Frame may
		// share it.
		f.bands = make([]uint64, n)
		f.bandsOf = &f.Pix[0]
		y0, y1 = 0, f.Height
	}
	y0, y1 = max(y0, 0), min(y1, f.Height)
	for b := y0 / hashRows; b*hashRows < y1; b++ {
		top, end := b*hashRows, min((b+1)*hashRows, f.Height)
		f.bands[b] = maphash.Bytes(seed, f.Pix[top*f.Stride:end*f.Stride])
	}
	var h maphash.Hash
	h.SetSeed(seed)
	var buf [8]byte
	for _, v := range f.bands {
		binary.LittleEndian.PutUint64(buf[:], v)
		h.Write(buf[:])
	}
	f.Hash = h.Sum64()
}

// Capturer grabs the screen of one display. It is safe for concurrent use;
// captures are serialized because they share one segment.
type Capturer struct {
	d    *display.Display
	log  *slog.Logger
	seed maphash.Seed

	f      *display.Follower // the capture's own connection
	mu     sync.Mutex
	gen    uint64 // the Follower's generation the segment is attached on; 0: none
	stale  bool   // a capture failed: prepare again
	conn   *xgb.Conn
	root   xproto.Window
	useSHM bool
	seg    shm.Seg
	shmID  int
	shmBuf []byte
	w, h   int
	closed bool
	// fixesGen is the generation XFIXES was set up on (Pointer).
	fixesGen uint64
	warned   bool

	// dmg tells settles when the screen was drawn on (settle.go); its own
	// lock, since captures hold mu.
	dmgMu     sync.Mutex
	dmg       *damageWatch
	dmgClosed bool

	captures atomic.Int64 // screens grabbed, for tests and benchmarks
}

// NewCapturer prepares capture on d. The shared-memory segment is made on the
// first capture and kept until Close or until the display restarts.
func NewCapturer(d *display.Display) (*Capturer, error) {
	c := &Capturer{d: d, log: d.Logger(), seed: maphash.MakeSeed(), shmID: -1, f: d.Follow(display.DropEvents)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.prepare(context.Background()); err != nil {
		c.f.Close()
		return nil, err
	}
	return c, nil
}

// prepare (re)binds to the current connection of the Follower and the
// display's size, attaching a segment on a new connection. Called with c.mu
// held.
func (c *Capturer) prepare(ctx context.Context) error {
	if c.closed {
		return errors.New("capturer is closed")
	}
	if c.d.Conn() == nil {
		return fmt.Errorf("display %s is down", c.d.Name())
	}
	conn, gen, err := c.f.Get(ctx)
	if err != nil {
		return fmt.Errorf("capture screen of %s: %w", c.d.Name(), err)
	}
	w, h := c.d.Size()
	if gen == c.gen && !c.stale && w == c.w && h == c.h {
		return nil
	}
	c.release()
	scr := xproto.Setup(conn).DefaultScreen(conn)
	if scr.RootDepth != 24 && scr.RootDepth != 32 {
		return fmt.Errorf("display %s has depth %d: capture supports 24-bit displays (start Xvfb with depth 24)", c.d.Name(), scr.RootDepth)
	}
	c.conn, c.gen, c.root, c.w, c.h, c.stale = conn, gen, scr.Root, w, h, false
	c.useSHM = false
	if err := c.attachSHM(); err != nil {
		if !c.warned {
			c.log.Warn("MIT-SHM unavailable; capturing through GetImage (slower)", "err", err)
			c.warned = true
		}
		return nil
	}
	c.useSHM = true
	return nil
}

func (c *Capturer) attachSHM() error {
	if err := xext.Init(c.conn, "MIT-SHM", shm.Init); err != nil {
		return fmt.Errorf("MIT-SHM extension: %w", err)
	}
	size := c.w * c.h * 4
	id, err := unix.SysvShmGet(unix.IPC_PRIVATE, size, unix.IPC_CREAT|0o600)
	if err != nil {
		return fmt.Errorf("create shared memory segment of %d bytes: %w", size, err)
	}
	buf, err := unix.SysvShmAttach(id, 0, 0)
	if err != nil {
		unix.SysvShmCtl(id, unix.IPC_RMID, nil)
		return fmt.Errorf("attach shared memory: %w", err)
	}
	seg, err := shm.NewSegId(c.conn)
	if err != nil {
		unix.SysvShmDetach(buf)
		unix.SysvShmCtl(id, unix.IPC_RMID, nil)
		return err
	}
	if err := shm.AttachChecked(c.conn, seg, uint32(id), false).Check(); err != nil {
		unix.SysvShmDetach(buf)
		unix.SysvShmCtl(id, unix.IPC_RMID, nil)
		return fmt.Errorf("the X server cannot attach the segment: %w", err)
	}
	// Both sides are attached: marking it removed now means the kernel frees
	// it when the last one detaches, even if this process is killed.
	unix.SysvShmCtl(id, unix.IPC_RMID, nil)
	c.seg, c.shmID, c.shmBuf = seg, id, buf
	return nil
}

// release frees the segment. Called with c.mu held.
func (c *Capturer) release() {
	if c.shmBuf == nil {
		return
	}
	if _, gen, ok := c.f.Current(); ok && gen == c.gen {
		shm.Detach(c.conn, c.seg)
	}
	unix.SysvShmDetach(c.shmBuf)
	c.shmBuf, c.shmID = nil, -1
}

// Capture grabs the whole screen into a new Frame the caller owns.
func (c *Capturer) Capture(ctx context.Context) (*Frame, error) {
	f := &Frame{}
	if err := c.CaptureInto(ctx, f); err != nil {
		return nil, err
	}
	return f, nil
}

// CaptureInto grabs the whole screen into f, reusing f.Pix when it is large
// enough, so a video loop captures without allocating.
func (c *Capturer) CaptureInto(ctx context.Context, f *Frame) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.prepare(ctx); err != nil {
		return err
	}
	n := c.w * c.h * 4
	if cap(f.Pix) < n {
		f.Pix = make([]byte, n)
	}
	f.Pix = f.Pix[:n]
	f.Width, f.Height, f.Stride = c.w, c.h, c.w*4
	err := c.grab(f.Pix)
	var xerr xproto.MatchError
	if errors.As(err, &xerr) {
		// BadMatch: the root is smaller than the area asked for, because a
		// program shrank the screen (xrandr --fb). Put it back and retry.
		if restored, rerr := c.d.RestoreSize(ctx); rerr != nil {
			return fmt.Errorf("capture screen of %s: the screen changed size and could not be restored: %w", c.d.Name(), rerr)
		} else if restored {
			if err = c.prepare(ctx); err == nil {
				err = c.grab(f.Pix)
			}
		}
	}
	if err != nil {
		return err
	}
	c.captures.Add(1)
	f.Time = time.Now()
	f.rehash(c.seed, 0, f.Height)
	return nil
}

// CaptureAreaInto brings f up to date where the screen was drawn on: area
// (a DamageFeed's) is grabbed and written over f's pixels, widened to even
// coordinates so a 4:2:0 conversion of it lines up. f must hold an earlier
// capture of this screen at its present size; otherwise, or for an empty
// area, the whole screen is captured. It reports whether any pixel changed
// and the part of f it wrote (the whole frame after a full capture).
//
// A small change costs a small copy: the X server copies the area, not the
// 4 MB of a 1280x800 screen, and nothing else is touched but the hash.
func (c *Capturer) CaptureAreaInto(ctx context.Context, f *Frame, area image.Rectangle) (changed bool, got image.Rectangle, err error) {
	if err := ctx.Err(); err != nil {
		return false, image.Rectangle{}, err
	}
	c.mu.Lock()
	if err := c.prepare(ctx); err != nil {
		c.mu.Unlock()
		return false, image.Rectangle{}, err
	}
	screen := image.Rect(0, 0, c.w, c.h)
	whole := func() (bool, image.Rectangle, error) {
		old := f.Hash
		if err := c.CaptureInto(ctx, f); err != nil {
			return false, image.Rectangle{}, err
		}
		return f.Hash != old, screen, nil
	}
	r := evenRect(area).Intersect(screen)
	if r.Empty() || f.Width != c.w || f.Height != c.h || f.Stride != c.w*4 || len(f.Pix) < c.w*c.h*4 {
		c.mu.Unlock()
		return whole()
	}
	changed, err = c.grabArea(f, r)
	c.mu.Unlock()
	if err != nil {
		// The screen may have changed size under the area (xrandr): the
		// full capture puts the size back or reports why it cannot.
		return whole()
	}
	c.captures.Add(1)
	f.Time = time.Now()
	if changed {
		f.rehash(c.seed, r.Min.Y, r.Max.Y)
	}
	return changed, r, nil
}

// evenRect widens r to even coordinates.
func evenRect(r image.Rectangle) image.Rectangle {
	return image.Rect(r.Min.X&^1, r.Min.Y&^1, (r.Max.X+1)&^1, (r.Max.Y+1)&^1)
}

// grabArea reads r of the screen and writes its rows over f's, reporting
// whether any differed. The caller holds c.mu and has prepared c.
func (c *Capturer) grabArea(f *Frame, r image.Rectangle) (bool, error) {
	w, h := r.Dx(), r.Dy()
	var src []byte
	if c.useSHM {
		if _, err := shm.GetImage(c.conn, xproto.Drawable(c.root), int16(r.Min.X), int16(r.Min.Y), uint16(w), uint16(h),
			0xffffffff, xproto.ImageFormatZPixmap, c.seg, 0).Reply(); err != nil {
			return false, c.failed(err)
		}
		src = c.shmBuf[:w*h*4]
	} else {
		reply, err := xproto.GetImage(c.conn, xproto.ImageFormatZPixmap, xproto.Drawable(c.root), int16(r.Min.X), int16(r.Min.Y),
			uint16(w), uint16(h), 0xffffffff).Reply()
		if err != nil {
			return false, c.failed(err)
		}
		if len(reply.Data) < w*h*4 {
			return false, fmt.Errorf("capture screen of %s: got %d bytes for %v, want %d", c.d.Name(), len(reply.Data), r, w*h*4)
		}
		src = reply.Data
	}
	changed := false
	for y := 0; y < h; y++ {
		from := src[y*w*4 : (y+1)*w*4]
		at := (r.Min.Y+y)*f.Stride + r.Min.X*4
		to := f.Pix[at : at+w*4]
		if !changed && !bytes.Equal(from, to) {
			changed = true
		}
		copy(to, from)
	}
	return changed, nil
}

// grab reads the whole screen into pix, through the segment or the socket.
// The caller holds c.mu and has prepared c.
func (c *Capturer) grab(pix []byte) error {
	n := len(pix)
	root := xproto.Drawable(c.root)
	if c.useSHM {
		_, err := shm.GetImage(c.conn, root, 0, 0, uint16(c.w), uint16(c.h), 0xffffffff, xproto.ImageFormatZPixmap, c.seg, 0).Reply()
		if err != nil {
			return c.failed(err)
		}
		copy(pix, c.shmBuf[:n])
		return nil
	}
	reply, err := xproto.GetImage(c.conn, xproto.ImageFormatZPixmap, root, 0, 0, uint16(c.w), uint16(c.h), 0xffffffff).Reply()
	if err != nil {
		return c.failed(err)
	}
	if len(reply.Data) < n {
		return fmt.Errorf("capture screen of %s: got %d bytes, want %d", c.d.Name(), len(reply.Data), n)
	}
	copy(pix, reply.Data[:n])
	return nil
}

// failed makes the next capture prepare again after grab's err: on the same
// connection after an X error (a resize), on a new one when the connection
// broke (the server may have restarted between prepare and now).
func (c *Capturer) failed(err error) error {
	var xerr xgb.Error
	if !errors.As(err, &xerr) {
		c.f.Drop(c.gen)
	}
	c.stale = true
	return fmt.Errorf("capture screen of %s: %w", c.d.Name(), err)
}

// UsesSHM reports whether captures go through shared memory.
func (c *Capturer) UsesSHM() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.useSHM
}

// Close frees the shared-memory segment.
func (c *Capturer) Close() error {
	c.closeDamage()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.release()
	c.closed = true
	return c.f.Close()
}
