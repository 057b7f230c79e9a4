package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// repoRoot is the module root: the tests read the files they check from there.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("deploy tests run from deploy/ inside the module; no go.mod in %s: %v", dir, err)
	}
	return dir
}

func readDockerfile(t testing.TB) *dockerfile {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot(t), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	df, err := parseDockerfile(f)
	if err != nil {
		t.Fatalf("parse Dockerfile: %v", err)
	}
	return df
}

func TestDockerfileLintClean(t *testing.T) {
	df := readDockerfile(t)
	for _, f := range lint(df, lintOptions{depsScript: "install-deps.sh"}) {
		t.Errorf("Dockerfile %s", f)
	}
}

// TestLintRules feeds the linter one small Dockerfile per rule, each breaking
// exactly that rule, and a good one that breaks none, so a rule that stops
// firing is noticed.
func TestLintRules(t *testing.T) {
	const good = `# syntax=docker/dockerfile:1
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN ./scripts/install-deps.sh build && rm -rf /var/lib/apt/lists/*
COPY . .
RUN go build -o /out/app .

FROM debian:bookworm-slim
COPY scripts/install-deps.sh /usr/local/lib/install-deps.sh
RUN /usr/local/lib/install-deps.sh runtime \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/app /usr/local/bin/app
USER app
HEALTHCHECK CMD ["app", "health"]
ENTRYPOINT ["app"]
`
	tests := []struct {
		name       string
		old, new   string // replace old with new in good
		wantRule   string // "" means no finding
		wantInText string
	}{
		{"good", "", "", "", ""},
		{"latest tag", "debian:bookworm-slim", "debian:latest", "base-pinned", "latest"},
		{"no tag", "debian:bookworm-slim", "debian", "base-pinned", "no tag"},
		{"registry port is not a tag", "debian:bookworm-slim", "registry.local:5000/debian", "base-pinned", "no tag"},
		{"digest pins", "debian:bookworm-slim", "debian@sha256:0123", "", ""},
		{"ARG without default", "debian:bookworm-slim", "debian:${TAG}", "base-pinned", "ARG"},
		{"root user", "USER app", "USER root", "user-nonroot", "unprivileged"},
		{"uid 0", "USER app", "USER 0:0", "user-nonroot", "unprivileged"},
		{"no user", "USER app\n", "", "user-nonroot", "never sets USER"},
		{"user after entrypoint", "USER app\nHEALTHCHECK CMD [\"app\", \"health\"]\nENTRYPOINT [\"app\"]\n",
			"HEALTHCHECK CMD [\"app\", \"health\"]\nENTRYPOINT [\"app\"]\nUSER app\n", "user-before-entrypoint", "drop privileges"},
		{"no healthcheck", "HEALTHCHECK CMD [\"app\", \"health\"]\n", "", "healthcheck", "no HEALTHCHECK"},
		{"healthcheck none", `HEALTHCHECK CMD ["app", "health"]`, "HEALTHCHECK NONE", "healthcheck", "NONE"},
		{"healthcheck shell form", `HEALTHCHECK CMD ["app", "health"]`, "HEALTHCHECK --interval=5s CMD app health", "exec-form", "JSON"},
		{"entrypoint shell form", `ENTRYPOINT ["app"]`, "ENTRYPOINT app", "exec-form", "SIGTERM"},
		{"apt-get directly", "RUN go build", "RUN apt-get update && apt-get install -y git && go build", "deps-via-script", "apt-get"},
		{"apt with options", "RUN go build", "RUN apt -q install curl; go build", "deps-via-script", "apt"},
		{"dpkg -i", "RUN go build", "RUN dpkg -i x.deb; go build", "deps-via-script", "dpkg"},
		{"script not copied", "COPY scripts/install-deps.sh /usr/local/lib/install-deps.sh\n", "", "deps-script-copied", "/usr/local/lib/install-deps.sh"},
		{"script copied elsewhere", "COPY scripts/install-deps.sh /usr/local/lib/install-deps.sh", "COPY scripts/install-deps.sh /opt/install-deps.sh", "deps-script-copied", "no earlier COPY"},
		{"script copied after", "COPY scripts/install-deps.sh scripts/install-deps.sh\nRUN ./scripts/install-deps.sh build && rm -rf /var/lib/apt/lists/*\n",
			"RUN ./scripts/install-deps.sh build && rm -rf /var/lib/apt/lists/*\nCOPY scripts/install-deps.sh scripts/install-deps.sh\n", "deps-script-copied", "/src/scripts/install-deps.sh"},
		{"script into a directory", "COPY scripts/install-deps.sh /usr/local/lib/install-deps.sh", "COPY scripts/install-deps.sh /usr/local/lib/", "", ""},
		{"apt lists kept", "RUN /usr/local/lib/install-deps.sh runtime \\\n && rm -rf /var/lib/apt/lists/*", "RUN /usr/local/lib/install-deps.sh runtime", "apt-lists-cleaned", "lists"},
		{"ADD of a URL", "COPY . .", "ADD https://example.com/x.tgz /src/", "add-url", "https://example.com/x.tgz"},
		{"ADD of a git repo", "COPY . .", "ADD git@github.com:a/b.git /src/", "add-url", "git@"},
		{"ADD of a local file is allowed", "COPY . .", "ADD . .", "", ""},
		{"COPY from unknown stage", "--from=build", "--from=builder", "copy-from-stage", "builder"},
		{"COPY from stage index", "--from=build", "--from=0", "", ""},
		{"sudo", "RUN go build", "RUN sudo go build", "no-sudo", "sudo"},
		{"curl into sh", "RUN go build", "RUN curl -fsSL https://x.sh | sh && go build", "no-pipe-to-shell", "shell"},
		{"token in ENV", "USER app", "ENV APP_TOKEN=s3cret\nUSER app", "no-secret-in-image", "APP_TOKEN"},
		{"empty token in ENV is fine", "USER app", "ENV APP_TOKEN=\"\"\nUSER app", "", ""},
		{"password ARG", "USER app", "ARG DB_PASSWORD=hunter2\nUSER app", "no-secret-in-image", "DB_PASSWORD"},
		{"relative workdir", "WORKDIR /src", "WORKDIR src", "workdir-absolute", "absolute"},
		{"maintainer", "USER app", "MAINTAINER me\nUSER app", "no-maintainer", "LABEL"},
		// A stage FROM an earlier one (the image's full target on its slim one)
		// inherits its files, working directory and user; both are targets.
		{"child stage inherits the copied script", "ENTRYPOINT [\"app\"]\n",
			"ENTRYPOINT [\"app\"]\nFROM 1 AS full\nUSER root\nRUN /usr/local/lib/install-deps.sh more && rm -rf /var/lib/apt/lists/*\nUSER app\n", "", ""},
		{"child stage left as root", "ENTRYPOINT [\"app\"]\n",
			"ENTRYPOINT [\"app\"]\nFROM 1 AS full\nUSER root\nRUN /usr/local/lib/install-deps.sh more && rm -rf /var/lib/apt/lists/*\n", "user-nonroot", "unprivileged"},
		{"parent target runs as root", "USER app\nHEALTHCHECK CMD [\"app\", \"health\"]\nENTRYPOINT [\"app\"]\n",
			"USER root\nHEALTHCHECK CMD [\"app\", \"health\"]\nENTRYPOINT [\"app\"]\nFROM 1 AS full\nUSER app\n", "user-nonroot", "unprivileged"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := good
			if tc.old != "" {
				if !strings.Contains(src, tc.old) {
					t.Fatalf("test case is stale: %q is not in the good Dockerfile", tc.old)
				}
				src = strings.Replace(src, tc.old, tc.new, 1)
			}
			df, err := parseDockerfile(strings.NewReader(src))
			if err != nil {
				t.Fatalf("parse: %v\n%s", err, src)
			}
			got := lint(df, lintOptions{depsScript: "install-deps.sh"})
			if tc.wantRule == "" {
				if len(got) != 0 {
					t.Fatalf("want no findings, got %v", got)
				}
				return
			}
			var rules []string
			for _, f := range got {
				rules = append(rules, f.rule)
				if f.rule == tc.wantRule && !strings.Contains(f.String(), tc.wantInText) {
					t.Errorf("finding %q does not mention %q", f, tc.wantInText)
				}
			}
			if !slices.Contains(rules, tc.wantRule) {
				t.Fatalf("want a %s finding, got %v", tc.wantRule, got)
			}
			for _, r := range rules {
				if r != tc.wantRule {
					t.Errorf("extra finding besides %s: %v", tc.wantRule, got)
				}
			}
		})
	}
}

func TestParseDockerfile(t *testing.T) {
	tests := []struct {
		name    string
		src     string
		wantErr string
		check   func(t *testing.T, df *dockerfile)
	}{
		{
			name: "continuations, comments inside, flags, exec form",
			src:  "# escape=\\\nARG TAG=bookworm\nFROM debian:${TAG} AS Base\nRUN --mount=type=cache,target=/c \\\n  # a comment inside\n  echo a \\\n\n  && echo b\nENTRYPOINT [\"/bin/app\", \"--x\"]\n",
			check: func(t *testing.T, df *dockerfile) {
				st := df.final()
				if st.base != "debian:bookworm" || st.name != "base" {
					t.Errorf("stage base %q name %q, want debian:bookworm, base", st.base, st.name)
				}
				run := st.instr[0]
				if v, _ := run.flag("mount"); v != "type=cache,target=/c" || run.args != "echo a  && echo b" || run.line != 4 {
					t.Errorf("RUN: line %d flags %v args %q", run.line, run.flags, run.args)
				}
				if e := st.instr[1].exec; !slices.Equal(e, []string{"/bin/app", "--x"}) {
					t.Errorf("ENTRYPOINT exec %q", e)
				}
			},
		},
		{
			name: "backtick escape",
			src:  "# escape=`\nFROM debian:12\nRUN echo a `\n  b\n",
			check: func(t *testing.T, df *dockerfile) {
				if a := df.final().instr[0].args; a != "echo a  b" {
					t.Errorf("RUN args %q", a)
				}
			},
		},
		{
			name: "ENV forms",
			src:  "FROM debian:12\nENV A=1 B=\"two words\" C='x y'\nENV D legacy value\nENV A=3\n",
			check: func(t *testing.T, df *dockerfile) {
				env, err := df.final().env()
				if err != nil {
					t.Fatal(err)
				}
				want := [][2]string{{"A", "3"}, {"B", "two words"}, {"C", "x y"}, {"D", "legacy value"}}
				if !slices.Equal(env, want) {
					t.Errorf("env %q, want %q", env, want)
				}
			},
		},
		{name: "empty", src: "# only a comment\n", wantErr: "no FROM"},
		{name: "unknown instruction", src: "FROM debian:12\nRUNN x\n", wantErr: `line 2: unknown instruction "RUNN"`},
		{name: "before FROM", src: "RUN x\nFROM debian:12\n", wantErr: "line 1: RUN before the first FROM"},
		{name: "dangling continuation", src: "FROM debian:12\nRUN a \\\n", wantErr: "ends inside a continued instruction"},
		{name: "bad FROM", src: "FROM a b c d\n", wantErr: "want FROM IMAGE"},
		{name: "heredoc", src: "FROM debian:12\nRUN <<EOF\necho\nEOF\n", wantErr: "heredoc"},
		{name: "bad escape", src: "# escape=x\nFROM debian:12\n", wantErr: "escape directive"},
		{name: "unterminated quote", src: "FROM debian:12\nENV A=\"x\n", wantErr: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			df, err := parseDockerfile(strings.NewReader(tc.src))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.check != nil {
				tc.check(t, df)
				return
			}
			// The unterminated quote parses as an instruction; reading the
			// environment is what must fail.
			if _, err := df.final().env(); err == nil || !strings.Contains(err.Error(), "unterminated") {
				t.Fatalf("env() error %v, want unterminated quote", err)
			}
		})
	}
}

// imageLayout is what the runtime stage promises, read from the Dockerfile.
type imageLayout struct {
	user       string
	uid        int
	uids       map[string]int // every user useradd makes with a literal --uid
	runs       []string       // the RUN commands, continuations joined
	workdir    string
	env        [][2]string
	entrypoint []string
	binary     string // where the deskenv binary is copied to
	health     []string
	expose     []string
}

func (l imageLayout) getenv(k string) (string, bool) {
	for _, kv := range l.env {
		if kv[0] == k {
			return kv[1], true
		}
	}
	return "", false
}

var uidRE = regexp.MustCompile(`useradd\b[^&;]*--uid[ =](\d+)[^&;]*\s(\S+)\s*($|&&|;)`)

func readLayout(t testing.TB) imageLayout {
	t.Helper()
	df := readDockerfile(t)
	st := df.final()
	l := imageLayout{uids: map[string]int{}}
	var err error
	if l.env, err = st.env(); err != nil {
		t.Fatal(err)
	}
	if u, ok := st.last("USER"); ok {
		l.user = u.args
	}
	if w, ok := st.last("WORKDIR"); ok {
		l.workdir = w.args
	}
	if e, ok := st.last("ENTRYPOINT"); ok {
		l.entrypoint = e.exec
	}
	if h, ok := st.last("HEALTHCHECK"); ok {
		_, cmd, _ := strings.Cut(h.args, "CMD ")
		if err := json.Unmarshal([]byte(cmd), &l.health); err != nil {
			t.Fatalf("HEALTHCHECK CMD %s: %v", cmd, err)
		}
	}
	for _, in := range st.instr {
		switch in.cmd {
		case "RUN":
			l.runs = append(l.runs, in.args)
			for _, part := range strings.Split(in.args, "&&") {
				if m := uidRE.FindStringSubmatch(part); m != nil {
					l.uids[m[2]], _ = strconv.Atoi(m[1])
				}
			}
			if uid, ok := l.uids[l.user]; ok {
				l.uid = uid
			}
		case "COPY":
			if from, _ := in.flag("from"); from != "" && strings.HasSuffix(destination(in), "/deskenv") {
				l.binary = destination(in)
			}
		case "EXPOSE":
			l.expose = append(l.expose, strings.Fields(in.args)...)
		}
	}
	return l
}

// TestImageLayout checks that the runtime stage's parts agree with each
// other and with what the appliance needs: the ports the health check and
// the WebRTC port use are exposed, the entrypoint runs the copied binary
// under an init, the user is the one created, and no listen address opens the
// appliance to the network without tokens.
func TestImageLayout(t *testing.T) {
	l := readLayout(t)
	env := func(k string) string { v, _ := l.getenv(k); return v }
	tests := []struct {
		name string
		ok   bool
		why  string
	}{
		{"deskenv runs as deskenv, created with uid 1000", l.user == "deskenv" && l.uid == 1000, "USER " + l.user + ", useradd --uid " + strconv.Itoa(l.uid)},
		{"the session runs as a user of its own, not deskenv's, whose home is the desktop's",
			env("DESKENV_SESSION_USER") != "" && env("DESKENV_SESSION_USER") != l.user && l.uids[env("DESKENV_SESSION_USER")] > 0 &&
				l.uids[env("DESKENV_SESSION_USER")] != l.uid && env("DESKENV_HOME") == "/home/"+env("DESKENV_SESSION_USER"),
			"DESKENV_SESSION_USER=" + env("DESKENV_SESSION_USER") + " DESKENV_HOME=" + env("DESKENV_HOME") + fmt.Sprintf(" users %v", l.uids)},
		{"the binary gets exactly the capabilities it needs, as file capabilities", slices.ContainsFunc(l.runs, func(r string) bool {
			return strings.Contains(r, "setcap cap_setuid,cap_setgid,cap_kill,cap_chown,cap_fowner,cap_dac_override+ep "+l.binary)
		}), "no RUN setcap cap_setuid,cap_setgid,cap_kill,cap_chown,cap_fowner,cap_dac_override+ep " + l.binary},
		{"the tasks (evaluators, solutions) are deskenv's alone", slices.ContainsFunc(l.runs, func(r string) bool {
			return strings.Contains(r, "chown -R "+l.user+":"+l.user+" "+env("DESKENV_TASKS")) && strings.Contains(r, "chmod -R go-rwx "+env("DESKENV_TASKS"))
		}), "no RUN chown -R " + l.user + " and chmod -R go-rwx " + env("DESKENV_TASKS")},
		{"entrypoint is deskenv init (tokens off PID 1's environment), then tini, then the binary",
			len(l.entrypoint) == 6 && l.entrypoint[0] == l.binary && l.entrypoint[1] == "init" && l.entrypoint[2] == "--" &&
				l.entrypoint[3] == "/usr/bin/tini" && l.entrypoint[4] == "--" && l.entrypoint[5] == l.binary,
			"ENTRYPOINT " + strings.Join(l.entrypoint, " ") + ", binary at " + l.binary},
		{"health check runs deskenv health on the exposed port", len(l.health) == 4 && l.health[0] == "deskenv" && l.health[1] == "health" &&
			l.health[2] == "--url" && strings.HasPrefix(l.health[3], "http://127.0.0.1:8080/health") && slices.Contains(l.expose, "8080/tcp"),
			"HEALTHCHECK " + strings.Join(l.health, " ") + ", EXPOSE " + strings.Join(l.expose, " ")},
		{"the full image runs the desktop session (its slim base the bare one)", env("DESKENV_SESSION") == "desktop",
			"DESKENV_SESSION=" + env("DESKENV_SESSION")},
		{"the UDP port deskenv uses is exposed", env("DESKENV_UDP_PORT") != "" && slices.Contains(l.expose, env("DESKENV_UDP_PORT")+"/udp"),
			"DESKENV_UDP_PORT=" + env("DESKENV_UDP_PORT") + ", EXPOSE " + strings.Join(l.expose, " ")},
		{"HOME is deskenv's own directory, the workdir, not the desktop's", env("HOME") == l.workdir && env("HOME") != env("DESKENV_HOME"), "HOME=" + env("HOME") + " DESKENV_HOME=" + env("DESKENV_HOME") + " WORKDIR " + l.workdir},
		{"episodes live outside the desktop's home (reset restores home)", env("DESKENV_EPISODES") != "" && !strings.HasPrefix(env("DESKENV_EPISODES"), env("DESKENV_HOME")+"/") && strings.HasPrefix(env("DESKENV_EPISODES"), l.workdir+"/"),
			"DESKENV_EPISODES=" + env("DESKENV_EPISODES") + " WORKDIR " + l.workdir},
		{"workdir is outside the desktop's home", !strings.HasPrefix(l.workdir+"/", env("DESKENV_HOME")+"/"), "WORKDIR " + l.workdir},
		{"no listen address baked in: without tokens the appliance stays on loopback", func() bool { _, set := l.getenv("DESKENV_ADDR"); return !set }(), "DESKENV_ADDR=" + env("DESKENV_ADDR")},
		{"no token baked in", func() bool {
			for _, kv := range l.env {
				if strings.Contains(kv[0], "TOKEN") {
					return false
				}
			}
			return true
		}(), "the image's ENV names a token"},
	}
	for _, tc := range tests {
		if !tc.ok {
			t.Errorf("%s: %s", tc.name, tc.why)
		}
	}
}

// TestInstallDepsGroups keeps the install script's groups as the Dockerfile,
// the Makefile and check-runtime.sh use them, and the image's needs in them.
func TestInstallDepsGroups(t *testing.T) {
	root := repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "scripts", "install-deps.sh"))
	if err != nil {
		t.Fatal(err)
	}
	groups := map[string][]string{}
	re := regexp.MustCompile(`(?m)^(build|runtime|test|apps)=\(([^)]*)\)`)
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		groups[m[1]] = strings.Fields(m[2])
	}
	tests := []struct {
		group string
		need  []string
	}{
		{"build", []string{"gcc", "libc6-dev", "pkg-config", "libx264-dev", "libyuv-dev"}},
		{"runtime", []string{"xvfb", "xfonts-base", "openbox", "xterm", "chromium", "mousepad", "fonts-dejavu-core", "fonts-liberation", "tini", "ca-certificates", "libx264-164", "libyuv0",
			"tint2", "pcmanfm", "galculator", "mupdf", "libreoffice-calc", "libreoffice-writer"}},
		{"apps", []string{"tint2", "pcmanfm", "galculator", "mupdf", "libreoffice-calc", "libreoffice-writer", "chromium", "mousepad"}},
		{"test", []string{"xdotool", "scrot"}},
	}
	for _, tc := range tests {
		got, ok := groups[tc.group]
		if !ok {
			t.Errorf("install-deps.sh has no %s group", tc.group)
			continue
		}
		for _, p := range tc.need {
			if !slices.Contains(got, p) {
				t.Errorf("install-deps.sh group %s lacks %s (has %v)", tc.group, p, got)
			}
		}
	}
	if !strings.Contains(string(b), "all) want+=") {
		t.Errorf("install-deps.sh lost its all group")
	}
}

// TestShellScripts runs shellcheck over the scripts the image and the host
// checks are built from (install-deps.sh installs it with the test group).
func TestShellScripts(t *testing.T) {
	sc, err := exec.LookPath("shellcheck")
	if err != nil {
		t.Skip("shellcheck is not installed (scripts/install-deps.sh test installs it)")
	}
	scripts, _ := filepath.Glob(filepath.Join(repoRoot(t), "scripts", "*.sh"))
	if len(scripts) == 0 {
		t.Fatal("no scripts/*.sh")
	}
	for _, s := range scripts {
		t.Run(filepath.Base(s), func(t *testing.T) {
			out, err := exec.Command(sc, s).CombinedOutput()
			if err != nil {
				t.Errorf("shellcheck %s: %v\n%s", filepath.Base(s), err, out)
			}
		})
	}
}
