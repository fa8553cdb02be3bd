package gc

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// TestReviewStaleRecordCacheLosesTheNextOutcome: the reconciler decides
// on the CompletionRecord cache first and goes to the API server only
// when that decision writes or deletes; and nothing brings a reconcile
// when the record cache catches up (the AppWrapper controller does not
// watch CompletionRecords). Under UpdateStatus: the Job's success is
// recorded; the Job runs again (same UID), and the outcome is cleared;
// the Job succeeds again while the record cache still shows the first
// success (not cleared). The decision on the cache finds the success
// recorded, writes nothing (RecordOnly) and asks for no requeue: the
// API server's record stays cleared, and no later event comes for it
// (the trigger and the AppWrapper do not change again): the outcome is
// lost until an unrelated event or the informers' resync (10 h).
func TestReviewStaleRecordCacheLosesTheNextOutcome(t *testing.T) {
	b := newActBed(t, func(r *wrapupv1alpha1.CompletionRule) {
		r.Spec.OnSuccess = wrapupv1alpha1.ActionSpec{Action: wrapupv1alpha1.ActionUpdateStatus}
	})
	g := b.g
	b.job("job-1", wrapupv1alpha1.OutcomeSucceeded)
	b.reconcile(0)
	first := b.record()
	g.Expect(first).NotTo(BeNil())
	g.Expect(first.Cleared).To(BeNil())

	b.job("job-1", "")
	b.reconcile(time.Second)
	g.Expect(b.record().Cleared).NotTo(BeNil(), "the outcome cleared: the Job runs again")

	// The record informer has not delivered the clear yet.
	b.r.Cache = interceptor.NewClient(b.fc, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if cr, ok := obj.(*wrapupv1alpha1.CompletionRecord); ok {
				first.DeepCopyInto(cr)
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	b.job("job-1", wrapupv1alpha1.OutcomeSucceeded)
	res := b.reconcile(2 * time.Second)
	cr := b.record()
	recorded := cr.Cleared == nil
	g.Expect(recorded || res.Requeue || res.RequeueAfter > 0).To(BeTrue(), //nolint:staticcheck // Requeue is what the controller answers
		"the Job succeeded again: the record stays cleared (%v) and the reconcile asks for nothing more (%+v)", cr.Cleared, res)
}

// TestReviewLostAnswerCountsOnce: issue 48 asks that counters and metrics
// be exactly-once from the create. A create whose answer is lost (it
// landed, then a timeout) is never counted: the next decision, on the
// stored record, writes nothing. The previous version remembered such a
// write (memory.unsure) and counted it once it saw it landed.
func TestReviewLostAnswerCountsOnce(t *testing.T) {
	b := newActBed(t)
	g := b.g
	b.job("job-1", wrapupv1alpha1.OutcomeSucceeded)
	b.onCreate = func(ctx context.Context, c client.WithWatch, obj client.Object) error {
		g.Expect(c.Create(ctx, obj)).To(Succeed())
		return apierrors.NewTimeoutError("the answer is lost", 1)
	}
	_, err := b.r.Reconcile(b.ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(b.aw)})
	g.Expect(err).To(HaveOccurred())
	b.onCreate = nil
	for _, at := range []time.Duration{time.Second, time.Minute, 300 * time.Second} {
		b.reconcile(at)
	}
	g.Expect(b.appWrapper()).To(BeNil(), "deleted when due")
	g.Expect(b.counted).To(Equal([]string{"jobs/Succeeded"}), "the run's outcome, counted once")
}

// TestReviewHistoryGoneLeaks: the history controller remembers when it
// first saw a record's AppWrapper gone (gone, by the record's UID) and
// forgets it only when it deletes the record itself. A record deleted by
// anyone else (the namespace controller when its namespace goes, a
// cluster admin) leaves its entry for the life of the process: in a
// cluster of short-lived namespaces (CI), one entry per run, forever.
func TestReviewHistoryGoneLeaks(t *testing.T) {
	g := NewWithT(t)
	fc := historyBed(t)
	ctx := context.Background()
	finished := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	cr := completionRecord("ns", "run-0", "jobs", finished, 100)
	cr.UID = "record-uid"
	g.Expect(fc.Create(ctx, cr)).To(Succeed())
	r := &historyReconciler{Client: fc, Clock: clocktesting.NewFakeClock(finished.Add(time.Minute))}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "run-0"}}
	_, err := r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.gone).To(HaveLen(1))

	// The namespace controller deletes it with its namespace.
	g.Expect(fc.Delete(ctx, cr)).To(Succeed())
	_, err = r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.gone).To(BeEmpty(), "the deleted record's entry")
}
