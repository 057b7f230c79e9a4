package appliance

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestSessionUserNames(t *testing.T) {
	tests := []struct {
		flag string
		n    int
		want []string
		err  bool
	}{
		{"", 3, nil, false},
		{"desk", 1, []string{"desk"}, false},
		{"desk", 3, []string{"desk0", "desk1", "desk2"}, false},
		{"a,b", 2, []string{"a", "b"}, false},
		{"a,b", 3, nil, true},
	}
	for _, tc := range tests {
		got, err := sessionUserNames(tc.flag, tc.n)
		if (err != nil) != tc.err || !slices.Equal(got, tc.want) {
			t.Errorf("sessionUserNames(%q, %d) = %q, %v; want %q (error %v)", tc.flag, tc.n, got, err, tc.want, tc.err)
		}
	}
}

// TestUserCan walks permission bits the way the kernel does for a user
// with no supplementary groups.
func TestUserCan(t *testing.T) {
	base := t.TempDir()
	os.Chmod(filepath.Dir(base), 0o711)
	os.Chmod(base, 0o711)
	mk := func(p string, mode os.FileMode, dir bool) string {
		p = filepath.Join(base, p)
		if dir {
			os.Mkdir(p, mode)
		} else {
			os.WriteFile(p, nil, mode)
		}
		os.Chmod(p, mode)
		return p
	}
	private := mk("private", 0o700, true)
	open := mk("open", 0o755, true)
	secret := filepath.Join(private, "f")
	os.WriteFile(secret, nil, 0o644)
	world := filepath.Join(open, "f")
	os.WriteFile(world, nil, 0o644)
	const other = 54321
	tests := []struct {
		path string
		want os.FileMode
		ok   bool
	}{
		{private, 0o4, false},
		{secret, 0o4, false}, // readable file, but its directory is closed
		{open, 0o4, true},
		{open, 0o2, false},
		{world, 0o4, true},
		{world, 0o2, false},
	}
	for _, tc := range tests {
		if ok, why := userCan(tc.path, other, other, tc.want); ok != tc.ok {
			t.Errorf("userCan(%s, %o) = %v (%s), want %v", tc.path, tc.want, ok, why, tc.ok)
		}
	}
	// Filesystems whose /tmp ancestors are closed make every answer false;
	// then the table says nothing.
	if ok, why := userCan(base, other, other, 0o1); !ok {
		t.Fatalf("the test's own directory is not searchable for other users (%s): the table above is not meaningful here", why)
	}
}
