package wire

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

func TestCheckJSON(t *testing.T) {
	tests := []struct {
		raw string
		err string // "" when valid
	}{
		{`{"text":"héllo"}`, ""},
		{`{"text":"\u00e9\n\"\\"}`, ""},
		{`{"text":"\ud83d\ude00"}`, ""},        // a surrogate pair is one character
		{`{"text":"\\ud800"}`, ""},             // an escaped backslash, then text
		{`{"text":"\ud800"}`, "\\ud800"},       // high surrogate alone
		{`{"text":"\ud800x"}`, "\\ud800"},      // followed by something else
		{`{"text":"\ud800\u0041"}`, "\\ud800"}, // followed by a non-surrogate escape
		{`{"text":"\udc00"}`, "\\udc00"},       // low surrogate alone
		{`{"\udfff":1}`, "\\udfff"},            // keys are strings too
		{"{\"text\":\"a\xffb\"}", "the byte 0xff at byte 10"},
		{"{\"text\":\"\xc3\"}", "the byte 0xc3"}, // a truncated sequence
		{"{\"text\":\"\xed\xa0\x80\"}", "0xed"},  // a surrogate encoded in UTF-8
		{`{"text":"\u12`, ""},                    // bad syntax is the decoder's to report
	}
	for _, tt := range tests {
		err := CheckJSON([]byte(tt.raw))
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("CheckJSON(%q) = %v, want nil", tt.raw, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("CheckJSON(%q) = %v, want an error containing %q", tt.raw, err, tt.err)
		}
		// Whatever CheckJSON passes, encoding/json decodes without U+FFFD.
		var v any
		if err == nil && json.Unmarshal([]byte(tt.raw), &v) == nil {
			if b, _ := json.Marshal(v); strings.Contains(string(b), "\ufffd") {
				t.Errorf("CheckJSON(%q) passed text that decodes to U+FFFD", tt.raw)
			}
		}
	}
}

func TestQuote(t *testing.T) {
	if got := Quote("abc"); got != `"abc"` {
		t.Errorf("Quote(abc) = %s", got)
	}
	long := strings.Repeat("é", 100) // 200 bytes
	got := Quote(long)
	if !strings.HasSuffix(got, "… (200 bytes)") || len(got) > QuoteBytes+30 {
		t.Errorf("Quote(200 bytes) = %s", got)
	}
	if got := Prefix(strings.Repeat("x", 100), 10); got != "xxxxxxxxxx…" {
		t.Errorf("Prefix = %s", got)
	}
}

func TestSeconds(t *testing.T) {
	tests := []struct {
		s    float64
		want time.Duration
		ok   bool
	}{
		{1.5, 1500 * time.Millisecond, true},
		{0, 0, true},
		{-1, 0, false},
		{math.NaN(), 0, false},
		{math.Inf(1), 0, false},
		{1e300, 0, false},
		{101, 0, false},
	}
	for _, tt := range tests {
		d, err := Seconds("timeout", tt.s, 0, 100)
		if (err == nil) != tt.ok || d != tt.want {
			t.Errorf("Seconds(%g) = %v, %v", tt.s, d, err)
		}
	}
	// A bound past the Duration range is still safe.
	if _, err := Seconds("x", 1e12, 0, math.MaxFloat64); err == nil {
		t.Errorf("Seconds(1e12 s) did not overflow-check")
	}
}

func TestMarshalKeepsMarkup(t *testing.T) {
	tests := []struct {
		in   any
		want string
	}{
		{map[string]string{"text": "a<b>&c"}, `{"text":"a<b>&c"}`},
		{"echo 1 > f && cat <f", `"echo 1 > f && cat <f"`},
		{[]int{1, 2}, `[1,2]`},
	}
	for _, tt := range tests {
		got, err := Marshal(tt.in)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tt.want {
			t.Errorf("Marshal(%v) = %s, want %s", tt.in, got, tt.want)
		}
	}
	if _, err := Marshal(func() {}); err == nil {
		t.Error("Marshal of a func gave no error")
	}
}
