package layering

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/deskenv/deskenv/"

// tier places every package of the module on one floor of the house. A
// package may import packages on lower floors, and packages on its own floor
// only where the floor allows it (core packages build on one another;
// features never do: they meet on the buses and in the composition).
type tier int

const (
	tierInternal    tier = iota // internal/*: plumbing no user imports
	tierCore                    // display, hci, screen, auth, lifecycle, task, ...
	tierFeature                 // stream, mcpserver, record, control, web
	tierComposition             // appliance: the features composed into one desktop or a pool
	tierCommand                 // cmd/*: flags, signals, subcommands
	tierStandalone              // deploy, e2e: import what they test, nothing imports them
)

var tierNames = map[tier]string{
	tierInternal: "internal", tierCore: "core", tierFeature: "feature",
	tierComposition: "composition", tierCommand: "command", tierStandalone: "standalone",
}

// floors is the table docs/ARCHITECTURE.md's layout shows. A new package
// must be added here (and there) before this test passes: that is the point.
var floors = map[string]tier{
	"display":   tierCore,
	"baseline":  tierCore,
	"hci":       tierCore,
	"screen":    tierCore,
	"auth":      tierCore,
	"lifecycle": tierCore,
	"task":      tierCore,
	"stream":    tierFeature,
	"mcpserver": tierFeature,
	"record":    tierFeature,
	"control":   tierFeature,
	"web":       tierFeature,
	"appliance": tierComposition,
	"deploy":    tierStandalone,
}

func floorOf(pkg string) (tier, bool) {
	switch {
	case pkg == "internal/testrig":
		// The test rig starts real desktops for tests: a harness over
		// display and xprobe that only _test files import.
		return tierStandalone, true
	case strings.HasPrefix(pkg, "internal/"):
		return tierInternal, true
	case strings.HasPrefix(pkg, "cmd/"):
		return tierCommand, true
	case strings.HasPrefix(pkg, "e2e/"):
		return tierStandalone, true
	}
	t, ok := floors[pkg]
	return t, ok
}

// allowed says whether a package on floor from may import one on floor to.
func allowed(from, to tier) bool {
	switch {
	case to == tierStandalone:
		// Only the benchmark command reuses a test harness (e2e/browser's
		// Chromium driver); no product package may.
		return from == tierCommand || from == tierStandalone
	case from == tierStandalone:
		return true
	case from == tierFeature && to == tierFeature:
		return false // features meet on the buses and in the composition
	case from == tierInternal && to == tierInternal:
		return true
	default:
		return to < from || (to == from && from == tierCore)
	}
}

type listed struct {
	ImportPath string
	Imports    []string
}

// packages lists the module's packages and their non-test imports, as the go
// command sees them.
func packages(t *testing.T) []listed {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports", "github.com/deskenv/deskenv/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, stderr.String())
	}
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding go list's output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func TestLayering(t *testing.T) {
	pkgs := packages(t)
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages: is the test run inside the module?", len(pkgs))
	}
	for _, p := range pkgs {
		from := strings.TrimPrefix(p.ImportPath, module)
		if from == "internal/layering" {
			continue
		}
		fromTier, ok := floorOf(from)
		if !ok {
			t.Errorf("package %s has no floor: add it to floors in internal/layering and to the layout in docs/ARCHITECTURE.md", from)
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			to := strings.TrimPrefix(imp, module)
			toTier, ok := floorOf(to)
			if !ok {
				continue // reported once, as its own package
			}
			if !allowed(fromTier, toTier) {
				t.Errorf("%s (%s) imports %s (%s): a %s package may not import a %s one (docs/ARCHITECTURE.md, layout)",
					from, tierNames[fromTier], to, tierNames[toTier], tierNames[fromTier], tierNames[toTier])
			}
		}
	}
}

// TestAllowed pins the rule itself, so a change to it is a deliberate one.
func TestAllowed(t *testing.T) {
	tests := []struct {
		from, to tier
		want     bool
	}{
		{tierCore, tierInternal, true},
		{tierCore, tierCore, true},
		{tierCore, tierFeature, false},
		{tierFeature, tierCore, true},
		{tierFeature, tierFeature, false},
		{tierFeature, tierComposition, false},
		{tierComposition, tierFeature, true},
		{tierCommand, tierComposition, true},
		{tierComposition, tierCommand, false},
		{tierInternal, tierCore, false},
		{tierInternal, tierInternal, true},
		{tierStandalone, tierFeature, true},
		{tierCommand, tierStandalone, true},
		{tierFeature, tierStandalone, false},
		{tierComposition, tierStandalone, false},
	}
	for _, tt := range tests {
		if got := allowed(tt.from, tt.to); got != tt.want {
			t.Errorf("allowed(%s, %s) = %v, want %v", tierNames[tt.from], tierNames[tt.to], got, tt.want)
		}
	}
}
