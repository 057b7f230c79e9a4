package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/deskenv/deskenv/internal/hang"
)

// fuzzHome is a home directory with every way out of it a path can try:
// symlinks to its parent, to a directory and a file outside, to a file
// outside that does not exist yet, a symlink loop, and a FIFO. Outside it,
// beside it, is a directory whose file names and contents are random, so
// no fuzzed input can produce them but by reaching them.
type fuzzHome struct {
	base, home, outside string
	secret, marker      string // the outside file's contents and the other's name
}

func newFuzzHome(f *testing.F) *fuzzHome {
	rnd := func() string {
		b := make([]byte, 16)
		rand.Read(b)
		return hex.EncodeToString(b)
	}
	base := f.TempDir()
	h := &fuzzHome{base: base, home: filepath.Join(base, "home"), outside: filepath.Join(base, "outside"),
		secret: "secret-" + rnd(), marker: "marker-" + rnd()}
	must := func(err error) {
		if err != nil {
			f.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(h.home, "notes", "deep"), 0o755))
	must(os.Mkdir(h.outside, 0o755))
	must(os.WriteFile(filepath.Join(h.outside, "secret.txt"), []byte(h.secret), 0o644))
	must(os.WriteFile(filepath.Join(h.outside, h.marker), nil, 0o644))
	must(os.WriteFile(filepath.Join(h.home, "notes", "a.txt"), []byte("hello\n"), 0o644))
	must(os.Symlink("..", filepath.Join(h.home, "up")))
	must(os.Symlink(h.outside, filepath.Join(h.home, "abs")))
	must(os.Symlink("../../../outside", filepath.Join(h.home, "notes", "deep", "rel")))
	must(os.Symlink(filepath.Join(h.outside, "secret.txt"), filepath.Join(h.home, "secret")))
	must(os.Symlink(filepath.Join(h.outside, "new.txt"), filepath.Join(h.home, "dangling")))
	must(os.Symlink("loop", filepath.Join(h.home, "loop")))
	must(os.Symlink("notes/a.txt", filepath.Join(h.home, "inside")))
	must(syscall.Mkfifo(filepath.Join(h.home, "fifo"), 0o644))
	return h
}

// checkOutside asserts that nothing beside home was created, changed or
// removed.
func (h *fuzzHome) checkOutside(t *testing.T, what string) {
	t.Helper()
	names := func(dir string) []string {
		es, err := os.ReadDir(dir)
		if err != nil {
			t.Fatalf("after %s: %v", what, err)
		}
		var out []string
		for _, e := range es {
			out = append(out, e.Name())
		}
		return out
	}
	if got := names(h.base); !slices.Equal(got, []string{"home", "outside"}) {
		t.Fatalf("after %s, home's parent holds %q", what, got)
	}
	if got, want := names(h.outside), []string{h.marker, "secret.txt"}; !slices.Equal(got, want) {
		t.Fatalf("after %s, the directory outside holds %q, not %q", what, got, want)
	}
	if b, err := os.ReadFile(filepath.Join(h.outside, "secret.txt")); err != nil || string(b) != h.secret {
		t.Fatalf("after %s, the file outside holds %q (%v)", what, b, err)
	}
}

// FuzzFilesPath calls read_file, list_files and write_file with fuzzed
// paths in a home full of ways out (fuzzHome). No call may return what lies
// outside home, list it, or create, change or remove anything outside home,
// and none may block (the FIFO).
func FuzzFilesPath(f *testing.F) {
	for _, p := range []string{
		"notes/a.txt", "~/notes/a.txt", "~", "", ".", "/", "..", "../outside/secret.txt", "~/../outside",
		"up/outside/secret.txt", "abs/secret.txt", "abs", "secret", "dangling", "loop", "loop/x", "inside",
		"notes/deep/rel/secret.txt", "notes/deep/rel", "fifo", "notes/../../outside", "notes/./a.txt",
		"/etc/passwd", "/proc/self/root/etc/passwd", "\x00", "notes\x00/a.txt", "~user/x", "new/dir/file.txt",
		"/dev/zero", "up", "up/home/notes/a.txt", "\xff\xfe",
	} {
		f.Add(p, "text", false)
	}
	f.Add("dangling", "written through a symlink", true)
	h := newFuzzHome(f)
	cfg := FilesTrait{Home: h.home, MaxReadBytes: 4096, MaxWriteBytes: 4096, MaxEntries: 100}
	run := map[string]func(context.Context, TraitArgs) (TraitResult, error){}
	for _, s := range cfg.Tools() {
		run[s.Name] = s.Run
	}
	for _, name := range []string{"read_file", "list_files", "write_file"} {
		if run[name] == nil {
			f.Fatalf("no %s trait tool", name)
		}
	}
	f.Fuzz(func(t *testing.T, p, text string, appendTo bool) {
		defer hang.Guard(p)()
		ctx := context.Background()
		if res, err := run["read_file"](ctx, TraitArgs{"path": p}); err == nil && strings.Contains(res.Text, h.secret) {
			t.Fatalf("read_file %q read the file outside home", p)
		}
		if res, err := run["list_files"](ctx, TraitArgs{"path": p}); err == nil && strings.Contains(res.Text, h.marker) {
			t.Fatalf("list_files %q listed the directory outside home:\n%s", p, res.Text)
		}
		h.checkOutside(t, fmt.Sprintf("reading %q", p))
		run["write_file"](ctx, TraitArgs{"path": p, "text": text, "append": appendTo})
		h.checkOutside(t, fmt.Sprintf("writing %q", p))
	})
}
