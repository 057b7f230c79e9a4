package display

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jezek/xgb"

	"github.com/deskenv/deskenv/internal/xext"
)

// ErrFollowerClosed is returned by a Follower's Get after Close.
var ErrFollowerClosed = errors.New("the X connection is closed")

// Follower is an X connection of its own to a display that follows the X
// server across restarts: Get hands out the connection to the server that
// runs now, dialling a new one once the display's server changed
// (Generation) or the caller dropped the last one as broken.
//
// A package uses a Follower rather than the display's shared connection when
// it reads the events it is sent (input injection, damage, selections) or
// holds server-side state of its own (a shared-memory segment, atoms, a
// window). Such state belongs to one connection: the caller keeps it beside
// the generation Get returned and builds it again when Get returns another.
//
// Its methods are safe for concurrent use. The connection itself is the
// caller's to use as xgb allows (any number of goroutines may send requests
// on it, one should read its events).
type Follower struct {
	d    *Display
	mode FollowMode

	mu       sync.Mutex
	c        *xgb.Conn
	gen      uint64 // counts connections made; 0 means none yet
	serverGn uint64 // the display's Generation when c was dialled
	closed   bool
}

// FollowMode says who reads a Follower's events.
type FollowMode int

const (
	// ReadEvents leaves the connection's events and errors to the caller,
	// which must read them (WaitForEvent or PollForEvent).
	ReadEvents FollowMode = iota
	// DropEvents has the Follower read and drop them, for callers that
	// select no events and check the requests whose errors matter: xgb
	// stops delivering replies once its queue of unread events is full.
	DropEvents
)

// Follow makes a Follower on d; it dials on the first Get.
func (d *Display) Follow(mode FollowMode) *Follower {
	return &Follower{d: d, mode: mode}
}

// Get returns the connection to the display's current X server and its
// generation, which changes whenever the connection does (a restarted
// server, a connection dropped by Drop) and is never 0. ctx bounds the dial:
// a server that is stopped accepts the socket and then hangs in the
// handshake.
func (f *Follower) Get(ctx context.Context) (*xgb.Conn, uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, 0, ErrFollowerClosed
	}
	server := f.d.Generation()
	if f.c != nil && f.serverGn == server {
		return f.c, f.gen, nil
	}
	f.closeLocked()
	c, err := DialContext(ctx, f.d.Name())
	if err != nil {
		return nil, 0, err
	}
	if f.mode == DropEvents {
		go drainEvents(c)
	}
	f.c, f.serverGn = c, server
	f.gen++
	return f.c, f.gen, nil
}

// Current returns the connection Get would return without dialling: ok is
// false when there is none or the display's server has changed since it was
// dialled, so state kept for it is gone with its server. Closing paths use
// it to undo server-side state only where it still exists.
func (f *Follower) Current() (c *xgb.Conn, gen uint64, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed || f.c == nil || f.serverGn != f.d.Generation() {
		return nil, 0, false
	}
	return f.c, f.gen, true
}

// Drop closes the connection of generation gen if it is still the current
// one, so the next Get dials anew. Callers drop a connection that broke or
// stopped answering; closing it also ends the requests still waiting on it.
func (f *Follower) Drop(gen uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.c != nil && f.gen == gen {
		f.closeLocked()
	}
}

// Close closes the connection; Get fails with ErrFollowerClosed afterwards.
func (f *Follower) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	f.closeLocked()
	return nil
}

func (f *Follower) closeLocked() {
	if f.c != nil {
		f.c.Close()
		f.c = nil
	}
}

// DialContext opens a new connection to the X display named name (such as
// ":5"), giving up when ctx ends: connecting to a server that is stopped
// succeeds at the socket level and then hangs in the handshake. The caller
// closes the connection.
func DialContext(ctx context.Context, name string) (*xgb.Conn, error) {
	return xext.Dial(ctx, name)
}

// drainEvents reads and drops c's events and errors until it closes.
func drainEvents(c *xgb.Conn) {
	for {
		ev, err := c.WaitForEvent()
		if ev == nil && err == nil {
			return
		}
	}
}

// followRetry is how long Reconnect waits before it asks again for a
// connection it could not make, when no new server came meanwhile.
const followRetry = 2 * time.Second

// Reconnect keeps a watcher on the current X server across restarts, until
// ctx ends. For each server it hands watch a connection (x, or err, made
// by the caller at start-up, where extension set-up cannot race other
// connections' readers; after that, connect's), and watch returns when
// that connection closes (the server died, or its Follower was closed).
// Then it waits for the next server (Changed) or followRetry. connect's
// failures go to failed, but a Follower closed on the way out; the
// caller's first is its own to report.
//
// Written once for the settle's damage watch (screen) and the stream's
// event watch (stream), which each followed the server this way.
func Reconnect[T any](ctx context.Context, d *Display, changed <-chan struct{}, x T, err error,
	connect func() (T, error), watch func(T), failed func(error)) {
	for first := true; ; first = false {
		if !first {
			changed = d.Changed()
			x, err = connect()
			if err != nil && !errors.Is(err, ErrFollowerClosed) {
				failed(err)
			}
		}
		if err == nil {
			watch(x)
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-time.After(followRetry):
		}
	}
}
