package task

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/internal/xsel"
)

// Env is what setting up and checking a task needs from the desktop. NewEnv
// gives the implementation for a *display.Display.
type Env interface {
	// Home is the desktop user's home directory: "~" in paths, and the
	// working directory of commands.
	Home() string
	// Run runs script with sh -c as the desktop's programs run (their
	// environment, DISPLAY set, in Home) and waits for it. The error is
	// non-nil only when it could not be started or ctx ended first; a non-zero
	// exit status is in the Result.
	Run(ctx context.Context, script string) (Result, error)
	// Launch starts argv in the background on the desktop and returns once it
	// has started; ctx bounds the start only, not the program's life.
	Launch(ctx context.Context, argv []string) (*Process, error)
	// Windows lists the top-level windows with their titles.
	Windows(ctx context.Context) ([]Window, error)
	// Selection returns the text in the X selection "CLIPBOARD" or "PRIMARY";
	// "" when nobody owns it. ErrNoText when the owner offers no text.
	Selection(ctx context.Context, name string) (string, error)
	// Screenshot captures the whole screen at full resolution.
	Screenshot(ctx context.Context) (*image.RGBA, error)
	// ReadFile reads at most limit bytes of the regular file at path with
	// the rights of the desktop's programs, never more: a link the agent
	// planted to a task file or a FIFO must not feed or hang the grader.
	ReadFile(ctx context.Context, path string, limit int64) ([]byte, error)
}

// Errors of ReadFile, worded for a check's detail.
var (
	ErrNoFile     = errors.New("file does not exist")
	ErrIsDir      = errors.New("is a directory, not a file")
	ErrNotRegular = errors.New("is not a regular file (a FIFO, socket or device)")
)

// Result is how a command ended. Output beyond MaxOutput bytes per stream is
// dropped.
type Result struct {
	ExitCode  int
	Stdout    string
	Stderr    string
	Truncated bool // some output was dropped
}

// MaxOutput is how much of each output stream of a command is kept.
const MaxOutput = 64 << 10

// ErrNoText says a selection's owner offered no text (an image, say). It is
// xsel's, so errors.Is holds for what Selection returns.
var ErrNoText = xsel.ErrNoText

// ErrNoDisplay is returned by an Env made without a display for anything that
// needs one.
var ErrNoDisplay = errors.New("this environment has no display")

// Window is a top-level window.
type Window struct {
	ID       uint32
	Title    string
	Instance string // WM_CLASS instance, such as "xterm"
	Class    string // WM_CLASS class, such as "XTerm"
}

// DisplayEnv is the Env of a *display.Display. It keeps an X connection of its
// own and the processes that setup launched; Close ends both.
type DisplayEnv struct {
	d          *display.Display
	home       string
	screenshot func(context.Context) (*image.RGBA, error)

	f     *display.Follower // the env's X connection; nil without a display
	mu    sync.Mutex
	x     *xstate
	procs []*Process

	browser *Browser  // the browser step's; nil when none
	served  []*server // the serve steps' servers
	ports   *Ports    // shared with the process's other desktops; nil: none
}

// NewEnv makes the Env of display d for the desktop user whose home is home
// (empty: the display's configured home). screenshot captures the screen; nil
// means a plain X GetImage of the root window. d may be nil for an Env that
// only runs commands and checks files.
func NewEnv(d *display.Display, home string, screenshot func(context.Context) (*image.RGBA, error)) *DisplayEnv {
	if home == "" && d != nil {
		home = d.Config().Home
	}
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	e := &DisplayEnv{d: d, home: home, screenshot: screenshot}
	if d != nil {
		e.f = d.Follow(display.DropEvents)
	}
	return e
}

// Home is the desktop user's home directory.
func (e *DisplayEnv) Home() string { return e.home }

// Clipboard returns the text on the CLIPBOARD selection.
func (e *DisplayEnv) Clipboard(ctx context.Context) (string, error) {
	return e.Selection(ctx, "CLIPBOARD")
}

func (e *DisplayEnv) environ() []string {
	var base []string
	if e.d != nil {
		base = e.d.Env()
	} else {
		base = os.Environ()
	}
	env := make([]string, 0, len(base)+1)
	for _, kv := range base {
		if !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	return append(env, "HOME="+e.home)
}

// sysProcAttr starts a program of the session: a process group of its own,
// killed with this process, and as the session's user (display.SysProcAttr),
// since setup and checks act in the session and must not act as the user
// that owns deskenv's state.
func (e *DisplayEnv) sysProcAttr() *syscall.SysProcAttr {
	if e.d != nil {
		return e.d.SysProcAttr()
	}
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// WriteFile writes content to path (its folders made as needed) with mode
// perm. When the session runs as another user the write is done by a
// program running as that user: the file is the session's, and a link the
// session planted cannot lead the write anywhere that user could not write.
func (e *DisplayEnv) WriteFile(ctx context.Context, path, content string, perm os.FileMode) error {
	if e.d == nil || e.d.Credential() == nil {
		return writeFile(path, content, fmt.Sprintf("%o", perm))
	}
	const script = `umask 022; mkdir -p -- "$(dirname -- "$1")" && cat > "$1" && chmod "$2" -- "$1"`
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", script, "sh", path, fmt.Sprintf("%o", perm))
	cmd.Env = e.environ()
	cmd.Dir = e.workDir()
	cmd.Stdin = strings.NewReader(content)
	cmd.SysProcAttr = e.sysProcAttr()
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("write %s as the desktop user: %w: %s", path, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (e *DisplayEnv) workDir() string {
	if st, err := os.Stat(e.home); err == nil && st.IsDir() {
		return e.home
	}
	return "/"
}

// Run runs script with sh -c in the home directory. Output goes to unlinked
// temporary files rather than pipes, so a program the script leaves running
// in the background ("xterm &") neither holds up the wait nor dies of SIGPIPE
// later.
func (e *DisplayEnv) Run(ctx context.Context, script string) (Result, error) {
	var res Result
	stdout, err := unlinkedTemp()
	if err != nil {
		return res, err
	}
	defer stdout.Close()
	stderr, err := unlinkedTemp()
	if err != nil {
		return res, err
	}
	defer stderr.Close()

	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", script)
	cmd.Env = e.environ()
	cmd.Dir = e.workDir()
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = e.sysProcAttr()
	// On timeout end the whole group, not only sh: "sleep 100; true" would
	// otherwise outlive it.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	err = cmd.Run()
	res.Stdout, res.Truncated = readCapped(stdout, res.Truncated)
	res.Stderr, res.Truncated = readCapped(stderr, res.Truncated)
	if ctx.Err() != nil {
		return res, fmt.Errorf("did not finish: %w", ctx.Err())
	}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		res.ExitCode = exit.ExitCode()
		if res.ExitCode < 0 {
			res.ExitCode = 128 + int(exit.Sys().(syscall.WaitStatus).Signal())
		}
	default:
		return res, fmt.Errorf("run sh -c: %w", err)
	}
	return res, nil
}

// readScript tells the kinds of path apart before reading, so a FIFO is
// refused rather than opened; what it cannot read is said by head.
const readScript = `[ -e "$1" ] || exit 102
[ -d "$1" ] && exit 103
[ -f "$1" ] || exit 104
exec head -c "$2" -- "$1"`

// ReadFile runs head as the desktop's programs run (the session's user):
// the grader reads what the agent could have read and written, nothing
// else. This process may be root; reading as itself would follow a link in
// the home to the tasks directory, where a task's own pattern would match.
// One short-lived process per file check is the price (about a millisecond).
func (e *DisplayEnv) ReadFile(ctx context.Context, path string, limit int64) ([]byte, error) {
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", readScript, "sh", path, strconv.FormatInt(limit, 10))
	cmd.Env = e.environ()
	cmd.Dir = e.workDir()
	cmd.Stdout = &out
	cmd.Stderr = &capped{w: &errOut, n: 4 << 10}
	cmd.SysProcAttr = e.sysProcAttr()
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	err := cmd.Run()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("file could not be read in time: %w", ctx.Err())
	}
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out.Bytes(), nil
	case errors.As(err, &exit):
		switch exit.ExitCode() {
		case 102:
			return nil, ErrNoFile
		case 103:
			return nil, ErrIsDir
		case 104:
			return nil, ErrNotRegular
		}
		return nil, fmt.Errorf("file cannot be read: %s", strings.TrimSpace(errOut.String()))
	default:
		return nil, fmt.Errorf("file cannot be read: %w", err)
	}
}

// capped writes at most n bytes to w and drops the rest.
type capped struct {
	w io.Writer
	n int
}

func (c *capped) Write(p []byte) (int, error) {
	if len(p) > c.n {
		c.w.Write(p[:c.n])
		c.n = 0
		return len(p), nil
	}
	c.n -= len(p)
	return c.w.Write(p)
}

func unlinkedTemp() (*os.File, error) {
	f, err := os.CreateTemp("", "deskenv-task-*")
	if err != nil {
		return nil, fmt.Errorf("make a temporary file for command output: %w", err)
	}
	os.Remove(f.Name())
	return f, nil
}

func readCapped(f *os.File, truncated bool) (string, bool) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", truncated
	}
	buf, _ := io.ReadAll(io.LimitReader(f, MaxOutput+1))
	if len(buf) > MaxOutput {
		return string(buf[:MaxOutput]), true
	}
	return string(buf), truncated
}

// Launch starts argv in the background, in a process group of its own, with
// the desktop's environment. CloseLaunched (or Close) ends it.
func (e *DisplayEnv) Launch(ctx context.Context, argv []string) (*Process, error) {
	if len(argv) == 0 || argv[0] == "" {
		return nil, errors.New("launch: no program given")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	env := e.environ()
	path, err := lookPath(argv[0], env)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Env = env
	cmd.Dir = e.workDir()
	cmd.SysProcAttr = e.sysProcAttr()
	p, err := StartProcess(cmd)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.procs = append(e.procs, p)
	e.mu.Unlock()
	return p, nil
}

// lookPath finds a program on the PATH the desktop's programs get.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		if _, err := os.Stat(name); err != nil {
			return "", fmt.Errorf("cannot run %s: %w", name, err)
		}
		return name, nil
	}
	pathVar := os.Getenv("PATH")
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathVar = v
		}
	}
	for _, dir := range filepath.SplitList(pathVar) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("cannot find %q on the desktop's PATH (%s)", name, pathVar)
}

// CloseLaunched ends every process Launch started, the browser step's
// Chromium among them (SIGTERM to its process group, SIGKILL after a grace
// period or when ctx ends), forgets them, and shuts the serve steps'
// servers down. Call it when the desktop is reset, before the next task's
// setup.
func (e *DisplayEnv) CloseLaunched(ctx context.Context) {
	e.closeBrowser()
	e.closeServers(ctx)
	e.mu.Lock()
	procs := e.procs
	e.procs = nil
	e.mu.Unlock()
	for _, p := range procs {
		p.signal(syscall.SIGTERM)
	}
	grace := time.NewTimer(2 * time.Second)
	defer grace.Stop()
	for _, p := range procs {
		select {
		case <-p.done:
		case <-grace.C:
		case <-ctx.Done():
		}
		p.signal(syscall.SIGKILL)
	}
}

// Launched lists the processes Launch started that have not been closed.
func (e *DisplayEnv) Launched() []*Process {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]*Process(nil), e.procs...)
}

// Close ends the launched processes and closes the X connection.
func (e *DisplayEnv) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	e.CloseLaunched(ctx)
	e.mu.Lock()
	e.x = nil
	e.mu.Unlock()
	if e.f != nil {
		return e.f.Close()
	}
	return nil
}

// Process is a program started in the background.
type Process struct {
	PID  int
	Argv []string

	done   chan struct{}
	mu     sync.Mutex
	state  string
	stderr tailBuffer
}

// StartProcess starts cmd, keeping the tail of its stderr for error messages.
// cmd.Stderr must be unset; the caller sets SysProcAttr (a process group of
// its own lets signal reach the program's children too).
func StartProcess(cmd *exec.Cmd) (*Process, error) {
	p := &Process{Argv: append([]string(nil), cmd.Args...), done: make(chan struct{})}
	// A pipe of our own rather than an io.Writer: exec would wait for the
	// copy to end, which a child that inherits stderr can hold up forever.
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("launch %s: %w", cmd.Args[0], err)
	}
	cmd.Stderr = w
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("launch %s: %w", cmd.Args[0], err)
	}
	w.Close()
	p.PID = cmd.Process.Pid
	go func() {
		io.Copy(&p.stderr, r)
		r.Close()
	}()
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		if err != nil {
			p.state = err.Error()
		} else {
			p.state = "exit status 0"
		}
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// Exited reports whether the process has ended and, if so, how ("exit status
// 1") with the end of what it wrote to stderr.
func (p *Process) Exited() (bool, string) {
	select {
	case <-p.done:
	default:
		return false, ""
	}
	p.mu.Lock()
	state := p.state
	p.mu.Unlock()
	if tail := strings.TrimSpace(p.stderr.String()); tail != "" {
		state += "; stderr: " + quoteEnds(tail, 300)
	}
	return true, state
}

// Done is closed when the process has ended.
func (p *Process) Done() <-chan struct{} { return p.done }

// signal signals the process group, which may outlive its leader (a shell
// that started the app and exited).
func (p *Process) signal(sig syscall.Signal) {
	syscall.Kill(-p.PID, sig)
}

// tailBuffer keeps the first and the last KiB or so written to it: the
// start says "bad option", the end says what went wrong last.
type tailBuffer struct {
	mu      sync.Mutex
	head    []byte
	tail    []byte
	dropped bool
}

const headSize, tailSize = 1024, 3072

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	if room := headSize - len(b.head); room > 0 {
		take := min(room, len(p))
		b.head = append(b.head, p[:take]...)
		p = p[take:]
	}
	b.tail = append(b.tail, p...)
	if len(b.tail) > tailSize {
		b.tail = append(b.tail[:0], b.tail[len(b.tail)-tailSize:]...)
		b.dropped = true
	}
	return n, nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dropped {
		return string(b.head) + "\n…\n" + string(b.tail)
	}
	return string(b.head) + string(b.tail)
}

// quoteEnds quotes output for a message: all of it when short, else its
// start (where programs put "bad option") and its end (where they put the
// last error), n bytes in all.
func quoteEnds(s string, n int) string {
	if len(s) <= n {
		return fmt.Sprintf("%q", s)
	}
	head, tail := n*2/3, n/3
	return fmt.Sprintf("%q … %q", strings.ToValidUTF8(s[:head], ""), strings.ToValidUTF8(s[len(s)-tail:], ""))
}

// quoteHead quotes the first n bytes of s for a message.
func quoteHead(s string, n int) string {
	if len(s) > n {
		return fmt.Sprintf("%q…", strings.ToValidUTF8(s[:n], ""))
	}
	return fmt.Sprintf("%q", s)
}

// expandPath resolves "~" and paths relative to home.
func expandPath(home, p string) string {
	switch {
	case p == "~":
		return home
	case strings.HasPrefix(p, "~/"):
		return filepath.Join(home, p[2:])
	case filepath.IsAbs(p):
		return filepath.Clean(p)
	default:
		return filepath.Join(home, p)
	}
}

// expandArg resolves "~" at the start of a program argument, or right after
// the "=" of an option such as --user-data-dir=~/.cache/x; anything else
// stays as it is.
func expandArg(home, a string) string {
	if a == "~" || strings.HasPrefix(a, "~/") {
		return expandPath(home, a)
	}
	if strings.HasPrefix(a, "-") {
		if opt, val, ok := strings.Cut(a, "="); ok && (val == "~" || strings.HasPrefix(val, "~/")) {
			return opt + "=" + expandPath(home, val)
		}
	}
	return a
}

var _ Env = (*DisplayEnv)(nil)
