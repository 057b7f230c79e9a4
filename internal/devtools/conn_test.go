package devtools

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// peer is the browser's side of a Conn: it reads the commands and answers
// as the test says.
type peer struct {
	in  *bufio.Reader // commands the Conn wrote
	out io.WriteCloser
}

func pair(t *testing.T, opt Options) (*Conn, *peer) {
	t.Helper()
	cmdR, cmdW := io.Pipe()
	evR, evW := io.Pipe()
	c := New(evR, cmdW, opt)
	t.Cleanup(func() { c.Close() })
	return c, &peer{in: bufio.NewReader(cmdR), out: evW}
}

func (p *peer) next(t *testing.T) map[string]any {
	t.Helper()
	raw, err := ReadMessage(p.in, 1<<20)
	if err != nil {
		t.Errorf("peer: %v", err)
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Errorf("peer: the command is not JSON: %v", err)
	}
	return m
}

func (p *peer) send(s string) { p.out.Write(append([]byte(s), 0)) }

func TestCall(t *testing.T) {
	events := make(chan Event, 4)
	c, p := pair(t, Options{OnEvent: func(e Event) { events <- e }})
	go func() {
		m := p.next(t)
		p.send(`{"method":"Page.loadEventFired","sessionId":"S","params":{"timestamp":1}}`)
		// Answers carry the command's id; an error answer is an *Error.
		p.send(`{"id":` + jsonText(m["id"]) + `,"result":{"product":"Chrome/1"},"sessionId":"S"}`)
		m = p.next(t)
		p.send(`{"id":` + jsonText(m["id"]) + `,"error":{"code":-32601,"message":"'Nope.nope' wasn't found"}}`)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var res struct{ Product string }
	if err := c.Call(ctx, "S", "Browser.getVersion", nil, &res); err != nil || res.Product != "Chrome/1" {
		t.Fatalf("Call: %+v, %v", res, err)
	}
	if e := <-events; e.Method != "Page.loadEventFired" || e.SessionID != "S" {
		t.Errorf("event %+v", e)
	}
	var derr *Error
	if err := c.Call(ctx, "", "Nope.nope", map[string]int{"a": 1}, nil); !errors.As(err, &derr) || derr.Code != -32601 || !strings.Contains(err.Error(), "Nope.nope") {
		t.Errorf("error answer: %v", err)
	}
}

func jsonText(v any) string { b, _ := json.Marshal(v); return string(b) }

// TestCallEnds: a pending call returns when ctx ends, when the browser goes
// away and when the browser sends what is not CDP; later calls too.
func TestCallEnds(t *testing.T) {
	for _, tc := range []struct {
		name string
		act  func(c *Conn, p *peer, cancel context.CancelFunc)
		want string
	}{
		{"context", func(_ *Conn, _ *peer, cancel context.CancelFunc) { cancel() }, "context canceled"},
		{"browser exits", func(_ *Conn, p *peer, _ context.CancelFunc) { p.out.Close() }, "closed its end"},
		{"closed", func(c *Conn, _ *peer, _ context.CancelFunc) { c.Close() }, "is closed"},
		{"not JSON", func(_ *Conn, p *peer, _ context.CancelFunc) { p.send("{nope") }, "not JSON"},
		{"too large", func(_ *Conn, p *peer, _ context.CancelFunc) { p.send(`{"x":"` + strings.Repeat("a", 2000) + `"}`) }, "larger than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, p := pair(t, Options{MaxMessage: 1024})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			go func() {
				p.next(t)
				tc.act(c, p, cancel)
			}()
			err := c.Call(ctx, "", "Browser.getVersion", nil, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Call: %v, want an error saying %q", err, tc.want)
			}
			if tc.name == "context" {
				return
			}
			if err := c.Call(context.Background(), "", "Browser.getVersion", nil, nil); !errors.Is(err, ErrClosed) {
				t.Errorf("a call after the end: %v, want ErrClosed", err)
			}
		})
	}
}

func TestReadMessage(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  int
		want []string
		err  string
	}{
		{"{}\x00{\"a\":1}\x00", 100, []string{"{}", `{"a":1}`}, "EOF"},
		{"\x00", 100, []string{""}, "EOF"},
		{"{}", 100, nil, "cut off"},
		{strings.Repeat("a", 10) + "\x00", 10, []string{strings.Repeat("a", 10)}, "EOF"},
		{strings.Repeat("a", 11) + "\x00", 10, nil, "larger than"},
		{strings.Repeat("a", 100000) + "\x00", 200000, []string{strings.Repeat("a", 100000)}, "EOF"},
	} {
		br := bufio.NewReaderSize(strings.NewReader(tc.in), 16)
		var got []string
		var err error
		for {
			var m []byte
			if m, err = ReadMessage(br, tc.max); err != nil {
				break
			}
			got = append(got, string(m))
		}
		if strings.Join(got, "|") != strings.Join(tc.want, "|") || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%.20q max %d: %d messages, err %v; want %d, %q", tc.in, tc.max, len(got), err, len(tc.want), tc.err)
		}
	}
}
