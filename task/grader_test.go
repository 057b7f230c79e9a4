package task

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/internal/testrig"
)

// TestGraderReadsAsSession plays the agent against a file check: deskenv
// may run as root, and the grader must not read through a link the agent
// planted in its home to a file only deskenv can read (a task file holds
// the very pattern its check looks for), nor hang on a FIFO.
func TestGraderReadsAsSession(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run the session as the unprivileged user nobody")
	}
	const nobody = 65534
	base, err := os.MkdirTemp("/tmp", "deskenv-grader-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o711)
	// deskenv's own file: 0700 directory, as the tasks directory is.
	secret := filepath.Join(base, "tasks")
	if err := os.Mkdir(secret, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(secret, "t.json"), []byte(`{"contains": "the answer 42"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(base, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chown(home, nobody, nobody)
	for _, f := range []struct{ name, content string }{{"real.txt", "the answer 42\n"}} {
		p := filepath.Join(home, f.name)
		if err := os.WriteFile(p, []byte(f.content), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Chown(p, nobody, nobody)
	}
	if err := os.Symlink(filepath.Join(secret, "t.json"), filepath.Join(home, "planted.txt")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(home, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}

	ctx := testrig.Context(t, 60*time.Second)
	d := testrig.Display(t, display.Config{Home: home,
		Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}, User: "nobody"})
	env := NewEnv(d, "", nil)
	t.Cleanup(func() { env.Close() }) // before the display's own cleanup

	for _, tc := range []struct {
		name, path string
		passed     bool
		detail     string
	}{
		{"the agent's own file", "~/real.txt", true, "file contains"},
		// The session cannot even see into the 0700 directory.
		{"a link to deskenv's task file", "~/planted.txt", false, "does not exist"},
		{"a FIFO", "~/fifo", false, "is not a regular file"},
		{"the task file by its path", filepath.Join(secret, "t.json"), false, "does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tk, err := Parse([]byte(`{"id": "g", "instruction": "x", "evaluator": {"type": "file_contains", "path": "`+tc.path+`", "contains": "the answer 42"}}`), filepath.Join(base, "g.json"))
			if err != nil {
				t.Fatal(err)
			}
			out, err := tk.Evaluate(ctx, env)
			if err != nil {
				t.Fatal(err)
			}
			r := out.Reasons[0]
			if r.Passed != tc.passed || !strings.Contains(r.Detail, tc.detail) {
				t.Errorf("passed %v %q, want %v saying %q", r.Passed, r.Detail, tc.passed, tc.detail)
			}
		})
	}
}
