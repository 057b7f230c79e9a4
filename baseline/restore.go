package baseline

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// Restore makes home equal to the baseline: it removes what the baseline does
// not have, copies again what changed and recreates what is missing, then puts
// back modes and modification times (directories last, since changing their
// entries moves their mtime).
func (b *Home) Restore(ctx context.Context) (RestoreStats, error) {
	start := time.Now()
	r := &restore{
		b:         b,
		ctx:       ctx,
		st:        RestoreStats{Baseline: b.dir},
		present:   map[string]bool{},
		seen:      make(map[string]stamp, len(b.entries)),
		dirtyDirs: map[string]bool{},
	}
	for _, step := range []func() error{r.ensureHome, r.walk, r.write, r.fixDirs} {
		if err := step(); err != nil {
			return r.st, err
		}
	}
	r.restamp()
	b.seen = r.seen
	r.st.Took = time.Since(start)
	return r.st, nil
}

// restore is one run of Home.Restore: what the walk of home found, and what
// is left to write.
type restore struct {
	b       *Home
	ctx     context.Context
	st      RestoreStats
	present map[string]bool  // baseline entries found in home, type unchanged
	seen    map[string]stamp // home's stamps as the restore leaves them
	dirty   []string         // baseline entries to (re)write, in walk order
	// dirtyDirs are directories whose entries, mode or times changed: their
	// mode and times are put back last.
	dirtyDirs map[string]bool
	dirs      []string // dirtyDirs that are in the baseline, deepest first
}

// ensureHome starts home again from nothing when it is gone or replaced.
func (r *restore) ensureHome() error {
	home := r.b.home
	fi, err := os.Lstat(home)
	if err == nil && fi.IsDir() {
		return nil
	}
	if err == nil {
		os.RemoveAll(home)
	}
	if err := os.MkdirAll(home, 0o755); err != nil {
		return fmt.Errorf("recreate home %s: %w", home, err)
	}
	return nil
}

// walk looks at every entry of home: what the baseline lacks goes, what
// changed since the last restore is marked dirty; then every baseline entry
// the walk did not find is dirty too.
func (r *restore) walk() error {
	if err := filepath.WalkDir(r.b.home, r.visit); err != nil {
		return err
	}
	for _, rel := range r.b.entries {
		if !r.present[rel] {
			r.dirty = append(r.dirty, rel)
			r.st.Created++
		}
	}
	return nil
}

// visit is the walk's function for one entry of home.
func (r *restore) visit(p string, d fs.DirEntry, err error) error {
	if err != nil {
		return r.unreadable(p, err)
	}
	if err := r.ctx.Err(); err != nil {
		return err
	}
	r.st.Checked++
	rel := relTo(r.b.home, p)
	fi, err := os.Lstat(p)
	if err != nil {
		return nil // vanished meanwhile
	}
	want, inBase := r.b.info[rel]
	if !inBase || fi.Mode().Type() != want.mode.Type() {
		return r.remove(p, rel, fi)
	}
	r.present[rel] = true
	now := stampOf(fi)
	r.seen[rel] = now
	if s, ok := r.b.seen[rel]; ok && s == now {
		return nil
	}
	r.changed(p, rel, fi)
	return nil
}

// changed marks an entry that changed since the last restore: a file is
// written again, a directory gets its mode and times back.
func (r *restore) changed(p, rel string, fi fs.FileInfo) {
	if fi.IsDir() {
		r.dirtyDirs[rel] = true
		if fi.Mode().Perm()&0o700 != 0o700 {
			// Make sure the walk can enter and clean it; the mode is put
			// back afterwards.
			os.Chmod(p, fi.Mode().Perm()|0o700)
		}
		return
	}
	r.dirty = append(r.dirty, rel)
}

// unreadable handles an entry the walk could not read (e.g. a directory
// chmod 000): it is removed if it is not in the baseline, else rewritten.
func (r *restore) unreadable(p string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if p != r.b.home {
		if _, ok := r.b.info[relTo(r.b.home, p)]; !ok {
			makeWritable(p)
			if rmErr := os.RemoveAll(p); rmErr == nil {
				r.st.Removed++
				return fs.SkipDir
			}
		}
	}
	return fmt.Errorf("read home %s: %w", p, err)
}

// remove deletes an entry of home the baseline lacks, or has as another
// type.
func (r *restore) remove(p, rel string, fi fs.FileInfo) error {
	if rel == "" {
		return fmt.Errorf("home %s is not a directory", r.b.home)
	}
	makeWritable(filepath.Dir(p))
	if err := os.RemoveAll(p); err != nil {
		makeWritable(p)
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("remove %s (not in the baseline): %w", p, err)
		}
	}
	r.st.Removed++
	r.dirtyDirs[filepath.Dir(rel)] = true
	if fi.IsDir() {
		return fs.SkipDir
	}
	return nil
}

// write copies every dirty entry from the baseline, parents first.
func (r *restore) write() error {
	sort.SliceStable(r.dirty, func(i, j int) bool { return depth(r.dirty[i]) < depth(r.dirty[j]) })
	for _, rel := range r.dirty {
		if err := r.ctx.Err(); err != nil {
			return err
		}
		if err := r.writeEntry(rel); err != nil {
			return err
		}
		r.dirtyDirs[filepath.Dir(rel)] = true
	}
	return nil
}

// writeEntry makes one entry of home the baseline's again.
func (r *restore) writeEntry(rel string) error {
	want := r.b.info[rel]
	dst := filepath.Join(r.b.home, rel)
	// The parent may have been made read-only; its mode is put back with
	// the other directories.
	makeWritable(filepath.Dir(dst))
	if r.present[rel] && !want.mode.IsDir() {
		r.st.Rewrote++
	}
	switch {
	case want.mode.IsDir():
		if err := os.Mkdir(dst, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("recreate directory %s: %w", dst, err)
		}
		r.dirtyDirs[rel] = true
	case want.mode&fs.ModeSymlink != 0:
		os.Remove(dst)
		if err := os.Symlink(want.link, dst); err != nil {
			return fmt.Errorf("recreate link %s: %w", dst, err)
		}
		chownIfRoot(dst, want, true)
	default:
		n, err := copyFile(filepath.Join(r.b.dir, rel), dst, want)
		if err != nil {
			return err
		}
		r.st.Bytes += n
	}
	return nil
}

// fixDirs puts back the mode, owner and times of every dirty directory,
// deepest first: setting a child's times does not move its parent's mtime,
// but creating entries in it did.
func (r *restore) fixDirs() error {
	for d := range r.dirtyDirs {
		if d == "." {
			d = ""
		}
		if _, ok := r.b.info[d]; ok {
			r.dirs = append(r.dirs, d)
		}
	}
	sort.Slice(r.dirs, func(i, j int) bool { return depth(r.dirs[i]) > depth(r.dirs[j]) })
	for _, rel := range r.dirs {
		want := r.b.info[rel]
		p := filepath.Join(r.b.home, rel)
		if err := os.Chmod(p, modeOf(want)); err != nil {
			return fmt.Errorf("restore mode of %s: %w", p, err)
		}
		chownIfRoot(p, want, false)
		if err := os.Chtimes(p, want.mtime, want.mtime); err != nil {
			return fmt.Errorf("restore times of %s: %w", p, err)
		}
		r.st.Fixed++
	}
	return nil
}

// restamp records the new stamps of what was written; the walk saw the
// rest.
func (r *restore) restamp() {
	for _, rel := range append(r.dirty, r.dirs...) {
		if fi, err := os.Lstat(filepath.Join(r.b.home, rel)); err == nil {
			r.seen[rel] = stampOf(fi)
		}
	}
}

// relTo is p relative to root, "" for root itself.
func relTo(root, p string) string {
	rel, _ := filepath.Rel(root, p)
	if rel == "." {
		return ""
	}
	return rel
}

// modeOf is the mode an entry is given back: permissions and the setuid,
// setgid and sticky bits.
func modeOf(e entryInfo) fs.FileMode {
	return e.mode.Perm() | e.mode&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)
}
