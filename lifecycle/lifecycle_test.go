package lifecycle

import (
	"testing"
)

func TestBus(t *testing.T) {
	cases := []struct {
		name      string
		buffer    int
		publish   int
		unsub     bool // cancel the subscription before publishing
		wantGot   int
		wantDrops uint64
	}{
		{"every event arrives", 4, 3, false, 3, 0},
		{"a full buffer drops and counts", 2, 5, false, 2, 3},
		{"no events after cancel", 4, 3, true, 0, 0},
		{"default buffer", 0, DefaultBuffer, false, DefaultBuffer, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := NewBus()
			ch, cancel := b.Subscribe(c.buffer)
			if c.unsub {
				cancel()
			}
			for i := 0; i < c.publish; i++ {
				b.Publish(Event{Kind: EpisodeStarted, Episode: Episode{ID: "e"}})
			}
			b.Close()
			got := 0
			for ev := range ch { // closed by Close: the loop ends
				if ev.Time.IsZero() || ev.Kind != EpisodeStarted {
					t.Errorf("event %+v: want a stamped episode_started", ev)
				}
				got++
			}
			if got != c.wantGot || b.Dropped() != c.wantDrops {
				t.Errorf("got %d events, %d dropped; want %d, %d", got, b.Dropped(), c.wantGot, c.wantDrops)
			}
			cancel() // after Close: harmless
		})
	}
}

func TestBusFansOutAndClosesOnce(t *testing.T) {
	b := NewBus()
	a, _ := b.Subscribe(1)
	c, _ := b.Subscribe(1)
	b.Publish(Event{Kind: RecordingChanged, Recording: Recording})
	for _, ch := range []<-chan Event{a, c} {
		if ev := <-ch; ev.Recording != Recording {
			t.Errorf("subscriber got %+v", ev)
		}
	}
	b.Close()
	b.Close()
	b.Publish(Event{Kind: EpisodeEnded}) // on a closed bus: nothing, no panic
	late, _ := b.Subscribe(1)
	if _, ok := <-late; ok {
		t.Error("a subscription after Close is open")
	}
}
