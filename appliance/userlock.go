package appliance

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// A session user belongs to one desktop of one deskenv at a time. Two
// deskenvs on one machine running desktops as the same user (two `make
// run`s as root, a `tasks check` beside another, a replay beside a replay)
// would end each other's programs at every reset, since a reset ends every
// process of its session user, and the two agents, one user, could read
// each other's homes and signal each other's programs. So each deskenv
// holds a lock per session user while its desktops run: flock(2) on a file
// named after the user, which the kernel drops when the process ends, even
// killed, so no stale lock outlives its holder.

// userLockDir is where the session users' locks live: a directory only
// deskenv's user may enter (root's under /run; another user's in its
// runtime directory), so no session user can hold a lock to keep deskenv
// from its own user. Empty when there is none.
func userLockDir() string {
	if os.Geteuid() == 0 {
		return "/run/deskenv/session-users"
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "deskenv", "session-users")
	}
	return ""
}

// maxUserChoices bounds how many names a deskenv that picks its session
// user itself tries: the one it was given, then that name with -b, -c, ...
const maxUserChoices = 8

// errUserBusy says another live deskenv holds a session user's lock.
var errUserBusy = errors.New("in use by another deskenv")

// userClaim holds the locks of the session users one deskenv runs its
// desktops as.
type userClaim struct {
	files []*os.File
}

// release lets other deskenvs have the users again. Closing the file
// drops its flock.
func (c *userClaim) release() {
	if c == nil {
		return
	}
	for _, f := range c.files {
		f.Close()
	}
	c.files = nil
}

// claimSessionUsers locks the n session users flag names (sessionUserNames)
// in dir. When one is held by another deskenv: if auto (deskenv chose the
// name, the operator did not), the next choice is tried, flag-b, flag-c
// and so on, each as a whole set of n; otherwise it is an error naming the
// holder. An empty dir locks nothing.
func claimSessionUsers(dir, flag string, n int, auto bool) ([]string, *userClaim, error) {
	choices := []string{flag}
	if auto {
		for c := 'b'; len(choices) < maxUserChoices; c++ {
			choices = append(choices, flag+"-"+string(c))
		}
	}
	var busy []string
	for _, choice := range choices {
		names, err := sessionUserNames(choice, n)
		if err != nil {
			return nil, nil, err
		}
		if dir == "" {
			return names, &userClaim{}, nil
		}
		claim, err := lockUsers(dir, names)
		if err == nil {
			return names, claim, nil
		}
		if errors.Is(err, errUserBusy) && !auto {
			return nil, nil, fmt.Errorf("%w: two desktops as one user would end each other's programs at every reset; stop that deskenv, or name another user with --session-user", err)
		}
		if !auto {
			return nil, nil, err
		}
		busy = append(busy, err.Error())
	}
	return nil, nil, fmt.Errorf("every session user deskenv would choose is in use (%s): stop one of those deskenvs, or name a user with --session-user", strings.Join(busy, "; "))
}

// lockUsers locks every name or none.
func lockUsers(dir string, names []string) (*userClaim, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("make the session users' lock directory %s: %w", dir, err)
	}
	claim := &userClaim{}
	for _, name := range names {
		f, err := lockUser(dir, name)
		if err != nil {
			claim.release()
			return nil, err
		}
		claim.files = append(claim.files, f)
	}
	return claim, nil
}

// lockUser takes name's lock and writes who holds it into the file, for the
// message another deskenv gives when it finds the lock taken.
func lockUser(dir, name string) (*os.File, error) {
	path := filepath.Join(dir, name+".lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock the session user %s (%s): %w", name, path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := "another process"
		if b, rerr := os.ReadFile(path); rerr == nil && len(b) > 0 {
			holder = strings.TrimSpace(string(b))
		}
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("session user %s is %w (%s)", name, errUserBusy, holder)
		}
		return nil, fmt.Errorf("lock the session user %s (%s): %w", name, path, err)
	}
	// Best effort: the lock is what counts, the words only explain it.
	if err := f.Truncate(0); err == nil {
		fmt.Fprintf(f, "pid %d: %s\n", os.Getpid(), strings.Join(os.Args, " "))
	}
	return f, nil
}
