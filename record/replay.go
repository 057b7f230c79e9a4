package record

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/draw"
	"image/png"
	"os"
	"path/filepath"

	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/screen"
)

// ReplayOptions configure Replay.
type ReplayOptions struct {
	// Source the steps run as (default replay).
	Source hci.Source
	// Settle is how the screen must settle after each step before it is
	// compared (default: quiet 80 ms, at most 2 s).
	Settle screen.SettleOptions
	// MaxChanged is the share of pixels (0-1) that may differ by more than
	// 16 in a channel for an observation to still match the recorded one.
	// The default 0 asks for the same picture up to colour noise: Xvfb
	// renders deterministically, and three characters typed into a terminal
	// change only 0.02 % of a 1024x768 screen, so any looser default would
	// miss real divergence. Raise it for desktops with clocks or animations.
	MaxChanged float64
	// OutDir, if set, receives the replay's observations, NNNNNN.png per
	// step, to look at beside the recorded ones.
	OutDir string
	// OnStep, if set, is told each step's result as it happens.
	OnStep func(StepResult)
}

// StepResult is how one step replayed.
type StepResult struct {
	Step   int        `json:"step"`
	Action hci.Action `json:"action"`
	// Err is the executor's error, if the step failed.
	Err string `json:"error,omitempty"`
	// Recorded is the recorded observation after the step; Compared is set
	// when there was one to compare with, taken before the next step began.
	Recorded string `json:"recorded,omitempty"`
	Compared bool   `json:"compared"`
	Match    bool   `json:"match"`
	// MeanDiff is the mean absolute difference per channel (0-255) and
	// Changed the share of pixels that differ by more than 16 in some
	// channel.
	MeanDiff float64 `json:"mean_diff"`
	Changed  float64 `json:"changed"`
	// Replayed is the replay's observation in OutDir, if written.
	Replayed string `json:"replayed,omitempty"`
}

// ReplayReport sums a replay up.
type ReplayReport struct {
	Steps    []StepResult `json:"steps"`
	Executed int          `json:"executed"`
	Failed   int          `json:"failed"`
	Compared int          `json:"compared"`
	Diverged int          `json:"diverged"`
	// FirstDivergence is the first step whose screen did not match, -1 if
	// none.
	FirstDivergence int `json:"first_divergence"`
}

// Replay executes a recorded episode's steps through exec, in order, and
// compares the screen after each with the observation recorded after it. It
// does not reset the desktop or score the result: the caller (deskenv
// replay) resets into the episode's task first and evaluates it after. Steps
// that failed when recorded are run again all the same (they failed without
// effect then, and should now).
func Replay(ctx context.Context, rec *Recording, exec *hci.Executor, shooter *screen.Shooter, capt *screen.Capturer, opt ReplayOptions) (*ReplayReport, error) {
	if opt.Source == "" {
		opt.Source = hci.SourceReplay
	}
	sp := exec.Space()
	if m := rec.Meta.Model; m.W != sp.ModelW || m.H != sp.ModelH {
		return nil, fmt.Errorf("the episode was recorded in a %dx%d model space (screen %dx%d) but this desktop's is %dx%d (screen %dx%d): start it with the recorded screen size",
			m.W, m.H, rec.Meta.Screen.W, rec.Meta.Screen.H, sp.ModelW, sp.ModelH, sp.ScreenW, sp.ScreenH)
	}
	if opt.OutDir != "" {
		if err := os.MkdirAll(opt.OutDir, 0o755); err != nil {
			return nil, err
		}
	}
	rp := replayer{rec: rec, exec: exec, shooter: shooter, capt: capt, opt: opt}
	rep := &ReplayReport{FirstDivergence: -1}
	for i := range rec.Steps {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		res, err := rp.step(ctx, i)
		if err != nil {
			return rep, err
		}
		rep.add(res)
		if opt.OnStep != nil {
			opt.OnStep(res)
		}
	}
	return rep, nil
}

// replayer runs one recording's steps on a desktop.
type replayer struct {
	rec     *Recording
	exec    *hci.Executor
	shooter *screen.Shooter
	capt    *screen.Capturer
	opt     ReplayOptions
}

// step runs step i and, when its recorded observation can be compared,
// compares the screen with it. An action that fails is a result, not an
// error; errors are what stops the replay (the context, the screen, files).
func (rp *replayer) step(ctx context.Context, i int) (StepResult, error) {
	st := rp.rec.Steps[i]
	res := StepResult{Step: st.Step, Action: st.Action, Recorded: st.After}
	if _, err := rp.exec.Do(ctx, st.Action, rp.opt.Source); err != nil {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		res.Err = err.Error()
	}
	if st.After == "" || !comparable(rp.rec, i) {
		return res, nil
	}
	return res, rp.compare(ctx, st, &res)
}

// compare observes the settled screen and compares it with the observation
// recorded after st.
func (rp *replayer) compare(ctx context.Context, st Step, res *StepResult) error {
	if _, _, err := rp.capt.Settle(ctx, rp.opt.Settle); err != nil {
		return fmt.Errorf("step %d: wait for the screen to settle: %w", st.Step, err)
	}
	shot, err := rp.shooter.Shot(ctx)
	if err != nil {
		return fmt.Errorf("step %d: observe: %w", st.Step, err)
	}
	if rp.opt.OutDir != "" {
		res.Replayed = filepath.Join(rp.opt.OutDir, fmt.Sprintf("%06d.png", st.Step))
		if err := os.WriteFile(res.Replayed, shot.Data, 0o644); err != nil {
			return err
		}
	}
	want, err := os.ReadFile(filepath.Join(rp.rec.Dir, st.After))
	if errors.Is(err, os.ErrNotExist) {
		return nil // an incomplete episode may lack it: nothing to compare
	}
	if err != nil {
		return err
	}
	res.MeanDiff, res.Changed, err = Compare(want, shot.Data)
	if err != nil {
		return fmt.Errorf("step %d: compare with %s: %w", st.Step, st.After, err)
	}
	res.Compared = true
	res.Match = res.Changed <= rp.opt.MaxChanged
	return nil
}

// add counts one step's result in the report.
func (rep *ReplayReport) add(res StepResult) {
	rep.Executed++
	if res.Err != "" {
		rep.Failed++
	}
	if res.Compared {
		rep.Compared++
		if !res.Match {
			rep.Diverged++
			if rep.FirstDivergence < 0 {
				rep.FirstDivergence = res.Step
			}
		}
	}
	rep.Steps = append(rep.Steps, res)
}

// comparable reports whether step i's recorded observation after shows the
// screen after step i alone: a person's quick burst (click, type, Return in
// a quarter of a second) is observed once, after all of it, and that
// observation says nothing about the screen between the steps.
func comparable(rec *Recording, i int) bool {
	if i+1 >= len(rec.Steps) {
		return true
	}
	st := rec.Steps[i]
	for _, sh := range rec.Shots {
		if sh.T >= st.TEnd {
			return sh.T <= rec.Steps[i+1].TStart
		}
	}
	return true // no index (an older or damaged episode): compare
}

// Compare decodes two PNG observations and returns their mean absolute
// difference per channel (0-255) and the share of pixels that differ by
// more than 16 in some channel. Images of different sizes differ entirely.
func Compare(a, b []byte) (meanDiff, changed float64, err error) {
	ia, err := decodeRGBA(a)
	if err != nil {
		return 0, 0, err
	}
	ib, err := decodeRGBA(b)
	if err != nil {
		return 0, 0, err
	}
	if ia.Bounds().Size() != ib.Bounds().Size() {
		return 255, 1, nil
	}
	w, h := ia.Bounds().Dx(), ia.Bounds().Dy()
	if w == 0 || h == 0 {
		return 0, 0, nil
	}
	var sum, diffPx int64
	for y := 0; y < h; y++ {
		ra := ia.Pix[y*ia.Stride : y*ia.Stride+w*4]
		rb := ib.Pix[y*ib.Stride : y*ib.Stride+w*4]
		for x := 0; x < len(ra); x += 4 {
			d0, d1, d2 := absDiff(ra[x], rb[x]), absDiff(ra[x+1], rb[x+1]), absDiff(ra[x+2], rb[x+2])
			sum += int64(d0 + d1 + d2)
			if d0 > 16 || d1 > 16 || d2 > 16 {
				diffPx++
			}
		}
	}
	n := float64(w * h)
	return float64(sum) / (3 * n), float64(diffPx) / n, nil
}

func decodeRGBA(b []byte) (*image.RGBA, error) {
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("decode PNG: %w", err)
	}
	if rgba, ok := img.(*image.RGBA); ok && rgba.Bounds().Min == (image.Point{}) {
		return rgba, nil
	}
	out := image.NewRGBA(image.Rect(0, 0, img.Bounds().Dx(), img.Bounds().Dy()))
	draw.Draw(out, out.Bounds(), img, img.Bounds().Min, draw.Src)
	return out, nil
}

func absDiff(a, b uint8) int {
	if a > b {
		return int(a - b)
	}
	return int(b - a)
}
