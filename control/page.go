package control

import (
	"context"

	"github.com/deskenv/deskenv/task"
)

// PageURL is the URL of the tab the person at the desktop sees in the
// running episode's browser (the one its task's `browser` step started),
// read over the browser's DevTools pipe. task.ErrNoBrowser when the episode
// has no such browser; the browser's own error when it was closed.
func (c *Control) PageURL(ctx context.Context) (string, error) {
	c.mu.Lock()
	run := c.current
	c.mu.Unlock()
	if run == nil || run.env == nil {
		return "", task.ErrNoBrowser
	}
	b := run.env.Browser()
	if b == nil {
		return "", task.ErrNoBrowser
	}
	return b.URL(ctx)
}
