package appliance

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/deskenv/deskenv/mcpserver"
)

// traitEntry is one MCP trait --mcp-traits can name: its name, a few words
// for the flag's help, and how a desktop builds it.
type traitEntry struct {
	name, usage string
	build       func(a *Desktop) (mcpserver.Trait, error)
}

// traitTable is every trait --mcp-traits knows, in the order their tools
// are listed whatever order the flag names them in. Config.checkTraits
// takes the known names from it and (*Desktop).traits builds from it, so a
// new trait is one mcpserver.Trait and one entry here.
func traitTable() []traitEntry {
	return []traitEntry{
		{"bash", "shell commands as the desktop user", buildBash},
		{"files", "read, write, list in the desktop's home", buildFiles},
		{"clipboard", "get and set its text", buildClipboard},
	}
}

// TraitUsage lists the traits --mcp-traits knows, each with what it adds,
// for the flag's help: "bash (shell commands as the desktop user), ...".
func TraitUsage() string {
	var parts []string
	for _, e := range traitTable() {
		parts = append(parts, fmt.Sprintf("%s (%s)", e.name, e.usage))
	}
	return strings.Join(parts, ", ")
}

// unknownTrait is the error for a name --mcp-traits does not know, listing
// the ones it does.
func unknownTrait(flag, name string) error {
	var names []string
	for _, e := range traitTable() {
		names = append(names, e.name)
	}
	example := names[0]
	if len(names) > 1 {
		example += "," + names[1]
	}
	return fmt.Errorf("--mcp-traits %q: unknown trait %q (use %s, or several: %s)", flag, name, strings.Join(names, ", "), example)
}

// traits builds the MCP traits --mcp-traits names, over this desktop's home
// and session environment, in the table's order; a name given twice is
// built once.
func (a *Desktop) traits() ([]mcpserver.Trait, error) {
	named := splitList(a.cfg.MCPTraits, ",")
	var out []mcpserver.Trait
	for _, e := range traitTable() {
		if !slices.Contains(named, e.name) {
			continue
		}
		t, err := e.build(a)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// buildBash is the bash trait: refused when the session runs as deskenv's
// own user unless told, and loud about the ways it reaches further than
// the desktop.
func buildBash(a *Desktop) (mcpserver.Trait, error) {
	if err := a.sharedUserOK("bash"); err != nil {
		return nil, err
	}
	if a.display.Credential() == nil && os.Geteuid() == 0 {
		a.log.Warn("--mcp-traits bash: the session runs as deskenv's user, root, so the agent's commands run as root too")
	}
	if a.seat.auth.Local() && a.display.Credential() == nil {
		// A separated session is refused at the door by its user
		// (desktopRefusal); a shared one only tokens keep out.
		a.log.Warn("--mcp-traits bash without tokens: every request to deskenv is allowed, so the agent's shell can reach the control plane (reset, scoring) on this machine; configure tokens to keep it out")
	}
	return mcpserver.BashTrait{Dir: a.home, Env: a.display.Env(), Credential: a.display.Credential()}, nil
}

// buildFiles is the files trait over the desktop's home, refused like bash
// when the session is not separated.
func buildFiles(a *Desktop) (mcpserver.Trait, error) {
	if err := a.sharedUserOK("files"); err != nil {
		return nil, err
	}
	return mcpserver.FilesTrait{Home: a.home, Owner: a.display.Credential()}, nil
}

// buildClipboard is the clipboard trait over a clipboard owner of its own
// (newDeskClipboard).
func buildClipboard(a *Desktop) (mcpserver.Trait, error) {
	c, err := newDeskClipboard(a.display, a)
	if err != nil {
		return nil, err
	}
	return mcpserver.ClipboardTrait{Clipboard: c}, nil
}
