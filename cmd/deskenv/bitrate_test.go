package main

import (
	"io"
	"strings"
	"testing"
)

// TestBitrateFlags: congestion control's floor and ceiling and the fixed
// bitrate reach the appliance's config from flags and the environment, and
// a floor above --bitrate is refused naming the flag.
func TestBitrateFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		check   func(config) bool
		wantErr string
	}{
		{"defaults: the stream picks", nil, nil, func(c config) bool {
			return c.BitrateKbps == 4000 && c.MinBitrateKbps == 0 && c.MaxBitrateKbps == 0 && !c.FixedBitrate
		}, ""},
		{"floor and ceiling", []string{"--bitrate", "2000", "--bitrate-min", "500", "--bitrate-max", "8000"}, nil, func(c config) bool {
			return c.BitrateKbps == 2000 && c.MinBitrateKbps == 500 && c.MaxBitrateKbps == 8000
		}, ""},
		{"fixed from env", nil, map[string]string{"DESKENV_FIXED_BITRATE": "true"}, func(c config) bool { return c.FixedBitrate }, ""},
		{"floor above the start", []string{"--bitrate", "1000", "--bitrate-min", "2000"}, nil, nil, "--bitrate-min 2000"},
		{"floor too low", []string{"--bitrate-min", "50"}, nil, nil, "--bitrate-min 50: must be 100 to --bitrate"},
		{"ceiling too high", []string{"--bitrate-max", "500000"}, nil, nil, "--bitrate-max 500000"},
		{"ceiling under the start", []string{"--bitrate-max", "1000"}, nil, nil, "--bitrate-max 1000: must be at least --bitrate (4000)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			c, _, err := parseConfig("deskenv", tc.args, io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to mention %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(c) {
				t.Fatalf("config %+v does not match", c)
			}
		})
	}
}
