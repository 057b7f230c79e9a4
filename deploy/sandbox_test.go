package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// agent-sandbox's API, as deploy/agent-sandbox uses it. Its Go module is not
// served to this build, so the fields are transcribed here: the ones the
// manifests use and no others (a field left out is refused as a misspelt one
// is), from kubernetes-sigs/agent-sandbox at commit
// 2fd412d55ecae90861a101a5424a75473de97c36 (v0.5.6 and 12 commits; these
// files are as in v0.5.6):
//
//	extensions/api/v1beta1/sandboxtemplate_types.go  SandboxTemplate, SandboxTemplateSpec, NetworkPolicySpec
//	extensions/api/v1beta1/sandboxwarmpool_types.go  SandboxWarmPool, SandboxWarmPoolSpec, SandboxTemplateRef, SandboxWarmPoolUpdateStrategy
//	extensions/api/v1beta1/sandboxclaim_types.go     SandboxClaim, SandboxClaimSpec, SandboxWarmPoolRef, Lifecycle
//	api/v1beta1/sandbox_types.go                     SandboxBlueprint (inlined in SandboxTemplateSpec), PodTemplate, PodMetadata
//
// and what Go types cannot say (required fields, enums, minimums) from the
// CRDs generated from them at the same commit,
// k8s/crds/extensions.agents.x-k8s.io_sandbox{templates,warmpools,claims}.yaml
// (version v1beta1, the storage version; v1alpha1 is served but deprecated).
// When moving to a newer agent-sandbox, re-read those files and update both.
const sandboxAPIVersion = "extensions.agents.x-k8s.io/v1beta1"

// sandboxKindVersion is the apiVersion this deployment writes an
// agent-sandbox kind in, for a clear error when a manifest uses another.
func sandboxKindVersion(kind string) (string, bool) {
	switch kind {
	case "SandboxTemplate", "SandboxWarmPool", "SandboxClaim":
		return sandboxAPIVersion, true
	}
	return "", false
}

// schemaChecker is a transcribed type that checks what its CRD's schema
// requires beyond the fields' names and types.
type schemaChecker interface{ checkSchema() error }

type sandboxTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              *sandboxTemplateSpec `json:"spec"` // required
}

type sandboxTemplateSpec struct {
	// From SandboxBlueprint (inline).
	PodTemplate *sandboxPodTemplate `json:"podTemplate"` // required
	Service     *bool               `json:"service,omitempty"`

	NetworkPolicy              *sandboxNetworkPolicy `json:"networkPolicy,omitempty"`
	NetworkPolicyManagement    string                `json:"networkPolicyManagement,omitempty"`    // Managed (default), Unmanaged
	EnvVarsInjectionPolicy     string                `json:"envVarsInjectionPolicy,omitempty"`     // Allowed, Overrides, Disallowed (default)
	VolumeClaimTemplatesPolicy string                `json:"volumeClaimTemplatesPolicy,omitempty"` // Disallowed (default), Allowed, Overrides
}

type sandboxPodTemplate struct {
	Metadata sandboxPodMetadata `json:"metadata"`
	Spec     *corev1.PodSpec    `json:"spec"` // required; the CRD requires containers in it
}

type sandboxPodMetadata struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// sandboxNetworkPolicy is agent-sandbox's NetworkPolicySpec: the rules only;
// the controller sets the pod selector and both policy types itself.
type sandboxNetworkPolicy struct {
	Ingress []networkingv1.NetworkPolicyIngressRule `json:"ingress,omitempty"`
	Egress  []networkingv1.NetworkPolicyEgressRule  `json:"egress,omitempty"`
}

type sandboxWarmPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              *sandboxWarmPoolSpec `json:"spec"` // required
}

type sandboxWarmPoolSpec struct {
	Replicas       *int32               `json:"replicas,omitempty"` // default 1, minimum 0
	TemplateRef    *sandboxRef          `json:"sandboxTemplateRef"` // required
	UpdateStrategy *sandboxPoolStrategy `json:"updateStrategy,omitempty"`
}

type sandboxPoolStrategy struct {
	Type string `json:"type,omitempty"` // Recreate, OnReplenish (default)
}

// sandboxRef is both SandboxTemplateRef and SandboxWarmPoolRef: a name.
type sandboxRef struct {
	Name string `json:"name"` // required
}

type sandboxClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              *sandboxClaimSpec `json:"spec"` // required
}

// sandboxClaimSpec leaves out env on purpose: the template refuses it
// (envVarsInjectionPolicy: Disallowed), so a claim here that sets it is
// refused as an unknown field.
type sandboxClaimSpec struct {
	WarmPoolRef *sandboxRef            `json:"warmPoolRef"` // required
	Lifecycle   *sandboxClaimLifecycle `json:"lifecycle,omitempty"`
}

type sandboxClaimLifecycle struct {
	ShutdownTime            *metav1.Time `json:"shutdownTime,omitempty"`
	TTLSecondsAfterFinished *int32       `json:"ttlSecondsAfterFinished,omitempty"` // minimum 0
	ShutdownPolicy          string       `json:"shutdownPolicy,omitempty"`          // Delete, DeleteForeground, Retain (default)
}

func (o *sandboxTemplate) checkSchema() error {
	errs := []error{objectNamed(o.ObjectMeta)}
	s := o.Spec
	if s == nil {
		return errors.Join(append(errs, errors.New("spec: required"))...)
	}
	errs = append(errs,
		enumOf("spec.networkPolicyManagement", s.NetworkPolicyManagement, "Managed", "Unmanaged"),
		enumOf("spec.envVarsInjectionPolicy", s.EnvVarsInjectionPolicy, "Allowed", "Overrides", "Disallowed"),
		enumOf("spec.volumeClaimTemplatesPolicy", s.VolumeClaimTemplatesPolicy, "Disallowed", "Allowed", "Overrides"))
	switch {
	case s.PodTemplate == nil:
		errs = append(errs, errors.New("spec.podTemplate: required"))
	case s.PodTemplate.Spec == nil:
		errs = append(errs, errors.New("spec.podTemplate.spec: required"))
	case len(s.PodTemplate.Spec.Containers) == 0:
		errs = append(errs, errors.New("spec.podTemplate.spec.containers: required"))
	default:
		for i, c := range s.PodTemplate.Spec.Containers {
			if c.Name == "" {
				errs = append(errs, fmt.Errorf("spec.podTemplate.spec.containers[%d].name: required", i))
			}
		}
	}
	return errors.Join(errs...)
}

func (o *sandboxWarmPool) checkSchema() error {
	errs := []error{objectNamed(o.ObjectMeta)}
	s := o.Spec
	if s == nil {
		return errors.Join(append(errs, errors.New("spec: required"))...)
	}
	if s.TemplateRef == nil || s.TemplateRef.Name == "" {
		errs = append(errs, errors.New("spec.sandboxTemplateRef.name: required"))
	}
	if s.Replicas != nil && *s.Replicas < 0 {
		errs = append(errs, fmt.Errorf("spec.replicas: %d is below the minimum 0", *s.Replicas))
	}
	if s.UpdateStrategy != nil {
		errs = append(errs, enumOf("spec.updateStrategy.type", s.UpdateStrategy.Type, "Recreate", "OnReplenish"))
	}
	return errors.Join(errs...)
}

func (o *sandboxClaim) checkSchema() error {
	errs := []error{objectNamed(o.ObjectMeta)}
	s := o.Spec
	if s == nil {
		return errors.Join(append(errs, errors.New("spec: required"))...)
	}
	if s.WarmPoolRef == nil || s.WarmPoolRef.Name == "" {
		errs = append(errs, errors.New("spec.warmPoolRef.name: required"))
	}
	if l := s.Lifecycle; l != nil {
		errs = append(errs, enumOf("spec.lifecycle.shutdownPolicy", l.ShutdownPolicy, "Delete", "DeleteForeground", "Retain"))
		if l.TTLSecondsAfterFinished != nil && *l.TTLSecondsAfterFinished < 0 {
			errs = append(errs, fmt.Errorf("spec.lifecycle.ttlSecondsAfterFinished: %d is below the minimum 0", *l.TTLSecondsAfterFinished))
		}
	}
	return errors.Join(errs...)
}

// objectNamed: the API server wants a name, or a generateName to make one.
func objectNamed(m metav1.ObjectMeta) error {
	if m.Name == "" && m.GenerateName == "" {
		return errors.New("metadata.name: required (or metadata.generateName)")
	}
	return nil
}

// enumOf checks an enum field; "" is the field left out, which takes the
// CRD's default.
func enumOf(path, v string, allowed ...string) error {
	if v == "" || slices.Contains(allowed, v) {
		return nil
	}
	return fmt.Errorf("%s: %q is not one of %v", path, v, allowed)
}

// sandboxExpect is what differs between deploy/agent-sandbox's files and
// their rendering by kustomize.
type sandboxExpect struct {
	namespace      string // of the kustomization's objects: "" in the files
	claimNamespace string // the kustomization's namespace, which the claim files name themselves
	image          string
	tokensSet      bool // the Secret's values are filled in
}

// privateRanges are the destinations agent-sandbox's default policy keeps a
// sandbox from (buildDefaultNetworkPolicySpec, sandboxtemplate_controller.go
// at the commit above): the cluster, the VPC, the metadata server.
var privateRanges = []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16"}

// checkSandboxSet cross-checks deploy/agent-sandbox: the template's pod is the
// StatefulSet's (ref) but for its labels, the pool and the claim name what
// they should, the network policy lets trainers reach the HTTP port and the
// desktop nothing in the cluster, tokens come from the Secret in the set, and
// the trainers' Role grants what claiming needs and no more.
func checkSandboxSet(set *manifestSet, ref *appsv1.StatefulSet, want sandboxExpect) (problems []string) {
	errorf := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	if len(set.sandboxTemplates) != 1 || len(set.warmPools) != 1 || len(set.claims) != 1 || len(set.secrets) != 1 ||
		len(set.namespaces) != 1 || len(set.pods) != 1 || len(set.serviceAccounts) != 1 || len(set.roles) != 1 || len(set.roleBindings) != 1 {
		errorf("want one each of SandboxTemplate, SandboxWarmPool, SandboxClaim, Secret, Namespace, Pod (the trainer shell), ServiceAccount, Role, RoleBinding; got %d, %d, %d, %d, %d, %d, %d, %d, %d",
			len(set.sandboxTemplates), len(set.warmPools), len(set.claims), len(set.secrets), len(set.namespaces),
			len(set.pods), len(set.serviceAccounts), len(set.roles), len(set.roleBindings))
		return problems
	}
	tpl, pool, claim, secret, shell := set.sandboxTemplates[0], set.warmPools[0], set.claims[0], set.secrets[0], set.pods[0]
	sa, role, rb := set.serviceAccounts[0], set.roles[0], set.roleBindings[0]
	if tpl.Spec == nil || tpl.Spec.PodTemplate == nil || tpl.Spec.PodTemplate.Spec == nil || len(tpl.Spec.PodTemplate.Spec.Containers) != 1 {
		errorf("SandboxTemplate %s: want a pod template with one container", tpl.Name)
		return problems
	}
	pod := tpl.Spec.PodTemplate.Spec
	c := pod.Containers[0]

	// Names, labels, namespaces.
	for _, m := range []struct {
		kind, name, ns, wantNS string
		labels                 map[string]string
	}{
		{"SandboxTemplate", tpl.Name, tpl.Namespace, want.namespace, tpl.Labels},
		{"SandboxWarmPool", pool.Name, pool.Namespace, want.namespace, pool.Labels},
		{"Secret", secret.Name, secret.Namespace, want.namespace, secret.Labels},
		{"ServiceAccount", sa.Name, sa.Namespace, want.namespace, sa.Labels},
		{"Role", role.Name, role.Namespace, want.namespace, role.Labels},
		{"RoleBinding", rb.Name, rb.Namespace, want.namespace, rb.Labels},
		// Created by hand, not by kustomize: they name the namespace
		// themselves, and a claim adopts only from a pool in its own.
		{"SandboxClaim", claim.Name + claim.GenerateName, claim.Namespace, want.claimNamespace, claim.Labels},
		{"Pod", shell.Name, shell.Namespace, want.claimNamespace, shell.Labels},
		{"Namespace", set.namespaces[0].Name, set.namespaces[0].Name, want.claimNamespace, set.namespaces[0].Labels},
	} {
		if m.ns != m.wantNS {
			errorf("%s %s is in namespace %q, want %q", m.kind, m.name, m.ns, m.wantNS)
		}
		if m.labels["app.kubernetes.io/name"] != "deskenv" {
			errorf("%s %s lacks the label app.kubernetes.io/name=deskenv", m.kind, m.name)
		}
	}

	checkSandboxTemplate(tpl, ref, shell.Labels, errorf)
	checkSameAsStatefulSet(pod, ref, want.image, errorf)
	checkSandboxTokens(secret, ref, c.Env, shell, want.tokensSet, errorf)

	// Pool and claim.
	if pool.Spec == nil || pool.Spec.TemplateRef == nil || pool.Spec.TemplateRef.Name != tpl.Name {
		errorf("SandboxWarmPool %s does not name the SandboxTemplate %s", pool.Name, tpl.Name)
	} else if r := pool.Spec.Replicas; r != nil && *r < 1 {
		errorf("SandboxWarmPool replicas %d keeps no desktop warm", *r)
	}
	if claim.Spec == nil || claim.Spec.WarmPoolRef == nil || claim.Spec.WarmPoolRef.Name != pool.Name {
		errorf("SandboxClaim does not name the SandboxWarmPool %s", pool.Name)
	}
	checkTrainerAccess(sa, role, rb, want.namespace, errorf)
	return problems
}

// checkSandboxTemplate checks the template's own settings: a Service per
// sandbox, nothing a claim may change, a network policy trainers get through,
// and pod labels of its own.
func checkSandboxTemplate(tpl *sandboxTemplate, ref *appsv1.StatefulSet, trainer map[string]string, errorf func(string, ...any)) {
	pod := tpl.Spec.PodTemplate.Spec
	podLabels := tpl.Spec.PodTemplate.Metadata.Labels
	ts := tpl.Spec
	if ts.Service == nil || !*ts.Service {
		errorf("SandboxTemplate service must be true: without it the controller makes no Service, and a claim's trainer has no name to reach the desktop by")
	}
	if ts.EnvVarsInjectionPolicy != "Disallowed" {
		errorf("SandboxTemplate envVarsInjectionPolicy %q, want Disallowed said outright: a claim could set DESKENV_* settings (DESKENV_ADDR, the tokens), and any claim that sets env is started cold instead of taking a warm desktop", ts.EnvVarsInjectionPolicy)
	}
	if ts.VolumeClaimTemplatesPolicy != "" && ts.VolumeClaimTemplatesPolicy != "Disallowed" {
		errorf("SandboxTemplate volumeClaimTemplatesPolicy %q: a desktop keeps nothing across claims, and a claim's volumes force a cold start", ts.VolumeClaimTemplatesPolicy)
	}
	if ts.NetworkPolicyManagement == "Unmanaged" {
		errorf("SandboxTemplate networkPolicyManagement Unmanaged: no policy would keep other pods from the desktops or the desktops from the cluster")
	}
	if ts.NetworkPolicy == nil {
		errorf("SandboxTemplate networkPolicy unset: the controller's default admits only agent-sandbox's router, which drops the Authorization header deskenv needs")
	} else {
		checkSandboxIngress(ts.NetworkPolicy.Ingress, pod.Containers[0].Ports, trainer, errorf)
		checkSandboxEgress(ts.NetworkPolicy.Egress, errorf)
	}
	if podLabels["app.kubernetes.io/name"] != "deskenv" {
		errorf("SandboxTemplate pod lacks the label app.kubernetes.io/name=deskenv")
	}
	if ref.Spec.Selector != nil && subset(ref.Spec.Selector.MatchLabels, podLabels) {
		errorf("SandboxTemplate pod labels %v match the StatefulSet's selector %v: in one namespace its Services and PodDisruptionBudget would take in claimed desktops", podLabels, ref.Spec.Selector.MatchLabels)
	}
	for _, tc := range pod.TopologySpreadConstraints {
		if tc.LabelSelector == nil || !subset(tc.LabelSelector.MatchLabels, podLabels) {
			errorf("SandboxTemplate topologySpreadConstraint selects %v, not the template's pods %v", tc.LabelSelector, podLabels)
		}
	}
}

// checkSameAsStatefulSet: the template's pod is the StatefulSet's (ref) but
// for its labels and spread, so both ways of running a fleet run the same
// desktop with the same probes, tokens, sizes and protections.
func checkSameAsStatefulSet(pod *corev1.PodSpec, ref *appsv1.StatefulSet, image string, errorf func(string, ...any)) {
	c := pod.Containers[0]
	if c.Image != image {
		errorf("SandboxTemplate image %q, want %q (the StatefulSet's)", c.Image, image)
	}
	rp := ref.Spec.Template.Spec
	rc := rp.Containers[0]
	same := func(what string, here, there any) {
		if !equality.Semantic.DeepEqual(here, there) {
			g, _ := json.Marshal(here)
			r, _ := json.Marshal(there)
			errorf("SandboxTemplate %s: not the StatefulSet's (deploy/base/statefulset.yaml): %s here, %s there", what, g, r)
		}
	}
	same("container name", c.Name, rc.Name)
	same("imagePullPolicy", c.ImagePullPolicy, rc.ImagePullPolicy)
	same("ports", c.Ports, rc.Ports)
	same("env", c.Env, rc.Env)
	same("resources", c.Resources, rc.Resources)
	same("startupProbe", c.StartupProbe, rc.StartupProbe)
	same("readinessProbe", c.ReadinessProbe, rc.ReadinessProbe)
	same("livenessProbe", c.LivenessProbe, rc.LivenessProbe)
	same("container securityContext", c.SecurityContext, rc.SecurityContext)
	same("volumeMounts", c.VolumeMounts, rc.VolumeMounts)
	same("pod securityContext", pod.SecurityContext, rp.SecurityContext)
	same("automountServiceAccountToken", pod.AutomountServiceAccountToken, rp.AutomountServiceAccountToken)
	same("enableServiceLinks", pod.EnableServiceLinks, rp.EnableServiceLinks)
	same("terminationGracePeriodSeconds", pod.TerminationGracePeriodSeconds, rp.TerminationGracePeriodSeconds)
	same("volumes", pod.Volumes, rp.Volumes)
}

// checkSandboxTokens: the template and the trainer shell read their tokens
// from the set's Secret, which has the StatefulSet's Secret name and the keys
// they read (filled once tokens.env is, empty in the example).
func checkSandboxTokens(secret *corev1.Secret, ref *appsv1.StatefulSet, env []corev1.EnvVar, shell *corev1.Pod, tokensSet bool, errorf func(string, ...any)) {
	secretKeys := map[string]string{}
	for k, v := range secret.StringData {
		secretKeys[k] = v
	}
	for k, v := range secret.Data {
		secretKeys[k] = string(v)
	}
	refSecret := ""
	for _, e := range ref.Spec.Template.Spec.Containers[0].Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			refSecret = e.ValueFrom.SecretKeyRef.Name
		}
	}
	if secret.Name != refSecret {
		errorf("Secret %q: the StatefulSet's tokens are in %q, and trainers and docs name one Secret", secret.Name, refSecret)
	}
	checkTokenRefs("SandboxTemplate", env, secret.Name, secretKeys, tokensSet, errorf)
	var shellEnv []corev1.EnvVar
	for _, sc := range shell.Spec.Containers {
		shellEnv = append(shellEnv, sc.Env...)
	}
	checkTokenRefs("trainer Pod", shellEnv, secret.Name, secretKeys, tokensSet, errorf)
	if !slices.ContainsFunc(shellEnv, func(e corev1.EnvVar) bool {
		return e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Key == "agent-token"
	}) {
		errorf("trainer Pod does not read agent-token from the Secret: it could not speak MCP to its desktop")
	}
	if shell.Spec.AutomountServiceAccountToken == nil || *shell.Spec.AutomountServiceAccountToken {
		errorf("trainer Pod automountServiceAccountToken must be false: it only curls the desktop")
	}
}

// checkTokenRefs: no literal tokens in env, and every secretKeyRef reads a
// key of the set's Secret (name, with keys), filled or not as the set is.
func checkTokenRefs(who string, env []corev1.EnvVar, name string, keys map[string]string, tokensSet bool, errorf func(string, ...any)) {
	for _, e := range env {
		if strings.Contains(e.Name, "TOKEN") && e.Value != "" {
			errorf("%s env %s has a literal value: tokens come from the Secret", who, e.Name)
		}
		if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			continue
		}
		r := e.ValueFrom.SecretKeyRef
		optional := r.Optional != nil && *r.Optional
		v, ok := keys[r.Key]
		switch {
		case r.Name != name:
			errorf("%s env %s reads Secret %q, but the set's Secret is %q", who, e.Name, r.Name, name)
		case !ok && !optional:
			errorf("%s env %s reads key %q, which Secret %s does not have", who, e.Name, r.Key, name)
		case tokensSet && v == "" && !optional:
			errorf("%s env %s: Secret key %s is empty after tokens.env was filled", who, e.Name, r.Key)
		case !tokensSet && v != "":
			errorf("Secret key %s holds a value: tokens.env.example ships none", r.Key)
		}
	}
}

// checkTrainerAccess: the trainers' Role grants what claiming needs and no
// more, bound to their ServiceAccount.
func checkTrainerAccess(sa *corev1.ServiceAccount, role *rbacv1.Role, rb *rbacv1.RoleBinding, namespace string, errorf func(string, ...any)) {
	if rb.RoleRef.APIGroup != rbacv1.GroupName || rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != role.Name {
		errorf("RoleBinding %s refers to %s %s/%s, not the Role %s", rb.Name, rb.RoleRef.APIGroup, rb.RoleRef.Kind, rb.RoleRef.Name, role.Name)
	}
	if !slices.ContainsFunc(rb.Subjects, func(s rbacv1.Subject) bool {
		return s.Kind == rbacv1.ServiceAccountKind && s.Name == sa.Name && s.Namespace == namespace
	}) {
		errorf("RoleBinding %s does not bind the ServiceAccount %s in namespace %q: %+v", rb.Name, sa.Name, namespace, rb.Subjects)
	}
	for _, g := range []struct {
		group, resource, verb string
		allow                 bool
	}{
		{"extensions.agents.x-k8s.io", "sandboxclaims", "create", true},
		{"extensions.agents.x-k8s.io", "sandboxclaims", "get", true},
		{"extensions.agents.x-k8s.io", "sandboxclaims", "watch", true},
		{"extensions.agents.x-k8s.io", "sandboxclaims", "delete", true},
		{"agents.x-k8s.io", "sandboxes", "get", true},
		// A trainer must not read the tokens through the API, reach into
		// the desktops' pods, or change what the pool hands out.
		{"", "secrets", "get", false},
		{"", "secrets", "list", false},
		{"", "pods", "create", false},
		{"", "pods/exec", "create", false},
		{"extensions.agents.x-k8s.io", "sandboxtemplates", "update", false},
		{"extensions.agents.x-k8s.io", "sandboxwarmpools", "update", false},
		{"agents.x-k8s.io", "sandboxes", "create", false},
	} {
		if got := roleAllows(role, g.group, g.resource, g.verb); got != g.allow {
			errorf("Role %s: %s on %s (group %q) allowed %v, want %v", role.Name, g.verb, g.resource, g.group, got, g.allow)
		}
	}
}

// checkSandboxIngress: every rule admits named pods of the namespace (the
// trainers, the shell among them) on the HTTP port, and nothing else.
func checkSandboxIngress(rules []networkingv1.NetworkPolicyIngressRule, ports []corev1.ContainerPort, trainer map[string]string, errorf func(string, ...any)) {
	admitted := false
	for i, r := range rules {
		if len(r.From) == 0 {
			errorf("networkPolicy ingress[%d] has no from: it admits every pod in the cluster", i)
		}
		if len(r.Ports) == 0 {
			errorf("networkPolicy ingress[%d] has no ports: it opens every port of the desktop", i)
		}
		for _, p := range r.From {
			if p.PodSelector == nil || len(p.PodSelector.MatchLabels) == 0 || p.NamespaceSelector != nil || p.IPBlock != nil {
				errorf("networkPolicy ingress[%d] admits pods %v in namespaces %v, addresses %v: want trainer pods of this namespace by label", i, p.PodSelector, p.NamespaceSelector, p.IPBlock)
				continue
			}
			if subset(p.PodSelector.MatchLabels, trainer) {
				admitted = true
			}
		}
		for _, p := range r.Ports {
			if p.Port == nil {
				errorf("networkPolicy ingress[%d] port %+v names no port", i, p)
				continue
			}
			proto := corev1.ProtocolTCP // the API's default
			if p.Protocol != nil {
				proto = *p.Protocol
			}
			cp, ok := resolvePort(*p.Port, ports)
			if !ok || cp.Name != "http" || proto != cp.Protocol {
				errorf("networkPolicy ingress[%d] opens %s/%s: trainers need the http port only", i, p.Port.String(), proto)
			}
		}
	}
	if !admitted {
		errorf("networkPolicy ingress admits no pod with the trainer shell's labels %v: trainers could not reach their desktop", trainer)
	}
}

// checkSandboxEgress: the desktop may reach the internet (browser tasks) but
// no address in the cluster or the VPC, as agent-sandbox's default allows.
func checkSandboxEgress(rules []networkingv1.NetworkPolicyEgressRule, errorf func(string, ...any)) {
	for i, r := range rules {
		if len(r.To) == 0 {
			errorf("networkPolicy egress[%d] has no to: it lets the desktop reach everything, the cluster included", i)
		}
		for _, p := range r.To {
			if p.PodSelector != nil || p.NamespaceSelector != nil || p.IPBlock == nil {
				errorf("networkPolicy egress[%d] lets the desktop reach pods in the cluster (%+v)", i, p)
				continue
			}
			if p.IPBlock.CIDR == "0.0.0.0/0" {
				for _, pr := range privateRanges {
					if !slices.Contains(p.IPBlock.Except, pr) {
						errorf("networkPolicy egress[%d] lets the desktop reach %s (cluster, VPC or metadata addresses)", i, pr)
					}
				}
			}
		}
	}
}

// roleAllows reports whether role grants verb on resource in group, wildcards
// included.
func roleAllows(role *rbacv1.Role, group, res, verb string) bool {
	for _, r := range role.Rules {
		if (slices.Contains(r.APIGroups, group) || slices.Contains(r.APIGroups, "*")) &&
			(slices.Contains(r.Resources, res) || slices.Contains(r.Resources, "*")) &&
			(slices.Contains(r.Verbs, verb) || slices.Contains(r.Verbs, "*")) {
			return true
		}
	}
	return false
}

// readTokensExample reads a tokens.env.example's keys and values.
func readTokensExample(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			out[k] = v
		}
	}
	return out
}

// readSandbox decodes deploy/agent-sandbox as written: the kustomization's
// resources, the claim/ files a trainer creates, and the Secret its
// secretGenerator would make from tokens.env.example.
func readSandbox(t *testing.T) (*manifestSet, kustomization) {
	t.Helper()
	dir := filepath.Join(repoRoot(t), "deploy", "agent-sandbox")
	k := readKustomization(t, dir)
	files := slices.Clone(k.Resources)
	claims, _ := filepath.Glob(filepath.Join(dir, "claim", "*.yaml"))
	for _, c := range claims {
		files = append(files, filepath.Join("claim", filepath.Base(c)))
	}
	set := &manifestSet{}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := decodeManifests(bytes.NewReader(b), set); err != nil {
			t.Fatalf("agent-sandbox/%s: %v", f, err)
		}
	}
	for _, g := range k.SecretGenerator {
		s := &corev1.Secret{StringData: map[string]string{}}
		s.Name, s.Labels = g.Name, g.Options.Labels
		for _, e := range g.Envs {
			for key, v := range readTokensExample(t, filepath.Join(dir, e+".example")) {
				s.StringData[key] = v
			}
		}
		set.secrets = append(set.secrets, s)
	}
	return set, k
}

// TestSandboxKustomization: deploy/agent-sandbox's kustomization applies every
// manifest but the claim/ files (a trainer creates those), its Secret keeps
// the name the template reads, and its image is the overlays'.
func TestSandboxKustomization(t *testing.T) {
	deploy := filepath.Join(repoRoot(t), "deploy")
	dir := filepath.Join(deploy, "agent-sandbox")
	k := readKustomization(t, dir)
	listed := map[string]bool{}
	for _, r := range k.Resources {
		listed[r] = true
		if _, err := os.Stat(filepath.Join(dir, r)); err != nil {
			t.Errorf("resources lists %s, which does not exist: %v", r, err)
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	for _, f := range files {
		if name := filepath.Base(f); name != "kustomization.yaml" && !listed[name] {
			t.Errorf("%s is in agent-sandbox but not in its kustomization.yaml: it would never be applied", name)
		}
	}
	if slices.ContainsFunc(k.Resources, func(r string) bool { return strings.HasPrefix(r, "claim") }) {
		t.Errorf("resources lists the claim/ directory: kubectl apply -k would claim a desktop nobody uses")
	}
	if k.Namespace == "" {
		t.Errorf("no namespace: the pool, its Secret and the claims must share one")
	}
	if len(k.SecretGenerator) != 1 {
		t.Fatalf("want one secretGenerator (the tokens), got %d", len(k.SecretGenerator))
	}
	g := k.SecretGenerator[0]
	if !g.Options.DisableNameSuffixHash {
		t.Errorf("secretGenerator %s: disableNameSuffixHash must be true; kustomize does not rewrite the name inside a SandboxTemplate, so a hashed name would leave its pods without tokens", g.Name)
	}
	for _, e := range g.Envs {
		if _, err := os.Stat(filepath.Join(dir, e+".example")); err != nil {
			t.Errorf("secretGenerator %s reads %s, and there is no %s.example to start it from", g.Name, e, e)
		}
	}
	fleet := readKustomization(t, filepath.Join(deploy, "overlays", "fleet"))
	if fmt.Sprint(k.Images) != fmt.Sprint(fleet.Images) {
		t.Errorf("images %+v, overlays/fleet has %+v: one image for both ways of running a fleet", k.Images, fleet.Images)
	}
	b, err := os.ReadFile(filepath.Join(deploy, ".gitignore"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(strings.Split(string(b), "\n"), "agent-sandbox/"+g.Envs[0]) {
		t.Errorf("deploy/.gitignore does not ignore agent-sandbox/%s: real tokens could be committed", g.Envs[0])
	}
}

func TestSandboxManifests(t *testing.T) {
	set, k := readSandbox(t)
	ref := readBase(t).statefulSets[0]
	want := sandboxExpect{claimNamespace: k.Namespace, image: ref.Spec.Template.Spec.Containers[0].Image}
	for _, p := range checkSandboxSet(set, ref, want) {
		t.Error(p)
	}
}

// TestRenderedSandbox builds deploy/agent-sandbox with kubectl's kustomize
// (tokens.env filled from the example) and checks the result: namespace,
// image and Secret applied to agent-sandbox's kinds as to the others.
func TestRenderedSandbox(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not installed: deploy/agent-sandbox is checked file by file only (TestSandboxManifests)")
	}
	src := filepath.Join(repoRoot(t), "deploy", "agent-sandbox")
	tmp := t.TempDir()
	if err := os.CopyFS(tmp, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	var env []string
	for key := range readTokensExample(t, filepath.Join(src, "tokens.env.example")) {
		env = append(env, key+"=test-"+key)
	}
	if err := os.WriteFile(filepath.Join(tmp, "tokens.env"), []byte(strings.Join(env, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(kubectl, "kustomize", tmp)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize deploy/agent-sandbox: %v\n%s", err, stderr.String())
	}
	set := &manifestSet{}
	if err := decodeManifests(bytes.NewReader(out), set); err != nil {
		t.Fatalf("rendered deploy/agent-sandbox: %v\n%s", err, out)
	}
	if len(set.claims) != 0 || len(set.pods) != 0 {
		t.Fatalf("the rendered kustomization holds %d claims and %d pods: those are created by hand", len(set.claims), len(set.pods))
	}
	claims, _ := filepath.Glob(filepath.Join(src, "claim", "*.yaml"))
	for _, c := range claims {
		b, err := os.ReadFile(c)
		if err != nil {
			t.Fatal(err)
		}
		if err := decodeManifests(bytes.NewReader(b), set); err != nil {
			t.Fatalf("%s: %v", c, err)
		}
	}
	k := readKustomization(t, src)
	want := sandboxExpect{namespace: k.Namespace, claimNamespace: k.Namespace, image: k.Images[0].NewName + ":" + k.Images[0].NewTag, tokensSet: true}
	for _, p := range checkSandboxSet(set, readBase(t).statefulSets[0], want) {
		t.Error(p)
	}
}

// TestDecodeSandboxStrict: agent-sandbox's kinds are refused as the API
// server would refuse them: misspelt fields, another version or kind,
// required fields missing, values outside an enum or a minimum.
func TestDecodeSandboxStrict(t *testing.T) {
	const (
		tpl = "apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxTemplate\nmetadata: {name: t}\n"
		swp = "apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxWarmPool\nmetadata: {name: p}\n"
		clm = "apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxClaim\nmetadata: {generateName: c-}\n"
		pod = "podTemplate: {spec: {containers: [{name: c, image: i}]}}"
	)
	tests := []struct {
		name, doc, wantErr string
	}{
		{"template", tpl + "spec: {" + pod + ", service: true, envVarsInjectionPolicy: Disallowed}\n", ""},
		{"pool", swp + "spec: {replicas: 2, sandboxTemplateRef: {name: t}, updateStrategy: {type: Recreate}}\n", ""},
		{"claim", clm + "spec: {warmPoolRef: {name: p}, lifecycle: {shutdownTime: '2030-01-02T03:04:05Z', shutdownPolicy: Delete}}\n", ""},
		{"network policy", tpl + "spec: {" + pod + ", networkPolicy: {ingress: [{from: [{podSelector: {matchLabels: {a: b}}}], ports: [{port: 8080}]}]}}\n", ""},

		{"misspelt template field", tpl + "spec: {" + pod + ", services: true}\n", "services"},
		{"misspelt pod field", tpl + "spec: {podTemplate: {spec: {containers: [{name: c, imag: i}]}}}\n", "imag"},
		{"wrong case", swp + "spec: {sandboxtemplateref: {name: t}}\n", "sandboxtemplateref"},
		{"v1alpha1 field name", swp + "spec: {templateRef: {name: t}}\n", "templateRef"},
		{"a field the policy does not take", tpl + "spec: {" + pod + ", networkPolicy: {podSelector: {}}}\n", "podSelector"},
		{"claim env (refused by the template)", clm + "spec: {warmPoolRef: {name: p}, env: [{name: A, value: b}]}\n", "env"},
		{"status in a manifest", clm + "spec: {warmPoolRef: {name: p}}\nstatus: {}\n", "status"},
		{"duplicate field", swp + "spec: {sandboxTemplateRef: {name: t}}\nspec: {sandboxTemplateRef: {name: u}}\n", "spec"},
		{"wrong type", swp + "spec: {replicas: two, sandboxTemplateRef: {name: t}}\n", "replicas"},
		{"bad time", clm + "spec: {warmPoolRef: {name: p}, lifecycle: {shutdownTime: tomorrow}}\n", "tomorrow"},

		{"deprecated version", "apiVersion: extensions.agents.x-k8s.io/v1alpha1\nkind: SandboxTemplate\nmetadata: {name: t}\n", "v1alpha1 is deprecated"},
		{"wrong group", "apiVersion: agents.x-k8s.io/v1beta1\nkind: SandboxClaim\nmetadata: {name: c}\n", "writes agent-sandbox's SandboxClaim as extensions.agents.x-k8s.io/v1beta1"},
		{"wrong kind", "apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxWarmpool\nmetadata: {name: p}\n", "not a kind this deployment uses"},
		{"a kind not used", "apiVersion: agents.x-k8s.io/v1beta1\nkind: Sandbox\nmetadata: {name: s}\n", "not a kind this deployment uses"},

		{"template without spec", tpl, "spec: required"},
		{"template without podTemplate", tpl + "spec: {service: true}\n", "spec.podTemplate: required"},
		{"podTemplate without spec", tpl + "spec: {podTemplate: {metadata: {labels: {a: b}}}}\n", "spec.podTemplate.spec: required"},
		{"pod without containers", tpl + "spec: {podTemplate: {spec: {}}}\n", "containers: required"},
		{"container without name", tpl + "spec: {podTemplate: {spec: {containers: [{image: i}]}}}\n", "containers[0].name: required"},
		{"pool without template", swp + "spec: {replicas: 1}\n", "sandboxTemplateRef.name: required"},
		{"pool with an empty name", swp + "spec: {sandboxTemplateRef: {}}\n", "sandboxTemplateRef.name: required"},
		{"claim without pool", clm + "spec: {}\n", "warmPoolRef.name: required"},
		{"claim without a name", "apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxClaim\nmetadata: {}\nspec: {warmPoolRef: {name: p}}\n", "metadata.name: required"},

		{"enum: management", tpl + "spec: {" + pod + ", networkPolicyManagement: managed}\n", "networkPolicyManagement"},
		{"enum: env policy", tpl + "spec: {" + pod + ", envVarsInjectionPolicy: Never}\n", "envVarsInjectionPolicy"},
		{"enum: update strategy", swp + "spec: {sandboxTemplateRef: {name: t}, updateStrategy: {type: RollingUpdate}}\n", "updateStrategy.type"},
		{"enum: shutdown policy", clm + "spec: {warmPoolRef: {name: p}, lifecycle: {shutdownPolicy: Keep}}\n", "shutdownPolicy"},
		{"minimum: replicas", swp + "spec: {replicas: -1, sandboxTemplateRef: {name: t}}\n", "below the minimum 0"},
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

// TestCheckSandboxSetCatches breaks deploy/agent-sandbox one way at a time
// and expects the cross-checks to say so.
func TestCheckSandboxSetCatches(t *testing.T) {
	ref := readBase(t).statefulSets[0]
	tspec := func(s *manifestSet) *sandboxTemplateSpec { return s.sandboxTemplates[0].Spec }
	pod := func(s *manifestSet) *corev1.PodSpec { return tspec(s).PodTemplate.Spec }
	ctr := func(s *manifestSet) *corev1.Container { return &pod(s).Containers[0] }
	udp := corev1.ProtocolUDP
	no, yes := false, true
	zero := int32(0)
	tests := []struct {
		name   string
		mutate func(s *manifestSet)
		want   string // "" means no problem at all
	}{
		{"the files as they are", func(s *manifestSet) {}, ""},
		// The same pod as the StatefulSet's.
		{"another image", func(s *manifestSet) { ctr(s).Image = "deskenv:other" }, "image"},
		{"probe on another path", func(s *manifestSet) { ctr(s).ReadinessProbe.HTTPGet.Path = "/healthz" }, "readinessProbe: not the StatefulSet's"},
		{"no liveness probe", func(s *manifestSet) { ctr(s).LivenessProbe = nil }, "livenessProbe: not the StatefulSet's"},
		{"another port", func(s *manifestSet) { ctr(s).Ports[0].ContainerPort = 9090 }, "ports: not the StatefulSet's"},
		{"smaller memory request", func(s *manifestSet) { ctr(s).Resources.Requests[corev1.ResourceMemory] = resource.MustParse("256Mi") }, "resources: not the StatefulSet's"},
		{"token from another Secret", func(s *manifestSet) { ctr(s).Env[0].ValueFrom.SecretKeyRef.Name = "other" }, "env: not the StatefulSet's"},
		{"writable root", func(s *manifestSet) { ctr(s).SecurityContext.ReadOnlyRootFilesystem = &no }, "container securityContext: not the StatefulSet's"},
		{"root allowed", func(s *manifestSet) { pod(s).SecurityContext.RunAsNonRoot = &no }, "pod securityContext: not the StatefulSet's"},
		{"service account token", func(s *manifestSet) { pod(s).AutomountServiceAccountToken = nil }, "automountServiceAccountToken: not the StatefulSet's"},
		{"service links", func(s *manifestSet) { pod(s).EnableServiceLinks = &yes }, "enableServiceLinks: not the StatefulSet's"},
		{"/dev/shm on disk", func(s *manifestSet) { pod(s).Volumes[0].EmptyDir.Medium = "" }, "volumes: not the StatefulSet's"},
		{"no /tmp mount", func(s *manifestSet) { ctr(s).VolumeMounts = ctr(s).VolumeMounts[:1] }, "volumeMounts: not the StatefulSet's"},
		// Labels.
		{"the StatefulSet's labels", func(s *manifestSet) {
			tspec(s).PodTemplate.Metadata.Labels = ref.Spec.Template.Labels
			pod(s).TopologySpreadConstraints[0].LabelSelector.MatchLabels = ref.Spec.Template.Labels
		}, "match the StatefulSet's selector"},
		{"spread over other pods", func(s *manifestSet) {
			pod(s).TopologySpreadConstraints[0].LabelSelector.MatchLabels = map[string]string{"app": "x"}
		}, "topologySpreadConstraint"},
		{"unlabelled pool", func(s *manifestSet) { s.warmPools[0].Labels = nil }, "SandboxWarmPool deskenv lacks the label"},
		// The template's settings.
		{"no Service", func(s *manifestSet) { tspec(s).Service = nil }, "service must be true"},
		{"claims may set env", func(s *manifestSet) { tspec(s).EnvVarsInjectionPolicy = "Overrides" }, "envVarsInjectionPolicy"},
		{"env policy left to the default", func(s *manifestSet) { tspec(s).EnvVarsInjectionPolicy = "" }, "said outright"},
		{"claims may add volumes", func(s *manifestSet) { tspec(s).VolumeClaimTemplatesPolicy = "Allowed" }, "volumeClaimTemplatesPolicy"},
		{"unmanaged network policy", func(s *manifestSet) { tspec(s).NetworkPolicyManagement = "Unmanaged" }, "Unmanaged"},
		{"the default network policy", func(s *manifestSet) { tspec(s).NetworkPolicy = nil }, "drops the Authorization header"},
		{"ingress from anywhere", func(s *manifestSet) { tspec(s).NetworkPolicy.Ingress[0].From = nil }, "admits every pod"},
		{"ingress from every namespace", func(s *manifestSet) {
			tspec(s).NetworkPolicy.Ingress[0].From[0].NamespaceSelector = &metav1.LabelSelector{}
		}, "want trainer pods of this namespace"},
		{"ingress on every port", func(s *manifestSet) { tspec(s).NetworkPolicy.Ingress[0].Ports = nil }, "opens every port"},
		{"ingress on the WebRTC port", func(s *manifestSet) {
			p := intstr.FromInt32(8443)
			tspec(s).NetworkPolicy.Ingress[0].Ports[0] = networkingv1.NetworkPolicyPort{Protocol: &udp, Port: &p}
		}, "trainers need the http port only"},
		{"ingress for other pods than the trainers", func(s *manifestSet) {
			tspec(s).NetworkPolicy.Ingress[0].From[0].PodSelector.MatchLabels = map[string]string{"app": "x"}
		}, "admits no pod with the trainer shell's labels"},
		{"egress to everything", func(s *manifestSet) { tspec(s).NetworkPolicy.Egress[0].To = nil }, "reach everything"},
		{"egress to the cluster's pods", func(s *manifestSet) {
			tspec(s).NetworkPolicy.Egress[0].To = append(tspec(s).NetworkPolicy.Egress[0].To, networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{}})
		}, "reach pods in the cluster"},
		{"egress to the metadata server", func(s *manifestSet) {
			b := tspec(s).NetworkPolicy.Egress[0].To[0].IPBlock
			b.Except = slices.DeleteFunc(b.Except, func(c string) bool { return c == "169.254.0.0/16" })
		}, "reach 169.254.0.0/16"},
		// Pool, claim, Secret.
		{"pool of another template", func(s *manifestSet) { s.warmPools[0].Spec.TemplateRef.Name = "other" }, "does not name the SandboxTemplate"},
		{"pool of nothing", func(s *manifestSet) { s.warmPools[0].Spec.Replicas = &zero }, "keeps no desktop warm"},
		{"claim on another pool", func(s *manifestSet) { s.claims[0].Spec.WarmPoolRef.Name = "other" }, "does not name the SandboxWarmPool"},
		{"claim in another namespace", func(s *manifestSet) { s.claims[0].Namespace = "default" }, `SandboxClaim deskenv- is in namespace "default"`},
		{"Secret under another name", func(s *manifestSet) { s.secrets[0].Name = "tokens" }, `the StatefulSet's tokens are in "deskenv-tokens"`},
		{"Secret without the agent token", func(s *manifestSet) { delete(s.secrets[0].StringData, "agent-token") }, `key "agent-token"`},
		{"a token in the example", func(s *manifestSet) { s.secrets[0].StringData["operator-token"] = "x" }, "ships none"},
		{"missing pool", func(s *manifestSet) { s.warmPools = nil }, "want one each"},
		// The trainer.
		{"trainer without the agent token", func(s *manifestSet) { s.pods[0].Spec.Containers[0].Env = s.pods[0].Spec.Containers[0].Env[1:] }, "does not read agent-token"},
		{"trainer with a literal token", func(s *manifestSet) {
			s.pods[0].Spec.Containers[0].Env[0] = corev1.EnvVar{Name: "AGENT_TOKEN", Value: "hunter2"}
		}, "literal value"},
		{"trainer with an API token", func(s *manifestSet) { s.pods[0].Spec.AutomountServiceAccountToken = &yes }, "trainer Pod automountServiceAccountToken"},
		{"Role may read Secrets", func(s *manifestSet) {
			s.roles[0].Rules = append(s.roles[0].Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}})
		}, "get on secrets"},
		{"Role with wildcards", func(s *manifestSet) {
			s.roles[0].Rules[0].Resources, s.roles[0].Rules[0].Verbs = []string{"*"}, []string{"*"}
		}, "update on sandboxtemplates"},
		{"Role that cannot delete claims", func(s *manifestSet) { s.roles[0].Rules[0].Verbs = []string{"create", "get", "watch"} }, "delete on sandboxclaims"},
		{"RoleBinding to another Role", func(s *manifestSet) { s.roleBindings[0].RoleRef.Name = "admin" }, "not the Role"},
		{"RoleBinding of another account", func(s *manifestSet) { s.roleBindings[0].Subjects[0].Name = "default" }, "does not bind the ServiceAccount"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, k := readSandbox(t)
			tc.mutate(s)
			got := checkSandboxSet(s, ref, sandboxExpect{claimNamespace: k.Namespace, image: ref.Spec.Template.Spec.Containers[0].Image})
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

// TestSandboxDocs: docs/DEPLOY.md's claim flow names the files, namespace,
// pool, Secret, label and account these manifests have, so a rename here
// cannot leave the documented commands pointing at nothing.
func TestSandboxDocs(t *testing.T) {
	root := repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "docs", "DEPLOY.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## A fleet on agent-sandbox\n")
	if !ok {
		t.Fatal(`docs/DEPLOY.md has no section "## A fleet on agent-sandbox"`)
	}
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	set, k := readSandbox(t)
	tpl := set.sandboxTemplates[0]
	var trainer []string
	for _, r := range tpl.Spec.NetworkPolicy.Ingress {
		for _, p := range r.From {
			for key, v := range p.PodSelector.MatchLabels {
				trainer = append(trainer, key+": "+v)
			}
		}
	}
	want := []string{
		"-n " + k.Namespace,
		"sandboxwarmpool " + set.warmPools[0].Name,
		set.secrets[0].Name,
		set.serviceAccounts[0].Name,
		sandboxAPIVersion,
		"claim/sandboxclaim.yaml",
		"claim/trainer-shell.yaml",
		"tokens.env.example",
		"status.sandbox.name",
		"status.serviceFQDN",
	}
	want = append(want, trainer...)
	files, _ := filepath.Glob(filepath.Join(root, "deploy", "agent-sandbox", "*.yaml"))
	for _, f := range files {
		want = append(want, filepath.Base(f))
	}
	for _, w := range want {
		if !strings.Contains(section, w) {
			t.Errorf("docs/DEPLOY.md, A fleet on agent-sandbox: does not mention %q", w)
		}
	}
}
