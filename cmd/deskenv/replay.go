package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/deskenv/deskenv/appliance"
	"github.com/deskenv/deskenv/control"
	"github.com/deskenv/deskenv/record"
	"github.com/deskenv/deskenv/screen"
)

// replayCmd is `deskenv replay`: start a desktop like the one an episode was
// recorded on, reset it into the episode's task, run the recorded steps
// through hci, report where the screen diverged from the recorded
// observations, and score the task.
func replayCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	r, err := parseReplay(args, stderr)
	if err != nil {
		return err
	}
	defer r.cleanup()
	res, err := r.run(ctx, stdout, stderr)
	if err != nil {
		return err
	}
	if r.asJSON {
		res.writeJSON(stdout)
	} else {
		res.writeText(stdout)
	}
	return res.verdict()
}

// replay is one `deskenv replay`: the desktop's settings, adjusted to the
// episode, and the replay's own flags.
type replay struct {
	cfg        config
	rec        *record.Recording
	taskID     string
	outDir     string
	maxChanged float64
	asJSON     bool
	// private is the directory holding the replay's own home and episodes,
	// removed at the end; "" when the command line named a home.
	private string
}

// replayFlags are the appliance's flags that mean something to a replay:
// the desktop it starts and the tasks it scores with. The others (ports,
// tokens, the stream, pools) would do nothing, so they are not offered.
// --settle-idle-quiet is not among them: a replay waits every step's whole
// quiet period, the slower and surer way, since it is judged on whether the
// screens come out as recorded.
var replayFlags = map[string]bool{
	"display": true, "screen": true, "model-size": true, "wm": true, "apps": true, "home": true,
	"session-user": true, "allow-shared-user": true, "settle-quiet": true, "settle-max": true,
	"tasks": true, "log-level": true, "log-format": true, "screenshot-pointer": true, "session": true,
	"animations": true, "out": true, "max-changed": true, "json": true,
}

// replayUsages say what the flags that differ in a replay do there.
var replayUsages = map[string]string{
	"home":               "the replay desktop's home (default: a private temporary directory, removed at the end; DESKENV_HOME is not read, it names the live desktop's)",
	"screenshot-pointer": "draw the mouse pointer into the replay's screenshots (default: as the episode's observations were recorded)",
	"session":            "the replay desktop's session, desktop or bare (default: the one the episode was recorded on, so the screens compare; auto for episodes that do not say)",
	"animations":         "let the replay desktop's applications animate (default: as the episode was recorded; off for episodes that do not say)",
	"session-user":       "the user the replay's session runs as (as root the default is deskenv-replay, never the live desktop's deskenv-desk; DESKENV_SESSION_USER is not read)",
}

// cleanup removes the replay's private directory.
func (r *replay) cleanup() {
	if r.private != "" {
		os.RemoveAll(r.private)
	}
}

// replayResult is what a replay found: the screens' report and the
// episode's new score beside the recorded one.
type replayResult struct {
	rec      *record.Recording
	taskID   string
	report   *record.ReplayReport
	end      *control.Episode
	recorded *float64
}

// parseReplay reads the flags (the appliance's, then the environment for
// those not given) and the episode, and sets the screen and model size to
// the episode's unless told otherwise.
func parseReplay(args []string, stderr io.Writer) (*replay, error) {
	r := &replay{cfg: defaultConfig()}
	r.cfg.LogLevel = "warn"
	fs := flag.NewFlagSet("deskenv replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	r.cfg.flagSet(fs)
	fs.StringVar(&r.outDir, "out", "", "write the replay's screenshots here (NNNNNN.png per step) to compare with the episode's shots/")
	fs.Float64Var(&r.maxChanged, "max-changed", 0, "share of pixels (0-1) a screen may differ by and still match the recorded one")
	fs.BoolVar(&r.asJSON, "json", false, "print the report as JSON")
	fs.Usage = func() { replayUsage(fs, stderr) }
	dirs, err := parseInterspersed(fs, args)
	if err != nil {
		return nil, err
	}
	if len(dirs) != 1 {
		fs.Usage()
		return nil, fmt.Errorf("replay: give exactly one EPISODE_DIR, got %d", len(dirs))
	}
	cli := map[string]bool{}
	var unused error
	fs.Visit(func(f *flag.Flag) {
		cli[f.Name] = true
		if !replayFlags[f.Name] && unused == nil {
			unused = fmt.Errorf("replay: --%s does nothing in a replay (it starts a private desktop, serves nothing and records nothing): see deskenv replay --help", f.Name)
		}
	})
	if unused != nil {
		return nil, unused
	}
	set := setFromEnv(fs, replayFlags)
	if err := r.privateDesktop(cli); err != nil {
		return nil, err
	}
	if r.rec, err = record.Open(dirs[0]); err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	if err := r.fitEpisode(set); err != nil {
		return nil, err
	}
	return r, nil
}

func replayUsage(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprint(w, `Usage: deskenv replay [flags] EPISODE_DIR

Starts a desktop with the episode's screen size, resets it into the episode's task
(--tasks must hold it), executes the recorded steps as source "replay", compares each
screen with the recorded observation, then scores the task and prints the reward next
to the recorded one.

The desktop is private: a home and an episodes directory of its own in a temporary
directory (removed at the end) unless --home names one, and as root the session user
deskenv-replay unless --session-user names one, so a replay beside a running
appliance never resets its desktop, its home or its session's processes.

Exits 1 whenever it cannot reproduce the recorded reward, saying why: the rewards
differ, the episode was recorded without a task or without a reward, or the replay
could not score it.

Flags:
`)
	fs.VisitAll(func(f *flag.Flag) {
		if !replayFlags[f.Name] {
			return
		}
		name, usage := flag.UnquoteUsage(f)
		if u, ok := replayUsages[f.Name]; ok {
			usage = u
		}
		fmt.Fprintf(w, "  --%s %s\n    \t%s\n", f.Name, name, usage)
	})
}

// privateDesktop gives the replay a home, an episodes directory and a
// session user of its own, unless the command line names them.
func (r *replay) privateDesktop(cli map[string]bool) error {
	if !cli["session-user"] {
		r.cfg.SessionUser, r.cfg.SessionUserAuto = "deskenv-replay", true
	}
	if cli["home"] {
		return nil
	}
	dir, err := os.MkdirTemp("", "deskenv-replay-")
	if err != nil {
		return fmt.Errorf("replay: a private home: %w", err)
	}
	// The session user must reach its home inside.
	if err := os.Chmod(dir, 0o711); err != nil {
		os.RemoveAll(dir)
		return fmt.Errorf("replay: a private home: %w", err)
	}
	r.private = dir
	r.cfg.Home, r.cfg.Episodes = filepath.Join(dir, "home"), filepath.Join(dir, "episodes")
	return nil
}

// setFromEnv sets every flag of only (all when nil) not given on the
// command line from its environment variable, and returns the names of the
// flags set either way. A replay takes --home from its command line alone:
// DESKENV_HOME names the live desktop's.
func setFromEnv(fs *flag.FlagSet, only map[string]bool) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	fs.VisitAll(func(f *flag.Flag) {
		if only != nil && (!only[f.Name] || f.Name == "home" || f.Name == "session-user") {
			return
		}
		if v, ok := os.LookupEnv(envName(f.Name)); ok && !set[f.Name] {
			if fs.Set(f.Name, v) == nil {
				set[f.Name] = true
			}
		}
	})
	return set
}

// fitEpisode gives the desktop the episode's screen and model size (unless
// a flag names them) and finds its task, which --tasks must hold.
func (r *replay) fitEpisode(set map[string]bool) error {
	m, c := r.rec.Meta, &r.cfg
	if !set["screen"] && c.Display == "" {
		c.Screen = fmt.Sprintf("%dx%dx24", m.Screen.W, m.Screen.H)
	}
	if !set["model-size"] {
		c.ModelSize = fmt.Sprintf("%dx%d", m.Model.W, m.Model.H)
	}
	if !set["session"] && m.Session != "" {
		c.Session = m.Session
	}
	if !set["animations"] {
		c.Animations = m.Animations
	}
	if !set["screenshot-pointer"] {
		// Screens compare only if both show the pointer or neither does;
		// episodes from before the setting show none.
		c.ScreenshotPointer = m.Pointer
	}
	c.Mode, c.NoStream = "sim", true
	if err := c.validate(); err != nil {
		return err
	}
	if m.Task != nil {
		r.taskID = m.Task.ID
	}
	if r.taskID != "" && c.Tasks == "" {
		return fmt.Errorf("replay: episode %s was recorded on task %q: give --tasks DIR holding it", m.ID, r.taskID)
	}
	return nil
}

// run starts the desktop, resets it into the task, replays the steps and
// scores the episode.
func (r *replay) run(ctx context.Context, stdout, stderr io.Writer) (*replayResult, error) {
	log := r.cfg.logger(stderr)
	quietXGB(log)
	a, err := appliance.New(ctx, r.cfg.Config, log)
	if err != nil {
		return nil, err
	}
	defer a.Close()
	ep, err := a.Control().Reset(ctx, control.ResetRequest{TaskID: r.taskID})
	if err != nil {
		return nil, fmt.Errorf("replay: reset into task %q: %w", r.taskID, err)
	}
	res := &replayResult{rec: r.rec, taskID: r.taskID}
	if !r.asJSON {
		fmt.Fprintf(stdout, "replaying %s: %d steps on task %q (%s on %s)\n", r.rec.Meta.ID, len(r.rec.Steps), r.taskID, a.Space(), a.DisplayName())
	}
	opt := record.ReplayOptions{OutDir: r.outDir, MaxChanged: r.maxChanged,
		Settle: screen.SettleOptions{Quiet: r.cfg.SettleQuiet, Max: r.cfg.SettleMax}}
	if !r.asJSON {
		opt.OnStep = func(s record.StepResult) { fmt.Fprintln(stdout, stepLine(s)) }
	}
	if res.report, err = a.Replay(ctx, r.rec, opt); err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	if res.end, err = a.Control().End(ectx, ep.ID); err != nil {
		return nil, fmt.Errorf("replay: score the episode: %w", err)
	}
	if o := r.rec.Meta.Outcome; o != nil {
		res.recorded = o.Reward
	}
	return res, nil
}

func (res *replayResult) writeJSON(w io.Writer) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(map[string]any{"episode": res.rec.Meta.ID, "task_id": res.taskID, "report": res.report, "reward": res.end.Reward,
		"recorded_reward": res.recorded, "reasons": res.end.Reasons})
}

func (res *replayResult) writeText(w io.Writer) {
	rep := res.report
	if rep.Diverged == 0 {
		fmt.Fprintf(w, "screens: all %d compared observations match\n", rep.Compared)
	} else {
		fmt.Fprintf(w, "screens: %d of %d compared observations diverged, first at step %d\n", rep.Diverged, rep.Compared, rep.FirstDivergence)
	}
	fmt.Fprintf(w, "reward: %s (recorded: %s)\n", rewardText(res.end.Reward), rewardText(res.recorded))
	for _, r := range res.end.Reasons {
		fmt.Fprintf(w, "  %s\n", reasonText(r))
	}
}

// verdict fails the replay whenever it could not reproduce the recorded
// reward, with the reason.
func (res *replayResult) verdict() error {
	end, recorded := res.end, res.recorded
	switch {
	case end.Error != "":
		return errors.New("replay: " + end.Error)
	case res.taskID == "":
		return fmt.Errorf("replay: episode %s was recorded without a task, so there is no checker to reproduce its reward (recorded: %s); record it with its task (start recording while the control plane's episode runs, or with that episode's id)",
			res.rec.Meta.ID, rewardText(recorded))
	case recorded == nil:
		return fmt.Errorf("replay: episode %s has no recorded reward to compare with (it was stopped without being scored); the replay scored %s",
			res.rec.Meta.ID, rewardText(end.Reward))
	case end.Reward == nil:
		return fmt.Errorf("replay: the replay could not score task %s (recorded: %s)", res.taskID, rewardText(recorded))
	case *end.Reward != *recorded:
		return fmt.Errorf("replay: the reward %s differs from the recorded %s", rewardText(end.Reward), rewardText(recorded))
	}
	return nil
}

func stepLine(s record.StepResult) string {
	state := "ok"
	switch {
	case s.Err != "":
		state = "failed: " + s.Err
	case !s.Compared:
		state = "not compared"
	case !s.Match:
		state = fmt.Sprintf("DIVERGED: %.2f%% of pixels differ (mean %.2f)", 100*s.Changed, s.MeanDiff)
	}
	return fmt.Sprintf("step %3d %-60s %s", s.Step, truncateText(s.Action.String(), 60), state)
}

func truncateText(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func rewardText(r *float64) string {
	if r == nil {
		return "none"
	}
	return fmt.Sprintf("%g", *r)
}

func reasonText(r any) string {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Sprint(r)
	}
	return string(b)
}
