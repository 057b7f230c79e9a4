package testrig

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/internal/xprobe"
)

func TestDisplayIsBareAndProbeSeesTheServer(t *testing.T) {
	d := Display(t, display.Config{Width: 640, Height: 480})
	if w, h := d.Size(); w != 640 || h != 480 {
		t.Fatalf("screen is %dx%d, want 640x480", w, h)
	}
	if n := len(d.Processes()); n != 0 {
		t.Errorf("a bare display runs %d session processes, want none", n)
	}
	p := Probe(t, d, xprobe.Options{Background: 0x336699})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Sync(ctx); err != nil {
		t.Fatalf("the probe could not reach the X server: %v", err)
	}
}

func TestServe(t *testing.T) {
	url := Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "here") }))
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "here" {
		t.Errorf("served %q, want %q", b, "here")
	}
}

// A seeded home lists the same twice, and any change to it (content, mode,
// a new file, a touched time) shows in its listing.
func TestSeedHomeAndTreeOf(t *testing.T) {
	home := SeedHome(t)
	want := TreeOf(t, home)
	if again := TreeOf(t, home); again != want {
		t.Fatalf("two listings of one tree differ:\n%s\n%s", again, want)
	}
	for _, line := range []string{"latest Lrwxrwxrwx -> Documents/report.md", "notes.txt -rw------- size=6 mtime=1704164645000000000 \"hello\\n\""} {
		if !strings.Contains(want, line) {
			t.Errorf("the seeded home's listing lacks %q:\n%s", line, want)
		}
	}
	changes := []struct {
		name   string
		change func(t *testing.T, home string)
	}{
		{"content", func(t *testing.T, home string) { WriteFile(t, filepath.Join(home, "notes.txt"), "HELLO\n", 0o600) }},
		{"mode", func(t *testing.T, home string) { os.Chmod(filepath.Join(home, "notes.txt"), 0o644) }},
		{"new file in a new directory", func(t *testing.T, home string) { WriteFile(t, filepath.Join(home, "a", "b.txt"), "", 0o644) }},
		{"time", func(t *testing.T, home string) {
			now := time.Now()
			os.Chtimes(filepath.Join(home, "Documents"), now, now)
		}},
	}
	for _, c := range changes {
		t.Run(c.name, func(t *testing.T) {
			home := SeedHome(t)
			if got := TreeOf(t, home); got != want {
				t.Fatalf("two seeded homes differ:\n%s\n%s", got, want)
			}
			c.change(t, home)
			if TreeOf(t, home) == want {
				t.Errorf("the listing did not change")
			}
		})
	}
}

// A detached process runs in a session of its own, on the display's
// environment, and WaitFor sees it come up.
func TestSpawnDetachedAndWaitFor(t *testing.T) {
	NeedTools(t, "sh")
	d := Display(t, display.Config{Width: 320, Height: 240})
	dir := t.TempDir()
	cmd := SpawnDetached(t, d, "sh", "-c", `echo "$DISPLAY" > "$0/display"; exec sleep 300`, dir)
	WaitFor(t, "the detached shell to write its DISPLAY", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "display"))
		return strings.TrimSpace(string(b)) == d.Name()
	})
	sid, err := unix.Getsid(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if sid != cmd.Process.Pid {
		t.Errorf("the detached process is in session %d, want its own (%d)", sid, cmd.Process.Pid)
	}
}

// fatalRecorder is a test that keeps its Fatalf message and ends the
// goroutine calling it, as testing.T does, so a helper's failure can be read.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// WaitState returns once its condition holds, and when it never does it
// fails with what was awaited and the last state the condition saw.
func TestWaitState(t *testing.T) {
	tries := 0
	WaitState(t, Patience, "the third try", func() (bool, string) {
		tries++
		return tries == 3, fmt.Sprint("try ", tries)
	})
	if tries != 3 {
		t.Errorf("WaitState returned after %d tries, want 3", tries)
	}

	r := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		WaitState(r, 50*time.Millisecond, "a thing that never comes", func() (bool, string) { return false, "still nothing" })
		r.msg = "WaitState returned although its condition never held"
	}()
	<-done
	if want := "a thing that never comes did not happen within 50ms; last state: still nothing"; r.msg != want {
		t.Errorf("WaitState failed with %q, want %q", r.msg, want)
	}
}

// Context ends at its limit, and when its test ends if that comes first.
func TestContext(t *testing.T) {
	ctx := Context(t, time.Millisecond)
	<-ctx.Done()
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Errorf("a context past its limit ended with %v, want the deadline", ctx.Err())
	}
	var inner context.Context
	t.Run("inner", func(t *testing.T) {
		inner = Context(t, time.Hour)
		if inner.Err() != nil {
			t.Fatalf("a fresh context has ended: %v", inner.Err())
		}
	})
	if !errors.Is(inner.Err(), context.Canceled) {
		t.Errorf("a context outlived its test: err %v, want canceled", inner.Err())
	}
}
