package stream

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pion/turn/v5"
)

// turnServer is a TURN server on loopback that checks TURN REST credentials
// against secret, as coturn does with use-auth-secret, and remembers the
// user names it let in.
type turnServer struct {
	addr string
	mu   sync.Mutex
	seen []string
}

func startTURN(t *testing.T, secret string) *turnServer {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &turnServer{addr: pc.LocalAddr().String()}
	check := turn.LongTermTURNRESTAuthHandler(secret, nil)
	srv, err := turn.NewServer(turn.ServerConfig{
		Realm: "deskenv.test",
		AuthHandler: func(ra *turn.RequestAttributes) (string, []byte, bool) {
			user, key, ok := check(ra)
			if ok {
				ts.mu.Lock()
				ts.seen = append(ts.seen, ra.Username)
				ts.mu.Unlock()
			}
			return user, key, ok
		},
		PacketConnConfigs: []turn.PacketConnConfig{{PacketConn: pc,
			RelayAddressGenerator: &turn.RelayAddressGeneratorStatic{RelayAddress: net.ParseIP("127.0.0.1"), Address: "127.0.0.1"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return ts
}

func (ts *turnServer) users() []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]string(nil), ts.seen...)
}

// A viewer that only TURN gets through (relay candidates only) plays the
// video through a TURN server that knows nothing but the shared secret: the
// credentials in its hello were minted for it, expire after TURNTTL, and are
// the draft's HMAC of the user name; the page never sees a static password.
func TestTURNRESTCredentials(t *testing.T) {
	const secret = "correct horse battery staple"
	ts := startTURN(t, secret)
	e := newEnv(t, envOptions{width: 320, height: 200, cfg: Config{
		ICEServers: []string{"stun:127.0.0.1:9", "turn:" + ts.addr + "?transport=udp"}, TURNSecret: secret, TURNTTL: time.Hour}})
	before := time.Now()
	c := join(t, e, clientOptions{token: "op", relayOnly: true})
	defer c.close()

	if len(c.hello.ICEServers) != 2 {
		t.Fatalf("hello ICE servers %+v, want the STUN and the TURN server", c.hello.ICEServers)
	}
	if stun := c.hello.ICEServers[0]; stun.Username != "" || stun.Credential != "" {
		t.Errorf("the STUN server got credentials: %+v", stun)
	}
	is := c.hello.ICEServers[1]
	exp, who, ok := strings.Cut(is.Username, ":")
	if !ok || who != "deskenv-"+c.hello.ID {
		t.Fatalf("TURN user name %q, want <expiry>:deskenv-%s", is.Username, c.hello.ID)
	}
	at, err := strconv.ParseInt(exp, 10, 64)
	if err != nil {
		t.Fatalf("TURN user name %q: expiry: %v", is.Username, err)
	}
	if lo, hi := before.Add(time.Hour).Unix()-1, time.Now().Add(time.Hour).Unix()+1; at < lo || at > hi {
		t.Errorf("credentials expire at %d, want within an hour of now (%d..%d)", at, lo, hi)
	}
	mac := hmac.New(sha1.New, []byte(secret))
	mac.Write([]byte(is.Username))
	if want := base64.StdEncoding.EncodeToString(mac.Sum(nil)); is.Credential != want {
		t.Errorf("credential %q, want base64(HMAC-SHA1(secret, user name)) %q", is.Credential, want)
	}

	paintMoving(e.probe(t), 1)
	c.waitFrame(20 * time.Second)
	relayed := false
	for _, u := range ts.users() {
		relayed = relayed || u == is.Username
	}
	if !relayed {
		t.Errorf("the TURN server let in %q, want the viewer's minted user %q", ts.users(), is.Username)
	}

	// A second viewer gets credentials of its own.
	c2 := join(t, e, clientOptions{token: "watch", noVideo: true})
	defer c2.close()
	if u := c2.hello.ICEServers[1].Username; u == is.Username || !strings.HasSuffix(u, ":deskenv-"+c2.hello.ID) {
		t.Errorf("second viewer's TURN user %q, want its own (deskenv-%s)", u, c2.hello.ID)
	}
}
