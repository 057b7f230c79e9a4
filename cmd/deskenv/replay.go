package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
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
	c := defaultConfig()
	c.LogLevel = "warn"
	fs := flag.NewFlagSet("deskenv replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.flagSet(fs)
	outDir := fs.String("out", "", "write the replay's screenshots here (NNNNNN.png per step) to compare with the episode's shots/")
	maxChanged := fs.Float64("max-changed", 0, "share of pixels (0-1) a screen may differ by and still match the recorded one")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: deskenv replay [flags] EPISODE_DIR

Starts a desktop with the episode's screen size, resets it into the episode's task
(--tasks must hold it), executes the recorded steps as source "replay", compares each
screen with the recorded observation, then scores the task and prints the reward next
to the recorded one. Exits 1 when the rewards differ.

Flags (the appliance's flags apply to the desktop it starts):
`)
		fs.PrintDefaults()
	}
	dirs, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(dirs) != 1 {
		fs.Usage()
		return fmt.Errorf("replay: give exactly one EPISODE_DIR, got %d", len(dirs))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	fs.VisitAll(func(f *flag.Flag) {
		if v, ok := os.LookupEnv(envName(f.Name)); ok && !set[f.Name] {
			if fs.Set(f.Name, v) == nil {
				set[f.Name] = true
			}
		}
	})
	rec, err := record.Open(dirs[0])
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	m := rec.Meta
	if !set["screen"] && c.Display == "" {
		c.Screen = fmt.Sprintf("%dx%dx24", m.Screen.W, m.Screen.H)
	}
	if !set["model-size"] {
		c.ModelSize = fmt.Sprintf("%dx%d", m.Model.W, m.Model.H)
	}
	c.Mode, c.NoStream = "sim", true
	if err := c.validate(); err != nil {
		return err
	}
	taskID := ""
	if m.Task != nil {
		taskID = m.Task.ID
	}
	if taskID != "" && c.Tasks == "" {
		return fmt.Errorf("replay: episode %s was recorded on task %q: give --tasks DIR holding it", m.ID, taskID)
	}
	log := c.logger(stderr)
	quietXGB(log)
	a, err := appliance.New(ctx, c.Config, log)
	if err != nil {
		return err
	}
	defer a.Close()
	ep, err := a.Control().Reset(ctx, control.ResetRequest{TaskID: taskID})
	if err != nil {
		return fmt.Errorf("replay: reset into task %q: %w", taskID, err)
	}
	if !*asJSON {
		fmt.Fprintf(stdout, "replaying %s: %d steps on task %q (%s on %s)\n", m.ID, len(rec.Steps), taskID, a.Space(), a.DisplayName())
	}
	opt := record.ReplayOptions{OutDir: *outDir, MaxChanged: *maxChanged,
		Settle: screen.SettleOptions{Quiet: c.SettleQuiet, Max: c.SettleMax}}
	if !*asJSON {
		opt.OnStep = func(s record.StepResult) { fmt.Fprintln(stdout, stepLine(s)) }
	}
	rep, err := a.Replay(ctx, rec, opt)
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	end, err := a.Control().End(ectx, ep.ID)
	if err != nil {
		return fmt.Errorf("replay: score the episode: %w", err)
	}
	var recorded *float64
	if m.Outcome != nil {
		recorded = m.Outcome.Reward
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(map[string]any{"episode": m.ID, "task_id": taskID, "report": rep, "reward": end.Reward,
			"recorded_reward": recorded, "reasons": end.Reasons})
	} else {
		switch {
		case rep.Diverged == 0:
			fmt.Fprintf(stdout, "screens: all %d compared observations match\n", rep.Compared)
		default:
			fmt.Fprintf(stdout, "screens: %d of %d compared observations diverged, first at step %d\n", rep.Diverged, rep.Compared, rep.FirstDivergence)
		}
		fmt.Fprintf(stdout, "reward: %s (recorded: %s)\n", rewardText(end.Reward), rewardText(recorded))
		for _, r := range end.Reasons {
			fmt.Fprintf(stdout, "  %s\n", reasonText(r))
		}
	}
	if end.Reward != nil && recorded != nil && *end.Reward != *recorded {
		return fmt.Errorf("replay: the reward %s differs from the recorded %s", rewardText(end.Reward), rewardText(recorded))
	}
	if end.Error != "" {
		return errors.New("replay: " + end.Error)
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
