package main

// The relay of deskbench network: a user-space forwarder for UDP and TCP
// with a delay line, jitter and random loss, because this machine's kernel
// has no netem (tc tbf gives the rate; this gives the rest).
//
// Own code rather than a library: no Go module on the proxy list here
// (toxiproxy and its kin are TCP only) forwards both UDP and TCP with
// per-packet loss drawn from a fixed seed, and the benchmark needs both (the
// WebRTC media is UDP, the page, its signalling and noVNC are TCP) with runs
// that can be repeated.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// linkShape is what the relay does to every packet, in each direction.
type linkShape struct {
	// Delay is added one way (a profile's round trip is two of these).
	Delay time.Duration
	// Jitter is a further delay drawn uniformly from [0, Jitter) per packet;
	// packets never overtake each other (a release is never before the
	// previous one), as on one path through one queue.
	Jitter time.Duration
	// Loss is the share of packets dropped (0..1). TCP cannot lose bytes
	// here (the relay's own sockets already acknowledged them), so a "lost"
	// TCP segment is late instead: it and everything behind it waits one
	// more round trip, as a fast retransmission would make it.
	Loss float64
	// Seed makes the loss and jitter draws repeatable.
	Seed uint64
}

func (s linkShape) validate() error {
	if s.Delay < 0 || s.Jitter < 0 || s.Delay > time.Minute || s.Jitter > time.Minute {
		return fmt.Errorf("relay: delay %v and jitter %v must be between 0 and 1m", s.Delay, s.Jitter)
	}
	if !(s.Loss >= 0 && s.Loss < 1) {
		return fmt.Errorf("relay: loss %v must be at least 0 and below 1", s.Loss)
	}
	return nil
}

// mss is the TCP segment size the loss of a TCP chunk is drawn for.
const mss = 1448

// udpQueue bounds the packets held in one direction of one UDP flow; beyond
// it packets are dropped, as a full router queue drops them.
const udpQueue = 4096

// udpIdle is how long a UDP flow without packets keeps its mapping.
const udpIdle = 2 * time.Minute

// relay forwards a TCP listener and a UDP socket to their targets.
type relay struct {
	shape  linkShape
	tcp    net.Listener // nil when not relaying TCP
	udp    *net.UDPConn // nil when not relaying UDP
	tcpTo  string
	udpTo  *net.UDPAddr
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	flows  atomic.Uint64 // numbers flows, so each gets its own random stream

	// Bytes (payload: TCP stream bytes, UDP datagrams) the target sent
	// towards the client, counted as they reach the relay (before loss):
	// what the server sent. up is the other way.
	down, up atomic.Int64
	// Packets dropped by Loss or a full queue, both directions.
	dropped atomic.Int64

	mu    sync.Mutex
	conns map[io.Closer]struct{}
}

// relayConfig says where the relay listens and where it forwards to; an
// empty pair turns that protocol off.
type relayConfig struct {
	TCPListen, TCPTarget string
	UDPListen, UDPTarget string
	Shape                linkShape
}

// startRelay listens and starts forwarding until Close.
func startRelay(c relayConfig) (*relay, error) {
	if err := c.Shape.validate(); err != nil {
		return nil, err
	}
	if (c.TCPListen == "") != (c.TCPTarget == "") || (c.UDPListen == "") != (c.UDPTarget == "") {
		return nil, errors.New("relay: give both a listen address and a target for each protocol relayed")
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &relay{shape: c.Shape, tcpTo: c.TCPTarget, ctx: ctx, cancel: cancel, conns: map[io.Closer]struct{}{}}
	if c.TCPListen != "" {
		ln, err := net.Listen("tcp", c.TCPListen)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("relay: listen on tcp %s: %w", c.TCPListen, err)
		}
		r.tcp = ln
	}
	if c.UDPListen != "" {
		to, err := net.ResolveUDPAddr("udp", c.UDPTarget)
		if err == nil {
			var la *net.UDPAddr
			if la, err = net.ResolveUDPAddr("udp", c.UDPListen); err == nil {
				r.udp, err = net.ListenUDP("udp", la)
			}
		}
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("relay: udp %s -> %s: %w", c.UDPListen, c.UDPTarget, err)
		}
		r.udpTo = to
	}
	if r.tcp != nil {
		r.wg.Add(1)
		go r.acceptTCP()
	}
	if r.udp != nil {
		r.wg.Add(1)
		go r.serveUDP()
	}
	return r, nil
}

// TCPAddr and UDPAddr are where the relay listens.
func (r *relay) TCPAddr() *net.TCPAddr { return r.tcp.Addr().(*net.TCPAddr) }
func (r *relay) UDPAddr() *net.UDPAddr { return r.udp.LocalAddr().(*net.UDPAddr) }

// Close stops listening, closes every flow and waits for the goroutines.
func (r *relay) Close() error {
	r.cancel()
	if r.tcp != nil {
		r.tcp.Close()
	}
	if r.udp != nil {
		r.udp.Close()
	}
	r.mu.Lock()
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
	return nil
}

func (r *relay) track(c io.Closer) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx.Err() != nil {
		c.Close()
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *relay) untrack(c io.Closer) {
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
	c.Close()
}

// lane is one direction of one flow: its own random stream, so a flow's
// draws do not depend on what other flows did, and the release time of the
// packet before.
type lane struct {
	shape linkShape
	rng   *rand.Rand
	last  time.Time
}

func (r *relay) newLane(dir uint64) *lane {
	n := r.flows.Add(1)
	return &lane{shape: r.shape, rng: rand.New(rand.NewPCG(r.shape.Seed, n<<1|dir))}
}

// lost draws whether a packet of n segments is lost (any of its segments).
func (l *lane) lost(segments int) bool {
	if l.shape.Loss <= 0 {
		return false
	}
	p := 1 - math.Pow(1-l.shape.Loss, float64(max(segments, 1)))
	return l.rng.Float64() < p
}

// release is when a packet read now leaves the relay: never before the one
// before it.
func (l *lane) release(now time.Time, extra time.Duration) time.Time {
	d := l.shape.Delay + extra
	if l.shape.Jitter > 0 {
		d += time.Duration(l.rng.Int64N(int64(l.shape.Jitter)))
	}
	at := now.Add(d)
	if at.Before(l.last) {
		at = l.last
	}
	l.last = at
	return at
}

type held struct {
	at time.Time
	b  []byte
}

// sendAt writes each held packet at its time, until the channel closes or
// a write fails (then it drains, so the reader never blocks on it).
func sendAt(ctx context.Context, q <-chan held, write func([]byte) error) {
	t := time.NewTimer(0)
	defer t.Stop()
	broken := false
	for h := range q {
		if broken {
			continue
		}
		if d := time.Until(h.at); d > 0 {
			t.Reset(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				broken = true
				continue
			}
		}
		if write(h.b) != nil {
			broken = true
		}
	}
}

// ---- UDP

// udpFlow is one client's mapping: its own socket towards the target, so
// the target sees one source per client, as behind a NAT.
type udpFlow struct {
	client *net.UDPAddr
	conn   *net.UDPConn
	up     chan held
	upLane *lane
	seen   atomic.Int64 // unix nanos of the last packet either way
}

func (r *relay) serveUDP() {
	defer r.wg.Done()
	flows := map[string]*udpFlow{}
	defer func() {
		for _, f := range flows {
			close(f.up)
		}
	}()
	buf := make([]byte, 64<<10)
	lastSweep := time.Now()
	for {
		n, from, err := r.udp.ReadFromUDP(buf)
		if err != nil {
			if r.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		now := time.Now()
		if now.Sub(lastSweep) > udpIdle/4 {
			lastSweep = now
			for k, f := range flows {
				if now.Sub(time.Unix(0, f.seen.Load())) > udpIdle {
					close(f.up)
					r.untrack(f.conn)
					delete(flows, k)
				}
			}
		}
		r.up.Add(int64(n))
		f := flows[from.String()]
		if f == nil {
			if f, err = r.newUDPFlow(from); err != nil {
				continue
			}
			flows[from.String()] = f
		}
		f.seen.Store(now.UnixNano())
		if f.upLane.lost(1) {
			r.dropped.Add(1)
			continue
		}
		select {
		case f.up <- held{f.upLane.release(now, 0), append([]byte(nil), buf[:n]...)}:
		default:
			r.dropped.Add(1)
		}
	}
}

func (r *relay) newUDPFlow(client *net.UDPAddr) (*udpFlow, error) {
	conn, err := net.DialUDP("udp", nil, r.udpTo)
	if err != nil {
		return nil, err
	}
	if !r.track(conn) {
		return nil, net.ErrClosed
	}
	f := &udpFlow{client: client, conn: conn, up: make(chan held, udpQueue), upLane: r.newLane(0)}
	down := make(chan held, udpQueue)
	downLane := r.newLane(1)
	r.wg.Add(3)
	go func() {
		defer r.wg.Done()
		sendAt(r.ctx, f.up, func(b []byte) error { _, err := conn.Write(b); return ignoreRefused(err) })
	}()
	go func() {
		defer r.wg.Done()
		sendAt(r.ctx, down, func(b []byte) error { _, err := r.udp.WriteToUDP(b, client); return ignoreRefused(err) })
	}()
	go func() {
		defer r.wg.Done()
		defer close(down)
		buf := make([]byte, 64<<10)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				if ignoreRefused(err) == nil {
					continue
				}
				return
			}
			now := time.Now()
			f.seen.Store(now.UnixNano())
			r.down.Add(int64(n))
			if downLane.lost(1) {
				r.dropped.Add(1)
				continue
			}
			select {
			case down <- held{downLane.release(now, 0), append([]byte(nil), buf[:n]...)}:
			default:
				r.dropped.Add(1)
			}
		}
	}()
	return f, nil
}

// ignoreRefused treats ICMP port unreachable (a peer not listening yet or
// any more) as the lost datagram it is, not the end of the flow.
func ignoreRefused(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && errors.Is(op.Err, syscall.ECONNREFUSED) {
		return nil
	}
	return err
}

// ---- TCP

func (r *relay) acceptTCP() {
	defer r.wg.Done()
	for {
		c, err := r.tcp.Accept()
		if err != nil {
			if r.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		r.wg.Add(1)
		go r.serveTCP(c.(*net.TCPConn))
	}
}

func (r *relay) serveTCP(client *net.TCPConn) {
	defer r.wg.Done()
	if !r.track(client) {
		return
	}
	defer r.untrack(client)
	d := net.Dialer{Timeout: 10 * time.Second}
	tc, err := d.DialContext(r.ctx, "tcp", r.tcpTo)
	if err != nil {
		return
	}
	target := tc.(*net.TCPConn)
	if !r.track(target) {
		return
	}
	defer r.untrack(target)
	client.SetNoDelay(true)
	target.SetNoDelay(true)
	var pipes sync.WaitGroup
	pipes.Add(2)
	go func() { defer pipes.Done(); r.pipeTCP(client, target, r.newLane(0), &r.up) }()
	go func() { defer pipes.Done(); r.pipeTCP(target, client, r.newLane(1), &r.down) }()
	pipes.Wait()
}

// pipeTCP copies src to dst through the lane's delay line; at src's end of
// stream it half-closes dst once everything held was written, so a close
// reaches the other side after the bytes before it.
func (r *relay) pipeTCP(src, dst *net.TCPConn, l *lane, count *atomic.Int64) {
	q := make(chan held, 256)
	done := make(chan struct{})
	var werr atomic.Bool
	go func() {
		defer close(done)
		sendAt(r.ctx, q, func(b []byte) error {
			_, err := dst.Write(b)
			if err != nil {
				werr.Store(true)
			}
			return err
		})
	}()
	rtt := 2 * l.shape.Delay
	buf := make([]byte, 16<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			count.Add(int64(n))
			now := time.Now()
			var extra time.Duration
			if l.lost((n + mss - 1) / mss) {
				r.dropped.Add(1)
				extra = rtt
			}
			q <- held{l.release(now, extra), append([]byte(nil), buf[:n]...)}
		}
		if err != nil {
			close(q)
			<-done
			if errors.Is(err, io.EOF) && !werr.Load() {
				dst.CloseWrite()
			} else {
				// A reset or our own close: tear both down.
				src.Close()
				dst.Close()
			}
			return
		}
		if werr.Load() {
			close(q)
			<-done
			src.Close()
			return
		}
	}
}
