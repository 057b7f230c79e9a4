package control

import (
	"testing"

	"github.com/deskenv/deskenv/auth"
)

const (
	agentTok    = "agent-token-0123456789"
	operatorTok = "operator-token-0123456789"
	viewerTok   = "viewer-token-0123456789"
	annotTok    = "annotator-token-0123456789"
)

// testAuth is an Auth with one token per role (the tests of roles and tokens
// themselves are in package auth).
func testAuth(t *testing.T) *auth.Auth {
	t.Helper()
	a, err := auth.New(auth.Config{AgentToken: agentTok, OperatorToken: operatorTok, ViewerToken: viewerTok, AnnotatorToken: annotTok})
	if err != nil {
		t.Fatal(err)
	}
	return a
}
