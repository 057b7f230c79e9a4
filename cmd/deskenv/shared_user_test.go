package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// nobody is the unprivileged user the shared-user test runs deskenv as: it
// holds no capability, so deskenv cannot start the desktop as anyone else.
const nobodyUID, nobodyGID = 65534, 65534

// TestSharedUserSaidLoudly runs deskenv where separation cannot be had (as
// nobody, without capabilities): it must say so at start and in /health's
// details, and refuse the bash and files traits unless told explicitly.
func TestSharedUserSaidLoudly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run deskenv as the unprivileged user nobody")
	}
	// A directory nobody can reach: t.TempDir's parents are 0700 root.
	dir, err := os.MkdirTemp("/tmp", "deskenv-shared-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "deskenv")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(state, nobodyUID, nobodyGID); err != nil {
		t.Fatal(err)
	}

	run := func(args ...string) *exec.Cmd {
		args = append([]string{"--addr", "127.0.0.1:0", "--no-stream", "--apps", "",
			"--home", filepath.Join(state, "home"), "--episodes", filepath.Join(state, "episodes")}, args...)
		cmd := exec.Command(bin, args...)
		cmd.Dir = state
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + state, "XDG_DATA_HOME=" + state}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobodyUID, Gid: nobodyGID, Groups: []uint32{}}}
		return cmd
	}

	for _, trait := range []string{"bash", "files"} {
		t.Run("refuses "+trait, func(t *testing.T) {
			cmd := run("--mcp-traits", trait)
			done := make(chan struct{})
			var out []byte
			go func() { out, err = cmd.CombinedOutput(); close(done) }()
			select {
			case <-done:
			case <-time.After(60 * time.Second):
				cmd.Process.Kill()
				t.Fatal("deskenv did not refuse the trait within 60 s")
			}
			if err == nil {
				t.Fatalf("deskenv --mcp-traits %s as nobody started; want a refusal:\n%s", trait, out)
			}
			for _, want := range []string{"--mcp-traits " + trait + ": refused", "--allow-shared-user"} {
				if !bytes.Contains(out, []byte(want)) {
					t.Errorf("the refusal does not say %q:\n%s", want, out)
				}
			}
		})
	}

	for _, tc := range []struct {
		name string
		args []string
		why  string // in /health's reason
	}{
		{"no session user", nil, "no --session-user given"},
		{"session user without capabilities", []string{"--session-user", "daemon"}, "uid 65534 without CAP_SETUID, CAP_SETGID"},
	} {
		t.Run("says so: "+tc.name, func(t *testing.T) {
			base, logs := startAs(t, run(append(tc.args, "--mcp-traits", "bash,files", "--allow-shared-user")...))
			if !strings.Contains(logs(), "THE DESKTOP IS NOT SEPARATED FROM DESKENV") {
				t.Errorf("no loud warning at start:\n%s", logs())
			}
			var health struct {
				Status  string `json:"status"`
				Details struct {
					Isolation struct {
						Separated bool   `json:"separated"`
						Why       string `json:"why"`
					} `json:"isolation"`
				} `json:"details"`
			}
			resp, err := http.Get(base + "/health?details=1")
			if err != nil {
				t.Fatal(err)
			}
			json.NewDecoder(resp.Body).Decode(&health)
			resp.Body.Close()
			iso := health.Details.Isolation
			if health.Status != "healthy" || iso.Separated || !strings.Contains(iso.Why, tc.why) {
				t.Errorf("/health?details=1 = %+v, want healthy, not separated, saying %q", health, tc.why)
			}
		})
	}
}

// startAs starts cmd (a deskenv the test set up: its binary, flags, user),
// waits for it to be ready and returns its base URL and a reader of its log
// so far; it is stopped with SIGTERM at the end of the test, and must stop.
func startAs(t *testing.T, cmd *exec.Cmd) (base string, logs func() string) {
	t.Helper()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var (
		mu  sync.Mutex
		buf bytes.Buffer
	)
	logs = func() string { mu.Lock(); defer mu.Unlock(); return buf.String() }
	ready := regexp.MustCompile(`deskenv is ready" url=http://([^/ ]+)/`)
	addr := make(chan string, 1)
	exited := make(chan struct{})
	go func() {
		// Read to the end, so deskenv never blocks on a full pipe.
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			buf.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if m := ready.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
		cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			t.Error("deskenv did not stop within 20 s of SIGTERM")
		}
	})
	select {
	case a := <-addr:
		return "http://" + a, logs
	case <-exited:
		t.Fatalf("deskenv exited before it was ready:\n%s", logs())
	case <-time.After(60 * time.Second):
		t.Fatalf("deskenv did not become ready:\n%s", logs())
	}
	return "", logs
}
