package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Tokens given as flags are in /proc/PID/cmdline, which every local user
// (and the desktop's own programs) can read: deskenv runs itself again
// without them and reads them from a pipe instead.

// tokenFlagNames are the flags that carry a token, and their roles.
var tokenFlagNames = map[string]string{"agent-token": "agent", "operator-token": "operator", "viewer-token": "viewer", "annotator-token": "annotator"}

// scrubbedFlagsVar tells the re-executed deskenv which token flags it was
// given, so it can still warn about them.
const scrubbedFlagsVar = "DESKENV_SCRUBBED_TOKEN_FLAGS"

// scrubTokenArgs takes the token flags out of args: the rest, the tokens as
// ROLE=TOKEN lines, and the flags found. A later flag wins over an earlier
// one, as the flag package has it. Parsing stops at "--".
func scrubTokenArgs(args []string) (rest []string, lines string, flags []string) {
	got := map[string]string{}
	var order []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = append(rest, args[i:]...)
			break
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		role, ok := tokenFlagNames[name]
		if !ok || !strings.HasPrefix(a, "-") {
			rest = append(rest, a)
			continue
		}
		if !hasVal {
			if i+1 >= len(args) {
				rest = append(rest, a) // the flag package reports the missing value
				continue
			}
			i++
			val = args[i]
		}
		if _, dup := got[role]; !dup {
			order = append(order, role)
			flags = append(flags, "--"+name)
		}
		got[role] = val
	}
	var b strings.Builder
	for _, role := range order {
		if got[role] != "" {
			fmt.Fprintf(&b, "%s=%s\n", role, got[role])
		}
	}
	return rest, b.String(), flags
}

// reexecWithoutTokens runs deskenv again without its token flags when it was
// given any: /proc/PID/cmdline is world-readable, so the desktop's programs
// (and every local user) could read them there. The tokens go over a pipe
// (as from deskenv init, DESKENV_TOKENS_FD), read once at start. It returns
// only when there is nothing to do or the exec failed.
func reexecWithoutTokens(args []string) error {
	if cmd, _ := subcommand(args); cmd != "serve" && cmd != "mcp" {
		return nil
	}
	rest, lines, flags := scrubTokenArgs(args)
	if len(flags) == 0 {
		return nil
	}
	if _, ok := os.LookupEnv(tokensFDVar); ok {
		return fmt.Errorf("tokens given both as flags (%s) and on %s: give them one way", strings.Join(flags, ", "), tokensFDVar)
	}
	fd, err := tokenPipe(lines)
	if err != nil {
		return err
	}
	env := os.Environ()
	// A flag wins over its variable: the variable must not come back
	// through the environment and win over the pipe.
	for _, f := range flags {
		env = envWithout(env, envName(strings.TrimPrefix(f, "--")))
	}
	env = append(envWithout(envWithout(env, tokensFDVar), scrubbedFlagsVar),
		tokensFDVar+"="+strconv.Itoa(fd), scrubbedFlagsVar+"="+strings.Join(flags, ","))
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	return fmt.Errorf("run deskenv again without the token flags: %w", syscall.Exec(exe, append([]string{os.Args[0]}, rest...), env))
}

// tokenPipe writes lines to a new pipe and returns its read end, which
// survives an exec (syscall.Pipe's descriptors are not close-on-exec). A
// few tokens fit the pipe's buffer (64 KiB), so the write does not wait for
// the reader, which is the process this one becomes.
func tokenPipe(lines string) (int, error) {
	var p [2]int
	if err := syscall.Pipe(p[:]); err != nil {
		return 0, fmt.Errorf("a pipe for the tokens: %w", err)
	}
	defer syscall.Close(p[1])
	if _, err := syscall.Write(p[1], []byte(lines)); err != nil {
		syscall.Close(p[0])
		return 0, fmt.Errorf("write the tokens: %w", err)
	}
	return p[0], nil
}

// scrubbedTokenFlags are the token flags an earlier exec of deskenv took off
// the command line (reexecWithoutTokens), for the warnings about them.
func scrubbedTokenFlags() []string {
	v := os.Getenv(scrubbedFlagsVar)
	os.Unsetenv(scrubbedFlagsVar)
	return splitList(v, ",")
}

func envWithout(env []string, key string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return out
}
