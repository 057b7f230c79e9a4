package record

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// An episode's files are readable by other users (a training job under
// another account exports them), and its text keeps <, > and & as typed.
func TestEpisodeFilesReadableAndUnescaped(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	dir := t.TempDir()
	m := &Meta{ID: "e1", Task: &TaskInfo{ID: "t", Instruction: "write a <b> & c > f"}}
	if err := writeMeta(dir, m); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "shot.png")
	if err := writeFileAtomic(shot, []byte("png")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(dir, MetaFile), shot} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if mode := fi.Mode().Perm(); mode != 0o644 {
			t.Errorf("%s is %o, want 644", filepath.Base(p), mode)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, MetaFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"instruction": "write a <b> & c > f"`) {
		t.Errorf("%s does not hold the instruction as written:\n%s", MetaFile, b)
	}
}
