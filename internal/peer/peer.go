// Package peer finds which local user owns the other end of a TCP
// connection: the desktop's own programs reach deskenv over loopback like any
// client, and the front door must know them by their user, not by a token
// they could have read somewhere.
//
// For Unix sockets the kernel answers directly (SO_PEERCRED); for TCP it
// answers through sock_diag netlink, which `ss` uses. The one library that
// wraps it (vishvananda/netlink's SocketGet) asks for a dump, which walks the
// kernel's whole connection hash table: 15 ms a lookup on this machine, and
// reading /proc/net/tcp is as slow (BenchmarkUID). An exact request (no
// NLM_F_DUMP) is one hash lookup, so that is what is written here: one
// request and one answer, about 60 lines. Linux only, like deskenv.
package peer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrNotLocal means no socket of this machine's network namespace is the
// other end of the connection: the client is on another host (or in another
// network namespace, such as another container).
var ErrNotLocal = errors.New("the client is not a process of this machine")

// UID returns the user owning the client end of c, a connection this process
// accepted.
func UID(c net.Conn) (uint32, error) {
	client, ok1 := c.RemoteAddr().(*net.TCPAddr)
	server, ok2 := c.LocalAddr().(*net.TCPAddr)
	if !ok1 || !ok2 {
		return 0, fmt.Errorf("peer: %T is not a TCP connection", c)
	}
	return Lookup(client, server)
}

// Lookup returns the owner of the TCP socket whose own address is local and
// whose peer is remote.
func Lookup(local, remote *net.TCPAddr) (uint32, error) {
	families := []uint8{unix.AF_INET6}
	if local.IP.To4() != nil && remote.IP.To4() != nil {
		// An IPv4 client; or, rarely, an IPv6 socket that dialled a
		// v4-mapped address.
		families = []uint8{unix.AF_INET, unix.AF_INET6}
	}
	for _, f := range families {
		uid, err := get(f, local, remote)
		if errors.Is(err, syscall.ENOENT) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("peer: ask the kernel who owns %s -> %s: %w", local, remote, err)
		}
		return uid, nil
	}
	return 0, ErrNotLocal
}

// Sizes and offsets of linux/inet_diag.h's structures.
const (
	sockIDLen  = 48                 // inet_diag_sockid
	reqLen     = 8 + sockIDLen      // inet_diag_req_v2
	uidOffset  = 4 + sockIDLen + 12 // inet_diag_msg.idiag_uid
	msgMinLen  = uidOffset + 4
	noCookie   = ^uint32(0) // INET_DIAG_NOCOOKIE
	allStates  = ^uint32(0)
	sockDiagBy = 20 // SOCK_DIAG_BY_FAMILY
)

// get sends one exact inet_diag request and reads the answer's uid.
func get(family uint8, local, remote *net.TCPAddr) (uint32, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_INET_DIAG)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)

	msg := make([]byte, unix.NLMSG_HDRLEN+reqLen)
	ne := binary.NativeEndian
	ne.PutUint32(msg[0:], uint32(len(msg)))
	ne.PutUint16(msg[4:], sockDiagBy)
	ne.PutUint16(msg[6:], unix.NLM_F_REQUEST)
	ne.PutUint32(msg[8:], 1) // sequence
	req := msg[unix.NLMSG_HDRLEN:]
	req[0], req[1] = family, unix.IPPROTO_TCP
	ne.PutUint32(req[4:], allStates)
	id := req[8:]
	binary.BigEndian.PutUint16(id[0:], uint16(local.Port))
	binary.BigEndian.PutUint16(id[2:], uint16(remote.Port))
	putIP(id[4:20], local.IP, family)
	putIP(id[20:36], remote.IP, family)
	ne.PutUint32(id[40:], noCookie)
	ne.PutUint32(id[44:], noCookie)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, err
	}

	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return 0, err
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil {
		return 0, err
	}
	for _, m := range msgs {
		switch m.Header.Type {
		case unix.NLMSG_ERROR:
			if len(m.Data) >= 4 {
				if errno := -int32(ne.Uint32(m.Data)); errno != 0 {
					return 0, syscall.Errno(errno)
				}
			}
		case sockDiagBy:
			if len(m.Data) < msgMinLen {
				return 0, fmt.Errorf("a short answer (%d bytes)", len(m.Data))
			}
			return ne.Uint32(m.Data[uidOffset:]), nil
		}
	}
	return 0, errors.New("no answer")
}

// putIP writes ip as inet_diag_sockid holds it: 4 bytes for AF_INET, 16 for
// AF_INET6 (a v4 address as v4-mapped).
func putIP(dst []byte, ip net.IP, family uint8) {
	if family == unix.AF_INET {
		copy(dst, ip.To4())
		return
	}
	copy(dst, ip.To16())
}
