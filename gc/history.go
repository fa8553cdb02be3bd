package gc

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// historyDue says whether the decision d on the caches (in) leaves the
// CompletionRecord of the recorded outcome to write: this process has not
// written it, the rule keeps history, and the cache holds no
// CompletionRecord of the run. It is then written after a final check
// (apply), by the rules as the API server has them: a stale cache may hold
// a shorter retention, or a deadline that has passed only there.
func (r *appWrapperReconciler) historyDue(ctx context.Context, in decision.Input, d decision.Decision, mem *awMemory) bool {
	rec := d.Recorded
	if r.NoHistory || d.Write != nil || d.Clear || d.Outcome == "" || rec == nil || rec.Same(mem.history) {
		return false
	}
	rule, ret, keep := decision.HistoryOf(in, d, rec)
	if !keep {
		// Not remembered: a decision on fresher rules may keep history.
		return false
	}
	if r.written(ctx, decision.CompletionRecordOf(in, d, rec, rule, ret)) {
		mem.history = rec
		return false
	}
	return true
}

// written says whether the cache holds the CompletionRecord of cr's run.
func (r *appWrapperReconciler) written(ctx context.Context, cr *wrapupv1alpha1.CompletionRecord) bool {
	cached := &wrapupv1alpha1.CompletionRecord{}
	return r.Cache.Get(ctx, client.ObjectKeyFromObject(cr), cached) == nil && decision.SameRun(cached, cr)
}

// ensureHistory writes the CompletionRecord of rec unless this process
// wrote it already; in and d are a final check's (the API server's rules
// and AppWrapper). decided says that rec is the record this process just
// wrote; any other is written only when this process counted it, or what
// the decision observed bears it out (decision.BorneOut): a record is the
// AppWrapper's metadata, and a tenant's forged one gets no
// CompletionRecord. ok says whether a deletion may go ahead: the record is
// written, or its deadline has passed (then with a Warning and a metric:
// the GPUs come back whatever the record does).
func (r *appWrapperReconciler) ensureHistory(ctx context.Context, in decision.Input, d decision.Decision, rec *decision.Record, decided bool, mem *awMemory) (ok bool) {
	// The deadline runs from when the deletion is due (zero for a
	// record-only outcome): a long TTL leaves time to try again, and the
	// deadline of a deletion due already does not move.
	due := d.DueAt
	if r.NoHistory || rec == nil || rec.Same(mem.history) {
		return true
	}
	aw := in.AppWrapper
	done := func() bool {
		mem.history = rec
		return true
	}
	rule, ret, keep := decision.HistoryOf(in, d, rec)
	if !keep {
		return true
	}
	// Its retention has passed (it was written, and has expired, or the
	// run finished long ago): nothing to keep.
	if decision.RecordExpired(in.Now, rec, ret) {
		return done()
	}
	cr := decision.CompletionRecordOf(in, d, rec, rule, ret)
	if r.written(ctx, cr) {
		return done()
	}
	var err error
	forged := false
	if err == nil && !decided && !rec.Same(mem.counted) {
		switch {
		case !decision.FinishedInLife(in, rec):
			// It never will be borne out: said once, and no deletion waits
			// on it.
			r.Recorder.Eventf(aw, nil, "Warning", wrapupv1alpha1.ReasonRecordNotWritten, "WriteRecord",
				"no CompletionRecord of the outcome on the AppWrapper (%s at %s): it finished outside the AppWrapper's life, and a CompletionRecord is written only of an outcome wrapup decided",
				rec.Outcome, rec.FinishedAt.UTC().Format(time.RFC3339))
			return done()
		case !decision.BorneOut(in, d):
			// Not this process's, and what it observes does not bear it
			// out: a tenant may have written it. No CompletionRecord; a
			// deletion waits as for a record that cannot be written (a
			// later observation may bear it out), then goes ahead.
			forged = true
			err = fmt.Errorf("the outcome on the AppWrapper (%s at %s) is not one wrapup can tell it decided (neither the AppWrapper's phase nor its trigger shows it), and a CompletionRecord is written only of an outcome wrapup decided",
				rec.Outcome, rec.FinishedAt.UTC().Format(time.RFC3339))
		case r.pastLimit(ctx, cr):
			// Written before, and removed by the count limit since.
			return done()
		}
	}
	if err == nil {
		_, err = r.writeHistory(ctx, cr)
	}
	if err != nil {
		if !forged {
			historyWriteFailuresTotal.WithLabelValues(rule).Inc()
		}
		late := !in.Now.Before(decision.RecordDeadline(rec, due))
		msg := fmt.Sprintf("the run's CompletionRecord could not be written: %v", err)
		switch {
		case late && !due.IsZero():
			msg += fmt.Sprintf("; deleting the AppWrapper anyway, %s after its deletion was due", HistoryWriteDeadline)
		case late:
			msg += "; the outcome stays recorded on the AppWrapper, and wrapup tries again after a restart"
		default:
			msg += "; wrapup tries again, and deletes nothing until it is written or its deadline has passed"
		}
		r.Recorder.Eventf(aw, nil, "Warning", wrapupv1alpha1.ReasonRecordNotWritten, "WriteRecord", "%s", decision.Truncate(msg, decision.MaxMessage))
		if late {
			return done()
		}
		return false
	}
	return done()
}
