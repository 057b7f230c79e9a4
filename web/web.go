// Package web is the browser client: one page, plain JavaScript modules and
// CSS with no build step, embedded in the binary. The page speaks the stream
// protocol (docs/STREAM.md) to /stream/signal next to wherever it is served,
// so it works at / as well as under a prefix such as /d/1/.
package web

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"

	"github.com/deskenv/deskenv/auth"
)

//go:embed static
var static embed.FS

// contentSecurityPolicy allows only the page's own scripts and styles, and
// websockets back to the same host for signalling. Images may be blob: URLs:
// the review page (review.html) fetches observations with the token in a
// header and shows them from memory, so no token is ever in an image URL.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; " +
	"img-src 'self' data: blob:; media-src 'self' blob: mediastream:; connect-src 'self' ws: wss:; " +
	"object-src 'none'; base-uri 'none'; form-action 'none'"

type asset struct {
	body  []byte
	ctype string
	etag  string
}

type handler struct {
	assets map[string]asset // by URL path, "/" for the page
}

// Register serves the page at "/" behind the appliance's front door d. The
// page itself is public code; what it connects to is not. Its URL carries
// ?token=, which the page hands to the websocket.
//
// Beside it, GET whoami answers {"role": ..., "who": ...}: the role of the
// bearer token the page sends in its Authorization header ("" for none or an
// unknown one) and the name recordings carry for it (auth.WhoFrom, never
// the token). The page asks it which panels to show, rather than calling APIs its
// link may not use and filling the console with their 403s. It says nothing
// a token's holder could not learn by trying.
func Register(d *auth.Door) {
	d.Handle("/", auth.Policy{Public: true}, Handler())
	d.Handle("GET /whoami", auth.Policy{Public: true}, http.HandlerFunc(whoami))
}

func whoami(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	auth.WriteJSON(w, http.StatusOK, map[string]string{"role": string(auth.RoleFrom(r.Context())), "who": auth.WhoFrom(r.Context())})
}

// Handler serves the browser client: the page at "/" (and review.html, the
// review page) and their files beside them.
// Everything else is 404. Mount it at "/" (or under a prefix with
// http.StripPrefix).
func Handler() http.Handler {
	h := &handler{assets: map[string]asset{}}
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		ctype := mime.TypeByExtension(path.Ext(p))
		if ctype == "" {
			ctype = "application/octet-stream"
		}
		sum := sha256.Sum256(body)
		a := asset{body: body, ctype: ctype, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		name := strings.TrimPrefix(p, "static")
		h.assets[name] = a
		if name == "/index.html" {
			h.assets["/"] = a
		}
		return nil
	})
	if err != nil {
		// The files are compiled in: failing to read them is a broken build.
		panic(fmt.Sprintf("web: reading embedded files: %v", err))
	}
	return h
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed: the browser client is read with GET", http.StatusMethodNotAllowed)
		return
	}
	a, ok := h.assets[r.URL.Path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", a.ctype)
	hd.Set("ETag", a.etag)
	// Revalidate every time: the files are small and an upgraded server must
	// never run next to a stale cached script.
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Content-Type-Options", "nosniff")
	// The page URL may carry ?token=: never send it to anyone as a referrer.
	hd.Set("Referrer-Policy", "no-referrer")
	if strings.HasPrefix(a.ctype, "text/html") {
		hd.Set("Content-Security-Policy", contentSecurityPolicy)
	}
	if match := r.Header.Get("If-None-Match"); match != "" && etagMatches(match, a.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	hd.Set("Content-Length", fmt.Sprint(len(a.body)))
	if r.Method == http.MethodHead {
		return
	}
	w.Write(a.body)
}

func etagMatches(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == etag {
			return true
		}
	}
	return false
}
