package appliance

import (
	"strings"
	"testing"
)

// TestTraitNames: --mcp-traits accepts every trait of the table, alone or
// together, and refuses another name with the list the table gives.
func TestTraitNames(t *testing.T) {
	var names []string
	for _, e := range traitTable() {
		names = append(names, e.name)
	}
	tests := []struct {
		traits string
		want   string // "" for accepted
	}{
		{"", ""},
		{strings.Join(names, ","), ""},
		{" bash , files,clipboard,bash", ""},
		{"bash,root", `--mcp-traits "bash,root": unknown trait "root" (use bash, files, clipboard, or several: bash,files)`},
		{"Bash", `unknown trait "Bash"`},
	}
	for _, n := range names {
		tests = append(tests, struct{ traits, want string }{n, ""})
	}
	for _, tc := range tests {
		c := DefaultConfig()
		c.MCPTraits = tc.traits
		err := c.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("--mcp-traits %q: %v", tc.traits, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("--mcp-traits %q: %v, want an error with %q", tc.traits, err, tc.want)
		}
	}
	usage := TraitUsage()
	for _, e := range traitTable() {
		if !strings.Contains(usage, e.name+" ("+e.usage+")") {
			t.Errorf("TraitUsage lacks %s: %s", e.name, usage)
		}
	}
}
