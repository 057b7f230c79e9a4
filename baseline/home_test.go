package baseline

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/deskenv/deskenv/internal/testrig"
)

func TestBaselineRestore(t *testing.T) {
	cases := []struct {
		name string
		mess func(t *testing.T, home string)
	}{
		{"nothing changed", func(t *testing.T, home string) {}},
		{"new files and directories", func(t *testing.T, home string) {
			testrig.WriteFile(t, filepath.Join(home, "junk.txt"), "junk", 0o644)
			testrig.WriteFile(t, filepath.Join(home, "deep", "er", "x.bin"), "x", 0o644)
			testrig.WriteFile(t, filepath.Join(home, ".config", "app", "cache.db"), "c", 0o644)
		}},
		{"deleted files and directories", func(t *testing.T, home string) {
			os.Remove(filepath.Join(home, "notes.txt"))
			os.RemoveAll(filepath.Join(home, ".config"))
			os.Remove(filepath.Join(home, "latest"))
		}},
		{"changed content", func(t *testing.T, home string) {
			testrig.WriteFile(t, filepath.Join(home, "notes.txt"), "overwritten with longer text\n", 0o600)
			testrig.WriteFile(t, filepath.Join(home, "Documents", "report.md"), "# REPORT\n", 0o644)
		}},
		{"same size and forged mtime", func(t *testing.T, home string) {
			p := filepath.Join(home, "notes.txt")
			fi, _ := os.Stat(p)
			testrig.WriteFile(t, p, "HELLO\n", 0o600)
			os.Chtimes(p, fi.ModTime(), fi.ModTime())
		}},
		{"changed modes", func(t *testing.T, home string) {
			os.Chmod(filepath.Join(home, "notes.txt"), 0o777)
			os.Chmod(filepath.Join(home, "Documents"), 0o500)
		}},
		{"type swaps", func(t *testing.T, home string) {
			os.Remove(filepath.Join(home, "notes.txt"))
			os.Mkdir(filepath.Join(home, "notes.txt"), 0o755)
			testrig.WriteFile(t, filepath.Join(home, "notes.txt", "inner"), "i", 0o644)
			os.RemoveAll(filepath.Join(home, "Documents"))
			testrig.WriteFile(t, filepath.Join(home, "Documents"), "now a file", 0o644)
			os.Remove(filepath.Join(home, "latest"))
			os.Symlink("/etc/passwd", filepath.Join(home, "latest"))
		}},
		{"unreadable new directory", func(t *testing.T, home string) {
			testrig.WriteFile(t, filepath.Join(home, "locked", "secret"), "s", 0o644)
			os.Chmod(filepath.Join(home, "locked"), 0o000)
		}},
		{"fifo", func(t *testing.T, home string) {
			syscall.Mkfifo(filepath.Join(home, "pipe"), 0o644)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			home := testrig.SeedHome(t)
			want := testrig.TreeOf(t, home)
			b, st, err := NewHome(ctx, home, filepath.Join(t.TempDir(), "baseline"))
			if err != nil {
				t.Fatal(err)
			}
			if st.Files != 4 || st.Links != 1 {
				t.Errorf("snapshot copied %d files and %d links, want 4 and 1", st.Files, st.Links)
			}
			if got := testrig.TreeOf(t, b.Dir()); got != want {
				t.Fatalf("baseline differs from home:\n%s\nwant:\n%s", got, want)
			}
			// Twice: the second restore starts from what the first left.
			for round := 1; round <= 2; round++ {
				c.mess(t, home)
				rs, err := b.Restore(ctx)
				if err != nil {
					t.Fatalf("round %d: restore: %v", round, err)
				}
				if got := testrig.TreeOf(t, home); got != want {
					t.Fatalf("round %d: home after restore:\n%s\nwant:\n%s\n(stats %+v)", round, got, want, rs)
				}
			}
		})
	}
}

func TestBaselineUntouchedCostsNoWrites(t *testing.T) {
	ctx := context.Background()
	home := testrig.SeedHome(t)
	b, _, err := NewHome(ctx, home, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(b.Dir())) })
	rs, err := b.Restore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rs.Removed+rs.Rewrote+rs.Created+rs.Fixed != 0 || rs.Bytes != 0 {
		t.Errorf("restore of an untouched home did work: %+v", rs)
	}
	testrig.WriteFile(t, filepath.Join(home, "notes.txt"), "changed", 0o600)
	rs, err = b.Restore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rs.Rewrote != 1 || rs.Created != 0 || rs.Removed != 0 {
		t.Errorf("restore after one changed file: %+v, want exactly one rewrite", rs)
	}
}

func TestBaselineShippedDirectory(t *testing.T) {
	ctx := context.Background()
	shipped := testrig.SeedHome(t)
	want := testrig.TreeOf(t, shipped)
	home := filepath.Join(t.TempDir(), "home")
	testrig.WriteFile(t, filepath.Join(home, "leftover"), "from a previous run", 0o644)
	b, _, err := NewHome(ctx, home, shipped)
	if err != nil {
		t.Fatal(err)
	}
	if testrig.TreeOf(t, shipped) != want {
		t.Fatal("NewHome changed a shipped baseline")
	}
	if _, err := b.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	if got := testrig.TreeOf(t, home); got != want {
		t.Fatalf("home after the first restore from a shipped baseline:\n%s\nwant:\n%s", got, want)
	}
}

func TestBaselineBadInput(t *testing.T) {
	ctx := context.Background()
	home := testrig.SeedHome(t)
	file := filepath.Join(t.TempDir(), "file")
	testrig.WriteFile(t, file, "x", 0o644)
	cases := []struct {
		name, home, dir, want string
	}{
		{"no home", "", "", "home directory is empty"},
		{"home missing", filepath.Join(t.TempDir(), "nope"), "", "is not a directory"},
		{"home is a file", file, "", "is not a directory"},
		{"baseline inside home", home, filepath.Join(home, ".baseline"), "inside home"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := NewHome(ctx, c.home, c.dir)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("NewHome(%q, %q) = %v, want an error containing %q", c.home, c.dir, err, c.want)
			}
		})
	}
}

// BenchmarkBaselineRestore measures a restore of a home of n files after one
// file changed, the common case between episodes.
func BenchmarkBaselineRestore(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) {
			ctx := context.Background()
			home := filepath.Join(b.TempDir(), "home")
			for i := 0; i < n; i++ {
				testrig.WriteFile(b, filepath.Join(home, fmt.Sprintf("d%02d", i%50), fmt.Sprintf("f%05d.txt", i)), strings.Repeat("x", 1024), 0o644)
			}
			base, _, err := NewHome(ctx, home, filepath.Join(b.TempDir(), "baseline"))
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				os.WriteFile(filepath.Join(home, "d00", "f00000.txt"), []byte("changed"), 0o644)
				os.WriteFile(filepath.Join(home, "new.txt"), []byte("new"), 0o644)
				if _, err := base.Restore(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
