package gc

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

func completionRecord(ns, name, rule string, finished time.Time, limit int32) *wrapupv1alpha1.CompletionRecord {
	return &wrapupv1alpha1.CompletionRecord{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Rule:       rule,
		Outcome:    wrapupv1alpha1.OutcomeSucceeded,
		FinishedAt: metav1.NewMicroTime(finished),
		Retention:  wrapupv1alpha1.RecordRetention{TTLSecondsAfterFinished: 3600, LimitPerNamespace: limit},
	}
}

// A burst of records of one rule in one namespace asks once for its count
// limit, a moment after the first.
func TestHistoryLimitOncePerBurst(t *testing.T) {
	g := NewWithT(t)
	clock := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request](),
		workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{Clock: clock})
	defer q.ShutDown()
	for i := range 50 {
		limitRequests{}.Create(context.Background(), event.CreateEvent{Object: completionRecord("ns", fmt.Sprintf("run-%d", i), "jobs", clock.Now(), 2)}, q)
	}
	limitRequests{}.Create(context.Background(), event.CreateEvent{Object: completionRecord("other", "run-0", "jobs", clock.Now(), 2)}, q)
	g.Expect(q.Len()).To(Equal(0))
	clock.Step(limitDelay)
	g.Eventually(q.Len).Should(Equal(2))
	got := map[types.NamespacedName]bool{}
	for range 2 {
		req, _ := q.Get()
		got[req.NamespacedName] = true
		q.Done(req)
	}
	g.Expect(got).To(Equal(map[types.NamespacedName]bool{{Namespace: "ns", Name: "limit:jobs"}: true, {Namespace: "other", Name: "limit:jobs"}: true}))
}

// The count limit keeps a rule's newest records in a namespace, and only
// that rule's; a record's own request looks at its TTL alone.
func TestHistoryLimit(t *testing.T) {
	g := NewWithT(t)
	fc := historyBed(t)
	finished := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for i := range 4 {
		g.Expect(fc.Create(context.Background(), completionRecord("ns", fmt.Sprintf("run-%d", i), "jobs", finished.Add(time.Duration(i)*time.Second), 2))).To(Succeed())
	}
	g.Expect(fc.Create(context.Background(), completionRecord("ns", "other-0", "other", finished, 2))).To(Succeed())
	r := &historyReconciler{Client: fc, Clock: clocktesting.NewFakeClock(finished.Add(time.Minute))}

	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "run-0"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.RequeueAfter).To(Equal(time.Hour - time.Minute))
	g.Expect(records(t, fc)).To(Equal(5))

	_, err = r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: limitPrefix + "jobs"}})
	g.Expect(err).NotTo(HaveOccurred())
	var l wrapupv1alpha1.CompletionRecordList
	g.Expect(fc.List(context.Background(), &l)).To(Succeed())
	var names []string
	for _, o := range l.Items {
		names = append(names, o.Name)
	}
	g.Expect(names).To(ConsistOf("run-2", "run-3", "other-0"))
}
