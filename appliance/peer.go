package appliance

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/deskenv/deskenv/internal/peer"
)

// The desktop's own programs reach deskenv's port like any client: over
// loopback, or the machine's own address. A token keeps them off the control
// plane only if they cannot find one, and in local mode (no tokens, `make
// run`) nothing would. So when the session runs as users of its own, the
// front door refuses every connection one of those users opened, whatever
// it carries: the grader and the reset are out of the agent's reach by who
// it is, not by what it knows.

// ConnContext is for http.Server's ConnContext: each request can find its
// connection's owner, so the door can refuse the desktop session's own.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return peer.ConnContext(ctx, c)
}

// desktopRefusal refuses requests from the session users' own connections;
// nil when the desktop shares deskenv's user (nothing to tell apart).
func desktopRefusal(iso *isolation) func(*http.Request) error {
	if iso == nil || !iso.Separated || len(iso.users) == 0 {
		return nil
	}
	session := map[uint32]string{}
	for _, u := range iso.users {
		session[u.UID] = u.Name
	}
	return func(r *http.Request) error {
		uid, served, err := peer.RequestOwner(r)
		if !served {
			return nil // not from our server (tests calling the handler)
		}
		if errors.Is(err, peer.ErrNotLocal) {
			return nil
		}
		if err != nil {
			// Fail closed: a client we cannot place may be the desktop.
			return fmt.Errorf("cannot tell which local user opened this connection, so it is refused: %w", err)
		}
		if name, ok := session[uid]; ok {
			return fmt.Errorf("this connection comes from the desktop's own session (user %s): the desktop's programs cannot reach deskenv, whatever token they carry", name)
		}
		return nil
	}
}
