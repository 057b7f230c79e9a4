package stream

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/pion/webrtc/v4"

	"github.com/deskenv/deskenv/internal/testrig"
)

// settle waits until the goroutine count drops to at most want, and reports
// the stacks of the extra ones if it does not.
func settle(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		n := runtime.NumGoroutine()
		if n <= want {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%d goroutines, want at most %d: leaked?\n%s", n, want, stacksOutside(string(buf)))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stacksOutside drops the testing framework's own goroutines from a dump.
func stacksOutside(dump string) string {
	var keep []string
	for _, g := range strings.Split(dump, "\n\n") {
		if strings.Contains(g, "testing.(*T).Run") || strings.Contains(g, "testing.tRunner") && strings.Contains(g, "settle") {
			continue
		}
		keep = append(keep, g)
	}
	return strings.Join(keep, "\n\n")
}

// TestManyViewers joins and leaves 100 viewers, a few at a time, and checks
// that everything they used is freed and the video loop stopped.
func TestManyViewers(t *testing.T) {
	n := 100
	if testing.Short() {
		n = 20
	}
	e := newEnv(t, envOptions{cfg: Config{MaxViewers: 8}})
	p := e.probe(t)
	// One viewer first, so whatever pion and net/http start once is running
	// before the baseline is taken.
	warm := join(t, e, clientOptions{})
	warm.waitOpen(10 * time.Second)
	warm.close()
	waitStopped(t, e)
	time.Sleep(200 * time.Millisecond)
	base := runtime.NumGoroutine()

	const batch = 5
	for i := 0; i < n; i += batch {
		var wg sync.WaitGroup
		cs := make([]*client, batch)
		for j := range cs {
			wg.Add(1)
			go func(j int) {
				defer wg.Done()
				c := join(t, e, clientOptions{})
				c.waitOpen(15 * time.Second)
				cs[j] = c
			}(j)
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		// The first of each batch takes control and moves the pointer,
		// so control and held state come and go with the viewers too.
		cs[0].send(map[string]any{"type": "control", "op": "request"})
		cs[0].waitState(5*time.Second, func(cs0 ControlState) bool { return cs0.Holder != nil && *cs0.Holder == cs[0].hello.ID })
		cs[0].input(map[string]any{"t": "kd", "k": 0xffe1})
		cs[0].input(map[string]any{"t": "mm", "x": i, "y": i})
		p.Fill(i, i, 10, 10, uint32(0x10101*i))
		if st := e.s.Stats(); st.Viewers != batch {
			t.Fatalf("viewers = %d, want %d", st.Viewers, batch)
		}
		// Some leave properly, some just drop the websocket: the server
		// must then close their peer connection itself.
		for j, c := range cs {
			if j%2 == 0 {
				c.close()
				continue
			}
			c.ws.Close()
			<-c.done
			testrig.WaitState(t, 10*time.Second, "viewer "+c.hello.ID+"'s peer connection to close after it dropped its websocket", func() (bool, string) {
				st := c.pc.ConnectionState()
				return st == webrtc.PeerConnectionStateClosed || st == webrtc.PeerConnectionStateFailed, st.String()
			})
			c.pc.Close()
		}
		waitStopped(t, e)
	}
	waitStopped(t, e)
	if h := e.s.Holder(); h != "" {
		t.Errorf("holder %q after everyone left", h)
	}
	if keys, buttons := e.exec.Held(); len(keys)+len(buttons) != 0 {
		t.Errorf("still held after everyone left: %v %v", keys, buttons)
	}
	settle(t, base)
}

// waitStopped waits until no viewer is left and the video loop has stopped.
func waitStopped(t *testing.T, e *env) {
	t.Helper()
	testrig.WaitState(t, 10*time.Second, "no viewer and no encoding after the last viewer left", func() (bool, string) {
		st := e.s.Stats()
		return st.Viewers == 0 && !st.Encoding, fmt.Sprintf("%+v", st)
	})
}

// TestCloseFreesEverything closes a server with viewers connected: they are
// disconnected and every goroutine of the server ends.
func TestCloseFreesEverything(t *testing.T) {
	e := newEnv(t, envOptions{width: 320, height: 240})
	e.s.Close()
	time.Sleep(100 * time.Millisecond)
	base := runtime.NumGoroutine()

	s, err := New(e.d, e.exec, Config{LoopbackOnly: true, UDPPort: freeUDPPort(t)})
	if err != nil {
		t.Fatal(err)
	}
	e.s = s
	mux := http.NewServeMux()
	mux.Handle("/stream/signal", s.SignalHandler(nil))
	hs := httptest.NewServer(mux) // not testrig.Serve: closed before settle counts goroutines
	e.url = hs.URL
	var cs []*client
	for i := 0; i < 3; i++ {
		c := join(t, e, clientOptions{})
		c.waitFrame(10 * time.Second)
		cs = append(cs, c)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, c := range cs {
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			t.Fatal("a viewer's websocket stayed open after Close")
		}
		c.pc.Close()
	}
	if st := s.Stats(); st.Viewers != 0 || st.Encoding {
		t.Errorf("after Close: %+v", st)
	}
	// A closed server refuses newcomers politely.
	ws, _, err := websocket.DefaultDialer.Dial(e.wsURL(""), nil)
	if err == nil {
		var m errorMsg
		if err := ws.ReadJSON(&m); err != nil || m.Type != "error" {
			t.Errorf("a closed server answered %+v, %v", m, err)
		}
		ws.Close()
	}
	if err := s.SetPolicy(PolicyHuman); err == nil {
		t.Errorf("SetPolicy after Close succeeded")
	}
	hs.Close()
	settle(t, base)
}
