package display

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// handshake opens a raw X connection to display num and sends the setup
// request with the given authorization; it returns the server's answer code:
// 1 accepted, 0 refused (2 would be "authenticate", which Xvfb never asks).
func handshake(t *testing.T, num int, name string, data []byte) byte {
	t.Helper()
	c, err := net.DialTimeout("unix", "/tmp/.X11-unix/X"+strconv.Itoa(num), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	pad := func(n int) int { return (n + 3) &^ 3 }
	buf := make([]byte, 12+pad(len(name))+pad(len(data)))
	buf[0] = 'l'
	binary.LittleEndian.PutUint16(buf[2:], 11)
	binary.LittleEndian.PutUint16(buf[6:], uint16(len(name)))
	binary.LittleEndian.PutUint16(buf[8:], uint16(len(data)))
	copy(buf[12:], name)
	copy(buf[12+pad(len(name)):], data)
	if _, err := c.Write(buf); err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 8)
	if _, err := io.ReadFull(c, head); err != nil {
		t.Fatalf("read the server's answer: %v", err)
	}
	return head[0]
}

// TestXAuthCookie: the X server this package starts lets in only clients
// that present the display's cookie, the session's copy of the cookie is
// what Env names, and X clients run with Env work while the same clients
// without the cookie are refused.
func TestXAuthCookie(t *testing.T) {
	needXvfb(t)
	d, err := Start(context.Background(), Config{WindowManager: []string{}, Apps: [][]string{}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	num, _ := strconv.Atoi(strings.TrimPrefix(d.Name(), ":"))

	file := d.XAuthority()
	if file == "" || !strings.Contains(strings.Join(d.Env(), "\n"), "XAUTHORITY="+file) {
		t.Fatalf("Env does not name the session's cookie file %q", file)
	}
	cookie, err := readCookie(file, num)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("session cookie file %s: mode %v (%v), want 0600", file, fi.Mode(), err)
	}
	if di, err := os.Stat(filepath.Dir(file)); err != nil || di.Mode().Perm() != 0o711 {
		t.Fatalf("cookie directory: mode %v (%v), want 0711 (no listing, no replacing)", di.Mode(), err)
	}
	wrong := append([]byte(nil), cookie...)
	wrong[0] ^= 0xff

	tests := []struct {
		name   string
		auth   string
		data   []byte
		answer byte
	}{
		{"no authorization", "", nil, 0},
		{"wrong cookie", cookieName, wrong, 0},
		{"the display's cookie", cookieName, cookie, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := handshake(t, num, tc.auth, tc.data); got != tc.answer {
				t.Fatalf("setup answer %d, want %d", got, tc.answer)
			}
		})
	}

	if _, err := exec.LookPath("xdpyinfo"); err != nil {
		t.Fatalf("xdpyinfo (x11-utils) is needed: %v", err)
	}
	clients := []struct {
		name string
		env  []string
		ok   bool
	}{
		{"xdpyinfo with the session's environment", d.Env(), true},
		{"xdpyinfo without a cookie", append(envWithout(d.Env(), "XAUTHORITY", "HOME"), "XAUTHORITY=/nonexistent", "HOME=/nonexistent"), false},
	}
	for _, tc := range clients {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("xdpyinfo")
			cmd.Env = tc.env
			out, err := cmd.CombinedOutput()
			if (err == nil) != tc.ok {
				t.Fatalf("xdpyinfo: err %v, want success %v; output: %.300s", err, tc.ok, out)
			}
		})
	}

	// This process's own connections find the cookie (xgb reads $XAUTHORITY).
	c, err := d.Dial()
	if err != nil {
		t.Fatalf("a second connection of this process: %v", err)
	}
	c.Close()
}

func TestAuthFileRoundTrip(t *testing.T) {
	es := []authEntry{
		{family: familyWild, number: "7", name: cookieName, data: []byte("0123456789abcdef")},
		{family: 256, addr: "host", number: "", name: "X", data: nil},
	}
	got := parseAuth(marshalAuth(es))
	if len(got) != len(es) {
		t.Fatalf("parsed %d entries, want %d", len(got), len(es))
	}
	for i := range es {
		if got[i].family != es[i].family || got[i].addr != es[i].addr || got[i].number != es[i].number ||
			got[i].name != es[i].name || string(got[i].data) != string(es[i].data) {
			t.Errorf("entry %d: %+v, want %+v", i, got[i], es[i])
		}
	}
	// Truncated input: what was whole is kept.
	b := marshalAuth(es)
	if n := len(parseAuth(b[:len(b)-1])); n != 1 {
		t.Errorf("truncated file: %d entries, want 1", n)
	}
}
