package task

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/deskenv/deskenv/internal/devtools"
)

// browserChecks are the checks of the task's browser, which look at it over
// DevTools.
func browserChecks() []CheckKind {
	text := []string{"contains", "matches", "ignore_case"}
	either := []Need{OneOf("contains", "matches")}
	return []CheckKind{
		{Name: CheckBrowserURL, Fields: text, Needs: either, Describe: describeBrowser, Evaluate: browserURL},
		{Name: CheckBrowserTitle, Fields: text, Needs: either, Describe: describeBrowser, Evaluate: browserTitle},
		{Name: CheckBrowserElement, Fields: []string{"selector", "property", "equals", "contains", "matches", "ignore_case"},
			Needs:    []Need{Required("selector", "a CSS selector, such as \"#total\"")},
			Describe: describeElement, Evaluate: browserElement, validate: validateElement},
		{Name: CheckBrowserBookmark, Fields: text, Needs: either, Describe: describeBrowser, Evaluate: browserBookmark},
		{Name: CheckBrowserDownload, Fields: text, Needs: either, Describe: describeBrowser, Evaluate: browserDownload},
	}
}

func describeBrowser(c *Check) string { return c.Type }

func describeElement(c *Check) string {
	return fmt.Sprintf("browser_element %s %s", quoteHead(c.Selector, 80), c.elementProperty())
}

func (c *Check) elementProperty() string {
	if c.Property == "" {
		return "text"
	}
	return c.Property
}

func validateElement(d *decoder, at site, c *Check) {
	if c.Equals == nil && c.Contains == "" && c.Matches == "" {
		d.fail(at.n, at.path, "browser_element needs \"equals\", \"contains\" or \"matches\": what the element's %s must be", c.elementProperty())
	}
	if c.Equals != nil && (c.Contains != "" || c.Matches != "") {
		d.fail(at.n, at.path, "browser_element takes \"equals\" or \"contains\"/\"matches\", not both")
	}
}

// taskBrowser is the task's browser, or why there is none to look at: an
// error when the task started none (a task file's mistake), a failing
// detail when the agent closed it.
func taskBrowser(env Env) (*Browser, string, error) {
	o, ok := env.(browserOwner)
	if !ok {
		return nil, "", ErrNoBrowser
	}
	b := o.Browser()
	if b == nil {
		return nil, "", ErrNoBrowser
	}
	if err := b.alive(); err != nil {
		return nil, err.Error(), nil
	}
	return b, "", nil
}

// browserAnswerTimeout bounds each browser check's DevTools calls.
const browserAnswerTimeout = 5 * time.Second

// browserLook is a check's look at the browser: a closed browser fails the
// check rather than erroring.
func browserLook(err error) (string, error) {
	if errors.Is(err, ErrBrowserClosed) || errors.Is(err, devtools.ErrClosed) {
		return err.Error(), nil
	}
	if errors.Is(err, context.DeadlineExceeded) {
		// The agent's page may hold its scripts up (an alert() left open, a
		// busy loop): a failed check, not a grader that could not look.
		return fmt.Sprintf("the page did not answer within %s (a dialog such as alert() open, or a busy script): %v", browserAnswerTimeout, err), nil
	}
	return "", fmt.Errorf("ask the browser: %w", err)
}

func browserURL(ctx context.Context, env Env, c *Check) (bool, string, error) {
	return browserText(ctx, env, c, "URL", (*Browser).URL)
}

func browserTitle(ctx context.Context, env Env, c *Check) (bool, string, error) {
	return browserText(ctx, env, c, "title", (*Browser).Title)
}

func browserText(ctx context.Context, env Env, c *Check, what string, get func(*Browser, context.Context) (string, error)) (bool, string, error) {
	b, detail, err := taskBrowser(env)
	if b == nil {
		return false, detail, err
	}
	m, err := c.matcher()
	if err != nil {
		return false, "", err
	}
	ctx, cancel := context.WithTimeout(ctx, browserAnswerTimeout)
	defer cancel()
	text, err := get(b, ctx)
	if err != nil {
		detail, err := browserLook(err)
		return false, detail, err
	}
	if m.match(text) {
		return true, fmt.Sprintf("the active tab's %s is %s", what, quoteHead(text, 200)), nil
	}
	return false, fmt.Sprintf("the active tab's %s is %s, which %s does not hold", what, quoteHead(text, 200), m), nil
}

// elementScript finds the first element matching a selector and reads a
// property: innerText for "text", else the DOM property, given back as JSON
// (an object or function that JSON cannot hold as its String()).
const elementScript = `((sel, prop) => {
  const el = document.querySelector(sel);
  if (!el) return {found: false};
  let v = prop === "text" ? el.innerText : el[prop];
  if (v === undefined) return {found: true, missing: true};
  if (typeof v === "function" || (typeof v === "object" && v !== null)) {
    try { v = JSON.parse(JSON.stringify(v)); } catch (e) { v = String(v); }
    if (v === undefined) v = null;
  }
  if (typeof v === "string" && v.length > 1048576) v = v.slice(0, 1048576);
  else if (typeof v === "object" && v !== null) {
    const s = JSON.stringify(v);
    if (s.length > 1048576) v = s.slice(0, 1048576);
  }
  return {found: true, value: v};
})(%s, %s)`

func browserElement(ctx context.Context, env Env, c *Check) (bool, string, error) {
	b, detail, err := taskBrowser(env)
	if b == nil {
		return false, detail, err
	}
	ctx, cancel := context.WithTimeout(ctx, browserAnswerTimeout)
	defer cancel()
	page, err := b.Active(ctx)
	if err != nil {
		detail, err := browserLook(err)
		return false, detail, err
	}
	sel, _ := json.Marshal(c.Selector)
	prop, _ := json.Marshal(c.elementProperty())
	var res struct {
		Found   bool            `json:"found"`
		Missing bool            `json:"missing"`
		Value   json.RawMessage `json:"value"`
	}
	if err := page.Evaluate(ctx, fmt.Sprintf(elementScript, sel, prop), &res); err != nil {
		if strings.Contains(err.Error(), "is not a valid selector") {
			return false, "", fmt.Errorf("selector %q: %w", c.Selector, err)
		}
		detail, err := browserLook(err)
		return false, detail, err
	}
	if !res.Found {
		return false, fmt.Sprintf("no element in the active tab matches %q", c.Selector), nil
	}
	if res.Missing {
		return false, fmt.Sprintf("the element %q has no property %q", c.Selector, c.elementProperty()), nil
	}
	got, err := decodeJSON(res.Value)
	if err != nil {
		return false, "", fmt.Errorf("the browser's value: %w", err)
	}
	shown := cutText(jsonText(got), 200)
	if c.Equals != nil {
		want, err := decodeJSON(c.Equals)
		if err != nil {
			return false, "", err
		}
		if jsonEqual(want, got, c.numberTolerance()) {
			return true, fmt.Sprintf("%s of %q is %s", c.elementProperty(), c.Selector, shown), nil
		}
		return false, fmt.Sprintf("%s of %q is %s, not %s", c.elementProperty(), c.Selector, shown, cutText(string(c.Equals), 200)), nil
	}
	text, ok := got.(string)
	if !ok {
		text = jsonText(got)
	}
	m, err := c.matcher()
	if err != nil {
		return false, "", err
	}
	if m.match(text) {
		return true, fmt.Sprintf("%s of %q is %s", c.elementProperty(), c.Selector, shown), nil
	}
	return false, fmt.Sprintf("%s of %q is %s, which %s does not hold", c.elementProperty(), c.Selector, shown, m), nil
}

// bookmarkWait is how long browser_bookmark waits for a bookmark to reach
// the profile's Bookmarks file: Chromium writes it some 2.5 s after a
// change (its ImportantFileWriter batches writes), and CDP has no bookmarks
// API to ask it sooner.
const bookmarkWait = 5 * time.Second

// maxBookmarks is the most of the Bookmarks file read.
const maxBookmarks = 8 << 20

func browserBookmark(ctx context.Context, env Env, c *Check) (bool, string, error) {
	b, detail, err := taskBrowser(env)
	if b == nil {
		return false, detail, err
	}
	m, err := c.matcher()
	if err != nil {
		return false, "", err
	}
	file := b.profile + "/Default/Bookmarks"
	deadline := time.Now().Add(bookmarkWait)
	for {
		found, seen, rerr := readBookmarks(ctx, env, file, m)
		if rerr != nil && !errors.Is(rerr, ErrNoFile) {
			return false, "", rerr
		}
		if found != "" {
			return true, "bookmark " + found, nil
		}
		if time.Now().After(deadline) {
			if errors.Is(rerr, ErrNoFile) || len(seen) == 0 {
				return false, "the browser has no bookmarks", nil
			}
			return false, fmt.Sprintf("no bookmark's title or URL %s; bookmarks: %s", m, cutText(strings.Join(seen, ", "), 400)), nil
		}
		t := time.NewTimer(250 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false, "", ctx.Err()
		}
	}
}

type bookmarkNode struct {
	Type     string         `json:"type"`
	Name     string         `json:"name"`
	URL      string         `json:"url"`
	Children []bookmarkNode `json:"children"`
}

// readBookmarks reads the profile's Bookmarks (as the desktop user) and
// returns the first bookmark matching m ("title <url>") and all it saw.
func readBookmarks(ctx context.Context, env Env, file string, m matcher) (string, []string, error) {
	data, err := env.ReadFile(ctx, file, maxBookmarks)
	if err != nil {
		return "", nil, err
	}
	var doc struct {
		Roots map[string]json.RawMessage `json:"roots"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return "", nil, fmt.Errorf("the browser's Bookmarks file is not JSON: %w", err)
	}
	var seen []string
	var found string
	var walk func(n bookmarkNode, depth int)
	walk = func(n bookmarkNode, depth int) {
		if depth > 100 || found != "" {
			return
		}
		if n.Type == "url" {
			s := fmt.Sprintf("%q <%s>", n.Name, n.URL)
			seen = append(seen, s)
			if m.match(n.Name) || m.match(n.URL) {
				found = s
			}
		}
		for _, ch := range n.Children {
			walk(ch, depth+1)
		}
	}
	for _, raw := range doc.Roots {
		var n bookmarkNode
		if json.Unmarshal(raw, &n) == nil { // "sync_transaction_version" and such are no folders
			walk(n, 0)
		}
	}
	return found, seen, nil
}

func browserDownload(ctx context.Context, env Env, c *Check) (bool, string, error) {
	b, detail, err := taskBrowser(env)
	if b == nil {
		// The browser may be closed and its downloads still there.
		if err != nil {
			return false, detail, err
		}
	}
	m, err := c.matcher()
	if err != nil {
		return false, "", err
	}
	var names []string
	if b != nil {
		for _, d := range b.Downloads() {
			if d.State != "completed" {
				names = append(names, d.Filename+" ("+d.State+")")
				continue
			}
			if m.match(d.Filename) {
				return true, fmt.Sprintf("downloaded %s from %s", quoteHead(d.Filename, 120), quoteHead(d.URL, 200)), nil
			}
			names = append(names, d.Filename)
		}
	}
	// Also what is in ~/Downloads, as the desktop user sees it (a download
	// DevTools saw may have been renamed "name (1).csv"); Chromium's
	// unfinished ones end in .crdownload.
	res, rerr := env.Run(ctx, `cd "$HOME/Downloads" 2>/dev/null && for f in * .[!.]*; do [ -f "$f" ] && printf '%s\n' "$f"; done; true`)
	if rerr == nil {
		for _, f := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
			if f == "" || strings.HasSuffix(f, ".crdownload") {
				continue
			}
			if m.match(f) {
				return true, fmt.Sprintf("%s is in %s", quoteHead(f, 120), BrowserDownloads), nil
			}
			names = append(names, f)
		}
	}
	if len(names) == 0 {
		return false, "nothing has been downloaded", nil
	}
	return false, fmt.Sprintf("no download whose name %s; downloads: %s", m, cutText(strings.Join(names, ", "), 400)), nil
}
