package hci

import "time"

// Observation is a screenshot a caller showed someone (an agent) after an
// action. The executor does not take screenshots; it only carries them on
// the bus, beside the action they followed, so that whoever records the
// episode keeps the very bytes the agent was shown rather than a picture
// of its own taken a moment later.
type Observation struct {
	Data          []byte // the encoded image, as returned; read-only
	MIME          string
	Width, Height int
	Hash          uint64 // of the captured screen (screen.Shot.Hash)
	Captured      time.Time
}

// Observed publishes o, shown to src after the action whose event had
// sequence number of (Result.Seq). It never blocks.
func (e *Executor) Observed(of uint64, src Source, o Observation) {
	e.bus.publish(Event{Time: o.Captured, Mono: o.Captured.Sub(e.start), Source: src, Kind: KindObservation,
		Of: of, Observation: &o})
}
