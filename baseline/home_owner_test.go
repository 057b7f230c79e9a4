package baseline

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/deskenv/deskenv/internal/testrig"
)

// TestBaselineOutOfSessionReach: a baseline taken into a temporary directory
// sits in a 0700 directory of this process's user, so a session user whose
// home it copies (and whose owner and mode it keeps) can neither read nor
// change it.
func TestBaselineOutOfSessionReach(t *testing.T) {
	ctx := context.Background()
	home := testrig.SeedHome(t)
	b, _, err := NewHome(ctx, home, "")
	if err != nil {
		t.Fatal(err)
	}
	parent := filepath.Dir(b.Dir())
	t.Cleanup(func() { os.RemoveAll(parent) })
	fi, err := os.Stat(parent)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode().Perm() != 0o700 || int(st.Uid) != os.Geteuid() {
		t.Fatalf("baseline's directory %s: mode %v owner %d, want 0700 and this process's user %d", parent, fi.Mode().Perm(), st.Uid, os.Geteuid())
	}
}

// TestRestoreKeepsOwner: as root, what a restore writes again gets the owner
// the baseline recorded (the session user's), not root.
func TestRestoreKeepsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the files must belong to another user than the one restoring them")
	}
	ctx := context.Background()
	home := testrig.SeedHome(t)
	const uid, gid = 54321, 54321
	filepath.Walk(home, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, uid, gid) })
	b, _, err := NewHome(ctx, home, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(b.Dir())) })
	os.RemoveAll(filepath.Join(home, "notes.txt"))
	testrig.WriteFile(t, filepath.Join(home, "new.txt"), "x", 0o644)
	if _, err := b.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(filepath.Join(home, "notes.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != uid || st.Gid != gid {
		t.Fatalf("restored notes.txt belongs to %d:%d, want %d:%d", st.Uid, st.Gid, uid, gid)
	}
}
