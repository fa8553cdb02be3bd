package install

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/wrapup-dev/wrapup/test/framework"
	"github.com/wrapup-dev/wrapup/test/util"
)

// deleteTimeout bounds kubectl delete -k's cascade: a CRD goes once the API
// server has removed its custom resources, which on a loaded machine can
// take a while.
const deleteTimeout = 3 * time.Minute

// TestKubectlApply applies the install as an admin does, with kubectl
// (built by test/controlplane/build.sh at the control plane's version) on a
// fresh API server: client-side and server-side, twice each (the second
// apply changes nothing), then the rules step, then kubectl delete -k.
// It needs the control plane (make test); make test-unit skips it.
func TestKubectlApply(t *testing.T) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	kubectl := filepath.Join(assets, "kubectl")
	if _, err := os.Stat(kubectl); assets == "" || err != nil {
		t.Skip("needs the local control plane with kubectl (KUBEBUILDER_ASSETS, as make test sets it)")
	}
	cfg, kubeconfig := freshAPIServer(t, assets)
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, kubectl, append(args, "--kubeconfig", kubeconfig)...)
		cmd.Dir = framework.RepoRoot()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	objs := render(t)

	versions := func() map[string]string { t.Helper(); return resourceVersions(t, c, objs, "kubectl apply") }

	t.Run("client-side, on a fresh cluster, in one command", func(t *testing.T) {
		out := run("apply", "-k", "config/default")
		if strings.Contains(out, "unchanged") || strings.Contains(out, "configured") {
			t.Errorf("a first apply on a fresh cluster found objects:\n%s", out)
		}
		before := versions()
		out = run("apply", "-k", "config/default")
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			// kubectl reports a PodDisruptionBudget "configured" on every
			// client-side apply (its selector's patch strategy is replace,
			// so the patch is never empty); the resourceVersions below
			// show that nothing changes.
			if !strings.HasSuffix(line, " unchanged") && !strings.HasPrefix(line, "poddisruptionbudget.policy/") {
				t.Errorf("a second apply changed something: %q\n%s", line, out)
			}
		}
		after := versions()
		for k, v := range before {
			if after[k] != v {
				t.Errorf("%s: resourceVersion %s after a second apply, %s before", k, after[k], v)
			}
		}
	})
	t.Run("a re-apply keeps the certificate and the CA the controller wrote", func(t *testing.T) {
		c, err := client.New(cfg, client.Options{Scheme: framework.Scheme})
		if err != nil {
			t.Fatal(err)
		}
		injectCertificate(t, c)
		run("apply", "-k", "config/default")
		checkCertificateKept(t, c, "kubectl apply")
		run("apply", "--server-side", "-k", "config/default")
		checkCertificateKept(t, c, "kubectl apply --server-side")
	})
	t.Run("server-side, twice, changes nothing the second time", func(t *testing.T) {
		run("apply", "--server-side", "-k", "config/default")
		before := versions()
		run("apply", "--server-side", "-k", "config/default")
		after := versions()
		for k, v := range before {
			if after[k] != v {
				t.Errorf("%s: resourceVersion %s after a second server-side apply, %s before", k, after[k], v)
			}
		}
	})
	t.Run("the rules, once the CRD is established", func(t *testing.T) {
		run("wait", "--for", "condition=established", "--timeout=60s", "crd/completionrules.wrapup.dev")
		out := run("apply", "-k", "config/rules")
		if !strings.Contains(out, "completionrule.wrapup.dev/annotated-triggers created") {
			t.Errorf("kubectl apply -k config/rules:\n%s", out)
		}
		if out := run("apply", "-k", "config/rules"); !strings.Contains(out, "unchanged") {
			t.Errorf("a second apply of the rules changed something:\n%s", out)
		}
		run("apply", "--server-side", "-k", "config/rules")
		// kubectl get shows the rule's priority, actions and dryRun, the
		// CRD's defaults filling what the rule leaves out.
		out = run("get", "completionrules", "-o", "wide")
		header, row, _ := strings.Cut(out, "\n")
		if got := strings.Fields(header); !slices.Equal(got[:7], []string{"NAME", "PRIORITY", "TRIGGER", "GROUP", "ON-SUCCESS", "ON-FAILURE", "DRYRUN"}) {
			t.Errorf("kubectl get completionrules -o wide: columns %v", got)
		}
		if got := strings.Fields(row); len(got) < 5 || got[0] != "annotated-triggers" || got[1] != "-1000000" || got[2] != "DeleteAll" || got[3] != "DeleteAll" || got[4] != "false" {
			t.Errorf("kubectl get completionrules -o wide: row %v\n%s", got, out)
		}
	})
	t.Run("kubectl delete -k removes it all", func(t *testing.T) {
		run("delete", "-k", "config/rules")
		run("delete", "-k", "config/default", "--wait=false")
		g := gomega.NewWithT(t)
		for _, o := range objs {
			g.Eventually(func() bool {
				got := &unstructured.Unstructured{}
				got.SetGroupVersionKind(o.GroupVersionKind())
				err := c.Get(ctx, client.ObjectKeyFromObject(o), got)
				// A Namespace is finalized by kube-controller-manager, which
				// this bare API server does not run; a CRD by the API
				// server's CRD finalizer, which retries a failed list of its
				// instances with a backoff that grows to minutes on a busy
				// machine: that either is being deleted is what kubectl
				// delete -k does, and enough.
				return apierrors.IsNotFound(err) || err == nil && (o.GetKind() == "Namespace" || o.GetKind() == "CustomResourceDefinition") && got.GetDeletionTimestamp() != nil
			}, deleteTimeout, util.Interval).Should(gomega.BeTrue(), "%s %s is still there after kubectl delete -k", o.GetKind(), client.ObjectKeyFromObject(o))
		}
	})
}

// freshAPIServer starts a bare API server (etcd and kube-apiserver from
// assets, nothing installed) for the test, and writes an admin kubeconfig.
func freshAPIServer(t *testing.T, assets string) (*rest.Config, string) {
	t.Helper()
	env := &envtest.Environment{BinaryAssetsDirectory: assets}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting the API server: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	user, err := env.ControlPlane.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg, kubeconfig
}

// resourceVersions reads every object of objs (each must be there after
// what, the command that installed them) and returns its resourceVersion by
// kind and key.
func resourceVersions(t *testing.T, c client.Client, objs []*unstructured.Unstructured, what string) map[string]string {
	t.Helper()
	rv := map[string]string{}
	for _, o := range objs {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(o.GroupVersionKind())
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(o), got); err != nil {
			t.Fatalf("%s %s after %s: %v", o.GetKind(), client.ObjectKeyFromObject(o), what, err)
		}
		rv[o.GetKind()+" "+client.ObjectKeyFromObject(o).String()] = got.GetResourceVersion()
	}
	return rv
}
