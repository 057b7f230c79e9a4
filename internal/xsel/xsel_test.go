package xsel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/internal/testrig"
)

func startDisplay(t testing.TB, restart bool) *display.Display {
	t.Helper()
	testrig.NeedTools(t, "xclip")
	return testrig.Display(t, display.Config{RestartOnCrash: restart})
}

func newOwner(t testing.TB, d *display.Display, sel string) *Owner {
	t.Helper()
	o, err := NewOwner(d.Name(), sel, testrig.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	return o
}

// ownerOf asks the server which window owns sel, through the display's own
// connection.
func ownerOf(t testing.TB, d *display.Display, sel string) xproto.Window {
	t.Helper()
	c := d.Conn()
	atoms, err := InternAtoms(c, sel)
	if err != nil {
		t.Fatal(err)
	}
	r, err := xproto.GetSelectionOwner(c, atoms[sel]).Reply()
	if err != nil {
		t.Fatal(err)
	}
	return r.Owner
}

// xclipOut pastes sel with `xclip -o`, the reference pasting client.
func xclipOut(t testing.TB, d *display.Display, sel string) string {
	t.Helper()
	cmd := exec.CommandContext(testrig.Context(t, 10*time.Second), "xclip", "-o", "-selection", sel)
	cmd.Env = d.Env()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("xclip -o -selection %s: %v: %s", sel, err, stderr.String())
	}
	return string(out)
}

// xclipIn makes xclip own sel with text until the test ends. -quiet keeps it
// in the foreground (it would fork and serve in the background otherwise), so
// the test holds its pid; it gets a process group of its own, killed at the
// end.
func xclipIn(t testing.TB, d *display.Display, sel, text string) {
	t.Helper()
	before := ownerOf(t, d, strings.ToUpper(sel))
	cmd := exec.Command("xclip", "-quiet", "-i", "-selection", sel)
	cmd.Env = d.Env()
	cmd.Stdin = strings.NewReader(text)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	testrig.WaitState(t, 10*time.Second, "xclip to own "+sel, func() (bool, string) {
		select {
		case <-exited:
			t.Fatalf("xclip exited: %v", cmd.ProcessState)
		default:
		}
		o := ownerOf(t, d, strings.ToUpper(sel))
		return o != xproto.WindowNone && o != before, fmt.Sprintf("owner 0x%x, 0x%x before", o, before)
	})
}

func short(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

func TestOwnerSetRead(t *testing.T) {
	d := startDisplay(t, false)
	tests := []struct {
		name string
		sel  string
		text string
	}{
		{"ascii", "CLIPBOARD", "hello, clipboard"},
		{"accents euro CJK emoji", "clipboard", "café déjà vu — 5 € · 漢字かな · 🎉👍🏽"},
		{"newlines and tabs", "CLIPBOARD", "line one\n\tline two\r\nline three\n"},
		{"empty", "CLIPBOARD", ""},
		{"150 KiB", "CLIPBOARD", strings.Repeat("0123456789abcdéf", 150<<10/17)},
		{"primary", "primary", "primary text ✓"},
		{"secondary", "Secondary", "secondary text"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := newOwner(t, d, tc.sel)
			if err := o.Set(testrig.Context(t, 5*time.Second), tc.text); err != nil {
				t.Fatal(err)
			}
			if ownerOf(t, d, strings.ToUpper(tc.sel)) == xproto.WindowNone {
				t.Fatalf("%s has no owner after Set", tc.sel)
			}
			got, err := Read(testrig.Context(t, 5*time.Second), d.Name(), tc.sel, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.text {
				t.Errorf("Read = %q (%d bytes), want %q (%d bytes)", short(got), len(got), short(tc.text), len(tc.text))
			}
			if got := xclipOut(t, d, strings.ToLower(tc.sel)); got != tc.text {
				t.Errorf("xclip -o = %q (%d bytes), want %q (%d bytes)", short(got), len(got), short(tc.text), len(tc.text))
			}
		})
	}
}

// TestOwnerTargets asks for each target as other clients do, through xclip -t.
func TestOwnerTargets(t *testing.T) {
	d := startDisplay(t, false)
	o := newOwner(t, d, "CLIPBOARD")
	if err := o.Set(testrig.Context(t, 5*time.Second), "naïve € text"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		target  string
		want    string
		wantErr bool
	}{
		{"TARGETS", "TARGETS\nUTF8_STRING\nTEXT\nSTRING\n", false},
		{"UTF8_STRING", "naïve € text", false},
		{"TEXT", "naïve € text", false},
		{"STRING", "na\xefve ? text", false}, // Latin-1 bytes; € has none
		{"image/png", "", true},
		{"MULTIPLE", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.target, func(t *testing.T) {
			cmd := exec.CommandContext(testrig.Context(t, 10*time.Second), "xclip", "-o", "-selection", "clipboard", "-t", tc.target)
			cmd.Env = d.Env()
			out, err := cmd.Output()
			if tc.wantErr {
				if err == nil {
					t.Fatalf("xclip -t %s printed %q; want a refusal", tc.target, out)
				}
				return
			}
			if err != nil {
				t.Fatalf("xclip -t %s: %v", tc.target, err)
			}
			if string(out) != tc.want {
				t.Errorf("xclip -t %s = %q, want %q", tc.target, out, tc.want)
			}
		})
	}
}

func TestReadXclip(t *testing.T) {
	d := startDisplay(t, false)
	tests := []struct {
		name     string
		sel      string
		text     string
		maxBytes int
		wantErr  string
	}{
		{"ascii", "clipboard", "hello from xclip", 0, ""},
		{"unicode", "clipboard", "grüße € 漢字 🎉", 0, ""},
		{"primary", "primary", "primary from xclip", 0, ""},
		{"1 MiB incremental", "clipboard", strings.Repeat("0123456789abcdef", 1<<16), 0, ""},
		{"over the limit", "clipboard", strings.Repeat("x", 1000), 100, "longer than the limit of 100 bytes"},
		{"incremental over the limit", "clipboard", strings.Repeat("0123456789abcdef", 1<<16), 300 << 10, "longer than the limit of 307200 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			xclipIn(t, d, tc.sel, tc.text)
			got, err := Read(testrig.Context(t, 10*time.Second), d.Name(), tc.sel, tc.maxBytes)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Read = %q, %v; want an error containing %q", short(got), err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.text {
				t.Errorf("Read = %q (%d bytes), want %q (%d bytes)", short(got), len(got), short(tc.text), len(tc.text))
			}
		})
	}
}

func TestErrors(t *testing.T) {
	d := startDisplay(t, false)
	o := newOwner(t, d, "CLIPBOARD")
	tests := []struct {
		name string
		do   func(ctx context.Context) error
		want string
	}{
		{"set too long", func(ctx context.Context) error { return o.Set(ctx, strings.Repeat("a", MaxSetBytes+1)) },
			"the text is 204801 bytes, more than the 204800 bytes (200 KiB)"},
		{"set invalid UTF-8", func(ctx context.Context) error { return o.Set(ctx, "caf\xe9") }, "not valid UTF-8"},
		{"read bad selection", func(ctx context.Context) error { _, err := Read(ctx, d.Name(), "CLIPBOARDS", 0); return err },
			`"CLIPBOARDS" is not a selection; use CLIPBOARD, PRIMARY or SECONDARY`},
		{"read no display name", func(ctx context.Context) error { _, err := Read(ctx, "", "CLIPBOARD", 0); return err },
			"no X display named"},
		{"read display not running", func(ctx context.Context) error { _, err := Read(ctx, ":4321", "CLIPBOARD", 0); return err },
			"read the CLIPBOARD selection: connect to display :4321"},
		{"owner bad selection", func(ctx context.Context) error { _, err := NewOwner(d.Name(), "clip", nil); return err },
			`"clip" is not a selection`},
		{"owner no display name", func(ctx context.Context) error { _, err := NewOwner("", "PRIMARY", nil); return err },
			"own the PRIMARY selection: no X display named"},
		{"set display not running", func(ctx context.Context) error {
			o, err := NewOwner(":4321", "CLIPBOARD", nil)
			if err != nil {
				return err
			}
			defer o.Close()
			return o.Set(ctx, "x")
		}, "set the CLIPBOARD selection: connect to display :4321"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do(testrig.Context(t, 5*time.Second))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v; want one containing %q", err, tc.want)
			}
		})
	}
	// The refused texts left nothing behind.
	if got, err := Read(testrig.Context(t, 5*time.Second), d.Name(), "CLIPBOARD", 0); err != nil || got != "" {
		t.Errorf("Read after refused Sets = %q, %v; want no owner", got, err)
	}
}

func TestReadNoOwner(t *testing.T) {
	d := startDisplay(t, false)
	for _, sel := range []string{"CLIPBOARD", "PRIMARY", "secondary"} {
		t.Run(sel, func(t *testing.T) {
			got, err := Read(testrig.Context(t, 5*time.Second), d.Name(), sel, 0)
			if err != nil || got != "" {
				t.Fatalf("Read = %q, %v; want \"\", nil", got, err)
			}
		})
	}
}

// TestOwnership hands the selection between Owners (and xclip) and checks
// who answers after each step.
func TestOwnership(t *testing.T) {
	d := startDisplay(t, false)
	read := func(t *testing.T) string {
		t.Helper()
		got, err := Read(testrig.Context(t, 5*time.Second), d.Name(), "CLIPBOARD", 0)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	set := func(t *testing.T, o *Owner, text string) {
		t.Helper()
		if err := o.Set(testrig.Context(t, 5*time.Second), text); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name  string
		steps func(t *testing.T, a, b *Owner)
		want  string
	}{
		{"second owner wins", func(t *testing.T, a, b *Owner) { set(t, a, "first"); set(t, b, "second") }, "second"},
		{"first stops answering once it lost", func(t *testing.T, a, b *Owner) {
			set(t, a, "first")
			set(t, b, "second")
			testrig.WaitState(t, 5*time.Second, "the first owner to forget its text", func() (bool, string) {
				oc := a.current()
				oc.mu.Lock()
				defer oc.mu.Unlock()
				return !oc.owning && oc.data == nil, fmt.Sprintf("owning=%v", oc.owning)
			})
			b.Close() // releases: nobody owns it, and the first does not come back
		}, ""},
		{"set twice replaces the text", func(t *testing.T, a, b *Owner) { set(t, a, "one"); set(t, a, "two") }, "two"},
		{"first takes it back", func(t *testing.T, a, b *Owner) { set(t, a, "first"); set(t, b, "second"); set(t, a, "first again") }, "first again"},
		{"back and forth", func(t *testing.T, a, b *Owner) {
			for i := range 20 {
				set(t, a, fmt.Sprint("a", i))
				set(t, b, fmt.Sprint("b", i))
			}
			set(t, a, "a last")
		}, "a last"},
		{"close releases", func(t *testing.T, a, b *Owner) {
			set(t, a, "soon gone")
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
		}, ""},
		{"close of the loser keeps the winner", func(t *testing.T, a, b *Owner) {
			set(t, a, "loser")
			set(t, b, "winner")
			a.Close()
		}, "winner"},
		{"xclip takes it from an owner", func(t *testing.T, a, b *Owner) {
			set(t, a, "mine")
			xclipIn(t, d, "clipboard", "from xclip")
		}, "from xclip"},
		{"an owner takes it from xclip", func(t *testing.T, a, b *Owner) {
			xclipIn(t, d, "clipboard", "from xclip")
			set(t, a, "mine")
		}, "mine"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := newOwner(t, d, "CLIPBOARD"), newOwner(t, d, "CLIPBOARD")
			tc.steps(t, a, b)
			if got := read(t); got != tc.want {
				t.Fatalf("Read = %q, want %q", got, tc.want)
			}
			a.Close()
			b.Close()
		})
	}
}

func (o *Owner) current() *ownerConn {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.conn
}

func TestClosedOwner(t *testing.T) {
	d := startDisplay(t, false)
	tests := []struct {
		name string
		set  bool // Set before Close
	}{
		{"never set", false},
		{"set", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := newOwner(t, d, "PRIMARY")
			if tc.set {
				if err := o.Set(testrig.Context(t, 5*time.Second), "x"); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 2 {
				if err := o.Close(); err != nil {
					t.Fatalf("Close #%d: %v", i+1, err)
				}
			}
			if err := o.Set(testrig.Context(t, 5*time.Second), "y"); !errors.Is(err, ErrClosed) {
				t.Fatalf("Set after Close: %v, want ErrClosed", err)
			}
			if w := ownerOf(t, d, "PRIMARY"); w != xproto.WindowNone {
				t.Fatalf("PRIMARY is owned by 0x%x after Close", w)
			}
		})
	}
}

// TestServerRestart kills Xvfb under an Owner: the next Set connects to the
// new server instead of failing for ever.
func TestServerRestart(t *testing.T) {
	d := startDisplay(t, true)
	o := newOwner(t, d, "CLIPBOARD")
	tests := []struct {
		name string
		kill bool
	}{
		{"before the crash", false},
		{"after the first crash", true},
		{"after the second crash", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.kill {
				restarts := d.Restarts()
				syscall.Kill(d.ServerPID(), syscall.SIGKILL)
				testrig.WaitState(t, 20*time.Second, "Xvfb to restart", func() (bool, string) {
					return d.Restarts() > restarts, fmt.Sprint("restarts ", d.Restarts())
				})
			}
			text := "text " + tc.name
			if err := o.Set(testrig.Context(t, 5*time.Second), text); err != nil {
				t.Fatal(err)
			}
			got, err := Read(testrig.Context(t, 5*time.Second), d.Name(), "CLIPBOARD", 0)
			if err != nil || got != text {
				t.Fatalf("Read = %q, %v; want %q", got, err, text)
			}
		})
	}
}

// TestNoLeaks checks that Owners and Reads leave no goroutine behind once
// closed, whatever happened to them.
func TestNoLeaks(t *testing.T) {
	d := startDisplay(t, false)
	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"read without owner", func(t *testing.T) { Read(testrig.Context(t, 5*time.Second), d.Name(), "CLIPBOARD", 0) }},
		{"set, read, close", func(t *testing.T) {
			o := newOwner(t, d, "CLIPBOARD")
			o.Set(testrig.Context(t, 5*time.Second), "x")
			Read(testrig.Context(t, 5*time.Second), d.Name(), "CLIPBOARD", 0)
			o.Close()
		}},
		{"two owners, close both", func(t *testing.T) {
			a, b := newOwner(t, d, "CLIPBOARD"), newOwner(t, d, "CLIPBOARD")
			a.Set(testrig.Context(t, 5*time.Second), "a")
			b.Set(testrig.Context(t, 5*time.Second), "b")
			xclipOut(t, d, "clipboard")
			a.Close()
			b.Close()
		}},
		{"closed without set", func(t *testing.T) { newOwner(t, d, "PRIMARY").Close() }},
		{"read from xclip", func(t *testing.T) {
			xclipIn(t, d, "clipboard", strings.Repeat("y", 1<<20))
			Read(testrig.Context(t, 5*time.Second), d.Name(), "CLIPBOARD", 0)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := runtime.NumGoroutine()
			t.Run("run", tc.run) // its cleanups (xclip kills, Closes) run before the count
			testrig.WaitState(t, 5*time.Second, "goroutines to end", func() (bool, string) {
				n := runtime.NumGoroutine()
				return n <= before, fmt.Sprintf("%d goroutines, %d before", n, before)
			})
		})
	}
}

// BenchmarkRead reads a short text held by an Owner, beside `xclip -o`
// doing the same.
func BenchmarkRead(b *testing.B) {
	d := startDisplay(b, false)
	o := newOwner(b, d, "CLIPBOARD")
	ctx := context.Background()
	if err := o.Set(ctx, "benchmark text"); err != nil {
		b.Fatal(err)
	}
	b.Run("xsel.Read", func(b *testing.B) {
		for b.Loop() {
			if s, err := Read(ctx, d.Name(), "CLIPBOARD", 0); err != nil || s != "benchmark text" {
				b.Fatal(s, err)
			}
		}
	})
	b.Run("xclip-o", func(b *testing.B) {
		for b.Loop() {
			cmd := exec.Command("xclip", "-o", "-selection", "clipboard")
			cmd.Env = d.Env()
			if out, err := cmd.Output(); err != nil || string(out) != "benchmark text" {
				b.Fatal(string(out), err)
			}
		}
	})
}

// BenchmarkSet takes the clipboard with a short text, beside `xclip -i`
// (which forks a server and returns once it owns the selection).
func BenchmarkSet(b *testing.B) {
	d := startDisplay(b, false)
	o := newOwner(b, d, "CLIPBOARD")
	ctx := context.Background()
	b.Run("Owner.Set", func(b *testing.B) {
		for b.Loop() {
			if err := o.Set(ctx, "benchmark text"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("xclip-i", func(b *testing.B) {
		for b.Loop() {
			// Each forked xclip ends when the next takes the selection, the
			// last one when the display closes.
			cmd := exec.Command("xclip", "-i", "-selection", "clipboard")
			cmd.Env = d.Env()
			cmd.Stdin = strings.NewReader("benchmark text")
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// rawOwner owns CLIPBOARD on a connection of the test's own and hands each
// request to answer (nil: never answers), to play owners that Owner and
// xclip are too well-behaved to be.
func rawOwner(t *testing.T, d *display.Display, answer func(c *xgb.Conn, req xproto.SelectionRequestEvent)) {
	t.Helper()
	c, err := d.Dial()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	win, err := xproto.NewWindowId(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := xproto.CreateWindowChecked(c, 0, win, d.Root(), 0, 0, 1, 1, 0, xproto.WindowClassInputOnly, 0, 0, nil).Check(); err != nil {
		t.Fatal(err)
	}
	atoms, err := InternAtoms(c, "CLIPBOARD")
	if err != nil {
		t.Fatal(err)
	}
	if err := xproto.SetSelectionOwnerChecked(c, win, atoms["CLIPBOARD"], xproto.TimeCurrentTime).Check(); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			ev, err := c.WaitForEvent()
			if ev == nil && err == nil {
				return
			}
			if req, ok := ev.(xproto.SelectionRequestEvent); ok && answer != nil {
				answer(c, req)
			}
		}
	}()
}

func notify(c *xgb.Conn, req xproto.SelectionRequestEvent, prop xproto.Atom) {
	ev := xproto.SelectionNotifyEvent{Time: req.Time, Requestor: req.Requestor, Selection: req.Selection, Target: req.Target, Property: prop}
	xproto.SendEvent(c, false, req.Requestor, 0, string(ev.Bytes()))
}

func TestReadBadOwners(t *testing.T) {
	d := startDisplay(t, false)
	tests := []struct {
		name    string
		answer  func(c *xgb.Conn, req xproto.SelectionRequestEvent)
		want    string
		wantErr string
		noText  bool
	}{
		{"never answers", nil, "", "read the CLIPBOARD selection: its owner (window 0x", false},
		{"refuses every target", func(c *xgb.Conn, req xproto.SelectionRequestEvent) { notify(c, req, xproto.AtomNone) },
			"", "read the CLIPBOARD selection: the selection holds no text", true},
		{"latin-1 STRING only", func(c *xgb.Conn, req xproto.SelectionRequestEvent) {
			if req.Target != xproto.AtomString {
				notify(c, req, xproto.AtomNone)
				return
			}
			b := []byte("caf\xe9 \xa3")
			xproto.ChangeProperty(c, xproto.PropModeReplace, req.Requestor, req.Property, xproto.AtomString, 8, uint32(len(b)), b)
			notify(c, req, req.Property)
		}, "café £", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rawOwner(t, d, tc.answer)
			got, err := Read(testrig.Context(t, 300*time.Millisecond), d.Name(), "CLIPBOARD", 0)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Read = %q, %v; want an error containing %q", got, err, tc.wantErr)
				}
				if errors.Is(err, ErrNoText) != tc.noText {
					t.Errorf("errors.Is(%v, ErrNoText) = %v, want %v", err, !tc.noText, tc.noText)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Read = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestConcurrentUse sets, reads and closes from several goroutines at once;
// run with -race, it also checks the Owner's locking.
func TestConcurrentUse(t *testing.T) {
	d := startDisplay(t, false)
	tests := []struct {
		name    string
		setters int
		sets    int
	}{
		{"one setter", 1, 30},
		{"four setters", 4, 15},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := newOwner(t, d, "CLIPBOARD")
			valid := map[string]bool{}
			for g := range tc.setters {
				for i := range tc.sets {
					valid[fmt.Sprintf("g%d-%d", g, i)] = true
				}
			}
			errs := make(chan error, tc.setters*tc.sets*2)
			done := make(chan struct{})
			for g := range tc.setters {
				go func() {
					defer func() { done <- struct{}{} }()
					for i := range tc.sets {
						ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
						errs <- o.Set(ctx, fmt.Sprintf("g%d-%d", g, i))
						got, err := Read(ctx, d.Name(), "CLIPBOARD", 0)
						cancel()
						if err == nil && !valid[got] {
							err = fmt.Errorf("Read = %q, which no setter set", got)
						}
						errs <- err
					}
				}()
			}
			for range tc.setters {
				<-done
			}
			close(errs)
			for err := range errs {
				if err != nil {
					t.Error(err)
				}
			}
			// Close while Sets are under way: each ends with nil or an
			// error, never a hang or a panic, and later ones with ErrClosed.
			for range 3 {
				go func() { o.Set(testrig.Context(t, 5*time.Second), "racing the close"); done <- struct{}{} }()
			}
			if err := o.Close(); err != nil {
				t.Error(err)
			}
			for range 3 {
				<-done
			}
			if err := o.Set(testrig.Context(t, 5*time.Second), "late"); !errors.Is(err, ErrClosed) {
				t.Errorf("Set after Close: %v, want ErrClosed", err)
			}
			if w := ownerOf(t, d, "CLIPBOARD"); w != xproto.WindowNone {
				got, _ := Read(testrig.Context(t, 2*time.Second), d.Name(), "CLIPBOARD", 0)
				t.Errorf("CLIPBOARD still owned by 0x%x (text %q) after Close", w, got)
			}
		})
	}
}
