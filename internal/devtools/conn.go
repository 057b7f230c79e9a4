// Package devtools speaks the Chrome DevTools Protocol (CDP) to a Chromium
// started with --remote-debugging-pipe: the browser reads commands from its
// fd 3 and writes answers and events to its fd 4, each message one JSON
// object ended by a NUL byte. Only the process holding the other ends of
// those pipes can drive the browser; there is no TCP port another local
// program could connect to.
//
// It is a small client of its own rather than chromedp: chromedp wants to
// launch the browser itself and talks over a TCP websocket (the very port we
// want to avoid), and its generated cdproto types (some 100k lines) buy
// nothing for the dozen commands deskenv sends, which are plain JSON.
package devtools

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// DefaultMaxMessage is the largest message a Conn reads: a page's evaluation
// result or the target list is far smaller; anything bigger is a broken or
// hostile peer, and the connection ends rather than buffering it.
const DefaultMaxMessage = 16 << 20

// ErrClosed is returned by calls when the connection has ended (the browser
// exited or Close was called); errors.Is holds for what they return.
var ErrClosed = errors.New("the browser's DevTools connection is closed")

// ErrTooLarge is the reader's error for a message over the size limit.
var ErrTooLarge = errors.New("DevTools message is larger than the limit")

// Event is a CDP event: its method, such as "Page.loadEventFired", the
// session it came from ("" for the browser) and its parameters.
type Event struct {
	Method    string
	SessionID string
	Params    json.RawMessage
}

// Error is an error the browser answered a command with.
type Error struct {
	Method  string
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string {
	return fmt.Sprintf("DevTools %s: %s (code %d)", e.Method, e.Message, e.Code)
}

// Options configure a Conn.
type Options struct {
	// MaxMessage is the largest message read; 0 means DefaultMaxMessage.
	MaxMessage int
	// OnEvent is called for every event, on the reading goroutine: it must
	// not block or call the Conn.
	OnEvent func(Event)
}

type response struct {
	result json.RawMessage
	err    *Error
}

// Conn is a CDP connection over a pair of pipes. It is safe for concurrent
// use.
type Conn struct {
	w       io.WriteCloser
	r       io.ReadCloser
	max     int
	onEvent func(Event)

	wmu     sync.Mutex // one message written at a time
	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan response
	done    chan struct{}
	err     error // why it ended, set before done is closed
	once    sync.Once
}

// New starts a connection that writes commands to w (the browser's fd 3)
// and reads from r (the browser's fd 4). Close closes both.
func New(r io.ReadCloser, w io.WriteCloser, opt Options) *Conn {
	if opt.MaxMessage <= 0 {
		opt.MaxMessage = DefaultMaxMessage
	}
	c := &Conn{w: w, r: r, max: opt.MaxMessage, onEvent: opt.OnEvent,
		pending: map[int64]chan response{}, done: make(chan struct{})}
	go c.read()
	return c
}

// Done is closed when the connection has ended; Err says why.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err is why the connection ended, nil while it is open.
func (c *Conn) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// Close ends the connection; pending calls return ErrClosed.
func (c *Conn) Close() error {
	c.end(ErrClosed)
	return nil
}

func (c *Conn) end(err error) {
	c.once.Do(func() {
		c.mu.Lock()
		c.err = err
		c.pending = map[int64]chan response{}
		c.mu.Unlock()
		c.w.Close()
		c.r.Close()
		close(c.done)
	})
}

// message is what the browser writes: an answer (ID set) or an event.
type message struct {
	ID        int64           `json:"id"`
	Method    string          `json:"method"`
	SessionID string          `json:"sessionId"`
	Params    json.RawMessage `json:"params"`
	Result    json.RawMessage `json:"result"`
	Error     *Error          `json:"error"`
}

func (c *Conn) read() {
	br := bufio.NewReaderSize(c.r, 64<<10)
	for {
		raw, err := ReadMessage(br, c.max)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) {
				c.end(fmt.Errorf("%w: the browser closed its end (it exited?)", ErrClosed))
			} else {
				c.end(fmt.Errorf("%w: %w", ErrClosed, err))
			}
			return
		}
		var m message
		if err := json.Unmarshal(raw, &m); err != nil {
			c.end(fmt.Errorf("%w: the browser wrote a message that is not JSON: %w", ErrClosed, err))
			return
		}
		if m.ID == 0 {
			if m.Method != "" && c.onEvent != nil {
				c.onEvent(Event{Method: m.Method, SessionID: m.SessionID, Params: m.Params})
			}
			continue
		}
		c.mu.Lock()
		ch := c.pending[m.ID]
		delete(c.pending, m.ID)
		c.mu.Unlock()
		if ch != nil {
			ch <- response{result: m.Result, err: m.Error} // buffered: never blocks
		}
	}
}

// ReadMessage reads one NUL-terminated message of at most max bytes (the NUL
// not counted) and returns it without the NUL. A longer message is
// ErrTooLarge; the reader is then mid-message and unusable.
func ReadMessage(br *bufio.Reader, max int) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice(0)
		if len(buf)+len(chunk) > max+1 {
			return nil, fmt.Errorf("%w (%d bytes)", ErrTooLarge, max)
		}
		buf = append(buf, chunk...)
		switch {
		case err == nil:
			return buf[:len(buf)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(buf) > 0:
			return nil, fmt.Errorf("the browser's message was cut off after %d bytes: %w", len(buf), io.ErrUnexpectedEOF)
		default:
			return nil, err
		}
	}
}

// Call sends method with params (nil: none) to the browser, or to the
// target attached as sessionID, and decodes the result into result (nil:
// ignored). It returns when the answer comes, ctx ends or the connection
// ends.
func (c *Conn) Call(ctx context.Context, sessionID, method string, params, result any) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("DevTools %s: %w", method, err)
	}
	ch := make(chan response, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return fmt.Errorf("DevTools %s: %w", method, err)
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = ch
	c.mu.Unlock()

	msg := map[string]any{"id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if sessionID != "" {
		msg["sessionId"] = sessionID
	}
	b, err := json.Marshal(msg)
	if err != nil {
		c.forget(id)
		return fmt.Errorf("DevTools %s: encode the parameters: %w", method, err)
	}
	if bytes.IndexByte(b, 0) >= 0 { // json.Marshal escapes NUL in strings; be sure
		c.forget(id)
		return fmt.Errorf("DevTools %s: the message holds a NUL byte", method)
	}
	if err := c.write(ctx, append(b, 0)); err != nil {
		c.forget(id)
		return fmt.Errorf("DevTools %s: %w", method, err)
	}
	select {
	case r := <-ch:
		if r.err != nil {
			r.err.Method = method
			return r.err
		}
		if result != nil {
			if err := json.Unmarshal(r.result, result); err != nil {
				return fmt.Errorf("DevTools %s: decode the answer: %w", method, err)
			}
		}
		return nil
	case <-ctx.Done():
		c.forget(id)
		return fmt.Errorf("DevTools %s: no answer: %w", method, ctx.Err())
	case <-c.done:
		return fmt.Errorf("DevTools %s: %w", method, c.err)
	}
}

func (c *Conn) forget(id int64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// write writes one message. A browser that stops reading would block the
// write forever, so it runs aside and ctx or the connection's end abandons
// it (closing the connection then, since a half-written message breaks
// the stream).
func (c *Conn) write(ctx context.Context, b []byte) error {
	errc := make(chan error, 1)
	go func() {
		c.wmu.Lock()
		defer c.wmu.Unlock()
		_, err := c.w.Write(b)
		errc <- err
	}()
	select {
	case err := <-errc:
		if err != nil {
			c.end(fmt.Errorf("%w: write: %w", ErrClosed, err))
			return c.err
		}
		return nil
	case <-ctx.Done():
		c.end(fmt.Errorf("%w: a write did not finish: %w", ErrClosed, ctx.Err()))
		return ctx.Err()
	case <-c.done:
		return c.err
	}
}
