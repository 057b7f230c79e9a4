package hci

import (
	"sync"
	"time"

	"github.com/deskenv/deskenv/internal/fanout"
)

// Source says who sent an action or input event.
type Source string

// The sources deskenv knows.
const (
	SourceAgent  Source = "agent"
	SourceHuman  Source = "human"
	SourceScript Source = "script"
	SourceReplay Source = "replay"
)

// Event kinds.
const (
	KindAction = "action" // an Action run through Executor.Do
	KindInput  = "input"  // a primitive (key, button, motion, wheel) from a person
	// KindObservation: the screenshot a caller was shown after an action
	// (Executor.Observed), so the recorder keeps exactly what the agent saw.
	KindObservation = "observation"
)

// Input types.
const (
	InputKeyDown    = "key_down"
	InputKeyUp      = "key_up"
	InputButtonDown = "button_down"
	InputButtonUp   = "button_up"
	InputMotion     = "motion"
	InputWheel      = "wheel"
)

// Event is one executed action or input primitive, published on the Bus
// whoever sent it. Subscribers must treat Action and Input as read-only.
type Event struct {
	Seq      uint64        `json:"seq"`
	Time     time.Time     `json:"time"` // wall clock when execution started
	Mono     time.Duration `json:"mono"` // since the executor started, monotonic
	Source   Source        `json:"source"`
	Kind     string        `json:"kind"` // KindAction or KindInput
	Action   *Action       `json:"action,omitempty"`
	Input    *Input        `json:"input,omitempty"`
	Duration time.Duration `json:"duration"` // how long execution took
	Err      string        `json:"err,omitempty"`
	// Via names the other model's tool an agent's action was said in
	// ("openai", "gemini", "pyautogui"; WithVia), empty for the computer
	// tool's own vocabulary: the action itself is always canonical.
	Via string `json:"via,omitempty"`
	// Of is, for an observation, the Seq of the action it followed.
	Of          uint64       `json:"of,omitempty"`
	Observation *Observation `json:"-"`
}

// Input is a primitive input event. X and Y are screen coordinates: for
// motion the target, for buttons and keys the pointer position at the time.
type Input struct {
	Type   string `json:"type"`
	Keysym Keysym `json:"keysym,omitempty"`
	Button int    `json:"button,omitempty"`
	X      int    `json:"x"`
	Y      int    `json:"y"`
	DX     int    `json:"dx,omitempty"`
	DY     int    `json:"dy,omitempty"`
}

// Bus fans events out to subscribers. Publishing never blocks: a subscriber
// whose buffer is full loses the event, and the loss is counted.
type Bus struct {
	// mu numbers events and publishes them in one step, so subscribers
	// see Seq rising even when several goroutines publish at once.
	mu  sync.Mutex
	seq uint64
	fan *fanout.Bus[Event]
}

func newBus() *Bus { return &Bus{fan: fanout.New[Event](DefaultBusBuffer)} }

// DefaultBusBuffer is the buffer of a subscription asked for with buffer <= 0.
const DefaultBusBuffer = 1024

// Subscribe returns a channel of every event published from now on, and a
// function that ends the subscription and closes the channel. The channel is
// also closed when the executor closes. Keep up: with buffer events pending,
// further events are dropped for this subscriber (see Dropped).
func (b *Bus) Subscribe(buffer int) (<-chan Event, func()) { return b.fan.Subscribe(buffer) }

// Seq is the sequence number of the last event published, so a subscriber
// can tell when it has caught up with everything published so far.
func (b *Bus) Seq() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.seq
}

// Dropped counts events lost by slow subscribers since the bus started.
func (b *Bus) Dropped() uint64 { return b.fan.Dropped() }

// Subscribers is the number of live subscriptions.
func (b *Bus) Subscribers() int { return b.fan.Subscribers() }

// publish numbers ev and offers it to every subscriber without waiting.
// Events are numbered after the bus closes too: Seq counts what the
// executor did, whether or not anyone heard of it.
func (b *Bus) publish(ev Event) Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	ev.Seq = b.seq
	b.fan.Publish(ev)
	return ev
}

func (b *Bus) close() { b.fan.Close() }
