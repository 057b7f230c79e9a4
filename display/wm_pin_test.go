package display

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPinOpenboxRC rewrites rc.xml files as pinWindowManager does: the
// theme becomes an absolute path (openbox looks a bare name up in the
// home's ~/.themes first) and the menu files one absolute file of
// deskenv's (a relative or missing one is looked up in ~/.config/openbox).
func TestPinOpenboxRC(t *testing.T) {
	themes := t.TempDir()
	if err := os.MkdirAll(filepath.Join(themes, "Onyx", "openbox-3"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(themes, "Onyx", "openbox-3", "themerc"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, rc   string
		want, lose []string
	}{
		{"system default",
			"<theme>\n  <name>Onyx</name>\n  <titleLayout>NLIMC</titleLayout>\n</theme>\n<menu>\n  <file>/var/lib/openbox/debian-menu.xml</file>\n  <file>menu.xml</file>\n  <hideDelay>200</hideDelay>\n</menu>",
			[]string{"<name>" + filepath.Join(themes, "Onyx") + "</name>", "<file>/pinned/menu.xml</file>", "<hideDelay>200</hideDelay>"},
			[]string{"debian-menu.xml", "<file>menu.xml</file>"}},
		{"theme not installed",
			"<theme><name>Gone</name></theme><menu><file>menu.xml</file></menu>",
			[]string{"<name>/usr/share/themes/Gone</name>", "<file>/pinned/menu.xml</file>"},
			[]string{"<name>Gone</name>"}},
		{"theme already absolute, a path with XML in it",
			"<theme><name>/opt/themes/Mine</name></theme><menu><file>a&amp;b.xml</file></menu>",
			[]string{"<name>/opt/themes/Mine</name>", "<file>/pinned/menu.xml</file>"},
			[]string{"a&amp;b.xml"}},
		{"fonts' names are not the theme's",
			"<theme><name>Onyx</name><font place=\"ActiveWindow\"><name>sans</name></font></theme>",
			[]string{"<name>sans</name>", "<name>" + filepath.Join(themes, "Onyx") + "</name>"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := string(pinOpenboxRC([]byte(c.rc), "/pinned/menu.xml", []string{themes}))
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("pinned rc.xml lacks %q:\n%s", w, got)
				}
			}
			for _, l := range c.lose {
				if strings.Contains(got, l) {
					t.Errorf("pinned rc.xml still has %q:\n%s", l, got)
				}
			}
		})
	}
}
