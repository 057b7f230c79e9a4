package appliance

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadSecret(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name, file, want, err string
	}{
		{name: "none", file: ""},
		{name: "trimmed", file: write("s", "  s3cret\n"), want: "s3cret"},
		{name: "empty", file: write("e", "\n\t "), err: "is empty"},
		{name: "missing", file: filepath.Join(dir, "nope"), err: "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readSecret(tt.file)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("readSecret(%q) = %q, %v; want an error with %q", tt.file, got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("readSecret(%q) = %q, %v; want %q", tt.file, got, err, tt.want)
			}
		})
	}
}
