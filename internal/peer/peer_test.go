package peer

import (
	"errors"
	"net"
	"os"
	"strings"
	"testing"
)

// TestUID dials this process's own listener over IPv4 and IPv6 loopback:
// the client end belongs to this process's user. (Another user's client is
// tested where it matters, from the session user's side: cmd/deskenv's
// TestDesktopCannotReachDeskenv.)
func TestUID(t *testing.T) {
	for _, tc := range []struct{ network, addr string }{
		{"tcp4", "127.0.0.1:0"},
		{"tcp6", "[::1]:0"},
		{"tcp", ":0"}, // dual stack: a v4 client seen as v4-mapped
	} {
		t.Run(tc.network+" "+tc.addr, func(t *testing.T) {
			ln, err := net.Listen(tc.network, tc.addr)
			if err != nil {
				t.Skipf("no %s loopback here: %v", tc.network, err)
			}
			defer ln.Close()
			target := ln.Addr().String()
			if tc.addr == ":0" {
				target = strings.Replace(target, "[::]", "127.0.0.1", 1)
			}
			c, err := net.Dial("tcp", target)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			s, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			uid, err := UID(s)
			if err != nil {
				t.Fatalf("UID: %v", err)
			}
			if int(uid) != os.Getuid() {
				t.Errorf("UID = %d, want this process's %d", uid, os.Getuid())
			}
		})
	}
}

func TestNotLocal(t *testing.T) {
	for _, tc := range []struct{ local, remote string }{
		{"192.0.2.1:9", "127.0.0.1:80"}, // TEST-NET-1: nobody here
		{"[2001:db8::1]:9", "[::1]:80"}, // documentation prefix
		{"127.0.0.1:1", "127.0.0.1:2"},  // loopback, but no such pair
	} {
		l, _ := net.ResolveTCPAddr("tcp", tc.local)
		r, _ := net.ResolveTCPAddr("tcp", tc.remote)
		if _, err := Lookup(l, r); !errors.Is(err, ErrNotLocal) {
			t.Errorf("Lookup(%s, %s) = %v, want ErrNotLocal", tc.local, tc.remote, err)
		}
	}
}
