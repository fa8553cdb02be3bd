package gc

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// TestStaleRecordCacheComesBack: the reconciler decides on the
// CompletionRecord cache first, and goes to the API server only when that
// decision writes or deletes. Under UpdateStatus: the Job's success is
// recorded; the Job runs again (same UID), and the outcome is cleared; the
// Job succeeds again while the record cache still shows the first success
// (not cleared). The decision on the cache finds the success recorded and
// writes nothing: the outcome would be lost until an unrelated event, but
// for the controller's watch of CompletionRecords, whose event of the
// clear, once the cache has it, brings the AppWrapper back, and then the
// second success is recorded.
func TestStaleRecordCacheComesBack(t *testing.T) {
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
	cache := b.r.Cache
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
	b.reconcile(2 * time.Second)
	cleared := b.record()
	g.Expect(cleared.Cleared).NotTo(BeNil(), "decided on the stale cache: nothing written yet")

	// The cache catches up: the record's event names the AppWrapper.
	g.Expect(recordsAppWrapper(b.ctx, cleared)).To(Equal([]ctrl.Request{{NamespacedName: client.ObjectKeyFromObject(b.aw)}}))
	b.r.Cache = cache
	b.reconcile(3 * time.Second)
	g.Expect(b.record().Cleared).To(BeNil(), "the second success recorded")
	g.Expect(b.record().Outcome).To(Equal(wrapupv1alpha1.OutcomeSucceeded))
}

// TestHistoryGoneLeaks: the history controller remembers when it
// first saw a record's AppWrapper gone (gone, by the record's UID) and
// forgets it only when it deletes the record itself. A record deleted by
// anyone else (the namespace controller when its namespace goes, a
// cluster admin) leaves its entry for the life of the process: in a
// cluster of short-lived namespaces (CI), one entry per run, forever.
func TestHistoryGoneLeaks(t *testing.T) {
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
