package control

import (
	"context"
	"fmt"

	"github.com/deskenv/deskenv/lifecycle"
)

// The control plane meets the other features on the lifecycle bus
// (Config.Lifecycle) and never calls them: it publishes EpisodeStarted and
// EpisodeEnded (scored or interrupted, with the outcome) and
// ServerRestarted, and ends the episodes others ask it to end
// (EndRequested: the recorder's stop with end_episode), answering with
// EpisodeEnded or EndFailed.

// publish sends ev on the bus, if the control plane has one.
func (c *Control) publish(ev lifecycle.Event) {
	if lc := c.cfg.Lifecycle; lc != nil {
		lc.Publish(ev)
	}
}

// started announces an episode that has started. testHookStarted, set by
// tests only, runs inside the reset (before it answers): the one place a
// test can act while the reset still holds the desktop.
func (c *Control) started(ep Episode) {
	if c.testHookStarted != nil {
		c.testHookStarted(ep)
	}
	c.publish(lifecycle.Event{Kind: lifecycle.EpisodeStarted, Episode: lifecycleEpisode(ep)})
}

// announceEnd announces an episode that has ended, with its outcome.
func (c *Control) announceEnd(ep Episode) {
	c.publish(lifecycle.Event{Kind: lifecycle.EpisodeEnded, Episode: lifecycleEpisode(ep), Outcome: outcomeOf(ep)})
}

// follow ends the episodes others ask it to end, until the subscription
// closes.
func (c *Control) follow(ch <-chan lifecycle.Event) {
	defer close(c.followDone)
	for ev := range ch {
		if ev.Kind != lifecycle.EndRequested {
			continue
		}
		ctx, cancel := context.WithTimeout(c.stopCtx, c.cfg.ResetTimeout)
		// End publishes EpisodeEnded itself; only a failure needs an answer.
		if _, err := c.End(ctx, ev.Episode.ID); err != nil {
			c.publish(lifecycle.Event{Kind: lifecycle.EndFailed, Episode: ev.Episode, Err: err.Error()})
		}
		cancel()
	}
}

// startFollowing subscribes to the bus, if there is one.
func (c *Control) startFollowing() {
	c.followDone = make(chan struct{})
	c.unfollow = func() {}
	lc := c.cfg.Lifecycle
	if lc == nil {
		close(c.followDone)
		return
	}
	var ch <-chan lifecycle.Event
	ch, c.unfollow = lc.Subscribe(0)
	go c.follow(ch)
}

func lifecycleEpisode(ep Episode) lifecycle.Episode {
	return lifecycle.Episode{ID: ep.ID, TaskID: ep.TaskID, Instruction: ep.Instruction, Seed: ep.Seed, Params: ep.Params}
}

// outcomeOf is how an episode ended, as the recorder writes it into
// episode.json.
func outcomeOf(ep Episode) *lifecycle.Outcome {
	out := &lifecycle.Outcome{Reward: ep.Reward, Success: ep.Success, Done: true}
	if ep.Interruption != "" {
		// Cut short, not finished: a dataset marks it truncated.
		out.Done, out.Interrupted = false, ep.Interruption
	}
	for _, r := range ep.Reasons {
		out.Reasons = append(out.Reasons, fmt.Sprintf("%s: %v %s", r.Check, r.Passed, r.Detail))
	}
	return out
}
