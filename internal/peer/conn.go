package peer

import (
	"context"
	"net"
	"net/http"
	"sync"
)

// An HTTP server that must know who opened each connection (deskenv's front
// door, a task's serve step) asks once per connection, on its first
// request, not on accept, which would slow the accept loop; a keep-alive
// connection's later requests reuse the answer.

// conn is one accepted connection and, once asked, its owner.
type conn struct {
	c    net.Conn
	once sync.Once
	uid  uint32
	err  error
}

type connKey struct{}

// ConnContext is for http.Server's ConnContext: each request can then find
// its connection's owner with RequestOwner.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, &conn{c: c})
}

// RequestOwner returns the user owning the client end of r's connection
// (UID's answer, looked up once per connection). served is false when r did
// not come through a server with ConnContext (a handler called directly, as
// tests do): there is no connection to ask about.
func RequestOwner(r *http.Request) (uid uint32, served bool, err error) {
	c, ok := r.Context().Value(connKey{}).(*conn)
	if !ok {
		return 0, false, nil
	}
	c.once.Do(func() { c.uid, c.err = UID(c.c) })
	return c.uid, true, c.err
}
