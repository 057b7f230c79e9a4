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
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/deskenv/deskenv/appliance"
	"github.com/deskenv/deskenv/control"
	"github.com/deskenv/deskenv/task"
)

// usageError is a command line deskenv cannot act on: exit status 2.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// tasksCmd is `deskenv tasks SUBCOMMAND`; check is the only one.
func tasksCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "check" {
		fmt.Fprint(stderr, tasksCheckUsageText)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			return flag.ErrHelp
		}
		return usageError{errors.New("tasks: the subcommand is check (deskenv tasks check --help)")}
	}
	c, err := parseTasksCheck(args[1:], stderr)
	if err != nil {
		return err
	}
	defer c.cleanup()
	return c.run(ctx, stdout, stderr)
}

const tasksCheckUsageText = `Usage: deskenv tasks check [--tasks DIR] [--only TAG|ID ...] [--seeds N] [--desktops N] [--json] [flags]

Proves every task: for each task (and, for a task with params, each of N seeds) it
resets a private desktop into the task, runs the task's solution as an agent's steps
(the MCP computer tool, as OpenEnv's step does) and requires reward 1, then resets
into the same task and seed again, does nothing, and requires reward 0. Prints a table
(task, seed, reward solved, reward idle, setup s, check s, result) and the failing
checks' reasons; progress goes to stderr. Exits 1 when any task fails, 2 on a bad
command line.

`

// checkFlags are the appliance's flags that mean something to a check: the
// desktops it starts and the tasks it proves.
var checkFlags = map[string]bool{
	"screen": true, "model-size": true, "wm": true, "apps": true, "session": true, "session-user": true,
	"allow-shared-user": true, "settle-quiet": true, "settle-max": true, "settle-idle-quiet": true, "tasks": true,
	"log-level": true, "log-format": true,
	"only": true, "seeds": true, "desktops": true, "json": true,
}

// tasksCheck is one `deskenv tasks check`.
type tasksCheck struct {
	cfg      config
	only     []string
	seeds    int
	desktops int
	asJSON   bool
	tasks    []*task.Task
	private  string // the desktops' homes and episodes, removed at the end
}

type listFlag struct{ v *[]string }

func (l listFlag) String() string {
	if l.v == nil {
		return ""
	}
	return strings.Join(*l.v, ",")
}

func (l listFlag) Set(s string) error {
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l.v = append(*l.v, p)
		}
	}
	return nil
}

func parseTasksCheck(args []string, stderr io.Writer) (*tasksCheck, error) {
	c := &tasksCheck{cfg: defaultConfig(), desktops: 1}
	c.cfg.LogLevel = "warn"
	fs := flag.NewFlagSet("deskenv tasks check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.cfg.flagSet(fs)
	fs.Var(listFlag{&c.only}, "only", "check only the tasks with this tag or id (repeat it, or separate with commas; a task matching any is checked)")
	fs.IntVar(&c.seeds, "seeds", 0, "seeds per task with params (default 3); a task without params is checked with one seed")
	fs.BoolVar(&c.asJSON, "json", false, "print the results as JSON instead of a table")
	fs.Usage = func() {
		fmt.Fprint(stderr, tasksCheckUsageText+"Flags:\n")
		fs.VisitAll(func(f *flag.Flag) {
			if checkFlags[f.Name] {
				name, usage := flag.UnquoteUsage(f)
				if f.Name == "desktops" {
					usage = "desktops to start in this process (default 1); the tasks are spread over them"
				}
				fmt.Fprintf(stderr, "  --%s %s\n    \t%s\n", f.Name, name, usage)
			}
		})
	}
	rest, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return nil, err
	}
	if err != nil {
		return nil, usageError{fmt.Errorf("tasks check: %w", err)}
	}
	// Bare words after the flags are more --only filters.
	c.only = append(c.only, rest...)
	var unused error
	fs.Visit(func(f *flag.Flag) {
		if !checkFlags[f.Name] && unused == nil {
			unused = usageError{fmt.Errorf("tasks check: --%s does nothing here (it starts private desktops and serves nothing): see deskenv tasks check --help", f.Name)}
		}
	})
	if unused != nil {
		return nil, unused
	}
	set := setFromEnv(fs, checkFlags)
	// --desktops is the appliance's pool size; here, the desktops the
	// tasks are spread over, each started on its own.
	c.desktops, c.cfg.Desktops = c.cfg.Desktops, 1
	switch {
	case c.seeds < 0 || c.seeds > 1000:
		return nil, usageError{fmt.Errorf("tasks check: --seeds %d: give 1 to 1000 (0: 3 for tasks with params)", c.seeds)}
	case c.desktops < 1 || c.desktops > 64:
		return nil, usageError{fmt.Errorf("tasks check: --desktops %d: give 1 to 64", c.desktops)}
	}
	if c.cfg.Tasks == "" && !set["tasks"] {
		c.cfg.Tasks = "tasks"
	}
	c.cfg.Mode, c.cfg.NoStream = "sim", true
	if err := c.cfg.validate(); err != nil {
		return nil, usageError{fmt.Errorf("tasks check: %w", err)}
	}
	all, err := task.Load(c.cfg.Tasks)
	if err != nil {
		return nil, usageError{fmt.Errorf("tasks check: load --tasks %s: %w", c.cfg.Tasks, err)}
	}
	c.tasks = selectTasks(all, c.only)
	if len(c.tasks) == 0 {
		return nil, usageError{fmt.Errorf("tasks check: no task in %s has a tag or id among --only %s", c.cfg.Tasks, strings.Join(c.only, ","))}
	}
	return c, nil
}

// selectTasks keeps the tasks with a tag or id in only (all without only).
func selectTasks(all []*task.Task, only []string) []*task.Task {
	if len(only) == 0 {
		return all
	}
	var out []*task.Task
	for _, t := range all {
		if slices.Contains(only, t.ID) || slices.ContainsFunc(t.Tags, func(tag string) bool { return slices.Contains(only, tag) }) {
			out = append(out, t)
		}
	}
	return out
}

func (c *tasksCheck) cleanup() {
	if c.private != "" {
		os.RemoveAll(c.private)
	}
}

// checkJob is one task and seed to prove, and what proving it found.
type checkJob struct {
	Task     string         `json:"task"`
	Seed     int64          `json:"seed"`
	Params   map[string]any `json:"params,omitempty"`
	Solved   *float64       `json:"reward_solved"`
	Idle     *float64       `json:"reward_idle"`
	SetupS   float64        `json:"setup_s"`
	CheckS   float64        `json:"check_s"`
	OK       bool           `json:"ok"`
	Problems []string       `json:"problems,omitempty"`
	Desktop  int            `json:"desktop"`
	t        *task.Task
}

func (c *tasksCheck) jobs() []*checkJob {
	var out []*checkJob
	for _, t := range c.tasks {
		n := 1
		if len(t.Params) > 0 {
			n = cmpOr(c.seeds, 3)
		}
		for s := range n {
			out = append(out, &checkJob{Task: t.ID, Seed: int64(s + 1), t: t})
		}
	}
	return out
}

func cmpOr(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

func (c *tasksCheck) run(ctx context.Context, stdout, stderr io.Writer) error {
	log := c.cfg.logger(stderr)
	quietXGB(log)
	jobs := c.jobs()
	desks, err := c.startDesktops(ctx, min(c.desktops, len(jobs)), stderr)
	if err != nil {
		return err
	}
	defer func() {
		for _, d := range desks {
			d.Close()
		}
	}()
	// Desktops with users of their own share the serve steps' ports
	// (task.Ports), so any desktop may run any task; otherwise the tasks
	// of one port wait for each other on one desktop.
	lanes, shared := schedule(jobs, len(desks), ownUsers(desks))
	var (
		mu   sync.Mutex
		done int
		wg   sync.WaitGroup
	)
	for i, d := range desks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next(lanes[i], shared) {
				if ctx.Err() != nil {
					j.Problems = append(j.Problems, "interrupted")
					continue
				}
				j.Desktop = i
				prove(ctx, d.Control(), j)
				mu.Lock()
				done++
				verdict := "ok"
				if !j.OK {
					verdict = "FAIL: " + strings.Join(j.Problems, "; ")
				}
				fmt.Fprintf(stderr, "[%d/%d] %s seed %d ... %s %.1fs\n", done, len(jobs), j.Task, j.Seed, verdict, j.SetupS+j.CheckS)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if c.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(jobs)
	} else {
		writeCheckTable(stdout, jobs)
	}
	failed := 0
	for _, j := range jobs {
		if !j.OK {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("tasks check: %d of %d checks failed", failed, len(jobs))
	}
	if ctx.Err() != nil {
		return fmt.Errorf("tasks check: %w", ctx.Err())
	}
	return nil
}

// schedule spreads the jobs over n desktops. Unless portsShared (the
// desktops share the serve steps' ports, telling their connections apart
// by user), two tasks that serve on the same port must not run at once:
// every job of a task with a serve step goes to the lane of its port's
// desktop, run in order there. The other jobs are shared, taken by
// whichever desktop is free.
func schedule(jobs []*checkJob, n int, portsShared bool) (lanes [][]*checkJob, shared chan *checkJob) {
	lanes = make([][]*checkJob, n)
	shared = make(chan *checkJob, len(jobs))
	ports := map[int]int{} // port -> lane
	for _, j := range jobs {
		if portsShared {
			shared <- j
			continue
		}
		lane := -1
		for _, st := range j.t.Setup {
			if st.Type != "serve" || st.Port == 0 {
				continue
			}
			if l, ok := ports[st.Port]; ok {
				lane = l
				break
			}
		}
		if lane < 0 {
			for _, st := range j.t.Setup {
				if st.Type == "serve" && st.Port != 0 {
					// A new port: the lane with the fewest jobs so far.
					lane = 0
					for i := range lanes {
						if len(lanes[i]) < len(lanes[lane]) {
							lane = i
						}
					}
					break
				}
			}
		}
		if lane < 0 {
			shared <- j
			continue
		}
		for _, st := range j.t.Setup {
			if st.Type == "serve" && st.Port != 0 {
				ports[st.Port] = lane
			}
		}
		lanes[lane] = append(lanes[lane], j)
	}
	close(shared)
	return lanes, shared
}

// next yields a desktop's own lane, then shared jobs until none is left.
func next(lane []*checkJob, shared <-chan *checkJob) <-chan *checkJob {
	out := make(chan *checkJob)
	go func() {
		defer close(out)
		for _, j := range lane {
			out <- j
		}
		for j := range shared {
			out <- j
		}
	}()
	return out
}

// startDesktops starts n private desktops in parallel: each with a home
// and episodes directory of its own, and as root a session user of its
// own, so one desktop's reset never touches another's programs.
func (c *tasksCheck) startDesktops(ctx context.Context, n int, stderr io.Writer) ([]*appliance.Desktop, error) {
	dir, err := os.MkdirTemp("", "deskenv-tasks-check-")
	if err != nil {
		return nil, fmt.Errorf("tasks check: a private directory: %w", err)
	}
	c.private = dir
	if err := os.Chmod(dir, 0o711); err != nil {
		return nil, fmt.Errorf("tasks check: a private directory: %w", err)
	}
	log := c.cfg.logger(stderr)
	desks := make([]*appliance.Desktop, n)
	errs := make([]error, n)
	ports := task.NewPorts(log)
	var wg sync.WaitGroup
	for i := range n {
		cfg := c.cfg.Config
		cfg.Ports = ports
		cfg.Home = filepath.Join(dir, "home"+strconv.Itoa(i))
		cfg.Episodes = filepath.Join(dir, "episodes"+strconv.Itoa(i))
		switch {
		case cfg.SessionUser != "" && n > 1:
			cfg.SessionUser += strconv.Itoa(i)
		case cfg.SessionUser == "" && os.Geteuid() == 0:
			cfg.SessionUser, cfg.SessionUserAuto = "deskenv-check"+strconv.Itoa(i), true
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			desks[i], errs[i] = appliance.New(ctx, cfg, log)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, d := range desks {
			if d != nil {
				d.Close()
			}
		}
		return nil, fmt.Errorf("tasks check: start the desktops: %w", err)
	}
	fmt.Fprintf(stderr, "tasks check: %d desktop(s) started in %s\n", n, dir)
	return desks, nil
}

// ownUsers reports whether every desktop's session runs as a user of its
// own, none shared: then their serve steps can share a port.
func ownUsers(desks []*appliance.Desktop) bool {
	seen := map[string]bool{}
	for _, d := range desks {
		u := d.SessionUser()
		if u == "" || seen[u] {
			return false
		}
		seen[u] = true
	}
	return true
}

// prove resets into the job's task and seed, runs its solution and scores
// (must be 1), then resets again, does nothing and scores (must be 0).
func prove(ctx context.Context, ctl *control.Control, j *checkJob) {
	limit := 5 * time.Minute
	if t := j.t.Timeout.D(); t > 0 {
		limit = t + time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	start := time.Now()
	seed := j.Seed
	// The values the reset will choose, known even when the reset fails.
	j.Params = j.t.Draw(seed)
	ep, err := ctl.Reset(ctx, control.ResetRequest{TaskID: j.Task, Seed: &seed})
	if err != nil {
		j.Problems = append(j.Problems, "reset: "+err.Error())
		return
	}
	j.SetupS = ep.ResetS
	if len(j.t.Solution) == 0 {
		j.Problems = append(j.Problems, "the task has no solution to run")
	}
	// The solution as this seed renders it: Reset rendered the same task.
	rt, _, err := j.t.Instantiate(seed)
	if err != nil {
		j.Problems = append(j.Problems, err.Error())
		return
	}
	for i, raw := range rt.Solution {
		if err := ctl.Act(ctx, "computer", raw); err != nil {
			j.Problems = append(j.Problems, fmt.Sprintf("solution step %d %s: %v", i+1, raw, err))
			break
		}
	}
	end, err := ctl.End(ctx, ep.ID)
	switch {
	case err != nil:
		j.Problems = append(j.Problems, "score the solved run: "+err.Error())
	case end.Error != "":
		j.Problems = append(j.Problems, "score the solved run: "+end.Error)
	default:
		j.Solved = end.Reward
		if end.Reward == nil || *end.Reward != 1 {
			j.Problems = append(j.Problems, "solved run scored "+rewardText(end.Reward)+": "+failedReasons(end.Reasons))
		}
	}
	idle, err := ctl.Reset(ctx, control.ResetRequest{TaskID: j.Task, Seed: &seed})
	if err != nil {
		j.Problems = append(j.Problems, "reset for the idle run: "+err.Error())
	} else if end, err := ctl.End(ctx, idle.ID); err != nil {
		j.Problems = append(j.Problems, "score the idle run: "+err.Error())
	} else if end.Error != "" {
		j.Problems = append(j.Problems, "score the idle run: "+end.Error)
	} else {
		j.Idle = end.Reward
		if end.Reward == nil || *end.Reward != 0 {
			j.Problems = append(j.Problems, "idle run scored "+rewardText(end.Reward)+" (doing nothing must score 0)")
		}
	}
	j.CheckS = time.Since(start).Seconds() - j.SetupS
	j.OK = len(j.Problems) == 0
}

// failedReasons lists the checks that did not pass.
func failedReasons(rs []task.Reason) string {
	var out []string
	for _, r := range rs {
		if !r.Passed {
			out = append(out, fmt.Sprintf("%s (at %s): %s", r.Check, r.Path, r.Detail))
		}
	}
	if len(out) == 0 {
		return "no check failed"
	}
	return strings.Join(out, "; ")
}

func writeCheckTable(w io.Writer, jobs []*checkJob) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "task\tseed\treward solved\treward idle\tsetup s\tcheck s\tresult")
	for _, j := range jobs {
		res := "ok"
		if !j.OK {
			res = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%.1f\t%.1f\t%s\n", j.Task, j.Seed, rewardText(j.Solved), rewardText(j.Idle), j.SetupS, j.CheckS, res)
	}
	tw.Flush()
	failed := 0
	for _, j := range jobs {
		if j.OK {
			continue
		}
		failed++
		fmt.Fprintf(w, "\nFAIL %s seed %d", j.Task, j.Seed)
		if len(j.Params) > 0 {
			b, _ := json.Marshal(j.Params)
			fmt.Fprintf(w, " params %s", b)
		}
		fmt.Fprintln(w)
		for _, p := range j.Problems {
			fmt.Fprintf(w, "  %s\n", p)
		}
	}
	fmt.Fprintf(w, "\n%d of %d passed\n", len(jobs)-failed, len(jobs))
}
