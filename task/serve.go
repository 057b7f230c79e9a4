package task

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/deskenv/deskenv/internal/peer"
)

// Limits of the serve step's server.
const (
	maxServedFile = 32 << 20 // a file served
	maxPostBody   = 1 << 20  // a POST body stored
	maxPosts      = 1000     // POSTs stored per server
)

// server is a serve step's HTTP server: dir's files on 127.0.0.1:port, read
// as the desktop user reads them.
type server struct {
	env  *DisplayEnv
	dir  string
	srv  *http.Server
	mu   sync.Mutex
	n    int // POSTs stored
	done chan struct{}
	// allowed are the users whose connections it answers (clientCheck).
	allowed map[uint32]bool
}

// A serve step's port is the machine's: in pool mode every desktop's
// programs can reach it over loopback. Its folder is one desktop's task,
// and a POST writes the answer its checks read, so a server answers only
// connections opened by its own desktop's user, by deskenv's own user
// (its checks, an operator's tools run as it) and by root; another
// desktop's agent gets 403 whatever it sends. The kernel says who opened a
// connection (internal/peer), not anything the client could forge.

// serveClients are the users a serve step's server answers.
func (e *DisplayEnv) serveClients() map[uint32]bool {
	return map[uint32]bool{0: true, uint32(os.Geteuid()): true, e.sessionUID(): true}
}

// sessionUID is the user the desktop's programs run as.
func (e *DisplayEnv) sessionUID() uint32 {
	if e.d != nil {
		if c := e.d.Credential(); c != nil {
			return c.Uid
		}
	}
	return uint32(os.Geteuid())
}

// SharePorts makes the serve steps listen through ports, shared with the
// process's other desktops (Ports); without it each listens on its own.
func (e *DisplayEnv) SharePorts(ports *Ports) { e.ports = ports }

// clientCheck says why the request's connection is not answered, or "".
func (s *server) clientCheck(r *http.Request) string {
	uid, served, err := peer.RequestOwner(r)
	switch {
	case !served:
		return "" // the handler called directly, not through the listener
	case err != nil:
		// Fail closed: a client we cannot place may be another desktop.
		return fmt.Sprintf("cannot tell which local user opened this connection, so it is refused: %v", err)
	case !s.allowed[uid]:
		return fmt.Sprintf("this task's server answers its own desktop's programs and deskenv only: a connection of user %d is refused", uid)
	}
	return ""
}

// serveHost is an Env that can run a serve step's server (DisplayEnv).
type serveHost interface {
	serve(ctx context.Context, dir string, port int) error
}

func runServe(ctx context.Context, r *setupRun, s *Step) error {
	h, ok := r.env.(serveHost)
	if !ok {
		return errors.New("this environment cannot serve files")
	}
	return h.serve(ctx, expandPath(r.env.Home(), s.Dir), s.Port)
}

func (e *DisplayEnv) serve(ctx context.Context, dir string, port int) error {
	var ln net.Listener
	var err error
	if e.ports != nil {
		ln, err = e.ports.listen(ctx, port, e.sessionUID())
	} else {
		var lc net.ListenConfig
		ln, err = lc.Listen(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	}
	if err != nil {
		return fmt.Errorf("serve %s on port %d: %w", dir, port, err)
	}
	s := &server{env: e, dir: dir, done: make(chan struct{}), allowed: e.serveClients()}
	s.srv = &http.Server{Handler: s, ConnContext: peer.ConnContext, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 60 * time.Second, MaxHeaderBytes: 64 << 10,
		ErrorLog: slog.NewLogLogger(slog.Default().Handler(), slog.LevelDebug)}
	e.mu.Lock()
	e.served = append(e.served, s)
	e.mu.Unlock()
	go func() {
		defer close(s.done)
		s.srv.Serve(ln)
	}()
	return nil
}

// closeServers shuts the serve steps' servers down.
func (e *DisplayEnv) closeServers(ctx context.Context) {
	e.mu.Lock()
	list := e.served
	e.served = nil
	e.mu.Unlock()
	for _, s := range list {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		if s.srv.Shutdown(sctx) != nil {
			s.srv.Close()
		}
		cancel()
		<-s.done
	}
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if why := s.clientCheck(r); why != "" {
		http.Error(w, why, http.StatusForbidden)
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		s.get(w, r)
	case http.MethodPost:
		s.post(w, r)
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// serveScript reads $2 under the folder $1 as the desktop user: the path
// resolved (links too) must stay in the folder, a folder serves its
// index.html. It runs as the desktop user, so whatever a link the agent
// planted points at, it reads only what the agent could read itself.
const serveScript = `root=$(realpath -e -- "$1") || exit 102
p=$(realpath -e -- "$root/$2" 2>/dev/null) || exit 102
case "$p" in "$root"|"$root"/*) ;; *) exit 105;; esac
if [ -d "$p" ]; then p="$p/index.html"; [ -e "$p" ] || exit 102; fi
[ -f "$p" ] || exit 104
exec head -c "$3" -- "$p"`

func (s *server) get(w http.ResponseWriter, r *http.Request) {
	rel := path.Clean("/" + r.URL.Path)
	data, status, err := s.env.runRead(r.Context(), serveScript, s.dir, strings.TrimPrefix(rel, "/"), strconv.Itoa(maxServedFile+1))
	if err != nil {
		http.Error(w, err.Error(), status)
		return
	}
	if len(data) > maxServedFile {
		http.Error(w, "file too large to serve", http.StatusInternalServerError)
		return
	}
	name := rel
	if strings.HasSuffix(r.URL.Path, "/") || path.Ext(rel) == "" {
		// A folder's index.html, or a file without an extension.
		if bytes.HasPrefix(bytes.TrimSpace(data), []byte("<")) {
			name = "index.html"
		}
	}
	ctype := mime.TypeByExtension(path.Ext(name))
	if ctype == "" {
		ctype = http.DetectContentType(data)
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.Header().Set("Cache-Control", "no-store")
	if r.Method == http.MethodHead {
		return
	}
	w.Write(data)
}

// runRead runs script (sh -c, with args) as the desktop user and returns its
// output; exit statuses 102-105 are not found, a folder, not a file, outside
// the folder.
func (e *DisplayEnv) runRead(ctx context.Context, script string, args ...string) ([]byte, int, error) {
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", script, "sh"}, args...)...)
	cmd.Env = e.environ()
	cmd.Dir = e.workDir()
	cmd.Stdout = &capped{w: &out, n: maxServedFile + 1}
	cmd.Stderr = &capped{w: &errOut, n: 4 << 10}
	cmd.SysProcAttr = e.sysProcAttr()
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out.Bytes(), http.StatusOK, nil
	case errors.As(err, &exit):
		switch exit.ExitCode() {
		case 102, 104:
			return nil, http.StatusNotFound, errors.New("not found")
		case 105:
			return nil, http.StatusForbidden, errors.New("outside the served folder")
		}
	}
	return nil, http.StatusInternalServerError, fmt.Errorf("cannot read: %v %s", err, strings.TrimSpace(errOut.String()))
}

// post stores the body of a form submission as <dir>/.posted/<n>.json: a
// form's fields as an object (a field given twice as an array), a JSON body
// as it is, anything else as {"body": text}.
func (s *server) post(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxPostBody))
	if err != nil {
		http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
		return
	}
	var doc any
	ctype, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ctype {
	case "application/x-www-form-urlencoded":
		vals, err := url.ParseQuery(string(body))
		if err != nil {
			http.Error(w, "bad form: "+err.Error(), http.StatusBadRequest)
			return
		}
		doc = formObject(vals)
	case "multipart/form-data":
		r.Body = io.NopCloser(bytes.NewReader(body))
		if err := r.ParseMultipartForm(maxPostBody); err != nil {
			http.Error(w, "bad form: "+err.Error(), http.StatusBadRequest)
			return
		}
		doc = formObject(r.MultipartForm.Value)
	case "application/json":
		if !json.Valid(body) {
			http.Error(w, "body is not JSON", http.StatusBadRequest)
			return
		}
		doc = json.RawMessage(body)
	default:
		doc = map[string]string{"body": strings.ToValidUTF8(string(body), "\uFFFD")}
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	s.mu.Lock()
	if s.n >= maxPosts {
		s.mu.Unlock()
		http.Error(w, "too many submissions", http.StatusTooManyRequests)
		return
	}
	s.n++
	n := s.n
	s.mu.Unlock()
	file := filepath.Join(s.dir, ".posted", strconv.Itoa(n)+".json")
	if err := s.env.WriteFile(r.Context(), file, string(out)+"\n", 0o644); err != nil {
		http.Error(w, "cannot store: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(w, "<!doctype html>\n<title>Submitted</title>\n<p>Submitted (%d).</p>\n", n)
}

func formObject(vals map[string][]string) map[string]any {
	obj := make(map[string]any, len(vals))
	for k, v := range vals {
		if len(v) == 1 {
			obj[k] = v[0]
		} else {
			obj[k] = v
		}
	}
	return obj
}
