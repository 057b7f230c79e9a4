package control

import "testing"

const (
	agentTok    = "agent-token-0123456789"
	operatorTok = "operator-token-0123456789"
	viewerTok   = "viewer-token-0123456789"
)

// testAuth is an Auth with one token per role (the tests of roles and tokens
// themselves are in package auth).
func testAuth(t *testing.T) *Auth {
	t.Helper()
	a, err := NewAuth(AuthConfig{AgentToken: agentTok, OperatorToken: operatorTok, ViewerToken: viewerTok})
	if err != nil {
		t.Fatal(err)
	}
	return a
}
