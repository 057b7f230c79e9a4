package task

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/deskenv/deskenv/internal/testrig"
)

// TestServe plays a visitor against the serve step: files of the folder as
// the desktop user reads them, nothing outside it (.., a link out, a file
// only deskenv may read), GET/HEAD/POST only, and a form's POST stored for
// json_field.
func TestServe(t *testing.T) {
	_, env := browserDesk(t)
	ctx := testrig.Context(t, time.Minute)
	home := env.Home()
	secret := filepath.Join(filepath.Dir(home), "secret.txt")
	if err := os.WriteFile(secret, []byte("deskenv's own"), 0o644); err != nil {
		t.Fatal(err)
	}
	port := testrig.FreePort(t)
	tk, err := Parse([]byte(fmt.Sprintf(`{"id": "s", "instruction": "x", "setup": [
		{"type": "write_file", "path": "~/site/index.html", "content": "<!doctype html><title>Home</title>"},
		{"type": "write_file", "path": "~/site/data/a.csv", "content": "a,b\n"},
		{"type": "write_file", "path": "~/site/private.txt", "content": "mine", "mode": "0600"},
		{"type": "write_file", "path": "~/outside.txt", "content": "outside the site"},
		{"type": "command", "command": "ln -s ../outside.txt ~/site/out.txt && ln -s %s ~/site/secret.txt && ln -s data/a.csv ~/site/in.csv"},
		{"type": "serve", "dir": "~/site", "port": %d}
	], "evaluator": {"type": "json_field", "path": "~/site/.posted/1.json", "pointer": "/name", "equals": "Ada"}}`, secret, port)), "s.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := tk.RunSetup(ctx, env); err != nil {
		t.Fatal(err)
	}
	os.Chown(secret, 0, 0)
	os.Chmod(filepath.Dir(home), 0o711) // nobody may pass, not list
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	for _, tc := range []struct {
		method, path string
		status       int
		body, ctype  string
	}{
		{"GET", "/", 200, "<title>Home</title>", "text/html"},
		{"GET", "/index.html", 200, "<title>Home</title>", "text/html"},
		{"HEAD", "/index.html", 200, "", "text/html"},
		{"GET", "/data/a.csv", 200, "a,b", "text/csv"},
		{"GET", "/in.csv", 200, "a,b", "text/csv"},
		{"GET", "/private.txt", 200, "mine", "text/plain"}, // the desktop user's own file
		{"GET", "/../outside.txt", 404, "", ""},            // cleaned to /outside.txt, not in the site
		{"GET", "/%2e%2e/outside.txt", 404, "", ""},
		{"GET", "/out.txt", 403, "outside", ""},
		{"GET", "/secret.txt", 403, "", ""},
		{"GET", "/nope.html", 404, "", ""},
		{"PUT", "/index.html", 405, "", ""},
		{"DELETE", "/index.html", 405, "", ""},
	} {
		req, _ := http.NewRequestWithContext(ctx, tc.method, base+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(b), tc.body) || !strings.HasPrefix(resp.Header.Get("Content-Type"), tc.ctype) ||
			strings.Contains(string(b), "deskenv's own") {
			t.Errorf("%s %s: %d %q (%s), want %d with %q (%s)", tc.method, tc.path, resp.StatusCode, b, resp.Header.Get("Content-Type"), tc.status, tc.body, tc.ctype)
		}
	}

	// Nothing posted yet: the evaluator fails.
	if out, err := tk.Evaluate(ctx, env); err != nil || out.Success {
		t.Fatalf("before a POST: %+v, %v", out, err)
	}
	resp, err := http.PostForm(base+"/order", url.Values{"name": {"Ada"}, "tag": {"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("POST: %s", resp.Status)
	}
	out, err := tk.Evaluate(ctx, env)
	if err != nil || !out.Success {
		t.Fatalf("after the POST: %+v, %v", out, err)
	}
	var st = struct{ uid uint32 }{}
	if fi, err := os.Stat(filepath.Join(home, "site/.posted/1.json")); err == nil {
		st.uid = fileUID(fi)
	}
	if st.uid != nobodyID {
		t.Errorf("the posted file belongs to uid %d, not the desktop user", st.uid)
	}
	resp, err = http.Post(base+"/big", "text/plain", strings.NewReader(strings.Repeat("x", maxPostBody+1)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("an oversized POST: %s", resp.Status)
	}

	// Another desktop's agent (pool mode: a user of its own) reaches the
	// port over loopback too: it reads nothing and posts nothing. The
	// desktop's own user is answered.
	for _, c := range []struct {
		name string
		uid  uint32
		args []string
		want string
	}{
		{"the desktop's user reads", nobodyID, []string{base + "/index.html"}, "200 <!doctype html><title>Home</title>"},
		{"another user reads", otherDesktopUID, []string{base + "/index.html"}, "403 this task's server answers its own desktop's programs and deskenv only: a connection of user 64997 is refused"},
		{"another user posts", otherDesktopUID, []string{"-d", "name=Eve", base + "/order"}, "403 this task's server"},
	} {
		if got := testrig.CurlAs(ctx, t, c.uid, c.args...); !strings.HasPrefix(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(home, "site/.posted/2.json")); !os.IsNotExist(err) {
		t.Errorf("another user's POST was stored (%v)", err)
	}

	env.CloseLaunched(ctx)
	if _, err := http.Get(base + "/"); err == nil {
		t.Error("the server still answers after CloseLaunched")
	}
}

// otherDesktopUID stands for another pool desktop's session user: a user
// of its own, not nobody (the desktop's here).
const otherDesktopUID = 64997

func fileUID(fi os.FileInfo) uint32 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Uid
	}
	return 0
}
