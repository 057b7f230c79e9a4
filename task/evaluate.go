package task

import (
	"context"
	"errors"
	"fmt"
	"image"
	"strings"
)

// MaxFileRead is how much of a file file_contains and file_matches look at.
const MaxFileRead = 16 << 20

const eps = 1e-9

// Evaluate runs the evaluator and combines its checks into a reward in [0, 1]:
//
//   - a leaf check gives 1 when it holds and 0 when not;
//   - "and" gives the minimum of its checks' rewards (so 1 only when all
//     pass), or with "partial": true their mean weighted by "weight";
//   - "or" gives the maximum;
//   - "not" gives 1 minus its check's reward.
//
// A check passes when its reward is 1, and the task succeeds when the
// evaluator passes. Every check runs, even when the result is already
// decided, so the Reasons say everything that was wrong.
//
// A check that could not look (the X server did not answer, a command could
// not start, ctx ended) counts as failed, and Evaluate also returns an error
// naming it, so a broken environment is not mistaken for a failed task. The
// Outcome is complete either way.
func (t *Task) Evaluate(ctx context.Context, env Env) (Outcome, error) {
	ev := &evaluation{env: env}
	reward := ev.eval(ctx, &t.Evaluator, "evaluator")
	out := Outcome{Reward: reward, Success: reward >= 1-eps, Reasons: ev.reasons}
	if len(ev.errs) > 0 {
		return out, fmt.Errorf("task %q: evaluation incomplete: %w", t.ID, errors.Join(ev.errs...))
	}
	return out, nil
}

type evaluation struct {
	env     Env
	reasons []Reason
	errs    []error
}

// eval runs c and the checks under it, adds their Reasons and returns c's
// reward.
func (ev *evaluation) eval(ctx context.Context, c *Check, path string) float64 {
	k := c.kindOf()
	idx := len(ev.reasons)
	desc := c.describe(k)
	ev.reasons = append(ev.reasons, Reason{Check: desc, Path: path})
	var (
		reward float64
		detail string
	)
	if k != nil && k.combines {
		reward, detail = ev.group(ctx, c, path)
	} else {
		reward, detail = ev.leaf(ctx, k, c, path, desc)
	}
	ev.reasons[idx].Reward = reward
	ev.reasons[idx].Passed = reward >= 1-eps
	ev.reasons[idx].Detail = detail
	return reward
}

// group evaluates an and, or or not: every check under it, then their
// rewards combined.
func (ev *evaluation) group(ctx context.Context, c *Check, path string) (float64, string) {
	rewards := make([]float64, len(c.Checks))
	weights := make([]float64, len(c.Checks))
	for i := range c.Checks {
		rewards[i] = ev.eval(ctx, &c.Checks[i], index(path+".checks", i))
		weights[i] = c.Checks[i].WeightOrDefault()
	}
	reward := combine(c.Type, c.Partial, rewards, weights)
	return reward, combineDetail(c.Type, c.Partial, rewards, reward)
}

// leaf runs one leaf check through its kind. A check that could not look
// fails, and its error is kept for Evaluate to return.
func (ev *evaluation) leaf(ctx context.Context, k *CheckKind, c *Check, path, desc string) (float64, string) {
	ok, detail, err := false, "", ctx.Err()
	if err == nil && k == nil {
		err = fmt.Errorf("unknown check type %q", c.Type)
	}
	if err == nil {
		ok, detail, err = k.Evaluate(ctx, ev.env, c)
	}
	if err != nil {
		ev.errs = append(ev.errs, fmt.Errorf("%s (%s): %w", path, desc, err))
		return 0, "could not check: " + err.Error()
	}
	if ok {
		return 1, detail
	}
	return 0, detail
}

// combine is the reward of an "and", "or" or "not" whose checks got rewards
// (weights count only in a partial "and").
func combine(typ string, partial bool, rewards, weights []float64) float64 {
	if len(rewards) == 0 {
		return 0
	}
	switch typ {
	case CheckAnd:
		if partial {
			var sum, wsum float64
			for i, r := range rewards {
				sum += r * weights[i]
				wsum += weights[i]
			}
			if wsum <= 0 {
				return 0
			}
			return clamp01(sum / wsum)
		}
		m := rewards[0]
		for _, r := range rewards[1:] {
			m = min(m, r)
		}
		return clamp01(m)
	case CheckOr:
		m := rewards[0]
		for _, r := range rewards[1:] {
			m = max(m, r)
		}
		return clamp01(m)
	case CheckNot:
		return clamp01(1 - rewards[0])
	}
	return 0
}

func clamp01(v float64) float64 { return min(1, max(0, v)) }

func combineDetail(typ string, partial bool, rewards []float64, reward float64) string {
	passed := 0
	for _, r := range rewards {
		if r >= 1-eps {
			passed++
		}
	}
	switch typ {
	case CheckNot:
		if passed == 1 {
			return "the check passed, so this fails"
		}
		return "the check did not pass, as wanted"
	case CheckAnd:
		s := fmt.Sprintf("%d of %d checks passed", passed, len(rewards))
		if partial {
			s += fmt.Sprintf("; weighted reward %.2f", reward)
		}
		return s
	default:
		if passed == 0 {
			return fmt.Sprintf("none of %d checks passed", len(rewards))
		}
		return fmt.Sprintf("%d of %d checks passed", passed, len(rewards))
	}
}

// matcher is the check's text condition. Parse compiled the regular
// expression; a Check built in code gets it compiled here.
func (c *Check) matcher() (matcher, error) {
	return newMatcher(c.Contains, c.Matches, c.re, c.IgnoreCase)
}

// describe is the check as a reader would name it: its Name, or what its
// kind says, such as `file_contains ~/notes.txt`.
func (c *Check) describe(k *CheckKind) string {
	switch {
	case c.Name != "":
		return c.Name
	case k == nil || k.Describe == nil:
		return c.Type
	}
	return k.Describe(c)
}

// textCheck applies m to text and words the result.
func textCheck(what string, m matcher, text, note string) (bool, string, error) {
	if m.match(text) {
		if m.re != nil && m.contains == "" {
			loc := m.re.FindStringIndex(text)
			return true, fmt.Sprintf("%s matches: %s at line %d%s", what, quoteHead(text[loc[0]:loc[1]], 120), lineOf(text, loc[0]), note), nil
		}
		if m.contains != "" && m.re == nil {
			i := strings.Index(text, m.contains)
			if m.ignoreCase {
				i = strings.Index(strings.ToLower(text), strings.ToLower(m.contains))
			}
			if i >= 0 {
				return true, fmt.Sprintf("%s contains %q at line %d%s", what, m.contains, lineOf(text, i), note), nil
			}
		}
		return true, fmt.Sprintf("%s %s%s", what, m, note), nil
	}
	verb := "does not contain"
	target := fmt.Sprintf("%q", m.contains)
	if m.re != nil && m.contains == "" {
		verb, target = "does not match", m.pattern()
	} else if m.re != nil {
		verb, target = "does not satisfy", m.String()
	}
	if m.ignoreCase && m.re == nil {
		target += " (ignoring case)"
	}
	return false, fmt.Sprintf("%s %s %s (it has %d bytes: %s)%s", what, verb, target, len(text), quoteHead(text, 200), note), nil
}

func lineOf(text string, off int) int { return 1 + strings.Count(text[:off], "\n") }

// compareRegion compares the check's region of shot with its reference:
// the mean absolute difference per colour channel over the reference's
// opaque pixels must be at most the tolerance.
func compareRegion(shot *image.RGBA, c *Check) (bool, string) {
	if c.ref == nil || len(c.Region) != 4 {
		return false, "the check has no reference image (it was not loaded with Parse)"
	}
	x0, y0, w, h := c.Region[0], c.Region[1], c.Region[2], c.Region[3]
	sb := shot.Bounds()
	r := image.Rect(x0, y0, x0+w, y0+h).Add(sb.Min)
	if !r.In(sb) {
		return false, fmt.Sprintf("region %d,%d %dx%d lies outside the %dx%d screen", x0, y0, w, h, sb.Dx(), sb.Dy())
	}
	tol := DefaultTolerance
	if c.Tolerance != nil {
		tol = *c.Tolerance
	}
	var sum, counted, differing int
	for y := 0; y < h; y++ {
		srow := shot.Pix[shot.PixOffset(r.Min.X, r.Min.Y+y):]
		rrow := c.ref.Pix[c.ref.PixOffset(0, y):]
		for x := 0; x < w; x++ {
			rp := rrow[x*4 : x*4+4]
			if rp[3] == 0 {
				continue
			}
			sp := srow[x*4 : x*4+3]
			d0, d1, d2 := absDiff(sp[0], rp[0]), absDiff(sp[1], rp[1]), absDiff(sp[2], rp[2])
			sum += d0 + d1 + d2
			counted++
			if max(d0, d1, d2) > 32 {
				differing++
			}
		}
	}
	if counted == 0 {
		return true, "the reference image is fully transparent, so nothing was compared"
	}
	mean := float64(sum) / float64(3*counted)
	detail := fmt.Sprintf("mean difference %.2f per channel (tolerance %g); %.1f%% of %d pixels differ clearly",
		mean, tol, 100*float64(differing)/float64(counted), counted)
	return mean <= tol, detail
}

func absDiff(a, b uint8) int {
	if a > b {
		return int(a - b)
	}
	return int(b - a)
}
