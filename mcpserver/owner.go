package mcpserver

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// own gives what write_file made in the home (the file, and the folders it
// created on the way) to the session's user, so the desktop's programs can
// change and delete it as any file of their own. A no-op without an Owner.
// Entries that already belonged to someone else than this process are left
// as they are.
func (f FilesTrait) own(root *os.Root, rel string) {
	if f.Owner == nil {
		return
	}
	uid, gid := int(f.Owner.Uid), int(f.Owner.Gid)
	self := os.Geteuid()
	parts := strings.Split(filepath.ToSlash(rel), "/")
	for i := range parts {
		p := filepath.FromSlash(strings.Join(parts[:i+1], "/"))
		fi, err := root.Lstat(p)
		if err != nil {
			return
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == self && self != uid {
			root.Lchown(p, uid, gid)
		}
	}
}
