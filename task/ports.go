package task

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/deskenv/deskenv/internal/peer"
)

// Ports are the serve steps' listeners of one deskenv process, shared by
// its desktops. A task's site lives on a port of the machine's loopback
// (its instruction names http://127.0.0.1:8317/), so in pool mode every
// desktop reset into that task wants the same port: with a listener each,
// the second desktop's reset failed ("address already in use") and a pool
// could not run one web task on more than one desktop at a time. Here a
// port is listened on once, and each connection goes to the server of the
// desktop whose session user opened it, as the kernel reports the owner of
// the connecting socket (internal/peer): every agent types the same
// address and reaches its own desktop's site. A network namespace per
// desktop would do the same below HTTP, but needs privileges the image's
// deskenv does not have (CAP_SYS_ADMIN).
//
// Connections of deskenv's own user and root (an operator's curl) go to
// the port's desktop when it has one only; with several they are refused
// with 421, since nothing says which desktop they mean. Any other user's
// connection is refused with 403, as a desktop's own server refuses it.
type Ports struct {
	log   *slog.Logger
	mu    sync.Mutex
	ports map[int]*sharedPort
}

// NewPorts makes an empty set of shared ports; log gets the refused
// connections at debug level.
func NewPorts(log *slog.Logger) *Ports {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Ports{log: log, ports: map[int]*sharedPort{}}
}

// sharedPort is one port's listener and the desktops' servers on it.
type sharedPort struct {
	port   int
	ln     net.Listener
	routes map[uint32]*portRoute // by the desktop's session user
}

// listen returns a listener of the connections to 127.0.0.1:port that the
// desktop whose session runs as uid should answer. Closing it gives the
// port up for that desktop; the port's own listener closes with its last
// desktop.
func (p *Ports) listen(ctx context.Context, port int, uid uint32) (net.Listener, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	sp := p.ports[port]
	if sp == nil {
		var lc net.ListenConfig
		ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			return nil, err
		}
		sp = &sharedPort{port: port, ln: ln, routes: map[uint32]*portRoute{}}
		p.ports[port] = sp
		go p.accept(sp)
	}
	if sp.routes[uid] != nil {
		return nil, fmt.Errorf("port %d is already served to the programs of user %d, this desktop's: by an earlier serve step of its task, or by another desktop running as the same user (connections are told apart by user only)", port, uid)
	}
	r := &portRoute{addr: sp.ln.Addr(), conns: make(chan net.Conn), closed: make(chan struct{})}
	r.release = func() { p.drop(sp, uid, r) }
	sp.routes[uid] = r
	return r, nil
}

// drop takes uid's route off the port, and closes the port with its last.
func (p *Ports) drop(sp *sharedPort, uid uint32, r *portRoute) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if sp.routes[uid] == r {
		delete(sp.routes, uid)
	}
	if len(sp.routes) == 0 && p.ports[sp.port] == sp {
		delete(p.ports, sp.port)
		sp.ln.Close()
	}
}

// accept hands each connection to a goroutine of its own, so looking up
// its owner (a netlink round trip) never holds up the next.
func (p *Ports) accept(sp *sharedPort) {
	for {
		c, err := sp.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// A transient error (out of descriptors): don't spin.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go p.dispatch(sp, c)
	}
}

// dispatch gives c to the server of the desktop whose user opened it, or
// refuses it, saying why.
func (p *Ports) dispatch(sp *sharedPort, c net.Conn) {
	uid, err := peer.UID(c)
	p.mu.Lock()
	r, why := route(sp, uid, err)
	p.mu.Unlock()
	if r != nil && r.deliver(c) {
		return
	}
	if r != nil {
		why = refused{http.StatusServiceUnavailable, "this desktop's task server is closing"}
	}
	p.log.Debug("serve: connection refused", "port", sp.port, "uid", uid, "why", why.msg)
	refuseConn(c, why)
}

// route picks the route of a connection owned by uid (err: its owner could
// not be found), or says why there is none. Under p.mu.
func route(sp *sharedPort, uid uint32, err error) (*portRoute, refused) {
	switch {
	case err != nil:
		// Fail closed: a client we cannot place may be another desktop.
		return nil, refused{http.StatusForbidden, fmt.Sprintf("cannot tell which local user opened this connection, so it is refused: %v", err)}
	case sp.routes[uid] != nil:
		return sp.routes[uid], refused{}
	case uid == 0 || int(uid) == os.Geteuid():
		if len(sp.routes) == 1 {
			for _, r := range sp.routes {
				return r, refused{}
			}
		}
		return nil, refused{http.StatusMisdirectedRequest, fmt.Sprintf("%d desktops serve port %d, each its own task's site: connect as one desktop's session user to reach its site", len(sp.routes), sp.port)}
	}
	return nil, refused{http.StatusForbidden, fmt.Sprintf("this task's server answers its own desktop's programs and deskenv only: a connection of user %d is refused", uid)}
}

// refused is why a connection is not answered, and with which status.
type refused struct {
	status int
	msg    string
}

// refuseConn answers c's first request with why and closes it. Written here
// rather than by an http.Server of its own, which would need a listener
// per refused connection; what net/http would bound is bounded here: the
// time (refuseTimeout) and the bytes read (refuseRead).
func refuseConn(c net.Conn, why refused) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(refuseTimeout))
	br := bufio.NewReader(io.LimitReader(c, refuseRead))
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	// Read what the client sends with it (a POST's body), so closing
	// does not reset the connection before the client reads the answer.
	io.Copy(io.Discard, req.Body)
	body := why.msg + "\n"
	resp := &http.Response{StatusCode: why.status, ProtoMajor: 1, ProtoMinor: 1, Close: true,
		Header:        http.Header{"Content-Type": {"text/plain; charset=utf-8"}, "X-Content-Type-Options": {"nosniff"}},
		ContentLength: int64(len(body)), Body: io.NopCloser(strings.NewReader(body))}
	resp.Write(c)
}

const (
	refuseTimeout = 10 * time.Second
	refuseRead    = 256 << 10
)

// portRoute is one desktop's listener on a shared port: the connections
// dispatch hands it.
type portRoute struct {
	addr    net.Addr
	conns   chan net.Conn
	closed  chan struct{}
	once    sync.Once
	release func()
}

// deliver hands c to the desktop's server, false when it has closed.
func (r *portRoute) deliver(c net.Conn) bool {
	select {
	case r.conns <- c:
		return true
	case <-r.closed:
		return false
	}
}

func (r *portRoute) Accept() (net.Conn, error) {
	select {
	case c := <-r.conns:
		return c, nil
	case <-r.closed:
		return nil, net.ErrClosed
	}
}

func (r *portRoute) Close() error {
	r.once.Do(func() {
		close(r.closed)
		r.release()
	})
	return nil
}

func (r *portRoute) Addr() net.Addr { return r.addr }
