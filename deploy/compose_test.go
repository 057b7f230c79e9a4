package deploy

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"gopkg.in/yaml.v3"
)

// loadCompose loads docker-compose.yml the way Docker Compose does (schema
// validation, interpolation, normalisation), with env as the shell's
// environment.
func loadCompose(t *testing.T, env map[string]string) (*types.Project, error) {
	t.Helper()
	root := repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	details := types.ConfigDetails{
		WorkingDir:  root,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(root, "docker-compose.yml"), Content: b}},
		Environment: env,
	}
	return loader.LoadWithContext(context.Background(), details, func(o *loader.Options) {
		o.SetProjectName("deskenv", true)
	})
}

// TestComposeRequiresTokens: compose refuses to start the appliance unless
// both the agent and the operator token are given.
func TestComposeRequiresTokens(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		wantErr string
	}{
		{"both tokens", map[string]string{"DESKENV_AGENT_TOKEN": "a", "DESKENV_OPERATOR_TOKEN": "o"}, ""},
		{"no agent token", map[string]string{"DESKENV_OPERATOR_TOKEN": "o"}, "DESKENV_AGENT_TOKEN"},
		{"no operator token", map[string]string{"DESKENV_AGENT_TOKEN": "a"}, "DESKENV_OPERATOR_TOKEN"},
		{"empty agent token", map[string]string{"DESKENV_AGENT_TOKEN": "", "DESKENV_OPERATOR_TOKEN": "o"}, "DESKENV_AGENT_TOKEN"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := loadCompose(t, tc.env)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("load: %v", err)
				}
				svc := p.Services["deskenv"]
				for k, want := range map[string]string{"DESKENV_AGENT_TOKEN": "a", "DESKENV_OPERATOR_TOKEN": "o"} {
					if v := svc.Environment[k]; v == nil || *v != want {
						t.Errorf("environment %s = %v, want %q from the shell", k, v, want)
					}
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("load error %v, want one naming %s", err, tc.wantErr)
			}
		})
	}
}

// TestComposeService checks the one service against the image: ports, shared
// memory, the health check, the episodes volume, and no privileges.
func TestComposeService(t *testing.T) {
	p, err := loadCompose(t, map[string]string{"DESKENV_AGENT_TOKEN": "a", "DESKENV_OPERATOR_TOKEN": "o"})
	if err != nil {
		t.Fatalf("load docker-compose.yml: %v", err)
	}
	if len(p.Services) != 1 {
		t.Fatalf("services %v, want exactly one (deskenv)", p.ServiceNames())
	}
	svc, ok := p.Services["deskenv"]
	if !ok {
		t.Fatalf("no service deskenv (have %v)", p.ServiceNames())
	}
	l := readLayout(t)
	episodes, _ := l.getenv("DESKENV_EPISODES")
	udp, _ := l.getenv("DESKENV_UDP_PORT")

	ports := map[string]types.ServicePortConfig{}
	for _, pc := range svc.Ports {
		ports[strconv.FormatUint(uint64(pc.Target), 10)+"/"+pc.Protocol] = pc
	}
	var volumeTargets []string
	for _, v := range svc.Volumes {
		volumeTargets = append(volumeTargets, v.Target)
	}
	tests := []struct {
		name string
		ok   bool
		got  any
	}{
		{"built from the Dockerfile here", svc.Build != nil && svc.Build.Context == repoRoot(t) && (svc.Build.Dockerfile == "" || svc.Build.Dockerfile == "Dockerfile"), svc.Build},
		{"8080/tcp published", ports["8080/tcp"].Published != "", svc.Ports},
		{"WebRTC UDP port published on the same number", ports[udp+"/udp"].Published == udp, svc.Ports},
		{"every published port is one the image exposes", func() bool {
			for k := range ports {
				if !slices.Contains(l.expose, k) {
					return false
				}
			}
			return true
		}(), l.expose},
		{"at least 512 MB of /dev/shm for Chromium", svc.ShmSize >= 512<<20, svc.ShmSize},
		{"health check is the image's", svc.HealthCheck != nil && slices.Equal([]string(svc.HealthCheck.Test), append([]string{"CMD"}, l.health...)), svc.HealthCheck},
		{"episodes on a volume at the image's DESKENV_EPISODES", slices.Contains(volumeTargets, episodes), volumeTargets},
		{"all capabilities dropped but the binary's file capabilities", slices.Contains(svc.CapDrop, "ALL") && func() bool {
			got := slices.Clone([]string(svc.CapAdd))
			slices.Sort(got)
			return slices.Equal(got, sessionCaps)
		}(), svc.CapAdd},
		{"no no-new-privileges: the file capabilities that start the desktop as its own user must apply", !slices.Contains(svc.SecurityOpt, "no-new-privileges:true"), svc.SecurityOpt},
		{"not privileged, no host network", !svc.Privileged && svc.NetworkMode != "host", svc.NetworkMode},
		{"no listen address: tokens open it to the network", svc.Environment["DESKENV_ADDR"] == nil, svc.Environment["DESKENV_ADDR"]},
	}
	for _, tc := range tests {
		if !tc.ok {
			t.Errorf("%s: got %+v", tc.name, tc.got)
		}
	}
}

// TestComposeTokensNotWritten reads the raw YAML: a token's value must be an
// interpolation from the environment, never text in the file.
func TestComposeTokensNotWritten(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Services map[string]struct {
			Environment map[string]string `yaml:"environment"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("docker-compose.yml is not YAML with a services.*.environment map: %v", err)
	}
	n := 0
	for name, svc := range doc.Services {
		for k, v := range svc.Environment {
			if !strings.Contains(k, "TOKEN") {
				continue
			}
			n++
			if !strings.HasPrefix(v, "${"+k) || !strings.HasSuffix(v, "}") {
				t.Errorf("service %s: %s is %q, want ${%s...} from the environment", name, k, v, k)
			}
		}
	}
	if n == 0 {
		t.Fatal("no *_TOKEN in any service's environment: the appliance would run without tokens")
	}
}
