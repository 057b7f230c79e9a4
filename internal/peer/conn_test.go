package peer

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

// TestRequestOwner: a request through a server with ConnContext names the
// user that opened its connection (this process's, here), on every request
// of a kept-alive connection; one handed to the handler directly has none.
func TestRequestOwner(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		uid, served, err := RequestOwner(r)
		fmt.Fprintf(w, "%d %v %v", uid, served, err)
	})
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnContext = ConnContext
	srv.Start()
	defer srv.Close()
	want := fmt.Sprintf("%d true <nil>", os.Geteuid())
	for i := range 3 {
		resp, err := srv.Client().Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != want {
			t.Errorf("request %d: the handler saw %q, want %q", i, b, want)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if got := rec.Body.String(); !strings.HasPrefix(got, "0 false") {
		t.Errorf("a request handed to the handler directly: %q, want not served", got)
	}
}
