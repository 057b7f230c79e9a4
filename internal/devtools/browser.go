package devtools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"
)

// Browser is a Chromium driven over a Conn: its tabs, its downloads.
type Browser struct {
	conn *Conn

	mu        sync.Mutex
	sessions  map[string]string // target id to the session attached to it
	downloads map[string]*Download
	order     []string // download guids, oldest first
}

// Download is a download the browser reported.
type Download struct {
	GUID     string
	URL      string
	Filename string // the name the browser suggested, which it saves under
	State    string // "inProgress", "completed" or "canceled"
}

// maxDownloads bounds what a page that starts downloads in a loop can make
// the Browser keep.
const maxDownloads = 1000

// Open starts a Browser over the browser's pipes: r is its fd 4 (what it
// writes), w its fd 3 (what it reads).
func Open(r io.ReadCloser, w io.WriteCloser) *Browser {
	b := &Browser{sessions: map[string]string{}, downloads: map[string]*Download{}}
	b.conn = New(r, w, Options{OnEvent: b.event})
	return b
}

// Conn is the connection, for commands Browser has no method for.
func (b *Browser) Conn() *Conn { return b.conn }

// Close closes the connection (not the browser: end its process for that).
func (b *Browser) Close() error { return b.conn.Close() }

func (b *Browser) event(ev Event) {
	switch ev.Method {
	case "Browser.downloadWillBegin":
		var p struct {
			GUID              string `json:"guid"`
			URL               string `json:"url"`
			SuggestedFilename string `json:"suggestedFilename"`
		}
		if json.Unmarshal(ev.Params, &p) != nil || p.GUID == "" {
			return
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		if _, ok := b.downloads[p.GUID]; !ok {
			if len(b.order) >= maxDownloads {
				delete(b.downloads, b.order[0])
				b.order = b.order[1:]
			}
			b.order = append(b.order, p.GUID)
		}
		b.downloads[p.GUID] = &Download{GUID: p.GUID, URL: p.URL, Filename: p.SuggestedFilename, State: "inProgress"}
	case "Browser.downloadProgress":
		var p struct {
			GUID  string `json:"guid"`
			State string `json:"state"`
		}
		if json.Unmarshal(ev.Params, &p) != nil {
			return
		}
		b.mu.Lock()
		if d := b.downloads[p.GUID]; d != nil {
			d.State = p.State
		}
		b.mu.Unlock()
	case "Target.detachedFromTarget", "Target.targetDestroyed":
		var p struct {
			SessionID string `json:"sessionId"`
			TargetID  string `json:"targetId"`
		}
		if json.Unmarshal(ev.Params, &p) != nil {
			return
		}
		b.mu.Lock()
		for t, s := range b.sessions {
			if t == p.TargetID || (p.SessionID != "" && s == p.SessionID) {
				delete(b.sessions, t)
			}
		}
		b.mu.Unlock()
	}
}

// Downloads lists the downloads the browser reported, oldest first.
func (b *Browser) Downloads() []Download {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]Download, 0, len(b.order))
	for _, g := range b.order {
		out = append(out, *b.downloads[g])
	}
	return out
}

// AllowDownloads makes the browser save downloads in dir without asking and
// report them (Downloads).
func (b *Browser) AllowDownloads(ctx context.Context, dir string) error {
	return b.conn.Call(ctx, "", "Browser.setDownloadBehavior",
		map[string]any{"behavior": "allow", "downloadPath": dir, "eventsEnabled": true}, nil)
}

// Target is a tab (or another target) of the browser.
type Target struct {
	TargetID string `json:"targetId"`
	Type     string `json:"type"`
	Title    string `json:"title"`
	URL      string `json:"url"`
}

// Pages lists the browser's tabs.
func (b *Browser) Pages(ctx context.Context) ([]Target, error) {
	var res struct {
		TargetInfos []Target `json:"targetInfos"`
	}
	if err := b.conn.Call(ctx, "", "Target.getTargets", nil, &res); err != nil {
		return nil, err
	}
	pages := slices.DeleteFunc(res.TargetInfos, func(t Target) bool { return t.Type != "page" })
	return pages, nil
}

// ErrNoPage says the browser has no tab open.
var ErrNoPage = errors.New("the browser has no tab open")

// ActivePage is the tab a person sees: the first whose document is visible
// (a background tab's is "hidden"), else the first tab. CDP has no notion of
// the selected tab, and the visibility of its document is what tells it.
func (b *Browser) ActivePage(ctx context.Context) (*Page, error) {
	pages, err := b.Pages(ctx)
	if err != nil {
		return nil, err
	}
	if len(pages) == 0 {
		return nil, ErrNoPage
	}
	var first, blocked *Page
	for _, t := range pages {
		p, err := b.Attach(ctx, t.TargetID)
		if err != nil {
			continue // closed meanwhile
		}
		if first == nil {
			first = p
		}
		// A page showing alert() or confirm() runs no script until the
		// dialog is answered; such a page is the one a person sees.
		pctx, cancel := context.WithTimeout(ctx, pageAnswerTimeout)
		var vis string
		err = p.Evaluate(pctx, "document.visibilityState", &vis)
		cancel()
		switch {
		case err == nil && vis == "visible":
			return p, nil
		case err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) && blocked == nil:
			blocked = p
		}
	}
	switch {
	case blocked != nil:
		return blocked, nil
	case first != nil:
		return first, nil
	}
	return nil, ErrNoPage
}

// pageAnswerTimeout is how long ActivePage waits for a tab's script to
// answer before taking it for one blocked by a dialog.
const pageAnswerTimeout = time.Second

// Attach attaches to a target (once; later calls reuse the session) in
// flat mode: commands to it go over this connection with its session id.
func (b *Browser) Attach(ctx context.Context, targetID string) (*Page, error) {
	b.mu.Lock()
	s, ok := b.sessions[targetID]
	b.mu.Unlock()
	if ok {
		return &Page{b: b, TargetID: targetID, SessionID: s}, nil
	}
	var res struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.conn.Call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": targetID, "flatten": true}, &res); err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.sessions[targetID] = res.SessionID
	b.mu.Unlock()
	return &Page{b: b, TargetID: targetID, SessionID: res.SessionID}, nil
}

// NewPage opens url in a new tab, which becomes the selected one.
func (b *Browser) NewPage(ctx context.Context, url string) (*Page, error) {
	var res struct {
		TargetID string `json:"targetId"`
	}
	if err := b.conn.Call(ctx, "", "Target.createTarget", map[string]any{"url": url}, &res); err != nil {
		return nil, err
	}
	return b.Attach(ctx, res.TargetID)
}

// Page is a tab the Browser is attached to.
type Page struct {
	b         *Browser
	TargetID  string
	SessionID string
}

func (p *Page) call(ctx context.Context, method string, params, result any) error {
	return p.b.conn.Call(ctx, p.SessionID, method, params, result)
}

// Info is the tab's current URL and title, as the browser's tab strip has
// them (chrome:// pages included, where no script runs).
func (p *Page) Info(ctx context.Context) (Target, error) {
	var res struct {
		TargetInfo Target `json:"targetInfo"`
	}
	err := p.b.conn.Call(ctx, "", "Target.getTargetInfo", map[string]any{"targetId": p.TargetID}, &res)
	return res.TargetInfo, err
}

// URL is the tab's current URL.
func (p *Page) URL(ctx context.Context) (string, error) {
	t, err := p.Info(ctx)
	return t.URL, err
}

// Title is the tab's current title.
func (p *Page) Title(ctx context.Context) (string, error) {
	t, err := p.Info(ctx)
	return t.Title, err
}

// EvalError is a script that threw.
type EvalError struct{ Text string }

func (e *EvalError) Error() string { return "the script threw: " + e.Text }

// Evaluate runs a JavaScript expression in the page (awaiting a promise)
// and decodes its value, as JSON, into out (nil: ignored).
func (p *Page) Evaluate(ctx context.Context, expr string, out any) error {
	var res struct {
		Result struct {
			Type  string          `json:"type"`
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception *struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	err := p.call(ctx, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &res)
	if err != nil {
		return err
	}
	if e := res.ExceptionDetails; e != nil {
		text := e.Text
		if e.Exception != nil && e.Exception.Description != "" {
			text = e.Exception.Description
		}
		return &EvalError{Text: text}
	}
	if out == nil {
		return nil
	}
	if len(res.Result.Value) == 0 { // undefined
		return json.Unmarshal([]byte("null"), out)
	}
	return json.Unmarshal(res.Result.Value, out)
}

// Navigate loads url in the tab; it returns once the navigation has
// started (WaitLoad waits for the page).
func (p *Page) Navigate(ctx context.Context, url string) error {
	var res struct {
		ErrorText string `json:"errorText"`
	}
	if err := p.call(ctx, "Page.navigate", map[string]any{"url": url}, &res); err != nil {
		return err
	}
	if res.ErrorText != "" {
		return fmt.Errorf("navigate to %s: %s", url, res.ErrorText)
	}
	return nil
}

// Back goes one entry back in the tab's history; Forward one forward. At
// either end they do nothing and say so.
func (p *Page) Back(ctx context.Context) error { return p.history(ctx, -1) }

// Forward goes one entry forward in the tab's history.
func (p *Page) Forward(ctx context.Context) error { return p.history(ctx, 1) }

func (p *Page) history(ctx context.Context, delta int) error {
	var h struct {
		CurrentIndex int `json:"currentIndex"`
		Entries      []struct {
			ID int `json:"id"`
		} `json:"entries"`
	}
	if err := p.call(ctx, "Page.getNavigationHistory", nil, &h); err != nil {
		return err
	}
	i := h.CurrentIndex + delta
	if i < 0 || i >= len(h.Entries) {
		return fmt.Errorf("the tab's history has no entry %d (it has %d, at %d)", i, len(h.Entries), h.CurrentIndex)
	}
	return p.call(ctx, "Page.navigateToHistoryEntry", map[string]any{"entryId": h.Entries[i].ID}, nil)
}

// WaitLoad waits until the tab's document has finished loading
// (document.readyState "complete"), polling, since a load event may have
// fired before anyone listened.
func (p *Page) WaitLoad(ctx context.Context) error {
	return p.waitLoad(ctx, "document.readyState")
}

// WaitOpened is WaitLoad for a tab that was just opened on a URL other than
// about:blank: a new tab starts with an about:blank document that is
// complete at once, before the URL's document replaces it.
func (p *Page) WaitOpened(ctx context.Context) error {
	return p.waitLoad(ctx, `location.href === "about:blank" ? "blank" : document.readyState`)
}

// loadPoll is how often waitLoad asks the page for its state: a round trip
// to the renderer, a fraction of a millisecond, so a loaded page need not
// wait up to 100 ms to be noticed (in practice the first answer often
// comes once the page is loaded: BenchmarkBrowser/navigate did not move).
const loadPoll = 10 * time.Millisecond

func (p *Page) waitLoad(ctx context.Context, expr string) error {
	tick := time.NewTicker(loadPoll)
	defer tick.Stop()
	for {
		var state string
		err := p.Evaluate(ctx, expr, &state)
		if err == nil && state == "complete" {
			return nil
		}
		if errors.Is(err, ErrClosed) {
			return err
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			if err != nil {
				return fmt.Errorf("the page did not finish loading: %w (last: %v)", ctx.Err(), err)
			}
			return fmt.Errorf("the page did not finish loading (document.readyState %q): %w", state, ctx.Err())
		}
	}
}
