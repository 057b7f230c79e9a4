package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// BashTrait is the bash trait: one tool, bash. The command runs as the desktop
// session's user (Credential; in the image, desk), never as the user that
// owns deskenv's state, in the session's environment, so it sees the same
// DISPLAY, XAUTHORITY and HOME as the apps on screen; a reset kills whatever
// it left running there.
type BashTrait struct {
	// Credential is the session's user; nil runs the command as this
	// process's user (only when deskenv was told to allow that).
	Credential *syscall.Credential
	// Dir is the working directory, the desktop user's home.
	Dir string
	// Env is the environment, the desktop session's (display.Env).
	Env []string
	// Shell runs the command as Shell -c command; default /bin/bash.
	Shell string
	// Timeout applies when a call names none; default 30 s.
	Timeout time.Duration
	// MaxTimeout caps the timeout a call may ask for; default 10 min.
	MaxTimeout time.Duration
	// MaxOutputBytes caps what comes back of stdout and stderr together:
	// the first and last halves are kept; default 32 KiB.
	MaxOutputBytes int
}

func (b BashTrait) withDefaults() BashTrait {
	if b.Shell == "" {
		b.Shell = "/bin/bash"
	}
	if b.Timeout <= 0 {
		b.Timeout = 30 * time.Second
	}
	if b.MaxTimeout <= 0 {
		b.MaxTimeout = 10 * time.Minute
	}
	if b.Timeout > b.MaxTimeout {
		b.Timeout = b.MaxTimeout
	}
	if b.MaxOutputBytes <= 0 {
		b.MaxOutputBytes = 32 << 10
	}
	return b
}

// MaxCommandBytes bounds the command text of one bash call.
const MaxCommandBytes = 64 << 10

// Name is "bash".
func (BashTrait) Name() string { return "bash" }

// Check refuses a shell that is not there or a working directory that is
// not a directory.
func (b BashTrait) Check() error {
	b = b.withDefaults()
	if _, err := exec.LookPath(b.Shell); err != nil {
		return fmt.Errorf("mcpserver: the bash trait's shell: %w", err)
	}
	if err := isDir(b.Dir); b.Dir != "" && err != nil {
		return fmt.Errorf("mcpserver: the bash trait's working directory: %w", err)
	}
	return nil
}

// Tools is the bash tool.
func (b BashTrait) Tools() []TraitTool {
	b = b.withDefaults()
	return []TraitTool{{
		Name: "bash", Title: "Run a shell command", Destructive: true, Loud: true, LogArg: "command",
		Description: fmt.Sprintf("Run a command with %s -c as the desktop user, in the home directory, with the desktop's DISPLAY. "+
			"Returns the exit code and stdout+stderr together (at most %d bytes: the start and the end are kept). "+
			"The command is killed after its timeout (default %s). Stdin is empty. To start a GUI app that keeps running, "+
			"detach it: nohup app >/dev/null 2>&1 &", b.Shell, b.MaxOutputBytes, b.Timeout),
		Params: []TraitParam{
			{Name: "command", Type: ParamString, Required: true, Description: "The shell command line."},
			{Name: "timeout", Type: ParamInteger, Description: fmt.Sprintf("Seconds before the command is killed, 1 to %d; default %d.",
				int(b.MaxTimeout/time.Second), int(b.Timeout/time.Second))},
		},
		Returns: "-> struct(exit_code, output, truncated)",
		Run:     b.call,
	}}
}

// call checks one call's arguments and runs its command.
func (b BashTrait) call(ctx context.Context, a TraitArgs) (TraitResult, error) {
	timeout := b.Timeout
	if n, ok := a.Int("timeout"); ok {
		// Compared in seconds: n*time.Second overflows past 292 years
		// and would wrap to a negative timeout.
		if n < 1 || n > int64(b.MaxTimeout/time.Second) {
			return TraitResult{}, fmt.Errorf("bash: timeout %d s is out of range: 1 to %d", n, int(b.MaxTimeout/time.Second))
		}
		timeout = time.Duration(n) * time.Second
	}
	cmd := a.Str("command")
	if strings.TrimSpace(cmd) == "" {
		return TraitResult{}, errors.New("bash: the command is empty")
	}
	if len(cmd) > MaxCommandBytes {
		return TraitResult{}, fmt.Errorf("bash: the command is %d bytes, more than %d; write a script with write_file and run it", len(cmd), MaxCommandBytes)
	}
	return b.run(ctx, cmd, timeout)
}

// run runs one command. A non-zero exit is a result, not an error: the model
// reads the code. Running past the timeout is an error carrying the output
// so far.
func (b BashTrait) run(ctx context.Context, command string, timeout time.Duration) (TraitResult, error) {
	out := &headTail{max: b.MaxOutputBytes}
	cmd := exec.Command(b.Shell, "-c", command)
	cmd.Dir = b.Dir
	cmd.Env = b.Env
	// One writer for both, so os/exec hands the child a single pipe and the
	// two streams interleave as a terminal would show them.
	cmd.Stdout, cmd.Stderr = out, out
	// Own process group, so a timeout kills what the command started too;
	// Pdeathsig so nothing outlives deskenv.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: b.Credential}
	// A detached child (app &) may hold the pipe open after the shell exits;
	// do not wait for it longer than this.
	cmd.WaitDelay = 500 * time.Millisecond
	if err := cmd.Start(); err != nil {
		return TraitResult{}, fmt.Errorf("bash: start %s: %w", b.Shell, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var why string
	var err error
	select {
	case err = <-done:
	case <-timer.C:
		why = fmt.Sprintf("ran past its timeout of %s and was killed", timeout)
	case <-ctx.Done():
		why = fmt.Sprintf("was killed because the call ended (%v)", context.Cause(ctx))
	}
	if why != "" {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		text, _ := out.result()
		return TraitResult{}, fmt.Errorf("bash: the command %s; output so far:\n%s", why, text)
	}
	code := 0
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode() // -1 when a signal ended it
	case errors.Is(err, exec.ErrWaitDelay):
		// The shell exited; a detached child kept the output open.
		code = cmd.ProcessState.ExitCode()
	default:
		return TraitResult{}, fmt.Errorf("bash: %w", err)
	}
	text, truncated := out.result()
	head := fmt.Sprintf("exit code %d", code)
	if ee != nil && code == -1 {
		head = "killed by " + ee.ProcessState.String()
	}
	if truncated {
		head += fmt.Sprintf(" (output of %d bytes cut to its first %d and last %d)", out.total, b.MaxOutputBytes/2, b.MaxOutputBytes-b.MaxOutputBytes/2)
	}
	return TraitResult{
		Value: map[string]any{"exit_code": int64(code), "output": text, "truncated": truncated},
		Text:  head + "\n" + text,
	}, nil
}

// headTail keeps the first half of its budget and a ring of the last half,
// so a command that prints megabytes costs a bounded buffer and the model
// still sees how it began and how it ended. Output within the budget is kept
// whole and in order.
type headTail struct {
	mu    sync.Mutex
	max   int
	head  []byte
	tail  []byte // ring of at most max-max/2 bytes
	pos   int    // oldest byte of tail once it is full
	total int
}

func (h *headTail) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.total += len(p)
	rest := p
	if room := h.max/2 - len(h.head); room > 0 {
		n := min(room, len(rest))
		h.head = append(h.head, rest[:n]...)
		rest = rest[n:]
	}
	ring := h.max - h.max/2
	for _, c := range rest {
		if len(h.tail) < ring {
			h.tail = append(h.tail, c)
			continue
		}
		h.tail[h.pos] = c
		h.pos = (h.pos + 1) % ring
	}
	return len(p), nil
}

// result is the kept text, valid UTF-8, and whether anything was dropped.
func (h *headTail) result() (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	tail := string(h.tail[h.pos:]) + string(h.tail[:h.pos])
	if h.total <= h.max {
		return strings.ToValidUTF8(string(h.head)+tail, "\uFFFD"), false
	}
	return strings.ToValidUTF8(string(h.head)+"\n[...]\n"+tail, "\uFFFD"), true
}
