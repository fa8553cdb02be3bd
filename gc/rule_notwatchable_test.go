package gc

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
	"github.com/wrapup-dev/wrapup/gc/decision"
	"github.com/wrapup-dev/wrapup/gc/view"
)

// A rule whose kind wrapup may not list is not watched (no informer), and
// comes back by itself: once access is granted, its next reconcile, which
// it asks for, starts the informer. Without the requeue nothing would
// bring it back but an unrelated event, and its AppWrappers would never
// be finished.
func TestRuleOfAKindNotWatchableComesBackWhenGranted(t *testing.T) {
	b := newWatchesBed(t)
	var allowed atomic.Bool
	b.w.access = func(context.Context, schema.GroupVersionResource) (bool, string, error) {
		if allowed.Load() {
			return true, "", nil
		}
		return false, view.DeniedList("list", schema.GroupResource{Group: "batch", Resource: "jobs"}), nil
	}
	scheme := runtime.NewScheme()
	if err := wrapupv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	rule := &wrapupv1alpha1.CompletionRule{ObjectMeta: metav1.ObjectMeta{Name: "jobs", UID: "u1", Generation: 1},
		Spec: wrapupv1alpha1.CompletionRuleSpec{Trigger: wrapupv1alpha1.TriggerSpec{APIGroup: "batch", Kind: "Job"}}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(rule).WithStatusSubresource(rule).Build()
	r := &RuleReconciler{Client: c, Recorder: events.NewFakeRecorder(64), Policies: &celpolicies.Cache{}, Watches: b.w, Assign: NewAssignments()}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "jobs"}}

	res, err := r.Reconcile(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if k := b.w.Kind(jobGK); k.State != decision.KindNotWatchable {
		t.Fatalf("kind %+v, want not watchable", k)
	}
	if len(b.w.Kinds()) != 0 {
		t.Errorf("informers %v for a kind wrapup may not list", b.w.Kinds())
	}
	if res.RequeueAfter < notWatchableRecheck {
		t.Fatalf("RequeueAfter %v: a rule of a kind not watchable must look again", res.RequeueAfter)
	}

	allowed.Store(true)
	b.w.mu.Lock()
	b.w.retryAt[jobGK] = time.Now().Add(-time.Second) // the requeue's time has come
	b.w.mu.Unlock()
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if len(b.w.Kinds()) != 1 {
		t.Fatalf("informers %v after the grant, want Job's", b.w.Kinds())
	}
	if k := b.w.Kind(jobGK); k.State == decision.KindNotWatchable {
		t.Errorf("kind %+v after the grant", k)
	}
}

// An access review that gets no answer (an endpoint that does not serve
// them, an API server in trouble) never holds a kind unwatched: its
// informer starts, as without the question, and a completion of that kind
// is not lost for want of an answer.
func TestKindWatchedWhenTheAccessReviewGetsNoAnswer(t *testing.T) {
	b := newWatchesBed(t)
	b.w.access = func(context.Context, schema.GroupVersionResource) (bool, string, error) {
		return false, "", errors.New("the server could not find the requested resource")
	}
	if err := b.w.Ensure(RuleOwner("jobs"), jobGK, celpolicies.Fields{}); err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	if len(b.w.Kinds()) != 1 {
		t.Fatalf("informers %v, want Job's", b.w.Kinds())
	}
	if k := b.w.Kind(jobGK); k.State == decision.KindNotWatchable {
		t.Errorf("kind %+v: not watchable for want of an answer", k)
	}
}
