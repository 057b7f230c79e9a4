package deploy

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestImageInRootfs builds the image's runtime stage without Docker: a
// minimal Debian root filesystem from debootstrap stands in for
// debian:bookworm-slim, and the stage's instructions are replayed into it in
// order (COPY from the repository, COPY --from=build of a binary built here,
// RUN through chroot with the stage's ENV, USER and WORKDIR). Then
// scripts/check-runtime.sh runs inside that root as the image's user. This is
// what shows that the runtime package list is complete on a clean system,
// which the host, with everything installed, cannot.
//
// It downloads about 300 MB from deb.debian.org and takes a few minutes, so
// it runs only when asked: DESKENV_ROOTFS_TEST=1, as root, with debootstrap
// installed. DESKENV_DEBIAN_MIRROR changes the mirror.
func TestImageInRootfs(t *testing.T) {
	if os.Getenv("DESKENV_ROOTFS_TEST") != "1" {
		t.Skip("set DESKENV_ROOTFS_TEST=1 to build the runtime stage in a debootstrap root (downloads ~300 MB, a few minutes, needs root)")
	}
	if os.Geteuid() != 0 {
		t.Fatal("DESKENV_ROOTFS_TEST=1 needs root: debootstrap, chroot and mounts (run: sudo -E go test ./deploy/ -run TestImageInRootfs)")
	}
	for _, tool := range []string{"debootstrap", "unshare", "chroot", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (apt-get install debootstrap util-linux coreutils): %v", tool, err)
		}
	}
	mirror := os.Getenv("DESKENV_DEBIAN_MIRROR")
	if mirror == "" {
		mirror = "http://deb.debian.org/debian"
	}
	repo := repoRoot(t)
	df := readDockerfile(t)
	st := df.final()
	suite, ok := strings.CutPrefix(st.base, "debian:")
	suite, slim := strings.CutSuffix(suite, "-slim")
	if !ok || !slim {
		t.Fatalf("the final stage starts FROM %s: this test stands in only for debian:<suite>-slim", st.base)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	root := filepath.Join(t.TempDir(), "rootfs")
	t.Logf("debootstrap %s into %s", suite, root)
	run(t, ctx, nil, "debootstrap", "--variant=minbase", suite, root, mirror)
	// What Debian's slim images add to a minbase root: no package cache kept,
	// no documentation. Close enough that a layout relying on either shows.
	writeFile(t, root, "/etc/apt/apt.conf.d/docker-clean",
		"DPkg::Post-Invoke { \"rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true\"; };\n"+
			"APT::Update::Post-Invoke { \"rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true\"; };\n"+
			"Dir::Cache::pkgcache \"\";\nDir::Cache::srcpkgcache \"\";\n")
	writeFile(t, root, "/etc/dpkg/dpkg.cfg.d/docker",
		"path-exclude /usr/share/doc/*\npath-include /usr/share/doc/*/copyright\npath-exclude /usr/share/man/*\npath-exclude /usr/share/info/*\n")
	resolv, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		t.Fatalf("the root needs DNS for apt: %v", err)
	}
	writeFile(t, root, "/etc/resolv.conf", string(resolv))

	// The build stage's product, built here as that stage builds it.
	bin := filepath.Join(t.TempDir(), "deskenv")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./cmd/deskenv")
	build.Dir = repo
	build.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	// Replay the stage.
	env := map[string]string{"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	user, workdir := "root", "/"
	for _, in := range st.instr {
		switch in.cmd {
		case "ARG":
			k, v, _ := strings.Cut(in.args, "=")
			env[k] = v
		case "ENV":
			pairs, err := envPairs(in.args)
			if err != nil {
				t.Fatal(err)
			}
			for _, kv := range pairs {
				env[kv[0]] = kv[1]
			}
		case "USER":
			user = in.args
		case "WORKDIR":
			workdir = in.args
			if err := os.MkdirAll(filepath.Join(root, workdir), 0o755); err != nil {
				t.Fatal(err)
			}
		case "COPY":
			srcs, dst := sources(in), destination(in)
			if !path.IsAbs(dst) {
				dst = path.Join(workdir, dst)
			}
			for _, src := range srcs {
				from := filepath.Join(repo, src)
				if stage, ok := in.flag("from"); ok {
					if df.stageByName(stage) == nil || src != "/out/deskenv" {
						t.Fatalf("line %d: COPY --from=%s %s: this test provides only the build stage's /out/deskenv", in.line, stage, src)
					}
					from = bin
				}
				to := filepath.Join(root, dst)
				if strings.HasSuffix(dst, "/") {
					to = filepath.Join(to, filepath.Base(src))
				}
				if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
					t.Fatal(err)
				}
				run(t, ctx, nil, "cp", "-a", "--no-preserve=ownership", from, to)
			}
		case "RUN":
			if user != "root" {
				t.Fatalf("line %d: RUN as %s: this test replays RUN as root only", in.line, user)
			}
			t.Logf("line %d: RUN %s", in.line, in.args)
			inRoot(t, ctx, root, workdir, env, in.args)
		case "LABEL", "EXPOSE", "HEALTHCHECK", "ENTRYPOINT", "CMD", "STOPSIGNAL", "VOLUME":
			// Image metadata: checked by the lint and layout tests.
		default:
			t.Fatalf("line %d: %s: this test does not know how to replay it", in.line, in.cmd)
		}
	}

	// What the check itself needs, and the check: added after the image's
	// own steps, so nothing the image lacks was there while they ran.
	inRoot(t, ctx, root, "/", env, "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends curl jq >/dev/null")
	for _, s := range []string{"check-runtime.sh", "install-deps.sh"} {
		b, err := os.ReadFile(filepath.Join(repo, "scripts", s))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, root, "/opt/deskenv-check/scripts/"+s, string(b))
		os.Chmod(filepath.Join(root, "/opt/deskenv-check/scripts", s), 0o755)
	}
	l := readLayout(t)
	// --home is the desktop's home (DESKENV_HOME, desk's), not deskenv's HOME.
	home, _ := l.getenv("DESKENV_HOME")
	args := []string{"/opt/deskenv-check/scripts/check-runtime.sh", "--own-user", "--user", l.user, "--home", home, "--workdir", l.workdir,
		"--bin", l.binary, "--addr", "127.0.0.1:" + strconv.Itoa(freePort(t, "tcp")), "--udp-port", strconv.Itoa(freePort(t, "udp"))}
	for _, kv := range l.env {
		args = append(args, "--env", kv[0]+"="+kv[1])
	}
	out := inRoot(t, ctx, root, "/", env, shellQuote(args))
	for _, want := range []string{"ok: /health is healthy", "ok: MCP screenshot is a 1280x800 PNG", "opened its page in Chromium", "no process left", "a read-only root filesystem holds", "PASS"} {
		if !strings.Contains(out, want) {
			t.Errorf("check-runtime.sh in the root passed without saying %q", want)
		}
	}
	if du, err := exec.Command("du", "-sm", "--exclude=proc", "--exclude=opt/deskenv-check", root).Output(); err == nil {
		t.Logf("the replayed image's root filesystem: %s MB (with curl and jq for the check)", strings.Fields(string(du))[0])
	}
}

// inRoot runs a shell command in the root through chroot, in private mount
// and PID namespaces with /proc and /dev mounted, as a container runtime
// provides them: the check sees only its own processes, and whatever is left
// dies with the namespace. It fails the test on error and returns the output.
func inRoot(t *testing.T, ctx context.Context, root, dir string, env map[string]string, command string) string {
	t.Helper()
	var envArgs []string
	for k, v := range env {
		envArgs = append(envArgs, k+"="+v)
	}
	script := `set -e
mount -t proc proc "$ROOT/proc"
mount --rbind /dev "$ROOT/dev"
exec chroot "$ROOT" /usr/bin/env -i "$@" /bin/sh -c 'cd "$0" && eval "$1"' "$DIR" "$CMD"`
	cmdArgs := append([]string{"--mount", "--pid", "--fork", "--propagation", "private", "/bin/sh", "-c", script, "sh"}, envArgs...)
	return run(t, ctx, []string{"ROOT=" + root, "DIR=" + dir, "CMD=" + command}, "unshare", cmdArgs...)
}

func run(t *testing.T, ctx context.Context, extraEnv []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), extraEnv...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out.String())
	}
	if s := out.String(); strings.Contains(s, "check-runtime:") {
		t.Logf("%s", s)
	}
	return out.String()
}

func writeFile(t *testing.T, root, name, content string) {
	t.Helper()
	p := filepath.Join(root, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// shellQuote joins words into one shell command line.
func shellQuote(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}
