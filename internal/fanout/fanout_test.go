package fanout

import (
	"slices"
	"sync"
	"testing"
)

func TestBus(t *testing.T) {
	cases := []struct {
		name      string
		buffer    int // the subscription's; <= 0 takes the bus's default of 4
		publish   int
		cancel    bool // end the subscription before publishing
		wantGot   []int
		wantDrops uint64
	}{
		{"every value arrives in order", 8, 3, false, []int{0, 1, 2}, 0},
		{"a full buffer drops the rest and counts them", 2, 5, false, []int{0, 1}, 3},
		{"the default buffer", 0, 6, false, []int{0, 1, 2, 3}, 2},
		{"nothing after cancel", 8, 3, true, nil, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := New[int](4)
			ch, cancel := b.Subscribe(c.buffer)
			if c.cancel {
				cancel()
				if n := b.Subscribers(); n != 0 {
					t.Errorf("Subscribers() = %d after cancel, want 0", n)
				}
			}
			for i := range c.publish {
				b.Publish(i)
			}
			b.Close()
			var got []int
			for v := range ch { // closed by Close (or cancel): the loop ends
				got = append(got, v)
			}
			if !slices.Equal(got, c.wantGot) || b.Dropped() != c.wantDrops {
				t.Errorf("got %v, %d dropped; want %v, %d", got, b.Dropped(), c.wantGot, c.wantDrops)
			}
			cancel() // after Close (and maybe a cancel): harmless
		})
	}
}

// TestBusFansOutAndCloses: every subscriber gets every value, each
// subscriber's loss is its own, and a closed bus stays closed.
func TestBusFansOutAndCloses(t *testing.T) {
	b := New[string](1)
	slow, _ := b.Subscribe(1)
	fast, _ := b.Subscribe(3)
	if n := b.Subscribers(); n != 2 {
		t.Fatalf("Subscribers() = %d, want 2", n)
	}
	for _, v := range []string{"a", "b", "c"} {
		b.Publish(v)
	}
	if len(slow) != 1 || len(fast) != 3 || b.Dropped() != 2 {
		t.Errorf("slow holds %d, fast %d, %d dropped; want 1, 3, 2", len(slow), len(fast), b.Dropped())
	}
	b.Close()
	b.Close()
	b.Publish("late") // on a closed bus: nothing, no panic
	if n := b.Subscribers(); n != 0 {
		t.Errorf("Subscribers() = %d after Close, want 0", n)
	}
	var got []string
	for v := range fast {
		got = append(got, v)
	}
	if len(got) != 3 || got[0] != "a" || got[2] != "c" {
		t.Errorf("fast drained %q after Close, want a b c", got)
	}
	late, cancel := b.Subscribe(1)
	if _, ok := <-late; ok {
		t.Error("a subscription after Close is open")
	}
	cancel()
}

// TestBusConcurrent publishes, subscribes, cancels and closes from many
// goroutines at once: run under -race, it shows no value is sent on a
// closed channel and no channel is closed twice.
func TestBusConcurrent(t *testing.T) {
	b := New[int](2)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for j := range 200 {
				b.Publish(i*1000 + j)
			}
		}()
		go func() {
			defer wg.Done()
			ch, cancel := b.Subscribe(0)
			for range 20 {
				select {
				case <-ch:
				default:
				}
			}
			cancel()
			for range ch { // cancel closed it: drains what is left and ends
			}
		}()
	}
	kept, _ := b.Subscribe(1 << 12)
	wg.Add(1)
	go func() {
		defer wg.Done()
		b.Close()
	}()
	wg.Wait()
	n := 0
	for range kept { // Close closed it
		n++
	}
	if n > 8*200 {
		t.Errorf("the kept subscriber got %d values, more than the %d published", n, 8*200)
	}
}
