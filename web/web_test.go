package web

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, method, path string, hdr map[string]string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func TestHandlerServes(t *testing.T) {
	h := Handler()
	tests := []struct {
		method, path string
		status       int
		ctype        string
		contains     string
	}{
		{"GET", "/", 200, "text/html", `<video id="video"`},
		{"GET", "/index.html", 200, "text/html", `src="app.js"`},
		{"GET", "/app.js", 200, "javascript", "window.deskenv"},
		{"GET", "/session.js", 200, "javascript", "stream/signal"},
		{"GET", "/keys.js", 200, "javascript", "export function keysymFor"},
		{"GET", "/style.css", 200, "text/css", "object-fit: contain"},
		{"GET", "/review.html", 200, "text/html", `src="review.js"`},
		{"GET", "/review.js", 200, "javascript", "api/recording/episodes"},
		{"HEAD", "/app.js", 200, "javascript", ""},
		{"GET", "/nope.js", 404, "", ""},
		{"GET", "/static/app.js", 404, "", ""},
		{"GET", "/../web.go", 404, "", ""},
		{"POST", "/", 405, "", "GET"},
		{"DELETE", "/app.js", 405, "", "GET"},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			res := get(t, h, tc.method, tc.path, nil)
			body, _ := io.ReadAll(res.Body)
			if res.StatusCode != tc.status {
				t.Fatalf("status %d, want %d (body %q)", res.StatusCode, tc.status, body)
			}
			if ct := res.Header.Get("Content-Type"); tc.ctype != "" && !strings.Contains(ct, tc.ctype) {
				t.Errorf("Content-Type %q, want it to contain %q", ct, tc.ctype)
			}
			if tc.contains != "" && !strings.Contains(string(body), tc.contains) {
				t.Errorf("body does not contain %q", tc.contains)
			}
			if tc.method == "HEAD" && len(body) != 0 {
				t.Errorf("HEAD returned a body of %d bytes", len(body))
			}
			if res.StatusCode == 200 {
				for _, k := range []string{"ETag", "Cache-Control", "X-Content-Type-Options", "Referrer-Policy"} {
					if res.Header.Get(k) == "" {
						t.Errorf("header %s missing", k)
					}
				}
			}
		})
	}
}

func TestHandlerRevalidates(t *testing.T) {
	h := Handler()
	etag := get(t, h, "GET", "/app.js", nil).Header.Get("ETag")
	tests := []struct {
		name, ifNoneMatch string
		status            int
	}{
		{"same etag", etag, http.StatusNotModified},
		{"weak same etag", "W/" + etag, http.StatusNotModified},
		{"one of a list", `"zzz", ` + etag, http.StatusNotModified},
		{"star", "*", http.StatusNotModified},
		{"other etag", `"0000"`, http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := get(t, h, "GET", "/app.js", map[string]string{"If-None-Match": tc.ifNoneMatch})
			if res.StatusCode != tc.status {
				t.Errorf("If-None-Match %q: status %d, want %d", tc.ifNoneMatch, res.StatusCode, tc.status)
			}
		})
	}
}

// Every file the page or a module refers to must be served, or the page
// breaks only in a browser.
func TestReferencesResolve(t *testing.T) {
	h := Handler()
	refs := regexp.MustCompile(`(?:src|href)="([^":]+)"|from '\./([^']+)'|import\('\./([^']+)'\)`)
	pages := []string{"/", "/app.js", "/session.js", "/input.js", "/keys.js", "/geometry.js", "/studio.js", "/recording.js", "/review.html", "/review.js", "/player.js", "/stats.js", "/lease.js", "/wsvideo.js", "/lobby.html", "/lobby.js"}
	seen := 0
	for _, p := range pages {
		body, _ := io.ReadAll(get(t, h, "GET", p, nil).Body)
		for _, m := range refs.FindAllStringSubmatch(string(body), -1) {
			ref := m[1] + m[2] + m[3]
			seen++
			if res := get(t, h, "GET", "/"+ref, nil); res.StatusCode != 200 {
				t.Errorf("%s refers to %q, which is not served (status %d)", p, ref, res.StatusCode)
			}
		}
	}
	if seen < 5 {
		t.Fatalf("found only %d references: the pattern no longer matches the files", seen)
	}
}

func TestPageHasPolicy(t *testing.T) {
	res := get(t, Handler(), "GET", "/", nil)
	csp := res.Header.Get("Content-Security-Policy")
	// blob: images are the review page's observations, fetched with the token in a header.
	for _, want := range []string{"script-src 'self'", "connect-src 'self' ws: wss:", "img-src 'self' data: blob:"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
		}
	}
}
