package baseline

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"
)

// Home is a copy of the desktop user's home directory, and what restoring
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
type Home struct {
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

// NewHome prepares the baseline of home in dir. When dir already holds a
// baseline (it exists and is not empty) that baseline is used as it is, so an
// image can ship a fixed home; otherwise home is copied into dir now. An empty
// dir means a fresh temporary directory.
func NewHome(ctx context.Context, home, dir string) (*Home, SnapshotStats, error) {
	home, err := homeDir(home)
	if err != nil {
		return nil, SnapshotStats{}, err
	}
	if dir, err = copyDir(home, dir); err != nil {
		return nil, SnapshotStats{}, err
	}
	b := &Home{home: home, dir: dir}
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		// A baseline shipped with the image: home gets made equal to it
		// on the first restore (nothing is known about home yet).
		if err := b.scan(); err != nil {
			return nil, SnapshotStats{}, err
		}
		b.seen = map[string]stamp{}
		return b, SnapshotStats{}, nil
	}
	st, err := b.snapshot(ctx)
	if err != nil {
		return nil, st, err
	}
	return b, st, nil
}

// homeDir checks that home names a directory and makes it absolute.
func homeDir(home string) (string, error) {
	if home == "" {
		return "", errors.New("home directory is empty: set the desktop user's home (--home)")
	}
	abs, err := filepath.Abs(home)
	if err != nil {
		return "", fmt.Errorf("home %q: %w", home, err)
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("home %q is not a directory: the baseline is a copy of the desktop user's home", abs)
	}
	return abs, nil
}

// copyDir is where the copy of home goes: dir, made absolute, or a fresh
// temporary directory; never inside home.
func copyDir(home, dir string) (string, error) {
	if dir == "" {
		// The copy keeps home's owner and mode, so it would be the
		// session user's to read and change (and a change would come back
		// on every reset): it goes inside a directory of this process's
		// own, 0700, which the session cannot enter.
		parent, err := os.MkdirTemp("", "deskenv-baseline-")
		if err != nil {
			return "", fmt.Errorf("create a baseline directory: %w", err)
		}
		dir = filepath.Join(parent, "home") // copyTree creates it with home's mode
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("baseline directory %q: %w", dir, err)
	}
	if rel, err := filepath.Rel(home, abs); err == nil && rel != ".." && !startsWithDotDot(rel) {
		return "", fmt.Errorf("baseline directory %s is inside home %s: a reset would delete it; put it elsewhere", abs, home)
	}
	return abs, nil
}

// snapshot copies home into the baseline directory and remembers both.
func (b *Home) snapshot(ctx context.Context) (SnapshotStats, error) {
	start := time.Now()
	if err := os.RemoveAll(b.dir); err != nil {
		return SnapshotStats{}, fmt.Errorf("clear baseline directory %s: %w", b.dir, err)
	}
	st, err := copyTree(ctx, b.home, b.dir)
	if err != nil {
		return st, fmt.Errorf("snapshot home %s into %s: %w", b.home, b.dir, err)
	}
	st.Took = time.Since(start)
	if err := b.scan(); err != nil {
		return st, err
	}
	b.seen, err = stampTree(b.home)
	return st, err
}

func startsWithDotDot(rel string) bool {
	return len(rel) >= 3 && rel[:3] == ".."+string(filepath.Separator)
}

// Path is the directory restored; Dir is where the baseline copy lives.
func (b *Home) Path() string { return b.home }
func (b *Home) Dir() string  { return b.dir }

// scan reads the baseline tree's metadata into memory, so a restore compares
// against it without walking the baseline again.
func (b *Home) scan() error {
	b.entries = nil
	b.info = map[string]entryInfo{}
	return filepath.WalkDir(b.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("read baseline %s: %w", p, err)
		}
		rel := relTo(b.dir, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return fmt.Errorf("read baseline %s: %w", p, err)
		}
		if !keepable(fi.Mode()) {
			return nil
		}
		e := infoOf(fi)
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
		rel := relTo(root, p)
		out[rel] = stampOf(fi)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read home %s: %w", root, err)
	}
	return out, nil
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

// Touchup runs after the session has started again on the restored home.
// A session writes some files every time it starts (openbox its log): when
// such a file's content is the baseline's, only its times moved, and Touchup
// puts them back, so home is again exactly the baseline. Entries whose
// content differs, or that the baseline lacks, are the running session's
// own state: they are left alone and listed in the result.
func (b *Home) Touchup(ctx context.Context) (fixed int, differ []string, err error) {
	t := &touchup{b: b, ctx: ctx, seen: make(map[string]stamp, len(b.seen))}
	if err := filepath.WalkDir(b.home, t.visit); err != nil {
		return t.fixed, t.differ, err
	}
	sort.Slice(t.dirs, func(i, j int) bool { return depth(t.dirs[i]) > depth(t.dirs[j]) })
	for _, rel := range t.dirs {
		t.putBack(filepath.Join(b.home, rel), rel)
	}
	b.seen = t.seen
	return t.fixed, t.differ, nil
}

// touchup is one run of Home.Touchup.
type touchup struct {
	b      *Home
	ctx    context.Context
	seen   map[string]stamp
	dirs   []string // changed directories, whose times go back last
	differ []string
	fixed  int
}

// visit is the walk's function for one entry of home.
func (t *touchup) visit(p string, d fs.DirEntry, err error) error {
	if err != nil {
		return nil // something the session is changing right now
	}
	if err := t.ctx.Err(); err != nil {
		return err
	}
	rel := relTo(t.b.home, p)
	fi, err := os.Lstat(p)
	if err != nil {
		return nil
	}
	now := stampOf(fi)
	t.seen[rel] = now
	if s, ok := t.b.seen[rel]; ok && s == now {
		return nil
	}
	want, inBase := t.b.info[rel]
	switch {
	case !inBase || want.mode.Type() != fi.Mode().Type():
		t.differ = append(t.differ, rel)
		if fi.IsDir() {
			return fs.SkipDir
		}
	case fi.IsDir():
		t.dirs = append(t.dirs, rel)
	case fi.Mode().IsRegular():
		t.file(p, rel, fi.Size(), want)
	}
	return nil
}

// file puts back the times of a file the session rewrote unchanged, and
// lists one it changed.
func (t *touchup) file(p, rel string, size int64, want entryInfo) {
	if size != want.size || !sameContent(p, filepath.Join(t.b.dir, rel)) {
		t.differ = append(t.differ, rel)
		return
	}
	t.putBack(p, rel)
}

// putBack gives p the baseline's mode and times again.
func (t *touchup) putBack(p, rel string) {
	want := t.b.info[rel]
	os.Chmod(p, modeOf(want))
	os.Chtimes(p, want.mtime, want.mtime)
	t.fixed++
	if fi, err := os.Lstat(p); err == nil {
		t.seen[rel] = stampOf(fi)
	}
}
