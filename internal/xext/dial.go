package xext

import (
	"context"
	"errors"
	"fmt"

	"github.com/jezek/xgb"
)

// Dial opens a new connection to the X display named name (such as ":5"),
// giving up when ctx ends: connecting to a server that is stopped succeeds
// at the socket level and then hangs in the handshake, so a dial that ctx
// abandoned is closed once it completes. The caller closes the connection.
// display.DialContext is its public face; packages below display (xsel) use
// it directly.
func Dial(ctx context.Context, name string) (*xgb.Conn, error) {
	if name == "" {
		return nil, errors.New("no X display named (want one such as \":5\")")
	}
	ch := make(chan dialed, 1)
	go func() {
		c, err := xgb.NewConnDisplay(name)
		ch <- dialed{c, err}
	}()
	select {
	case r := <-ch:
		return r.conn(name)
	case <-ctx.Done():
		go closeLate(ch)
		return nil, fmt.Errorf("connect to display %s: the X server did not answer: %w", name, ctx.Err())
	}
}

// dialed is the outcome of one dial.
type dialed struct {
	c   *xgb.Conn
	err error
}

func (r dialed) conn(name string) (*xgb.Conn, error) {
	if r.err != nil {
		return nil, fmt.Errorf("connect to display %s: %w", name, r.err)
	}
	registerAll(r.c)
	return r.c, nil
}

// closeLate closes the connection of a dial nobody waits for any more,
// should it ever complete.
func closeLate(ch <-chan dialed) {
	if r := <-ch; r.c != nil {
		r.c.Close()
	}
}
