package stream

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/deskenv/deskenv/hci"
)

func TestHello(t *testing.T) {
	e := newEnv(t, envOptions{width: 1024, height: 768, cfg: Config{VideoWidth: 800, VideoHeight: 600, ICEServers: []string{"stun:stun.example:3478"}}})
	tests := []struct {
		token    string
		role     string
		viewOnly bool
	}{
		{token: "", role: "viewer"},
		{token: "op", role: "operator"},
		{token: "watch", role: "viewer", viewOnly: true},
	}
	for _, tt := range tests {
		t.Run("token "+tt.token, func(t *testing.T) {
			ws, h := dialWS(t, e.wsURL(tt.token))
			defer ws.Close()
			if h.Role != tt.role || h.ViewOnly != tt.viewOnly {
				t.Errorf("role %q view_only %v, want %q %v", h.Role, h.ViewOnly, tt.role, tt.viewOnly)
			}
			if h.Screen != (sizeMsg{1024, 768}) || h.Video != (videoMsg{800, 600, "h264"}) {
				t.Errorf("screen %+v video %+v", h.Screen, h.Video)
			}
			if len(h.ICEServers) != 1 || h.ICEServers[0].URLs[0] != "stun:stun.example:3478" {
				t.Errorf("ice_servers %+v", h.ICEServers)
			}
			if !strings.HasPrefix(h.ID, "v") || h.Control.Policy != PolicyShared {
				t.Errorf("id %q control %+v", h.ID, h.Control)
			}
			found := false
			for _, v := range h.Control.Viewers {
				found = found || v.ID == h.ID
				if (v.Remote != "") != (tt.role == RoleOperator) {
					t.Errorf("%s sees remote address %q of %s: only operators should", tt.role, v.Remote, v.ID)
				}
			}
			if !found {
				t.Errorf("hello's viewer list %+v lacks the viewer itself", h.Control.Viewers)
			}
		})
	}
}

func TestRefused(t *testing.T) {
	e := newEnv(t, envOptions{cfg: Config{MaxViewers: 1}})
	httpURL := e.url + "/stream/signal"
	tests := []struct {
		name   string
		url    string
		status int
		body   string
	}{
		{name: "bad token", url: e.wsURL("bad"), status: http.StatusUnauthorized, body: "the token is not valid"},
		{name: "agent role", url: e.wsURL("agent"), status: http.StatusForbidden, body: `role "agent" may not watch`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, resp, err := websocket.DefaultDialer.Dial(tt.url, nil)
			if err == nil || resp == nil || resp.StatusCode != tt.status {
				t.Fatalf("dial: err %v resp %v, want HTTP %d", err, resp, tt.status)
			}
			var body struct {
				Error string `json:"error"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || !strings.Contains(body.Error, tt.body) {
				t.Errorf("error %q (%v), want a JSON error saying %q", body.Error, err, tt.body)
			}
		})
	}
	t.Run("plain GET", func(t *testing.T) {
		resp, err := http.Get(httpURL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("status %d, want 400", resp.StatusCode)
		}
	})
	t.Run("full", func(t *testing.T) {
		ws, _ := dialWS(t, e.wsURL(""))
		defer ws.Close()
		ws2, _, err := websocket.DefaultDialer.Dial(e.wsURL(""), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ws2.Close()
		var m errorMsg
		if err := ws2.ReadJSON(&m); err != nil || m.Code != CodeFull || !strings.Contains(m.Message, "already has 1 viewers") {
			t.Fatalf("got %+v, %v; want a %q error", m, err, CodeFull)
		}
		_, _, err = ws2.ReadMessage()
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.CloseTryAgainLater {
			t.Errorf("close: %v, want code %d", err, websocket.CloseTryAgainLater)
		}
	})
}

// TestBadSignalling sends malformed messages; each gets a clear error and
// the session stays usable.
func TestBadSignalling(t *testing.T) {
	e := newEnv(t, envOptions{})
	c := join(t, e, clientOptions{noVideo: true})
	defer c.close()
	const dataOnlyOffer = "v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\na=group:BUNDLE 0\r\nm=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\nc=IN IP4 0.0.0.0\r\na=ice-ufrag:abcd\r\na=ice-pwd:abcdefghijklmnopqrstuvwx\r\na=fingerprint:sha-256 00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF:00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF\r\na=setup:actpass\r\na=mid:0\r\na=sctp-port:5000\r\n"
	tests := []struct {
		name string
		kind int
		msg  string
		code string
		text string
	}{
		{name: "not JSON", msg: `{"type":`, code: CodeBadMessage, text: "not valid JSON"},
		{name: "garbage", msg: "\x00\xffhello", code: CodeBadMessage, text: "not valid JSON"},
		{name: "array", msg: `["offer"]`, code: CodeBadMessage, text: "not valid JSON of the expected shape"},
		{name: "binary", kind: websocket.BinaryMessage, msg: "abc", code: CodeBadMessage, text: "binary message of 3 bytes"},
		{name: "no type", msg: `{"sdp":"x"}`, code: CodeBadMessage, text: `no "type"`},
		{name: "unknown type", msg: `{"type":"hack"}`, code: CodeBadMessage, text: `unknown signalling message type "hack"`},
		{name: "wrong field type", msg: `{"type":"offer","sdp":5}`, code: CodeBadMessage, text: "expected shape"},
		{name: "offer without sdp", msg: `{"type":"offer"}`, code: CodeBadSDP, text: `offer has no "sdp"`},
		{name: "broken sdp", msg: `{"type":"offer","sdp":"this is not SDP"}`, code: CodeBadSDP, text: "cannot be used"},
		{name: "sdp without video", msg: `{"type":"offer","sdp":"` + strings.ReplaceAll(dataOnlyOffer, "\r\n", `\r\n`) + `"}`, code: CodeBadSDP, text: "no video section"},
		{name: "candidate first", msg: `{"type":"candidate","candidate":{"candidate":"candidate:1 1 udp 1 127.0.0.1 9 typ host","sdpMid":"0"}}`, code: CodeBadICE, text: "before a successful offer"},
		{name: "control without op", msg: `{"type":"control"}`, code: CodeBadMessage, text: `no "op"`},
		{name: "control unknown op", msg: `{"type":"control","op":"steal"}`, code: CodeBadMessage, text: `unknown control op "steal"`},
		{name: "viewer grants", msg: `{"type":"control","op":"grant","viewer":"v1"}`, code: CodeForbidden, text: "for operators"},
		{name: "viewer sets policy", msg: `{"type":"control","op":"policy","policy":"agent"}`, code: CodeForbidden, text: "for operators"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kind := tt.kind
			if kind == 0 {
				kind = websocket.TextMessage
			}
			c.sendRaw(kind, []byte(tt.msg))
			m := c.waitMsg("error", 5*time.Second)
			if m["code"] != tt.code || !strings.Contains(m["message"].(string), tt.text) {
				t.Fatalf("error %v, want code %q and message containing %q", m, tt.code, tt.text)
			}
		})
	}
	c.send(map[string]any{"type": "ping", "t": 12.5})
	if m := c.waitMsg("pong", 5*time.Second); m["t"] != 12.5 {
		t.Errorf("pong %v, want t 12.5", m)
	}
	if n := e.s.Stats().Viewers; n != 1 {
		t.Errorf("viewers = %d after bad messages, want 1", n)
	}

	t.Run("huge message closes", func(t *testing.T) {
		c2 := join(t, e, clientOptions{noVideo: true})
		c2.sendRaw(websocket.TextMessage, []byte(`{"type":"offer","sdp":"`+strings.Repeat("a", maxSignalBytes+10)+`"}`))
		select {
		case <-c2.done:
		case <-time.After(10 * time.Second):
			t.Fatal("the server kept a connection that sent an oversized message")
		}
		c2.close()
	})
}

func TestControl(t *testing.T) {
	e := newEnv(t, envOptions{})
	a := join(t, e, clientOptions{noVideo: true})
	defer a.close()
	b := join(t, e, clientOptions{noVideo: true})
	defer b.close()
	w := join(t, e, clientOptions{noVideo: true, token: "watch"})
	defer w.close()
	op := join(t, e, clientOptions{noVideo: true, token: "op"})
	defer op.close()
	idA, idB, idW, idOp := a.hello.ID, b.hello.ID, w.hello.ID, op.hello.ID
	holderIs := func(id string) func(ControlState) bool {
		return func(cs ControlState) bool {
			if id == "" {
				return cs.Holder == nil
			}
			return cs.Holder != nil && *cs.Holder == id
		}
	}
	steps := []struct {
		name   string
		who    *client
		msg    map[string]any
		code   string // error expected by who
		holder string // holder afterwards
	}{
		{name: "a requests", who: a, msg: map[string]any{"op": "request"}, holder: idA},
		{name: "b cannot take it", who: b, msg: map[string]any{"op": "request"}, code: CodeConflict, holder: idA},
		{name: "view-only cannot", who: w, msg: map[string]any{"op": "request"}, code: CodeForbidden, holder: idA},
		{name: "b release is a no-op", who: b, msg: map[string]any{"op": "release"}, holder: idA},
		{name: "operator takes it", who: op, msg: map[string]any{"op": "request"}, holder: idOp},
		{name: "operator grants b", who: op, msg: map[string]any{"op": "grant", "viewer": idB}, holder: idB},
		{name: "operator cannot grant view-only", who: op, msg: map[string]any{"op": "grant", "viewer": idW}, code: CodeForbidden, holder: idB},
		{name: "operator grants nobody", who: op, msg: map[string]any{"op": "grant", "viewer": "v999"}, code: CodeNotFound, holder: idB},
		{name: "grant without viewer", who: op, msg: map[string]any{"op": "grant"}, code: CodeBadMessage, holder: idB},
		{name: "bad policy", who: op, msg: map[string]any{"op": "policy", "policy": "robots"}, code: CodeBadMessage, holder: idB},
		{name: "b releases", who: b, msg: map[string]any{"op": "release"}, holder: ""},
		{name: "a again", who: a, msg: map[string]any{"op": "request"}, holder: idA},
		{name: "operator revokes", who: op, msg: map[string]any{"op": "revoke"}, holder: ""},
		{name: "a again 2", who: a, msg: map[string]any{"op": "request"}, holder: idA},
		{name: "policy agent clears holder", who: op, msg: map[string]any{"op": "policy", "policy": "agent"}, holder: ""},
		{name: "no requests under agent", who: a, msg: map[string]any{"op": "request"}, code: CodeForbidden, holder: ""},
		{name: "policy human", who: op, msg: map[string]any{"op": "policy", "policy": "human"}, holder: ""},
		{name: "a under human", who: a, msg: map[string]any{"op": "request"}, holder: idA},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			msg := map[string]any{"type": "control"}
			for k, v := range st.msg {
				msg[k] = v
			}
			st.who.send(msg)
			if st.code != "" {
				m := st.who.waitMsg("error", 5*time.Second)
				if m["code"] != st.code {
					t.Fatalf("error %v, want code %q", m, st.code)
				}
			}
			// Everyone sees the state; a round trip makes sure it is applied.
			st.who.send(map[string]any{"type": "ping"})
			st.who.waitMsg("pong", 5*time.Second)
			if h := e.s.Holder(); h != st.holder {
				t.Fatalf("holder %q, want %q", h, st.holder)
			}
		})
	}
	// Every viewer is told the state, with itself as "you".
	w.waitState(5*time.Second, holderIs(idA))
	if got := e.s.Policy(); got != PolicyHuman {
		t.Fatalf("policy %q, want human", got)
	}

	// The agent is refused under policy human, with the reason, whether it
	// calls a tool or runs a script.
	ctx := context.Background()
	for _, src := range []hci.Source{hci.SourceAgent, hci.SourceScript} {
		err := e.exec.MoveTo(ctx, 5, 5, src)
		if err == nil || !strings.Contains(err.Error(), "a person has control") {
			t.Errorf("%s motion under policy human: %v, want a person-has-control error", src, err)
		}
	}
	// With nobody in control the agent acts, under policy human too.
	holder := e.s.Revoke()
	if err := e.exec.MoveTo(ctx, 5, 5, hci.SourceAgent); err != nil {
		t.Errorf("agent motion under policy human with nobody in control: %v", err)
	}
	if err := e.s.Grant(holder); err != nil {
		t.Fatal(err)
	}
	if err := e.exec.MoveTo(ctx, 5, 5, hci.SourceScript); err == nil {
		t.Errorf("script motion under policy human after control was granted back was allowed")
	}
	if err := e.s.SetPolicy(PolicyShared); err != nil {
		t.Fatal(err)
	}
	if err := e.exec.MoveTo(ctx, 5, 5, hci.SourceAgent); err != nil {
		t.Errorf("agent motion under policy shared: %v", err)
	}
	if err := e.s.SetPolicy(PolicyAgent); err != nil {
		t.Fatal(err)
	}
	if err := e.exec.MoveTo(ctx, 5, 5, hci.SourceHuman); err == nil {
		t.Errorf("human motion under policy agent was allowed")
	}
	if err := e.s.SetPolicy("nonsense"); err == nil {
		t.Errorf("SetPolicy accepted nonsense")
	}

	// The Go API.
	if err := e.s.SetPolicy(PolicyShared); err != nil {
		t.Fatal(err)
	}
	if err := e.s.Grant(idB); err != nil {
		t.Fatal(err)
	}
	a.waitState(5*time.Second, holderIs(idB))
	if err := e.s.Grant(idW); err == nil || !strings.Contains(err.Error(), "view-only") {
		t.Errorf("Grant(view-only) = %v", err)
	}
	if err := e.s.Grant("nobody"); err == nil || !strings.Contains(err.Error(), "no viewer") {
		t.Errorf("Grant(nobody) = %v", err)
	}
	if was := e.s.Revoke(); was != idB {
		t.Errorf("Revoke() = %q, want %q", was, idB)
	}
	vs := e.s.Viewers()
	if len(vs) != 4 || vs[0].ID != idA || vs[2].ID != idW || !vs[2].ViewOnly || vs[3].Role != RoleOperator {
		t.Errorf("Viewers() = %+v", vs)
	}

	// The holder leaving frees control.
	if err := e.s.Grant(idA); err != nil {
		t.Fatal(err)
	}
	a.close()
	b.waitState(5*time.Second, func(cs ControlState) bool { return cs.Holder == nil && len(cs.Viewers) == 3 })
}

// TestSignalRefusalsAreJSON: what the signalling endpoint refuses before a
// websocket exists is the appliance's one JSON error shape, not plain text.
func TestSignalRefusalsAreJSON(t *testing.T) {
	deny := func(r *http.Request) (string, bool, error) {
		switch r.URL.Query().Get("as") {
		case "nobody":
			return "", false, errors.New("no token")
		case "agent":
			return "agent", false, nil
		}
		return RoleViewer, true, nil
	}
	e := newEnv(t, envOptions{auth: deny})
	for _, tc := range []struct {
		query string
		code  int
		want  string
	}{
		{"as=nobody", http.StatusUnauthorized, "no token"},
		{"as=agent", http.StatusForbidden, "may not watch"},
		{"as=viewer", http.StatusBadRequest, "signalling websocket"},
	} {
		resp, err := http.Get(e.url + "/stream/signal?" + tc.query)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Error string `json:"error"`
		}
		decErr := json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || decErr != nil || !strings.Contains(body.Error, tc.want) ||
			resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s: %d %q (%v, %s), want %d with a JSON error saying %q",
				tc.query, resp.StatusCode, body.Error, decErr, resp.Header.Get("Content-Type"), tc.code, tc.want)
		}
	}
}
