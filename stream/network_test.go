package stream

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/deskenv/deskenv/internal/testrig"
)

// serverCandidates waits for the server's trickled candidates.
func (c *client) serverCandidates(t *testing.T) []string {
	t.Helper()
	var cands []string
	testrig.WaitFor(t, "the server's candidates", func() bool {
		c.mu.Lock()
		cands = append([]string(nil), c.cands...)
		c.mu.Unlock()
		return len(cands) > 0
	})
	return cands
}

func freeUDPPort(t *testing.T) int {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP("127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

// TestNetworkConfig checks what the server announces and that viewers
// connect through it.
func TestNetworkConfig(t *testing.T) {
	t.Run("single UDP port", func(t *testing.T) {
		port := freeUDPPort(t)
		e := newEnv(t, envOptions{width: 320, height: 240, cfg: Config{UDPPort: port}})
		for i := 0; i < 2; i++ {
			c := join(t, e, clientOptions{})
			defer c.close()
			c.waitFrame(10 * time.Second)
			for _, cand := range c.serverCandidates(t) {
				if !strings.Contains(cand, fmt.Sprintf(" 127.0.0.1 %d typ host", port)) {
					t.Errorf("candidate %q is not on 127.0.0.1:%d", cand, port)
				}
			}
		}
		if err := e.s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		l, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP("127.0.0.1"), Port: port})
		if err != nil {
			t.Fatalf("UDP port %d still taken after Close: %v", port, err)
		}
		l.Close()
	})
	t.Run("port taken", func(t *testing.T) {
		l, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP("127.0.0.1")})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		e := newEnv(t, envOptions{width: 320, height: 240})
		_, err = New(e.d, e.exec, Config{UDPPort: l.LocalAddr().(*net.UDPAddr).Port, LoopbackOnly: true})
		if err == nil || !strings.Contains(err.Error(), "UDPPort") {
			t.Fatalf("New with a taken port: %v, want an error naming UDPPort", err)
		}
	})
	t.Run("NAT 1:1", func(t *testing.T) {
		e := newEnv(t, envOptions{width: 320, height: 240, cfg: Config{NAT1To1IPs: []string{"203.0.113.7"}}})
		c := join(t, e, clientOptions{})
		defer c.close()
		for _, cand := range c.serverCandidates(t) {
			if !strings.Contains(cand, " 203.0.113.7 ") {
				t.Errorf("candidate %q does not announce 203.0.113.7", cand)
			}
		}
	})
}
