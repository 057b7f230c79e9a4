package record

import (
	"time"

	"github.com/deskenv/deskenv/hci"
)

// SchemaVersion is the version of the episode layout written to
// episode.json. Readers refuse a newer major version.
const SchemaVersion = 1

// Event kinds in input.jsonl besides hci's "action" and "input".
const (
	KindPause  = "pause"  // recording paused: nothing until the next resume is recorded
	KindResume = "resume" // recording resumed
)

// Event is one line of input.jsonl: an event of the executor's bus as the
// recorder received it (an action from any source, or a person's input
// primitive), or a pause/resume marker. Raw events are always kept, so an
// episode can be reduced again with other thresholds.
type Event struct {
	// I is the line number in input.jsonl, from 0; steps name their raw
	// events by it.
	I int `json:"i"`
	// T is when execution started, in seconds since the episode's zero on
	// the monotonic clock (episode.json's clock anchors relate it to wall
	// time).
	T float64 `json:"t"`
	// Seq is the bus's sequence number; gaps mean events were dropped.
	Seq uint64 `json:"seq,omitempty"`
	// MonoNS is the executor's own monotonic clock, in nanoseconds.
	MonoNS int64      `json:"mono_ns,omitempty"`
	Source hci.Source `json:"source,omitempty"`
	// Kind is "action", "input", "pause" or "resume".
	Kind   string      `json:"kind"`
	Action *hci.Action `json:"action,omitempty"`
	Input  *hci.Input  `json:"input,omitempty"`
	// Key is the input's keysym by name ("Return", "a"), for people reading
	// the file; Input.Keysym is what counts.
	Key string `json:"key,omitempty"`
	// Dur is how long execution took, in seconds.
	Dur float64 `json:"dur,omitempty"`
	Err string  `json:"err,omitempty"`
	// Via is the other model's tool an agent's action was said in
	// (hci.Event.Via): "openai", "gemini" or "pyautogui"; empty for the
	// computer tool.
	Via string `json:"via,omitempty"`
}

// End is when the event's execution finished, in episode seconds.
func (e Event) End() float64 { return e.T + e.Dur }

// fromBus converts a bus event, timing it against the episode's zero.
func fromBus(ev hci.Event, zero time.Time, i int) Event {
	out := Event{
		I: i, T: secs(ev.Time.Sub(zero)), Seq: ev.Seq, MonoNS: int64(ev.Mono),
		Source: ev.Source, Kind: ev.Kind, Action: ev.Action, Input: ev.Input,
		Dur: secs(ev.Duration), Err: ev.Err, Via: ev.Via,
	}
	if ev.Input != nil && ev.Input.Keysym != 0 {
		out.Key = ev.Input.Keysym.String()
	}
	return out
}

// secs is d in seconds, rounded to the microsecond so files stay readable.
func secs(d time.Duration) float64 {
	return float64(d.Round(time.Microsecond)) / float64(time.Second)
}

// Step is one line of steps.jsonl: one action in the vocabulary of
// Anthropic's computer tool, executed by an agent or reduced from a person's
// raw input.
type Step struct {
	// Step numbers the steps of an episode from 0, in the order written.
	Step   int        `json:"step"`
	Source hci.Source `json:"source"`
	// Action is exactly a computer tool_use input: {"action":"left_click",
	// "coordinate":[512,384]}, coordinates in model space.
	Action hci.Action `json:"action"`
	// TStart and TEnd are episode seconds: the first raw event's start and
	// the last one's end.
	TStart float64 `json:"t_start"`
	TEnd   float64 `json:"t_end"`
	// Events is the range of raw events (input.jsonl lines, inclusive) the
	// step came from; absent for a wait reduced from idle time.
	Events []int `json:"events,omitempty"`
	// Before is the observation the step was taken on (the last one
	// captured before it started) and After the first one captured after it
	// ended, as paths relative to the episode directory (shots/000003.png).
	Before string `json:"before,omitempty"`
	After  string `json:"after,omitempty"`
	// AfterMissing marks a step Repair rebuilt from input.jsonl: the recorder
	// died before observing the screen after it, so After is empty, and
	// Before is the last observation on disk from before the step.
	AfterMissing bool `json:"after_missing,omitempty"`
	// AfterOwn marks an agent's step whose call returned no screenshot (a
	// mutating action with screenshot:false, a script): After is the
	// recorder's own observation. Without it, an agent's Before and After
	// are the very screenshots its calls returned.
	AfterOwn bool `json:"after_own,omitempty"`
	// Err is the executor's error for an action that failed.
	Err string `json:"error,omitempty"`
	// Via is the other model's tool the agent said the action in
	// ("openai", "gemini", "pyautogui"; docs/DIALECTS.md); empty for the
	// computer tool. Action is canonical either way.
	Via string `json:"via,omitempty"`
}

// Shot is one line of shots.jsonl: an observation a step refers to (the
// others are not kept). Observations of an identical screen share one file;
// N counts every observation taken, so gaps are the ones dropped.
type Shot struct {
	N    int     `json:"n"` // observation number, from 0
	T    float64 `json:"t"` // capture time, episode seconds
	File string  `json:"file"`
	W    int     `json:"w"`
	H    int     `json:"h"`
	Hash uint64  `json:"hash"`
	// Agent marks a screenshot an agent's tool call returned (the others are
	// the recorder's own).
	Agent bool `json:"agent,omitempty"`
}

// Frame is one line of frames.jsonl: one encoded video frame.
type Frame struct {
	N       int   `json:"n"`       // frame number in the episode, from 0
	Segment int   `json:"segment"` // video/NNNNNN.h264
	Index   int   `json:"index"`   // frame number within the segment
	PTS     int64 `json:"pts_us"`  // capture time, episode microseconds
	Key     bool  `json:"key,omitempty"`
	Offset  int64 `json:"offset"` // byte offset of the access unit in the segment
	Size    int   `json:"size"`
}
