package testrig

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// ModuleRoot is the directory holding go.mod, found from the test's working
// directory (its package directory) upwards.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			t.Fatalf("no go.mod above %s", wd)
		}
	}
}

// BuildDeskenv builds cmd/deskenv from this module into the test's temporary
// directory and returns the binary's path. End-to-end tests run the binary a
// user runs, not the packages wired by hand.
func BuildDeskenv(ctx context.Context, t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "deskenv")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/deskenv")
	build.Dir = ModuleRoot(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build deskenv: %v\n%s", err, out)
	}
	return bin
}

// SessionHome is a home directory for a deskenv the test starts: one the
// desktop's session user can reach (as root, deskenv runs the session as a
// user of its own, and t.TempDir's parents are closed to others), whose
// .bashrc sets one prompt whoever runs the shell, so screens recorded as one
// user match screens replayed as another (bash's default prompt names the
// user).
func SessionHome(t testing.TB) string {
	t.Helper()
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, ".bashrc"), []byte("PS1='$ '\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		return home
	}
	for d := home; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o011 != 0o011 {
			if err := os.Chmod(d, fi.Mode().Perm()|0o011); err != nil {
				t.Fatal(err)
			}
		}
	}
	return home
}
