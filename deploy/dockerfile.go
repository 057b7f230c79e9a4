package deploy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"strings"
)

// dockerfile is a parsed Dockerfile: enough of Docker's grammar to lint one
// and to read back the layout it builds (users, paths, environment). Heredocs
// (RUN <<EOF) are not understood and are reported as an error, so a lint never
// passes over text it did not read.
type dockerfile struct {
	// directives are the parser directives at the top (# syntax=, # escape=).
	directives map[string]string
	// args are the ARGs before the first FROM, with their defaults; FROM lines
	// may use them.
	args   map[string]string
	stages []*stage
}

// stage is one FROM and the instructions under it.
type stage struct {
	index int
	name  string // after AS, lower-cased; "" when unnamed
	base  string // the image or earlier stage it starts from, ARGs expanded
	line  int
	instr []instruction
}

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	line  int    // where it starts, 1-based
	cmd   string // the keyword, upper-case
	flags []flag // leading --name=value options (COPY --from, RUN --mount, ...)
	args  string // the rest, as written (continuations joined by a space)
	exec  []string
	// exec is the JSON (exec) form when args is a JSON array of strings.
}

type flag struct{ name, value string }

func (in instruction) flag(name string) (string, bool) {
	for _, f := range in.flags {
		if f.name == name {
			return f.value, true
		}
	}
	return "", false
}

var knownInstructions = map[string]bool{
	"FROM": true, "RUN": true, "CMD": true, "LABEL": true, "MAINTAINER": true, "EXPOSE": true,
	"ENV": true, "ADD": true, "COPY": true, "ENTRYPOINT": true, "VOLUME": true, "USER": true,
	"WORKDIR": true, "ARG": true, "ONBUILD": true, "STOPSIGNAL": true, "HEALTHCHECK": true, "SHELL": true,
}

// parseDockerfile reads a Dockerfile. Errors name the line and what was wrong.
func parseDockerfile(r io.Reader) (*dockerfile, error) {
	df := &dockerfile{directives: map[string]string{}, args: map[string]string{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	escape := `\`
	var (
		lineNo     int
		pending    strings.Builder
		start      int
		directives = true
	)
	flush := func() error {
		text := strings.TrimSpace(pending.String())
		pending.Reset()
		if text == "" {
			return nil
		}
		return df.add(start, text)
	}
	for sc.Scan() {
		lineNo++
		raw := sc.Text()
		trimmed := strings.TrimSpace(raw)
		if directives {
			if m := directiveRE.FindStringSubmatch(raw); m != nil {
				df.directives[strings.ToLower(m[1])] = m[2]
				if strings.EqualFold(m[1], "escape") {
					if m[2] != `\` && m[2] != "`" {
						return nil, fmt.Errorf("line %d: escape directive %q: Docker allows only \\ or `", lineNo, m[2])
					}
					escape = m[2]
				}
				continue
			}
			directives = false
		}
		if pending.Len() == 0 {
			if trimmed == "" || strings.HasPrefix(trimmed, "#") {
				continue
			}
			start = lineNo
		} else if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			// Docker drops comment and empty lines inside a continuation.
			continue
		}
		if strings.HasSuffix(trimmed, escape) {
			pending.WriteString(strings.TrimSuffix(trimmed, escape))
			pending.WriteByte(' ')
			continue
		}
		pending.WriteString(trimmed)
		if err := flush(); err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read Dockerfile: %w", err)
	}
	if pending.Len() > 0 {
		return nil, fmt.Errorf("line %d: the file ends inside a continued instruction (last line ends with %s)", start, escape)
	}
	if len(df.stages) == 0 {
		return nil, fmt.Errorf("no FROM instruction: a Dockerfile needs at least one stage")
	}
	return df, nil
}

var directiveRE = regexp.MustCompile(`^#\s*([a-zA-Z]+)\s*=\s*(\S+)\s*$`)

func (df *dockerfile) add(line int, text string) error {
	word, rest, _ := strings.Cut(text, " ")
	in := instruction{line: line, cmd: strings.ToUpper(word)}
	if !knownInstructions[in.cmd] {
		return fmt.Errorf("line %d: unknown instruction %q", line, word)
	}
	rest = strings.TrimSpace(rest)
	for strings.HasPrefix(rest, "--") {
		tok, after, _ := strings.Cut(rest, " ")
		name, value, _ := strings.Cut(strings.TrimPrefix(tok, "--"), "=")
		in.flags = append(in.flags, flag{name: name, value: value})
		rest = strings.TrimSpace(after)
	}
	in.args = rest
	if strings.Contains(rest, "<<") && (in.cmd == "RUN" || in.cmd == "COPY") && heredocRE.MatchString(rest) {
		return fmt.Errorf("line %d: %s with a heredoc: this reader does not understand heredocs, so it cannot lint them", line, in.cmd)
	}
	if strings.HasPrefix(rest, "[") {
		var v []string
		if json.Unmarshal([]byte(rest), &v) == nil {
			in.exec = v
		}
	}

	if in.cmd == "FROM" {
		f := strings.Fields(rest)
		if len(f) != 1 && (len(f) != 3 || !strings.EqualFold(f[1], "AS")) {
			return fmt.Errorf("line %d: FROM %q: want FROM IMAGE or FROM IMAGE AS NAME", line, rest)
		}
		st := &stage{index: len(df.stages), base: df.expand(f[0]), line: line}
		if len(f) == 3 {
			st.name = strings.ToLower(f[2])
		}
		df.stages = append(df.stages, st)
		return nil
	}
	if len(df.stages) == 0 {
		if in.cmd != "ARG" {
			return fmt.Errorf("line %d: %s before the first FROM: only ARG may come first", line, in.cmd)
		}
		for _, kv := range strings.Fields(rest) {
			k, v, _ := strings.Cut(kv, "=")
			df.args[k] = strings.Trim(v, `"'`)
		}
		return nil
	}
	st := df.stages[len(df.stages)-1]
	st.instr = append(st.instr, in)
	return nil
}

var heredocRE = regexp.MustCompile(`<<-?["']?[A-Za-z_]+`)

// expand replaces $NAME and ${NAME} with the global ARG defaults.
func (df *dockerfile) expand(s string) string {
	return os.Expand(s, func(k string) string {
		if v, ok := df.args[k]; ok {
			return v
		}
		// Left as it was, so an ARG without a default stays visible.
		return "${" + k + "}"
	})
}

// stageByName finds a stage by its AS name or its index ("0", "1", ...).
func (df *dockerfile) stageByName(name string) *stage {
	for _, st := range df.stages {
		if st.name == strings.ToLower(name) || fmt.Sprint(st.index) == name {
			return st
		}
	}
	return nil
}

// final is the last stage: what `docker build` produces without --target,
// as built (see built).
func (df *dockerfile) final() *stage { return df.built(df.stages[len(df.stages)-1]) }

// chain is the stage and the earlier stages it starts FROM, oldest first.
// A base that names no earlier stage (an image) ends the chain.
func (df *dockerfile) chain(st *stage) []*stage {
	out := []*stage{st}
	for {
		parent := df.stageByName(st.base)
		if parent == nil || parent.index >= st.index {
			break
		}
		out = append([]*stage{parent}, out...)
		st = parent
	}
	return out
}

// built is the stage as the image it produces: a stage that starts FROM an
// earlier stage inherits that stage's files, USER, ENV, ENTRYPOINT and
// HEALTHCHECK, so its parents' instructions come first, and its base is the
// image at the root of the chain. (The image's slim and full targets are one
// chain: the full desktop adds its applications to the slim one.)
func (df *dockerfile) built(st *stage) *stage {
	ch := df.chain(st)
	if len(ch) == 1 {
		return st
	}
	flat := &stage{index: st.index, name: st.name, base: ch[0].base, line: st.line}
	for _, s := range ch {
		flat.instr = append(flat.instr, s.instr...)
	}
	return flat
}

// env is the stage's environment after all its ENV lines, in order of first
// definition.
func (st *stage) env() ([][2]string, error) {
	var out [][2]string
	idx := map[string]int{}
	for _, in := range st.instr {
		if in.cmd != "ENV" {
			continue
		}
		pairs, err := envPairs(in.args)
		if err != nil {
			return nil, fmt.Errorf("line %d: ENV %s: %w", in.line, in.args, err)
		}
		for _, kv := range pairs {
			if i, ok := idx[kv[0]]; ok {
				out[i] = kv
				continue
			}
			idx[kv[0]] = len(out)
			out = append(out, kv)
		}
	}
	return out, nil
}

// last returns the stage's last instruction of that kind, and whether there is one.
func (st *stage) last(cmd string) (instruction, bool) {
	for i := len(st.instr) - 1; i >= 0; i-- {
		if st.instr[i].cmd == cmd {
			return st.instr[i], true
		}
	}
	return instruction{}, false
}

// envPairs splits ENV arguments: KEY=VALUE pairs with shell quoting, or the
// legacy single "KEY VALUE" form.
func envPairs(args string) ([][2]string, error) {
	words, err := shellWords(args)
	if err != nil {
		return nil, err
	}
	if len(words) == 0 {
		return nil, fmt.Errorf("no variable given")
	}
	if !strings.Contains(words[0], "=") {
		k, v, _ := strings.Cut(strings.TrimSpace(args), " ")
		return [][2]string{{k, strings.TrimSpace(v)}}, nil
	}
	var out [][2]string
	for _, w := range words {
		k, v, ok := strings.Cut(w, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not KEY=VALUE", w)
		}
		out = append(out, [2]string{k, v})
	}
	return out, nil
}

// shellWords splits s as a POSIX shell would into words, honouring single and
// double quotes and backslashes; it does not expand anything.
func shellWords(s string) ([]string, error) {
	var (
		words []string
		cur   strings.Builder
		in    bool // inside a word
		quote rune
	)
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		c := rs[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				cur.WriteRune(c)
			}
		case quote == '"':
			switch {
			case c == '"':
				quote = 0
			case c == '\\' && i+1 < len(rs) && strings.ContainsRune(`"\$`+"`", rs[i+1]):
				i++
				cur.WriteRune(rs[i])
			default:
				cur.WriteRune(c)
			}
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == '\\' && i+1 < len(rs):
			i++
			cur.WriteRune(rs[i])
			in = true
		case c == ' ' || c == '\t' || c == '\n':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(c)
			in = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated %c quote in %q", quote, s)
	}
	if in {
		words = append(words, cur.String())
	}
	return words, nil
}

// finding is one lint complaint.
type finding struct {
	line int
	rule string
	msg  string
}

func (f finding) String() string { return fmt.Sprintf("line %d: %s: %s", f.line, f.rule, f.msg) }

// lintOptions are the project's own rules.
type lintOptions struct {
	// depsScript is the file name every package installation must go
	// through (install-deps.sh).
	depsScript string
}

var (
	pkgInstallRE = regexp.MustCompile(`\b(apt-get|apt|aptitude)\s+(-\S+\s+)*(install|update|upgrade|dist-upgrade|full-upgrade)\b|\bdpkg\s+(-\S+\s+)*-i\b`)
	secretKeyRE  = regexp.MustCompile(`(?i)(token|secret|passw(or)?d|api_?key|private_?key)$`)
	urlRE        = regexp.MustCompile(`^(https?|ftp)://|^git@|\.git(#.*)?$`)
	sudoRE       = regexp.MustCompile(`(^|[\s;&|])sudo\s`)
	pipeShellRE  = regexp.MustCompile(`(curl|wget)[^|;&]*\|\s*(ba|z|da)?sh\b`)
)

// lint checks the rules that matter for this image. Findings are in file order.
func lint(df *dockerfile, opt lintOptions) []finding {
	var out []finding
	add := func(line int, rule, format string, a ...any) {
		out = append(out, finding{line: line, rule: rule, msg: fmt.Sprintf(format, a...)})
	}
	names := map[string]bool{}
	// done holds each stage's state at its end: a stage FROM an earlier one
	// starts with its files and working directory.
	done := map[int]*stageLint{}
	for _, st := range df.stages {
		checkBase(st, names, add)
		if st.name != "" {
			names[st.name] = true
		}
		names[fmt.Sprint(st.index)] = true
		sl := stageLint{df: df, st: st, opt: opt, add: add, names: names, workdir: "/", copied: map[string]bool{}}
		if parent := df.stageByName(st.base); parent != nil && parent.index < st.index {
			sl.workdir = done[parent.index].workdir
			for p := range done[parent.index].copied {
				sl.copied[p] = true
			}
		}
		for _, in := range st.instr {
			sl.check(in)
		}
		done[st.index] = &sl
	}
	final := df.stages[len(df.stages)-1]
	checkFinal(df.final(), add)
	// The final stage's ancestors that start a process are targets people
	// run too (docker build --target slim): the same rules hold for them.
	for _, st := range df.chain(final) {
		if st == final {
			continue
		}
		if _, ok := st.last("ENTRYPOINT"); ok {
			checkFinal(df.built(st), add)
		}
	}
	return out
}

// stageLint walks one stage's instructions in order, keeping what later
// rules depend on: the working directory and what was copied so far.
type stageLint struct {
	df      *dockerfile
	st      *stage
	opt     lintOptions
	add     addFunc
	names   map[string]bool // earlier stages, by name and index
	workdir string
	// copied holds absolute destinations of files COPYed in this stage so
	// far, for the deps script rule.
	copied map[string]bool
}

func (l *stageLint) check(in instruction) {
	switch in.cmd {
	case "WORKDIR":
		l.workdirInstr(in)
	case "ADD":
		for _, src := range sources(in) {
			if urlRE.MatchString(src) {
				l.add(in.line, "add-url", "ADD %s: fetch over the network in a RUN with a checksum (or vendor the file), ADD of a URL is neither verified nor cached sensibly", src)
			}
		}
		l.copyInstr(in)
	case "COPY":
		l.copyInstr(in)
	case "RUN":
		l.runInstr(in)
	case "ENV", "ARG":
		l.envInstr(in)
	case "MAINTAINER":
		l.add(in.line, "no-maintainer", "MAINTAINER is deprecated: use LABEL org.opencontainers.image.authors")
	}
}

func (l *stageLint) workdirInstr(in instruction) {
	if path.IsAbs(in.args) {
		l.workdir = path.Clean(in.args)
		return
	}
	l.add(in.line, "workdir-absolute", "WORKDIR %s: use an absolute path, a relative one depends on every earlier WORKDIR", in.args)
	l.workdir = path.Join(l.workdir, in.args)
}

// copyInstr checks COPY and ADD and notes where their files land.
func (l *stageLint) copyInstr(in instruction) {
	if from, ok := in.flag("from"); ok && !l.names[strings.ToLower(from)] {
		l.add(in.line, "copy-from-stage", "%s --from=%s: not an earlier stage of this file (stages: %s)", in.cmd, from, stageList(l.df, l.st.index))
	}
	dst := destination(in)
	if dst == "" {
		l.add(in.line, "copy-args", "%s %s: want at least a source and a destination", in.cmd, in.args)
		return
	}
	if !path.IsAbs(dst) {
		dst = path.Join(l.workdir, dst)
	}
	srcs := sources(in)
	intoDir := strings.HasSuffix(in.args, "/") || strings.HasSuffix(dst, "/") || len(srcs) > 1
	for _, src := range srcs {
		if intoDir {
			l.copied[path.Join(dst, path.Base(src))] = true
		}
		l.copied[path.Clean(dst)] = true
	}
}

func (l *stageLint) runInstr(in instruction) {
	cmd := in.args
	if in.exec != nil {
		cmd = strings.Join(in.exec, " ")
	}
	if pkgInstallRE.MatchString(cmd) {
		l.add(in.line, "deps-via-script", "RUN installs packages directly (%q): add them to scripts/%s and call it, so the image, `make run` and CI install the same set", pkgInstallRE.FindString(cmd), l.opt.depsScript)
	}
	if sudoRE.MatchString(cmd) {
		l.add(in.line, "no-sudo", "RUN uses sudo: a build step already runs as the stage's USER; switch USER instead")
	}
	if pipeShellRE.MatchString(cmd) {
		l.add(in.line, "no-pipe-to-shell", "RUN pipes a download into a shell: unverified code at build time")
	}
	if l.opt.depsScript != "" && strings.Contains(cmd, l.opt.depsScript) {
		checkDepsRun(in, cmd, l.workdir, l.copied, l.opt.depsScript, l.add)
	}
}

func (l *stageLint) envInstr(in instruction) {
	var pairs [][2]string
	if in.cmd == "ENV" {
		var err error
		if pairs, err = envPairs(in.args); err != nil {
			l.add(in.line, "env-syntax", "%v", err)
		}
	} else {
		k, v, _ := strings.Cut(in.args, "=")
		pairs = [][2]string{{k, v}}
	}
	for _, kv := range pairs {
		if secretKeyRE.MatchString(kv[0]) && kv[1] != "" {
			l.add(in.line, "no-secret-in-image", "%s %s has a value: secrets baked into an image are readable by anyone who pulls it; pass it at run time", in.cmd, kv[0])
		}
	}
}

func stageList(df *dockerfile, before int) string {
	var s []string
	for _, st := range df.stages[:before] {
		if st.name != "" {
			s = append(s, st.name)
		} else {
			s = append(s, fmt.Sprint(st.index))
		}
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

type addFunc func(line int, rule, format string, a ...any)

// checkBase: a base image is an earlier stage, scratch, or pinned by a tag
// other than latest (or by digest).
func checkBase(st *stage, names map[string]bool, add addFunc) {
	b := st.base
	if names[strings.ToLower(b)] || b == "scratch" {
		return
	}
	if strings.Contains(b, "$") {
		add(st.line, "base-pinned", "FROM %s: an ARG without a default leaves the base image open", b)
		return
	}
	if _, digest, ok := strings.Cut(b, "@"); ok {
		if !strings.HasPrefix(digest, "sha256:") {
			add(st.line, "base-pinned", "FROM %s: a digest must be sha256:...", b)
		}
		return
	}
	name := b
	if i := strings.LastIndex(name, "/"); i >= 0 {
		name = name[i+1:]
	}
	_, tag, ok := strings.Cut(name, ":")
	switch {
	case !ok:
		add(st.line, "base-pinned", "FROM %s: no tag means latest, which changes under you; pin a tag such as %s:bookworm-slim", b, b)
	case tag == "latest" || tag == "":
		add(st.line, "base-pinned", "FROM %s: latest changes under you; pin a release tag", b)
	}
}

// checkFinal: the image a user runs drops root, says how to check its health,
// and starts its process in exec form so signals reach it.
func checkFinal(st *stage, add addFunc) {
	var user *instruction
	var entry *instruction
	_, hasUser := st.last("USER")
	for i := range st.instr {
		in := &st.instr[i]
		switch in.cmd {
		case "USER":
			user = in
		case "ENTRYPOINT", "CMD":
			if entry == nil || in.cmd == "ENTRYPOINT" {
				entry = in
			}
			if in.cmd == "ENTRYPOINT" && user == nil && hasUser {
				add(in.line, "user-before-entrypoint", "ENTRYPOINT comes before USER: Docker applies the last USER anyway, but a reader (and a later stage's ONBUILD) sees root; drop privileges first")
			}
			if in.exec == nil {
				add(in.line, "exec-form", "%s %s: use the JSON form, or a shell becomes PID 1 and swallows SIGTERM", in.cmd, in.args)
			}
		}
	}
	if user == nil {
		add(st.line, "user-nonroot", "the final stage never sets USER: the appliance would run as root")
	} else if u, _, _ := strings.Cut(user.args, ":"); u == "root" || u == "0" {
		add(user.line, "user-nonroot", "USER %s: the final stage must run as an unprivileged user", user.args)
	}
	if entry == nil {
		add(st.line, "entrypoint", "the final stage has no ENTRYPOINT or CMD")
	}
	hc, ok := st.last("HEALTHCHECK")
	switch {
	case !ok:
		add(st.line, "healthcheck", "the final stage has no HEALTHCHECK: engines cannot tell a hung appliance from a working one")
	case strings.EqualFold(strings.TrimSpace(hc.args), "NONE"):
		add(hc.line, "healthcheck", "HEALTHCHECK NONE: the image must say how to check it")
	default:
		kw, rest, _ := strings.Cut(hc.args, " ")
		if !strings.EqualFold(kw, "CMD") {
			add(hc.line, "healthcheck", "HEALTHCHECK %s: want HEALTHCHECK [options] CMD ...", hc.args)
		} else if !strings.HasPrefix(strings.TrimSpace(rest), "[") {
			add(hc.line, "exec-form", "HEALTHCHECK CMD %s: use the JSON form, so the check needs no shell", rest)
		}
	}
}

// checkDepsRun: a RUN calling the deps script needs the script COPYed into
// this stage first, at the path it calls, and should clear apt's lists in
// the same layer.
func checkDepsRun(in instruction, cmd, workdir string, copied map[string]bool, script string, add addFunc) {
	words, err := shellWords(cmd)
	if err != nil {
		add(in.line, "deps-via-script", "RUN %s: %v", cmd, err)
		return
	}
	for _, w := range words {
		if path.Base(w) != script {
			continue
		}
		p := w
		if !path.IsAbs(p) {
			p = path.Join(workdir, p)
		}
		if !copied[p] {
			add(in.line, "deps-script-copied", "RUN calls %s, but no earlier COPY in this stage puts it at %s", w, p)
		}
	}
	if !strings.Contains(cmd, "/var/lib/apt/lists") {
		add(in.line, "apt-lists-cleaned", "RUN installs packages but leaves apt's lists in the layer: end it with && rm -rf /var/lib/apt/lists/*")
	}
}

// sources and destination split COPY/ADD arguments (JSON or shell form).
func sources(in instruction) []string {
	a := copyArgs(in)
	if len(a) < 2 {
		return nil
	}
	return a[:len(a)-1]
}

func destination(in instruction) string {
	a := copyArgs(in)
	if len(a) < 2 {
		return ""
	}
	return a[len(a)-1]
}

func copyArgs(in instruction) []string {
	if in.exec != nil {
		return in.exec
	}
	return strings.Fields(in.args)
}
