package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// netProfile is one link deskbench network measures the stacks on.
type netProfile struct {
	Name     string        `json:"name"`
	RateKbit int           `json:"rate_kbit"`
	RTT      time.Duration `json:"rtt_ns"` // round trip the relay adds: half each way
	Loss     float64       `json:"loss"`   // share of packets lost, each way
	Jitter   time.Duration `json:"jitter_ns"`
	// DropKbit, when set, is the rate of the middle third of the run: the
	// link falls from RateKbit to it and comes back.
	DropKbit int `json:"drop_kbit,omitempty"`
}

// builtinProfiles are the links, in its order.
var builtinProfiles = []netProfile{
	{Name: "fast", RateKbit: 20000, RTT: 20 * time.Millisecond},
	{Name: "medium", RateKbit: 3000, RTT: 80 * time.Millisecond, Loss: 0.01},
	{Name: "slow", RateKbit: 1000, RTT: 150 * time.Millisecond, Loss: 0.03},
	{Name: "drop", RateKbit: 10000, RTT: 20 * time.Millisecond, DropKbit: 1000},
}

func (p netProfile) String() string {
	s := fmt.Sprintf("%s Mbit/s %d ms", mbit(p.RateKbit), p.RTT.Milliseconds())
	if p.DropKbit > 0 {
		s = fmt.Sprintf("%s -> %s -> %s Mbit/s %d ms", mbit(p.RateKbit), mbit(p.DropKbit), mbit(p.RateKbit), p.RTT.Milliseconds())
	}
	if p.Loss > 0 {
		s += fmt.Sprintf(" %g %% loss", p.Loss*100)
	}
	if p.Jitter > 0 {
		s += fmt.Sprintf(" %v jitter", p.Jitter)
	}
	return s
}

func mbit(kbit int) string { return strconv.FormatFloat(float64(kbit)/1000, 'f', -1, 64) }

// parseProfiles reads -profiles: a comma-separated list of built-in names
// (fast, medium, slow, drop, or all) and of links spelled
// RATE/RTT[/LOSS[/JITTER]], e.g. 5mbit/40ms/0.5%/5ms.
func parseProfiles(s string) ([]netProfile, error) {
	var out []netProfile
	for _, part := range splitComma(s) {
		if part == "all" {
			out = append(out, builtinProfiles...)
			continue
		}
		found := false
		for _, b := range builtinProfiles {
			if b.Name == part {
				out, found = append(out, b), true
			}
		}
		if found {
			continue
		}
		if !strings.Contains(part, "/") {
			return nil, fmt.Errorf("-profiles: %q is not a profile: use fast, medium, slow, drop, all, or RATE/RTT[/LOSS[/JITTER]] like 5mbit/40ms/0.5%%", part)
		}
		p, err := parseLinkSpec(part)
		if err != nil {
			return nil, fmt.Errorf("-profiles %q: %w", part, err)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-profiles names no profile")
	}
	return out, nil
}

func parseLinkSpec(s string) (netProfile, error) {
	f := strings.Split(s, "/")
	if len(f) < 2 || len(f) > 4 {
		return netProfile{}, fmt.Errorf("want RATE/RTT[/LOSS[/JITTER]], got %d fields", len(f))
	}
	p := netProfile{Name: s}
	var err error
	if p.RateKbit, err = parseRate(f[0]); err != nil {
		return p, err
	}
	if p.RTT, err = parseDelay(f[1], "round trip"); err != nil {
		return p, err
	}
	if len(f) > 2 {
		if p.Loss, err = parseLoss(f[2]); err != nil {
			return p, err
		}
	}
	if len(f) > 3 {
		if p.Jitter, err = parseDelay(f[3], "jitter"); err != nil {
			return p, err
		}
	}
	return p, nil
}

// parseRate reads 20mbit, 500kbit or 1.5mbit as kbit/s: 64 kbit/s to 10
// Gbit/s (below tbf's useful range, or above the veth's).
func parseRate(s string) (int, error) {
	l := strings.ToLower(s)
	mult := 0.0
	switch {
	case strings.HasSuffix(l, "gbit"):
		mult, l = 1e6, strings.TrimSuffix(l, "gbit")
	case strings.HasSuffix(l, "mbit"):
		mult, l = 1e3, strings.TrimSuffix(l, "mbit")
	case strings.HasSuffix(l, "kbit"):
		mult, l = 1, strings.TrimSuffix(l, "kbit")
	default:
		return 0, fmt.Errorf("rate %q: give a unit: kbit, mbit or gbit (e.g. 3mbit)", s)
	}
	v, err := strconv.ParseFloat(l, 64)
	if err != nil || v != v {
		return 0, fmt.Errorf("rate %q is not a number of %s", s, s[len(l):])
	}
	k := v * mult
	if k < 64 || k > 10e6 {
		return 0, fmt.Errorf("rate %q is out of range: use 64kbit..10gbit", s)
	}
	return int(k), nil
}

func parseDelay(s, what string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s %q: %w", what, s, err)
	}
	if d < 0 || d > 10*time.Second {
		return 0, fmt.Errorf("%s %q is out of range: use 0..10s", what, s)
	}
	return d, nil
}

// parseLoss reads 3% or 0.03.
func parseLoss(s string) (float64, error) {
	t, pct := strings.CutSuffix(s, "%")
	v, err := strconv.ParseFloat(t, 64)
	if err != nil {
		return 0, fmt.Errorf("loss %q is not a number (e.g. 3%% or 0.03)", s)
	}
	if pct {
		v /= 100
	}
	if !(v >= 0 && v < 0.5) {
		return 0, fmt.Errorf("loss %q is out of range: use 0..50%%", s)
	}
	return v, nil
}
