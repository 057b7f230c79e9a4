package web

import (
	"encoding/json"
	"testing"

	"github.com/deskenv/deskenv/auth"
)

// TestWhoami: the page learns its link's role from the Authorization header
// it sends; no token or an unknown one is "" (never a refusal: the page must
// not log a 401), and a token in the URL counts for nothing here.
func TestWhoami(t *testing.T) {
	const ann, view = "annotator-0123456789abcdef", "viewer-0123456789abcdef"
	a, err := auth.New(auth.Config{AnnotatorToken: ann, ViewerToken: view})
	if err != nil {
		t.Fatal(err)
	}
	d := auth.NewDoor(a, auth.Limits{})
	Register(d)
	cases := []struct {
		name, path, header, want string
	}{
		{"annotator", "/whoami", "Bearer " + ann, "annotator"},
		{"viewer", "/whoami", "Bearer " + view, "viewer"},
		{"none", "/whoami", "", ""},
		{"unknown", "/whoami", "Bearer not-a-token-0123456789", ""},
		{"query token is not read", "/whoami?token=" + ann, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hdr := map[string]string{}
			if c.header != "" {
				hdr["Authorization"] = c.header
			}
			res := get(t, d, "GET", c.path, hdr)
			var body struct{ Role, Who *string }
			if err := json.NewDecoder(res.Body).Decode(&body); err != nil || res.StatusCode != 200 || body.Role == nil || *body.Role != c.want || body.Who == nil {
				t.Fatalf("GET %s: %d %+v %v, want 200 role %q", c.path, res.StatusCode, body, err, c.want)
			}
			if c.want == "annotator" && *body.Who != "annotator:"+auth.TokenID(ann) {
				t.Errorf("who = %q, want annotator:%s", *body.Who, auth.TokenID(ann))
			}
		})
	}
	if res := get(t, d, "GET", "/", nil); res.StatusCode != 200 {
		t.Errorf("the page beside whoami: %d", res.StatusCode)
	}
}
