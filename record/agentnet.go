package record

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/deskenv/deskenv/hci"
)

// Trajectory is one episode in the shape of AgentNet's trajectories
// (xlang-ai/OpenCUA; the xlangai/AgentNet dataset on Hugging Face): the
// task, its instruction, and per step the observation the action was taken
// on and the action as pyautogui code on coordinates normalised to 0..1.
// The fields AgentNet's annotation pipeline synthesises afterwards
// (thought, reflection, the step-correctness judgements) are left empty or
// null rather than invented: a trainer that needs them runs that pipeline.
type Trajectory struct {
	TaskID      string `json:"task_id"`
	Instruction string `json:"instruction"`
	// TaskCompleted is the checker's verdict, null when the episode was not
	// scored.
	TaskCompleted *bool            `json:"task_completed"`
	Traj          []TrajectoryStep `json:"traj"`
	// deskenv's own, beside AgentNet's fields: where the episode came from.
	EpisodeID string   `json:"episode_id"`
	Source    string   `json:"source"`
	Reward    *float64 `json:"reward"`
	Status    string   `json:"status"`
	// Seed and Params are the variant of the task: the reset's seed and
	// the values it chose for the task's parameters (absent when none).
	Seed   *int64         `json:"seed,omitempty"`
	Params map[string]any `json:"params,omitempty"`
}

// TrajectoryStep is one entry of traj.
type TrajectoryStep struct {
	Index int `json:"index"`
	// Image is the observation before the action, a path relative to the
	// export file ("" when the episode has none for this step).
	Image string        `json:"image"`
	Value TrajectoryAct `json:"value"`
}

// TrajectoryAct is a step's value. Code is the pyautogui program; Action a
// short description of it in words, as AgentNet's action field has.
type TrajectoryAct struct {
	Observation       string `json:"observation"`
	Thought           string `json:"thought"`
	Action            string `json:"action"`
	Reflection        string `json:"reflection"`
	Code              string `json:"code"`
	LastStepCorrect   *bool  `json:"last_step_correct"`
	LastStepRedundant *bool  `json:"last_step_redundant"`
	// ComputerAction is the step exactly as the computer tool input it was
	// recorded as, so nothing is lost in the translation to pyautogui.
	ComputerAction hci.Action `json:"computer_action"`
}

// trajectoryOf is rec as an AgentNet trajectory. Steps that only observe
// (screenshot, cursor_position, zoom) change nothing and have no pyautogui
// form; they are left out, and indices count the steps kept.
func trajectoryOf(rec *Recording, outDir string) Trajectory {
	m := rec.Meta
	tr := Trajectory{EpisodeID: m.ID, Source: m.Source, Status: m.Status, Traj: []TrajectoryStep{}}
	if m.Task != nil {
		tr.TaskID, tr.Instruction = m.Task.ID, m.Task.Instruction
		tr.Seed, tr.Params = m.Task.Seed, m.Task.Params
	}
	if o := m.Outcome; o != nil && o.Reward != nil {
		done := o.Succeeded()
		tr.TaskCompleted, tr.Reward = &done, o.Reward
	}
	for _, st := range rec.Steps {
		code, ok := pyautoguiCode(st.Action, m.Model.W, m.Model.H)
		if !ok {
			continue
		}
		ts := TrajectoryStep{Index: len(tr.Traj), Value: TrajectoryAct{Code: code, Action: describe(st.Action), ComputerAction: st.Action}}
		if st.Before != "" {
			ts.Image = relPath(outDir, filepath.Join(rec.Dir, st.Before))
		}
		tr.Traj = append(tr.Traj, ts)
	}
	return tr
}

// describe says in words what an action does, for AgentNet's action field.
func describe(a hci.Action) string {
	var b strings.Builder
	b.WriteString(strings.ReplaceAll(a.Action, "_", " "))
	if len(a.Coordinate) == 2 {
		fmt.Fprintf(&b, " at (%d, %d)", a.Coordinate[0], a.Coordinate[1])
	}
	if a.ScrollDirection != "" {
		fmt.Fprintf(&b, " %s", a.ScrollDirection)
	}
	if a.Text != "" {
		fmt.Fprintf(&b, " %q", a.Text)
	}
	return b.String()
}

// relPath is path relative to dir when it can be, else path as it is.
func relPath(dir, path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	rel, err := filepath.Rel(dir, abs)
	if err != nil {
		return path
	}
	return filepath.ToSlash(rel)
}
