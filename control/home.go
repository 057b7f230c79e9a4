package control

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"
)

// Baseline is a copy of the desktop user's home directory, and what restoring
// it takes: every reset makes the home tree equal to the copy again.
//
// Finding what changed is cheap: after every snapshot or restore the baseline
// remembers each home entry's inode and ctime. The kernel updates ctime on any
// change to a file's content or metadata and no user can set it, so an entry
// whose inode and ctime are unchanged is known to be untouched without reading
// it, even if someone forged its mtime. Only changed, new and missing entries
// cost I/O.
//
// Limits: regular files, directories and symbolic links are kept; sockets,
// FIFOs and device files are skipped (counted in SnapshotStats). Hard links
// within home become separate copies. Extended attributes and ACLs are not
// kept. Ownership is kept when running as root or with CAP_CHOWN. Home must
// not contain the baseline directory. A baseline made in a temporary
// directory sits inside a 0700 directory of this process's user, out of the
// session user's reach.
type Baseline struct {
	home, dir string
	// seen is the (inode, ctime) of every home entry as the baseline left
	// it, keyed by path relative to home ("" is home itself).
	seen map[string]stamp
	// entries is the baseline tree, relative paths in walk order (parents
	// before children).
	entries []string
	info    map[string]entryInfo
}

type stamp struct {
	ino   uint64
	ctime syscall.Timespec
}

type entryInfo struct {
	mode  fs.FileMode
	size  int64
	mtime time.Time
	link  string
	uid   int
	gid   int
}

// SnapshotStats says what a snapshot copied.
type SnapshotStats struct {
	Files, Dirs, Links, Skipped int
	Bytes                       int64
	Took                        time.Duration
}

// RestoreStats says what a restore had to do.
type RestoreStats struct {
	Checked  int // home entries looked at
	Removed  int // entries not in the baseline, removed
	Rewrote  int // changed entries copied again from the baseline
	Created  int // baseline entries missing from home, recreated
	Fixed    int // entries whose mode or times were put back
	Bytes    int64
	Took     time.Duration
	Baseline string
}

// NewBaseline prepares the baseline of home in dir. When dir already holds a
// baseline (it exists and is not empty) that baseline is used as it is, so an
// image can ship a fixed home; otherwise home is copied into dir now. An empty
// dir means a fresh temporary directory.
func NewBaseline(ctx context.Context, home, dir string) (*Baseline, SnapshotStats, error) {
	var st SnapshotStats
	if home == "" {
		return nil, st, errors.New("home directory is empty: set the desktop user's home (--home)")
	}
	home, err := filepath.Abs(home)
	if err != nil {
		return nil, st, fmt.Errorf("home %q: %w", home, err)
	}
	if fi, err := os.Stat(home); err != nil || !fi.IsDir() {
		return nil, st, fmt.Errorf("home %q is not a directory: the baseline is a copy of the desktop user's home", home)
	}
	if dir == "" {
		// The copy keeps home's owner and mode, so it would be the
		// session user's to read and change (and a change would come back
		// on every reset): it goes inside a directory of this process's
		// own, 0700, which the session cannot enter.
		parent, err := os.MkdirTemp("", "deskenv-baseline-")
		if err != nil {
			return nil, st, fmt.Errorf("create a baseline directory: %w", err)
		}
		dir = filepath.Join(parent, "home") // copyTree creates it with home's mode
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, st, fmt.Errorf("baseline directory %q: %w", dir, err)
	}
	if rel, err := filepath.Rel(home, dir); err == nil && rel != ".." && !startsWithDotDot(rel) {
		return nil, st, fmt.Errorf("baseline directory %s is inside home %s: a reset would delete it; put it elsewhere", dir, home)
	}
	b := &Baseline{home: home, dir: dir}
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		// A baseline shipped with the image: home gets made equal to it
		// on the first restore (nothing is known about home yet).
		if err := b.scan(); err != nil {
			return nil, st, err
		}
		b.seen = map[string]stamp{}
		return b, st, nil
	}
	start := time.Now()
	if err := os.RemoveAll(dir); err != nil {
		return nil, st, fmt.Errorf("clear baseline directory %s: %w", dir, err)
	}
	st, err = copyTree(ctx, home, dir)
	if err != nil {
		return nil, st, fmt.Errorf("snapshot home %s into %s: %w", home, dir, err)
	}
	st.Took = time.Since(start)
	if err := b.scan(); err != nil {
		return nil, st, err
	}
	b.seen, err = stampTree(home)
	if err != nil {
		return nil, st, err
	}
	return b, st, nil
}

func startsWithDotDot(rel string) bool {
	return len(rel) >= 3 && rel[:3] == ".."+string(filepath.Separator)
}

// Home is the directory restored; Dir is where the baseline copy lives.
func (b *Baseline) Home() string { return b.home }
func (b *Baseline) Dir() string  { return b.dir }

// scan reads the baseline tree's metadata into memory, so a restore compares
// against it without walking the baseline again.
func (b *Baseline) scan() error {
	b.entries = nil
	b.info = map[string]entryInfo{}
	return filepath.WalkDir(b.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("read baseline %s: %w", p, err)
		}
		rel, _ := filepath.Rel(b.dir, p)
		if rel == "." {
			rel = ""
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return fmt.Errorf("read baseline %s: %w", p, err)
		}
		if !keepable(fi.Mode()) {
			return nil
		}
		e := entryInfo{mode: fi.Mode(), size: fi.Size(), mtime: fi.ModTime(), uid: -1, gid: -1}
		if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
			e.uid, e.gid = int(sys.Uid), int(sys.Gid)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			if e.link, err = os.Readlink(p); err != nil {
				return fmt.Errorf("read baseline link %s: %w", p, err)
			}
		}
		b.entries = append(b.entries, rel)
		b.info[rel] = e
		return nil
	})
}

func keepable(m fs.FileMode) bool {
	return m.IsRegular() || m.IsDir() || m&fs.ModeSymlink != 0
}

func stampOf(fi fs.FileInfo) stamp {
	sys, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return stamp{}
	}
	return stamp{ino: sys.Ino, ctime: sys.Ctim}
}

func stampTree(root string) (map[string]stamp, error) {
	out := map[string]stamp{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			rel = ""
		}
		out[rel] = stampOf(fi)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read home %s: %w", root, err)
	}
	return out, nil
}

// Restore makes home equal to the baseline: it removes what the baseline does
// not have, copies again what changed and recreates what is missing, then puts
// back modes and modification times (directories last, since changing their
// entries moves their mtime).
func (b *Baseline) Restore(ctx context.Context) (RestoreStats, error) {
	start := time.Now()
	st := RestoreStats{Baseline: b.dir}
	present := map[string]bool{}
	seen := make(map[string]stamp, len(b.entries))
	var dirty []string // baseline entries to (re)write, in walk order
	dirtyDirs := map[string]bool{}

	if fi, err := os.Lstat(b.home); err != nil || !fi.IsDir() {
		// Home itself is gone or replaced: start it again from nothing.
		if err == nil {
			os.RemoveAll(b.home)
		}
		if err := os.MkdirAll(b.home, 0o755); err != nil {
			return st, fmt.Errorf("recreate home %s: %w", b.home, err)
		}
	}
	err := filepath.WalkDir(b.home, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if p != b.home {
				// Unreadable entry (e.g. a directory chmod 000): remove it
				// if it is not in the baseline, else it is rewritten.
				rel, _ := filepath.Rel(b.home, p)
				if _, ok := b.info[rel]; !ok {
					makeWritable(p)
					if rmErr := os.RemoveAll(p); rmErr == nil {
						st.Removed++
						return fs.SkipDir
					}
				}
			}
			return fmt.Errorf("read home %s: %w", p, err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		st.Checked++
		rel, _ := filepath.Rel(b.home, p)
		if rel == "." {
			rel = ""
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return nil // vanished meanwhile
		}
		want, inBase := b.info[rel]
		if !inBase || fi.Mode().Type() != want.mode.Type() {
			if rel == "" {
				return fmt.Errorf("home %s is not a directory", b.home)
			}
			makeWritable(filepath.Dir(p))
			if err := os.RemoveAll(p); err != nil {
				makeWritable(p)
				if err := os.RemoveAll(p); err != nil {
					return fmt.Errorf("remove %s (not in the baseline): %w", p, err)
				}
			}
			st.Removed++
			dirtyDirs[filepath.Dir(rel)] = true
			if fi.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		present[rel] = true
		now := stampOf(fi)
		seen[rel] = now
		if s, ok := b.seen[rel]; ok && s == now {
			return nil
		}
		if fi.IsDir() {
			dirtyDirs[rel] = true
			if fi.Mode().Perm()&0o700 != 0o700 {
				// Make sure the walk can enter and clean it; the mode is
				// put back afterwards.
				os.Chmod(p, fi.Mode().Perm()|0o700)
			}
			return nil
		}
		dirty = append(dirty, rel)
		return nil
	})
	if err != nil {
		return st, err
	}
	for _, rel := range b.entries {
		if !present[rel] {
			dirty = append(dirty, rel)
			st.Created++
		}
	}
	sort.SliceStable(dirty, func(i, j int) bool { return depth(dirty[i]) < depth(dirty[j]) })
	for _, rel := range dirty {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		want := b.info[rel]
		dst := filepath.Join(b.home, rel)
		// The parent may have been made read-only; its mode is put back
		// with the other directories below.
		makeWritable(filepath.Dir(dst))
		if present[rel] && !want.mode.IsDir() {
			st.Rewrote++
		}
		switch {
		case want.mode.IsDir():
			if err := os.Mkdir(dst, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return st, fmt.Errorf("recreate directory %s: %w", dst, err)
			}
			dirtyDirs[rel] = true
		case want.mode&fs.ModeSymlink != 0:
			os.Remove(dst)
			if err := os.Symlink(want.link, dst); err != nil {
				return st, fmt.Errorf("recreate link %s: %w", dst, err)
			}
			chownIfRoot(dst, want, true)
		default:
			n, err := copyFile(filepath.Join(b.dir, rel), dst, want)
			if err != nil {
				return st, err
			}
			st.Bytes += n
		}
		dirtyDirs[filepath.Dir(rel)] = true
	}
	// Directories deepest first: setting a child's times does not move its
	// parent's mtime, but creating entries in it did.
	dirs := make([]string, 0, len(dirtyDirs))
	for d := range dirtyDirs {
		if d == "." {
			d = ""
		}
		if _, ok := b.info[d]; ok {
			dirs = append(dirs, d)
		}
	}
	sort.Slice(dirs, func(i, j int) bool { return depth(dirs[i]) > depth(dirs[j]) })
	for _, rel := range dirs {
		want := b.info[rel]
		p := filepath.Join(b.home, rel)
		if err := os.Chmod(p, want.mode.Perm()|want.mode&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)); err != nil {
			return st, fmt.Errorf("restore mode of %s: %w", p, err)
		}
		chownIfRoot(p, want, false)
		if err := os.Chtimes(p, want.mtime, want.mtime); err != nil {
			return st, fmt.Errorf("restore times of %s: %w", p, err)
		}
		st.Fixed++
	}
	// Only what was written has a new stamp; the walk saw the rest.
	for _, rel := range append(dirty, dirs...) {
		if fi, err := os.Lstat(filepath.Join(b.home, rel)); err == nil {
			seen[rel] = stampOf(fi)
		}
	}
	b.seen = seen
	st.Took = time.Since(start)
	return st, nil
}

func depth(rel string) int {
	if rel == "" || rel == "." {
		return 0
	}
	n := 1
	for _, c := range rel {
		if c == filepath.Separator {
			n++
		}
	}
	return n
}

func makeWritable(p string) {
	if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
		os.Chmod(p, fi.Mode().Perm()|0o700)
	}
}

// chownIfRoot gives p the owner the baseline recorded. That takes root or
// CAP_CHOWN (the image's deskenv has it, to keep the session user's home
// the session user's); without either a chown to another user fails and is
// ignored, and a chown to oneself changes nothing.
func chownIfRoot(p string, e entryInfo, link bool) {
	if e.uid < 0 {
		return
	}
	if link {
		os.Lchown(p, e.uid, e.gid)
		return
	}
	os.Chown(p, e.uid, e.gid)
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
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, fmt.Errorf("restore %s: %w", dst, err)
	}
	n, err := io.Copy(out, in)
	// Owner and mode go through the open descriptor, not the name: the
	// directory is the session user's, and a name can be swapped for a
	// link between two calls; the descriptor cannot.
	if err == nil && want.uid >= 0 {
		out.Chown(want.uid, want.gid) // fails without root or CAP_CHOWN: see chownIfRoot
	}
	if err == nil {
		err = out.Chmod(want.mode.Perm() | want.mode&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky))
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chtimes(tmp, want.mtime, want.mtime)
	}
	if err == nil {
		if fi, statErr := os.Lstat(dst); statErr == nil && fi.IsDir() {
			err = os.RemoveAll(dst)
		}
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.Remove(tmp)
		return n, fmt.Errorf("restore %s: %w", dst, err)
	}
	return n, nil
}

// copyTree copies src into a new directory dst, keeping modes, times, links
// and (as root) owners.
func copyTree(ctx context.Context, src, dst string) (SnapshotStats, error) {
	var st SnapshotStats
	type dirTime struct {
		path string
		e    entryInfo
	}
	var dirs []dirTime
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		e := entryInfo{mode: fi.Mode(), mtime: fi.ModTime(), uid: -1, gid: -1}
		if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
			e.uid, e.gid = int(sys.Uid), int(sys.Gid)
		}
		switch {
		case fi.IsDir():
			if err := os.Mkdir(target, 0o700); err != nil {
				return err
			}
			dirs = append(dirs, dirTime{target, e})
			st.Dirs++
		case fi.Mode()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if err := os.Symlink(l, target); err != nil {
				return err
			}
			chownIfRoot(target, e, true)
			st.Links++
		case fi.Mode().IsRegular():
			n, err := copyFile(p, target, e)
			if err != nil {
				return err
			}
			st.Files++
			st.Bytes += n
		default:
			st.Skipped++
		}
		return nil
	})
	if err != nil {
		return st, err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		d := dirs[i]
		os.Chmod(d.path, d.e.mode.Perm()|d.e.mode&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky))
		chownIfRoot(d.path, d.e, false)
		os.Chtimes(d.path, d.e.mtime, d.e.mtime)
	}
	return st, nil
}

// Touchup runs after the session has started again on the restored home.
// A session writes some files every time it starts (openbox its log): when
// such a file's content is the baseline's, only its times moved, and Touchup
// puts them back, so home is again exactly the baseline. Entries whose
// content differs, or that the baseline lacks, are the running session's
// own state: they are left alone and listed in the result.
func (b *Baseline) Touchup(ctx context.Context) (fixed int, differ []string, err error) {
	var dirs []string
	seen := make(map[string]stamp, len(b.seen))
	err = filepath.WalkDir(b.home, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // something the session is changing right now
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, _ := filepath.Rel(b.home, p)
		if rel == "." {
			rel = ""
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return nil
		}
		now := stampOf(fi)
		seen[rel] = now
		if s, ok := b.seen[rel]; ok && s == now {
			return nil
		}
		want, inBase := b.info[rel]
		switch {
		case !inBase || want.mode.Type() != fi.Mode().Type():
			differ = append(differ, rel)
			if fi.IsDir() {
				return fs.SkipDir
			}
		case fi.IsDir():
			dirs = append(dirs, rel)
		case fi.Mode().IsRegular():
			if fi.Size() != want.size || !sameContent(p, filepath.Join(b.dir, rel)) {
				differ = append(differ, rel)
				return nil
			}
			os.Chmod(p, want.mode.Perm()|want.mode&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky))
			os.Chtimes(p, want.mtime, want.mtime)
			fixed++
			if fi, err := os.Lstat(p); err == nil {
				seen[rel] = stampOf(fi)
			}
		}
		return nil
	})
	if err != nil {
		return fixed, differ, err
	}
	sort.Slice(dirs, func(i, j int) bool { return depth(dirs[i]) > depth(dirs[j]) })
	for _, rel := range dirs {
		want := b.info[rel]
		p := filepath.Join(b.home, rel)
		os.Chmod(p, want.mode.Perm()|want.mode&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky))
		os.Chtimes(p, want.mtime, want.mtime)
		fixed++
		if fi, err := os.Lstat(p); err == nil {
			seen[rel] = stampOf(fi)
		}
	}
	b.seen = seen
	return fixed, differ, nil
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
	ba, bb := make([]byte, 32<<10), make([]byte, 32<<10)
	for {
		na, ea := io.ReadFull(fa, ba)
		nb, eb := io.ReadFull(fb, bb)
		if na != nb || string(ba[:na]) != string(bb[:nb]) {
			return false
		}
		if ea != nil || eb != nil {
			return (ea == io.EOF || ea == io.ErrUnexpectedEOF) && (eb == io.EOF || eb == io.ErrUnexpectedEOF)
		}
	}
}
