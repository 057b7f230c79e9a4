package testrig

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// machineLock is the file the packages that touch the machine's own deskenv
// state (/var/lib/deskenv: the default homes of session users as root) lock,
// since go test runs packages side by side. deploy's TestRuntimeLayout moves
// /var/lib/deskenv aside to replay the image's layout; cmd/deskenv's tests
// run deskenv on its default home under it. Each alone is fine; together,
// a deskenv found its home gone at start.
var machineLock = filepath.Join(os.TempDir(), "deskenv-machine-state.lock")

// LockMachineState waits for the machine's deskenv state: shared by the
// packages that use it, exclusive for the one that moves it. The returned
// function lets it go.
func LockMachineState(exclusive bool) (release func(), err error) {
	f, err := os.OpenFile(machineLock, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil, fmt.Errorf("open the machine state lock %s: %w", machineLock, err)
	}
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", machineLock, err)
	}
	return func() { f.Close() }, nil
}
