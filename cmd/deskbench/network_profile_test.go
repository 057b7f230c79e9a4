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
