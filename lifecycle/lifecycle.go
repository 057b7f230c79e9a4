// Package lifecycle is where the appliance's features meet: the control
// plane, the recorder and the stream tell each other what happened to the
// desktop (an episode started or ended, a recording changed, the X server
// restarted, control changed hands) by publishing events on one Bus, which
// the composition creates and hands to each of them. No feature calls
// another, and no callback is threaded through the composition.
//
// The bus never blocks a publisher: each subscriber has a buffer, and an
// event that does not fit is dropped for that subscriber and counted
// (Dropped). Lifecycle events are a few per episode, so a buffer of a few
// dozen is never full unless a subscriber is stuck; a stuck subscriber then
// loses events instead of stopping the control plane.
package lifecycle

import (
	"time"

	"github.com/deskenv/deskenv/internal/fanout"
)

// Kind says what happened.
type Kind string

// The kinds of events, and who publishes them.
const (
	// EpisodeStarted: the control plane started an episode (after its reset
	// and the task's setup). Episode is set.
	EpisodeStarted Kind = "episode_started"
	// EpisodeEnded: the control plane ended an episode, scored or
	// interrupted. Episode and Outcome are set.
	EpisodeEnded Kind = "episode_ended"
	// EndRequested: someone other than the control plane (the recorder,
	// for POST /api/recording/stop {"end_episode":true}) asks it to end and
	// score Episode.ID. The control plane answers with EpisodeEnded, or
	// EndFailed with Err.
	EndRequested Kind = "end_requested"
	// EndFailed: an EndRequested episode could not be ended. Episode.ID and
	// Err are set.
	EndFailed Kind = "end_failed"
	// RecordingChanged: the recorder started, paused, resumed or stopped.
	// Recording is set ("" when stopped), and Episode.ID while recording.
	RecordingChanged Kind = "recording_changed"
	// ServerRestarted: the X server died and was started again (the
	// display's generation changed). Err says how it ended.
	ServerRestarted Kind = "server_restarted"
	// ControlChanged: who holds the keyboard and mouse changed (the
	// stream). Holder is the new holder, "" when nobody holds it.
	ControlChanged Kind = "control_changed"
)

// Recording states for RecordingChanged.
const (
	Recording = "recording"
	Paused    = "paused"
)

// Episode names an episode and its task.
type Episode struct {
	ID          string
	TaskID      string
	Instruction string
	// Seed is the reset's seed (given or drawn), and Params the values it
	// chose for the task's parameters (none: empty), so a recording can say
	// which variant of the task it holds.
	Seed   *int64
	Params map[string]any
}

// Outcome is how an episode ended.
type Outcome struct {
	// Reward in [0, 1]; nil when nothing scored the episode.
	Reward  *float64
	Success *bool
	// Done is false for an episode cut short (Interrupted says why).
	Done        bool
	Interrupted string
	// Reasons are the checker's findings, one line each.
	Reasons []string
}

// Event is one thing that happened. Which fields are set depends on Kind.
type Event struct {
	Kind      Kind
	Time      time.Time
	Episode   Episode
	Outcome   *Outcome
	Recording string
	Holder    string
	Err       string
}

// DefaultBuffer is a subscription's buffer when Subscribe is given none.
const DefaultBuffer = 64

// Bus carries lifecycle events from their publishers to every subscriber.
// The zero value is not usable; call NewBus.
type Bus struct {
	fan *fanout.Bus[Event]
}

// NewBus returns an open bus with no subscribers.
func NewBus() *Bus { return &Bus{fan: fanout.New[Event](DefaultBuffer)} }

// Subscribe returns a channel of every event published from now on and a
// function that ends the subscription and closes the channel. The channel
// is also closed when the bus closes.
func (b *Bus) Subscribe(buffer int) (<-chan Event, func()) { return b.fan.Subscribe(buffer) }

// Publish sends ev to every subscriber without waiting for any; Time is set
// to now when zero. Publishing on a closed bus does nothing.
func (b *Bus) Publish(ev Event) {
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	b.fan.Publish(ev)
}

// Dropped counts events a subscriber lost because its buffer was full.
func (b *Bus) Dropped() uint64 { return b.fan.Dropped() }

// Close ends every subscription. It is safe to call more than once.
func (b *Bus) Close() error {
	b.fan.Close()
	return nil
}
