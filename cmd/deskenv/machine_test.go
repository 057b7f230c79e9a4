package main

import (
	"fmt"
	"os"
	"testing"

	"github.com/deskenv/deskenv/internal/testrig"
)

// TestMain holds the machine's deskenv state (the default session homes
// under /var/lib/deskenv, which several tests here run deskenv on) for the
// package's run, so deploy's TestRuntimeLayout does not move it aside
// under them.
func TestMain(m *testing.M) {
	release, err := testrig.LockMachineState(false)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	release()
	os.Exit(code)
}
