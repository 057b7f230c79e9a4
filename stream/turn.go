package stream

import (
	"fmt"

	"github.com/pion/turn/v5"
	"github.com/pion/webrtc/v4"
)

// viewerICE is the ICE servers one viewer is given in its hello and its peer
// connection is made with: the configured ones, with credentials minted for
// this viewer on every TURN server that takes them (Config.TURNSecret). The
// user name carries the viewer's id so a TURN server's log names who
// relayed; pion/turn's generator is the one its own server checks against,
// and it is the scheme coturn's use-auth-secret checks too.
func (s *Server) viewerICE(viewerID string) ([]webrtc.ICEServer, []iceServerMsg, error) {
	pcs := make([]webrtc.ICEServer, 0, len(s.ice))
	msgs := make([]iceServerMsg, 0, len(s.ice))
	for _, is := range s.ice {
		user, cred := is.Username, is.Credential
		if is.Minted {
			var err error
			user, cred, err = turn.GenerateLongTermTURNRESTCredentials(s.cfg.TURNSecret, "deskenv-"+viewerID, s.cfg.TURNTTL)
			if err != nil {
				return nil, nil, fmt.Errorf("stream: TURN credentials for %s: %w", is.URL, err)
			}
		}
		pcs = append(pcs, webrtc.ICEServer{URLs: []string{is.URL}, Username: user, Credential: cred})
		msgs = append(msgs, iceServerMsg{URLs: []string{is.URL}, Username: user, Credential: cred})
	}
	return pcs, msgs, nil
}
