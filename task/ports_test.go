package task

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/deskenv/deskenv/internal/testrig"
)

// Two desktops serve one port: each desktop's programs reach their own
// desktop's server, deskenv's user is told to pick, and any other user is
// refused. The clients are curl run as the users themselves, so the owner
// is the kernel's answer, as in pool mode.
func TestPorts(t *testing.T) {
	needRootForUsers(t)
	testrig.NeedTools(t, "curl")
	ctx := testrig.Context(t, time.Minute)
	const uidA, uidB, uidC = 64995, 64996, otherDesktopUID
	ports := NewPorts(nil)
	port := testrig.FreePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	serveAs := func(uid uint32, name string) (net.Listener, chan struct{}) {
		ln, err := ports.listen(ctx, port, uid)
		if err != nil {
			t.Fatalf("listen for %s: %v", name, err)
		}
		done := make(chan struct{})
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "%s's site %s %s", name, r.Method, body)
		})}
		go func() { defer close(done); srv.Serve(ln) }()
		return ln, done
	}
	lnA, doneA := serveAs(uidA, "A")
	lnB, doneB := serveAs(uidB, "B")
	if _, err := ports.listen(ctx, port, uidA); err == nil || !strings.Contains(err.Error(), "already served to the programs of user 64995") {
		t.Errorf("a second server of desktop A on the port: %v, want refused", err)
	}

	curl := func(uid uint32, args ...string) string { t.Helper(); return testrig.CurlAs(ctx, t, uid, args...) }
	for _, c := range []struct {
		name string
		uid  uint32
		args []string
		want string
	}{
		{"A reads", uidA, []string{base + "/"}, "200 A's site GET"},
		{"B reads", uidB, []string{base + "/"}, "200 B's site GET"},
		{"A posts", uidA, []string{"-d", "name=A", base + "/order"}, "200 A's site POST name=A"},
		{"B posts", uidB, []string{"-d", "name=B", base + "/order"}, "200 B's site POST name=B"},
		{"another user reads", uidC, []string{base + "/"}, "403 this task's server answers its own desktop's programs and deskenv only: a connection of user 64997 is refused"},
		// The answer arrives whole though the body was never wanted.
		{"another user posts", uidC, []string{"--data-binary", strings.Repeat("x", 100<<10), base + "/order"}, "403 this task's server"},
		{"root, with two desktops on the port", 0, []string{base + "/"}, "421 2 desktops serve port"},
	} {
		if got := curl(c.uid, c.args...); !strings.HasPrefix(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}

	// B's server closes: its user is refused, root reaches A, the only
	// desktop left.
	lnB.Close()
	<-doneB
	if got := curl(uidB, base+"/"); !strings.HasPrefix(got, "403 ") {
		t.Errorf("B after its server closed: %q, want 403", got)
	}
	if got := curl(0, base+"/"); !strings.HasPrefix(got, "200 A's site") {
		t.Errorf("root with one desktop on the port: %q, want A's site", got)
	}
	// The last closes: the port is the machine's again.
	lnA.Close()
	<-doneA
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatalf("the port after its last server closed: %v", err)
	}
	ln.Close()
	// And it can be served again.
	lnA2, doneA2 := serveAs(uidA, "A")
	if got := curl(uidA, base+"/"); !strings.HasPrefix(got, "200 A's site") {
		t.Errorf("A serving again: %q", got)
	}
	lnA2.Close()
	<-doneA2
}

// A client that opens the connection and sends nothing, or a header without
// end, is cut off; the refusal never holds more than it bounds.
func TestPortsRefusalBounded(t *testing.T) {
	needRootForUsers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ports := NewPorts(nil)
	port := testrig.FreePort(t)
	// Two desktops, so this process (root) is refused.
	for _, uid := range []uint32{64995, 64996} {
		ln, err := ports.listen(ctx, port, uid)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
	}
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// An endless header line: the refusal stops reading at refuseRead and
	// closes the connection.
	chunk := []byte("GET / HTTP/1.1\r\nX-Long: " + strings.Repeat("a", 64<<10))
	written := 0
	c.SetWriteDeadline(time.Now().Add(20 * time.Second))
	for written < 64*refuseRead {
		n, err := c.Write(chunk)
		written += n
		if err != nil {
			break
		}
		chunk = []byte(strings.Repeat("a", 64<<10))
	}
	if written >= 64*refuseRead {
		t.Errorf("the refusal read %d bytes of one header and still reads", written)
	}
}

func needRootForUsers(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root, to open connections as the users of two desktops")
	}
}
