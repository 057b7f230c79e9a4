package mcpserver

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// pageAt is a PageSource whose tab is at a URL the test sets, or none.
type pageAt struct{ url atomic.Pointer[string] }

func (p *pageAt) PageURL(context.Context) (string, error) {
	if u := p.url.Load(); u != nil {
		return *u, nil
	}
	return "", errors.New("no browser")
}

// TestGeminiAnswersCarryTheURL: a Gemini function's answer carries the
// desktop's current URL as {"url": ...} beside the screenshot, as Gemini's
// computer use returns it, read after the actions ran; without a browser
// the answer is the screenshot alone; the other dialects never add it.
func TestGeminiAnswersCarryTheURL(t *testing.T) {
	page := &pageAt{}
	r := newRig(t, rigConfig{w: 1280, h: 800, model: "auto", modes: []Mode{ModeGemini, ModeOpenAI}, page: page})
	c := r.connect(t, "http")
	urlOf := func(res *mcp.CallToolResult) (string, bool) {
		t.Helper()
		if res.IsError {
			t.Fatalf("tool error: %s", resultText(res))
		}
		var url string
		found, images := 0, 0
		for _, ct := range res.Content {
			switch v := ct.(type) {
			case mcp.TextContent:
				url, found = v.Text, found+1
			case mcp.ImageContent:
				images++
			}
		}
		if images != 1 {
			t.Fatalf("answer has %d images, want the screenshot", images)
		}
		return url, found == 1
	}

	if u, ok := urlOf(call(t, c, "wait_5_seconds", map[string]any{})); ok {
		t.Errorf("no browser: the answer carries %q, want the screenshot alone", u)
	}
	at := "http://127.0.0.1:8123/form.html?x=1&y=<2>"
	page.url.Store(&at)
	for _, fn := range []struct {
		name string
		args map[string]any
	}{
		{"click_at", map[string]any{"x": 500, "y": 500}},
		{"key_combination", map[string]any{"keys": "Escape"}},
	} {
		u, ok := urlOf(call(t, c, fn.name, fn.args))
		if want := `{"url":"http://127.0.0.1:8123/form.html?x=1&y=<2>"}`; !ok || u != want {
			t.Errorf("%s: answer text %q, want %s", fn.name, u, want)
		}
	}
	if u, ok := urlOf(call(t, c, "computer_use_preview", map[string]any{"action": map[string]any{"type": "wait"}})); ok {
		t.Errorf("an OpenAI answer carries %q: only Gemini's has the URL", u)
	}
}
