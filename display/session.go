package display

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"

	"github.com/deskenv/deskenv/internal/proc"
)

// Sessions. A session is what runs on the display besides the X server:
// the window manager and the apps of Config, and, for the desktop session,
// a panel (tint2: launchers, the window list and a clock), a wallpaper and
// a home skeleton that configures the desktop's applications so they start
// without first-run questions in every episode.
const (
	// SessionBare is openbox and the apps: the light desktop for pools.
	SessionBare = "bare"
	// SessionDesktop adds the panel, the wallpaper and the home skeleton.
	SessionDesktop = "desktop"
)

// RolePanel is the panel's role in Exit and Process.
const RolePanel = "panel"

// DesktopPrograms are the programs the desktop session's panel and
// launchers start; MissingForDesktop says which of them are not installed.
var desktopPrograms = []string{"tint2", "pcmanfm", "mousepad", "galculator", "mupdf-gl", "libreoffice", "chromium"}

// MissingForDesktop names the desktop session's programs not found on
// $PATH (none: the desktop session can run).
func MissingForDesktop() []string {
	var missing []string
	for _, p := range desktopPrograms {
		if _, err := exec.LookPath(p); err != nil {
			missing = append(missing, p)
		}
	}
	return missing
}

// panelFiles are the panel's configuration (tint2rc) and its launchers'
// .desktop files.
//
//go:embed panel
var panelFiles embed.FS

// writePanel writes the panel's files into a directory panel under dir (a
// directory of this process's user that the session may enter, the X
// authorization directory) and returns the panel's command line. The files
// are this process's user's and read-only to the session: the panel is not
// restarted by a reset, so what it reads must be out of the agent's reach,
// or a changed tint2rc (loaded on SIGUSR1, or when the agent kills the
// panel) would carry over into the next episode.
func writePanel(dir string) ([]string, error) {
	pdir := filepath.Join(dir, "panel")
	if err := os.Mkdir(pdir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("write the panel's configuration: %w", err)
	}
	ents, err := panelFiles.ReadDir("panel")
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		data, err := panelFiles.ReadFile("panel/" + e.Name())
		if err != nil {
			return nil, err
		}
		data = bytes.ReplaceAll(data, []byte("{{DIR}}"), []byte(pdir))
		if err := os.WriteFile(filepath.Join(pdir, e.Name()), data, 0o644); err != nil {
			return nil, fmt.Errorf("write the panel's configuration: %w", err)
		}
	}
	return []string{"tint2", "-c", filepath.Join(pdir, "tint2rc")}, nil
}

// skeleton is the desktop session's home skeleton: a LibreOffice profile with
// no tip of the day, no first-start wizard, no recovery prompt, no "Keep
// current format" question and high macro security, and pcmanfm's settings.
//
//go:embed all:skeleton
var skeleton embed.FS

// writeSkeleton copies the home skeleton into home, as the session's user
// (cred; nil: this process's). A file that exists is left alone: the home
// may be an operator's (--home) with settings of its own, and what is
// written once is in the baseline every reset restores.
func writeSkeleton(home string, cred *syscall.Credential) error {
	chown := func(p string) error {
		if cred == nil {
			return nil
		}
		return os.Lchown(p, int(cred.Uid), int(cred.Gid))
	}
	return fs.WalkDir(skeleton, "skeleton", func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("skeleton", p)
		if rel == "." {
			return nil
		}
		dst := filepath.Join(home, rel)
		if e.IsDir() {
			if err := os.Mkdir(dst, 0o755); err != nil {
				if errors.Is(err, fs.ErrExist) {
					return nil
				}
				return fmt.Errorf("home skeleton: %w", err)
			}
			return chown(dst)
		}
		data, err := skeleton.ReadFile(p)
		if err != nil {
			return err
		}
		f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("home skeleton: %w", err)
		}
		_, werr := f.Write(data)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return fmt.Errorf("home skeleton %s: %w", dst, werr)
		}
		return chown(dst)
	})
}

// Wallpaper colours: a vertical gradient from top to bottom.
var wallTop, wallBottom = [3]uint8{0x2f, 0x4f, 0x6f}, [3]uint8{0x6d, 0x8f, 0xab}

// paintWallpaper makes the root window's background a vertical gradient.
//
// deskenv paints it itself rather than running hsetroot: the background is
// an attribute of the root window, held by the server, not by a client, so
// a reset (which kills every X client and puts the root window's
// properties back) leaves it alone; hsetroot's pixmap would belong to a
// retained client that the reset's client kill frees. No pseudo-transparency
// property (_XROOTPMAP_ID) is set: nothing on this desktop uses it, and a
// root property would be one more thing the baseline has to match. The
// session repaints it at every start, so a task that changed the
// background (xsetroot) gets it back at the next reset.
//
// The pixmap is wallWidth pixels wide and tiles across the screen: some
// 200 KiB for the server at 800 lines, whatever the screen's width.
func paintWallpaper(conn *xgb.Conn, screen xproto.ScreenInfo) error {
	h := screen.HeightInPixels
	vis := visualOf(screen)
	if vis == nil || vis.Class != xproto.VisualClassTrueColor {
		// Not a true colour screen (deskenv starts 16 or 24 bit ones): a
		// flat colour from the colormap would need allocating; keep it simple.
		return errors.New("the root window's visual is not TrueColor")
	}
	pix, err := xproto.NewPixmapId(conn)
	if err != nil {
		return err
	}
	if err := xproto.CreatePixmapChecked(conn, screen.RootDepth, pix, xproto.Drawable(screen.Root), wallWidth, h).Check(); err != nil {
		return fmt.Errorf("create the wallpaper: %w", err)
	}
	defer xproto.FreePixmap(conn, pix)
	gc, err := xproto.NewGcontextId(conn)
	if err != nil {
		return err
	}
	xproto.CreateGC(conn, gc, xproto.Drawable(pix), 0, nil)
	defer xproto.FreeGC(conn, gc)
	// One PutImage of the whole tile: a reset repaints the wallpaper, and
	// a fill request per row cost it about 10 ms.
	img, err := gradientTile(xproto.Setup(conn), screen.RootDepth, vis, h)
	if err != nil {
		return err
	}
	xproto.PutImage(conn, xproto.ImageFormatZPixmap, xproto.Drawable(pix), gc, wallWidth, h, 0, 0, 0, screen.RootDepth, img)
	// The root keeps the pixmap after it is freed: the background holds a
	// reference of the server's own.
	if err := xproto.ChangeWindowAttributesChecked(conn, screen.Root, xproto.CwBackPixmap, []uint32{uint32(pix)}).Check(); err != nil {
		return fmt.Errorf("set the wallpaper: %w", err)
	}
	return xproto.ClearAreaChecked(conn, true, screen.Root, 0, 0, 0, 0).Check()
}

// wallWidth is the wallpaper tile's width. The X server fills the screen
// with the tile row by row, a tile's width at a time: a tile one pixel wide
// made that fill (every reset repaints the wallpaper) cost milliseconds.
const wallWidth = 64

// gradientTile is the wallpaper's tile, wallWidth wide and h high, as
// ZPixmap image data the server takes for depth: its bits per pixel,
// scanline padding and byte order.
func gradientTile(setup *xproto.SetupInfo, depth byte, vis *xproto.VisualInfo, h uint16) ([]byte, error) {
	bpp, pad := 0, 0
	for _, f := range setup.PixmapFormats {
		if f.Depth == depth {
			bpp, pad = int(f.BitsPerPixel), int(f.ScanlinePad)
		}
	}
	if bpp != 16 && bpp != 32 || pad%8 != 0 || pad == 0 {
		return nil, fmt.Errorf("no pixmap format of %d bits per pixel for depth %d", bpp, depth)
	}
	stride := (wallWidth*bpp + pad - 1) / pad * pad / 8
	out := make([]byte, stride*int(h))
	for y := 0; y < int(h); y++ {
		var c [3]uint8
		for i := range c {
			c[i] = uint8(int(wallTop[i]) + (int(wallBottom[i])-int(wallTop[i]))*y/max(int(h)-1, 1))
		}
		p := pixelOf(vis, c)
		row := out[y*stride:]
		for i := 0; i < bpp/8; i++ {
			shift := 8 * i
			if setup.ImageByteOrder == xproto.ImageOrderMSBFirst {
				shift = bpp - 8 - 8*i
			}
			row[i] = byte(p >> shift)
		}
		for x := 1; x < wallWidth; x++ {
			copy(row[x*bpp/8:(x+1)*bpp/8], row[:bpp/8])
		}
	}
	return out, nil
}

// visualOf is the root window's visual.
func visualOf(s xproto.ScreenInfo) *xproto.VisualInfo {
	for _, d := range s.AllowedDepths {
		for i, v := range d.Visuals {
			if v.VisualId == s.RootVisual {
				return &d.Visuals[i]
			}
		}
	}
	return nil
}

// pixelOf is the pixel value of colour c in a TrueColor visual.
func pixelOf(v *xproto.VisualInfo, c [3]uint8) uint32 {
	return scale(c[0], v.RedMask) | scale(c[1], v.GreenMask) | scale(c[2], v.BlueMask)
}

// scale puts an 8-bit channel into the bits of mask.
func scale(x uint8, mask uint32) uint32 {
	if mask == 0 {
		return 0
	}
	shift := 0
	for mask>>shift&1 == 0 {
		shift++
	}
	bits := 0
	for mask>>(shift+bits)&1 == 1 {
		bits++
	}
	v := uint32(x)
	if bits < 8 {
		v >>= 8 - bits
	} else {
		v <<= bits - 8
	}
	return v << shift & mask
}

// descendantGroups are the process groups of the processes below pids in
// the process tree (pids' own groups left out), read from /proc.
func descendantGroups(pids []int) []int {
	roots := map[int]bool{}
	for _, p := range pids {
		roots[p] = true
	}
	// Listing /proc does not block: no context to end it early, and an
	// unreadable /proc leaves nothing to find (the group kills still run).
	tree, _ := proc.Default().ReadTree(context.Background())
	seen := map[int]bool{}
	var out []int
	for _, pid := range tree.Below(roots) {
		if g, _ := tree.Group(pid); !roots[g] && g > 1 && !seen[g] {
			seen[g] = true
			out = append(out, g)
		}
	}
	return out
}

// panelIntact reports whether the panel, which a reset keeps, is as the
// session started it: running (not stopped: the agent, as the session's
// user, may SIGSTOP it; not traced) and with a viewable window of its own (the agent
// may unmap it through X). A panel that is not is replaced, so no episode
// inherits what the last one did to it. No panel: true.
func (d *Display) panelIntact() bool {
	pids := d.PanelPIDs()
	if len(pids) == 0 {
		return true
	}
	pid := pids[0]
	if processUnfit(pid) != "" {
		return false // gone, stopped or traced
	}
	// The shared connection: a question of a few round trips, and a
	// connection of its own cost a reset a dial and its extension set-up.
	c := d.Conn()
	if c == nil {
		return true // the X server's trouble, not the panel's
	}
	name := "_NET_WM_PID"
	a, err := xproto.InternAtom(c, false, uint16(len(name)), name).Reply()
	if err != nil {
		return true
	}
	return hasViewableWindowOf(c, d.Root(), a.Atom, uint32(pid))
}

// hasViewableWindowOf looks for a viewable window whose _NET_WM_PID is
// pid, at the top and one level down (inside a window manager's frame).
// Each level's questions are sent at once and answered together: asked one
// by one, the forty-odd windows of a desktop cost a reset milliseconds.
func hasViewableWindowOf(c *xgb.Conn, root xproto.Window, pidAtom xproto.Atom, pid uint32) bool {
	level := []xproto.Window{root}
	for depth := 0; depth < 2 && len(level) > 0; depth++ {
		trees := make([]xproto.QueryTreeCookie, len(level))
		for i, w := range level {
			trees[i] = xproto.QueryTree(c, w)
		}
		var kids []xproto.Window
		for _, ck := range trees {
			if t, err := ck.Reply(); err == nil {
				kids = append(kids, t.Children...)
			}
		}
		attrs := make([]xproto.GetWindowAttributesCookie, len(kids))
		props := make([]xproto.GetPropertyCookie, len(kids))
		for i, w := range kids {
			attrs[i] = xproto.GetWindowAttributes(c, w)
			props[i] = xproto.GetProperty(c, false, w, pidAtom, xproto.AtomCardinal, 0, 1)
		}
		var next []xproto.Window
		found := false
		for i, w := range kids {
			// Every reply is read, so none is left queued on the
			// shared connection.
			a, err := attrs[i].Reply()
			p, perr := props[i].Reply()
			if err != nil || a.MapState != xproto.MapStateViewable {
				continue
			}
			if perr == nil && p.Format == 32 && len(p.Value) >= 4 && xgb.Get32(p.Value) == pid {
				found = true
			}
			next = append(next, w)
		}
		if found {
			return true
		}
		level = next
	}
	return false
}
