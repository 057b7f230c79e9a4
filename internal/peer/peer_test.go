package peer

import (
	"encoding/binary"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
)

// TestUID dials this process's own listener over IPv4 and IPv6 loopback:
// the client end belongs to this process's user.
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

func TestScan(t *testing.T) {
	const table = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0
   1: 0100007F:A1B2 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1001        0 2 1 0 20 4 30 10 -1
`
	client := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 0xA1B2}
	server := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 0x1F90}
	var b [2]byte
	if binary.NativeEndian.PutUint16(b[:], 1); b[0] != 1 {
		t.Skip("the sample table is a little-endian machine's; TestUID covers this one")
	}
	for _, tc := range []struct {
		name          string
		local, remote *net.TCPAddr
		wantUID       uint32
		wantFound     bool
	}{
		{"the client's socket", client, server, 1001, true},
		{"the other way round is the server's accepted socket, absent here", server, client, 0, false},
		{"another port", &net.TCPAddr{IP: client.IP, Port: 1}, server, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			uid, found, err := scan(strings.NewReader(table), tc.local, tc.remote)
			if err != nil || uid != tc.wantUID || found != tc.wantFound {
				t.Errorf("scan = %d, %v, %v; want %d, %v", uid, found, err, tc.wantUID, tc.wantFound)
			}
		})
	}
	if _, _, err := scan(strings.NewReader("header\n 0: zz:1 00000000:0000 0A 0 0 0 5 0\n"), client, server); err == nil {
		t.Error("an unreadable line was not an error")
	}
	if _, err := Lookup(&net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 9}, server); !errors.Is(err, ErrNotLocal) {
		t.Errorf("a socket nobody here has: %v, want ErrNotLocal", err)
	}
}
