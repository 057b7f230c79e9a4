package task

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// StepError is a setup step that failed.
type StepError struct {
	Task  string // task id
	Index int    // position in Setup
	Type  string // step type
	Err   error
}

func (e *StepError) Error() string {
	return fmt.Sprintf("task %q: setup[%d] (%s): %v", e.Task, e.Index, e.Type, e.Err)
}

func (e *StepError) Unwrap() error { return e.Err }

// RunSetup runs the setup steps in order, each within its timeout, and stops
// at the first that fails with a *StepError naming it. Programs it launches
// keep running after it returns; DisplayEnv.CloseLaunched ends them.
func (t *Task) RunSetup(ctx context.Context, env Env) error {
	r := setupRun{env: env}
	for i := range t.Setup {
		s := &t.Setup[i]
		if err := ctx.Err(); err != nil {
			return &StepError{t.ID, i, s.Type, fmt.Errorf("not started: %w", err)}
		}
		r.index = i
		if err := r.step(ctx, s); err != nil {
			return &StepError{t.ID, i, s.Type, err}
		}
	}
	return nil
}

type setupRun struct {
	env      Env
	index    int // of the step running
	launched []launched
}

type launched struct {
	index int
	proc  *Process
}

func (r *setupRun) step(ctx context.Context, s *Step) error {
	k := s.kindOf()
	if k == nil {
		return fmt.Errorf("unknown step type %q", s.Type)
	}
	return k.run(ctx, r, s)
}

// builtinSteps is the table of setup step types docs/TASKS.md describes;
// messages list them in this order.
func builtinSteps() []stepKind {
	return []stepKind{
		{name: StepLaunch, fields: []string{"argv", "command"}, needs: []Need{OneOf("argv", "command")}, run: runLaunch},
		{name: StepCommand, fields: []string{"command", "timeout"}, needs: []Need{Required("command", "the shell script to run")}, run: runCommand},
		{name: StepWriteFile, fields: []string{"path", "content", "mode"}, needs: []Need{Required("path", "the file to write")}, run: runWriteFile},
		{name: StepOpen, fields: []string{"path", "url", "with"}, needs: []Need{OneOf("path", "url")}, run: runOpen},
		{name: StepWaitWindow, fields: []string{"contains", "matches", "ignore_case", "timeout"}, needs: []Need{OneOf("contains", "matches")},
			run: func(ctx context.Context, r *setupRun, s *Step) error { return r.waitWindow(ctx, s) }},
		{name: StepSleep, fields: []string{"duration"}, needs: []Need{Required("duration", "how long to sleep, such as \"2s\"")}, run: runSleep},
		{name: StepBrowser, fields: []string{"url", "path", "timeout"}, needs: []Need{OneOf("url", "path")}, run: runBrowser},
		{name: StepServe, fields: []string{"dir", "port"}, needs: []Need{Required("dir", "the folder to serve, such as \"~/site\""),
			Required("port", "the port on 127.0.0.1, such as 8123")}, run: runServe},
	}
}

// runLaunch is launch: argv without a shell, or command with sh -c, in the
// background.
func runLaunch(ctx context.Context, r *setupRun, s *Step) error {
	argv := []string{"/bin/sh", "-c", s.Command}
	if len(s.Argv) > 0 {
		argv = expandArgs(r.env.Home(), s.Argv)
	}
	return r.launch(ctx, argv)
}

// runOpen is open: the file or URL with xdg-open, or the program in with.
func runOpen(ctx context.Context, r *setupRun, s *Step) error {
	home := r.env.Home()
	target := s.URL
	if target == "" {
		target = expandPath(home, s.Path)
	}
	if len(s.With) == 0 {
		if err := r.launch(ctx, []string{"xdg-open", target}); err != nil {
			return fmt.Errorf("%w (set \"with\", such as [\"mousepad\"], to choose the program)", err)
		}
		return nil
	}
	return r.launch(ctx, append(expandArgs(home, s.With), target))
}

func expandArgs(home string, args []string) []string {
	out := make([]string, len(args))
	for j, a := range args {
		out[j] = expandArg(home, a)
	}
	return out
}

// runCommand is command: the script must exit 0 within the timeout.
func runCommand(ctx context.Context, r *setupRun, s *Step) error {
	limit := stepTimeout(s.Timeout, DefaultCommandTimeout)
	cctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	res, err := r.env.Run(cctx, s.Command)
	if err != nil {
		if ctx.Err() == nil && cctx.Err() != nil {
			return fmt.Errorf("%s did not finish within %s%s", quoteHead(s.Command, 200), limit, outputTails(res))
		}
		return fmt.Errorf("%s: %w", quoteHead(s.Command, 200), err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("%s exited with status %d%s", quoteHead(s.Command, 200), res.ExitCode, outputTails(res))
	}
	return nil
}

// runWriteFile is write_file, as the desktop user when the Env can.
func runWriteFile(ctx context.Context, r *setupRun, s *Step) error {
	path := expandPath(r.env.Home(), s.Path)
	if w, ok := r.env.(fileWriter); ok {
		perm, err := fileMode(s.Mode)
		if err != nil {
			return err
		}
		return w.WriteFile(ctx, path, s.Content, perm)
	}
	return writeFile(path, s.Content, s.Mode)
}

func runSleep(ctx context.Context, _ *setupRun, s *Step) error {
	t := time.NewTimer(s.Duration.D())
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *setupRun) launch(ctx context.Context, argv []string) error {
	cctx, cancel := context.WithTimeout(ctx, DefaultStartTimeout)
	defer cancel()
	p, err := r.env.Launch(cctx, argv)
	if err != nil {
		return err
	}
	r.launched = append(r.launched, launched{r.index, p})
	return nil
}

func stepTimeout(d Duration, def time.Duration) time.Duration {
	if d > 0 {
		return d.D()
	}
	return def
}

// outputTails is "; stderr: ..." (and stdout, when stderr is empty) for an
// error message.
func outputTails(res Result) string {
	var b strings.Builder
	if s := strings.TrimSpace(res.Stderr); s != "" {
		b.WriteString("; stderr: " + quoteEnds(s, 500))
	} else if s := strings.TrimSpace(res.Stdout); s != "" {
		b.WriteString("; stdout: " + quoteEnds(s, 500))
	}
	return b.String()
}

// fileWriter is an Env that writes files in the desktop user's home itself,
// as that user (DisplayEnv does when the session runs as another user).
type fileWriter interface {
	WriteFile(ctx context.Context, path, content string, perm os.FileMode) error
}

// fileMode is a write_file step's mode, 0644 when it names none.
func fileMode(mode string) (os.FileMode, error) {
	if mode == "" {
		return 0o644, nil
	}
	m, err := strconv.ParseUint(mode, 8, 32)
	if err != nil {
		return 0, fmt.Errorf("mode %q is not octal: %w", mode, err)
	}
	return os.FileMode(m) & os.ModePerm, nil
}

func writeFile(path, content, mode string) error {
	perm, err := fileMode(mode)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("make the folder for %s: %w", path, err)
	}
	if err := os.WriteFile(path, []byte(content), perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	// WriteFile leaves an existing file's mode alone and the umask trims new
	// ones; the task asked for exactly this mode.
	if err := os.Chmod(path, perm); err != nil {
		return fmt.Errorf("set the mode of %s: %w", path, err)
	}
	return nil
}

const pollInterval = 100 * time.Millisecond

func (r *setupRun) waitWindow(ctx context.Context, s *Step) error {
	m, err := newMatcher(s.Contains, s.Matches, s.re, s.IgnoreCase)
	if err != nil {
		return err
	}
	limit := stepTimeout(s.Timeout, DefaultWaitWindowTimeout)
	wctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	var (
		last    []Window
		lastErr error
	)
	for {
		ws, err := r.env.Windows(wctx)
		if err == nil {
			last, lastErr = ws, nil
			for _, w := range ws {
				if m.match(w.Title) {
					return nil
				}
			}
		} else if wctx.Err() == nil {
			lastErr = err
		}
		select {
		case <-tick.C:
		case <-wctx.Done():
			if ctx.Err() != nil {
				return ctx.Err()
			}
			msg := fmt.Sprintf("no window whose title %s appeared within %s", m, limit)
			if lastErr != nil {
				msg += fmt.Sprintf("; listing windows failed: %v", lastErr)
			} else {
				msg += "; windows now: " + windowTitles(last)
			}
			for _, l := range r.launched {
				if done, how := l.proc.Exited(); done {
					msg += fmt.Sprintf("; setup[%d] %s exited: %s", l.index, strings.Join(l.proc.Argv, " "), how)
				}
			}
			return errors.New(msg)
		}
	}
}

func windowTitles(ws []Window) string {
	if len(ws) == 0 {
		return "none"
	}
	var parts []string
	for _, w := range ws {
		if w.Title == "" {
			parts = append(parts, fmt.Sprintf("0x%x (untitled %s)", w.ID, w.Class))
			continue
		}
		parts = append(parts, quoteHead(w.Title, 80))
	}
	if len(parts) > 20 {
		parts = append(parts[:20], fmt.Sprintf("and %d more", len(parts)-20))
	}
	return strings.Join(parts, ", ")
}

// matcher is a "contains" or "matches" condition on text.
type matcher struct {
	contains   string
	re         *regexp.Regexp
	ignoreCase bool
}

func (m matcher) match(s string) bool {
	if m.contains != "" {
		if m.ignoreCase {
			if !strings.Contains(strings.ToLower(s), strings.ToLower(m.contains)) {
				return false
			}
		} else if !strings.Contains(s, m.contains) {
			return false
		}
	}
	if m.re != nil && !m.re.MatchString(s) {
		return false
	}
	return true
}

// newMatcher makes the condition of a step or check; re is the compiled
// expr, or nil to compile it here.
func newMatcher(contains, expr string, re *regexp.Regexp, ignoreCase bool) (matcher, error) {
	m := matcher{contains: contains, re: re, ignoreCase: ignoreCase}
	if re == nil && expr != "" {
		if ignoreCase {
			expr = "(?i)" + expr
		}
		r, err := regexp.Compile(expr)
		if err != nil {
			return m, fmt.Errorf("invalid regular expression %q: %w", expr, err)
		}
		m.re = r
	}
	return m, nil
}

// pattern is the regular expression as the task file wrote it.
func (m matcher) pattern() string {
	expr := m.re.String()
	if m.ignoreCase {
		expr = strings.TrimPrefix(expr, "(?i)")
	}
	return "/" + expr + "/"
}

func (m matcher) String() string {
	var parts []string
	if m.contains != "" {
		parts = append(parts, fmt.Sprintf("contains %q", m.contains))
	}
	if m.re != nil {
		parts = append(parts, "matches "+m.pattern())
	}
	s := strings.Join(parts, " and ")
	if m.ignoreCase {
		s += " (ignoring case)"
	}
	return s
}
