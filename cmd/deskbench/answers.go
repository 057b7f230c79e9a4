package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/damage"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/internal/activity"
	"github.com/deskenv/deskenv/internal/xext"
	"github.com/deskenv/deskenv/screen"
	"github.com/deskenv/deskenv/task"
)

// The answers benchmark asks how long the desktop's real applications take
// to answer an action: when they first draw after it, the longest pause
// between two of their draws, and when they last draw. A settle ends once
// nothing has been drawn for its quiet period, counted from the action, so
// an answer whose first draw or longest pause is longer than the quiet
// period is one a settle of that length answers too early, with a
// screenshot of the application still at work. This is what the default
// --settle-quiet has to be weighed against; a synthetic client cannot say.
//
// It listens to DAMAGE on the root window with raw rectangles, on a
// connection of its own, and acts through deskenv's executor (XTEST), as an
// agent's actions arrive.

// answerStep is one action of a scenario, in the computer tool's shape.
type answerStep struct {
	name, action string
}

// answerApp is one application and the steps tried on it. Each round runs
// the steps in order; they bring the application back to where the round
// began, so rounds compare.
type answerApp struct {
	name    string
	argv    []string // {file} is the benchmark's page or document
	startup time.Duration
	steps   []answerStep
}

func key(k string) string   { return fmt.Sprintf(`{"action":"key","text":%q}`, k) }
func typed(s string) string { return fmt.Sprintf(`{"action":"type","text":%q}`, s) }

// answerApps are the desktop session's applications (display/session.go)
// with what an agent does to them most. Chromium starts as a task's
// browser step starts it (task.BrowserLike; its profile seeded by
// writeAnswerFiles).
func answerApps() []answerApp {
	chromium, _, _ := task.BrowserLike()
	return []answerApp{
		{"xterm", []string{"xterm", "-geometry", "100x30+40+40"}, 3 * time.Second, []answerStep{
			{"type ls", typed("ls")}, {"Return", key("Return")},
			{"click", `{"action":"left_click","coordinate":[300,200]}`},
			{"scroll", `{"action":"scroll","coordinate":[300,200],"scroll_direction":"up","scroll_amount":3}`},
		}},
		{"chromium", slices.Concat(chromium, []string{"--user-data-dir={dir}/chromium", "file://{dir}/one.html"}),
			6 * time.Second, []answerStep{
				{"Tab to the link", key("Tab")}, {"Return: follow it", key("Return")}, {"alt+Left: back", key("alt+Left")},
				{"ctrl+t: new tab", key("ctrl+t")}, {"type in the omnibox", typed("page")}, {"ctrl+w: close tab", key("ctrl+w")},
				{"scroll down", `{"action":"scroll","coordinate":[500,450],"scroll_direction":"down","scroll_amount":5}`},
				{"scroll up", `{"action":"scroll","coordinate":[500,450],"scroll_direction":"up","scroll_amount":5}`},
				{"alt+f: menu", key("alt+f")}, {"Escape", key("Escape")},
			}},
		{"mousepad", []string{"mousepad", "{dir}/notes.txt"}, 4 * time.Second, []answerStep{
			{"type", typed("abc def")}, {"Return", key("Return")},
			{"ctrl+o: open dialog", key("ctrl+o")}, {"Escape: close it", key("Escape")},
			{"ctrl+f: find bar", key("ctrl+f")}, {"type in it", typed("abc")}, {"Escape", key("Escape")},
			{"ctrl+z: undo", key("ctrl+z")},
		}},
		{"galculator", []string{"galculator"}, 4 * time.Second, []answerStep{
			{"1", key("1")}, {"+", key("plus")}, {"2", key("2")}, {"Return: equals", key("Return")}, {"Escape: clear", key("Escape")},
		}},
		{"pcmanfm", []string{"pcmanfm", "{dir}/files"}, 4 * time.Second, []answerStep{
			{"Down", key("Down")}, {"Return: open folder", key("Return")}, {"BackSpace: up", key("BackSpace")},
		}},
		{"mupdf", []string{"mupdf-gl", "{dir}/doc.pdf"}, 4 * time.Second, []answerStep{
			{"Next: page down", key("Next")}, {"+: zoom in", key("plus")}, {"-: zoom out", key("minus")}, {"Prior: page up", key("Prior")},
		}},
		{"calc", []string{"libreoffice", "--calc", "--norestore", "--nologo"}, 25 * time.Second, []answerStep{
			{"type 42", typed("42")}, {"Return", key("Return")}, {"Up", key("Up")},
			{"Tab", key("Tab")}, {"shift+Tab", key("shift+Tab")}, {"ctrl+b: bold", key("ctrl+b")}, {"ctrl+z: undo", key("ctrl+z")},
			{"F10: menu", key("F10")}, {"Escape", key("Escape")}, {"Escape", key("Escape")},
		}},
	}
}

// appEnv is what app's start adds to the desktop's environment: for
// Chromium, what the launcher script the browser step skips would set.
func appEnv(app answerApp) []string {
	if app.name != "chromium" {
		return nil
	}
	_, env, _ := task.BrowserLike()
	return env
}

// answerConfig is the benchmark's flags.
type answerConfig struct {
	apps       []string
	rounds     int
	quiet      []time.Duration
	between    time.Duration
	animations bool
	jsonOut    string
	// idleQuiet, when not 0, runs a real settle beside each answer: quiet
	// the longest of quiet, ending after idleQuiet when the application
	// sat idle (screen.SettleOptions.Activity).
	idleQuiet time.Duration
}

// answerEnd is the pause that ends an answer: what is drawn after it is
// counted as later drawing (a cursor that blinks, a clock, a status bubble
// shown after a delay), which no quiet period short of it can wait for.
const answerEnd = 300 * time.Millisecond

// answer is what one application drew after one action.
type answer struct {
	App   string  `json:"app"`
	Step  string  `json:"step"`
	Draws int     `json:"draws"`
	First float64 `json:"first_ms"`       // first draw after the action (-1: none)
	Gap   float64 `json:"longest_gap_ms"` // longest pause between two draws of the answer
	Last  float64 `json:"last_ms"`        // last draw of the answer
	Later int     `json:"later_draws"`    // draws after a pause of answerEnd or more
	// Settled is when the real settle with an idle quiet period ended
	// (-1: not run, or it did not settle); Idle says it ended early on
	// an idle desktop rather than after the whole quiet period.
	Settled float64 `json:"idle_settle_ms"`
	// Quiet is when a settle of the longest quiet period alone would have
	// ended, worked out from the draws.
	Quiet float64 `json:"quiet_settle_ms"`
}

// wait is what a settle has to sit out: the first draw and every pause.
func (a answer) wait() float64 { return max(a.First, a.Gap) }

func runAnswers(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("deskbench answers", flag.ContinueOnError)
	fs.SetOutput(stderr)
	apps := fs.String("apps", "xterm,chromium,mousepad,galculator,pcmanfm,mupdf,calc", "applications to try, comma-separated")
	rounds := fs.Int("rounds", 3, "times each application's steps are run")
	quiet := fs.String("quiet", "40ms,80ms", "quiet periods to judge the answers against, comma-separated")
	between := fs.Duration("between", 1500*time.Millisecond, "time given each answer: the wait after an action before the next")
	anim := fs.Bool("animations", false, "let the applications animate and blink their cursors (deskenv's --animations)")
	jsonOut := fs.String("json", "", "also write every answer to this file as JSON")
	idle := fs.Duration("idle-quiet", 40*time.Millisecond, "also run a real settle beside each answer, of the longest -quiet but ending after this when the applications sat idle (0: do not)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c := answerConfig{apps: splitComma(*apps), rounds: *rounds, between: *between, animations: *anim, jsonOut: *jsonOut, idleQuiet: *idle}
	for _, q := range splitComma(*quiet) {
		d, err := time.ParseDuration(q)
		if err != nil || d <= 0 {
			return fmt.Errorf("-quiet %q: want durations such as 40ms,80ms", q)
		}
		c.quiet = append(c.quiet, d)
	}
	if c.rounds < 1 || c.between < 200*time.Millisecond {
		return errors.New("-rounds must be at least 1 and -between at least 200ms")
	}
	if c.idleQuiet < 0 || (c.idleQuiet > 0 && c.idleQuiet >= slices.Max(c.quiet)) {
		return fmt.Errorf("-idle-quiet %s: want 0 or less than the longest -quiet %s", c.idleQuiet, slices.Max(c.quiet))
	}
	all := answerApps()
	var pick []answerApp
	for _, name := range c.apps {
		i := slices.IndexFunc(all, func(a answerApp) bool { return a.name == name })
		if i < 0 {
			return fmt.Errorf("-apps: no application %q (have xterm, chromium, mousepad, galculator, pcmanfm, mupdf, calc)", name)
		}
		pick = append(pick, all[i])
	}

	dir, err := tempDir("deskbench-answers-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := writeAnswerFiles(dir); err != nil {
		return err
	}
	// The desktop session: its home skeleton holds the applications'
	// settings (no first-start dialogs), as on deskenv's desktop.
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		return err
	}
	d, err := display.Start(ctx, display.Config{
		Session: display.SessionDesktop, WindowManager: []string{"openbox"}, Apps: [][]string{}, Home: home, Animations: c.animations,
	})
	if err != nil {
		return fmt.Errorf("start the display: %w", err)
	}
	defer d.Close()
	ex, err := hci.NewExecutor(d, hci.Options{})
	if err != nil {
		return err
	}
	defer ex.Close()
	dl, err := listenDamage(d)
	if err != nil {
		return err
	}
	defer dl.close()
	capt, err := screen.NewCapturer(d)
	if err != nil {
		return err
	}
	defer capt.Close()
	// The applications run as this process's children; the X server's
	// work (it runs the settle's own round trips) does not count.
	set := settler{c: capt, opt: screen.SettleOptions{
		Quiet: slices.Max(c.quiet), IdleQuiet: c.idleQuiet, Max: c.between - 100*time.Millisecond,
		Activity: activity.ForDisplay(d),
	}}

	var results []answer
	for _, app := range pick {
		fmt.Fprintf(stderr, "answers: %s\n", app.name)
		rs, err := answerRounds(ctx, c, d, ex, dl, set, app, dir)
		if err != nil {
			fmt.Fprintf(stderr, "answers: %s: %v (left out)\n", app.name, err)
			continue
		}
		results = append(results, rs...)
	}
	if len(results) == 0 {
		return errors.New("no application could be tried (scripts/install-deps.sh apps installs them)")
	}
	printAnswers(stdout, c, results)
	if c.jsonOut != "" {
		raw, err := json.MarshalIndent(results, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(c.jsonOut, raw, 0o644)
	}
	return nil
}

// writeAnswerFiles writes the pages, text, folders and PDF the
// applications open.
func writeAnswerFiles(dir string) error {
	files := map[string]string{
		"one.html": `<!doctype html><title>One</title><body style="font:16px sans-serif"><h1>Page one</h1>` +
			`<p><a href="two.html">to page two</a></p><input><div style="height:3000px;background:linear-gradient(#fff,#89f)">long</div>`,
		"two.html":        `<!doctype html><title>Two</title><body style="font:16px sans-serif"><h1>Page two</h1><p>Some text.</p>`,
		"notes.txt":       "first line\n",
		"files/a/x.txt":   "x\n",
		"files/b/y.txt":   "y\n",
		"files/notes.txt": "n\n",
	}
	_, _, files["chromium/Default/Preferences"] = task.BrowserLike()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dir, "doc.pdf"), minimalPDF(), 0o644)
}

// minimalPDF is a three-page PDF of a line of text each, written here so
// the benchmark needs no file of its own.
func minimalPDF() []byte {
	var b strings.Builder
	var offs []int
	obj := func(s string) {
		offs = append(offs, b.Len())
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", len(offs), s)
	}
	b.WriteString("%PDF-1.4\n")
	obj("<< /Type /Catalog /Pages 2 0 R >>")
	obj("<< /Type /Pages /Kids [4 0 R 6 0 R 8 0 R] /Count 3 >>")
	obj("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
	for i := 1; i <= 3; i++ {
		n := 2*i + 3
		obj(fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>", n))
		text := fmt.Sprintf("BT /F1 36 Tf 72 700 Td (Page %d of the answers benchmark) Tj ET", i)
		obj(fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(text), text))
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(offs)+1)
	for _, o := range offs {
		fmt.Fprintf(&b, "%010d 00000 n \n", o)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(offs)+1, xref)
	return []byte(b.String())
}

// answerRounds starts app, lets it settle, and runs its steps.
func answerRounds(ctx context.Context, c answerConfig, d *display.Display, ex *hci.Executor, dl *damageLog, set settler, app answerApp, dir string) ([]answer, error) {
	if _, err := exec.LookPath(app.argv[0]); err != nil {
		return nil, fmt.Errorf("not installed: %w", err)
	}
	argv := make([]string, len(app.argv))
	for i, a := range app.argv {
		argv[i] = strings.ReplaceAll(a, "{dir}", dir)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(d.Env(), appEnv(app)...)
	cmd.SysProcAttr = d.SysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = exec.Command("pkill", "-KILL", "-g", fmt.Sprint(cmd.Process.Pid)).Run()
		_ = cmd.Wait()
		_ = sleepCtx(ctx, time.Second)
	}()
	// Started once nothing was drawn for 1.5 s, at least startup after.
	if err := sleepCtx(ctx, app.startup); err != nil {
		return nil, err
	}
	if err := dl.waitQuiet(ctx, 1500*time.Millisecond, 30*time.Second); err != nil {
		return nil, fmt.Errorf("%s did not stop drawing after it started: %w", app.name, err)
	}
	var out []answer
	for r := 0; r < c.rounds; r++ {
		for _, st := range app.steps {
			a, err := hci.ParseAction([]byte(st.action))
			if err != nil {
				return nil, fmt.Errorf("step %s: %w", st.name, err)
			}
			dl.reset()
			start := time.Now()
			if _, err := ex.Do(ctx, a, hci.SourceScript); err != nil {
				return nil, fmt.Errorf("step %s: %w", st.name, err)
			}
			settled := make(chan float64, 1)
			go func() { settled <- set.settle(ctx, c.idleQuiet > 0, start) }()
			if err := sleepCtx(ctx, c.between); err != nil {
				return nil, err
			}
			draws := dl.since(start)
			ans := judge(app.name, st.name, start, draws)
			ans.Settled = <-settled
			ans.Quiet = quietEnd(start, draws, slices.Max(c.quiet))
			out = append(out, ans)
		}
	}
	return out, nil
}

// settler runs the real settle an answer is compared with.
type settler struct {
	c   *screen.Capturer
	opt screen.SettleOptions
}

// settle settles as the appliance would after an action made at start, and
// returns when it ended in milliseconds after start, or -1 when it did not
// run or settle.
func (s settler) settle(ctx context.Context, run bool, start time.Time) float64 {
	if !run {
		return -1
	}
	settled, _, err := s.c.Settle(ctx, s.opt)
	if err != nil || !settled {
		return -1
	}
	return float64(time.Since(start).Microseconds()) / 1000
}

// quietEnd is when a settle of quiet q begun at start ends, in ms after
// start, given the draws after start: the first time nothing was drawn
// for q.
func quietEnd(start time.Time, draws []time.Time, q time.Duration) float64 {
	from := start
	for _, t := range draws {
		if t.Sub(from) > q {
			break
		}
		from = t
	}
	return float64(from.Add(q).Sub(start).Microseconds()) / 1000
}

// judge turns the draws after an action into its answer.
func judge(app, step string, start time.Time, draws []time.Time) answer {
	a := answer{App: app, Step: step, First: -1, Settled: -1}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	for i, t := range draws {
		switch {
		case a.Later > 0:
			a.Later++
			continue
		case i == 0 && t.Sub(start) >= answerEnd, i > 0 && t.Sub(draws[i-1]) >= answerEnd:
			a.Later++
			continue
		case i == 0:
			a.First = ms(t.Sub(start))
		default:
			a.Gap = max(a.Gap, ms(t.Sub(draws[i-1])))
		}
		a.Draws++
		a.Last = ms(t.Sub(start))
	}
	return a
}

// damageLog records when the X server reported drawing anywhere on the
// screen.
type damageLog struct {
	c    *xgb.Conn
	mu   sync.Mutex
	when []time.Time
	done chan struct{}
}

// listenDamage starts recording the screen's damage on a connection of its
// own; close ends it.
func listenDamage(d *display.Display) (*damageLog, error) {
	c, err := d.Dial()
	if err != nil {
		return nil, err
	}
	// Raw rectangles: an event for every drawing request, so the time of
	// each is known (the settle's NonEmpty level reports only the first
	// until the region is emptied).
	if _, err := xext.DamageRoot(c, damage.ReportLevelRawRectangles); err != nil {
		c.Close()
		return nil, err
	}
	l := &damageLog{c: c, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for {
			ev, err := c.WaitForEvent()
			if ev == nil && err == nil {
				return
			}
			if _, ok := ev.(damage.NotifyEvent); ok {
				now := time.Now()
				l.mu.Lock()
				l.when = append(l.when, now)
				l.mu.Unlock()
			}
		}
	}()
	return l, nil
}

func (l *damageLog) reset() {
	l.mu.Lock()
	l.when = l.when[:0]
	l.mu.Unlock()
}

func (l *damageLog) since(t time.Time) []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []time.Time
	for _, w := range l.when {
		if !w.Before(t) {
			out = append(out, w)
		}
	}
	return out
}

// waitQuiet waits until nothing has been drawn for quiet, at most limit.
func (l *damageLog) waitQuiet(ctx context.Context, quiet, limit time.Duration) error {
	end := time.Now().Add(limit)
	for time.Now().Before(end) {
		l.mu.Lock()
		last := time.Time{}
		if n := len(l.when); n > 0 {
			last = l.when[n-1]
		}
		l.mu.Unlock()
		if time.Since(last) >= quiet {
			return nil
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("still drawing after %s", limit)
}

func (l *damageLog) close() {
	l.c.Close()
	<-l.done
}

// printAnswers prints one row per application and step: draws, the first
// draw, the longest pause, the last draw (the largest over the rounds), and
// for each quiet period how many rounds a settle of that length would have
// answered before the application was done.
func printAnswers(w io.Writer, c answerConfig, rs []answer) {
	type key struct{ app, step string }
	var order []key
	by := map[key][]answer{}
	for _, r := range rs {
		k := key{r.App, r.Step}
		if _, ok := by[k]; !ok {
			order = append(order, k)
		}
		by[k] = append(by[k], r)
	}
	fmt.Fprintf(w, "What applications draw after an action (%d rounds, %s per answer, animations %v): the largest over the rounds.\n",
		c.rounds, c.between, c.animations)
	fmt.Fprintf(w, "An answer ends at the first pause of %s; what is drawn after is counted as later draws (a blinking cursor, a delayed bubble).\n", answerEnd)
	fmt.Fprintf(w, "A settle of quiet Q answers early when the answer's first draw or a pause within it is longer than Q.\n\n")
	head := "| app | action | draws | first draw | longest pause | last draw | later draws |"
	sep := "|---|---|---|---|---|---|---|"
	for _, q := range c.quiet {
		head += fmt.Sprintf(" early at %s |", q)
		sep += "---|"
	}
	idleName := fmt.Sprintf("%s, %s idle", slices.Max(c.quiet), c.idleQuiet)
	if c.idleQuiet > 0 {
		head += fmt.Sprintf(" early at %s | settled at (p50) | %s alone would (p50) |", idleName, slices.Max(c.quiet))
		sep += "---|---|---|"
	}
	fmt.Fprintln(w, head)
	fmt.Fprintln(w, sep)
	early := make([]int, len(c.quiet))
	total, idleEarly, idleMissed := 0, 0, 0
	var idleAll, quietAll []float64
	for _, k := range order {
		as := by[k]
		var draws, later int
		var first, gap, last float64
		first = -1
		for _, a := range as {
			draws, later = max(draws, a.Draws), max(later, a.Later)
			first, gap, last = max(first, a.First), max(gap, a.Gap), max(last, a.Last)
		}
		row := fmt.Sprintf("| %s | %s | %d | %s | %s | %s | %d |", k.app, k.step, draws, msOrNone(first), msOrNone(gap), msOrNone(last), later)
		for i, q := range c.quiet {
			n := 0
			for _, a := range as {
				if a.Draws > 0 && a.wait() > float64(q.Microseconds())/1000 {
					n++
				}
			}
			early[i] += n
			row += fmt.Sprintf(" %d of %d |", n, len(as))
		}
		if c.idleQuiet > 0 {
			n, missed := 0, 0
			var at, qat []float64
			for _, a := range as {
				switch {
				case a.Settled < 0:
					missed++
				case a.Draws > 0 && a.Last > a.Settled:
					n++
				}
				if a.Settled >= 0 {
					at = append(at, a.Settled)
				}
				qat = append(qat, a.Quiet)
			}
			idleEarly, idleMissed, idleAll, quietAll = idleEarly+n, idleMissed+missed, append(idleAll, at...), append(quietAll, qat...)
			row += fmt.Sprintf(" %d of %d | %s | %s |", n, len(as), msOrNone(median(at)), msOrNone(median(qat)))
		}
		total += len(as)
		fmt.Fprintln(w, row)
	}
	fmt.Fprintln(w)
	for i, q := range c.quiet {
		fmt.Fprintf(w, "quiet %s: %d of %d answers settled early\n", q, early[i], total)
	}
	if c.idleQuiet > 0 {
		fmt.Fprintf(w, "real settles, quiet %s: %d of %d answers settled early, %d did not settle; settled at p50 %s after the action (quiet %s alone: %s)\n",
			idleName, idleEarly, total, idleMissed, msOrNone(median(idleAll)), slices.Max(c.quiet), msOrNone(median(quietAll)))
	}
}

// median of vs, -1 for none.
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return -1
	}
	vs = slices.Clone(vs)
	slices.Sort(vs)
	return vs[len(vs)/2]
}

func msOrNone(v float64) string {
	if v < 0 {
		return "none"
	}
	return fmt.Sprintf("%.0f ms", v)
}
