package record_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/deskenv/deskenv/internal/testrig"
)

// TestRecordingMarker runs the appliance with an operator and a viewer
// token and opens the page twice in headless Chromium: the operator records
// with the page's buttons, and both pages, the viewer's included, show the
// REC marker while it records, "REC paused" while paused, nothing after.
func TestRecordingMarker(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin := testrig.BuildDeskenv(ctx, t)
	const op, viewer = "op-secret-0123456789", "viewer-secret-0123456789"
	episodes := t.TempDir()
	cmd := exec.CommandContext(ctx, bin, "--addr", "127.0.0.1:0", "--operator-token", op, "--viewer-token", viewer,
		"--home", testrig.SessionHome(t), "--episodes", episodes, "--apps", "")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	ready := regexp.MustCompile(`deskenv is ready" url=(http://[^/ ]+)/`)
	urls := make(chan string, 1)
	var logs strings.Builder // read only after exited is closed
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := ready.FindStringSubmatch(sc.Text()); m != nil {
				urls <- m[1]
			}
			logs.WriteString(sc.Text() + "\n")
			if testing.Verbose() {
				fmt.Fprintln(os.Stderr, sc.Text())
			}
		}
	}()
	var base string
	select {
	case base = <-urls:
	case <-exited:
		t.Fatalf("the appliance exited before it was ready:\n%s", logs.String())
	case <-time.After(time.Minute):
		t.Fatal("the appliance did not become ready within a minute")
	}

	d := startDriver(ctx, t)
	pages := map[string]string{"operator": op, "viewer": viewer}
	for page, token := range pages {
		do(ctx, t, d, "open", map[string]any{"page": page, "url": base + "/?token=" + token}, nil)
		waitFor(ctx, t, d, page, `deskenv.state === 'connected' && deskenv.video.videoWidth > 0`, page+": no video")
	}
	marker := func(page string) string {
		var s string
		do(ctx, t, d, "eval", map[string]any{"page": page,
			"expr": `(() => { const m = document.getElementById('rec'); return m.hidden ? '' : m.textContent; })()`}, &s)
		return s
	}
	buttonShown := func(page string) bool {
		var b bool
		do(ctx, t, d, "eval", map[string]any{"page": page, "expr": `!document.getElementById('rec-btn').hidden`}, &b)
		return b
	}
	waitMarker := func(want string) {
		t.Helper()
		for page := range pages {
			waitFor(ctx, t, d, page, fmt.Sprintf(`(() => { const m = document.getElementById('rec'); return (m.hidden ? '' : m.textContent) === %q; })()`, want),
				fmt.Sprintf("%s page: marker %q, want %q", page, marker(page), want))
		}
	}

	waitFor(ctx, t, d, "operator", `!document.getElementById('rec-btn').hidden`, "the operator has no record button")
	if buttonShown("viewer") {
		t.Errorf("a viewer-only link shows the record button")
	}
	waitMarker("")

	// Record with the page's button, pause through the API, stop with the
	// button again.
	do(ctx, t, d, "eval", map[string]any{"page": "operator", "expr": `document.getElementById('rec-btn').click(), true`}, nil)
	waitMarker("REC")
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/recording/pause", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer "+op)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("pause: %s", resp.Status)
	}
	waitMarker("REC paused")
	waitFor(ctx, t, d, "operator", `document.getElementById('rec-btn').textContent === 'Stop recording'`, "the operator's button does not offer to stop")
	do(ctx, t, d, "eval", map[string]any{"page": "operator", "expr": `document.getElementById('rec-btn').click(), true`}, nil)
	waitMarker("")

	// The recording landed on disk.
	entries, err := os.ReadDir(episodes)
	if err != nil || len(entries) != 1 {
		t.Fatalf("episodes: %v, %v; want one", entries, err)
	}
	if _, err := os.Stat(filepath.Join(episodes, entries[0].Name(), "episode.json")); err != nil {
		t.Errorf("the recording has no episode.json: %v", err)
	}
}
