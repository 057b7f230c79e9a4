package record

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/deskenv/deskenv/internal/wire"
)

// ExportOptions choose the format and the episodes of an export.
type ExportOptions struct {
	// Format is "parquet" (default), "jsonl" (the same rows), "agentnet"
	// (one AgentNet/OpenCUA trajectory per episode, see agentnet.go) or
	// "lerobot" (a LeRobot v3 dataset directory at out, see lerobot.go).
	Format string
	// TaskID, Source (human, agent, mixed) and Outcome (success, failure)
	// keep only the episodes that match; empty keeps all.
	TaskID, Source, Outcome string
	// Review keeps only episodes whose review status (review.json; none
	// is unreviewed) is one of these, comma-separated: accepted, rejected,
	// unreviewed. Empty keeps all.
	Review string
	// Progress, if set, is told after each episode how many of how many
	// episodes are done and how many rows were written.
	Progress func(done, total, rows int)
	// Name is the dataset's name in its card; empty uses the output file's
	// directory name.
	Name string
	// Dialect, if set (openai, gemini or pyautogui), writes each step in
	// that model's dialect too, beside the canonical action (DialectRow;
	// export_dialect.go). Parquet and JSON lines only.
	Dialect string
	// Fractions writes the pyautogui dialect's points as fractions of the
	// model space (AgentNet's), not pixels.
	Fractions bool
}

// ExportStats say what an export wrote.
type ExportStats struct {
	Episodes int            `json:"episodes"`
	Skipped  int            `json:"skipped"` // filtered out or still being recorded
	Rows     int            `json:"rows"`
	Bytes    int64          `json:"bytes"`
	Sources  map[string]int `json:"sources"` // episodes per source
	Tasks    map[string]int `json:"tasks"`   // episodes per task
	Success  int            `json:"success"`
	Failure  int            `json:"failure"`
	Unscored int            `json:"unscored"`
	Card     string         `json:"card"` // the dataset card written beside the file
	// Unsaid counts the steps the export's dialect cannot say (their rows'
	// dialect_error says why).
	Unsaid int `json:"unsaid,omitempty"`
}

// ImageCell is an image column as Hugging Face datasets stores it: the
// encoded bytes and a path for reference.
type ImageCell struct {
	Bytes []byte `parquet:"bytes" json:"bytes"`
	Path  string `parquet:"path" json:"path"`
}

// Row is one row of an export: one step with the observation it was taken
// on.
type Row struct {
	EpisodeID   string  `parquet:"episode_id" json:"episode_id"`
	Step        int32   `parquet:"step" json:"step"`
	Source      string  `parquet:"source" json:"source"`
	TaskID      *string `parquet:"task_id,optional" json:"task_id"`
	Instruction *string `parquet:"instruction,optional" json:"instruction"`
	// Seed and ParamsJSON are the variant of the task the episode ran: the
	// reset's seed and the values it chose for the task's parameters (a
	// JSON object), null when there were none.
	Seed       *int64    `parquet:"seed,optional" json:"seed"`
	ParamsJSON *string   `parquet:"params_json,optional" json:"params_json"`
	Image      ImageCell `parquet:"image" json:"image"`
	// ActionJSON is the computer tool input exactly as recorded; the columns
	// after it are its fields.
	ActionJSON      string   `parquet:"action_json" json:"action_json"`
	Action          string   `parquet:"action" json:"action"`
	Coordinate      []int32  `parquet:"coordinate,optional,list" json:"coordinate"`
	StartCoordinate []int32  `parquet:"start_coordinate,optional,list" json:"start_coordinate"`
	Region          []int32  `parquet:"region,optional,list" json:"region"`
	Text            *string  `parquet:"text,optional" json:"text"`
	Key             *string  `parquet:"key,optional" json:"key"`
	ScrollDirection *string  `parquet:"scroll_direction,optional" json:"scroll_direction"`
	ScrollAmount    *int32   `parquet:"scroll_amount,optional" json:"scroll_amount"`
	Duration        *float64 `parquet:"duration,optional" json:"duration"`
	TStart          float64  `parquet:"t_start" json:"t_start"`
	TEnd            float64  `parquet:"t_end" json:"t_end"`
	ScreenW         int32    `parquet:"screen_w" json:"screen_w"`
	ScreenH         int32    `parquet:"screen_h" json:"screen_h"`
	ModelW          int32    `parquet:"model_w" json:"model_w"`
	ModelH          int32    `parquet:"model_h" json:"model_h"`
	// Reward is the episode's reward on its last step and 0 on the others
	// (null when the episode was not scored); EpisodeReward is the episode's
	// reward on every row, to filter by.
	Reward        *float64 `parquet:"reward,optional" json:"reward"`
	EpisodeReward *float64 `parquet:"episode_reward,optional" json:"episode_reward"`
	// Done is set on the last step of an episode that ended (status
	// complete).
	Done    bool    `parquet:"done" json:"done"`
	Success *bool   `parquet:"success,optional" json:"success"`
	Status  string  `parquet:"status" json:"status"`
	Error   *string `parquet:"error,optional" json:"error"`
}

// hfFeatures is the Hugging Face datasets schema of Row, stored in the
// Parquet file's metadata so the image column loads as images.
func hfFeatures() map[string]any {
	v := func(dtype string) map[string]any { return map[string]any{"dtype": dtype, "_type": "Value"} }
	seq := func(dtype string) map[string]any { return map[string]any{"feature": v(dtype), "_type": "Sequence"} }
	return map[string]any{
		"episode_id": v("string"), "step": v("int32"), "source": v("string"), "task_id": v("string"),
		"instruction": v("string"), "seed": v("int64"), "params_json": v("string"), "image": map[string]any{"_type": "Image"}, "action_json": v("string"),
		"action": v("string"), "coordinate": seq("int32"), "start_coordinate": seq("int32"), "region": seq("int32"),
		"text": v("string"), "key": v("string"), "scroll_direction": v("string"), "scroll_amount": v("int32"),
		"duration": v("float64"), "t_start": v("float64"), "t_end": v("float64"), "screen_w": v("int32"),
		"screen_h": v("int32"), "model_w": v("int32"), "model_h": v("int32"), "reward": v("float64"),
		"episode_reward": v("float64"), "done": v("bool"), "success": v("bool"), "status": v("string"), "error": v("string"),
	}
}

// FindEpisodes lists the episode directories under root (root itself when
// it is one), sorted.
func FindEpisodes(root string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if _, err := os.Stat(filepath.Join(p, MetaFile)); err == nil {
			out = append(out, p)
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("look for episodes in %s: %w", root, err)
	}
	sort.Strings(out)
	return out, nil
}

// Succeeded reports whether an outcome counts as a success: success if the
// checker said so, else a reward of 1.
func (o *Outcome) Succeeded() bool {
	if o == nil || o.Reward == nil {
		return false
	}
	if o.Success != nil {
		return *o.Success
	}
	return *o.Reward >= 1
}

func (opt ExportOptions) check() error {
	switch opt.Format {
	case "", "parquet", "jsonl", "agentnet", "lerobot":
	default:
		return fmt.Errorf("format %q is not known: use parquet, jsonl, agentnet or lerobot", opt.Format)
	}
	switch opt.Source {
	case "", "human", "agent", "mixed":
	default:
		return fmt.Errorf("source %q is not known: use human, agent or mixed", opt.Source)
	}
	switch opt.Outcome {
	case "", "success", "failure":
	default:
		return fmt.Errorf("outcome %q is not known: use success or failure", opt.Outcome)
	}
	if _, err := reviewFilter(opt.Review); err != nil {
		return err
	}
	return opt.checkDialect()
}

// keepReview reports whether the review filter keeps the episode in dir.
func (opt ExportOptions) keepReview(dir string) (bool, error) {
	statuses, err := reviewFilter(opt.Review)
	if err != nil || statuses == nil {
		return true, err
	}
	r, err := ReadReview(dir)
	if err != nil {
		return false, err
	}
	return statuses[r.Status], nil
}

func (opt ExportOptions) keep(m *Meta) bool {
	if opt.TaskID != "" && (m.Task == nil || m.Task.ID != opt.TaskID) {
		return false
	}
	if opt.Source != "" && m.Source != opt.Source {
		return false
	}
	switch opt.Outcome {
	case "success":
		return m.Outcome.Succeeded()
	case "failure":
		return m.Outcome != nil && m.Outcome.Reward != nil && !m.Outcome.Succeeded()
	}
	return true
}

// Export writes the steps of the episodes under root to out, one row per
// step, as Parquet that Hugging Face datasets loads as it is (the image
// column is {bytes, path} with the PNG inside) or as JSON lines (the image
// as a path relative to out, no bytes), and a dataset card README.md beside
// out. Episodes still being recorded are skipped; incomplete ones are
// exported with their status. out appears only once complete: rows go to
// out.partial first.
func Export(ctx context.Context, root, out string, opt ExportOptions) (ExportStats, error) {
	st := ExportStats{Sources: map[string]int{}, Tasks: map[string]int{}}
	if err := opt.check(); err != nil {
		return st, err
	}
	if opt.Format == "" {
		opt.Format = "parquet"
	}
	if opt.Format == "lerobot" {
		return leRobotExport(ctx, root, out, opt)
	}
	dirs, err := FindEpisodes(root)
	if err != nil {
		return st, err
	}
	if len(dirs) == 0 {
		return st, fmt.Errorf("no episodes under %s (an episode is a directory with %s)", root, MetaFile)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return st, err
	}
	tmp := out + ".partial"
	f, err := os.Create(tmp)
	if err != nil {
		return st, fmt.Errorf("create %s: %w", out, err)
	}
	defer func() {
		f.Close()
		os.Remove(tmp)
	}()
	w := newEpisodeWriter(opt, f, &st.Unsaid)
	outDir, _ := filepath.Abs(filepath.Dir(out))
	for i, dir := range dirs {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		if err := exportEpisode(dir, opt, w, outDir, &st); err != nil {
			return st, err
		}
		if opt.Progress != nil {
			opt.Progress(i+1, len(dirs), st.Rows)
		}
	}
	if err := w.finish(); err != nil {
		return st, fmt.Errorf("finish %s: %w", out, err)
	}
	if err := f.Close(); err != nil {
		return st, err
	}
	return st, publish(tmp, out, opt, &st)
}

// exportEpisode writes the rows of the episode in dir, or counts it skipped
// when it is still being recorded or the options filter it out.
func exportEpisode(dir string, opt ExportOptions, w episodeWriter, outDir string, st *ExportStats) error {
	rec, err := Open(dir)
	if err != nil {
		return err
	}
	keep, err := opt.keepReview(dir)
	if err != nil {
		return err
	}
	if rec.Live || !keep || !opt.keep(&rec.Meta) {
		st.Skipped++
		return nil
	}
	n, err := w.write(rec, outDir)
	if err != nil {
		return fmt.Errorf("write the rows of %s: %w", dir, err)
	}
	st.count(&rec.Meta, n)
	return nil
}

// count adds one exported episode of n rows to the totals.
func (st *ExportStats) count(m *Meta, n int) {
	st.Episodes++
	st.Rows += n
	st.Sources[m.Source]++
	if m.Task != nil && m.Task.ID != "" {
		st.Tasks[m.Task.ID]++
	}
	switch o := m.Outcome; {
	case o == nil || o.Reward == nil:
		st.Unscored++
	case o.Succeeded():
		st.Success++
	default:
		st.Failure++
	}
}

// publish renames the finished rows into place and writes the dataset card
// beside them.
func publish(tmp, out string, opt ExportOptions, st *ExportStats) error {
	if err := os.Rename(tmp, out); err != nil {
		return err
	}
	if fi, err := os.Stat(out); err == nil {
		st.Bytes = fi.Size()
	}
	st.Card = cardPath(filepath.Dir(out))
	if err := os.WriteFile(st.Card, []byte(datasetCard(out, opt, *st)), 0o644); err != nil {
		return fmt.Errorf("write the dataset card: %w", err)
	}
	return nil
}

// episodeWriter writes episodes in one export format and says how many
// rows (steps, or trajectory entries) each became.
type episodeWriter interface {
	write(rec *Recording, outDir string) (rows int, err error)
	finish() error
}

func newEpisodeWriter(opt ExportOptions, f *os.File, unsaid *int) episodeWriter {
	switch opt.Format {
	case "jsonl", "agentnet":
		bw := bufio.NewWriterSize(f, 1<<20)
		enc := json.NewEncoder(bw)
		enc.SetEscapeHTML(false) // a row's text is what was typed: keep <, > and & as they are
		return jsonlRows{bw: bw, enc: enc, agentnet: opt.Format == "agentnet", opt: opt, unsaid: unsaid}
	}
	features := hfFeatures()
	if opt.Dialect != "" {
		features = dialectFeatures(features)
	}
	meta, _ := json.Marshal(map[string]any{"info": map[string]any{"features": features}})
	wopts := []parquet.WriterOption{parquet.Compression(&parquet.Zstd), parquet.MaxRowsPerRowGroup(100),
		parquet.KeyValueMetadata("huggingface", string(meta)), parquet.CreatedBy("deskenv", "record", "1")}
	if opt.Dialect != "" {
		return parquetDialectRows{parquet.NewGenericWriter[DialectRow](f, wopts...), opt, unsaid}
	}
	return parquetRows{parquet.NewGenericWriter[Row](f, wopts...)}
}

type parquetRows struct{ w *parquet.GenericWriter[Row] }

func (p parquetRows) write(rec *Recording, outDir string) (int, error) {
	rows, err := rowsOf(rec, true, outDir)
	if err != nil {
		return 0, err
	}
	_, err = p.w.Write(rows)
	return len(rows), err
}

func (p parquetRows) finish() error { return p.w.Close() }

// parquetDialectRows writes the rows with their steps said in a dialect.
type parquetDialectRows struct {
	w      *parquet.GenericWriter[DialectRow]
	opt    ExportOptions
	unsaid *int
}

func (p parquetDialectRows) write(rec *Recording, outDir string) (int, error) {
	rows, err := rowsOf(rec, true, outDir)
	if err != nil {
		return 0, err
	}
	said, err := dialectRowsOf(rec, rows, p.opt, p.unsaid)
	if err != nil {
		return 0, err
	}
	_, err = p.w.Write(said)
	return len(said), err
}

func (p parquetDialectRows) finish() error { return p.w.Close() }

// jsonlRows writes one JSON line per step, or with agentnet one per
// episode: an AgentNet trajectory.
type jsonlRows struct {
	bw       *bufio.Writer
	enc      *json.Encoder
	agentnet bool
	opt      ExportOptions
	unsaid   *int // steps the dialect cannot say, counted
}

func (j jsonlRows) write(rec *Recording, outDir string) (int, error) {
	if j.agentnet {
		tr := trajectoryOf(rec, outDir)
		return len(tr.Traj), j.enc.Encode(tr)
	}
	rows, err := rowsOf(rec, false, outDir)
	if err != nil {
		return 0, err
	}
	if j.opt.Dialect != "" {
		said, err := dialectRowsOf(rec, rows, j.opt, j.unsaid)
		if err != nil {
			return 0, err
		}
		for i := range said {
			if err := j.enc.Encode(&said[i]); err != nil {
				return 0, err
			}
		}
		return len(said), nil
	}
	for i := range rows {
		if err := j.enc.Encode(&rows[i]); err != nil {
			return 0, err
		}
	}
	return len(rows), nil
}

func (j jsonlRows) finish() error { return j.bw.Flush() }

// taskVariant is the variant of the task episode m ran, as the exports
// write it: the reset's seed, and the values it chose for the task's
// parameters as a JSON object (nil when there were none).
func taskVariant(m *Meta) (seed *int64, params *string, err error) {
	if m.Task == nil {
		return nil, nil, nil
	}
	if len(m.Task.Params) > 0 {
		b, err := wire.Marshal(m.Task.Params)
		if err != nil {
			return nil, nil, fmt.Errorf("episode %s: its task's parameters: %w", m.ID, err)
		}
		s := string(b)
		params = &s
	}
	return m.Task.Seed, params, nil
}

// rowsOf makes the rows of one episode; with embed, each row carries the
// PNG of its observation.
func rowsOf(rec *Recording, embed bool, outDir string) ([]Row, error) {
	m := rec.Meta
	var taskID, instr *string
	if m.Task != nil {
		if m.Task.ID != "" {
			taskID = &m.Task.ID
		}
		if m.Task.Instruction != "" {
			instr = &m.Task.Instruction
		}
	}
	seed, params, err := taskVariant(&m)
	if err != nil {
		return nil, err
	}
	var epReward *float64
	var success *bool
	if m.Outcome != nil {
		epReward = m.Outcome.Reward
		if m.Outcome.Reward != nil {
			s := m.Outcome.Succeeded()
			success = &s
		}
	}
	cache := map[string][]byte{}
	rows := make([]Row, 0, len(rec.Steps))
	for i, s := range rec.Steps {
		a := s.Action
		aj, _ := wire.Marshal(a) // the action as the agent's schema has it, <, > and & unescaped
		r := Row{
			EpisodeID: m.ID, Step: int32(s.Step), Source: string(s.Source), TaskID: taskID, Instruction: instr,
			Seed: seed, ParamsJSON: params,
			ActionJSON: string(aj), Action: a.Action, Coordinate: ints32(a.Coordinate), StartCoordinate: ints32(a.StartCoordinate),
			Region: ints32(a.Region), Text: strPtr(a.Text), Key: strPtr(a.Key), ScrollDirection: strPtr(a.ScrollDirection),
			Duration: a.Duration, TStart: s.TStart, TEnd: s.TEnd,
			ScreenW: int32(m.Screen.W), ScreenH: int32(m.Screen.H), ModelW: int32(m.Model.W), ModelH: int32(m.Model.H),
			EpisodeReward: epReward, Success: success, Status: m.Status, Error: strPtr(s.Err),
		}
		if a.ScrollAmount != nil {
			n := int32(*a.ScrollAmount)
			r.ScrollAmount = &n
		}
		last := i == len(rec.Steps)-1
		if epReward != nil {
			zero := 0.0
			r.Reward = &zero
			if last {
				r.Reward = epReward
			}
		}
		r.Done = last && m.Status == StatusComplete
		if s.Before != "" {
			p := filepath.Join(rec.Dir, s.Before)
			if embed {
				r.Image.Path = filepath.ToSlash(filepath.Join(filepath.Base(rec.Dir), s.Before))
				b, ok := cache[p]
				if !ok {
					var err error
					if b, err = os.ReadFile(p); err != nil {
						if !errors.Is(err, os.ErrNotExist) {
							return nil, err
						}
						b = nil // an incomplete episode may lack its last file
					}
					cache = map[string][]byte{p: b} // steps share consecutive observations
				}
				r.Image.Bytes = b
			} else if abs, err := filepath.Abs(p); err == nil {
				if rel, err := filepath.Rel(outDir, abs); err == nil {
					r.Image.Path = filepath.ToSlash(rel)
				} else {
					r.Image.Path = abs
				}
			}
		}
		rows = append(rows, r)
	}
	return rows, nil
}

func ints32(v []int) []int32 {
	if v == nil {
		return nil
	}
	out := make([]int32, len(v))
	for i, x := range v {
		out[i] = int32(x)
	}
	return out
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// cardMarker marks a README.md as a card deskenv wrote, which the next export
// may replace; any other README.md is left alone.
const cardMarker = "<!-- dataset card written by deskenv export -->"

// cardPath is README.md in dir, unless dir has a README.md of someone else's
// (exporting into a project's root must not eat its README): then
// DATASET_CARD.md.
func cardPath(dir string) string {
	p := filepath.Join(dir, "README.md")
	b, err := os.ReadFile(p)
	if err != nil || strings.Contains(string(b), cardMarker) {
		return p
	}
	return filepath.Join(dir, "DATASET_CARD.md")
}

// datasetCard is the README.md written beside an export.
func datasetCard(out string, opt ExportOptions, st ExportStats) string {
	name := opt.Name
	if name == "" {
		abs, _ := filepath.Abs(filepath.Dir(out))
		name = filepath.Base(abs)
	}
	file := filepath.Base(out)
	var b strings.Builder
	fmt.Fprintf(&b, "---\nconfigs:\n- config_name: default\n  data_files:\n  - split: train\n    path: %s\n", file)
	if opt.Format == "jsonl" {
		b.WriteString("dataset_info:\n  features:\n  - name: image\n    struct:\n    - name: bytes\n      dtype: binary\n    - name: path\n      dtype: string\n")
	} else {
		b.WriteString("dataset_info:\n  features:\n  - name: image\n    dtype: image\n")
	}
	b.WriteString("tags:\n- computer-use\n- gui-agent\n- demonstrations\n- deskenv\n---\n" + cardMarker + "\n\n")
	fmt.Fprintf(&b, "# %s\n\n", name)
	fmt.Fprintf(&b, "Desktop episodes recorded with deskenv and exported on %s: one row per step, each step an action of Anthropic's `computer` tool (`computer_20251124`) with the screenshot it was taken on, exactly as a model would have seen it (scaled to model space: model_w x model_h).\n\n",
		time.Now().UTC().Format("2006-01-02"))
	fmt.Fprintf(&b, "| | |\n|---|---|\n| file | `%s` (%s, %s) |\n| episodes | %d |\n| steps (rows) | %d |\n| success / failure / unscored | %d / %d / %d |\n",
		file, opt.Format, humanBytes(st.Bytes), st.Episodes, st.Rows, st.Success, st.Failure, st.Unscored)
	fmt.Fprintf(&b, "| sources | %s |\n| tasks | %s |\n", counts(st.Sources), counts(st.Tasks))
	if opt.TaskID != "" || opt.Source != "" || opt.Outcome != "" {
		fmt.Fprintf(&b, "| filters | task=%q source=%q outcome=%q |\n", opt.TaskID, opt.Source, opt.Outcome)
	}
	b.WriteString("\n## Loading\n\n```python\nfrom datasets import load_dataset\n")
	if opt.Format == "jsonl" {
		fmt.Fprintf(&b, "ds = load_dataset(\"json\", data_files=%q, split=\"train\")\n", file)
		b.WriteString("# image.path is relative to this directory; image.bytes is null in JSON lines\n")
	} else {
		fmt.Fprintf(&b, "ds = load_dataset(\"parquet\", data_files=%q, split=\"train\")\nds[0][\"image\"]  # a PIL image\n", file)
	}
	b.WriteString("```\n\n## Columns\n\n| column | type | what |\n|---|---|---|\n")
	for _, c := range [][3]string{
		{"episode_id", "string", "the episode (a control-plane episode id)"},
		{"step", "int32", "the step's number in its episode, from 0"},
		{"source", "string", "who acted: human (reduced from raw input), agent, replay"},
		{"task_id, instruction", "string", "the task and what it asked (null without a task)"},
		{"seed", "int64", "the reset's seed: which variant of the task (null when none was given)"},
		{"params_json", "string", "the values the reset chose for the task's parameters, a JSON object (null when it has none)"},
		{"image", "{bytes, path}", "PNG of the observation the step was taken on (the last screenshot before it), model space"},
		{"action_json", "string", "the computer tool input as recorded, e.g. {\"action\":\"left_click\",\"coordinate\":[512,384]}"},
		{"action", "string", "the action's name"},
		{"coordinate, start_coordinate, region", "list<int32>", "model-space pixels (null when the action has none)"},
		{"text, key, scroll_direction, scroll_amount, duration", "", "the action's other fields (null when absent)"},
		{"t_start, t_end", "float64", "seconds since the episode's start (monotonic clock)"},
		{"screen_w, screen_h, model_w, model_h", "int32", "screen size and the model-space size coordinates are in"},
		{"reward", "float64", "the episode's reward on its last step, 0 on the others, null when unscored"},
		{"episode_reward", "float64", "the episode's reward on every row"},
		{"done", "bool", "true on the last step of an episode that ended normally"},
		{"success", "bool", "the task's checker said the episode succeeded"},
		{"status", "string", "complete, or incomplete when the recorder died mid-episode"},
		{"error", "string", "the executor's error when the action failed"},
	} {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", c[0], c[1], c[2])
	}
	if opt.Dialect != "" {
		for _, c := range dialectCardColumns(opt) {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", c[0], c[1], c[2])
		}
	}
	b.WriteString("\n## How it was made\n\nPeople's keyboard and mouse input is recorded raw (kept in each episode's `input.jsonl`) and reduced to actions: typing runs, chords, clicks, drags, scrolls, waits; the thresholds are in deskenv's docs/RECORDING.md. Corrections are kept as `key BackSpace` steps, never erased. Agents' actions are recorded as they were called.\n")
	return b.String()
}

func counts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
