package baseline

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// infoOf is what the baseline keeps of an entry: type and mode, size,
// modification time and owner (-1 when unknown).
func infoOf(fi fs.FileInfo) entryInfo {
	e := entryInfo{mode: fi.Mode(), size: fi.Size(), mtime: fi.ModTime(), uid: -1, gid: -1}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.uid, e.gid = int(sys.Uid), int(sys.Gid)
	}
	return e
}

// copyFile replaces dst with a copy of src carrying want's mode and times.
// It writes a new file and renames it over dst, so a process holding dst
// open keeps the old content and never sees a half-written one.
func copyFile(src, dst string, want entryInfo) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, fmt.Errorf("read baseline %s: %w", src, err)
	}
	defer in.Close()
	tmp := dst + ".deskenv-restore"
	os.Remove(tmp)
	n, err := writeCopy(tmp, in, want)
	if err == nil {
		err = replace(tmp, dst)
	}
	if err != nil {
		os.Remove(tmp)
		return n, fmt.Errorf("restore %s: %w", dst, err)
	}
	return n, nil
}

// writeCopy writes in to a new file tmp with want's owner, mode and times.
func writeCopy(tmp string, in io.Reader, want entryInfo) (int64, error) {
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, in)
	// Owner and mode go through the open descriptor, not the name: the
	// directory is the session user's, and a name can be swapped for a
	// link between two calls; the descriptor cannot.
	if err == nil && want.uid >= 0 {
		out.Chown(want.uid, want.gid) // fails without root or CAP_CHOWN: see chownIfRoot
	}
	if err == nil {
		err = out.Chmod(modeOf(want))
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chtimes(tmp, want.mtime, want.mtime)
	}
	return n, err
}

// replace renames tmp over dst, removing dst first if it is a directory.
func replace(tmp, dst string) error {
	if fi, err := os.Lstat(dst); err == nil && fi.IsDir() {
		if err := os.RemoveAll(dst); err != nil {
			return err
		}
	}
	return os.Rename(tmp, dst)
}

// copyTree copies src into a new directory dst, keeping modes, times, links
// and (as root) owners.
func copyTree(ctx context.Context, src, dst string) (SnapshotStats, error) {
	c := &treeCopy{ctx: ctx, src: src, dst: dst}
	if err := filepath.WalkDir(src, c.visit); err != nil {
		return c.st, err
	}
	// Deepest first, so filling a directory does not move its parent's
	// times again.
	for i := len(c.dirs) - 1; i >= 0; i-- {
		d := c.dirs[i]
		os.Chmod(d.path, modeOf(d.e))
		chownIfRoot(d.path, d.e, false)
		os.Chtimes(d.path, d.e.mtime, d.e.mtime)
	}
	return c.st, nil
}

// treeCopy is one run of copyTree.
type treeCopy struct {
	ctx      context.Context
	src, dst string
	st       SnapshotStats
	// dirs are the directories made, in walk order: their modes and times
	// are set once they are full.
	dirs []dirTime
}

type dirTime struct {
	path string
	e    entryInfo
}

// visit copies one entry.
func (c *treeCopy) visit(p string, d fs.DirEntry, err error) error {
	if err != nil {
		return err
	}
	if err := c.ctx.Err(); err != nil {
		return err
	}
	rel, _ := filepath.Rel(c.src, p)
	target := filepath.Join(c.dst, rel)
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	e := infoOf(fi)
	switch {
	case fi.IsDir():
		return c.dir(target, e)
	case fi.Mode()&fs.ModeSymlink != 0:
		return c.link(p, target, e)
	case fi.Mode().IsRegular():
		n, err := copyFile(p, target, e)
		if err != nil {
			return err
		}
		c.st.Files++
		c.st.Bytes += n
		return nil
	default:
		c.st.Skipped++
		return nil
	}
}

func (c *treeCopy) dir(target string, e entryInfo) error {
	if err := os.Mkdir(target, 0o700); err != nil {
		return err
	}
	c.dirs = append(c.dirs, dirTime{target, e})
	c.st.Dirs++
	return nil
}

func (c *treeCopy) link(p, target string, e entryInfo) error {
	l, err := os.Readlink(p)
	if err != nil {
		return err
	}
	if err := os.Symlink(l, target); err != nil {
		return err
	}
	chownIfRoot(target, e, true)
	c.st.Links++
	return nil
}

// sameContent compares two files byte by byte.
func sameContent(a, b string) bool {
	fa, err := os.Open(a)
	if err != nil {
		return false
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		return false
	}
	defer fb.Close()
	return sameReaders(fa, fb)
}

// sameReaders reads a and b to their ends and says whether they are equal.
func sameReaders(a, b io.Reader) bool {
	ba, bb := make([]byte, 32<<10), make([]byte, 32<<10)
	for {
		na, ea := io.ReadFull(a, ba)
		nb, eb := io.ReadFull(b, bb)
		if na != nb || string(ba[:na]) != string(bb[:nb]) {
			return false
		}
		if ea != nil || eb != nil {
			return atEnd(ea) && atEnd(eb)
		}
	}
}

// atEnd says whether a ReadFull error is the end of the file.
func atEnd(err error) bool { return err == io.EOF || err == io.ErrUnexpectedEOF }
