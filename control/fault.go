package control

import (
	"context"
	"fmt"
	"time"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/lifecycle"
)

// Faults: what the control plane does when the desktop fails under an
// episode, or a reset fails half way.

// interruptionTimeout bounds the wait for a running reset or episode end
// before an episode is marked interrupted, and a rollback.
const interruptionTimeout = time.Minute

// retireLocked makes ep, the running episode's record at its end, history.
// c.mu must be held.
func (c *Control) retireLocked(ep Episode) {
	c.current = nil
	c.history = append(c.history, ep)
	if len(c.history) > c.cfg.History {
		c.history = c.history[len(c.history)-c.cfg.History:]
	}
	c.finished++
}

// ended counts an episode that has ended and announces it on the lifecycle
// bus (the recorder stops its recording with the outcome).
func (c *Control) ended(ep Episode) {
	c.metrics.episodeEnded(ep)
	c.announceEnd(ep)
}

// statusInterrupted is an episode's status, and its end reason, when the
// desktop failed under it.
const statusInterrupted = "interrupted"

// watchServer ends the running episode as interrupted whenever the X
// server has been restarted under it (display.Config.RestartOnCrash): the
// new server runs a fresh session, so the task's setup, its windows and
// whatever the agent did on screen are gone, and scoring what is left
// would score the wrong thing.
func (c *Control) watchServer() {
	defer close(c.watchDone)
	d := c.d
	gen := d.Generation()
	for {
		// Taken before the check, so a restart between the two is not
		// missed.
		changed := d.Changed()
		if g := d.Generation(); g != gen {
			gen = g
			c.publish(lifecycle.Event{Kind: lifecycle.ServerRestarted, Err: c.serverExit()})
		}
		c.interruptStale()
		select {
		case <-changed:
		case <-c.stopCtx.Done():
			return
		}
	}
}

// interruptStale ends the running episode as interrupted if it was set up
// on an X server that is no longer the display's.
func (c *Control) interruptStale() {
	if !c.stale() {
		return
	}
	ctx, cancel := context.WithTimeout(c.stopCtx, interruptionTimeout)
	defer cancel()
	// A reset that runs now ends the episode itself (and fails if the
	// server restarted under it); after it, the check is made again.
	if err := c.acquire(ctx); err != nil {
		return
	}
	defer c.release()
	c.mu.Lock()
	if c.current == nil || c.current.gen == c.d.Generation() {
		c.mu.Unlock()
		return
	}
	run := c.current
	why := fmt.Sprintf("the X server %s and was restarted: the desktop's session started afresh", c.serverExit())
	if run.task != nil {
		why += fmt.Sprintf(", and the setup of task %s is gone", run.task.ID)
	}
	ep := run.ep
	now := time.Now()
	ep.Status, ep.EndedAt, ep.EndReason, ep.Interruption = statusInterrupted, &now, statusInterrupted, why
	ep.DurationS = now.Sub(ep.StartedAt).Seconds()
	c.retireLocked(ep)
	c.mu.Unlock()
	c.ended(ep)
	c.log.Warn("episode interrupted", "episode", ep.ID, "task", ep.TaskID, "why", why, "steps", ep.Steps)
}

// stale reports whether the running episode was set up on an X server
// that has since been replaced.
func (c *Control) stale() bool {
	gen := c.d.Generation()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.current != nil && c.current.gen != gen
}

// serverExit says how the X server last went away, for an error or an
// interruption: "exited (signal: killed) at 15:04:05".
func (c *Control) serverExit() string {
	e := c.d.LastServerExit()
	if e == nil {
		return "went away"
	}
	return fmt.Sprintf("exited (%s) at %s", e.Exited, e.At.Format(time.TimeOnly))
}

// rollback puts the desktop back into its baseline after a reset failed
// past its clean-up (a task's setup failed or ran out of time), so that
// what the setup started does not outlive the failed reset. It has a bound
// of its own: the reset's may be what ran out.
func (c *Control) rollback(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), interruptionTimeout)
	defer cancel()
	if _, err := c.base.Restore(ctx); err != nil {
		c.log.Warn("a reset failed, and so did putting the desktop back into its baseline", "err", err)
	}
	c.forgetEnv()
}

// forgetEnv drops the last episode's task environment after a clean-up
// killed its processes: it only forgets them and closes its X connection.
func (c *Control) forgetEnv() {
	c.mu.Lock()
	env := c.lastEnv
	c.lastEnv = nil
	c.mu.Unlock()
	if env != nil {
		env.Close()
	}
}

// Faults is what /health reports about the desktop's processes, under
// "details".
type Faults struct {
	// Restarts are the last deaths of the X server, the window manager and
	// the session apps, oldest first: what died, when, how, and whether it
	// came back.
	Restarts []display.Exit `json:"restarts"`
	// XServerRestarts counts the X server's restarts since start.
	XServerRestarts int `json:"x_server_restarts"`
	// Processes are the window manager and the apps as they are now.
	Processes []display.Process `json:"processes"`
	// Isolation says who the session runs as, or why it shares deskenv's
	// user (Config.Isolation).
	Isolation any `json:"isolation,omitempty"`
}

// Health checks the desktop: the X server answers within ctx and the
// window manager is up (or is being restarted and has not been down for
// long). The error says what is wrong; Faults says what died and when,
// either way.
func (c *Control) Health(ctx context.Context) (Faults, error) {
	d := c.d
	f := Faults{Restarts: d.Exits(), XServerRestarts: d.Restarts(), Processes: d.Processes(), Isolation: c.cfg.Isolation}
	if err := d.Health(ctx); err != nil {
		return f, err
	}
	return f, d.SessionHealth()
}
