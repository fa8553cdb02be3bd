package gc

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/wrapup-dev/wrapup/celpolicies"
	"github.com/wrapup-dev/wrapup/gc/read"
	"github.com/wrapup-dev/wrapup/gc/triggers"
)

const kubeconfigFor = `apiVersion: v1
kind: Config
clusters:
- name: w
  cluster: {server: "https://%s"}
users:
- name: u
  user: {token: t}
contexts:
- name: c
  context: {cluster: w, user: u}
current-context: c
`

func workerSecret(name, server string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "wrapup-system"},
		Data: map[string][]byte{read.KubeconfigKey: []byte(strings.ReplaceAll(kubeconfigFor, "%s", server))}}
}

// TestWorkerConnections: a worker is reached through wrapup's Secret of its
// name; a missing or broken Secret is an error that names it; a Secret is
// trusted for secretRecheck, then read again, and a changed one replaces
// the connection (and stops the old one's watches).
func TestWorkerConnections(t *testing.T) {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(workerSecret("worker-1", "127.0.0.1:1")).Build()
	ws := newWorkerClusters(c, "wrapup-system")
	clock := clocktesting.NewFakePassiveClock(time.Now())
	ws.Clock = clock
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := ws.conn(ctx, "worker-1"); err == nil || !strings.Contains(err.Error(), "not started") {
		t.Fatalf("before Start: %v, want an error that says so", err)
	}
	done := make(chan struct{})
	go func() { _ = ws.Start(ctx); close(done) }()
	if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		ws.mu.Lock()
		defer ws.mu.Unlock()
		return ws.ctx != nil, nil
	}); err != nil {
		t.Fatalf("the worker connections did not start: %v", err)
	}

	if _, err := ws.conn(ctx, "worker-2"); err == nil || !strings.Contains(err.Error(), "no kubeconfig Secret wrapup-system/worker-2") {
		t.Errorf("missing Secret: %v, want an error naming it", err)
	}
	first, err := ws.conn(ctx, "worker-1")
	if err != nil {
		t.Fatalf("worker-1: %v", err)
	}
	if again, _ := ws.conn(ctx, "worker-1"); again != first {
		t.Error("a second read within secretRecheck made a new connection")
	}
	clock.SetTime(clock.Now().Add(secretRecheck))
	if again, _ := ws.conn(ctx, "worker-1"); again != first {
		t.Error("an unchanged Secret made a new connection")
	}

	sec := workerSecret("worker-1", "127.0.0.1:2")
	sec.ResourceVersion = ""
	cur := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(sec), cur); err != nil {
		t.Fatal(err)
	}
	cur.Data = sec.Data
	if err := c.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	// An AppWrapper watching a kind on the old connection: the claim
	// stands though the worker does not answer (the kind is taken up when
	// it does).
	_ = first.watches.Ensure(triggers.AppWrapperOwner(types.NamespacedName{Namespace: "ns", Name: "run"}, schema.GroupKind{Group: "batch", Kind: "Job"}), schema.GroupKind{Group: "batch", Kind: "Job"}, celpolicies.Fields{})
	clock.SetTime(clock.Now().Add(secretRecheck))
	second, err := ws.conn(ctx, "worker-1")
	if err != nil || second == first {
		t.Fatalf("a changed Secret: %v, same connection %v; want a new one", err, second == first)
	}
	select {
	case e := <-ws.Events():
		if e.Object.GetNamespace() != "ns" || e.Object.GetName() != "run" {
			t.Errorf("after the connection was replaced, an event for %s/%s, want ns/run", e.Object.GetNamespace(), e.Object.GetName())
		}
	case <-time.After(5 * time.Second):
		t.Error("the AppWrapper that watched a kind on the old connection is not reconciled to claim it again")
	}
	select {
	case <-first.watches.Stopped():
	case <-time.After(5 * time.Second):
		t.Error("the old connection's watches still run")
	}

	cur.Data = map[string][]byte{read.KubeconfigKey: []byte("not: [a kubeconfig")}
	if err := c.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	clock.SetTime(clock.Now().Add(secretRecheck))
	if _, err := ws.conn(ctx, "worker-1"); err == nil || !strings.Contains(err.Error(), "wrapup-system/worker-1") {
		t.Errorf("a broken kubeconfig: %v, want an error naming the Secret", err)
	}
	cancel()
	<-done
	if ws.lookup("worker-1") != nil {
		t.Error("connections outlive the manager")
	}
}

// TestWorkerFailFast: after a worker failed to answer, its AppWrappers are
// decided unreachable without asking it again for workerFailFast; a
// NotFound is an answer.
func TestWorkerFailFast(t *testing.T) {
	c := &workerConn{}
	now := time.Now()
	if err := c.failFast(now); err != nil {
		t.Fatalf("a worker that never failed: %v", err)
	}
	c.answered(now, apierrors.NewNotFound(schema.GroupResource{Resource: "appwrappers"}, "run"))
	if err := c.failFast(now); err != nil {
		t.Fatalf("after a NotFound: %v", err)
	}
	c.answered(now, errors.New("dial tcp: i/o timeout"))
	if err := c.failFast(now.Add(workerFailFast / 2)); err == nil || !strings.Contains(err.Error(), "i/o timeout") {
		t.Errorf("within workerFailFast of a failure: %v, want the failure", err)
	}
	if err := c.failFast(now.Add(workerFailFast)); err != nil {
		t.Errorf("after workerFailFast: %v, want it asked again", err)
	}
	c.answered(now, nil)
	if err := c.failFast(now); err != nil {
		t.Errorf("after an answer: %v", err)
	}
}

// TestFindWorkload: an AppWrapper's Workload is found by its controller in
// the cache, read again from the API server for the final check, and
// found there when the cache does not have it yet.
func TestFindWorkload(t *testing.T) {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = awv1beta2.AddToScheme(s)
	_ = kueue.AddToScheme(s)
	aw := &awv1beta2.AppWrapper{ObjectMeta: metav1.ObjectMeta{Name: "run", Namespace: "ns", UID: "aw-uid"}}
	wl := func(name string, uid types.UID, cluster string) *kueue.Workload {
		w := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "workload.codeflare.dev/v1beta2", Kind: "AppWrapper", Name: "run", UID: uid, Controller: ptr.To(true)}}}}
		if cluster != "" {
			w.Status.ClusterName = ptr.To(cluster)
		}
		return w
	}
	mine, other := wl("appwrapper-run-1", "aw-uid", "worker-1"), wl("appwrapper-run-2", "old-uid", "worker-2")
	cache := fake.NewClientBuilder().WithScheme(s).WithObjects(mine.DeepCopy(), other.DeepCopy()).
		WithIndex(&kueue.Workload{}, read.WorkloadOwnerIndex, read.WorkloadController).Build()
	dispatched := mine.DeepCopy()
	dispatched.Status.ClusterName = ptr.To("worker-2")
	live := fake.NewClientBuilder().WithScheme(s).WithObjects(dispatched, other.DeepCopy()).Build()
	ctx := context.Background()
	got, err := read.FindWorkload(ctx, cache, nil, aw)
	if err != nil || got == nil || got.Name != mine.Name || *got.Status.ClusterName != "worker-1" {
		t.Fatalf("from the cache: %v, %v; want %s on worker-1", got, err, mine.Name)
	}
	if got, err = read.FindWorkload(ctx, cache, live, aw); err != nil || got == nil || *got.Status.ClusterName != "worker-2" {
		t.Fatalf("for the final check: %v, %v; want it as the API server has it (worker-2)", got, err)
	}
	empty := fake.NewClientBuilder().WithScheme(s).WithIndex(&kueue.Workload{}, read.WorkloadOwnerIndex, read.WorkloadController).Build()
	if got, err = read.FindWorkload(ctx, empty, nil, aw); err != nil || got != nil {
		t.Fatalf("an empty cache: %v, %v; want none", got, err)
	}
	if got, err = read.FindWorkload(ctx, empty, live, aw); err != nil || got == nil || got.Name != mine.Name {
		t.Fatalf("not in the cache yet, for the final check: %v, %v; want %s from the API server", got, err, mine.Name)
	}
}

// The Workload watch passes a dispatch and a finish: a run whose copy
// MultiKueue removes may bring no other change on the manager, and would
// wait for the resync (10 hours) to be decided.
func TestWorkloadWatchPassesTheFinish(t *testing.T) {
	wl := &kueue.Workload{}
	dispatchedTo := wl.DeepCopy()
	dispatchedTo.Status.ClusterName = ptr.To("worker-1")
	finished := dispatchedTo.DeepCopy()
	apimeta.SetStatusCondition(&finished.Status.Conditions, metav1.Condition{Type: kueue.WorkloadFinished, Status: metav1.ConditionTrue, Reason: kueue.WorkloadFinishedReasonFailed})
	requeued := finished.DeepCopy()
	requeued.Status.Conditions = append(requeued.Status.Conditions, metav1.Condition{Type: "QuotaReserved", Status: metav1.ConditionFalse, Reason: "x"})
	for _, tc := range []struct {
		name     string
		old, new *kueue.Workload
		want     bool
	}{
		{"dispatched", wl, dispatchedTo, true},
		{"finished", dispatchedTo, finished, true},
		{"another condition", finished, requeued, false},
	} {
		if got := clusterNameChanged.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
			t.Errorf("%s: passed %v, want %v", tc.name, got, tc.want)
		}
	}
}
