package record

import (
	"time"

	"github.com/deskenv/deskenv/hci"
)

// An agent's step is recorded on the screenshots its tool calls returned,
// byte for byte: the executor carries each one on the bus beside the action
// it followed (hci.KindObservation, Of = the action's seq). The recorder's
// own observations, taken a moment after any input, would otherwise stand
// in for them, and with calls back to back show screens the agent never saw
// (issue 13: 6 of 9 matched, and a key Return's after showed the screen
// before the Return).

// agentShotWait bounds how long an agent's step waits for the screenshot
// its call returns before it takes the recorder's own (marked after_own).
// The call returns it right after settling (2 s at most by default); the
// next action of the agent, or the end of the recording, stops the wait
// sooner.
const agentShotWait = 10 * time.Second

// agentShots links an agent's actions to the screenshots returned for them.
type agentShots struct {
	seqAt    map[int]uint64 // input.jsonl index of an agent's action → its bus seq
	returned map[uint64]int // action seq → observation index of its screenshot
	last     uint64         // seq of the agent's last action
}

func newAgentShots() agentShots {
	return agentShots{seqAt: map[int]uint64{}, returned: map[uint64]int{}}
}

func isAgent(s hci.Source) bool { return s == hci.SourceAgent || s == hci.SourceScript }

// acted notes an agent's action, written as input.jsonl line i.
func (a *agentShots) acted(ev hci.Event, i int) {
	if ev.Kind == hci.KindAction && isAgent(ev.Source) {
		a.seqAt[i], a.last = ev.Seq, ev.Seq
	}
}

// seqOf is the bus seq of an agent's step's action, 0 for other steps.
func (a *agentShots) seqOf(st Step) uint64 {
	if !isAgent(st.Source) || len(st.Events) == 0 {
		return 0
	}
	seq := a.seqAt[st.Events[0]]
	delete(a.seqAt, st.Events[0])
	return seq
}

// done forgets a step's screenshot once the step is written.
func (a *agentShots) done(seq uint64) { delete(a.returned, seq) }

// returnedShot keeps the screenshot an agent was shown as an observation.
func (ep *Episode) returnedShot(ev hci.Event) {
	o := ev.Observation
	if o == nil || len(o.Data) == 0 {
		return
	}
	sh := Shot{N: len(ep.obs), T: secs(o.Captured.Sub(ep.zero)), W: o.Width, H: o.Height, Hash: o.Hash, Agent: true}
	if n := len(ep.obs); n > 0 && sh.T < ep.obs[n-1].T {
		sh.T = ep.obs[n-1].T // keep them in time order
	}
	ep.obs = append(ep.obs, observation{Shot: sh, data: o.Data})
	ep.agent.returned[ev.Of] = len(ep.obs) - 1
	ep.resolve(false)
}

// afterFor is the observation after pending step p: for an agent's step
// the screenshot its call returned, once it has arrived; if none comes
// (the agent acted again, the wait ran out, or force), the recorder's own,
// with own set. ok is false while the step must wait.
func (ep *Episode) afterFor(p *pendingStep, force bool) (after int, own, ok bool) {
	if p.seq != 0 {
		if i, found := ep.agent.returned[p.seq]; found {
			return i, false, true
		}
		if !force && !ep.unsubscribed && ep.agent.last <= p.seq && ep.now()-p.TEnd < agentShotWait.Seconds() {
			return -1, false, false
		}
		own = true
	}
	after = ep.afterIdx(p.TEnd)
	return after, own, after >= 0 || force
}

// beforeFor is the observation pending step p was taken on: for an
// agent's step the last screenshot an agent was shown before it started,
// if any; otherwise the last observation before it.
func (ep *Episode) beforeFor(p *pendingStep) int {
	if p.seq != 0 {
		for i := min(p.before, len(ep.obs)-1); i >= 0; i-- {
			if ep.obs[i].Agent {
				return i
			}
		}
	}
	return p.before
}
