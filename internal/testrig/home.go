package testrig

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// SeedHome builds a small home like a desktop user's in a temporary
// directory and returns its path: a dotfile, a private file, a document in
// a subdirectory, a nested config and a symlink, every time set to one fixed
// instant so a restored copy can be told from a rewritten one.
func SeedHome(t testing.TB) string {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	WriteFile(t, filepath.Join(home, ".bashrc"), "export PS1='$ '\n", 0o644)
	WriteFile(t, filepath.Join(home, "notes.txt"), "hello\n", 0o600)
	WriteFile(t, filepath.Join(home, "Documents", "report.md"), "# report\n", 0o644)
	WriteFile(t, filepath.Join(home, ".config", "app", "settings.ini"), "[a]\nb=1\n", 0o644)
	if err := os.Symlink("Documents/report.md", filepath.Join(home, "latest")); err != nil {
		t.Fatal(err)
	}
	old := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
		if d.Type()&fs.ModeSymlink == 0 {
			os.Chtimes(p, old, old)
		}
		return nil
	})
	// Writing the files touched their directories: set those last.
	for _, d := range []string{".config/app", ".config", "Documents", ""} {
		os.Chtimes(filepath.Join(home, d), old, old)
	}
	return home
}

// WriteFile writes content to p with mode, making its directories first.
func WriteFile(t testing.TB, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// TreeOf describes every entry under root: type, mode, size, mtime, link
// target and content, one line per path in sorted order, so two trees
// compare as strings and a difference prints as one.
func TreeOf(t testing.TB, root string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		lines = append(lines, rel+" "+describe(p, fi))
		return nil
	})
	if err != nil {
		t.Fatalf("testrig: walk %s: %v", root, err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// describe is one entry of TreeOf's listing, without its path.
func describe(p string, fi fs.FileInfo) string {
	line := fi.Mode().String()
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		l, _ := os.Readlink(p)
		line += " -> " + l
	case fi.Mode().IsRegular():
		b, _ := os.ReadFile(p)
		line += fmt.Sprintf(" size=%d mtime=%d %q", fi.Size(), fi.ModTime().UnixNano(), b)
	case fi.IsDir():
		line += fmt.Sprintf(" mtime=%d", fi.ModTime().UnixNano())
	}
	return line
}
