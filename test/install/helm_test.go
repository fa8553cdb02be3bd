package install

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/gc"
	"github.com/wrapup-dev/wrapup/test/framework"
	"github.com/wrapup-dev/wrapup/test/util"
)

// helmBinary is the helm that test/controlplane/build.sh builds beside the
// control plane, or "" (the test is skipped).
func helmBinary(t *testing.T) string {
	t.Helper()
	helm := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "helm")
	if _, err := os.Stat(helm); os.Getenv("KUBEBUILDER_ASSETS") == "" || err != nil {
		t.Skip("needs helm from the local control plane (KUBEBUILDER_ASSETS, as make test sets it)")
	}
	// go test caches a result by the files the test reads: reading the
	// chart's makes a change to them run the test again (helm reads them
	// in another process).
	err := filepath.WalkDir(filepath.Join(framework.RepoRoot(), "charts"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		_, err = os.ReadFile(path)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return helm
}

// helmRun runs helm in the repository's root and returns its stdout; a
// failure fails the test unless wantErr, when it returns stderr.
func helmRun(t *testing.T, helm string, wantErr bool, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, helm, args...)
	cmd.Dir = framework.RepoRoot()
	// No user's Helm config or cache.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home, "HELM_CACHE_HOME="+home, "HELM_DATA_HOME="+home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	switch {
	case wantErr && err == nil:
		t.Fatalf("helm %s succeeded, want an error:\n%s", strings.Join(args, " "), stdout.String())
	case wantErr:
		return stderr.String()
	case err != nil:
		t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// helmTemplate renders the chart as release name in namespace ns, CRDs
// included, with --set values.
func helmTemplate(t *testing.T, helm, name, ns string, set ...string) []*unstructured.Unstructured {
	t.Helper()
	args := []string{"template", name, "charts/wrapup", "--namespace", ns, "--include-crds"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return decodeAll(t, helmRun(t, helm, false, args...))
}

func decodeAll(t *testing.T, yaml string) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(yaml), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatal(err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
	return objs
}

func byKey(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	m := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		m[o.GetKind()+" "+client.ObjectKeyFromObject(o).String()] = o
	}
	return m
}

// managerDefaults are the manager's own defaults for the flags the chart
// always passes (cmd/manager): with the release named wrapup, passing them
// changes nothing from config/default.
var managerDefaults = []string{
	"--enable-webhook=true", "--webhook-port=9443", "--webhook-secret-name=wrapup-webhook-server-cert",
	"--webhook-service-name=wrapup-webhook-service", "--webhook-configuration-name=wrapup-validating-webhook-configuration",
	"--metrics-secure=true", "--workers=" + strconv.Itoa(gc.DefaultWorkers), "--multikueue=false", "--kube-api-qps=-1", "--kube-api-burst=0", "--kube-api-compression=false", "--zap-log-level=info",
}

// TestHelmChart checks charts/wrapup with helm itself: it lints; its
// defaults, as release wrapup, install what config/default and config/rules
// do (the same objects, CRDs, RBAC, webhook and pod); its values do what they
// say; and on a fresh API server it installs in one command, upgrades without
// changing what did not change, and uninstalls, leaving the CRDs and with
// them every rule and record.
func TestHelmChart(t *testing.T) {
	helm := helmBinary(t)
	ns := framework.ControllerNamespace

	t.Run("lint", func(t *testing.T) {
		helmRun(t, helm, false, "lint", "--strict", "charts/wrapup")
		helmRun(t, helm, false, "lint", "--strict", "charts/wrapup", "--set", "webhook.certManagement=certManager")
	})

	t.Run("the defaults install what config/default and config/rules install", func(t *testing.T) {
		chart := byKey(helmTemplate(t, helm, "wrapup", ns))
		kustomized := byKey(append(render(t), render(t, "rules")...))
		for k := range kustomized {
			if strings.HasPrefix(k, "Namespace ") {
				// helm install --create-namespace, or the admin's own.
				delete(kustomized, k)
			}
		}
		if diff := cmp.Diff(slices.Sorted(maps.Keys(kustomized)), slices.Sorted(maps.Keys(chart))); diff != "" {
			t.Fatalf("the chart's objects differ from config/default's and config/rules' (-kustomize +helm):\n%s", diff)
		}
		// What each kind must have alike (selectors differ: the chart's
		// also name the release).
		compared := map[string][][]string{
			"CustomResourceDefinition":       {{"spec"}},
			"CompletionRule":                 {{"spec"}},
			"PodDisruptionBudget":            {{"spec", "minAvailable"}, {"spec", "unhealthyPodEvictionPolicy"}},
			"ClusterRole":                    {{"rules"}},
			"Role":                           {{"rules"}},
			"ClusterRoleBinding":             {{"roleRef"}, {"subjects"}},
			"RoleBinding":                    {{"roleRef"}, {"subjects"}},
			"ValidatingWebhookConfiguration": {{"webhooks"}},
			// Who may write CompletionRecords: with the release named
			// wrapup in wrapup-system, the same ServiceAccount.
			"ValidatingAdmissionPolicy":        {{"spec"}},
			"ValidatingAdmissionPolicyBinding": {{"spec"}},
			"Service":                          {{"spec", "ports"}},
			"Secret":                           {{"type"}},
		}
		for k, want := range kustomized {
			for _, path := range compared[want.GetKind()] {
				w, _, _ := unstructured.NestedFieldNoCopy(want.Object, path...)
				g, _, _ := unstructured.NestedFieldNoCopy(chart[k].Object, path...)
				if diff := cmp.Diff(w, g); diff != "" {
					t.Errorf("%s: %s differs (-kustomize +helm):\n%s", k, strings.Join(path, "."), diff)
				}
			}
		}
		want, got := deployment(t, kustomized["Deployment "+ns+"/wrapup-controller"]), deployment(t, chart["Deployment "+ns+"/wrapup-controller"])
		if *want.Spec.Replicas != *got.Spec.Replicas {
			t.Errorf("replicas: %d, config/default's %d", *got.Spec.Replicas, *want.Spec.Replicas)
		}
		wc, gc := want.Spec.Template.Spec.Containers[0], got.Spec.Template.Spec.Containers[0]
		for _, a := range wc.Args {
			if !slices.Contains(gc.Args, a) {
				t.Errorf("the chart's manager lacks config/default's %s (args %v)", a, gc.Args)
			}
		}
		for _, a := range gc.Args {
			if !slices.Contains(wc.Args, a) && !slices.Contains(managerDefaults, a) {
				t.Errorf("the chart's manager has %s, which neither config/default nor the manager's defaults have", a)
			}
		}
		if wc.Image != gc.Image {
			t.Errorf("image %s, config/default's %s", gc.Image, wc.Image)
		}
		wc.Args, gc.Args, wc.Image, gc.Image, gc.ImagePullPolicy = nil, nil, "", "", ""
		if diff := cmp.Diff(wc, gc); diff != "" {
			t.Errorf("the manager container differs (-kustomize +helm):\n%s", diff)
		}
		wp, gp := want.Spec.Template.Spec, got.Spec.Template.Spec
		wp.Containers, gp.Containers, wp.TopologySpreadConstraints, gp.TopologySpreadConstraints = nil, nil, nil, nil
		if diff := cmp.Diff(wp, gp); diff != "" {
			t.Errorf("the pod differs (-kustomize +helm):\n%s", diff)
		}
	})

	t.Run("values", func(t *testing.T) {
		kinds := func(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
			m := map[string]*unstructured.Unstructured{}
			for _, o := range objs {
				m[o.GetKind()+" "+o.GetName()] = o
			}
			return m
		}
		one := kinds(helmTemplate(t, helm, "wrapup", ns, "replicaCount=1"))
		if _, ok := one["PodDisruptionBudget wrapup-controller"]; ok {
			t.Error("one replica with a PodDisruptionBudget of minAvailable 1 blocks every drain")
		}
		off := kinds(helmTemplate(t, helm, "wrapup", ns, "webhook.enabled=false"))
		for _, k := range []string{"ValidatingWebhookConfiguration wrapup-validating-webhook-configuration", "Service wrapup-webhook-service", "Secret wrapup-webhook-server-cert", "Role wrapup-webhook-certs"} {
			if _, ok := off[k]; ok {
				t.Errorf("webhook.enabled=false renders %s", k)
			}
		}
		if d := deployment(t, off["Deployment wrapup-controller"]); !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--enable-webhook=false") || len(d.Spec.Template.Spec.Volumes) != 0 {
			t.Errorf("webhook.enabled=false: args %v, volumes %v", d.Spec.Template.Spec.Containers[0].Args, d.Spec.Template.Spec.Volumes)
		}
		noPolicy := kinds(helmTemplate(t, helm, "wrapup", ns, "admissionPolicy.enabled=false"))
		for _, k := range []string{"ValidatingAdmissionPolicy wrapup-completionrecord-writers", "ValidatingAdmissionPolicyBinding wrapup-completionrecord-writers"} {
			if _, ok := one[k]; !ok {
				t.Errorf("the defaults render no %s", k)
			}
			if _, ok := noPolicy[k]; ok {
				t.Errorf("admissionPolicy.enabled=false renders %s", k)
			}
		}
		mk := kinds(helmTemplate(t, helm, "wrapup", ns, "multikueue.enabled=true", "multikueue.workers={worker-1,worker-2}"))
		if d := deployment(t, mk["Deployment wrapup-controller"]); !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--multikueue=true") {
			t.Errorf("multikueue.enabled=true: args %v", d.Spec.Template.Spec.Containers[0].Args)
		}
		for _, k := range []string{"ClusterRole wrapup-multikueue-workloads", "ClusterRoleBinding wrapup-multikueue-workloads", "Role wrapup-worker-kubeconfigs", "RoleBinding wrapup-worker-kubeconfigs"} {
			if _, ok := mk[k]; !ok {
				t.Errorf("multikueue.enabled=true renders no %s", k)
			}
			if _, ok := one[k]; ok {
				t.Errorf("the defaults render %s, which only MultiKueue needs", k)
			}
		}
		if rules, _, _ := unstructured.NestedSlice(mk["Role wrapup-worker-kubeconfigs"].Object, "rules"); len(rules) != 1 ||
			fmt.Sprint(rules[0].(map[string]any)["resourceNames"]) != "[worker-1 worker-2]" || fmt.Sprint(rules[0].(map[string]any)["verbs"]) != "[get]" {
			t.Errorf("multikueue.workers: the Secrets Role's rules %v, want get on worker-1 and worker-2 only", rules)
		}
		cm := kinds(helmTemplate(t, helm, "wrapup", ns, "webhook.certManagement=certManager"))
		if _, ok := cm["Certificate wrapup-serving-cert"]; !ok {
			t.Error("webhook.certManagement=certManager renders no Certificate")
		}
		if _, ok := cm["Issuer wrapup-selfsigned-issuer"]; !ok {
			t.Error("webhook.certManagement=certManager without an issuerRef renders no Issuer")
		}
		for _, k := range []string{"Secret wrapup-webhook-server-cert", "Role wrapup-webhook-certs"} {
			if _, ok := cm[k]; ok {
				t.Errorf("webhook.certManagement=certManager renders %s", k)
			}
		}
		if got := cm["ValidatingWebhookConfiguration wrapup-validating-webhook-configuration"].GetAnnotations()["cert-manager.io/inject-ca-from"]; got != ns+"/wrapup-serving-cert" {
			t.Errorf("certManager: inject-ca-from %q", got)
		}
		if secret, _, _ := unstructured.NestedString(cm["Certificate wrapup-serving-cert"].Object, "spec", "secretName"); secret != "wrapup-webhook-server-cert" {
			t.Errorf("certManager: the Certificate writes %q, the Deployment mounts wrapup-webhook-server-cert", secret)
		}
		if d := deployment(t, cm["Deployment wrapup-controller"]); !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--webhook-cert-management=external") {
			t.Errorf("certManager: args %v", d.Spec.Template.Spec.Containers[0].Args)
		}
		issuer := kinds(helmTemplate(t, helm, "wrapup", ns, "webhook.certManagement=certManager", "webhook.certManager.issuerRef.kind=ClusterIssuer", "webhook.certManager.issuerRef.name=corp-ca"))
		if _, ok := issuer["Issuer wrapup-selfsigned-issuer"]; ok {
			t.Error("an issuerRef of the admin's, and still a self-signed Issuer")
		}
		if ref, _, _ := unstructured.NestedStringMap(issuer["Certificate wrapup-serving-cert"].Object, "spec", "issuerRef"); ref["kind"] != "ClusterIssuer" || ref["name"] != "corp-ca" {
			t.Errorf("issuerRef %v", ref)
		}
		if out := helmRun(t, helm, true, "template", "wrapup", "charts/wrapup", "--set", "webhook.certManagement=vault"); !strings.Contains(out, `webhook.certManagement="vault": want self or certManager`) {
			t.Errorf("an unknown certManagement: %s", out)
		}

		pod := kinds(helmTemplate(t, helm, "wrapup", ns, "image.tag=v1.2.3", "replicaCount=3", "leaderElection.enabled=false",
			"nodeSelector.pool=system", "tolerations[0].key=dedicated", "tolerations[0].operator=Exists",
			"affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key=zone",
			"affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator=Exists",
			"resources.limits.memory=1Gi", "workers=8", "kubeAPI.qps=50", "kubeAPI.burst=100", "extraArgs[0]=--failure-grace-period=5m"))
		d := deployment(t, pod["Deployment wrapup-controller"])
		spec, c := d.Spec.Template.Spec, d.Spec.Template.Spec.Containers[0]
		for _, check := range []struct {
			what string
			ok   bool
		}{
			{"image", c.Image == "ghcr.io/wrapup-dev/wrapup:v1.2.3"},
			{"replicas", *d.Spec.Replicas == 3},
			{"leader election", slices.Contains(c.Args, "--leader-elect=false")},
			{"nodeSelector", spec.NodeSelector["pool"] == "system"},
			{"tolerations", len(spec.Tolerations) == 1 && spec.Tolerations[0].Key == "dedicated"},
			{"affinity", spec.Affinity != nil && spec.Affinity.NodeAffinity != nil},
			{"resources", c.Resources.Limits.Memory().String() == "1Gi"},
			{"workers", slices.Contains(c.Args, "--workers=8")},
			{"client limits", slices.Contains(c.Args, "--kube-api-qps=50") && slices.Contains(c.Args, "--kube-api-burst=100")},
			{"extraArgs", slices.Contains(c.Args, "--failure-grace-period=5m")},
		} {
			if !check.ok {
				t.Errorf("%s not set from values: %+v", check.what, d.Spec.Template.Spec)
			}
		}
		if _, ok := pod["PodDisruptionBudget wrapup-controller"]; !ok {
			t.Error("three replicas and no PodDisruptionBudget")
		}

		mon := kinds(helmTemplate(t, helm, "wrapup", ns, "metrics.serviceMonitor.enabled=true", "metrics.prometheusRule.enabled=true", "metrics.grafanaDashboard.enabled=true"))
		var alerts, dashboard *unstructured.Unstructured
		for _, o := range render(t, "prometheus") {
			if o.GetKind() == "PrometheusRule" {
				alerts = o
			}
		}
		dashboard = render(t, "grafana")[0]
		if diff := cmp.Diff(alerts.Object["spec"], mon["PrometheusRule wrapup-alerts"].Object["spec"]); diff != "" {
			t.Errorf("the chart's alerts differ from config/prometheus's (-kustomize +helm):\n%s", diff)
		}
		if diff := cmp.Diff(dashboard.Object["data"], mon["ConfigMap wrapup-grafana-dashboard"].Object["data"]); diff != "" {
			t.Errorf("the chart's dashboard differs from config/grafana's:\n%s", diff)
		}
		if _, ok := mon["ServiceMonitor wrapup-controller"]; !ok {
			t.Error("metrics.serviceMonitor.enabled=true renders no ServiceMonitor")
		}

		// Another release name: every name the manager is given, and every
		// name its RBAC allows, is that release's.
		other := kinds(helmTemplate(t, helm, "acme", "tools"))
		d = deployment(t, other["Deployment acme-wrapup-controller"])
		for _, a := range []string{"--webhook-secret-name=acme-wrapup-webhook-server-cert", "--webhook-service-name=acme-wrapup-webhook-service", "--webhook-configuration-name=acme-wrapup-validating-webhook-configuration"} {
			if !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, a) {
				t.Errorf("release acme: no %s in %v", a, d.Spec.Template.Spec.Containers[0].Args)
			}
		}
		for k, names := range map[string]string{
			"ClusterRole acme-wrapup-manager-role": "acme-wrapup-validating-webhook-configuration",
			"Role acme-wrapup-webhook-certs":       "acme-wrapup-webhook-server-cert",
		} {
			o, ok := other[k]
			if !ok {
				t.Errorf("release acme: no %s", k)
				continue
			}
			if raw, _ := o.MarshalJSON(); !bytes.Contains(raw, []byte(`"resourceNames":["`+names+`"]`)) {
				t.Errorf("release acme: %s does not allow updating %s: %s", k, names, raw)
			}
		}
		if _, ok := other["ValidatingWebhookConfiguration acme-wrapup-validating-webhook-configuration"]; !ok {
			t.Error("release acme: its webhook configuration is not named for it")
		}
		// The records' policy lets the release's ServiceAccount write them,
		// and not config/default's.
		policy, binding := other["ValidatingAdmissionPolicy acme-wrapup-completionrecord-writers"], other["ValidatingAdmissionPolicyBinding acme-wrapup-completionrecord-writers"]
		if policy == nil || binding == nil {
			t.Fatal("release acme: no ValidatingAdmissionPolicy or binding acme-wrapup-completionrecord-writers")
		}
		if name, _, _ := unstructured.NestedString(binding.Object, "spec", "policyName"); name != policy.GetName() {
			t.Errorf("release acme: the binding names policy %q, not %s", name, policy.GetName())
		}
		raw, _ := policy.MarshalJSON()
		if !bytes.Contains(raw, []byte("'system:serviceaccount:tools:acme-wrapup-controller'")) || bytes.Contains(raw, []byte(framework.ControllerUser)) {
			t.Errorf("release acme: the records' policy does not let exactly its ServiceAccount tools/acme-wrapup-controller write them: %s", raw)
		}
	})

	t.Run("install, upgrade and uninstall on a fresh cluster", func(t *testing.T) {
		cfg, kubeconfig := freshAPIServer(t, os.Getenv("KUBEBUILDER_ASSETS"))
		c, err := client.New(cfg, client.Options{Scheme: framework.Scheme})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		kc := []string{"--kubeconfig", kubeconfig, "--namespace", ns}
		helmRun(t, helm, false, append([]string{"install", "wrapup", "charts/wrapup", "--create-namespace"}, kc...)...)
		objs := helmTemplate(t, helm, "wrapup", ns)
		versions := func() map[string]string { t.Helper(); return resourceVersions(t, c, objs, "helm install") }
		// What the controller writes: the certificate and the CA.
		injectCertificate(t, c)
		before := versions()
		helmRun(t, helm, false, append([]string{"upgrade", "wrapup", "charts/wrapup"}, kc...)...)
		after := versions()
		for k, v := range before {
			if after[k] != v {
				t.Errorf("%s: resourceVersion %s after an upgrade with the same values, %s before", k, after[k], v)
			}
		}
		helmRun(t, helm, false, append([]string{"upgrade", "wrapup", "charts/wrapup", "--set", "logLevel=debug"}, kc...)...)
		checkCertificateKept(t, c, "helm upgrade")
		helmRun(t, helm, false, append([]string{"upgrade", "wrapup", "charts/wrapup", "--set", "replicaCount=3"}, kc...)...)
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "wrapup-controller"}, d); err != nil {
			t.Fatal(err)
		}
		if *d.Spec.Replicas != 3 {
			t.Errorf("replicas %d after helm upgrade --set replicaCount=3", *d.Spec.Replicas)
		}
		// An admin's own rule, and a record, outlive helm uninstall: Helm
		// keeps the CRDs it installed from crds/.
		mine := util.MakeRule("mine").TriggerKind("batch", "Job", "").DryRun().Obj()
		if err := c.Create(ctx, mine); err != nil {
			t.Fatal(err)
		}
		helmRun(t, helm, false, append([]string{"uninstall", "wrapup", "--wait", "--timeout", "2m"}, kc...)...)
		for _, o := range objs {
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(o.GroupVersionKind())
			err := c.Get(ctx, client.ObjectKeyFromObject(o), got)
			switch {
			case o.GetKind() == "CustomResourceDefinition":
				if err != nil {
					t.Errorf("CRD %s after helm uninstall: %v (it must stay, with the rules and records)", o.GetName(), err)
				}
			case !apierrors.IsNotFound(err):
				t.Errorf("%s %s is still there after helm uninstall (%v)", o.GetKind(), client.ObjectKeyFromObject(o), err)
			}
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(mine), &wrapupv1alpha1.CompletionRule{}); err != nil {
			t.Errorf("the admin's rule after helm uninstall: %v", err)
		}
	})
}

func deployment(t *testing.T, u *unstructured.Unstructured) *appsv1.Deployment {
	t.Helper()
	if u == nil {
		t.Fatal("no Deployment")
	}
	d := &appsv1.Deployment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, d); err != nil {
		t.Fatal(err)
	}
	return d
}

// injectCertificate writes what the manager's rotator would: the Secret's
// certificate and the webhook configuration's caBundle.
func injectCertificate(t *testing.T, c client.Client) {
	t.Helper()
	ctx := context.Background()
	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: framework.ControllerNamespace, Name: "wrapup-webhook-server-cert"}, secret); err != nil {
		t.Fatal(err)
	}
	secret.Data = map[string][]byte{"tls.crt": []byte("cert"), "tls.key": []byte("key"), "ca.crt": []byte("ca")}
	if err := c.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: "wrapup-validating-webhook-configuration"}, vwc); err != nil {
		t.Fatal(err)
	}
	for i := range vwc.Webhooks {
		vwc.Webhooks[i].ClientConfig.CABundle = []byte("ca")
	}
	if err := c.Update(ctx, vwc); err != nil {
		t.Fatal(err)
	}
}

// checkCertificateKept checks that after what re-applied the install, the
// certificate and the CA the manager wrote are still there.
func checkCertificateKept(t *testing.T, c client.Client, what string) {
	t.Helper()
	ctx := context.Background()
	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: framework.ControllerNamespace, Name: "wrapup-webhook-server-cert"}, secret); err != nil {
		t.Fatal(err)
	}
	if string(secret.Data["tls.crt"]) != "cert" || string(secret.Data["tls.key"]) != "key" {
		t.Errorf("%s wiped the webhook's certificate: %v", what, secret.Data)
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: "wrapup-validating-webhook-configuration"}, vwc); err != nil {
		t.Fatal(err)
	}
	for _, w := range vwc.Webhooks {
		if string(w.ClientConfig.CABundle) != "ca" {
			t.Errorf("%s wiped webhook %s's caBundle", what, w.Name)
		}
	}
}
