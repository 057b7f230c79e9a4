package main

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// harden keeps the desktop's programs out of this process. They run as a
// user of their own when deskenv may switch users (appliance/isolation.go), which
// keeps them out already; where they share deskenv's user (no privilege to
// switch, --allow-shared-user) an agent's shell could otherwise read
// /proc/PID/environ, where tokens given as DESKENV_* variables live, or
// /proc/PID/mem, or ptrace deskenv. A process that is not dumpable has its
// /proc files owned by root and refuses ptrace from its own user. Programs
// deskenv starts are dumpable again after their exec, as usual.
func harden() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("hide deskenv's memory and environment from the desktop's programs (prctl PR_SET_DUMPABLE): %w", err)
	}
	return nil
}
