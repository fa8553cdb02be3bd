package gc

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// completionRecord is a record of rule kept an hour (and limit records of
// the rule per namespace), of an AppWrapper of its own name, uid "<name>-uid",
// which does not exist unless a test creates it.
func completionRecord(ns, name, rule string, finished time.Time, limit int32) *wrapupv1alpha1.CompletionRecord {
	return &wrapupv1alpha1.CompletionRecord{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		AppWrapper: wrapupv1alpha1.RecordedAppWrapper{Name: name, UID: types.UID(name + "-uid")},
		Rule:       rule,
		RuleUID:    types.UID(rule + "-uid"),
		Outcome:    wrapupv1alpha1.OutcomeSucceeded,
		FinishedAt: metav1.NewMicroTime(finished),
		Retention:  wrapupv1alpha1.RecordRetention{TTLSecondsAfterFinished: 3600, LimitPerNamespace: limit},
	}
}

// appWrapperOf is the AppWrapper cr is of, to create.
func appWrapperOf(cr *wrapupv1alpha1.CompletionRecord) *awv1beta2.AppWrapper {
	return &awv1beta2.AppWrapper{ObjectMeta: metav1.ObjectMeta{Namespace: cr.Namespace, Name: cr.AppWrapper.Name, UID: cr.AppWrapper.UID}}
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
		limitRequests.Create(context.Background(), event.CreateEvent{Object: completionRecord("ns", fmt.Sprintf("run-%d", i), "jobs", clock.Now(), 2)}, q)
	}
	limitRequests.Create(context.Background(), event.CreateEvent{Object: completionRecord("other", "run-0", "jobs", clock.Now(), 2)}, q)
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

// The deletion of an AppWrapper asks for its record (by the record's name,
// of the AppWrapper's name and UID): its retention starts.
func TestHistoryAppWrapperDeletionAsksForItsRecord(t *testing.T) {
	g := NewWithT(t)
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	aw := &awv1beta2.AppWrapper{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "run", UID: "aw-uid"}}
	recordOfDeleted(context.Background(), event.DeleteEvent{Object: aw}, q)
	g.Expect(q.Len()).To(Equal(1))
	req, _ := q.Get()
	g.Expect(req.NamespacedName).To(Equal(types.NamespacedName{Namespace: "ns", Name: wrapupv1alpha1.RecordName("run", "aw-uid")}))
}

// The count limit keeps a rule's newest records in a namespace, and only
// that rule's, of AppWrappers that are gone; a record's own request looks
// at its TTL alone, which starts when its AppWrapper is first seen gone.
func TestHistoryLimit(t *testing.T) {
	g := NewWithT(t)
	fc := historyBed(t)
	finished := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for i := range 4 {
		g.Expect(fc.Create(context.Background(), completionRecord("ns", fmt.Sprintf("run-%d", i), "jobs", finished.Add(time.Duration(i)*time.Second), 2))).To(Succeed())
	}
	g.Expect(fc.Create(context.Background(), completionRecord("ns", "other-0", "other", finished, 2))).To(Succeed())
	clock := clocktesting.NewFakeClock(finished.Add(time.Minute))
	r := &historyReconciler{Client: fc, Clock: clock}

	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "run-0"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.RequeueAfter).To(Equal(time.Hour), "the TTL counts from when the AppWrapper was first seen gone, later than the finish")
	g.Expect(records(t, fc)).To(Equal(5))

	_, err = r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: limitPrefix + "jobs"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(recordNames(t, fc)).To(ConsistOf("run-2", "run-3", "other-0"))
}

// The count limit skips the records whose AppWrapper (the same name and
// UID) exists, however old: a live run's memory is never deleted. An
// AppWrapper of the same name and another UID is another run's.
func TestHistoryLimitSkipsLiveAppWrappers(t *testing.T) {
	g := NewWithT(t)
	fc := historyBed(t)
	ctx := context.Background()
	finished := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for i := range 5 {
		g.Expect(fc.Create(ctx, completionRecord("ns", fmt.Sprintf("run-%d", i), "jobs", finished.Add(time.Duration(i)*time.Second), 2))).To(Succeed())
	}
	// run-0 (the oldest) and run-1 live; run-2's name is taken by another
	// AppWrapper.
	for _, name := range []string{"run-0", "run-1"} {
		cr := &wrapupv1alpha1.CompletionRecord{}
		g.Expect(fc.Get(ctx, types.NamespacedName{Namespace: "ns", Name: name}, cr)).To(Succeed())
		g.Expect(fc.Create(ctx, appWrapperOf(cr))).To(Succeed())
	}
	g.Expect(fc.Create(ctx, &awv1beta2.AppWrapper{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "run-2", UID: "another-uid"}})).To(Succeed())
	r := &historyReconciler{Client: fc, Clock: clocktesting.NewFakeClock(finished.Add(30 * 24 * time.Hour))}
	_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: limitPrefix + "jobs"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(recordNames(t, fc)).To(ConsistOf("run-0", "run-1", "run-3", "run-4"))
}

// A record is never deleted while its AppWrapper (the same name and UID)
// exists, however long past its TTL: its deletion brings the record back.
// Once it is gone, the record is deleted its TTL after the later of the
// run's finish and the AppWrapper's end, when the history controller
// first saw it gone (whoever deleted it, whenever it was due).
func TestHistoryKeepsALiveRunsRecordAndExpiresItAfterItsEnd(t *testing.T) {
	ctx := context.Background()
	finished := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	deleting := func(cr *wrapupv1alpha1.CompletionRecord, due time.Time) {
		cr.Action = wrapupv1alpha1.RecordedAction{Rule: cr.Rule, RuleUID: cr.RuleUID, Action: wrapupv1alpha1.ActionDeleteAll,
			TTLSecondsAfterFinished: ptr.To[int32](600), DeleteAfter: ptr.To(metav1.NewTime(due))}
	}
	for _, tc := range []struct {
		name string
		edit func(*wrapupv1alpha1.CompletionRecord)
		// end is when the AppWrapper ended, as the controller counts it,
		// after the finish; gone is when it is first seen gone.
		end, gone time.Duration
	}{
		{name: "deleted by its stamp, due 10 min after the finish, seen gone 30 min after", edit: func(cr *wrapupv1alpha1.CompletionRecord) { deleting(cr, finished.Add(10*time.Minute)) },
			end: 30 * time.Minute, gone: 30 * time.Minute},
		{name: "recorded only (UpdateStatus), deleted by its user", edit: func(cr *wrapupv1alpha1.CompletionRecord) {
			cr.Action = wrapupv1alpha1.RecordedAction{Rule: cr.Rule, Action: wrapupv1alpha1.ActionUpdateStatus}
		}, end: 3 * time.Hour, gone: 3 * time.Hour},
		{name: "a dry run's", edit: func(cr *wrapupv1alpha1.CompletionRecord) {
			deleting(cr, finished)
			cr.Action.DryRun, cr.Action.DeleteAfter = true, nil
		}, end: 3 * time.Hour, gone: 3 * time.Hour},
		{name: "cleared, its stamp's due time past", edit: func(cr *wrapupv1alpha1.CompletionRecord) {
			deleting(cr, finished)
			cr.Cleared = &wrapupv1alpha1.RecordCleared{At: metav1.NewMicroTime(finished.Add(time.Minute))}
		}, end: 3 * time.Hour, gone: 3 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			fc := historyBed(t)
			cr := completionRecord("ns", "run", "jobs", finished, 100)
			tc.edit(cr)
			g.Expect(fc.Create(ctx, cr)).To(Succeed())
			aw := appWrapperOf(cr)
			g.Expect(fc.Create(ctx, aw)).To(Succeed())
			clock := clocktesting.NewFakeClock(finished.Add(30 * 24 * time.Hour))
			r := &historyReconciler{Client: fc, Clock: clock}
			req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(cr)}

			// A month past its TTL, its AppWrapper lives: kept, and looked
			// at again only on the AppWrapper's deletion.
			res, err := r.Reconcile(ctx, req)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res).To(Equal(ctrl.Result{}))
			g.Expect(records(t, fc)).To(Equal(1))

			// Gone; seen gone tc.gone after the finish.
			g.Expect(fc.Delete(ctx, aw)).To(Succeed())
			clock.SetTime(finished.Add(tc.gone))
			expires := finished.Add(tc.end + time.Hour)
			res, err = r.Reconcile(ctx, req)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.RequeueAfter).To(Equal(expires.Sub(clock.Now())))
			g.Expect(records(t, fc)).To(Equal(1))

			// A moment before it expires: kept.
			clock.SetTime(expires.Add(-time.Second))
			res, err = r.Reconcile(ctx, req)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.RequeueAfter).To(Equal(time.Second))
			g.Expect(records(t, fc)).To(Equal(1))

			clock.SetTime(expires)
			_, err = r.Reconcile(ctx, req)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(records(t, fc)).To(Equal(0))
		})
	}
}

// A record of a rule whose history is off (retention TTL 0, an
// ownerReference to its AppWrapper) is the garbage collector's to delete,
// with its AppWrapper: the history controller leaves it, its AppWrapper
// there or gone.
func TestHistoryLeavesOwnedRecordsToTheGarbageCollector(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	fc := historyBed(t)
	finished := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	cr := completionRecord("ns", "run", "jobs", finished, 100)
	cr.Retention.TTLSecondsAfterFinished = 0
	cr.OwnerReferences = []metav1.OwnerReference{{APIVersion: awv1beta2.GroupVersion.String(), Kind: "AppWrapper", Name: "run", UID: cr.AppWrapper.UID}}
	g.Expect(fc.Create(ctx, cr)).To(Succeed())
	aw := appWrapperOf(cr)
	g.Expect(fc.Create(ctx, aw)).To(Succeed())
	clock := clocktesting.NewFakeClock(finished.Add(time.Hour))
	r := &historyReconciler{Client: fc, Clock: clock}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(cr)}
	for _, gone := range []bool{false, true} {
		if gone {
			g.Expect(fc.Delete(ctx, aw)).To(Succeed())
		}
		for _, at := range []time.Duration{0, 24 * time.Hour, 365 * 24 * time.Hour} {
			clock.SetTime(finished.Add(time.Hour + at))
			res, err := r.Reconcile(ctx, req)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res).To(Equal(ctrl.Result{}), "gone %v, %s later", gone, at)
			g.Expect(records(t, fc)).To(Equal(1), "gone %v, %s later", gone, at)
		}
	}
}

func recordNames(t *testing.T, c client.Client) []string {
	t.Helper()
	var l wrapupv1alpha1.CompletionRecordList
	if err := c.List(context.Background(), &l); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range l.Items {
		names = append(names, o.Name)
	}
	return names
}

// A run whose stamp's deletion was due long before its AppWrapper went
// (its user opted it out after it was recorded, its rule was blocked, its
// own failure hold outlasted the TTL, wrapup was down) keeps its record
// its TTL after the AppWrapper's end, as any other: the record outlives
// its AppWrapper by the history retention, and is not deleted the moment
// the AppWrapper goes.
func TestHistoryKeepsTheRecordTTLAfterALateEnd(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	fc := historyBed(t)
	finished := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	cr := completionRecord("ns", "run", "jobs", finished, 100)
	cr.Action = wrapupv1alpha1.RecordedAction{Rule: "jobs", RuleUID: cr.RuleUID, Action: wrapupv1alpha1.ActionDeleteAll,
		TTLSecondsAfterFinished: ptr.To[int32](600), DeleteAfter: ptr.To(metav1.NewTime(finished.Add(10 * time.Minute)))}
	g.Expect(fc.Create(ctx, cr)).To(Succeed())
	// The AppWrapper lived 5 hours past its due time, then went.
	clock := clocktesting.NewFakeClock(finished.Add(5 * time.Hour))
	r := &historyReconciler{Client: fc, Clock: clock}
	res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(cr)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(records(t, fc)).To(Equal(1), "deleted as its AppWrapper went, not its TTL (1h) after")
	g.Expect(res.RequeueAfter).To(Equal(time.Hour))
}
