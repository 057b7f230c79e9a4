package record

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/deskenv/deskenv/auth"
	"github.com/deskenv/deskenv/hci"
)

// TestEpisodeView: an annotator reads its own episode's steps, their
// observations and its video segments through the review routes, byte for
// byte as on disk; another annotator is refused them (403), an operator
// reaches them; and every way
// an attacker could name another file (traversal, an absolute path, a NUL,
// episode.json itself, a symlink or a FIFO planted in shots/, a symlinked
// shots directory) gets 404 without the file's content.
func TestEpisodeView(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const (
		annA = "annotator-a-0123456789abcdef"
		annB = "annotator-b-0123456789abcdef"
		oper = "operator-0123456789abcdef"
	)
	a, err := auth.New(auth.Config{OperatorToken: oper, Tokens: []auth.Token{
		{Role: auth.RoleAnnotator, Value: annA}, {Role: auth.RoleAnnotator, Value: annB}}})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, 320, 240, "")
	dir := t.TempDir()
	rec := r.recorder(t, dir, Options{FPS: 10})
	d := auth.NewDoor(a, auth.Limits{})
	rec.Register(d)
	srv := httptest.NewServer(d)
	defer srv.Close()
	call := func(tok, method, path, body string) (int, http.Header, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		// Redirects are answers too: a cleaned path must not lead to a file.
		resp, err := (&http.Transport{}).RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, b
	}

	// A records two steps, each on a screen of its own.
	if code, _, b := call(annA, "POST", "/api/recording/start", `{"episode_id":"a1","task_id":"t","source":"agent"}`); code != 201 {
		t.Fatalf("start: %d %s", code, b)
	}
	for i, s := range []string{`{"action":"left_click","coordinate":[100,50]}`, `{"action":"type","text":"hi <there>"}`} {
		if err := r.probe.Fill(0, 0, 320, 240, uint32(0x402000+i*0x2010)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond) // the screen settles before the action, so before differs from after
		if _, err := r.exec.Do(ctx, mustAction(t, s), hci.SourceAgent); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	if code, _, b := call(annA, "POST", "/api/recording/stop", `{}`); code != 200 {
		t.Fatalf("stop: %d %s", code, b)
	}
	// The operator's episode, to be reached through a symlinked shots/.
	if code, _, b := call(oper, "POST", "/api/recording/start", `{"episode_id":"o1"}`); code != 201 {
		t.Fatalf("operator's start: %d %s", code, b)
	}
	if code, _, b := call(oper, "POST", "/api/recording/stop", `{}`); code != 200 {
		t.Fatalf("operator's stop: %d %s", code, b)
	}

	code, _, body := call(annA, "GET", "/api/recording/episodes/a1", "")
	var det EpisodeDetail
	if code != 200 || json.Unmarshal(body, &det) != nil {
		t.Fatalf("A reads its episode: %d %s", code, body)
	}
	if det.Episode.ID != "a1" || det.Episode.RecordedBy != "annotator:"+auth.TokenID(annA) || det.Review.Status != ReviewUnreviewed || len(det.Steps) != 2 {
		t.Fatalf("A's episode reads as %s", body)
	}
	if got := det.Steps[1].Action.String(); got != `{"action":"type","text":"hi <there>"}` {
		t.Errorf("step 1 is %s: the typed text must come back as typed", got)
	}
	if bytes.Contains(body, []byte(dir)) {
		t.Errorf("the episode's answer names the appliance's directory %s: %s", dir, body)
	}
	shots := map[string]bool{}
	for _, st := range det.Steps {
		for _, f := range []string{st.Before, st.After} {
			if !strings.HasPrefix(f, ShotsDir+"/") {
				t.Fatalf("step %d has observations %q and %q, want shots/NNNNNN.png", st.Step, st.Before, st.After)
			}
			shots[f] = true
		}
	}
	for f := range shots {
		want, err := os.ReadFile(filepath.Join(dir, "a1", f))
		if err != nil {
			t.Fatal(err)
		}
		code, h, got := call(annA, "GET", "/api/recording/episodes/a1/"+f, "")
		if code != 200 || h.Get("Content-Type") != "image/png" || !bytes.Equal(got, want) {
			t.Errorf("A's GET %s: %d %s, %d bytes; want 200 image/png with the file's %d bytes", f, code, h.Get("Content-Type"), len(got), len(want))
		}
		if code, _, _ := call(oper, "GET", "/api/recording/episodes/a1/"+f, ""); code != 200 {
			t.Errorf("the operator's GET %s: %d, want 200", f, code)
		}
		if code, _, b := call(annB, "GET", "/api/recording/episodes/a1/"+f, ""); code != 403 || bytes.Contains(b, []byte("PNG")) {
			t.Errorf("B's GET of A's %s: %d %.80q, want 403", f, code, b)
		}
	}
	// The video: the index names segments, each served as written.
	if len(det.Frames) == 0 || !det.Frames[0].Key {
		t.Fatalf("A's episode has frames %+v, want an index starting with a keyframe", det.Frames)
	}
	seg := fmt.Sprintf("%s/%06d.h264", VideoDir, det.Frames[0].Segment)
	want, err := os.ReadFile(filepath.Join(dir, "a1", seg))
	if err != nil {
		t.Fatal(err)
	}
	if code, _, got := call(annA, "GET", "/api/recording/episodes/a1/"+seg, ""); code != 200 || !bytes.Equal(got, want) {
		t.Errorf("A's GET %s: %d, %d bytes; want 200 with the segment's %d bytes", seg, code, len(got), len(want))
	}
	if code, _, _ := call(annB, "GET", "/api/recording/episodes/a1/"+seg, ""); code != 403 {
		t.Errorf("B's GET of A's %s: %d, want 403", seg, code)
	}
	if code, _, b := call(annB, "GET", "/api/recording/episodes/a1", ""); code != 403 || bytes.Contains(b, []byte("hi <there>")) {
		t.Errorf("B reads A's episode: %d %s, want 403 and nothing of it", code, b)
	}
	if code, _, b := call(annA, "GET", "/api/recording/episodes/o1", ""); code != 403 {
		t.Errorf("A reads the operator's episode: %d %s, want 403", code, b)
	}
	if code, _, _ := call(oper, "GET", "/api/recording/episodes/a1", ""); code != 200 {
		t.Errorf("the operator reads A's episode: %d, want 200", code)
	}

	// What an attacker plants in A's shots/ (an annotator cannot, but a
	// bug elsewhere or another local user might): none of it is served.
	sh := filepath.Join(dir, "a1", ShotsDir)
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("SECRET"), 0o644); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(secret, filepath.Join(sh, "999999.png")))
	must(os.Symlink(filepath.Join(dir, "a1", MetaFile), filepath.Join(sh, "999998.png")))
	must(syscall.Mkfifo(filepath.Join(sh, "999997.png"), 0o644))
	must(os.Symlink(secret, filepath.Join(dir, "a1", VideoDir, "999999.h264")))
	must(os.Mkdir(filepath.Join(sh, "999996.png"), 0o755))
	// The operator's episode gets a shots/ that is a symlink to a directory
	// holding a file with a good name.
	elsewhere := t.TempDir()
	must(os.WriteFile(filepath.Join(elsewhere, "000000.png"), []byte("SECRET"), 0o644))
	must(os.RemoveAll(filepath.Join(dir, "o1", ShotsDir)))
	must(os.Symlink(elsewhere, filepath.Join(dir, "o1", ShotsDir)))

	attacks := []struct{ name, tok, path string }{
		{"traversal, escaped", annA, "/api/recording/episodes/a1/shots/..%2Fepisode.json"},
		{"traversal out of the episodes", annA, "/api/recording/episodes/a1/shots/..%2F..%2F..%2F..%2Fetc%2Fpasswd"},
		{"traversal, plain", annA, "/api/recording/episodes/a1/shots/../episode.json"},
		{"traversal, dots escaped", annA, "/api/recording/episodes/a1/shots/%2E%2E/episode.json"},
		{"absolute", annA, "/api/recording/episodes/a1/shots/%2Fetc%2Fpasswd"},
		{"episode.json by name", annA, "/api/recording/episodes/a1/shots/episode.json"},
		{"another file kind", annA, "/api/recording/episodes/a1/shots/000000.h264"},
		{"a NUL after the name", annA, "/api/recording/episodes/a1/shots/000000.png%00"},
		{"a name too short", annA, "/api/recording/episodes/a1/shots/0.png"},
		{"the shots directory", annA, "/api/recording/episodes/a1/shots/"},
		{"a symlink out of the episodes", annA, "/api/recording/episodes/a1/shots/999999.png"},
		{"a symlink to episode.json", annA, "/api/recording/episodes/a1/shots/999998.png"},
		{"a FIFO", annA, "/api/recording/episodes/a1/shots/999997.png"},
		{"a directory", annA, "/api/recording/episodes/a1/shots/999996.png"},
		{"a symlinked shots directory", oper, "/api/recording/episodes/o1/shots/000000.png"},
		{"an episode that is not there", oper, "/api/recording/episodes/nope/shots/000000.png"},
		{"an episode id that is a path", oper, "/api/recording/episodes/..%2Fa1/shots/000000.png"},
		{"no observation of that number", annA, "/api/recording/episodes/a1/shots/123456.png"},
		{"an observation in video/", annA, "/api/recording/episodes/a1/video/000000.png"},
		{"a segment in shots/", annA, "/api/recording/episodes/a1/shots/000000.h264"},
		{"traversal from video/", annA, "/api/recording/episodes/a1/video/..%2Fepisode.json"},
		{"frames.jsonl from video/", annA, "/api/recording/episodes/a1/video/..%2Fframes.jsonl"},
		{"a symlink in video/", annA, "/api/recording/episodes/a1/video/999999.h264"},
		{"another directory", annA, "/api/recording/episodes/a1/input/000000.png"},
	}
	for _, at := range attacks {
		code, h, b := call(at.tok, "GET", at.path, "")
		if code/100 == 3 {
			// The mux cleans a path with .. by redirecting: follow it.
			code, _, b = call(at.tok, "GET", h.Get("Location"), "")
		}
		if (code != 404 && code != 400) || bytes.Contains(b, []byte("SECRET")) || bytes.Contains(b, []byte(`"schema_version"`)) || bytes.Contains(b, []byte("root:")) {
			t.Errorf("%s: GET %s: %d %.120q; want 404 (or 400) and nothing of any file", at.name, at.path, code, b)
		}
	}
	// And the server is still up and serving.
	if code, _, _ := call(annA, "GET", "/api/recording/episodes/a1/"+det.Steps[0].Before, ""); code != 200 {
		t.Errorf("after the attacks A's own observation: %d, want 200", code)
	}
}
