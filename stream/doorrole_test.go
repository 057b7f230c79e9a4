package stream

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/deskenv/deskenv/auth"
)

// TestDoorRole: who the stream takes each token's holder for. An annotator
// joins as a viewer who may act (request and release control) but has none
// of the stream's operator powers (grant, revoke, policy, taking control
// from someone).
func TestDoorRole(t *testing.T) {
	toks := map[auth.Role]string{
		auth.RoleOperator: "operator-0123456789abcdef", auth.RoleAnnotator: "annotator-0123456789abcdef",
		auth.RoleViewer: "viewer-0123456789abcdef",
	}
	a, err := auth.New(auth.Config{OperatorToken: toks[auth.RoleOperator], AnnotatorToken: toks[auth.RoleAnnotator], ViewerToken: toks[auth.RoleViewer]})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		role     auth.Role
		want     string
		viewOnly bool
	}{
		{auth.RoleOperator, RoleOperator, false},
		{auth.RoleAnnotator, RoleViewer, false},
		{auth.RoleViewer, RoleViewer, true},
	}
	for _, c := range cases {
		t.Run(string(c.role), func(t *testing.T) {
			var role string
			var viewOnly bool
			var rerr error
			d := auth.NewDoor(a, auth.Limits{})
			d.Handle("/s", auth.Policy{Roles: []auth.Role{auth.RoleViewer}}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				role, viewOnly, rerr = doorRole(r)
			}))
			req := httptest.NewRequest("GET", "/s", nil)
			req.Header.Set("Authorization", "Bearer "+toks[c.role])
			d.ServeHTTP(httptest.NewRecorder(), req)
			if rerr != nil || role != c.want || viewOnly != c.viewOnly {
				t.Errorf("doorRole = %q, view only %v, %v; want %q, %v", role, viewOnly, rerr, c.want, c.viewOnly)
			}
		})
	}
}
