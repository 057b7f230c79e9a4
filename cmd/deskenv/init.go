package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"github.com/deskenv/deskenv/auth"
)

// tokenVar is a variable that carries a token, and its role.
type tokenVar struct {
	name string
	role auth.Role
}

func tokenVars() []tokenVar {
	return []tokenVar{
		{"DESKENV_AGENT_TOKEN", auth.RoleAgent},
		{"DESKENV_OPERATOR_TOKEN", auth.RoleOperator},
		{"DESKENV_VIEWER_TOKEN", auth.RoleViewer},
		{"DESKENV_ANNOTATOR_TOKEN", auth.RoleAnnotator},
	}
}

// tokensFDVar names the descriptor `deskenv init` hands the tokens on.
const tokensFDVar = "DESKENV_TOKENS_FD"

// tokensFD is the descriptor number: the first after stdin, stdout, stderr.
const tokensFD = 3

// initCmd is the image's entrypoint: `deskenv init -- tini -- deskenv`. The
// desktop's programs run as the same user as deskenv and its init, so they
// can read /proc/1/environ, where a container engine puts the tokens. init
// moves the token variables onto a pipe, replaces itself with the command
// (PID 1 stays, its environment is now free of tokens), and deskenv reads the
// pipe once at start, leaving it empty for anyone who looks later.
func initCmd(args []string) error {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		return errors.New("init: name the command to run, e.g. deskenv init -- /usr/bin/tini -- /usr/local/bin/deskenv")
	}
	path, err := exec.LookPath(args[0])
	if err != nil {
		return fmt.Errorf("init: %w", err)
	}
	env, lines := takeTokenVars(os.Environ())
	if lines != "" {
		fd, err := tokenPipe(lines)
		if err != nil {
			return fmt.Errorf("init: %w", err)
		}
		// Dup2 leaves the copy without close-on-exec: it survives the exec
		// of the command and of deskenv after it.
		if err := syscall.Dup2(fd, tokensFD); err != nil {
			return fmt.Errorf("init: move the tokens to descriptor %d: %w", tokensFD, err)
		}
		if fd != tokensFD {
			syscall.Close(fd)
		}
		env = append(env, tokensFDVar+"="+strconv.Itoa(tokensFD))
	}
	return fmt.Errorf("init: run %s: %w", path, syscall.Exec(path, args, env))
}

// takeTokenVars takes the token variables out of environ: the rest, and
// the tokens as ROLE=TOKEN lines. An old DESKENV_TOKENS_FD goes too.
func takeTokenVars(environ []string) (env []string, lines string) {
	roles := map[string]auth.Role{}
	for _, tv := range tokenVars() {
		roles[tv.name] = tv.role
	}
	var b strings.Builder
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		role, isToken := roles[k]
		switch {
		case isToken && v != "":
			fmt.Fprintf(&b, "%s=%s\n", role, v)
		case !isToken && k != tokensFDVar:
			env = append(env, kv)
		}
	}
	return env, b.String()
}

// readTokensFD takes the tokens `deskenv init` left on a descriptor, once,
// and closes it so no program deskenv starts inherits it. Flags and
// variables given to deskenv itself win over them.
func (c *config) readTokensFD() error {
	v, ok := os.LookupEnv(tokensFDVar)
	if !ok {
		return nil
	}
	// Not for the desktop's programs either (display leaves DESKENV_ out,
	// but deskenv's own children should not see a stale number).
	os.Unsetenv(tokensFDVar)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return fmt.Errorf("%s=%q: want a descriptor number from deskenv init", tokensFDVar, v)
	}
	f := os.NewFile(uintptr(fd), "tokens from deskenv init")
	defer f.Close()
	ts, err := auth.ParseTokens(f, "the tokens from deskenv init")
	if err != nil {
		return err
	}
	for _, t := range ts {
		var field *string
		switch t.Role {
		case auth.RoleAgent:
			field = &c.AgentToken
		case auth.RoleOperator:
			field = &c.OperatorToken
		case auth.RoleViewer:
			field = &c.ViewerToken
		case auth.RoleAnnotator:
			field = &c.AnnotatorToken
		}
		if field != nil && *field == "" {
			*field = t.Value
		}
	}
	return nil
}
