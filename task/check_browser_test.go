package task

import (
	"strings"
	"testing"
)

// TestBrowserParseErrors: the new steps and checks say what is wrong with a
// task file, and where.
func TestBrowserParseErrors(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`"setup": [{"type": "serve", "dir": "~/site", "port": 80}]`, "port: must be a port between 1024 and 65535, got 80"},
		{`"setup": [{"type": "serve", "dir": "~/site", "port": 70000}]`, "between 1024 and 65535"},
		{`"setup": [{"type": "serve", "dir": "~/site", "port": "8123"}]`, "port: must be a whole number"},
		{`"setup": [{"type": "serve", "port": 8123}]`, "dir"},
		{`"setup": [{"type": "serve", "dir": "~/site"}]`, "port"},
		{`"setup": [{"type": "browser"}]`, "url"},
		{`"setup": [{"type": "browser", "url": "http://a/", "path": "~/a.html"}]`, "url"},
		{`"setup": [{"type": "browser", "url": "index.html"}]`, "is not a URL"},
		{`"setup": [{"type": "browser", "url": "http://a/", "with": ["x"]}]`, "with"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			_, err := Parse([]byte(`{"id": "t", "instruction": "x", `+tc.doc+`, "evaluator": {"type": "browser_url", "contains": "a"}}`), "t.json")
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "t.json:") {
				t.Errorf("error %v, want it to say %q and where", err, tc.want)
			}
		})
	}
	for _, tc := range []struct{ check, want string }{
		{`{"type": "browser_url"}`, "contains"},
		{`{"type": "browser_title", "contains": "a", "selector": "x"}`, `selector: not used by "browser_title"`},
		{`{"type": "browser_element", "contains": "a"}`, "selector"},
		{`{"type": "browser_element", "selector": "#a"}`, `needs "equals", "contains" or "matches"`},
		{`{"type": "browser_element", "selector": "#a", "equals": 1, "contains": "1"}`, "not both"},
		{`{"type": "browser_element", "selector": "", "equals": 1}`, "selector: must not be empty"},
		{`{"type": "browser_bookmark", "matches": "("}`, "regular expression"},
		{`{"type": "browser_download"}`, "contains"},
	} {
		t.Run(tc.check, func(t *testing.T) {
			_, err := Parse([]byte(`{"id": "t", "instruction": "x", "evaluator": `+tc.check+`}`), "t.json")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to say %q", err, tc.want)
			}
		})
	}
}
