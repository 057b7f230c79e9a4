package main

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"
)

// The relay's tests check what it forwards, never how long it took: the
// machine is shared and timing assertions would flap.

// TestLaneLossRate checks the drawn loss over many packets with a fixed
// seed: near the configured share, and the same draws for the same seed.
func TestLaneLossRate(t *testing.T) {
	tests := []struct {
		name     string
		loss     float64
		segments int
		want     float64 // expected share lost
	}{
		{"no loss", 0, 1, 0},
		{"1 % of packets", 0.01, 1, 0.01},
		{"3 % of packets", 0.03, 1, 0.03},
		{"a 10-segment TCP chunk at 1 %", 0.01, 10, 1 - 0.99*0.99*0.99*0.99*0.99*0.99*0.99*0.99*0.99*0.99},
	}
	const n = 200000
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			draw := func() []bool {
				l := &lane{shape: linkShape{Loss: tc.loss, Seed: 7}, rng: mrand.New(mrand.NewPCG(7, 1))}
				out := make([]bool, n)
				for i := range out {
					out[i] = l.lost(tc.segments)
				}
				return out
			}
			a, b := draw(), draw()
			lost := 0
			for i := range a {
				if a[i] != b[i] {
					t.Fatalf("draw %d differs between two runs with the same seed", i)
				}
				if a[i] {
					lost++
				}
			}
			got := float64(lost) / n
			// 200000 draws: the standard error at 3 % is 0.04 %; 0.3 % is
			// many of them, so only a wrong rate fails.
			if d := got - tc.want; d > 0.003 || d < -0.003 {
				t.Errorf("lost %.4f of %d packets, want %.4f", got, n, tc.want)
			}
		})
	}
}

// TestLaneReleaseOrder checks that jitter never lets a packet overtake the
// one before it.
func TestLaneReleaseOrder(t *testing.T) {
	l := &lane{shape: linkShape{Delay: 10 * time.Millisecond, Jitter: 50 * time.Millisecond}, rng: mrand.New(mrand.NewPCG(1, 1))}
	now := time.Unix(1000, 0)
	prev := time.Time{}
	for i := 0; i < 10000; i++ {
		now = now.Add(time.Millisecond)
		at := l.release(now, 0)
		if at.Before(prev) {
			t.Fatalf("packet %d released at %v, before the one before it (%v)", i, at, prev)
		}
		if at.Before(now.Add(l.shape.Delay)) {
			t.Fatalf("packet %d released at %v, before its delay", i, at)
		}
		prev = at
	}
}

func TestLinkShapeValidate(t *testing.T) {
	tests := []struct {
		name string
		s    linkShape
		ok   bool
	}{
		{"zero", linkShape{}, true},
		{"typical", linkShape{Delay: 75 * time.Millisecond, Jitter: 5 * time.Millisecond, Loss: 0.03}, true},
		{"negative delay", linkShape{Delay: -1}, false},
		{"loss of everything", linkShape{Loss: 1}, false},
		{"negative loss", linkShape{Loss: -0.1}, false},
		{"huge jitter", linkShape{Jitter: time.Hour}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.s.validate(); (err == nil) != tc.ok {
				t.Errorf("validate(%+v) = %v, want ok=%v", tc.s, err, tc.ok)
			}
		})
	}
}

// udpEcho answers every datagram with "echo" + the datagram, and records
// the order and the source of what it received.
type udpEcho struct {
	conn *net.UDPConn
	mu   sync.Mutex
	got  map[string][]uint32 // source address -> sequence numbers in arrival order
}

func startUDPEcho(t *testing.T) *udpEcho {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	e := &udpEcho{conn: conn, got: map[string][]uint32{}}
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := conn.ReadFromUDP(buf)
			if err != nil {
				return
			}
			e.mu.Lock()
			e.got[from.String()] = append(e.got[from.String()], binary.BigEndian.Uint32(buf[1:5]))
			e.mu.Unlock()
			conn.WriteToUDP(append([]byte("echo"), buf[:n]...), from)
		}
	}()
	t.Cleanup(func() { conn.Close() })
	return e
}

// TestRelayUDP sends numbered datagrams from two clients through a lossy
// relay to an echo server: each client has its own mapping (the server sees
// two sources), replies come back to the client that sent, in order, and the
// share lost is near the configured loss in each direction.
func TestRelayUDP(t *testing.T) {
	echo := startUDPEcho(t)
	const loss, n = 0.05, 3000
	r, err := startRelay(relayConfig{UDPListen: "127.0.0.1:0", UDPTarget: echo.conn.LocalAddr().String(),
		Shape: linkShape{Delay: time.Millisecond, Jitter: time.Millisecond, Loss: loss, Seed: 42}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()

	type result struct {
		id       byte
		replies  []uint32
		wrongIDs int
	}
	results := make([]result, 2)
	var wg sync.WaitGroup
	for c := range results {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			id := byte('A' + c)
			res := &results[c]
			res.id = id
			conn, err := net.DialUDP("udp", nil, r.UDPAddr())
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close()
			got := make(chan struct{})
			go func() {
				defer close(got)
				buf := make([]byte, 2048)
				for {
					conn.SetReadDeadline(time.Now().Add(3 * time.Second))
					m, err := conn.Read(buf)
					if err != nil {
						return
					}
					if m < 9 || string(buf[:4]) != "echo" || buf[4] != id {
						res.wrongIDs++
						continue
					}
					res.replies = append(res.replies, binary.BigEndian.Uint32(buf[5:9]))
				}
			}()
			msg := make([]byte, 200)
			msg[0] = id
			for i := uint32(0); i < n; i++ {
				binary.BigEndian.PutUint32(msg[1:5], i)
				if _, err := conn.Write(msg); err != nil {
					t.Error(err)
					return
				}
				if i%50 == 49 {
					// Paced, so no socket buffer overflows and every loss is
					// the relay's.
					time.Sleep(2 * time.Millisecond)
				}
			}
			<-got
		}(c)
	}
	wg.Wait()

	echo.mu.Lock()
	defer echo.mu.Unlock()
	if len(echo.got) != 2 {
		t.Fatalf("the echo server saw %d sources, want 2 (one mapping per client)", len(echo.got))
	}
	for src, seqs := range echo.got {
		if !increasing(seqs) {
			t.Errorf("from %s the server got datagrams out of order", src)
		}
		checkShare(t, "towards the server from "+src, n-len(seqs), n, loss)
	}
	for _, res := range results {
		if res.wrongIDs > 0 {
			t.Errorf("client %c got %d replies meant for another client", res.id, res.wrongIDs)
		}
		if !increasing(res.replies) {
			t.Errorf("client %c got replies out of order", res.id)
		}
		// A reply needs both directions to keep the datagram.
		checkShare(t, fmt.Sprintf("round trip of client %c", res.id), n-len(res.replies), n, 1-(1-loss)*(1-loss))
	}
	// What the relay counts is what reached it: every byte the clients
	// sent, less what the kernel dropped before the relay read it (its
	// socket buffer overflows when the machine does not run the relay for
	// a few milliseconds: CI saw 92 of 6000 datagrams go so under load),
	// and at least what it passed on to the server.
	forwarded := 0
	for _, seqs := range echo.got {
		forwarded += len(seqs)
	}
	if up := r.up.Load(); up%200 != 0 || up > 2*n*200 || up < int64(forwarded)*200 {
		t.Errorf("relay counted %d bytes from the clients, want whole datagrams of 200, at most %d sent and at least the %d passed on", up, 2*n*200, forwarded*200)
	}
	if r.down.Load() == 0 || r.dropped.Load() == 0 {
		t.Errorf("relay counted %d bytes back and %d drops; want both above 0", r.down.Load(), r.dropped.Load())
	}
}

func increasing(s []uint32) bool {
	for i := 1; i < len(s); i++ {
		if s[i] <= s[i-1] {
			return false
		}
	}
	return len(s) > 0
}

// checkShare fails when lost/n is far from want: 3000 draws at 5 % have a
// standard error of 0.4 %, so 2.5 % either way is about six of them.
func checkShare(t *testing.T, what string, lost, n int, want float64) {
	t.Helper()
	got := float64(lost) / float64(n)
	if got < want-0.025 || got > want+0.025 {
		t.Errorf("%s: %.3f lost (%d of %d), want about %.3f", what, got, lost, n, want)
	}
}

// TestRelayTCP sends a megabyte each way through a relay that delays and
// "loses" (delivers late) segments: every byte arrives intact and in order,
// and closing one side reaches the other.
func TestRelayTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	r, err := startRelay(relayConfig{TCPListen: "127.0.0.1:0", TCPTarget: ln.Addr().String(),
		Shape: linkShape{Delay: time.Millisecond, Jitter: time.Millisecond, Loss: 0.05, Seed: 3}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()

	up, down := make([]byte, 1<<20), make([]byte, 1<<20)
	rand.Read(up)
	rand.Read(down)
	type got struct {
		sum [32]byte
		n   int
		err error
	}
	serverGot := make(chan got, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			serverGot <- got{err: err}
			return
		}
		defer c.Close()
		go func() {
			c.Write(down)
			c.(*net.TCPConn).CloseWrite()
		}()
		b, err := io.ReadAll(c) // ends when the client's close arrives
		serverGot <- got{sha256.Sum256(b), len(b), err}
	}()

	c, err := net.Dial("tcp", r.TCPAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go func() {
		c.Write(up)
		c.(*net.TCPConn).CloseWrite()
	}()
	c.SetReadDeadline(time.Now().Add(60 * time.Second))
	b, err := io.ReadAll(c) // ends when the server's close arrives
	if err != nil {
		t.Fatalf("client read: %v", err)
	}
	if !bytes.Equal(b, down) {
		t.Errorf("client got %d bytes, not the server's %d (first difference at %d)", len(b), len(down), firstDiff(b, down))
	}
	select {
	case g := <-serverGot:
		if g.err != nil {
			t.Fatalf("server read: %v", g.err)
		}
		if g.sum != sha256.Sum256(up) {
			t.Errorf("server got %d bytes that differ from the client's %d", g.n, len(up))
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the client's close never reached the server")
	}
	if r.up.Load() != int64(len(up)) || r.down.Load() != int64(len(down)) {
		t.Errorf("relay counted %d up and %d down, want %d and %d", r.up.Load(), r.down.Load(), len(up), len(down))
	}
	if r.dropped.Load() == 0 {
		t.Error("relay counted no late (lost) segments at 5 % loss over 2 MB")
	}
}

// TestRelayTCPTargetGone checks that a client is closed, not left hanging,
// when the target refuses, and that the relay keeps serving.
func TestRelayTCPTargetGone(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	r, err := startRelay(relayConfig{TCPListen: "127.0.0.1:0", TCPTarget: dead})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i := 0; i < 2; i++ {
		c, err := net.Dial("tcp", r.TCPAddr().String())
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		n, err := c.Read(make([]byte, 1))
		c.Close()
		if n != 0 || err == nil || isTimeout(err) {
			t.Fatalf("read %d from a relay whose target is gone: %d bytes, %v; want the connection closed", i, n, err)
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestStartRelayRefuses(t *testing.T) {
	tests := []struct {
		name string
		c    relayConfig
	}{
		{"a listen address without a target", relayConfig{TCPListen: "127.0.0.1:0"}},
		{"a bad shape", relayConfig{UDPListen: "127.0.0.1:0", UDPTarget: "127.0.0.1:9", Shape: linkShape{Loss: 2}}},
		{"an unresolvable target", relayConfig{UDPListen: "127.0.0.1:0", UDPTarget: "not an address"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if r, err := startRelay(tc.c); err == nil {
				r.Close()
				t.Errorf("startRelay(%+v) started; want an error", tc.c)
			}
		})
	}
}
