package stream

import (
	"github.com/deskenv/deskenv/lifecycle"
)

// The stream meets the other features on the lifecycle bus
// (Config.Lifecycle): it shows every viewer the recorder's state (the REC
// marker) from RecordingChanged, and announces who holds the keyboard and
// mouse with ControlChanged.

// follow starts following the bus, if there is one; the returned function
// stops it and waits.
func (s *Server) follow() (stop func()) {
	lc := s.cfg.Lifecycle
	if lc == nil {
		return func() {}
	}
	ch, cancel := lc.Subscribe(0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range ch {
			if ev.Kind == lifecycle.RecordingChanged {
				s.SetRecording(ev.Recording)
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// announceHolder publishes a change of holder on the bus, once per change.
func (s *Server) announceHolder() {
	lc := s.cfg.Lifecycle
	if lc == nil {
		return
	}
	s.mu.Lock()
	h := s.holder
	changed := h != s.announced
	s.announced = h
	s.mu.Unlock()
	if changed {
		lc.Publish(lifecycle.Event{Kind: lifecycle.ControlChanged, Holder: h})
	}
}
