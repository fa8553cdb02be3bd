// Package install checks the install that `kubectl apply -k config/default`
// makes: rendered with kustomize's own library, every object decodes
// strictly into its type, the controller runs as its ServiceAccount, and
// that ServiceAccount has the permissions wrapup needs and no more.
package install

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/test/framework"
)

// render renders config/default (or the folder of config named dir).
func render(t *testing.T, dir ...string) []*unstructured.Unstructured {
	t.Helper()
	d := "default"
	if len(dir) > 0 {
		d = dir[0]
	}
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resMap, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(framework.RepoRoot(), "config", d))
	if err != nil {
		t.Fatalf("kustomize build config/%s: %v", d, err)
	}
	out, err := resMap.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	return decodeAll(t, string(out))
}

func TestDefaultInstall(t *testing.T) {
	objs := render(t)
	strict := json.NewSerializerWithOptions(json.DefaultMetaFactory, framework.Scheme, framework.Scheme, json.SerializerOptions{Yaml: false, Strict: true})

	var (
		deployments  []*appsv1.Deployment
		clusterRoles = map[string]*rbacv1.ClusterRole{}
		roles        = map[string]*rbacv1.Role{}
		crbs         []*rbacv1.ClusterRoleBinding
		rbs          []*rbacv1.RoleBinding
		rules        []string
		kinds        = map[string]int{}
	)
	for _, u := range objs {
		kinds[u.GetKind()]++
		raw, err := u.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		obj, _, err := strict.Decode(raw, nil, nil)
		if err != nil {
			t.Errorf("%s %s does not decode strictly: %v", u.GetKind(), u.GetName(), err)
			continue
		}
		switch o := obj.(type) {
		case *appsv1.Deployment:
			deployments = append(deployments, o)
		case *rbacv1.ClusterRole:
			clusterRoles[o.Name] = o
		case *rbacv1.Role:
			roles[o.Namespace+"/"+o.Name] = o
		case *rbacv1.ClusterRoleBinding:
			crbs = append(crbs, o)
		case *rbacv1.RoleBinding:
			rbs = append(rbs, o)
		case *wrapupv1alpha1.CompletionRule:
			rules = append(rules, o.Name)
		}
	}
	for _, k := range []string{"CustomResourceDefinition", "Namespace", "ServiceAccount", "Deployment", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} {
		if kinds[k] == 0 {
			t.Errorf("the install has no %s", k)
		}
	}
	// A custom resource cannot be applied with its CRD on a fresh
	// cluster: the rules are the second step, config/rules.
	if len(rules) > 0 {
		t.Errorf("config/default holds CompletionRules %v: kubectl apply -k fails on a fresh cluster", rules)
	}
	var shipped []string
	for _, o := range render(t, "rules") {
		if o.GetKind() == "CompletionRule" {
			shipped = append(shipped, o.GetName())
		}
	}
	if !slices.Contains(shipped, "annotated-triggers") {
		t.Errorf("config/rules does not ship the annotated-triggers rule (rules: %v)", shipped)
	}
	if len(deployments) != 1 {
		t.Fatalf("%d Deployments, want 1", len(deployments))
	}
	d := deployments[0]
	pod := d.Spec.Template.Spec
	if d.Namespace != framework.ControllerNamespace || pod.ServiceAccountName != framework.ControllerServiceAccount {
		t.Errorf("the controller runs in %s as %s, want %s as %s", d.Namespace, pod.ServiceAccountName, framework.ControllerNamespace, framework.ControllerServiceAccount)
	}
	c := pod.Containers[0]
	if c.Image != "ghcr.io/wrapup-dev/wrapup:latest" {
		t.Errorf("image %q", c.Image)
	}
	if !slices.Contains(c.Args, "--leader-elect=true") || c.LivenessProbe == nil || c.ReadinessProbe == nil {
		t.Errorf("the controller needs leader election and probes: args %v", c.Args)
	}
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
		t.Error("the controller must run as non-root")
	}

	// What the ServiceAccount may do, cluster-wide and in its namespace.
	sa := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: framework.ControllerServiceAccount, Namespace: framework.ControllerNamespace}
	var cluster []rbacv1.PolicyRule
	for _, b := range crbs {
		if slices.Contains(b.Subjects, sa) {
			if cr, ok := clusterRoles[b.RoleRef.Name]; ok {
				cluster = append(cluster, cr.Rules...)
			} else {
				t.Errorf("ClusterRoleBinding %s refers to a ClusterRole the install does not have: %s", b.Name, b.RoleRef.Name)
			}
		}
	}
	var local []rbacv1.PolicyRule
	for _, b := range rbs {
		if slices.Contains(b.Subjects, sa) {
			if r, ok := roles[b.Namespace+"/"+b.RoleRef.Name]; ok {
				local = append(local, r.Rules...)
			}
		}
	}
	need := []struct {
		rules                  []rbacv1.PolicyRule
		group, resource, verbs string
	}{
		{cluster, "workload.codeflare.dev", "appwrappers", "get list watch patch delete"},
		{cluster, "wrapup.dev", "completionrules", "get list watch"},
		{cluster, "wrapup.dev", "completionrules/status", "get update patch"},
		{cluster, "", "namespaces", "get list watch"},
		{cluster, "events.k8s.io", "events", "create patch"},
		{cluster, "batch", "jobs", "get list watch"},
		{cluster, "wrapup.dev", "completionrecords", "get list watch create update delete"},
		{cluster, "apiextensions.k8s.io", "customresourcedefinitions", "get list watch"},
		{local, "coordination.k8s.io", "leases", "get create update"},
	}
	for _, n := range need {
		for _, verb := range splitWords(n.verbs) {
			if !allows(n.rules, n.group, n.resource, verb) {
				t.Errorf("the controller may not %s %s.%s", verb, n.resource, n.group)
			}
		}
	}
	// What it must never do: write anything but AppWrappers, its rules' status and Events.
	never := []struct{ group, resource, verbs string }{
		{"batch", "jobs", "create update patch delete"},
		{"", "pods", "create update patch delete"},
		{"apps", "deployments", "get delete"},
		{"wrapup.dev", "completionrules", "create update patch delete"},
		{"workload.codeflare.dev", "appwrappers", "create update"},
		{"kueue.x-k8s.io", "workloads", "get update patch delete"},
		{"", "secrets", "get list"},
		{"wrapup.dev", "completionrecords/status", "update patch"},
		{"wrapup.dev", "completionrecords", "patch deletecollection"},
	}
	for _, n := range never {
		for _, verb := range splitWords(n.verbs) {
			if allows(cluster, n.group, n.resource, verb) {
				t.Errorf("the controller may %s %s.%s, which it never needs", verb, n.resource, n.group)
			}
		}
	}
}

// The CompletionRecords of a namespace are readable by whoever may view it
// (aggregated into view, edit and admin), and writable by no one but wrapup.
func TestRecordsReadableByNamespaceUsers(t *testing.T) {
	objs := render(t)
	for _, u := range objs {
		if u.GetKind() != "ClusterRole" || u.GetName() != "wrapup-completionrecord-viewer" {
			continue
		}
		labels := u.GetLabels()
		for _, l := range []string{"view", "edit", "admin"} {
			if labels["rbac.authorization.k8s.io/aggregate-to-"+l] != "true" {
				t.Errorf("the records viewer role is not aggregated to %s", l)
			}
		}
		var cr rbacv1.ClusterRole
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &cr); err != nil {
			t.Fatal(err)
		}
		for _, verb := range []string{"get", "list", "watch"} {
			if !allows(cr.Rules, "wrapup.dev", "completionrecords", verb) {
				t.Errorf("namespace users may not %s records", verb)
			}
		}
		for _, verb := range []string{"create", "update", "patch", "delete"} {
			if allows(cr.Rules, "wrapup.dev", "completionrecords", verb) {
				t.Errorf("namespace users may %s records", verb)
			}
		}
		return
	}
	t.Error("the install has no wrapup-completionrecord-viewer ClusterRole")
}

func splitWords(s string) []string {
	var out []string
	for _, w := range bytes.Fields([]byte(s)) {
		out = append(out, string(w))
	}
	return out
}

func allows(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	for _, r := range rules {
		if (slices.Contains(r.APIGroups, group) || slices.Contains(r.APIGroups, "*")) &&
			(slices.Contains(r.Resources, resource) || slices.Contains(r.Resources, "*")) &&
			(slices.Contains(r.Verbs, verb) || slices.Contains(r.Verbs, "*")) {
			return true
		}
	}
	return false
}

// TestServiceMonitor: config/prometheus scrapes the install's metrics
// Service, by its labels and its port's name.
func TestServiceMonitor(t *testing.T) {
	var svc *unstructured.Unstructured
	for _, o := range render(t) {
		if o.GetKind() == "Service" && o.GetName() == "wrapup-controller-metrics" {
			svc = o
		}
	}
	if svc == nil {
		t.Fatal("the install has no metrics Service")
	}
	var mons []*unstructured.Unstructured
	for _, o := range render(t, "prometheus") {
		if o.GetKind() == "ServiceMonitor" {
			mons = append(mons, o)
		}
	}
	if len(mons) != 1 {
		t.Fatalf("config/prometheus renders %d ServiceMonitors, want one", len(mons))
	}
	mon := mons[0]
	if mon.GetNamespace() != svc.GetNamespace() {
		t.Errorf("the ServiceMonitor is in %s, the Service in %s", mon.GetNamespace(), svc.GetNamespace())
	}
	sel, _, _ := unstructured.NestedStringMap(mon.Object, "spec", "selector", "matchLabels")
	for k, v := range sel {
		if svc.GetLabels()[k] != v {
			t.Errorf("the ServiceMonitor selects %s=%s; the Service has labels %v", k, v, svc.GetLabels())
		}
	}
	eps, _, _ := unstructured.NestedSlice(mon.Object, "spec", "endpoints")
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	if len(eps) != 1 || len(ports) != 1 {
		t.Fatalf("endpoints %v, ports %v", eps, ports)
	}
	ep, port := eps[0].(map[string]any), ports[0].(map[string]any)
	if ep["port"] != port["name"] || ep["scheme"] != "https" {
		t.Errorf("the ServiceMonitor scrapes port %v over %v; the Service's port is %v", ep["port"], ep["scheme"], port["name"])
	}
}

// TestWebhookWiring checks that the webhook's parts agree by name: the
// Service reaches the container's webhook port; the certificate's Secret is
// the one the Deployment mounts, the manager's default and the only Secret
// it may read or update; the configuration is the one its CA goes into and the only
// one it may update. Every name the manager uses is its flag's default, so
// the Deployment's args need none of them.
func TestWebhookWiring(t *testing.T) {
	var (
		d       *appsv1.Deployment
		svc     *corev1.Service
		vwc     *admissionregistrationv1.ValidatingWebhookConfiguration
		secrets []string
		roles   = map[string][]rbacv1.PolicyRule{}
	)
	for _, u := range render(t) {
		obj, err := framework.Scheme.New(u.GroupVersionKind())
		if err != nil {
			continue
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
			t.Fatal(err)
		}
		switch o := obj.(type) {
		case *appsv1.Deployment:
			d = o
		case *corev1.Service:
			if o.Name == "wrapup-webhook-service" {
				svc = o
			}
		case *corev1.Secret:
			secrets = append(secrets, o.Namespace+"/"+o.Name)
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			vwc = o
		case *rbacv1.ClusterRole:
			roles[o.Name] = o.Rules
		case *rbacv1.Role:
			roles[o.Namespace+"/"+o.Name] = o.Rules
		}
	}
	if d == nil || svc == nil || vwc == nil {
		t.Fatalf("config/default lacks the Deployment (%v), the webhook Service (%v) or the configuration (%v)", d != nil, svc != nil, vwc != nil)
	}
	const secret, configuration = "wrapup-webhook-server-cert", "wrapup-validating-webhook-configuration"
	if vwc.Name != configuration {
		t.Errorf("the webhook configuration is %s, the manager injects its CA into %s", vwc.Name, configuration)
	}
	for _, w := range vwc.Webhooks {
		ref := w.ClientConfig.Service
		if ref == nil || ref.Namespace != framework.ControllerNamespace || ref.Name != svc.Name {
			t.Errorf("webhook %s calls %+v, not the Service %s/%s", w.Name, ref, framework.ControllerNamespace, svc.Name)
		}
		if w.FailurePolicy == nil || *w.FailurePolicy != admissionregistrationv1.Ignore {
			t.Errorf("webhook %s: failurePolicy %v; Ignore lets an admin edit rules while it is down", w.Name, w.FailurePolicy)
		}
	}
	c := d.Spec.Template.Spec.Containers[0]
	var port int32
	for _, p := range c.Ports {
		if p.Name == svc.Spec.Ports[0].TargetPort.String() {
			port = p.ContainerPort
		}
	}
	if port != 9443 {
		t.Errorf("the Service's targetPort %s is container port %d, the manager's --webhook-port is 9443", svc.Spec.Ports[0].TargetPort.String(), port)
	}
	if !slices.Contains(secrets, framework.ControllerNamespace+"/"+secret) {
		t.Errorf("the install has no Secret %s/%s for the manager to write (Secrets: %v)", framework.ControllerNamespace, secret, secrets)
	}
	mounted := ""
	for _, v := range d.Spec.Template.Spec.Volumes {
		for _, m := range c.VolumeMounts {
			if m.Name == v.Name && m.MountPath == "/tmp/k8s-webhook-server/serving-certs" && v.Secret != nil {
				mounted = v.Secret.SecretName
			}
		}
	}
	if mounted != secret {
		t.Errorf("the cert folder mounts Secret %q, want %s", mounted, secret)
	}
	granted := func(rules []rbacv1.PolicyRule, resource, verb string) []string {
		var names []string
		for _, r := range rules {
			if slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
				if len(r.ResourceNames) == 0 {
					names = append(names, "*")
				}
				names = append(names, r.ResourceNames...)
			}
		}
		return names
	}
	for _, verb := range []string{"get", "list", "watch", "update"} {
		if got := granted(roles[framework.ControllerNamespace+"/wrapup-webhook-certs"], "secrets", verb); !slices.Equal(got, []string{secret}) {
			t.Errorf("the manager may %s Secrets %v, want only %s", verb, got, secret)
		}
	}
	if got := granted(roles["wrapup-manager-role"], "validatingwebhookconfigurations", "update"); !slices.Equal(got, []string{configuration}) {
		t.Errorf("the manager may update ValidatingWebhookConfigurations %v, want only %s", got, configuration)
	}
}

// TestCertManagerVariant checks config/certmanager, the install with the
// webhook's certificate from cert-manager, by its rendering (running it
// needs cert-manager): the Certificate is for the webhook Service and
// writes the Secret the Deployment mounts; its CA is injected into the
// webhook configuration; the manager serves what is mounted
// (--webhook-cert-management=external) and may not touch Secrets.
func TestCertManagerVariant(t *testing.T) {
	var (
		cert, issuer, vwc, deploy *unstructured.Unstructured
		others                    []string
	)
	for _, u := range render(t, "certmanager") {
		switch u.GetKind() {
		case "Certificate":
			cert = u
		case "Issuer":
			issuer = u
		case "ValidatingWebhookConfiguration":
			vwc = u
		case "Deployment":
			deploy = u
		case "Secret", "Role":
			others = append(others, u.GetKind()+" "+u.GetName())
		}
		if u.GetLabels()["app.kubernetes.io/part-of"] != "wrapup" {
			t.Errorf("%s %s lacks the install's labels", u.GetKind(), u.GetName())
		}
	}
	if cert == nil || issuer == nil || vwc == nil || deploy == nil {
		t.Fatal("config/certmanager lacks the Certificate, the Issuer, the webhook configuration or the Deployment")
	}
	issuerName, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "name")
	if issuerName != issuer.GetName() || issuer.GetNamespace() != cert.GetNamespace() {
		t.Errorf("the Certificate's issuer %s is not the Issuer %s/%s", issuerName, issuer.GetNamespace(), issuer.GetName())
	}
	dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	if !slices.Contains(dnsNames, "wrapup-webhook-service."+framework.ControllerNamespace+".svc") {
		t.Errorf("the Certificate is for %v, not the webhook Service", dnsNames)
	}
	secret, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	d := &appsv1.Deployment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(deploy.Object, d); err != nil {
		t.Fatal(err)
	}
	mounted := ""
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Secret != nil {
			mounted = v.Secret.SecretName
		}
	}
	if secret != mounted || secret != "wrapup-webhook-server-cert" {
		t.Errorf("the Certificate writes Secret %q, the Deployment mounts %q", secret, mounted)
	}
	if want := cert.GetNamespace() + "/" + cert.GetName(); vwc.GetAnnotations()["cert-manager.io/inject-ca-from"] != want {
		t.Errorf("the webhook configuration's CA comes from %q, want %s", vwc.GetAnnotations()["cert-manager.io/inject-ca-from"], want)
	}
	args := d.Spec.Template.Spec.Containers[0].Args
	if !slices.Contains(args, "--webhook-cert-management=external") || slices.Contains(args, "--webhook-cert-management=self") {
		t.Errorf("the manager's args %v: want --webhook-cert-management=external only", args)
	}
	for _, o := range others {
		if o == "Secret wrapup-webhook-server-cert" || o == "Role wrapup-webhook-certs" {
			t.Errorf("config/certmanager ships %s, which cert-manager makes or the manager no longer needs", o)
		}
	}
}

// TestRecordWritersPolicy checks, by its rendering, the install's
// ValidatingAdmissionPolicy that lets only wrapup write CompletionRecords
// (test/integration runs it): it covers create, update and delete of
// completionrecords, fails closed, is bound with Deny, and lets through the
// ServiceAccount the Deployment runs as, system:masters and, to delete
// only, Kubernetes' garbage collector and namespace controller.
func TestRecordWritersPolicy(t *testing.T) {
	var (
		policy  *admissionregistrationv1.ValidatingAdmissionPolicy
		binding *admissionregistrationv1.ValidatingAdmissionPolicyBinding
		d       *appsv1.Deployment
	)
	for _, u := range render(t) {
		obj, err := framework.Scheme.New(u.GroupVersionKind())
		if err != nil {
			continue
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
			t.Fatal(err)
		}
		switch o := obj.(type) {
		case *admissionregistrationv1.ValidatingAdmissionPolicy:
			policy = o
		case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
			binding = o
		case *appsv1.Deployment:
			d = o
		}
	}
	if policy == nil || binding == nil || d == nil {
		t.Fatalf("config/default lacks the records' ValidatingAdmissionPolicy (%v), its binding (%v) or the Deployment (%v)", policy != nil, binding != nil, d != nil)
	}
	if binding.Spec.PolicyName != policy.Name || !slices.Equal(binding.Spec.ValidationActions, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}) {
		t.Errorf("the binding names policy %q with actions %v, want %s with [Deny]", binding.Spec.PolicyName, binding.Spec.ValidationActions, policy.Name)
	}
	if binding.Spec.ParamRef != nil || binding.Spec.MatchResources != nil {
		t.Errorf("the binding narrows the policy: paramRef %v, matchResources %v", binding.Spec.ParamRef, binding.Spec.MatchResources)
	}
	if p := policy.Spec.FailurePolicy; p == nil || *p != admissionregistrationv1.Fail {
		t.Errorf("failurePolicy %v, want Fail", p)
	}
	var rules []admissionregistrationv1.NamedRuleWithOperations
	if policy.Spec.MatchConstraints != nil {
		rules = policy.Spec.MatchConstraints.ResourceRules
	}
	for _, op := range []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete} {
		covered := false
		for _, r := range rules {
			if slices.Contains(r.APIGroups, wrapupv1alpha1.GroupVersion.Group) && slices.Contains(r.Resources, "completionrecords") &&
				(slices.Contains(r.Operations, op) || slices.Contains(r.Operations, admissionregistrationv1.OperationAll)) &&
				(slices.Contains(r.APIVersions, "*") || slices.Contains(r.APIVersions, wrapupv1alpha1.GroupVersion.Version)) {
				covered = true
			}
		}
		if !covered {
			t.Errorf("the policy does not cover %s of completionrecords.%s: %+v", op, wrapupv1alpha1.GroupVersion.Group, rules)
		}
	}
	var conditions strings.Builder
	for _, c := range policy.Spec.MatchConditions {
		conditions.WriteString(c.Expression + "\n")
	}
	sa := "system:serviceaccount:" + d.Namespace + ":" + d.Spec.Template.Spec.ServiceAccountName
	for _, who := range []string{"'" + sa + "'", "'system:masters'", "'system:serviceaccount:kube-system:generic-garbage-collector'",
		"'system:serviceaccount:kube-system:namespace-controller'", "'system:kube-controller-manager'"} {
		if !strings.Contains(conditions.String(), who) {
			t.Errorf("the policy's matchConditions do not name %s:\n%s", who, conditions.String())
		}
	}
	if len(policy.Spec.Validations) == 0 {
		t.Fatal("the policy has no validations")
	}
	for _, v := range policy.Spec.Validations {
		if !strings.Contains(v.Message, "only wrapup writes CompletionRecords") || !strings.Contains(v.MessageExpression, "only wrapup writes CompletionRecords") {
			t.Errorf("validation %q: message %q, messageExpression %q do not say that only wrapup writes CompletionRecords", v.Expression, v.Message, v.MessageExpression)
		}
	}
}
