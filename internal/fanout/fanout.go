// Package fanout hands every value published to each subscriber's buffered
// channel without ever waiting: a subscriber whose buffer is full loses the
// value, and the loss is counted. It is the one mechanism behind hci's bus
// of actions and lifecycle's bus of episode events, which differ only in
// what they carry: a publisher (an input, the control plane) must never
// stall behind a slow or stuck reader.
package fanout

import (
	"sync"
	"sync/atomic"
)

// Bus fans values of type T out to its subscribers. The zero value is not
// usable; call New.
type Bus[T any] struct {
	defaultBuffer int

	mu      sync.Mutex
	subs    map[*subscription[T]]struct{}
	closed  bool
	dropped atomic.Uint64
}

type subscription[T any] struct {
	ch chan T
	// once closes ch: a subscription ends by its cancel func or by the
	// bus closing, whichever comes first, and the other must not close it
	// again.
	once sync.Once
}

// New returns an open bus with no subscribers. A subscription asked for
// with a buffer <= 0 gets defaultBuffer (at least 1: an unbuffered
// channel would lose nearly every value, since publishing never waits).
func New[T any](defaultBuffer int) *Bus[T] {
	return &Bus[T]{defaultBuffer: max(defaultBuffer, 1), subs: map[*subscription[T]]struct{}{}}
}

// Subscribe returns a channel of every value published from now on and a
// function that ends the subscription and closes the channel. The channel
// is also closed when the bus closes; on a closed bus it is closed at once.
// The function is safe to call more than once, and after Close.
func (b *Bus[T]) Subscribe(buffer int) (<-chan T, func()) {
	if buffer <= 0 {
		buffer = b.defaultBuffer
	}
	s := &subscription[T]{ch: make(chan T, buffer)}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		close(s.ch)
		return s.ch, func() {}
	}
	b.subs[s] = struct{}{}
	return s.ch, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if _, ok := b.subs[s]; ok {
			delete(b.subs, s)
			s.once.Do(func() { close(s.ch) })
		}
	}
}

// Publish offers v to every subscriber without waiting for any; a
// subscriber with a full buffer loses it (see Dropped). Publishing on a
// closed bus does nothing. Values published by one goroutine arrive in the
// order published; a caller that numbers its values keeps that order across
// goroutines by numbering and publishing under one lock of its own.
func (b *Bus[T]) Publish(v T) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	for s := range b.subs {
		select {
		case s.ch <- v:
		default:
			b.dropped.Add(1)
		}
	}
}

// Dropped counts the values subscribers lost because their buffers were
// full, since the bus started.
func (b *Bus[T]) Dropped() uint64 { return b.dropped.Load() }

// Subscribers is the number of live subscriptions.
func (b *Bus[T]) Subscribers() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs)
}

// Close ends every subscription and closes its channel; values already in a
// channel can still be read. It is safe to call more than once.
func (b *Bus[T]) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.closed = true
	for s := range b.subs {
		s.once.Do(func() { close(s.ch) })
	}
	b.subs = nil
}
