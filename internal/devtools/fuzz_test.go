package devtools

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"testing"
	"time"
)

// FuzzReadMessage feeds the reader any bytes: it returns messages no longer
// than the limit, without their NUL, that together with the NULs are a
// prefix of the input, and ends.
func FuzzReadMessage(f *testing.F) {
	f.Add([]byte("{\"id\":1,\"result\":{}}\x00{\"method\":\"Page.loadEventFired\"}\x00"), 64)
	f.Add([]byte("\x00\x00\x00"), 1)
	f.Add(bytes.Repeat([]byte("a"), 300), 100)
	f.Fuzz(func(t *testing.T, data []byte, max int) {
		if max <= 0 || max > 1<<16 {
			max = 1 << 10
		}
		br := bufio.NewReaderSize(bytes.NewReader(data), 16)
		var got []byte
		for {
			m, err := ReadMessage(br, max)
			if err != nil {
				break
			}
			if len(m) > max || bytes.IndexByte(m, 0) >= 0 {
				t.Fatalf("message of %d bytes (limit %d) or holding a NUL", len(m), max)
			}
			got = append(append(got, m...), 0)
		}
		if !bytes.HasPrefix(data, got) {
			t.Fatalf("messages are not the input's start")
		}
	})
}

// FuzzConn has a Conn read whatever a broken or hostile browser writes: no
// panic, and a call ends (answered, refused or closed) rather than hanging.
func FuzzConn(f *testing.F) {
	f.Add([]byte("{\"id\":1,\"result\":{\"a\":1}}\x00"))
	f.Add([]byte("{\"id\":1,\"error\":{\"code\":1,\"message\":\"x\"}}\x00"))
	f.Add([]byte("{\"method\":\"Browser.downloadWillBegin\",\"params\":{\"guid\":\"g\",\"suggestedFilename\":\"a.csv\"}}\x00{\"method\":\"Browser.downloadProgress\",\"params\":{\"guid\":\"g\",\"state\":\"completed\"}}\x00"))
	f.Add([]byte("{\"id\":\"x\"}\x00[1]\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cmdR, cmdW := io.Pipe()
		go io.Copy(io.Discard, cmdR)
		// The browser writes data and then nothing more; Close ends both.
		evR, evW := io.Pipe()
		go evW.Write(data)
		b := Open(evR, cmdW)
		defer b.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		b.Conn().Call(ctx, "", "Browser.getVersion", nil, new(map[string]any))
		b.Downloads()
	})
}
