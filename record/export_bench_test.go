package record

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/deskenv/deskenv/hci"
)

// BenchmarkExport exports a corpus of 10,000 steps (100 episodes of 100
// steps, an agent's and a person's mix of clicks, typing and keys, one
// distinct 1280x800 screen per 4 steps as a recording dedupes them) in each
// format, and reports rows/s and MB/s of output (lerobot embeds the
// observations as images: the corpus has no video), and jsonl and parquet
// again with each step said in a dialect too (--dialect):
//
//	go test -run '^$' -bench BenchmarkExport -benchtime 3x ./record/
func BenchmarkExport(b *testing.B) {
	root := b.TempDir()
	const episodes, steps = 100, 100
	if err := writeCorpus(root, episodes, steps); err != nil {
		b.Fatal(err)
	}
	type run struct{ format, dialect string }
	runs := []run{{"jsonl", ""}, {"parquet", ""}, {"agentnet", ""}, {"lerobot", ""}}
	for _, d := range hci.Dialects() {
		runs = append(runs, run{"jsonl", d})
	}
	runs = append(runs, run{"parquet", hci.DialectGemini})
	for _, r := range runs {
		format := r.format
		name := format
		if r.dialect != "" {
			name += "+" + r.dialect
		}
		b.Run(name, func(b *testing.B) {
			tmp := b.TempDir()
			var st ExportStats
			var err error
			start := time.Now()
			for i := 0; i < b.N; i++ {
				// A LeRobot dataset is a directory and must be new.
				out := filepath.Join(tmp, fmt.Sprint(i), "train."+format)
				if st, err = Export(context.Background(), root, out, ExportOptions{Format: format, Dialect: r.dialect}); err != nil {
					b.Fatal(err)
				}
			}
			secs := time.Since(start).Seconds() / float64(b.N)
			if st.Rows != episodes*steps && format != "agentnet" {
				b.Fatalf("%d rows exported, want %d", st.Rows, episodes*steps)
			}
			b.ReportMetric(float64(episodes*steps)/secs, "steps/s")
			b.ReportMetric(float64(st.Bytes)/secs/1e6, "MB/s")
			b.ReportMetric(float64(st.Bytes)/1e6, "MB")
		})
	}
}

// writeCorpus writes n complete episodes of m steps in the recorder's
// layout, as a recorder would have left them.
func writeCorpus(root string, n, m int) error {
	rnd := rand.New(rand.NewPCG(1, 2))
	space := hci.Space{ScreenW: 1280, ScreenH: 800, ModelW: 1280, ModelH: 800}
	for e := 0; e < n; e++ {
		dir := filepath.Join(root, fmt.Sprintf("ep-%03d", e))
		if err := os.MkdirAll(filepath.Join(dir, ShotsDir), 0o755); err != nil {
			return err
		}
		stepsF, err := createLines(filepath.Join(dir, StepsFile))
		if err != nil {
			return err
		}
		shotsF, err := createLines(filepath.Join(dir, ShotsFile))
		if err != nil {
			return err
		}
		var files []string
		for s := 0; s < m; s += 4 {
			name := filepath.Join(ShotsDir, fmt.Sprintf("%06d.png", len(files)))
			if err := os.WriteFile(filepath.Join(dir, name), screenPNG(rnd), 0o644); err != nil {
				return err
			}
			if err := shotsF.write(Shot{N: len(files), T: float64(s), File: name, W: 1280, H: 800, Hash: rnd.Uint64()}); err != nil {
				return err
			}
			files = append(files, name)
		}
		source := hci.SourceAgent
		if e%2 == 1 {
			source = "human"
		}
		for s := 0; s < m; s++ {
			st := Step{Step: s, Source: source, Action: corpusAction(rnd, s), TStart: float64(s), TEnd: float64(s) + 0.2,
				Events: []int{s, s}, Before: files[s/4], After: files[min(s/4+1, len(files)-1)]}
			if err := stepsF.write(&st); err != nil {
				return err
			}
		}
		stepsF.f.Close()
		shotsF.f.Close()
		if err := os.WriteFile(filepath.Join(dir, InputFile), nil, 0o644); err != nil {
			return err
		}
		reward, ok := float64(e%2), e%2 == 1
		now := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
		meta := Meta{SchemaVersion: SchemaVersion, ID: fmt.Sprintf("ep-%03d", e), Source: string(source),
			Task:   &TaskInfo{ID: "edit-todo", Instruction: "Add <b>milk</b> & eggs to ~/todo.txt"},
			Screen: Size{W: space.ScreenW, H: space.ScreenH}, Model: Size{W: space.ModelW, H: space.ModelH},
			Status: StatusComplete, StartedAt: now, EndedAt: &now, DurationS: float64(m),
			Outcome: &Outcome{Reward: &reward, Success: &ok, Done: true}, Counts: Counts{Steps: m, Shots: len(files)}}
		if err := writeMeta(dir, &meta); err != nil {
			return err
		}
	}
	return nil
}

func corpusAction(rnd *rand.Rand, s int) hci.Action {
	switch s % 4 {
	case 0:
		return hci.Action{Action: hci.ActLeftClick, Coordinate: []int{rnd.IntN(1280), rnd.IntN(800)}}
	case 1:
		return hci.Action{Action: hci.ActType, Text: fmt.Sprintf("echo step %d > ~/log.txt && cat ~/log.txt", s)}
	case 2:
		return hci.Action{Action: hci.ActKey, Text: "Return"}
	}
	return hci.Action{Action: hci.ActScroll, Coordinate: []int{640, 400}, ScrollDirection: "down", ScrollAmount: intPtr(3)}
}

func intPtr(v int) *int { return &v }

// screenPNG is a 1280x800 desktop-like screen: flat panels, windows and
// rows of text-like marks, which compress about as a real one does.
func screenPNG(rnd *rand.Rand) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 1280, 800))
	fill := func(r image.Rectangle, c color.RGBA) {
		for y := r.Min.Y; y < r.Max.Y; y++ {
			for x := r.Min.X; x < r.Max.X; x++ {
				img.SetRGBA(x, y, c)
			}
		}
	}
	fill(img.Bounds(), color.RGBA{40, 60, 90, 255})
	fill(image.Rect(0, 770, 1280, 800), color.RGBA{30, 30, 30, 255})
	for w := 0; w < 3; w++ {
		x, y := rnd.IntN(700), rnd.IntN(400)
		win := image.Rect(x, y, x+500, y+350)
		fill(win, color.RGBA{250, 250, 250, 255})
		for line := win.Min.Y + 10; line < win.Max.Y-10; line += 16 {
			for cx := win.Min.X + 8; cx < win.Max.X-8; cx += 8 {
				if rnd.IntN(5) > 0 {
					fill(image.Rect(cx, line, cx+6, line+10), color.RGBA{20, 20, 20, 255})
				}
			}
		}
	}
	var buf bytes.Buffer
	png.Encode(&buf, img)
	return buf.Bytes()
}
