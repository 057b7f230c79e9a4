// Package peer finds which local user owns the other end of a TCP
// connection: the desktop's own programs reach deskenv over loopback like any
// client, and the front door must know them by their user, not by a token
// they could have read somewhere.
//
// For Unix sockets the kernel answers directly (SO_PEERCRED); for TCP it does
// not, but it lists every socket of this network namespace with its owner in
// /proc/net/tcp and /proc/net/tcp6. No library we trust does this lookup, so
// it is written here; it is Linux only, like the rest of deskenv.
package peer

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
)

// ErrNotLocal means no socket of this machine's network namespace is the
// other end of the connection: the client is on another host (or another
// namespace, such as another container).
var ErrNotLocal = errors.New("the client is not a process of this machine")

// UID returns the user owning the client end of c, a connection this process
// accepted. It reads the kernel's socket tables, so call it once per
// connection, not per request.
func UID(c net.Conn) (uint32, error) {
	client, ok1 := c.RemoteAddr().(*net.TCPAddr)
	server, ok2 := c.LocalAddr().(*net.TCPAddr)
	if !ok1 || !ok2 {
		return 0, fmt.Errorf("peer: %T is not a TCP connection", c)
	}
	return Lookup(client, server)
}

// Lookup returns the owner of the socket whose own address is local and
// whose peer is remote, as the kernel's tables list them.
func Lookup(local, remote *net.TCPAddr) (uint32, error) {
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if errors.Is(err, os.ErrNotExist) {
			continue // no IPv6 in this kernel
		}
		if err != nil {
			return 0, fmt.Errorf("peer: %w", err)
		}
		uid, found, err := scan(f, local, remote)
		f.Close()
		if err != nil {
			return 0, fmt.Errorf("peer: %s: %w", table, err)
		}
		if found {
			return uid, nil
		}
	}
	return 0, ErrNotLocal
}

// scan reads one table: a header line, then lines of
// "sl local rem st queues timer retrnsmt uid ...".
func scan(r io.Reader, local, remote *net.TCPAddr) (uid uint32, found bool, err error) {
	sc := bufio.NewScanner(r)
	sc.Scan() // the header
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 8 {
			continue
		}
		l, err1 := parseAddr(f[1])
		rm, err2 := parseAddr(f[2])
		if err1 != nil || err2 != nil {
			return 0, false, fmt.Errorf("unreadable line %q", sc.Text())
		}
		if !same(l, local) || !same(rm, remote) {
			continue
		}
		n, err := strconv.ParseUint(f[7], 10, 32)
		if err != nil {
			return 0, false, fmt.Errorf("uid %q: %w", f[7], err)
		}
		return uint32(n), true, nil
	}
	return 0, false, sc.Err()
}

func same(a, b *net.TCPAddr) bool { return a.Port == b.Port && a.IP.Equal(b.IP) }

// parseAddr reads "0100007F:1F90": the address as the kernel holds it in
// memory, printed 32 bits at a time in this machine's byte order, then the
// port in hex.
func parseAddr(s string) (*net.TCPAddr, error) {
	h, p, ok := strings.Cut(s, ":")
	if !ok || (len(h) != 8 && len(h) != 32) {
		return nil, fmt.Errorf("address %q", s)
	}
	ip := make(net.IP, len(h)/2)
	for i := 0; i < len(h); i += 8 {
		w, err := strconv.ParseUint(h[i:i+8], 16, 32)
		if err != nil {
			return nil, fmt.Errorf("address %q: %w", s, err)
		}
		binary.NativeEndian.PutUint32(ip[i/2:], uint32(w))
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return nil, fmt.Errorf("port in %q: %w", s, err)
	}
	return &net.TCPAddr{IP: ip, Port: int(port)}, nil
}
