package gc

import (
	"context"
	"fmt"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/gc/decision"
)

// HistoryWriteDeadline is decision.HistoryWriteDeadline.
const HistoryWriteDeadline = decision.HistoryWriteDeadline

// RecordName is decision.RecordName, the name of an AppWrapper's
// CompletionRecord.
func RecordName(name, uid string) string { return decision.RecordName(name, uid) }

// historyRetry is how soon a failed CompletionRecord write is tried again.
const historyRetry = 5 * time.Second

// writeHistory creates cr, or replaces the record of an earlier outcome of
// the same AppWrapper (a failure a retry cleared); it returns whether it
// wrote (false: the same run's record, or a later one, is there).
func (r *appWrapperReconciler) writeHistory(ctx context.Context, cr *wrapupv1alpha1.CompletionRecord) (bool, error) {
	err := r.Writer.Create(ctx, cr)
	if err == nil {
		historyWrittenTotal.WithLabelValues(cr.Rule).Inc()
		return true, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return false, fmt.Errorf("creating CompletionRecord %s/%s: %w", cr.Namespace, cr.Name, err)
	}
	old := &wrapupv1alpha1.CompletionRecord{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(cr), old); err != nil {
		return false, fmt.Errorf("reading CompletionRecord %s/%s: %w", cr.Namespace, cr.Name, err)
	}
	if decision.SameRun(old, cr) || !old.FinishedAt.Before(&cr.FinishedAt) && old.AppWrapper.UID == cr.AppWrapper.UID {
		// Written already, or a later outcome of this AppWrapper is (a
		// decision on a stale view must not replace it).
		return false, nil
	}
	if old.AppWrapper.UID != cr.AppWrapper.UID {
		// Another AppWrapper whose name and UID hash alike: never touch
		// another run's record.
		return false, fmt.Errorf("CompletionRecord %s/%s is the record of AppWrapper uid %s", cr.Namespace, cr.Name, old.AppWrapper.UID)
	}
	cr.ResourceVersion = old.ResourceVersion
	if err := r.Writer.Update(ctx, cr); err != nil {
		return false, fmt.Errorf("replacing CompletionRecord %s/%s: %w", cr.Namespace, cr.Name, err)
	}
	historyWrittenTotal.WithLabelValues(cr.Rule).Inc()
	return true, nil
}

// pastLimit says whether cr would be among the records its rule's count
// limit removes at once in its namespace (limitPerNamespace newer records
// of the rule are there, in the cache): a record written again after a
// restart, which the history reconciler removed before, is not created
// only to be deleted again.
func (r *appWrapperReconciler) pastLimit(ctx context.Context, cr *wrapupv1alpha1.CompletionRecord) bool {
	limit := int(cr.Retention.LimitPerNamespace)
	if limit <= 0 {
		return false
	}
	var list wrapupv1alpha1.CompletionRecordList
	if err := r.Cache.List(ctx, &list, client.InNamespace(cr.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return false
	}
	newer := 0
	for i := range list.Items {
		o := &list.Items[i]
		if o.Rule != cr.Rule || !o.DeletionTimestamp.IsZero() || o.Name == cr.Name {
			continue
		}
		// The history reconciler's order.
		if newerRecord(o, cr) {
			newer++
		}
	}
	return newer >= limit
}

// cachedRecord is the CompletionRecord named for aw in the cache; nil
// when there is none, or the controller writes none.
func (r *appWrapperReconciler) cachedRecord(ctx context.Context, aw *awv1beta2.AppWrapper) *wrapupv1alpha1.CompletionRecord {
	if r.NoHistory || aw == nil {
		return nil
	}
	cr := &wrapupv1alpha1.CompletionRecord{}
	if err := r.Cache.Get(ctx, types.NamespacedName{Namespace: aw.Namespace, Name: decision.RecordName(aw.Name, string(aw.UID))}, cr); err != nil {
		return nil
	}
	return cr
}

// ensureHistory writes the CompletionRecord the decision d on in says is
// due (d.History), unless this process has since; in and d are a final
// check's (the API server's rules and AppWrapper). ok says whether a
// deletion may go ahead: the record is written, or its deadline has passed
// (then with a Warning and a metric: the GPUs come back whatever the
// record does).
func (r *appWrapperReconciler) ensureHistory(ctx context.Context, in decision.Input, d decision.Decision, mem *awMemory) (ok bool) {
	if d.HistoryWritten != nil {
		mem.history = d.HistoryWritten
	}
	step := d.History
	if step == nil || step.Of.Same(mem.history) {
		return true
	}
	rec, cr, aw := step.Of, step.Record, in.AppWrapper
	done := func() bool {
		mem.history = rec
		return true
	}
	var err error
	switch {
	case step.Expired:
		// Its retention has passed (it was written, and has expired, or
		// the run finished long ago): nothing to keep.
		return done()
	case step.Refused == decision.RefusedOutsideLife:
		// It never will be borne out: said once, and no deletion waits on
		// it.
		r.emit(aw, []decision.Event{decision.WarningRecordNotWrittenOutsideLife.Event(rec.Outcome, rec.FinishedAt.UTC().Format(time.RFC3339))}, decision.EventNow)
		return done()
	case step.Refused == decision.RefusedNotBorneOut:
		// No CompletionRecord; a deletion waits as for a record that
		// cannot be written, then goes ahead.
		err = fmt.Errorf("the outcome on the AppWrapper (%s at %s) is not one wrapup can tell it decided (neither the AppWrapper's phase nor its trigger shows it), and a CompletionRecord is written only of an outcome wrapup decided",
			rec.Outcome, rec.FinishedAt.UTC().Format(time.RFC3339))
	case d.Write == nil && !rec.Same(mem.counted) && r.pastLimit(ctx, cr):
		// Written before, and removed by the count limit since.
		return done()
	default:
		_, err = r.writeHistory(ctx, cr.DeepCopy())
	}
	if err == nil {
		return done()
	}
	if step.Refused == "" {
		historyWriteFailuresTotal.WithLabelValues(cr.Rule).Inc()
	}
	late := !in.Now.Before(step.Deadline)
	next := "wrapup tries again, and deletes nothing until it is written or its deadline has passed"
	switch {
	case late && !d.DueAt.IsZero():
		next = fmt.Sprintf("deleting the AppWrapper anyway, %s after its deletion was due", HistoryWriteDeadline)
	case late:
		next = "the outcome stays recorded on the AppWrapper, and wrapup tries again after a restart"
	}
	r.emit(aw, []decision.Event{decision.WarningRecordNotWritten.Event(err, next)}, decision.EventNow)
	if late {
		return done()
	}
	return false
}
