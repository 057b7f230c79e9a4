package stream

import (
	"testing"
	"time"

	"github.com/deskenv/deskenv/lifecycle"
)

// TestLifecycle: the recorder's state reaches every viewer from the
// lifecycle bus (the REC marker), and a change of holder is announced on it.
func TestLifecycle(t *testing.T) {
	lc := lifecycle.NewBus()
	t.Cleanup(func() { lc.Close() })
	events, cancel := lc.Subscribe(16)
	t.Cleanup(cancel)
	e := newEnv(t, envOptions{cfg: Config{Lifecycle: lc}})
	w := join(t, e, clientOptions{noVideo: true, token: "watch"})
	defer w.close()
	a := join(t, e, clientOptions{noVideo: true})
	defer a.close()

	for _, state := range []string{lifecycle.Recording, lifecycle.Paused, ""} {
		lc.Publish(lifecycle.Event{Kind: lifecycle.RecordingChanged, Recording: state})
		w.waitState(10*time.Second, func(cs ControlState) bool { return cs.Recording == state })
	}

	a.send(map[string]any{"type": "control", "op": "request"})
	a.waitState(10*time.Second, func(cs ControlState) bool { return cs.Holder != nil && *cs.Holder == a.hello.ID })
	a.send(map[string]any{"type": "control", "op": "release"})
	var holders []string
	deadline := time.After(10 * time.Second)
	for len(holders) < 2 {
		select {
		case ev := <-events:
			if ev.Kind == lifecycle.ControlChanged {
				holders = append(holders, ev.Holder)
			}
		case <-deadline:
			t.Fatalf("control changes announced: %q, want [%s \"\"]", holders, a.hello.ID)
		}
	}
	if holders[0] != a.hello.ID || holders[1] != "" {
		t.Errorf("control changes announced: %q, want [%s \"\"]", holders, a.hello.ID)
	}
}
