package browser_test

import (
	"context"
	"os"
	"testing"

	"github.com/deskenv/deskenv/e2e/browser"
)

// startDriver starts Chromium for one test. A missing npm install is a
// failure with the fix in it, never a skip: make test installs it.
func startDriver(ctx context.Context, t *testing.T) *browser.Driver {
	t.Helper()
	var stderr *os.File
	if testing.Verbose() {
		stderr = os.Stderr
	}
	opt := browser.Options{} // found from the working directory, so errors name the full path
	if stderr != nil {
		opt.Stderr = stderr
	}
	d, err := browser.Start(ctx, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func open(ctx context.Context, t *testing.T, d *browser.Driver, page, url string) {
	t.Helper()
	var res struct{ Status int }
	if err := d.Do(ctx, "open", map[string]any{"page": page, "url": url}, &res); err != nil {
		t.Fatal(err)
	}
	if res.Status != 200 {
		t.Fatalf("open %s: HTTP status %d", url, res.Status)
	}
}
