package appliance

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func TestClaimSessionUsers(t *testing.T) {
	self := fmt.Sprintf("pid %d", os.Getpid())
	for _, c := range []struct {
		name    string
		held    []string // users another deskenv holds
		flag    string
		n       int
		auto    bool
		want    []string
		wantErr []string // words the error must hold
	}{
		{name: "free", flag: "u", n: 1, want: []string{"u"}},
		{name: "free pool", flag: "u", n: 2, want: []string{"u0", "u1"}},
		{name: "named and held", held: []string{"u"}, flag: "u", n: 1,
			wantErr: []string{"session user u is in use by another deskenv", self, "--session-user"}},
		{name: "chosen and held", held: []string{"u"}, flag: "u", n: 1, auto: true, want: []string{"u-b"}},
		{name: "chosen, two held", held: []string{"u", "u-b"}, flag: "u", n: 1, auto: true, want: []string{"u-c"}},
		// One desktop's user of the pool held: the whole set moves on.
		{name: "chosen pool, one held", held: []string{"u1"}, flag: "u", n: 2, auto: true, want: []string{"u-b0", "u-b1"}},
		{name: "named list, one held", held: []string{"y"}, flag: "x,y", n: 2, wantErr: []string{"session user y is in use"}},
		{name: "chosen, all held", held: []string{"u", "u-b", "u-c", "u-d", "u-e", "u-f", "u-g", "u-h"}, flag: "u", n: 1, auto: true,
			wantErr: []string{"every session user deskenv would choose is in use", "session user u-h is in use"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "locks")
			if len(c.held) > 0 {
				other, err := lockUsers(dir, c.held)
				if err != nil {
					t.Fatal(err)
				}
				defer other.release()
			}
			names, claim, err := claimSessionUsers(dir, c.flag, c.n, c.auto)
			if c.wantErr != nil {
				if err == nil {
					t.Fatalf("claimed %v, want an error", names)
				}
				for _, w := range c.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(names, c.want) {
				t.Fatalf("claimed %v, want %v", names, c.want)
			}
			// Held now: a second deskenv naming them is refused.
			for _, name := range names {
				if _, err := lockUsers(dir, []string{name}); err == nil {
					t.Errorf("%s could be locked twice", name)
				}
			}
			// A set that moved on left nothing of the sets it tried
			// locked.
			if c.auto && names[0] != namesOf(t, c.flag, c.n)[0] {
				free := slices.DeleteFunc(namesOf(t, c.flag, c.n), func(n string) bool { return slices.Contains(c.held, n) })
				if len(free) > 0 {
					again, err := lockUsers(dir, free)
					if err != nil {
						t.Errorf("a user of a set given up stayed locked: %v", err)
					} else {
						again.release()
					}
				}
			}
			claim.release()
			again, err := lockUsers(dir, names)
			if err != nil {
				t.Fatalf("after release: %v", err)
			}
			again.release()
		})
	}
}

func namesOf(t *testing.T, flag string, n int) []string {
	t.Helper()
	names, err := sessionUserNames(flag, n)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// The locks sit where only deskenv's user can open them: a session user
// that could open one could flock it (a read-only descriptor is enough)
// and keep deskenv from its own users.
func TestUserLockPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "locks")
	claim, err := lockUsers(dir, []string{"u"})
	if err != nil {
		t.Fatal(err)
	}
	defer claim.release()
	for path, want := range map[string]os.FileMode{dir: 0o700, filepath.Join(dir, "u.lock"): 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&^want != 0 {
			t.Errorf("%s has mode %v, want at most %v", path, fi.Mode().Perm(), want)
		}
	}
	// From the side of a session user (a uid of its own), with every
	// directory above the lock directory open to it: it cannot open a lock,
	// so it cannot flock one to keep deskenv from its users.
	if os.Geteuid() == 0 {
		if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, path := range []string{filepath.Join(dir, "u.lock"), dir} {
			cmd := exec.Command("sh", "-c", `exec 3<"$1"`, "sh", path)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 64997, Gid: 64997, Groups: []uint32{}}}
			if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "ermission denied") {
				t.Errorf("a session user opening %s: %v %s, want permission denied", path, err, out)
			}
		}
	}
	// A link planted in place of a lock is not followed.
	target := filepath.Join(t.TempDir(), "target")
	os.WriteFile(target, []byte("keep"), 0o644)
	if err := os.Symlink(target, filepath.Join(dir, "v.lock")); err != nil {
		t.Fatal(err)
	}
	if _, err := lockUsers(dir, []string{"v"}); err == nil {
		t.Error("a symbolic link was taken for a lock")
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Errorf("the link's target was written: %q", b)
	}
}

func TestClaimWithoutLockDir(t *testing.T) {
	names, claim, err := claimSessionUsers("", "u", 2, true)
	if err != nil || !slices.Equal(names, []string{"u0", "u1"}) {
		t.Fatalf("claim without a lock directory: %v, %v", names, err)
	}
	claim.release()
}
