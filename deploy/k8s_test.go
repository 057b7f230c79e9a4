package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	sigsjson "sigs.k8s.io/json"
	sigsyaml "sigs.k8s.io/yaml"
)

// manifestSet is a set of decoded Kubernetes objects, from the base's files
// or from a rendered overlay.
type manifestSet struct {
	statefulSets []*appsv1.StatefulSet
	services     []*corev1.Service
	secrets      []*corev1.Secret
	pdbs         []*policyv1.PodDisruptionBudget
	namespaces   []*corev1.Namespace

	// deploy/agent-sandbox: agent-sandbox's kinds (transcribed in
	// sandbox_test.go), the trainers' account and the stand-in trainer pod.
	sandboxTemplates []*sandboxTemplate
	warmPools        []*sandboxWarmPool
	claims           []*sandboxClaim
	serviceAccounts  []*corev1.ServiceAccount
	roles            []*rbacv1.Role
	roleBindings     []*rbacv1.RoleBinding
	pods             []*corev1.Pod
}

// decodeManifests decodes every YAML document in r strictly into its
// Kubernetes API type, the way the API server reads a request body:
// case-sensitive field names, no unknown fields, no duplicates. A kind this
// deployment does not use is an error.
func decodeManifests(r io.Reader, into *manifestSet) error {
	dec := yaml.NewDecoder(r)
	for i := 0; ; i++ {
		var node yaml.Node
		err := dec.Decode(&node)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("document %d: not YAML: %w", i, err)
		}
		// yaml.v3 refuses a key given twice in one mapping only when it
		// decodes into a value, not into a Node: check here, since the
		// conversion to JSON below would keep just one of them.
		var probe any
		if err := node.Decode(&probe); err != nil {
			return fmt.Errorf("document %d: %w", i, err)
		}
		y, err := yaml.Marshal(&node)
		if err != nil {
			return fmt.Errorf("document %d: %w", i, err)
		}
		j, err := sigsyaml.YAMLToJSON(y)
		if err != nil {
			return fmt.Errorf("document %d: %w", i, err)
		}
		if string(j) == "null" {
			continue
		}
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(j, &head); err != nil {
			return fmt.Errorf("document %d: %w", i, err)
		}
		var obj any
		switch head.APIVersion + " " + head.Kind {
		case "apps/v1 StatefulSet":
			o := &appsv1.StatefulSet{}
			into.statefulSets, obj = append(into.statefulSets, o), o
		case "v1 Service":
			o := &corev1.Service{}
			into.services, obj = append(into.services, o), o
		case "v1 Secret":
			o := &corev1.Secret{}
			into.secrets, obj = append(into.secrets, o), o
		case "policy/v1 PodDisruptionBudget":
			o := &policyv1.PodDisruptionBudget{}
			into.pdbs, obj = append(into.pdbs, o), o
		case "v1 Namespace":
			o := &corev1.Namespace{}
			into.namespaces, obj = append(into.namespaces, o), o
		case sandboxAPIVersion + " SandboxTemplate":
			o := &sandboxTemplate{}
			into.sandboxTemplates, obj = append(into.sandboxTemplates, o), o
		case sandboxAPIVersion + " SandboxWarmPool":
			o := &sandboxWarmPool{}
			into.warmPools, obj = append(into.warmPools, o), o
		case sandboxAPIVersion + " SandboxClaim":
			o := &sandboxClaim{}
			into.claims, obj = append(into.claims, o), o
		case "v1 ServiceAccount":
			o := &corev1.ServiceAccount{}
			into.serviceAccounts, obj = append(into.serviceAccounts, o), o
		case "rbac.authorization.k8s.io/v1 Role":
			o := &rbacv1.Role{}
			into.roles, obj = append(into.roles, o), o
		case "rbac.authorization.k8s.io/v1 RoleBinding":
			o := &rbacv1.RoleBinding{}
			into.roleBindings, obj = append(into.roleBindings, o), o
		case "v1 Pod":
			o := &corev1.Pod{}
			into.pods, obj = append(into.pods, o), o
		default:
			if want, ok := sandboxKindVersion(head.Kind); ok {
				return fmt.Errorf("document %d: %s %s: this deployment writes agent-sandbox's %s as %s, the version its CRDs store (v1alpha1 is deprecated)", i, head.APIVersion, head.Kind, head.Kind, want)
			}
			return fmt.Errorf("document %d: %s %s is not a kind this deployment uses (StatefulSet, Service, Secret, PodDisruptionBudget, Namespace; SandboxTemplate, SandboxWarmPool, SandboxClaim, ServiceAccount, Role, RoleBinding, Pod)", i, head.APIVersion, head.Kind)
		}
		strict, err := sigsjson.UnmarshalStrict(j, obj, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
		if err != nil {
			return fmt.Errorf("document %d (%s): %w", i, head.Kind, err)
		}
		if len(strict) > 0 {
			return fmt.Errorf("document %d (%s): %w", i, head.Kind, errors.Join(strict...))
		}
		// A CRD's schema says more than its Go fields can (required
		// fields, enums, minimums): the transcribed types check that too.
		if s, ok := obj.(schemaChecker); ok {
			if err := s.checkSchema(); err != nil {
				return fmt.Errorf("document %d (%s): %w", i, head.Kind, err)
			}
		}
	}
}

// kustomization is the part of kustomize's Kustomization these files use.
// Decoded with known fields only, so a misspelt key is an error, not a
// silently ignored setting.
type kustomization struct {
	APIVersion string   `yaml:"apiVersion"`
	Kind       string   `yaml:"kind"`
	Namespace  string   `yaml:"namespace"`
	Resources  []string `yaml:"resources"`
	Images     []struct {
		Name    string `yaml:"name"`
		NewName string `yaml:"newName"`
		NewTag  string `yaml:"newTag"`
	} `yaml:"images"`
	SecretGenerator []struct {
		Name     string   `yaml:"name"`
		Behavior string   `yaml:"behavior"`
		Envs     []string `yaml:"envs"`
		Options  struct {
			DisableNameSuffixHash bool              `yaml:"disableNameSuffixHash"`
			Labels                map[string]string `yaml:"labels"`
		} `yaml:"options"`
	} `yaml:"secretGenerator"`
	Patches []struct {
		Path string `yaml:"path"`
	} `yaml:"patches"`
}

func readKustomization(t *testing.T, dir string) kustomization {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var k kustomization
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true)
	if err := dec.Decode(&k); err != nil {
		t.Fatalf("%s/kustomization.yaml: %v", dir, err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Fatalf("%s/kustomization.yaml: apiVersion %q kind %q, want kustomize.config.k8s.io/v1beta1 Kustomization", dir, k.APIVersion, k.Kind)
	}
	return k
}

// TestKustomizationsListEveryFile: a manifest left out of kustomization.yaml
// is silently never applied, and one listed but missing breaks the build.
func TestKustomizationsListEveryFile(t *testing.T) {
	deploy := filepath.Join(repoRoot(t), "deploy")
	dirs, _ := filepath.Glob(filepath.Join(deploy, "overlays", "*"))
	dirs = append([]string{filepath.Join(deploy, "base")}, dirs...)
	for _, dir := range dirs {
		rel, _ := filepath.Rel(deploy, dir)
		t.Run(rel, func(t *testing.T) {
			k := readKustomization(t, dir)
			listed := map[string]bool{}
			for _, r := range k.Resources {
				listed[r] = true
				if _, err := os.Stat(filepath.Join(dir, r)); err != nil {
					t.Errorf("resources lists %s, which does not exist: %v", r, err)
				}
			}
			for _, p := range k.Patches {
				listed[p.Path] = true
				if _, err := os.Stat(filepath.Join(dir, p.Path)); err != nil {
					t.Errorf("patches lists %s, which does not exist: %v", p.Path, err)
				}
			}
			files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
			for _, f := range files {
				name := filepath.Base(f)
				if name != "kustomization.yaml" && !listed[name] {
					t.Errorf("%s is in %s but not in its kustomization.yaml: it would never be applied", name, rel)
				}
			}
			if rel != "base" {
				if !listed["../../base"] {
					t.Errorf("overlay %s does not build on ../../base", rel)
				}
				for _, g := range k.SecretGenerator {
					for _, e := range g.Envs {
						if _, err := os.Stat(filepath.Join(dir, e+".example")); err != nil {
							t.Errorf("secretGenerator %s reads %s, and there is no %s.example to start it from", g.Name, e, e)
						}
					}
				}
			}
		})
	}
}

func readBase(t *testing.T) *manifestSet {
	t.Helper()
	dir := filepath.Join(repoRoot(t), "deploy", "base")
	k := readKustomization(t, dir)
	set := &manifestSet{}
	for _, r := range k.Resources {
		b, err := os.ReadFile(filepath.Join(dir, r))
		if err != nil {
			t.Fatal(err)
		}
		if err := decodeManifests(bytes.NewReader(b), set); err != nil {
			t.Fatalf("base/%s: %v", r, err)
		}
	}
	return set
}

func TestBaseManifests(t *testing.T) {
	for _, p := range checkSet(readBase(t), readLayout(t), setExpect{}) {
		t.Error(p)
	}
}

// TestOverlayPatches decodes each overlay's patches strictly: a patch is a
// partial object of the same type, so a misspelt field shows up here even
// without kustomize.
func TestOverlayPatches(t *testing.T) {
	deploy := filepath.Join(repoRoot(t), "deploy")
	dirs, _ := filepath.Glob(filepath.Join(deploy, "overlays", "*"))
	if len(dirs) == 0 {
		t.Fatal("no overlays under deploy/overlays")
	}
	for _, dir := range dirs {
		k := readKustomization(t, dir)
		for _, p := range k.Patches {
			b, err := os.ReadFile(filepath.Join(dir, p.Path))
			if err != nil {
				t.Fatal(err)
			}
			var set manifestSet
			if err := decodeManifests(bytes.NewReader(b), &set); err != nil {
				t.Errorf("%s/%s: %v", filepath.Base(dir), p.Path, err)
			}
		}
		for _, r := range k.Resources {
			if strings.HasSuffix(r, ".yaml") {
				b, err := os.ReadFile(filepath.Join(dir, r))
				if err != nil {
					t.Fatal(err)
				}
				var set manifestSet
				if err := decodeManifests(bytes.NewReader(b), &set); err != nil {
					t.Errorf("%s/%s: %v", filepath.Base(dir), r, err)
				}
			}
		}
	}
}

// TestRenderedOverlays builds each overlay with kustomize (kubectl's, when
// kubectl is installed) from a copy of deploy/ whose tokens.env files are
// filled in, and checks the result as a whole.
func TestRenderedOverlays(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not installed: overlays are checked only file by file (TestOverlayPatches)")
	}
	src := filepath.Join(repoRoot(t), "deploy")
	tmp := t.TempDir()
	if err := os.CopyFS(tmp, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	examples, _ := filepath.Glob(filepath.Join(tmp, "overlays", "*", "tokens.env.example"))
	for _, ex := range examples {
		b, err := os.ReadFile(ex)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, line := range strings.Split(string(b), "\n") {
			if k, _, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
				line = k + "=test-" + k
			}
			out = append(out, line)
		}
		if err := os.WriteFile(strings.TrimSuffix(ex, ".example"), []byte(strings.Join(out, "\n")), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		dir    string
		expect setExpect
	}{
		{"base", setExpect{}},
		{"overlays/fleet", setExpect{namespace: "deskenv", tokensSet: true, image: "registry.example.com/deskenv:dev"}},
		{"overlays/pool", setExpect{namespace: "deskenv", tokensSet: true, image: "registry.example.com/deskenv:dev", pool: 8}},
	}
	for _, tc := range tests {
		t.Run(tc.dir, func(t *testing.T) {
			var stderr bytes.Buffer
			cmd := exec.Command(kubectl, "kustomize", filepath.Join(tmp, tc.dir))
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("kubectl kustomize %s: %v\n%s", tc.dir, err, stderr.String())
			}
			set := &manifestSet{}
			if err := decodeManifests(bytes.NewReader(out), set); err != nil {
				t.Fatalf("rendered %s: %v\n%s", tc.dir, err, out)
			}
			for _, p := range checkSet(set, readLayout(t), tc.expect) {
				t.Error(p)
			}
		})
	}
}

// setExpect is what differs between the base and a rendered overlay.
type setExpect struct {
	namespace string // every namespaced object's; "" for the base
	tokensSet bool   // the Secret's values are filled in
	image     string // the container image; "" means the base's deskenv:dev
	pool      int    // desktops per pod; 0 means one (no DESKENV_DESKTOPS)
}

// checkSet cross-checks a deployment: names and selectors meet, probes hit
// /health on the port the image serves, resources come from the measured
// figures, the pod cannot gain privileges and writes only to its volumes,
// and every token comes from the Secret in the set.
func checkSet(set *manifestSet, layout imageLayout, want setExpect) (problems []string) {
	errorf := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	if len(set.statefulSets) != 1 || len(set.secrets) != 1 || len(set.pdbs) != 1 || len(set.services) != 2 {
		errorf("want 1 StatefulSet, 2 Services, 1 Secret, 1 PodDisruptionBudget; got %d, %d, %d, %d",
			len(set.statefulSets), len(set.services), len(set.secrets), len(set.pdbs))
		return problems
	}
	sts, secret, pdb := set.statefulSets[0], set.secrets[0], set.pdbs[0]
	pod := sts.Spec.Template.Spec
	podLabels := sts.Spec.Template.Labels

	// Names, labels, namespaces.
	for _, m := range []struct {
		kind   string
		name   string
		ns     string
		labels map[string]string
	}{
		{"StatefulSet", sts.Name, sts.Namespace, sts.Labels},
		{"Secret", secret.Name, secret.Namespace, secret.Labels},
		{"PodDisruptionBudget", pdb.Name, pdb.Namespace, pdb.Labels},
		{"Service", set.services[0].Name, set.services[0].Namespace, set.services[0].Labels},
		{"Service", set.services[1].Name, set.services[1].Namespace, set.services[1].Labels},
	} {
		if m.ns != want.namespace {
			errorf("%s %s is in namespace %q, want %q", m.kind, m.name, m.ns, want.namespace)
		}
		if m.labels["app.kubernetes.io/name"] != "deskenv" {
			errorf("%s %s lacks the label app.kubernetes.io/name=deskenv", m.kind, m.name)
		}
	}
	if want.namespace != "" && (len(set.namespaces) != 1 || set.namespaces[0].Name != want.namespace) {
		errorf("the overlay should create its namespace %s", want.namespace)
	}

	// Selectors.
	if sts.Spec.Selector == nil || !subset(sts.Spec.Selector.MatchLabels, podLabels) || len(sts.Spec.Selector.MatchLabels) == 0 {
		errorf("StatefulSet selector %v does not select its own pods %v", sts.Spec.Selector, podLabels)
	}
	if pdb.Spec.Selector == nil || !maps.Equal(pdb.Spec.Selector.MatchLabels, sts.Spec.Selector.MatchLabels) {
		errorf("PodDisruptionBudget selects %v, the StatefulSet's pods are %v", pdb.Spec.Selector, sts.Spec.Selector.MatchLabels)
	}
	if (pdb.Spec.MaxUnavailable == nil) == (pdb.Spec.MinAvailable == nil) {
		errorf("PodDisruptionBudget needs exactly one of maxUnavailable, minAvailable")
	}
	var headless *corev1.Service
	for _, svc := range set.services {
		if len(svc.Spec.Selector) == 0 || !subset(svc.Spec.Selector, podLabels) {
			errorf("Service %s selects %v, which is not the StatefulSet's pods %v", svc.Name, svc.Spec.Selector, podLabels)
		}
		if svc.Spec.ClusterIP == corev1.ClusterIPNone {
			headless = svc
		}
	}
	if headless == nil || sts.Spec.ServiceName != headless.Name {
		errorf("StatefulSet serviceName %q must name the headless Service (clusterIP: None) that gives each pod its DNS name", sts.Spec.ServiceName)
	}
	if sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		errorf("podManagementPolicy %q: desktops are independent, start them in Parallel", sts.Spec.PodManagementPolicy)
	}

	// The container.
	if len(pod.Containers) != 1 {
		errorf("want one container, got %d", len(pod.Containers))
		return problems
	}
	c := pod.Containers[0]
	wantImage := want.image
	if wantImage == "" {
		wantImage = "deskenv:dev"
	}
	if c.Image != wantImage {
		errorf("image %q, want %q", c.Image, wantImage)
	}
	ports := map[string]corev1.ContainerPort{}
	for _, p := range c.Ports {
		ports[p.Name] = p
		key := fmt.Sprintf("%d/%s", p.ContainerPort, strings.ToLower(string(p.Protocol)))
		if !slices.Contains(layout.expose, key) {
			errorf("container port %s (%s) is not one the image exposes (%v)", p.Name, key, layout.expose)
		}
	}
	http, ok := ports["http"]
	if !ok || http.ContainerPort != 8080 || http.Protocol != corev1.ProtocolTCP {
		errorf("container port http: %+v, want 8080/TCP", http)
	}
	for _, svc := range set.services {
		for _, sp := range svc.Spec.Ports {
			cp, ok := resolvePort(sp.TargetPort, c.Ports)
			if !ok || cp.Protocol != sp.Protocol {
				errorf("Service %s port %s targets %s/%s, which is no container port", svc.Name, sp.Name, sp.TargetPort.String(), sp.Protocol)
			}
		}
	}

	// Probes: /health, on the HTTP port, all three.
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
	}{{"startupProbe", c.StartupProbe}, {"readinessProbe", c.ReadinessProbe}, {"livenessProbe", c.LivenessProbe}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			errorf("%s: want an httpGet probe on /health", p.name)
			continue
		}
		cp, ok := resolvePort(p.probe.HTTPGet.Port, c.Ports)
		if p.probe.HTTPGet.Path != "/health" || !ok || cp.ContainerPort != http.ContainerPort {
			errorf("%s: GET %s on port %s, want /health on the http port %d", p.name, p.probe.HTTPGet.Path, p.probe.HTTPGet.Port.String(), http.ContainerPort)
		}
	}
	if c.LivenessProbe != nil && c.LivenessProbe.FailureThreshold*c.LivenessProbe.PeriodSeconds < 20 {
		errorf("livenessProbe restarts a desktop after %d s of failed checks: too eager for a busy machine", c.LivenessProbe.FailureThreshold*c.LivenessProbe.PeriodSeconds)
	}

	// Resources, against the measured figures in docs/SCALE.md: an xterm
	// desktop is 172.6 MB resident after 20 agent steps, a pool of 8 is
	// 1145.6 MB. (Requests may assume a lighter desktop than a browser's,
	// never less than the lightest measured.)
	desktops := max(want.pool, 1)
	measured := resource.MustParse("173Mi")
	if desktops > 1 {
		measured = resource.MustParse("1146Mi")
	}
	req, lim := c.Resources.Requests, c.Resources.Limits
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		rq, okq := req[r]
		lm, okl := lim[r]
		if !okq || !okl {
			errorf("resources: %s needs both a request and a limit (requests %v, limits %v)", r, req, lim)
			continue
		}
		if rq.Cmp(lm) > 0 {
			errorf("resources: %s request %s above its limit %s", r, rq.String(), lm.String())
		}
	}
	if m := req[corev1.ResourceMemory]; m.Cmp(measured) < 0 {
		errorf("memory request %s is below the measured %s for %d desktop(s)", m.String(), measured.String(), desktops)
	}

	// Security: non-root as the image's user, nothing to escalate to, no
	// API token, and a read-only root with every place the image writes
	// mounted.
	sc := pod.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || int(*sc.RunAsUser) != layout.uid {
		errorf("pod securityContext %+v: want runAsNonRoot and runAsUser %d (the image's %s)", sc, layout.uid, layout.user)
	}
	if sc != nil && (sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault) {
		errorf("pod seccompProfile %+v: want RuntimeDefault", sc.SeccompProfile)
	}
	// The binary's file capabilities (the Dockerfile's setcap) take effect
	// only with privilege escalation allowed (no_new_privs unset) and the
	// capabilities in the bounding set: exactly those, all others dropped.
	csc := c.SecurityContext
	var added []string
	if csc != nil && csc.Capabilities != nil {
		for _, c := range csc.Capabilities.Add {
			added = append(added, string(c))
		}
	}
	slices.Sort(added)
	if csc == nil || csc.AllowPrivilegeEscalation == nil || !*csc.AllowPrivilegeEscalation ||
		csc.Capabilities == nil || !slices.Contains(csc.Capabilities.Drop, "ALL") || !slices.Equal(added, sessionCaps) ||
		(csc.Privileged != nil && *csc.Privileged) {
		errorf("container securityContext %+v: want all capabilities dropped but %v added (the binary's file capabilities, to run the desktop as its own user), allowPrivilegeEscalation true for them to apply, not privileged", csc, sessionCaps)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		errorf("automountServiceAccountToken must be false: agents run programs on the desktop")
	}
	if pod.EnableServiceLinks == nil || *pod.EnableServiceLinks {
		errorf("enableServiceLinks must be false: a Service named deskenv-* would inject DESKENV_* variables that deskenv reads as settings")
	}
	if pod.HostNetwork || pod.HostPID || pod.HostIPC {
		errorf("the pod must not share the host's network, PIDs or IPC")
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m.Name
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	for path, name := range mounts {
		if _, ok := volumes[name]; !ok {
			errorf("volumeMount %s uses volume %q, which the pod does not define", path, name)
		}
	}
	shm, ok := volumes[mounts["/dev/shm"]]
	if !ok || shm.EmptyDir == nil || shm.EmptyDir.Medium != corev1.StorageMediumMemory || shm.EmptyDir.SizeLimit == nil {
		errorf("/dev/shm: want an emptyDir with medium Memory and a sizeLimit, got %+v", shm)
	} else if ml := lim[corev1.ResourceMemory]; ml.Cmp(*shm.EmptyDir.SizeLimit) <= 0 {
		errorf("memory limit %s must exceed the /dev/shm sizeLimit %s: what /dev/shm holds counts against it", ml.String(), shm.EmptyDir.SizeLimit.String())
	}
	if csc != nil && csc.ReadOnlyRootFilesystem != nil && *csc.ReadOnlyRootFilesystem {
		home, _ := layout.getenv("HOME")
		for _, p := range []string{"/tmp", home, layout.workdir, "/dev/shm"} {
			if _, ok := mounts[p]; !ok {
				errorf("readOnlyRootFilesystem, but %s (where the image writes) has no volume", p)
			}
		}
	} else {
		errorf("container readOnlyRootFilesystem should be true: everything the appliance writes has a volume")
	}

	// Environment: tokens only from the Secret in the set, never literal.
	secretKeys := map[string]string{}
	for k, v := range secret.StringData {
		secretKeys[k] = v
	}
	for k, v := range secret.Data {
		secretKeys[k] = string(v)
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		if _, dup := env[e.Name]; dup {
			errorf("env %s is set twice", e.Name)
		}
		env[e.Name] = e
		if strings.Contains(e.Name, "TOKEN") && e.Value != "" {
			errorf("env %s has a literal value: tokens come from the Secret", e.Name)
		}
		if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			continue
		}
		ref := e.ValueFrom.SecretKeyRef
		if ref.Name != secret.Name {
			errorf("env %s reads Secret %q, but the set's Secret is %q", e.Name, ref.Name, secret.Name)
			continue
		}
		v, ok := secretKeys[ref.Key]
		optional := ref.Optional != nil && *ref.Optional
		if !ok && !optional {
			errorf("env %s reads key %q, which Secret %s does not have (keys: %v)", e.Name, ref.Key, secret.Name, slices.Sorted(maps.Keys(secretKeys)))
		}
		if want.tokensSet && ok && v == "" && !optional {
			errorf("env %s: Secret key %s is empty after the overlay filled tokens.env", e.Name, ref.Key)
		}
		if !want.tokensSet && v != "" {
			errorf("the base Secret's %s holds a value: the base ships no tokens", ref.Key)
		}
	}
	if e, ok := env["DESKENV_OPERATOR_TOKEN"]; !ok || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
		errorf("DESKENV_OPERATOR_TOKEN must come from the Secret: without it nobody can run the control plane")
	}
	if _, ok := env["DESKENV_ADDR"]; ok {
		errorf("DESKENV_ADDR is set: the appliance listens on :8080 by itself once it has tokens, and on loopback only without")
	}
	switch {
	case want.pool > 1:
		if e := env["DESKENV_DESKTOPS"]; e.Value != fmt.Sprint(want.pool) {
			errorf("pool: DESKENV_DESKTOPS %q, want %d", e.Value, want.pool)
		}
		if e, ok := env["DESKENV_AGENT_TOKEN"]; ok && (e.Value != "" || e.ValueFrom != nil) {
			errorf("pool: a pool-wide agent token (%+v) would work on every desktop; leases carry per-desktop tokens", e)
		}
	default:
		if _, ok := env["DESKENV_DESKTOPS"]; ok {
			errorf("DESKENV_DESKTOPS set without pool mode")
		}
		if e, ok := env["DESKENV_AGENT_TOKEN"]; !ok || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			errorf("DESKENV_AGENT_TOKEN must come from the Secret")
		}
	}
	return problems
}

// resolvePort finds the container port a probe or Service port names.
func resolvePort(p intstr.IntOrString, ports []corev1.ContainerPort) (corev1.ContainerPort, bool) {
	for _, cp := range ports {
		if (p.Type == intstr.String && cp.Name == p.StrVal) || (p.Type == intstr.Int && cp.ContainerPort == p.IntVal) {
			return cp, true
		}
	}
	return corev1.ContainerPort{}, false
}

// subset reports whether every label in sel is in labels with the same value.
func subset(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// TestDecodeManifestsStrict: the decoder refuses what the API server would.
func TestDecodeManifestsStrict(t *testing.T) {
	tests := []struct {
		name, doc, wantErr string
	}{
		{"good", "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {ports: [{port: 80}]}\n", ""},
		{"unknown field", "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {portz: []}\n", "portz"},
		{"wrong case", "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: a}\nspec: {servicename: x}\n", "servicename"},
		{"duplicate field", "apiVersion: v1\nkind: Secret\nmetadata: {name: a}\ntype: Opaque\ntype: Opaque\n", "type"},
		{"wrong type", "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: a}\nspec: {maxUnavailable: [1]}\n", "maxUnavailable"},
		{"bad quantity", "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: a}\nspec:\n  template:\n    spec:\n      containers: [{name: c, resources: {limits: {memory: lots}}}]\n", "quantities"},
		{"unused kind", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\n", "not a kind this deployment uses"},
		{"old api", "apiVersion: policy/v1beta1\nkind: PodDisruptionBudget\nmetadata: {name: a}\n", "not a kind"},
		{"not yaml", "a: [\n", "not YAML"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := decodeManifests(strings.NewReader(tc.doc), &manifestSet{})
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one mentioning %q", err, tc.wantErr)
			}
		})
	}
}

// TestCheckSetCatches breaks the base one way at a time and expects the
// cross-checks to say so: a check that never fires protects nothing.
// sessionCaps are the capabilities the container adds, sorted: the ones the
// Dockerfile's setcap gives the binary (docs/DEPLOY.md says why each).
var sessionCaps = []string{"CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETGID", "SETUID"}

func TestCheckSetCatches(t *testing.T) {
	layout := readLayout(t)
	ctr := func(s *manifestSet) *corev1.Container { return &s.statefulSets[0].Spec.Template.Spec.Containers[0] }
	pod := func(s *manifestSet) *corev1.PodSpec { return &s.statefulSets[0].Spec.Template.Spec }
	envRef := func(s *manifestSet, name string) *corev1.SecretKeySelector {
		for i := range ctr(s).Env {
			if e := &ctr(s).Env[i]; e.Name == name {
				return e.ValueFrom.SecretKeyRef
			}
		}
		t.Fatalf("the base has no env %s", name)
		return nil
	}
	volume := func(s *manifestSet, name string) *corev1.Volume {
		for i := range pod(s).Volumes {
			if v := &pod(s).Volumes[i]; v.Name == name {
				return v
			}
		}
		t.Fatalf("the base has no volume %s", name)
		return nil
	}
	yes, no := true, false
	var root int64
	tests := []struct {
		name   string
		mutate func(s *manifestSet)
		want   string // "" means no problem at all
	}{
		{"the base as it is", func(s *manifestSet) {}, ""},
		{"probe on another path", func(s *manifestSet) { ctr(s).ReadinessProbe.HTTPGet.Path = "/healthz" }, "readinessProbe: GET /healthz"},
		{"probe on an unknown port", func(s *manifestSet) { ctr(s).LivenessProbe.HTTPGet.Port = intstr.FromString("metrics") }, "livenessProbe"},
		{"no startup probe", func(s *manifestSet) { ctr(s).StartupProbe = nil }, "startupProbe"},
		{"impatient liveness", func(s *manifestSet) { ctr(s).LivenessProbe.FailureThreshold = 1 }, "too eager"},
		{"no limits", func(s *manifestSet) { ctr(s).Resources.Limits = nil }, "needs both a request and a limit"},
		{"request above limit", func(s *manifestSet) { ctr(s).Resources.Requests[corev1.ResourceCPU] = resource.MustParse("3") }, "above its limit"},
		{"memory request under the measurement", func(s *manifestSet) { ctr(s).Resources.Requests[corev1.ResourceMemory] = resource.MustParse("64Mi") }, "below the measured"},
		{"memory limit under /dev/shm", func(s *manifestSet) { ctr(s).Resources.Limits[corev1.ResourceMemory] = resource.MustParse("512Mi") }, "must exceed the /dev/shm"},
		{"root allowed", func(s *manifestSet) { pod(s).SecurityContext.RunAsNonRoot = &no }, "runAsNonRoot"},
		{"uid 0", func(s *manifestSet) { pod(s).SecurityContext.RunAsUser = &root }, "runAsUser"},
		{"no privilege escalation: the file capabilities do not apply", func(s *manifestSet) { ctr(s).SecurityContext.AllowPrivilegeEscalation = &no }, "allowPrivilegeEscalation"},
		{"a capability more", func(s *manifestSet) {
			ctr(s).SecurityContext.Capabilities.Add = append(ctr(s).SecurityContext.Capabilities.Add, "SYS_ADMIN")
		}, "capabilities dropped but"},
		{"a capability missing", func(s *manifestSet) { ctr(s).SecurityContext.Capabilities.Add = []corev1.Capability{"SETUID"} }, "capabilities dropped but"},
		{"service account token", func(s *manifestSet) { pod(s).AutomountServiceAccountToken = nil }, "automountServiceAccountToken"},
		{"service links", func(s *manifestSet) { pod(s).EnableServiceLinks = &yes }, "enableServiceLinks"},
		{"host network", func(s *manifestSet) { pod(s).HostNetwork = true }, "host's network"},
		{"writable root", func(s *manifestSet) { ctr(s).SecurityContext.ReadOnlyRootFilesystem = &no }, "readOnlyRootFilesystem should be true"},
		{"no volume for /tmp", func(s *manifestSet) {
			m := ctr(s).VolumeMounts
			ctr(s).VolumeMounts = slices.DeleteFunc(m, func(v corev1.VolumeMount) bool { return v.MountPath == "/tmp" })
		}, "/tmp (where the image writes) has no volume"},
		{"mount of a missing volume", func(s *manifestSet) { ctr(s).VolumeMounts[0].Name = "nope" }, "which the pod does not define"},
		{"/dev/shm on disk", func(s *manifestSet) { volume(s, "dshm").EmptyDir.Medium = "" }, "/dev/shm"},
		{"token from another Secret", func(s *manifestSet) { envRef(s, "DESKENV_OPERATOR_TOKEN").Name = "other" }, `reads Secret "other"`},
		{"token from a missing key", func(s *manifestSet) { envRef(s, "DESKENV_AGENT_TOKEN").Key = "nope" }, `key "nope"`},
		{"literal token", func(s *manifestSet) {
			ctr(s).Env = append(ctr(s).Env, corev1.EnvVar{Name: "DESKENV_VIEWER_TOKEN_X", Value: "hunter2"})
		}, "literal value"},
		{"a token in the base Secret", func(s *manifestSet) { s.secrets[0].StringData["operator-token"] = "x" }, "ships no tokens"},
		{"listen address", func(s *manifestSet) {
			ctr(s).Env = append(ctr(s).Env, corev1.EnvVar{Name: "DESKENV_ADDR", Value: "0.0.0.0:8080"})
		}, "DESKENV_ADDR is set"},
		{"serviceName not the headless Service", func(s *manifestSet) { s.statefulSets[0].Spec.ServiceName = "deskenv" }, "serviceName"},
		{"Service selecting nothing", func(s *manifestSet) { s.services[0].Spec.Selector = map[string]string{"app": "x"} }, "which is not the StatefulSet's pods"},
		{"Service to a missing port", func(s *manifestSet) { s.services[1].Spec.Ports[0].TargetPort = intstr.FromString("nope") }, "which is no container port"},
		{"PDB on other pods", func(s *manifestSet) { s.pdbs[0].Spec.Selector.MatchLabels = map[string]string{"app": "x"} }, "PodDisruptionBudget selects"},
		{"PDB with both bounds", func(s *manifestSet) { one := intstr.FromInt32(1); s.pdbs[0].Spec.MinAvailable = &one }, "exactly one of"},
		{"ordered start", func(s *manifestSet) { s.statefulSets[0].Spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement }, "Parallel"},
		{"port the image does not expose", func(s *manifestSet) { ctr(s).Ports[0].ContainerPort = 9090 }, "not one the image exposes"},
		{"unlabelled Secret", func(s *manifestSet) { s.secrets[0].Labels = nil }, "lacks the label"},
		{"missing PDB", func(s *manifestSet) { s.pdbs = nil }, "want 1 StatefulSet"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := readBase(t)
			tc.mutate(s)
			got := checkSet(s, layout, setExpect{})
			if tc.want == "" {
				if len(got) != 0 {
					t.Fatalf("want no problems, got %q", got)
				}
				return
			}
			for _, p := range got {
				if strings.Contains(p, tc.want) {
					return
				}
			}
			t.Fatalf("want a problem mentioning %q, got %q", tc.want, got)
		})
	}
}
