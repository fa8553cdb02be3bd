package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/gc/decision"
	"github.com/wrapup-dev/wrapup/test/util"
)

// TestExplainOnAHelmReleaseOfAnotherName runs explain on a real API server
// (its authorizer answers the access reviews) where wrapup is installed by
// the chart as the release batchgc in the namespace platform: its
// ServiceAccount is platform:batchgc-wrapup-controller, not the default
// install's. explain finds it from the manager Deployment and decides with
// its rights; a ServiceAccount named that does not exist is said to be
// not found, never taken as denied.
func TestExplainOnAHelmReleaseOfAnotherName(t *testing.T) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	helm := filepath.Join(assets, "helm")
	if _, err := os.Stat(helm); assets == "" || err != nil {
		t.Skip("needs the local control plane and its helm (KUBEBUILDER_ASSETS=$(test/controlplane/build.sh))")
	}
	awModule, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/project-codeflare/appwrapper").Output()
	if err != nil {
		t.Fatalf("finding the AppWrapper module: %v", err)
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths: []string{filepath.Join("..", "..", "config", "crd", "bases"),
			filepath.Join(strings.TrimSpace(string(awModule)), "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting the API server: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The chart's ServiceAccount, RBAC and Deployment, as helm install
	// batchgc charts/wrapup -n platform creates them (the webhook is left
	// out: no manager runs to serve it).
	cmd := exec.CommandContext(ctx, helm, "template", "batchgc", filepath.Join("..", "..", "charts", "wrapup"), "--namespace", "platform")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	rendered, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, stderr.String())
	}
	mustCreate := func(obj client.Object) {
		t.Helper()
		if err := c.Create(ctx, obj); err != nil {
			t.Fatalf("creating %T %s: %v", obj, client.ObjectKeyFromObject(obj), err)
		}
	}
	mustCreate(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "platform"}})
	var bindings []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(rendered), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains([]string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Deployment"}, u.GetKind()) {
			continue
		}
		mustCreate(u)
		if u.GetKind() == "ClusterRoleBinding" {
			bindings = append(bindings, u)
		}
	}

	// A finished Job under a rule that deletes on success.
	mustCreate(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}})
	job := util.MakeJob("load").Obj()
	aw := util.MakeAppWrapper("sweep", "bench").Trigger(job).Obj()
	mustCreate(aw)
	aw.Status.Phase = awv1beta2.AppWrapperRunning
	if err := c.Status().Update(ctx, aw); err != nil {
		t.Fatal(err)
	}
	job = util.MakeJob("load").OwnedBy(aw).Obj()
	mustCreate(job)
	job.Status = util.MakeJob("load").Complete(time.Now().Add(-time.Minute)).Obj().Status
	if err := c.Status().Update(ctx, job); err != nil {
		t.Fatalf("completing the Job: %v", err)
	}
	mustCreate(util.MakeRule("jobs").TriggerKind("batch", "Job", "").OnSuccess(wrapupv1alpha1.ActionDeleteAll, 0).Obj())

	cluster := func() (client.Client, string, error) { return c, "bench", nil }
	explain := func(args ...string) (string, string) {
		t.Helper()
		code, out, errOut := runWith(t, cluster, append([]string{"explain", "sweep", "-o", "json"}, args...)...)
		if code != exitOK {
			t.Fatalf("explain %v: exit %d: %s", args, code, errOut)
		}
		var ex struct {
			Verdict string   `json:"verdict"`
			Notes   []string `json:"notes"`
		}
		if err := json.Unmarshal([]byte(out), &ex); err != nil {
			t.Fatalf("explain -o json: %v\n%s", err, out)
		}
		return ex.Verdict, strings.Join(ex.Notes, "\n")
	}

	quiet := func(notes string) bool {
		return !strings.Contains(notes, "ServiceAccount") && !strings.Contains(notes, "may not")
	}
	if v, notes := explain(); v != string(decision.VerdictDelete) || !quiet(notes) {
		t.Errorf("explain with the release's ServiceAccount found: verdict %s, notes %q; want %s and no note of wrapup's rights", v, notes, decision.VerdictDelete)
	}
	if v, notes := explain("--wrapup-service-account", "platform:batchgc-wrapup-controller"); v != string(decision.VerdictDelete) || !quiet(notes) {
		t.Errorf("explain with the release's ServiceAccount named: verdict %s, notes %q; want %s and no note of wrapup's rights", v, notes, decision.VerdictDelete)
	}
	v, notes := explain("--wrapup-service-account", defaultServiceAccount)
	if v != string(decision.VerdictDelete) || !strings.Contains(notes, "ServiceAccount wrapup-system/wrapup-controller (--wrapup-service-account) was not found") {
		t.Errorf("explain with a ServiceAccount that does not exist named: verdict %s, notes %q; want %s and a note that it was not found", v, notes, decision.VerdictDelete)
	}

	// The release's ServiceAccount found, but no longer bound: wrapup
	// really may not list Jobs, and the rule blocks.
	for _, b := range bindings {
		if err := c.Delete(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if v, notes := explain(); v != string(decision.VerdictBlocked) || !strings.Contains(notes, "wrapup may not list jobs.batch") {
		t.Errorf("explain with the release's ServiceAccount unbound: verdict %s, notes %q; want %s", v, notes, decision.VerdictBlocked)
	}
}
