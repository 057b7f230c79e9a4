package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/deskenv/deskenv/record"
)

// exportCmd is `deskenv export`: recorded episodes to one dataset file.
func exportCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("deskenv export", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var opt record.ExportOptions
	fs.StringVar(&opt.Format, "format", "parquet", "parquet (Hugging Face datasets loads it as it is, images inside), jsonl (the same rows, images as paths) agentnet (one AgentNet/OpenCUA trajectory per episode, actions as pyautogui code) or lerobot (a LeRobot v3 dataset directory: parquet rows and the recorded video as MP4; needs ffmpeg)")
	out := fs.String("out", "", "the file to write, e.g. data/train.parquet, with a dataset card README.md beside it; for lerobot a new or empty directory (required)")
	fs.StringVar(&opt.TaskID, "task", "", "only episodes of this task id")
	fs.StringVar(&opt.Source, "source", "", "only episodes by this source: human, agent or mixed")
	fs.StringVar(&opt.Outcome, "outcome", "", "only episodes with this outcome: success or failure")
	fs.StringVar(&opt.Review, "review", "", "only episodes with this review status: accepted, rejected or unreviewed (comma-separated for several)")
	fs.StringVar(&opt.Name, "name", "", "the dataset's name in its card (default: the output directory's name)")
	fs.StringVar(&opt.Dialect, "dialect", "", "also write each step in another model's dialect, beside the canonical action: openai (computer-use action objects), gemini (computer-use function calls on the 0-999 grid) or pyautogui (code); adds the columns via, dialect, dialect_json, dialect_of and dialect_error (parquet and jsonl; docs/DIALECTS.md)")
	fs.BoolVar(&opt.Fractions, "fractions", false, "with --dialect pyautogui: points as fractions of the screenshot (AgentNet's x=0.41), not pixels")
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: deskenv export --out FILE [--format parquet|jsonl|agentnet|lerobot] [--task ID] [--source human|agent|mixed] [--outcome success|failure] [--review accepted|rejected|unreviewed] [--dialect openai|gemini|pyautogui [--fractions]] EPISODES_DIR

Writes one row per recorded step of every episode under EPISODES_DIR (as recorded with
--episodes), and a dataset card README.md beside FILE. With --format lerobot, FILE is a
directory that receives a LeRobot v3 dataset (meta/, data/, videos/ and the card).
With --dialect, each row also holds its step in that model's dialect (dialect_json).
Progress goes to stderr.

Flags:
`)
		fs.PrintDefaults()
	}
	dirs, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if *out == "" {
		fs.Usage()
		return errors.New("export: --out is required: the file to write, such as data/train.parquet")
	}
	if len(dirs) != 1 {
		fs.Usage()
		return fmt.Errorf("export: give exactly one EPISODES_DIR, got %d", len(dirs))
	}
	start := time.Now()
	last := time.Time{}
	opt.Progress = func(done, total, rows int) {
		if done < total && time.Since(last) < time.Second {
			return
		}
		last = time.Now()
		fmt.Fprintf(stderr, "export: %d/%d episodes, %d rows, %s\n", done, total, rows, time.Since(start).Round(100*time.Millisecond))
	}
	st, err := record.Export(ctx, dirs[0], *out, opt)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	fmt.Fprintf(stdout, "wrote %s: %d rows from %d episodes (%d skipped), %d bytes; dataset card %s\n",
		*out, st.Rows, st.Episodes, st.Skipped, st.Bytes, st.Card)
	if opt.Dialect != "" && st.Unsaid > 0 {
		fmt.Fprintf(stdout, "%d steps cannot be said in %s: their rows' dialect_error says why\n", st.Unsaid, opt.Dialect)
	}
	return nil
}

// parseInterspersed parses flags that may come before or after the
// positional arguments (`deskenv export DIR --out x`), and returns those.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if rest[0] == "--" {
			return append(pos, rest[1:]...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}
