package mcpserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/deskenv/deskenv/internal/wire"
)

// FilesTrait is the files trait: read_file, write_file and list_files.
// Every path is resolved inside Home through os.Root, which refuses a path
// that leaves it, by ../ or by a symlink pointing out, at the moment of each
// open: a check of the path string alone would miss a symlink created in
// between.
type FilesTrait struct {
	// Home is the desktop user's home directory, the only tree reachable.
	Home string
	// MaxReadBytes is the largest file read_file returns; default 1 MiB.
	MaxReadBytes int
	// MaxWriteBytes is the most text one write_file call takes; default 1 MiB.
	MaxWriteBytes int
	// MaxEntries is the most entries list_files returns; default 1000.
	MaxEntries int
	// Owner is the session's user, who gets what write_file creates; nil
	// leaves it to this process's user.
	Owner *syscall.Credential
}

func (f FilesTrait) withDefaults() FilesTrait {
	if f.MaxReadBytes <= 0 {
		f.MaxReadBytes = 1 << 20
	}
	if f.MaxWriteBytes <= 0 {
		f.MaxWriteBytes = 1 << 20
	}
	if f.MaxEntries <= 0 {
		f.MaxEntries = 1000
	}
	return f
}

const pathDesc = "A path in the desktop user's home: relative to it (notes/a.txt), ~/notes/a.txt, or absolute inside it. Paths outside home, by ../ or through a symlink, are refused."

// Name is "files".
func (FilesTrait) Name() string { return "files" }

// Check refuses a home that is not an absolute path to a directory.
func (f FilesTrait) Check() error {
	if !filepath.IsAbs(f.Home) {
		return fmt.Errorf("mcpserver: the files trait's home %q must be an absolute path", f.Home)
	}
	if err := isDir(f.Home); err != nil {
		return fmt.Errorf("mcpserver: the files trait's home: %w", err)
	}
	return nil
}

// Tools are read_file, write_file and list_files.
func (f FilesTrait) Tools() []TraitTool {
	f = f.withDefaults()
	return []TraitTool{
		{
			Name: "read_file", Title: "Read a file", ReadOnly: true, Idempotent: true,
			Description: fmt.Sprintf("Read a UTF-8 text file in the desktop user's home (at most %d bytes).", f.MaxReadBytes),
			Params:      []TraitParam{{Name: "path", Type: ParamString, Required: true, Description: pathDesc}},
			Returns:     "-> str",
			Run:         f.read,
		},
		{
			Name: "write_file", Title: "Write a file", Destructive: true,
			Description: fmt.Sprintf("Write text to a file in the desktop user's home, creating it and its directories if needed "+
				"(at most %d bytes per call). Replaces the file unless append is true.", f.MaxWriteBytes),
			Params: []TraitParam{
				{Name: "path", Type: ParamString, Required: true, Description: pathDesc},
				{Name: "text", Type: ParamString, Required: true, Description: "The text to write."},
				{Name: "append", Type: ParamBoolean, Description: "Add to the end of the file instead of replacing it; default false."},
			},
			Returns: "-> int (bytes written)",
			Run:     f.write,
		},
		{
			Name: "list_files", Title: "List a directory", ReadOnly: true, Idempotent: true,
			Description: fmt.Sprintf("List a directory in the desktop user's home (default the home itself): each entry's name, "+
				"type (file, dir, symlink, other) and size, sorted by name, at most %d.", f.MaxEntries),
			Params:  []TraitParam{{Name: "path", Type: ParamString, Description: pathDesc + " Default: the home directory."}},
			Returns: "-> list of struct(name, type, size)",
			Run:     f.list,
		},
	}
}

// local turns a path as a model writes it into one relative to Home, or
// says why it cannot be one.
func (f FilesTrait) local(tool, p string, dflt bool) (string, error) {
	switch {
	case p == "" && dflt:
		return ".", nil
	case p == "":
		return "", fmt.Errorf("%s: the path is empty", tool)
	case strings.ContainsRune(p, 0):
		return "", fmt.Errorf("%s: the path contains a NUL byte", tool)
	case p == "~":
		return ".", nil
	case strings.HasPrefix(p, "~/"):
		p = p[2:]
	case filepath.IsAbs(p):
		rel, err := filepath.Rel(f.Home, p)
		if err != nil || !filepath.IsLocal(rel) {
			return "", fmt.Errorf("%s: %s is outside the home directory %s; files can only reach inside it", tool, wire.Quote(p), f.Home)
		}
		p = rel
	}
	p = filepath.Clean(p)
	if !filepath.IsLocal(p) {
		return "", fmt.Errorf("%s: %s leads outside the home directory %s; files can only reach inside it", tool, wire.Quote(p), f.Home)
	}
	return p, nil
}

// resolve checks the path p a call names and opens Home as a root to reach
// it through; the caller closes the root. A fresh root per call costs one
// open(2) and follows a reset that replaced the directory.
func (f FilesTrait) resolve(tool, p string, dflt bool) (*os.Root, string, error) {
	rel, err := f.local(tool, p, dflt)
	if err != nil {
		return nil, "", err
	}
	r, err := os.OpenRoot(f.Home)
	if err != nil {
		return nil, "", fmt.Errorf("%s: the home directory: %w", tool, err)
	}
	return r, rel, nil
}

// explain words os.Root's errors for the model. os.Root reports an escape
// with an unexported error whose text is all there is to recognise it by.
func (f FilesTrait) explain(tool, p string, err error) error {
	var pe *fs.PathError
	switch {
	case strings.Contains(err.Error(), "path escapes from parent"):
		return fmt.Errorf("%s: %s leads outside the home directory %s (through a symlink); files can only reach inside it", tool, wire.Quote(p), f.Home)
	case errors.Is(err, syscall.ENXIO):
		// O_NONBLOCK|O_WRONLY on a FIFO without a reader, or any open of a
		// socket.
		return fmt.Errorf("%s: %s is not a regular file (a FIFO or socket); files reads and writes regular files only", tool, wire.Quote(p))
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s: %s does not exist", tool, wire.Quote(p))
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%s: %s: permission denied", tool, wire.Quote(p))
	case errors.As(err, &pe):
		return fmt.Errorf("%s: %s: %w", tool, wire.Quote(p), pe.Err)
	}
	return fmt.Errorf("%s: %s: %w", tool, wire.Quote(p), err)
}

// ioChunk is how much a read or write moves between checks of the call's
// context.
const ioChunk = 64 << 10

// openRegular opens rel inside root without blocking and refuses anything
// but a regular file (or, with dirOK, a directory). A plain open(2) of a
// FIFO waits for the other end, forever if the session planted it and
// nobody writes, pinning a thread per call; O_NONBLOCK returns at once (or
// ENXIO for a FIFO opened to write with no reader, or a socket), and fstat
// on the open file, not a stat of the path before it, says what it is.
func (f FilesTrait) openRegular(tool, p string, root *os.Root, rel string, flag int, perm fs.FileMode, dirOK bool) (*os.File, fs.FileInfo, error) {
	file, err := root.OpenFile(rel, flag|syscall.O_NONBLOCK, perm)
	if err != nil {
		return nil, nil, f.explain(tool, p, err)
	}
	st, err := file.Stat()
	if err != nil {
		file.Close()
		return nil, nil, f.explain(tool, p, err)
	}
	switch {
	case st.Mode().IsRegular(), dirOK && st.IsDir():
		return file, st, nil
	case st.IsDir():
		file.Close()
		return nil, nil, fmt.Errorf("%s: %s is a directory; list it with list_files", tool, wire.Quote(p))
	}
	file.Close()
	return nil, nil, fmt.Errorf("%s: %s is not a regular file (%s); files reads and writes regular files only", tool, wire.Quote(p), st.Mode().Type())
}

func (f FilesTrait) read(ctx context.Context, a TraitArgs) (TraitResult, error) {
	const tool = "read_file"
	p := a.Str("path")
	if err := ctx.Err(); err != nil {
		return TraitResult{}, fmt.Errorf("%s: %w", tool, err)
	}
	root, rel, err := f.resolve(tool, p, false)
	if err != nil {
		return TraitResult{}, err
	}
	defer root.Close()
	file, st, err := f.openRegular(tool, p, root, rel, os.O_RDONLY, 0, false)
	if err != nil {
		return TraitResult{}, err
	}
	defer file.Close()
	if st.Size() > int64(f.MaxReadBytes) {
		return TraitResult{}, fmt.Errorf("%s: %s is %d bytes, more than the %d read_file returns; read part of it with bash (head, tail, grep) if that is enabled", tool, wire.Quote(p), st.Size(), f.MaxReadBytes)
	}
	// The file may grow between Stat and the read: read one byte past the
	// cap to notice. Read in chunks, to stop when the call is cancelled.
	var buf bytes.Buffer
	buf.Grow(int(st.Size()) + 1)
	if _, err := buf.ReadFrom(ctxReader{ctx, io.LimitReader(file, int64(f.MaxReadBytes)+1)}); err != nil {
		return TraitResult{}, f.explain(tool, p, err)
	}
	data := buf.Bytes()
	if len(data) > f.MaxReadBytes {
		return TraitResult{}, fmt.Errorf("%s: %s grew past %d bytes while it was read", tool, wire.Quote(p), f.MaxReadBytes)
	}
	if !utf8.Valid(data) {
		return TraitResult{}, fmt.Errorf("%s: %s is not UTF-8 text (%d bytes of binary data)", tool, wire.Quote(p), len(data))
	}
	return TraitResult{Value: string(data), Text: string(data)}, nil
}

func (f FilesTrait) write(ctx context.Context, a TraitArgs) (TraitResult, error) {
	const tool = "write_file"
	p, text := a.Str("path"), a.Str("text")
	if err := ctx.Err(); err != nil {
		return TraitResult{}, fmt.Errorf("%s: %w", tool, err)
	}
	if len(text) > f.MaxWriteBytes {
		return TraitResult{}, fmt.Errorf("%s: the text is %d bytes, more than the %d one call writes; write it in parts with append=true", tool, len(text), f.MaxWriteBytes)
	}
	root, rel, err := f.resolve(tool, p, false)
	if err != nil {
		return TraitResult{}, err
	}
	defer root.Close()
	if rel == "." {
		return TraitResult{}, fmt.Errorf("%s: %s is the home directory itself; name a file in it", tool, wire.Quote(p))
	}
	if dir := filepath.Dir(rel); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return TraitResult{}, f.explain(tool, p, err)
		}
	}
	// No O_TRUNC: what is there is truncated only once fstat has said it
	// is a regular file.
	flags := os.O_WRONLY | os.O_CREATE
	verb := "wrote"
	if a.Bool("append") {
		flags |= os.O_APPEND
		verb = "appended"
	}
	file, _, err := f.openRegular(tool, p, root, rel, flags, 0o644, false)
	if err != nil {
		return TraitResult{}, err
	}
	n, err := writeCtx(ctx, file, text, !a.Bool("append"))
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return TraitResult{}, f.explain(tool, p, err)
	}
	f.own(root, rel)
	return TraitResult{Value: int64(n), Text: fmt.Sprintf("%s %d bytes to %s", verb, n, filepath.Join(f.Home, rel))}, nil
}

// writeCtx truncates file (when replacing) and writes text to it in chunks,
// stopping when ctx is done.
func writeCtx(ctx context.Context, file *os.File, text string, truncate bool) (int, error) {
	if truncate {
		if err := file.Truncate(0); err != nil {
			return 0, err
		}
	}
	n, err := io.Copy(file, ctxReader{ctx, strings.NewReader(text)})
	return int(n), err
}

// ctxReader reads at most ioChunk bytes a call from r, and fails once ctx is
// done: a long read or write of a file stops between chunks when its call is
// cancelled.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p[:min(len(p), ioChunk)])
}

func (f FilesTrait) list(ctx context.Context, a TraitArgs) (TraitResult, error) {
	const tool = "list_files"
	p := a.Str("path")
	if err := ctx.Err(); err != nil {
		return TraitResult{}, fmt.Errorf("%s: %w", tool, err)
	}
	root, rel, err := f.resolve(tool, p, true)
	if err != nil {
		return TraitResult{}, err
	}
	defer root.Close()
	dir, st, err := f.openRegular(tool, p, root, rel, os.O_RDONLY, 0, true)
	if err != nil {
		return TraitResult{}, err
	}
	defer dir.Close()
	if !st.IsDir() {
		return TraitResult{}, fmt.Errorf("%s: %s is a file, not a directory; read it with read_file", tool, wire.Quote(p))
	}
	entries, err := dir.ReadDir(-1)
	if err != nil {
		return TraitResult{}, f.explain(tool, p, err)
	}
	// Unlike os.ReadDir, File.ReadDir keeps the directory's own order.
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	var b strings.Builder
	var list []any
	for i, e := range entries {
		if i == f.MaxEntries {
			fmt.Fprintf(&b, "[... %d more entries not shown]\n", len(entries)-i)
			break
		}
		typ, size := "other", int64(0)
		if info, err := e.Info(); err == nil {
			size = info.Size()
		}
		switch {
		case e.Type().IsRegular():
			typ = "file"
			fmt.Fprintf(&b, "%s (%d bytes)\n", e.Name(), size)
		case e.IsDir():
			typ = "dir"
			fmt.Fprintf(&b, "%s/\n", e.Name())
		case e.Type()&fs.ModeSymlink != 0:
			typ = "symlink"
			target, _ := root.Readlink(filepath.Join(rel, e.Name()))
			fmt.Fprintf(&b, "%s -> %s\n", e.Name(), target)
		default:
			fmt.Fprintf(&b, "%s (%s)\n", e.Name(), e.Type())
		}
		list = append(list, map[string]any{"name": e.Name(), "type": typ, "size": size})
	}
	if len(entries) == 0 {
		b.WriteString("(empty directory)\n")
	}
	return TraitResult{Value: list, Text: strings.TrimSuffix(b.String(), "\n")}, nil
}
