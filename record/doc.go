// Package record turns what happens on a desktop into episodes on disk, in
// the action schema agents use, and back.
//
// A Recorder subscribes to an executor's bus and records every action and
// input primitive, whoever sent it, into an episode directory: episode.json
// (metadata, clock anchors, status, outcome), input.jsonl (raw events),
// steps.jsonl (actions in the computer tool's input shape, a person's input
// reduced by a Reducer), shots/ (model-space observations before and after
// each step) and H.264 video segments with a frame index. Files are
// append-only, so a crash loses at most a line; Open reads an episode back
// and Repair finishes one whose recorder died.
//
// Reduce is the pure function from raw events to steps; Export writes
// episodes as Parquet (Hugging Face datasets loads it as it is) or JSON lines
// with a dataset card; Replay runs an episode's steps again and reports where
// the screen diverged. docs/RECORDING.md has the formats and thresholds.
//
// record imports only hci and image of deskenv's packages (and the internal
// codec for the video); cmd wires it to the control plane.
package record
