package task

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deskenv/deskenv/internal/testrig"
)

func parseTask(t testing.TB, body string) *Task {
	t.Helper()
	tk, err := Parse([]byte(`{"id": "t", "instruction": "test", `+body+`}`), filepath.Join(t.TempDir(), "t.json"))
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func TestRunSetup(t *testing.T) {
	k := startDesk(t, true)
	tests := []struct {
		name    string
		setup   string
		wantErr []string                        // substrings of the error, in order; none: success
		after   func(t *testing.T, home string) // checks the result
	}{
		{
			name:  "launch then wait_window",
			setup: `{"type": "launch", "argv": ["xterm", "-T", "setup-launch-ok"]}, {"type": "wait_window", "contains": "SETUP-LAUNCH", "ignore_case": true, "timeout": "15s"}`,
		},
		{
			name:  "launch by command and wait by regexp",
			setup: `{"type": "launch", "command": "exec xterm -T \"shell $((40 + 2))\""}, {"type": "wait_window", "matches": "^shell 42$", "timeout": "15s"}`,
		},
		{
			name:  "write_file",
			setup: `{"type": "write_file", "path": "~/deep/er/notes.txt", "content": "line 1\nline ✓\n", "mode": "0600"}, {"type": "write_file", "path": "rel.txt", "content": ""}`,
			after: func(t *testing.T, home string) {
				p := filepath.Join(home, "deep/er/notes.txt")
				data, err := os.ReadFile(p)
				if err != nil || string(data) != "line 1\nline ✓\n" {
					t.Errorf("%s holds %q, %v", p, data, err)
				}
				if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o600 {
					t.Errorf("%s mode %v, %v; want 0600", p, st.Mode(), err)
				}
				if st, err := os.Stat(filepath.Join(home, "rel.txt")); err != nil || st.Size() != 0 || st.Mode().Perm() != 0o644 {
					t.Errorf("rel.txt (relative to home): %v, %v; want an empty 0644 file", st, err)
				}
			},
		},
		{
			name:  "open with a program, path expanded",
			setup: `{"type": "write_file", "path": "~/doc.txt", "content": "x"}, {"type": "open", "path": "~/doc.txt", "with": ["sh", "-c", "printf %s \"$1\" > ~/opened", "sh"]}, {"type": "sleep", "duration": "10ms"}`,
			after: func(t *testing.T, home string) {
				testrig.WaitState(t, 10*time.Second, "the opener to run", func() (bool, string) {
					data, err := os.ReadFile(filepath.Join(home, "opened"))
					return err == nil && string(data) == filepath.Join(home, "doc.txt"), string(data)
				})
			},
		},
		{
			name:  "command sees the desktop",
			setup: `{"type": "command", "command": "test \"$HOME\" = \"$(pwd)\" && test -n \"$DISPLAY\" && touch ~/ran"}`,
			after: func(t *testing.T, home string) {
				if _, err := os.Stat(filepath.Join(home, "ran")); err != nil {
					t.Error(err)
				}
			},
		},
		{
			name:    "command fails: exit status and stderr in the error, later steps not run",
			setup:   `{"type": "sleep", "duration": 0.01}, {"type": "command", "command": "echo working; echo 'no such thing' >&2; exit 3"}, {"type": "write_file", "path": "~/not-written", "content": "x"}`,
			wantErr: []string{`task "t": setup[1] (command): "echo working; echo 'no such thing' >&2; exit 3" exited with status 3; stderr: "no such thing"`},
			after: func(t *testing.T, home string) {
				if _, err := os.Stat(filepath.Join(home, "not-written")); err == nil {
					t.Error("a step after the failing one ran")
				}
			},
		},
		{
			name:    "command timeout",
			setup:   `{"type": "command", "command": "echo waiting; sleep 30", "timeout": "300ms"}`,
			wantErr: []string{`setup[0] (command): "echo waiting; sleep 30" did not finish within 300ms; stdout: "waiting"`},
		},
		{
			name:    "wait_window times out",
			setup:   `{"type": "launch", "argv": ["xterm", "-T", "some other window"]}, {"type": "wait_window", "contains": "never there", "timeout": "1s"}`,
			wantErr: []string{`setup[1] (wait_window): no window whose title contains "never there" appeared within 1s; windows now: `, `"some other window"`},
		},
		{
			name:    "wait_window names a launched program that died",
			setup:   `{"type": "launch", "argv": ["xterm", "-no-such-option"]}, {"type": "wait_window", "matches": "^xterm$", "timeout": "2s"}`,
			wantErr: []string{`setup[1] (wait_window): no window whose title matches /^xterm$/ appeared within 2s`, `setup[0] xterm -no-such-option exited: exit status 1; stderr: `, `-no-such-option`},
		},
		{
			name:    "launch a missing program",
			setup:   `{"type": "launch", "argv": ["deskenv-no-such-program", "x"]}`,
			wantErr: []string{`setup[0] (launch): cannot find "deskenv-no-such-program" on the desktop's PATH`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tk := parseTask(t, `"setup": [`+tc.setup+`], "evaluator": {"type": "file_exists", "path": "~"}`)
			ctx := testrig.Context(t, 60*time.Second)
			defer k.env.CloseLaunched(context.Background())
			err := tk.RunSetup(ctx, k.env)
			if len(tc.wantErr) == 0 && err != nil {
				t.Fatal(err)
			}
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatal("no error")
				}
				rest := err.Error()
				for _, w := range tc.wantErr {
					i := strings.Index(rest, w)
					if i < 0 {
						t.Fatalf("error lacks %q (in order):\n%s", w, err)
					}
					rest = rest[i+len(w):]
				}
				var se *StepError
				if !errors.As(err, &se) || se.Task != "t" {
					t.Errorf("error is not a *StepError for task t: %#v", err)
				}
			}
			if tc.after != nil {
				tc.after(t, k.home)
			}
		})
	}
}

func TestRunSetupCancelled(t *testing.T) {
	env := NewEnv(nil, t.TempDir(), nil)
	tk := parseTask(t, `"setup": [{"type": "sleep", "duration": "1m"}, {"type": "write_file", "path": "x", "content": ""}], "evaluator": {"type": "file_exists", "path": "x"}`)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(50 * time.Millisecond)
		cancel()
	}()
	err := tk.RunSetup(ctx, env)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "setup[0] (sleep)") {
		t.Fatalf("RunSetup = %v, want setup[0] (sleep) cancelled", err)
	}
}
