package display

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// X access control. Every Xvfb this package starts gets -auth with a file
// holding one fresh MIT-MAGIC-COOKIE-1, so the server refuses any client
// that does not present it: another desktop's programs, or any other local
// process. Two parties hold the cookie:
//
//   - the session, through a file of its own named by $XAUTHORITY in Env():
//     per display, <dir>/session, owned by the session user (0600) in a
//     directory deskenv owns (0711), so the session can read its cookie but
//     cannot swap the file for a link that deskenv would then write through;
//   - this process, whose own X connections (xgb) read $XAUTHORITY: xgb has
//     no way to be handed a cookie, so the process's $XAUTHORITY names one
//     private file (0600 in a 0700 directory) holding an entry per display
//     this process started, keyed by display number.
//
// Entries are written with family FamilyWild, which Xlib and xgb both
// match against any host, and the display number.

const (
	familyWild  = 0xffff
	cookieName  = "MIT-MAGIC-COOKIE-1"
	cookieBytes = 16
)

// authEntry is one record of an Xauthority file.
type authEntry struct {
	family uint16
	addr   string
	number string
	name   string
	data   []byte
}

func (e authEntry) marshal(w *bytes.Buffer) {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], e.family)
	w.Write(b[:])
	for _, f := range [][]byte{[]byte(e.addr), []byte(e.number), []byte(e.name), e.data} {
		binary.BigEndian.PutUint16(b[:], uint16(len(f)))
		w.Write(b[:])
		w.Write(f)
	}
}

// parseAuth reads the records of an Xauthority file; a truncated last record
// ends the list (as Xlib reads it).
func parseAuth(b []byte) []authEntry {
	r := bytes.NewReader(b)
	var out []authEntry
	for {
		var e authEntry
		if err := binary.Read(r, binary.BigEndian, &e.family); err != nil {
			return out
		}
		var fields [4][]byte
		for i := range fields {
			var n uint16
			if err := binary.Read(r, binary.BigEndian, &n); err != nil {
				return out
			}
			fields[i] = make([]byte, n)
			if _, err := io.ReadFull(r, fields[i]); err != nil {
				return out
			}
		}
		e.addr, e.number, e.name, e.data = string(fields[0]), string(fields[1]), string(fields[2]), fields[3]
		out = append(out, e)
	}
}

func marshalAuth(es []authEntry) []byte {
	var buf bytes.Buffer
	for _, e := range es {
		e.marshal(&buf)
	}
	return buf.Bytes()
}

// writeFileAtomic writes data to a new file in path's directory and renames
// it over path: the rename replaces whatever path was (a link included)
// without following it, and readers see the old file or the new one.
func writeFileAtomic(path string, data []byte, uid, gid int) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".xauth-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && uid >= 0 {
		err = os.Chown(tmp, uid, gid)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// xauth is one display's cookie and the files that carry it.
type xauth struct {
	cookie []byte
	dir    string // deskenv's, 0711: server (0600, deskenv's) and session (0600, the session user's)
	uid    int    // owner of the session's copy; -1 means this process's user
	gid    int
}

func newXauth(cred *syscall.Credential) (*xauth, error) {
	a := &xauth{cookie: make([]byte, cookieBytes), uid: -1, gid: -1}
	if _, err := rand.Read(a.cookie); err != nil {
		return nil, fmt.Errorf("make an X authorization cookie: %w", err)
	}
	if cred != nil {
		a.uid, a.gid = int(cred.Uid), int(cred.Gid)
	}
	dir, err := os.MkdirTemp("", "deskenv-xauth-")
	if err != nil {
		return nil, fmt.Errorf("make a directory for the X authorization files: %w", err)
	}
	// Traverse only: the session opens its own file by name and can list
	// nothing, and cannot replace the files either.
	if err := os.Chmod(dir, 0o711); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	a.dir = dir
	server := authEntry{family: familyWild, name: cookieName, data: a.cookie}
	if err := writeFileAtomic(a.serverFile(), marshalAuth([]authEntry{server}), -1, -1); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("write the X server's authorization file: %w", err)
	}
	return a, nil
}

func (a *xauth) serverFile() string  { return filepath.Join(a.dir, "server") }
func (a *xauth) sessionFile() string { return filepath.Join(a.dir, "session") }

func (a *xauth) entry(num int) authEntry {
	return authEntry{family: familyWild, number: strconv.Itoa(num), name: cookieName, data: a.cookie}
}

// publish gives display num's cookie to the session (its own file, written
// again each time, in case a program removed it) and to this process's X
// connections.
func (a *xauth) publish(num int) error {
	if err := writeFileAtomic(a.sessionFile(), marshalAuth([]authEntry{a.entry(num)}), a.uid, a.gid); err != nil {
		return fmt.Errorf("write the session's X authorization file: %w", err)
	}
	if err := processAuth.add(a.entry(num)); err != nil {
		return fmt.Errorf("add display :%d's cookie to this process's X authorization file: %w", num, err)
	}
	return nil
}

// close forgets display num's cookie (none when num < 0: the server never
// got a number) and removes the files.
func (a *xauth) close(num int) {
	if num >= 0 {
		processAuth.remove(strconv.Itoa(num))
	}
	os.RemoveAll(a.dir)
}

// processAuth is this process's own Xauthority file. It is package state
// because what it stands for is process state: xgb reads $XAUTHORITY from
// the process environment, shared by every display the process serves.
var processAuth = &procAuth{}

type procAuth struct {
	mu      sync.Mutex
	dir     string // ours, made on first use and removed with the last entry
	prev    string // $XAUTHORITY before, restored after the last entry
	hadPrev bool
	entries []authEntry // ours, one per display number
}

func (p *procAuth) add(e authEntry) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dir == "" {
		dir, err := os.MkdirTemp("", "deskenv-xauth-self-")
		if err != nil {
			return err
		}
		p.dir = dir
		p.prev, p.hadPrev = os.LookupEnv("XAUTHORITY")
	}
	p.entries = slicesDeleteNumber(p.entries, e.number)
	p.entries = append(p.entries, e)
	if err := p.write(); err != nil {
		return err
	}
	return os.Setenv("XAUTHORITY", p.file())
}

func (p *procAuth) remove(number string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dir == "" {
		return
	}
	p.entries = slicesDeleteNumber(p.entries, number)
	if len(p.entries) > 0 {
		p.write()
		return
	}
	if os.Getenv("XAUTHORITY") == p.file() {
		if p.hadPrev {
			os.Setenv("XAUTHORITY", p.prev)
		} else {
			os.Unsetenv("XAUTHORITY")
		}
	}
	os.RemoveAll(p.dir)
	p.dir = ""
}

func (p *procAuth) file() string { return filepath.Join(p.dir, "Xauthority") }

// write puts this process's entries first, then those of the file that
// $XAUTHORITY (or ~/.Xauthority) named before, so displays this process
// only attaches to still find their cookies.
func (p *procAuth) write() error {
	all := append([]authEntry(nil), p.entries...)
	prev := p.prev
	if !p.hadPrev {
		if h := os.Getenv("HOME"); h != "" {
			prev = filepath.Join(h, ".Xauthority")
		}
	}
	if prev != "" && prev != p.file() {
		if b, err := os.ReadFile(prev); err == nil {
			all = append(all, parseAuth(b)...)
		}
	}
	return writeFileAtomic(p.file(), marshalAuth(all), -1, -1)
}

func slicesDeleteNumber(es []authEntry, number string) []authEntry {
	out := es[:0]
	for _, e := range es {
		if e.number != number {
			out = append(out, e)
		}
	}
	return out
}

// readCookie returns the cookie for display number num in the Xauthority
// file path, for tests and diagnostics.
func readCookie(path string, num int) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	for _, e := range parseAuth(b) {
		if e.name == cookieName && (e.number == "" || e.number == strconv.Itoa(num)) {
			return e.data, nil
		}
	}
	return nil, errors.New("no cookie for display :" + strconv.Itoa(num) + " in " + path)
}

// envWithout is env without the variables named by keys (KEY=...).
func envWithout(env []string, keys ...string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, x := range keys {
			if k == x {
				drop = true
			}
		}
		if !drop {
			out = append(out, kv)
		}
	}
	return out
}
