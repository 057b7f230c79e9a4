package testrig

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

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
