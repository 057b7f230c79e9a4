package peer

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
)

// BenchmarkUID is the cost the front door adds to each new connection when
// the session is separated, beside the usual way to ask (reading
// /proc/net/tcp, as netstat does) and what a new loopback connection costs
// anyway (dial and accept), the work it rides on.
func BenchmarkUID(b *testing.B) {
	for _, open := range []int{10, 1000} {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		var conns []net.Conn
		for range open {
			c, err := net.Dial("tcp4", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			s, err := ln.Accept()
			if err != nil {
				b.Fatal(err)
			}
			conns = append(conns, c, s)
		}
		server := conns[len(conns)-1]
		b.Run(fmt.Sprintf("lookup/sockets=%d", 2*open), func(b *testing.B) {
			for b.Loop() {
				if _, err := UID(server); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("proc-net-tcp/sockets=%d", 2*open), func(b *testing.B) {
			for b.Loop() {
				if !inProcNetTCP(b, server.RemoteAddr().(*net.TCPAddr).Port) {
					b.Fatal("the client socket is not in /proc/net/tcp")
				}
			}
		})
		b.Run(fmt.Sprintf("dial+accept/sockets=%d", 2*open), func(b *testing.B) {
			for b.Loop() {
				c, err := net.Dial("tcp4", ln.Addr().String())
				if err != nil {
					b.Fatal(err)
				}
				s, err := ln.Accept()
				if err != nil {
					b.Fatal(err)
				}
				c.Close()
				s.Close()
			}
		})
		for _, c := range conns {
			c.Close()
		}
		ln.Close()
	}
}

// inProcNetTCP finds the socket with this local port in /proc/net/tcp, the
// way netstat and most "who owns this connection" code does.
func inProcNetTCP(b *testing.B, port int) bool {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	want := fmt.Sprintf(":%04X ", port)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 7 && strings.HasSuffix(fields[1]+" ", want) {
			return true
		}
	}
	return false
}
