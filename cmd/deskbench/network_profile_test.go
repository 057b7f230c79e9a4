package main

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseProfiles(t *testing.T) {
	tests := []struct {
		in      string
		want    []netProfile
		wantErr string
	}{
		{in: "slow", want: []netProfile{builtinProfiles[2]}},
		{in: "fast, drop", want: []netProfile{builtinProfiles[0], builtinProfiles[3]}},
		{in: "all", want: builtinProfiles},
		{in: "5mbit/40ms", want: []netProfile{{Name: "5mbit/40ms", RateKbit: 5000, RTT: 40 * time.Millisecond}}},
		{in: "1.5Mbit/100ms/0.5%/5ms", want: []netProfile{{Name: "1.5Mbit/100ms/0.5%/5ms", RateKbit: 1500, RTT: 100 * time.Millisecond, Loss: 0.005, Jitter: 5 * time.Millisecond}}},
		{in: "500kbit/0s/0.02", want: []netProfile{{Name: "500kbit/0s/0.02", RateKbit: 500, Loss: 0.02}}},
		{in: "", wantErr: "names no profile"},
		{in: "lan", wantErr: "is not a profile"},
		{in: "5/40ms", wantErr: "give a unit"},
		{in: "xmbit/40ms", wantErr: "not a number"},
		{in: "5mbit/forty", wantErr: "round trip"},
		{in: "5mbit/-4ms", wantErr: "out of range"},
		{in: "5mbit/40ms/60%", wantErr: "out of range"},
		{in: "5mbit/40ms/lots", wantErr: "not a number"},
		{in: "1kbit/40ms", wantErr: "out of range"},
		{in: "5mbit/40ms/1%/1ms/extra", wantErr: "fields"},
		{in: "NaNmbit/40ms", wantErr: "not a number"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseProfiles(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseProfiles(%q) = %v, %v; want an error with %q", tc.in, got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseProfiles(%q): %v", tc.in, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("parseProfiles(%q) = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}
}

func TestProfileString(t *testing.T) {
	tests := []struct {
		p    netProfile
		want string
	}{
		{builtinProfiles[2], "1 Mbit/s 150 ms 3 % loss"},
		{builtinProfiles[3], "10 -> 1 -> 10 Mbit/s 20 ms"},
		{netProfile{RateKbit: 1500, RTT: 100 * time.Millisecond, Jitter: 5 * time.Millisecond}, "1.5 Mbit/s 100 ms 5ms jitter"},
	}
	for _, tc := range tests {
		if got := tc.p.String(); got != tc.want {
			t.Errorf("%+v.String() = %q, want %q", tc.p, got, tc.want)
		}
	}
}

// TestCheckNetCaps checks that the reason the link cannot be made is said
// (not a silent skip): as root with ip and tc it is nil; without them on
// PATH it names them.
func TestCheckNetCaps(t *testing.T) {
	if os.Geteuid() != 0 {
		err := checkNetCaps()
		if err == nil || !strings.Contains(err.Error(), "root") {
			t.Fatalf("checkNetCaps() as uid %d = %v, want an error naming root", os.Geteuid(), err)
		}
		return
	}
	t.Setenv("PATH", t.TempDir())
	err := checkNetCaps()
	if err == nil || !strings.Contains(err.Error(), "the ip command") || !strings.Contains(err.Error(), "the tc command") {
		t.Fatalf("checkNetCaps() with an empty PATH = %v, want it to name ip and tc", err)
	}
}

func TestTBFArgs(t *testing.T) {
	got := strings.Join(tbfArgs("x", 1000, 80*time.Millisecond), " ")
	if want := "qdisc replace dev x root tbf rate 1000kbit burst 5000 latency 80ms"; got != want {
		t.Errorf("tbfArgs(x, 1000, 80ms) = %q, want %q", got, want)
	}
	got = strings.Join(tbfArgs("x", 20000, 200*time.Millisecond), " ")
	if want := "qdisc replace dev x root tbf rate 20000kbit burst 25000 latency 200ms"; got != want {
		t.Errorf("tbfArgs(x, 20000, 200ms) = %q, want %q", got, want)
	}
}

func TestShownFigures(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms ...int) []time.Time {
		out := make([]time.Time, len(ms))
		for i, m := range ms {
			out[i] = t0.Add(time.Duration(m) * time.Millisecond)
		}
		return out
	}
	ms := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Millisecond) }
	tests := []struct {
		name     string
		shown    []time.Time
		from, to time.Time
		frames   float64
		gap      time.Duration
	}{
		{"steady", at(0, 100, 200, 300, 400), ms(0), ms(500), 5, 100 * time.Millisecond},
		{"a freeze in the middle", at(0, 100, 1300, 1400), ms(0), ms(1500), 4, 1200 * time.Millisecond},
		{"nothing shown is one long freeze", nil, ms(0), ms(2000), 0, 2 * time.Second},
		{"frozen at the end", at(0, 100), ms(0), ms(900), 2, 800 * time.Millisecond},
		{"frames outside the window do not count", at(-500, 50, 100, 2500), ms(0), ms(200), 2, 100 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := framesIn(tc.shown, tc.from, tc.to); got != tc.frames {
				t.Errorf("framesIn = %v, want %v", got, tc.frames)
			}
			if got := longestGap(tc.shown, tc.from, tc.to); got != tc.gap {
				t.Errorf("longestGap = %v, want %v", got, tc.gap)
			}
		})
	}
}

func TestBitrateAndRecovery(t *testing.T) {
	t0 := time.Unix(1000, 0)
	// 1000 kbit/s (125000 bytes a second) for 4 s, 100 kbit/s for 4 s, then
	// 1000 again from 8 s; ticks every 250 ms.
	var ticks []tick
	var shown []time.Time
	var bytes int64
	for i := 0; i <= 64; i++ {
		t := t0.Add(time.Duration(i) * 250 * time.Millisecond)
		ticks = append(ticks, tick{t, bytes})
		rate := int64(125000 / 4)
		fps := 5 // frames per 250 ms: 20 fps
		if i >= 16 && i < 32 {
			rate, fps = 12500/4, 1
		}
		bytes += rate
		for f := 0; f < fps; f++ {
			shown = append(shown, t.Add(time.Duration(f)*250*time.Millisecond/time.Duration(fps)))
		}
	}
	if got := bitrate(ticks, t0, t0.Add(4*time.Second)); got != 1000 {
		t.Errorf("bitrate before the drop = %v kbit/s, want 1000", got)
	}
	if got := bitrate(ticks, t0.Add(4*time.Second), t0.Add(8*time.Second)); got != 100 {
		t.Errorf("bitrate during the drop = %v kbit/s, want 100", got)
	}
	if got := bitrate(ticks, t0.Add(20*time.Second), t0.Add(30*time.Second)); got != 0 {
		t.Errorf("bitrate with no ticks = %v, want 0", got)
	}
	// The link comes back at 8 s and the figures are back at once: the
	// first one-second window that starts there is whole again.
	if got := recovery(shown, ticks, t0.Add(8*time.Second), t0.Add(16*time.Second), 20, 1000); got != 1 {
		t.Errorf("recovery = %v s, want 1", got)
	}
	// Back at 4 s (during the drop): the figures return at 8 s, 5 s later.
	if got := recovery(shown, ticks, t0.Add(4*time.Second), t0.Add(16*time.Second), 20, 1000); got != 5 {
		t.Errorf("recovery from 4 s = %v s, want 5", got)
	}
	if got := recovery(shown, ticks, t0.Add(4*time.Second), t0.Add(7*time.Second), 20, 1000); got != -1 {
		t.Errorf("recovery that never comes = %v, want -1", got)
	}
}

func TestLatencyPct(t *testing.T) {
	lat := []float64{10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120, 130, 140, 150, 160, 170, 180, 190}
	tests := []struct {
		name     string
		lat      []float64
		lost     int
		p        float64
		want     float64
		wantOver bool
	}{
		{"no loss", lat, 0, 95, 190, false},
		{"one lost of twenty is the p95", lat, 1, 95, 190, false},
		{"two lost of twenty-one push p95 past the wait", lat, 2, 95, sampleWaitMs, true},
		{"median unaffected by a few lost", lat, 2, 50, 110, false},
		{"all lost", nil, 3, 50, sampleWaitMs, true},
		{"no samples", nil, 0, 50, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, over := latencyPct(tc.lat, tc.lost, tc.p)
			if got != tc.want || over != tc.wantOver {
				t.Errorf("latencyPct(%d samples, %d lost, p%v) = %v, %v; want %v, %v", len(tc.lat), tc.lost, tc.p, got, over, tc.want, tc.wantOver)
			}
		})
	}
}
