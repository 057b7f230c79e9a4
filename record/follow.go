package record

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/deskenv/deskenv/internal/wire"
	"github.com/deskenv/deskenv/lifecycle"
)

// The recorder follows the control plane through the lifecycle bus
// (Options.Lifecycle) and never calls it:
//
//   - EpisodeStarted tells it which episode runs, so a recording started
//     without an id (the page's record button), or with that episode's id,
//     records that episode under its task and instruction;
//   - EpisodeEnded stops the recording of that episode with its outcome;
//   - POST /api/recording/stop {"end_episode":true} publishes EndRequested
//     and waits for the EpisodeEnded (or EndFailed) that answers it. The
//     caller's reward, success, done and reasons wait beside it and are
//     applied over the checker's outcome when the episode ends, so they
//     are never lost to a race with the end of the episode.

// maxEnded bounds the ids of ended episodes kept to refuse recording them.
const maxEnded = 1024

// controlPlane is what the recorder has learned of the control plane.
type controlPlane struct {
	mu      sync.Mutex
	running *lifecycle.Episode
	ended   map[string]bool
	order   []string            // ended ids, oldest first
	ends    map[string]*pendEnd // episodes whose end the recorder asked for
}

// pendEnd is an end the recorder asked for: the caller's fields and who
// waits for the answer.
type pendEnd struct {
	override *stopRequest
	done     chan error // buffered: the answer never blocks the follower
}

func newControlPlane() *controlPlane {
	return &controlPlane{ended: map[string]bool{}, ends: map[string]*pendEnd{}}
}

// tie completes info from the control plane's running episode: no id and no
// task records the running episode; the running episode's id takes its task
// and instruction. The id of an episode that ended, or another id while an
// episode runs, is refused: the recording would not be the episode it
// names.
func (cp *controlPlane) tie(info EpisodeInfo) (EpisodeInfo, error) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	run := cp.running
	switch {
	case info.ID == "" && info.TaskID == "" && run != nil:
		info.ID = run.ID
	case info.ID == "":
		return info, nil
	case cp.ended[info.ID]:
		return info, invalidError(fmt.Sprintf("episode %s has ended: reset the desktop for a new episode and record that one", wire.Quote(info.ID)))
	case run == nil:
		return info, nil // no control-plane episode: a recording of its own
	case info.ID != run.ID:
		return info, invalidError(fmt.Sprintf("episode %s is not the running episode %s: leave episode_id out to record the running one",
			wire.Quote(info.ID), wire.Quote(run.ID)))
	}
	if info.TaskID != "" && info.TaskID != run.TaskID {
		return info, invalidError(fmt.Sprintf("episode %s runs task %s, not %s", wire.Quote(run.ID), wire.Quote(run.TaskID), wire.Quote(info.TaskID)))
	}
	info.TaskID = run.TaskID
	if info.Instruction == "" {
		info.Instruction = run.Instruction
	}
	info.Seed, info.Params = run.Seed, run.Params
	return info, nil
}

func (cp *controlPlane) started(ep lifecycle.Episode) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.running = &ep
}

// endedEp forgets the running episode and returns the end the recorder had
// asked for, if any.
func (cp *controlPlane) endedEp(id string) *pendEnd {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.running != nil && cp.running.ID == id {
		cp.running = nil
	}
	if !cp.ended[id] {
		cp.ended[id] = true
		cp.order = append(cp.order, id)
		if len(cp.order) > maxEnded {
			delete(cp.ended, cp.order[0])
			cp.order = cp.order[1:]
		}
	}
	p := cp.ends[id]
	delete(cp.ends, id)
	return p
}

// isRunning reports whether id is the control plane's running episode.
func (cp *controlPlane) isRunning(id string) bool {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.running != nil && cp.running.ID == id
}

// requestEnd registers an end of episode id with the caller's fields; the
// caller then publishes EndRequested and waits on the channel.
func (cp *controlPlane) requestEnd(id string, override *stopRequest) (<-chan error, error) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.running == nil || cp.running.ID != id {
		return nil, fmt.Errorf("%w: episode %s is not the control plane's running episode, so it cannot be ended from here; give reward and done instead",
			ErrNotRecording, wire.Quote(id))
	}
	if cp.ends[id] != nil {
		return nil, fmt.Errorf("%w: episode %s is already being ended", ErrRecording, wire.Quote(id))
	}
	p := &pendEnd{override: override, done: make(chan error, 1)}
	cp.ends[id] = p
	return p.done, nil
}

// failed answers an end the control plane could not do.
func (cp *controlPlane) failed(id, msg string) {
	cp.mu.Lock()
	p := cp.ends[id]
	delete(cp.ends, id)
	cp.mu.Unlock()
	if p != nil {
		p.done <- errors.New(msg)
	}
}

// follow reads the lifecycle bus until it closes or the recorder closes.
func (r *Recorder) follow(ch <-chan lifecycle.Event) {
	defer close(r.followDone)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return
			}
			r.handle(ev)
		case done := <-r.catchUp:
			// Everything published before the request is in ch's buffer
			// (publishing never blocks): handle it, in order, then answer.
			for drained := false; !drained; {
				select {
				case ev, ok := <-ch:
					if !ok {
						close(done)
						return
					}
					r.handle(ev)
				default:
					drained = true
				}
			}
			close(done)
		}
	}
}

func (r *Recorder) handle(ev lifecycle.Event) {
	switch ev.Kind {
	case lifecycle.EpisodeStarted:
		r.cp.started(ev.Episode)
	case lifecycle.EpisodeEnded:
		r.episodeEnded(ev)
	case lifecycle.EndFailed:
		r.cp.failed(ev.Episode.ID, ev.Err)
	}
}

// caughtUp returns once the recorder has handled every lifecycle event
// published before the call. The bus delivers on its own time, so without
// it a client that resets and at once starts recording (POST /api/reset,
// then POST /api/recording/start) could be recorded before the recorder
// learned of the episode: without its task, and never stopped by its end.
func (r *Recorder) caughtUp(ctx context.Context) error {
	if r.opt.Lifecycle == nil {
		return nil
	}
	done := make(chan struct{})
	select {
	case r.catchUp <- done:
	case <-r.followDone:
		return nil // the bus or the recorder closed: nothing more will come
	case <-ctx.Done():
		return fmt.Errorf("waiting for the control plane's news: %w", ctx.Err())
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the control plane's news: %w", ctx.Err())
	}
}

// episodeEnded stops the episode's recording with its outcome, the
// caller's fields over the checker's when the recorder asked for the end.
func (r *Recorder) episodeEnded(ev lifecycle.Event) {
	p := r.cp.endedEp(ev.Episode.ID)
	out := outcomeFrom(ev.Outcome)
	if p != nil {
		out = overlay(out, p.override)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := r.StopEpisode(ctx, ev.Episode.ID, out)
	if errors.Is(err, ErrNotRecording) {
		err = nil // this episode was not being recorded
	}
	if err != nil {
		r.log.Warn("stopping the recording of an ended episode", "episode", ev.Episode.ID, "err", err)
	}
	if p != nil {
		p.done <- err
	}
}

// endEpisode asks the control plane to end the episode being recorded and
// waits until its recording has stopped with the outcome.
func (r *Recorder) endEpisode(ctx context.Context, id string, override *stopRequest) error {
	if r.opt.Lifecycle == nil {
		return invalidError("end_episode: this recorder is not tied to a control plane; give reward and done instead")
	}
	done, err := r.cp.requestEnd(id, override)
	if err != nil {
		return err
	}
	r.opt.Lifecycle.Publish(lifecycle.Event{Kind: lifecycle.EndRequested, Episode: lifecycle.Episode{ID: id}})
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("ending episode %s: %w", id, err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("ending episode %s: the control plane did not answer: %w", id, ctx.Err())
	}
}

// notify tells everyone on the lifecycle bus (the stream's REC marker) what
// the recorder now does.
func (r *Recorder) notify() {
	if r.opt.Lifecycle == nil {
		return
	}
	st := r.Status()
	ev := lifecycle.Event{Kind: lifecycle.RecordingChanged}
	switch {
	case st.Paused:
		ev.Recording = lifecycle.Paused
	case st.Recording:
		ev.Recording = lifecycle.Recording
	}
	if e := st.Episode; e != nil {
		ev.Episode = lifecycle.Episode{ID: e.ID, TaskID: e.TaskID, Instruction: e.Instruction}
	}
	r.opt.Lifecycle.Publish(ev)
}

// outcomeFrom is the control plane's outcome as episode.json holds it.
func outcomeFrom(o *lifecycle.Outcome) *Outcome {
	if o == nil {
		return nil
	}
	return &Outcome{Reward: o.Reward, Success: o.Success, Done: o.Done, Interrupted: o.Interrupted,
		Reasons: append([]string(nil), o.Reasons...)}
}

// overlay puts the caller's fields (POST /api/recording/stop's reward,
// done, success, reasons) over base. Without fields it is base; without
// base, the fields alone.
func overlay(base *Outcome, sr *stopRequest) *Outcome {
	if sr == nil || (sr.Reward == nil && sr.Done == nil && sr.Success == nil && len(sr.Reasons) == 0) {
		return base
	}
	out := Outcome{}
	if base != nil {
		out = *base
	}
	if sr.Reward != nil {
		out.Reward = sr.Reward
	}
	if sr.Done != nil {
		out.Done = *sr.Done
	}
	if sr.Success != nil {
		out.Success = sr.Success
	}
	if len(sr.Reasons) > 0 {
		out.Reasons = sr.Reasons
	}
	return &out
}
