package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/gc/decision"
	"github.com/wrapup-dev/wrapup/test/util"
)

// fakeCluster is a cluster of one namespace, bench, holding a Running
// AppWrapper sweep whose Job finished a minute ago, another AppWrapper, and
// a rule that deletes on success. wrapup's ServiceAccount may list Jobs
// when allowed.
func fakeCluster(t *testing.T, allowed bool) clientGetter {
	t.Helper()
	return fakeClusterWith(t, allowed, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "wrapup-system", Name: "wrapup-controller"}})
}

// fakeClusterWith is fakeCluster with more objects (wrapup's install).
func fakeClusterWith(t *testing.T, allowed bool, install ...client.Object) clientGetter {
	t.Helper()
	now := time.Now()
	sweep := util.MakeAppWrapper("sweep", "bench").UID("aw-uid").Trigger(util.MakeJob("load").Obj()).Phase(awv1beta2.AppWrapperRunning).Obj()
	job := util.MakeJob("load").UID("job-uid").OwnedBy(sweep).Complete(now.Add(-time.Minute)).Obj()
	other := util.MakeAppWrapper("serving", "bench").UID("aw-2").Obj()
	rule := util.MakeRule("jobs").TriggerKind("batch", "Job", "").OnSuccess(wrapupv1alpha1.ActionDeleteAll, 0).Obj()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}
	// What the API server serves, as its discovery would map it.
	mapper := apimeta.NewDefaultRESTMapper([]schema.GroupVersion{batchv1.SchemeGroupVersion, awv1beta2.GroupVersion})
	mapper.Add(batchv1.SchemeGroupVersion.WithKind("Job"), apimeta.RESTScopeNamespace)
	mapper.Add(awv1beta2.GroupVersion.WithKind("AppWrapper"), apimeta.RESTScopeNamespace)
	c := fake.NewClientBuilder().WithScheme(scheme).WithRESTMapper(mapper).WithObjects(append([]client.Object{sweep, job, other, rule, ns}, install...)...).
		WithInterceptorFuncs(interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if sar, ok := obj.(*authorizationv1.SubjectAccessReview); ok {
				// The API server answers an access review; it stores none.
				sar.Status.Allowed = allowed
				return nil
			}
			return c.Create(ctx, obj, opts...)
		}}).Build()
	return func() (client.Client, string, error) { return c, "bench", nil }
}

func runWith(t *testing.T, cluster clientGetter, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRoot(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, cluster)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	if err != nil {
		return exitFail, out.String(), errOut.String() + err.Error()
	}
	return exitOK, out.String(), errOut.String()
}

// explain, run as its Options on a cluster a test gives: the controller's
// verdict, with wrapup's rights (a kind its ServiceAccount may not list is
// not watchable, whatever the user may read).
func TestExplainOnAGivenCluster(t *testing.T) {
	verdict := func(allowed bool) (string, string) {
		code, out, errOut := runWith(t, fakeCluster(t, allowed), "explain", "sweep", "-o", "json")
		if code != exitOK {
			t.Fatalf("explain: exit %d: %s", code, errOut)
		}
		var ex struct {
			Verdict string   `json:"verdict"`
			Winner  string   `json:"winner"`
			Notes   []string `json:"notes"`
		}
		if err := json.Unmarshal([]byte(out), &ex); err != nil {
			t.Fatalf("explain -o json: %v\n%s", err, out)
		}
		if ex.Winner != "jobs" {
			t.Errorf("winner %q, want jobs", ex.Winner)
		}
		return ex.Verdict, strings.Join(ex.Notes, "\n")
	}
	if v, notes := verdict(true); v != string(decision.VerdictDelete) || !strings.Contains(notes, "Ready -: the controller has not written the rule's status yet") {
		t.Errorf("a finished Job under a DeleteAll rule without status: verdict %s, notes %q; want %s and what Ready - means", v, notes, decision.VerdictDelete)
	}
	// The rule names a kind wrapup cannot watch: it blocks, as the
	// controller's rule would, rather than waiting for a Job it never sees.
	v, notes := verdict(false)
	if v != string(decision.VerdictBlocked) || !strings.Contains(notes, "wrapup may not list jobs.batch") {
		t.Errorf("with Jobs not listable by wrapup: verdict %s, notes %q; want %s and a note", v, notes, decision.VerdictBlocked)
	}
}

// explain on a cluster where wrapup's ServiceAccount is not found (not
// installed as config/default or the chart installs it, nor named): what
// an access review of a ServiceAccount that does not exist answers is no
// evidence, so the verdict is not Blocked, and a note says what to pass.
func TestExplainWithoutWrapupServiceAccount(t *testing.T) {
	for _, args := range [][]string{{}, {"--wrapup-service-account", "platform:batchgc-wrapup-controller"}} {
		code, out, errOut := runWith(t, fakeClusterWith(t, false), append([]string{"explain", "sweep", "-o", "json"}, args...)...)
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
		notes := strings.Join(ex.Notes, "\n")
		if ex.Verdict != string(decision.VerdictDelete) || !strings.Contains(notes, "was not found") || !strings.Contains(notes, "pass --wrapup-service-account NAMESPACE:NAME") {
			t.Errorf("explain %v: verdict %s, notes %q; want %s and a note that wrapup's ServiceAccount was not found", args, ex.Verdict, notes, decision.VerdictDelete)
		}
	}
}

// forbidInstall is a client of a user who may not read wrapup's install:
// its ServiceAccounts, Deployments and ClusterRoleBindings.
type forbidInstall struct{ client.Client }

func (f forbidInstall) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*corev1.ServiceAccount); ok {
		return apierrors.NewForbidden(schema.GroupResource{Resource: "serviceaccounts"}, key.Name, errors.New("no"))
	}
	return f.Client.Get(ctx, key, obj, opts...)
}

func (f forbidInstall) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	switch list.(type) {
	case *appsv1.DeploymentList, *rbacv1.ClusterRoleBindingList:
		return apierrors.NewForbidden(schema.GroupResource{Resource: "list"}, "", errors.New("no"))
	}
	return f.Client.List(ctx, list, opts...)
}

// explain by a user who may not look wrapup's ServiceAccount up: an access
// review of the default install's denies, but that ServiceAccount may not
// be wrapup's, so the kind is taken as watchable and a note says that it
// could not be checked.
func TestExplainWhereWrapupsServiceAccountCannotBeLookedUp(t *testing.T) {
	c, _, _ := fakeClusterWith(t, false)()
	code, out, errOut := runWith(t, func() (client.Client, string, error) { return forbidInstall{c}, "bench", nil }, "explain", "sweep", "-o", "json")
	if code != exitOK {
		t.Fatalf("explain: exit %d: %s", code, errOut)
	}
	var ex struct {
		Verdict string   `json:"verdict"`
		Notes   []string `json:"notes"`
	}
	if err := json.Unmarshal([]byte(out), &ex); err != nil {
		t.Fatalf("explain -o json: %v\n%s", err, out)
	}
	notes := strings.Join(ex.Notes, "\n")
	if ex.Verdict != string(decision.VerdictDelete) || !strings.Contains(notes, "whether wrapup may list jobs.batch could not be checked (ServiceAccount wrapup-system:wrapup-controller may not, but it could not be looked up") {
		t.Errorf("verdict %s, notes %q; want %s and a note that it could not be checked", ex.Verdict, notes, decision.VerdictDelete)
	}
}

// history lists through the same cluster: no record, a message on stderr.
func TestHistoryOnAGivenCluster(t *testing.T) {
	code, out, errOut := runWith(t, fakeCluster(t, true), "history")
	if code != exitOK || out != "" || !strings.Contains(errOut, "No finished runs recorded.") {
		t.Errorf("history: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// An AppWrapper name completes from the namespace's AppWrappers, for
// explain's argument and history's --appwrapper.
func TestCompleteAppWrapperNames(t *testing.T) {
	for _, args := range [][]string{{"__complete", "explain", "sw"}, {"__complete", "explain", ""}, {"__complete", "history", "--appwrapper", "se"}} {
		_, out, _ := runWith(t, fakeCluster(t, true), args...)
		var want []string
		switch args[len(args)-1] {
		case "sw":
			want = []string{"sweep"}
		case "":
			want = []string{"serving", "sweep"}
		case "se":
			want = []string{"serving"}
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		got := lines[:len(lines)-1] // the last line is the directive
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%v: completions %q, want %q", args, got, want)
		}
	}
}

// plan, run as its Options on a cluster a test gives: removing the one
// rule changes the finished run from Delete to NoRule, and writes nothing.
func TestPlanOnAGivenCluster(t *testing.T) {
	cluster := fakeCluster(t, true)
	code, out, errOut := runWith(t, cluster, "plan", "--delete", "jobs")
	if code != exitOK || !strings.Contains(out, "bench/sweep  jobs      Delete       none        NoRule") ||
		!strings.Contains(out, "2 AppWrappers: 1 change, 0 deleted (0 at once), 0 blocked (rules -jobs)") {
		t.Errorf("plan --delete jobs: exit %d\n%s%s", code, out, errOut)
	}
	c, _, _ := cluster()
	if err := c.Get(context.Background(), client.ObjectKey{Name: "jobs"}, &wrapupv1alpha1.CompletionRule{}); err != nil {
		t.Errorf("plan wrote: the rule is gone (%v)", err)
	}
}

// plan on a run recorded under a TTL of an hour a minute ago: a TTL cut
// to a minute makes its deletion due a minute from now, as the controller
// counts it (the record's action in force), not at once (a minute after
// the run finished).
func TestPlanShortenedTTLOfARecordedRun(t *testing.T) {
	now := time.Now()
	sweep := util.MakeAppWrapper("sweep", "bench").UID("aw-uid").Trigger(util.MakeJob("load").Obj()).Phase(awv1beta2.AppWrapperRunning).Obj()
	job := util.MakeJob("load").UID("job-uid").OwnedBy(sweep).Complete(now.Add(-time.Minute)).Obj()
	rule := util.MakeRule("jobs").UID("jobs-uid").Generation(1).TriggerKind("batch", "Job", "").OnSuccess(wrapupv1alpha1.ActionDeleteAll, 3600).Obj()
	record := util.MakeRecord(sweep, rule, wrapupv1alpha1.OutcomeSucceeded, now.Add(-time.Minute)).Trigger(0, "job-uid").Obj()
	mapper := apimeta.NewDefaultRESTMapper([]schema.GroupVersion{batchv1.SchemeGroupVersion, awv1beta2.GroupVersion})
	mapper.Add(batchv1.SchemeGroupVersion.WithKind("Job"), apimeta.RESTScopeNamespace)
	mapper.Add(awv1beta2.GroupVersion.WithKind("AppWrapper"), apimeta.RESTScopeNamespace)
	c := fake.NewClientBuilder().WithScheme(scheme).WithRESTMapper(mapper).
		WithObjects(sweep, job, rule, record, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}).
		WithInterceptorFuncs(interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if sar, ok := obj.(*authorizationv1.SubjectAccessReview); ok {
				sar.Status.Allowed = true
				return nil
			}
			return c.Create(ctx, obj, opts...)
		}}).Build()
	cluster := func() (client.Client, string, error) { return c, "bench", nil }
	file := filepath.Join(t.TempDir(), "rule.yaml")
	if err := os.WriteFile(file, []byte("apiVersion: wrapup.dev/v1alpha1\nkind: CompletionRule\nmetadata: {name: jobs}\n"+
		"spec:\n  trigger: {apiGroup: batch, kind: Job}\n  onSuccess: {action: DeleteAll, ttlSecondsAfterFinished: 60}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runWith(t, cluster, "plan", "-f", file, "-o", "json")
	if code != exitOK {
		t.Fatalf("plan: exit %d: %s", code, errOut)
	}
	var p struct {
		Items []struct {
			AppWrapper string `json:"appWrapper"`
			Now        struct {
				Verdict string    `json:"verdict"`
				DueAt   time.Time `json:"dueAt"`
			} `json:"now"`
			After struct {
				Verdict string    `json:"verdict"`
				DueAt   time.Time `json:"dueAt"`
			} `json:"after"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("plan -o json: %v\n%s", err, out)
	}
	if len(p.Items) != 1 {
		t.Fatalf("plan lists %d AppWrappers, want sweep:\n%s", len(p.Items), out)
	}
	it := p.Items[0]
	if it.Now.Verdict != string(decision.VerdictDeleteAfterTTL) || it.Now.DueAt.Sub(now.Add(59*time.Minute)).Abs() > time.Second {
		t.Errorf("now: %s due %s, want DeleteAfterTTL at the recorded %s\n%s", it.Now.Verdict, it.Now.DueAt, now.Add(59*time.Minute), out)
	}
	if it.After.Verdict != string(decision.VerdictDeleteAfterTTL) || it.After.DueAt.Before(now.Add(time.Minute-time.Second)) || it.After.DueAt.After(now.Add(time.Minute+10*time.Second)) {
		t.Errorf("after: %s due %s, want DeleteAfterTTL a minute from the plan (%s), not at once (JSON keeps seconds)\n%s", it.After.Verdict, it.After.DueAt, now.Add(time.Minute), out)
	}
}
