package stream

import (
	"strings"
	"testing"

	"github.com/pion/webrtc/v4"
)

// badDataChannel is the table of bad input for the data channel's decoder:
// nulls where numbers go (JavaScript sends NaN and Infinity as null), numbers
// too large, not whole or given as strings, text that is not UTF-8, and
// over-long input. Each must be a clear error; TestBadInput sends some of
// them over a real data channel and checks X got nothing.
var badDataChannel = []struct {
	raw string
	err string
}{
	{`{"t":"kd","k":null}`, `"k" is missing`},
	{`{"t":"kd","k":1e300}`, `"k" is 1e+300: it must be 1..536870911`},
	{`{"t":"kd","k":65293.5}`, "whole number"},
	{`{"t":"kd","k":"65293"}`, "expected shape"},
	{`{"t":"bd","b":null}`, `"b" is missing`},
	{`{"t":"bd","b":1.5}`, "whole number"},
	{`{"t":"mm","x":null,"y":null}`, `mm needs "x" and "y"`},
	{`{"t":"mm","x":1,"y":null}`, `mm needs "x" and "y"`},
	{`{"t":"mm","x":1e300,"y":1}`, "outside the"},
	{`{"t":"mm","x":-1,"y":1}`, "outside the"},
	{`{"t":"mm","x":"3","y":1}`, "expected shape"},
	{`{"t":"mm","x":1e400,"y":1}`, "expected shape"},
	{`{"t":"wh","dy":null}`, `wh needs "dx" and/or "dy"`},
	{`{"t":"wh","dy":1e300}`, `"dy" is 1e+300`},
	{`{"t":"wh","dy":-1e300}`, `"dy" is -1e+300`},
	{`{"t":"wh","dx":0.5}`, "whole number"},
	{`{"t":"clip","text":null}`, `clip needs "text"`},
	{"{\"t\":\"clip\",\"text\":\"a\xffb\"}", "not valid UTF-8: the byte 0xff"},
	{`{"t":"clip","text":"a\ud800b"}`, `unpaired UTF-16 surrogate escape \ud800`},
	{`{"t":"clip","text":"\udfff"}`, `unpaired UTF-16 surrogate escape \udfff`},
	{"{\"t\":\"\xc3\"}", "not valid UTF-8"},
	{`{"t":"` + strings.Repeat("q", 5000) + `"}`, "unknown input type"},
}

func TestParseInputRefuses(t *testing.T) {
	for _, tc := range badDataChannel {
		in, err := parseInput(webrtc.DataChannelMessage{IsString: true, Data: []byte(tc.raw)}, 64<<10, 1280, 800)
		if err == nil {
			t.Errorf("%.60q: accepted as %+v", tc.raw, in)
			continue
		}
		if !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%.60q: error %q, want one containing %q", tc.raw, err, tc.err)
		}
		if len(err.Error()) > 400 {
			t.Errorf("%.60q: the error is %d bytes: it should quote a short prefix", tc.raw, len(err.Error()))
		}
	}
}
