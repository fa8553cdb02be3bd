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
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
	"github.com/wrapup-dev/wrapup/gc/decision"
	"github.com/wrapup-dev/wrapup/gc/triggers"
	"github.com/wrapup-dev/wrapup/gc/triggers/triggerstest"
)

// A rule whose kind wrapup may not list is not watched (no informer), and
// comes back by itself: once access is granted, its next reconcile, which
// it asks for, starts the informer. Without the requeue nothing would
// bring it back but an unrelated event, and its AppWrappers would never
// be finished.
func TestRuleOfAKindNotWatchableComesBackWhenGranted(t *testing.T) {
	var allowed atomic.Bool
	clock := clocktesting.NewFakePassiveClock(time.Now())
	b := triggerstest.NewBed(t, triggers.Options{Clock: clock, Access: func(context.Context, schema.GroupVersionResource) (bool, string, error) {
		if allowed.Load() {
			return true, "", nil
		}
		return false, triggers.DeniedList("list", schema.GroupResource{Group: "batch", Resource: "jobs"}), nil
	}})
	scheme := runtime.NewScheme()
	if err := wrapupv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	rule := &wrapupv1alpha1.CompletionRule{ObjectMeta: metav1.ObjectMeta{Name: "jobs", UID: "u1", Generation: 1},
		Spec: wrapupv1alpha1.CompletionRuleSpec{Trigger: wrapupv1alpha1.TriggerSpec{APIGroup: "batch", Kind: "Job"}}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(rule).WithStatusSubresource(rule).Build()
	r := &ruleReconciler{Client: c, Recorder: events.NewFakeRecorder(64), Policies: &celpolicies.Cache{}, Watches: b.W, Assign: newAssignments()}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "jobs"}}

	res, err := r.Reconcile(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if k := b.W.Kind(triggerstest.JobGK); k.State != decision.KindNotWatchable {
		t.Fatalf("kind %+v, want not watchable", k)
	}
	if len(b.W.Kinds()) != 0 {
		t.Errorf("informers %v for a kind wrapup may not list", b.W.Kinds())
	}
	if res.RequeueAfter < triggers.NotWatchableRecheck {
		t.Fatalf("RequeueAfter %v: a rule of a kind not watchable must look again", res.RequeueAfter)
	}

	allowed.Store(true)
	clock.SetTime(clock.Now().Add(res.RequeueAfter)) // the requeue's time has come
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if len(b.W.Kinds()) != 1 {
		t.Fatalf("informers %v after the grant, want Job's", b.W.Kinds())
	}
	if k := b.W.Kind(triggerstest.JobGK); k.State == decision.KindNotWatchable {
		t.Errorf("kind %+v after the grant", k)
	}
}

// An access review that gets no answer (an endpoint that does not serve
// them, an API server in trouble) never holds a kind unwatched: its
// informer starts, as without the question, and a completion of that kind
// is not lost for want of an answer.
func TestKindWatchedWhenTheAccessReviewGetsNoAnswer(t *testing.T) {
	b := triggerstest.NewBed(t, triggers.Options{Access: func(context.Context, schema.GroupVersionResource) (bool, string, error) {
		return false, "", errors.New("the server could not find the requested resource")
	}})
	if err := b.W.Ensure(triggers.RuleOwner("jobs"), triggerstest.JobGK, celpolicies.Fields{}); err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	if len(b.W.Kinds()) != 1 {
		t.Fatalf("informers %v, want Job's", b.W.Kinds())
	}
	if k := b.W.Kind(triggerstest.JobGK); k.State == decision.KindNotWatchable {
		t.Errorf("kind %+v: not watchable for want of an answer", k)
	}
}
