package gc

import (
	"context"
	"fmt"
	"hash/fnv"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/gc/decision"
)

// HistoryWriteDeadline is how long after a run finished wrapup keeps
// trying to write its CompletionRecord before it deletes the AppWrapper
// anyway: a record must never hold GPUs hostage.
const HistoryWriteDeadline = 2 * time.Minute

// historyRetry is how soon a failed CompletionRecord write is tried again.
const historyRetry = 5 * time.Second

// History is how long rule keeps the records of its runs; keep is false
// when it writes none.
func History(rule *wrapupv1alpha1.CompletionRule) (ret wrapupv1alpha1.RecordRetention, keep bool) {
	h := rule.Spec.History
	ret = wrapupv1alpha1.RecordRetention{TTLSecondsAfterFinished: wrapupv1alpha1.DefaultHistoryTTLSeconds, LimitPerNamespace: wrapupv1alpha1.DefaultHistoryLimit}
	if h.TTLSecondsAfterFinished != nil {
		ret.TTLSecondsAfterFinished = *h.TTLSecondsAfterFinished
	}
	if h.LimitPerNamespace != nil {
		ret.LimitPerNamespace = *h.LimitPerNamespace
	}
	return ret, !h.Disabled && ret.TTLSecondsAfterFinished > 0
}

// RecordName is the name of the CompletionRecord of the AppWrapper name
// with uid: the name and a hash of the UID, so that a retry, a restart or
// a second replica writes the same one, and an AppWrapper created again
// under the same name gets another.
func RecordName(name string, uid string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(uid))
	suffix := fmt.Sprintf("-%08x", h.Sum32())
	if max := validation.DNS1123SubdomainMaxLength - len(suffix); len(name) > max {
		name = name[:max]
	}
	return name + suffix
}

// completionRecord is the CompletionRecord of the outcome rec of aw, decided
// by d on the observations in.
// rule names the rule whose retention it has (historyOf): the rule that
// decides, never a name read from the AppWrapper's metadata alone.
func completionRecord(in decision.Input, d decision.Decision, rec *decision.Record, rule string, ret wrapupv1alpha1.RecordRetention) *wrapupv1alpha1.CompletionRecord {
	aw := in.AppWrapper
	cr := &wrapupv1alpha1.CompletionRecord{
		ObjectMeta: metav1.ObjectMeta{Namespace: aw.Namespace, Name: RecordName(aw.Name, string(aw.UID)), Labels: map[string]string{}},
		AppWrapper: wrapupv1alpha1.RecordedAppWrapper{Name: aw.Name, UID: aw.UID, QueueName: aw.Labels["kueue.x-k8s.io/queue-name"]},
		Rule:       rule,
		Outcome:    rec.Outcome,
		Message:    decision.Truncate(rec.Message, decision.MaxMessage),
		FinishedAt: metav1.NewMicroTime(rec.FinishedAt),
		Action:     wrapupv1alpha1.RecordedAction{Action: d.Action.Action, TTLSecondsAfterFinished: d.Action.TTLSecondsAfterFinished, DryRun: d.DryRun},
		Retention:  ret,
	}
	if len(validation.IsValidLabelValue(aw.Name)) == 0 {
		cr.Labels[wrapupv1alpha1.RecordAppWrapperLabel] = aw.Name
	}
	if len(validation.IsValidLabelValue(rule)) == 0 {
		cr.Labels[wrapupv1alpha1.RecordRuleLabel] = rule
	}
	if d.Action.Action == wrapupv1alpha1.ActionDeleteAll && !d.DryRun {
		due := d.DueAt
		if due.IsZero() {
			due = rec.FinishedAt.Add(time.Duration(ptr.Deref(d.Action.TTLSecondsAfterFinished, 0)) * time.Second)
		}
		cr.Action.DeleteAfter = ptr.To(metav1.NewTime(due))
	}
	// The AppWrapper's labels (at most 32) are the record's too, so that
	// users find their runs with their own selectors.
	keys := make([]string, 0, len(aw.Labels))
	for k := range aw.Labels {
		if k != wrapupv1alpha1.OutcomeLabel {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for i, k := range keys {
		if i == wrapupv1alpha1.MaxRecordedLabels {
			break
		}
		if cr.AppWrapper.Labels == nil {
			cr.AppWrapper.Labels = map[string]string{}
		}
		cr.AppWrapper.Labels[k] = aw.Labels[k]
		if _, ours := cr.Labels[k]; !ours {
			cr.Labels[k] = aw.Labels[k]
		}
	}
	cr.Labels[wrapupv1alpha1.OutcomeLabel] = string(rec.Outcome)

	// Which triggers decided, and their UIDs, come from the record: a
	// trigger read since may be gone or re-created.
	decided := map[int]types.UID{}
	for _, t := range rec.Triggers {
		decided[t.Index] = t.UID
	}
	add := func(info decision.TriggerInfo, state string) {
		if len(cr.Triggers) == wrapupv1alpha1.MaxRecordedTriggers {
			return
		}
		gvk := info.GroupVersionKind()
		t := wrapupv1alpha1.RecordedTrigger{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: info.Name, UID: info.UID, State: state}
		if t.Name == "" {
			t.Name = info.Template
		}
		if uid, ok := decided[info.Index]; ok || len(rec.Triggers) == 0 {
			if !ok {
				uid = rec.TriggerUID
			}
			t.Decided = true
			if t.UID != uid {
				// Not the object that decided: say nothing of its state.
				t.UID, t.State = uid, ""
			}
		}
		for _, tr := range in.Triggers {
			if tr.Ref == info.Ref && tr.Object != nil && tr.Object.GetUID() == t.UID {
				triggerStatus(&t, tr.Object)
			}
		}
		cr.Triggers = append(cr.Triggers, t)
	}
	switch {
	case len(d.Candidates) > 0:
		for _, c := range d.Candidates {
			add(c.TriggerInfo, c.State)
		}
	case d.Trigger != nil:
		state := ""
		if e := d.Evaluation; e != nil && e.Error == "" && !e.FromAppWrapperPhase {
			state = string(e.Outcome)
		}
		add(*d.Trigger, state)
	}
	return cr
}

// triggerStatus copies the phase and the last conditions of obj's status.
func triggerStatus(t *wrapupv1alpha1.RecordedTrigger, obj *unstructured.Unstructured) {
	if p, ok, _ := unstructured.NestedString(obj.Object, "status", "phase"); ok {
		t.Phase = decision.Truncate(p, 64)
	}
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	if len(conds) > wrapupv1alpha1.MaxRecordedConditions {
		conds = conds[len(conds)-wrapupv1alpha1.MaxRecordedConditions:]
	}
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		str := func(k string, n int) string { s, _ := m[k].(string); return decision.Truncate(s, n) }
		t.Conditions = append(t.Conditions, wrapupv1alpha1.RecordedCondition{
			Type: str("type", 316), Status: str("status", 16), Reason: str("reason", 1024), Message: str("message", 1024)})
	}
}

// sameRun says whether the stored record a is of the run that b records:
// the same AppWrapper, outcome, rule and deciding triggers, finished in the
// same microsecond (what the API server keeps of a time).
func sameRun(a, b *wrapupv1alpha1.CompletionRecord) bool {
	return a.AppWrapper.UID == b.AppWrapper.UID && a.Outcome == b.Outcome && a.Rule == b.Rule &&
		a.FinishedAt.UnixMicro() == b.FinishedAt.UnixMicro() && decidedUIDs(a) == decidedUIDs(b)
}

func decidedUIDs(cr *wrapupv1alpha1.CompletionRecord) string {
	var s string
	for _, t := range cr.Triggers {
		if t.Decided {
			s += string(t.UID) + ","
		}
	}
	return s
}

// writeHistory makes sure that the CompletionRecord of the outcome rec,
// decided by d on in, exists: it creates it, or replaces the record of an
// earlier outcome of the same AppWrapper (a failure a retry cleared). It
// returns whether it wrote (false: the same record was there already, or
// the rule keeps none).
func (r *AppWrapperReconciler) writeHistory(ctx context.Context, cr *wrapupv1alpha1.CompletionRecord) (bool, error) {
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
	if sameRun(old, cr) || !old.FinishedAt.Before(&cr.FinishedAt) && old.AppWrapper.UID == cr.AppWrapper.UID {
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

// historyOf is the retention of the run under the rule that decides it now
// (d.Winner; the record's own rule only when none does), among in's rules:
// that rule's deletion waits on the record, even when the rule that
// recorded the outcome was renamed or deleted since. keep is false when it
// keeps no history, or is not among the rules. rule is its name: the
// record's retention, its count limit and its rule label are that rule's,
// so that the rule named in the AppWrapper's metadata (which a tenant may
// write) never makes a retention of its own.
func historyOf(in decision.Input, d decision.Decision, rec *decision.Record) (rule string, ret wrapupv1alpha1.RecordRetention, keep bool) {
	name := d.Winner
	if name == "" {
		name = rec.Rule
	}
	for _, ru := range in.Rules {
		if ru.Rule.Name == name {
			ret, keep = History(ru.Rule)
			return name, ret, keep
		}
	}
	return name, ret, false
}

// pastLimit says whether cr would be among the records its rule's count
// limit removes at once in its namespace (limitPerNamespace newer records
// of the rule are there, in the cache): a record written again after a
// restart, which the history reconciler removed before, is not created
// only to be deleted again.
func (r *AppWrapperReconciler) pastLimit(ctx context.Context, cr *wrapupv1alpha1.CompletionRecord) bool {
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

// ensureHistory writes the CompletionRecord of rec unless this process
// wrote it already. decided says that rec is the record this process just
// wrote; any other is written only when this process counted it, or what
// the decision observed bears it out (decision.BorneOut): a record is the
// AppWrapper's metadata, and a tenant's forged one gets no
// CompletionRecord. ok says whether a deletion may go ahead: the record is
// written, or its deadline has passed (then with a Warning and a metric:
// the GPUs come back whatever the record does).
//
// confirm, when not nil, is called before the write: in and d were decided
// on the caches, and the record may have been cleared or replaced since; it
// decides on what the API server says, and the write goes ahead only on
// that decision, for the same record.
func (r *AppWrapperReconciler) ensureHistory(ctx context.Context, in decision.Input, d decision.Decision, rec *decision.Record, decided bool, mem *awMemory,
	confirm func() (decision.Input, decision.Decision, error)) (ok bool) {
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
	rule, ret, keep := historyOf(in, d, rec)
	if !keep {
		// Not remembered: a decision on fresher rules may keep history.
		return true
	}
	// Its retention has passed (it was written, and has expired, or the
	// run finished long ago): nothing to keep. Remembered only on rules as
	// the API server has them: a stale cache may hold a shorter retention.
	expired := func() bool {
		return !in.Now.Before(rec.FinishedAt.Add(time.Duration(ret.TTLSecondsAfterFinished) * time.Second))
	}
	if confirm == nil && expired() {
		return done()
	}
	cr := completionRecord(in, d, rec, rule, ret)
	cached := &wrapupv1alpha1.CompletionRecord{}
	if err := r.Cache.Get(ctx, client.ObjectKeyFromObject(cr), cached); err == nil && sameRun(cached, cr) {
		return done()
	}
	var err error
	unconfirmed := false
	if confirm != nil {
		var fin decision.Input
		var fd decision.Decision
		if fin, fd, err = confirm(); err == nil {
			if fin.AppWrapper == nil || fd.Write != nil || fd.Clear || fd.Outcome == "" || !fd.Recorded.Same(rec) {
				// Cleared or replaced since the caches saw it: the next
				// decision, on caches that caught up, says what to write.
				return false
			}
			// The write, its retention and its deadline are the fresh
			// decision's, on the rules as the API server has them.
			in, d, due = fin, fd, fd.DueAt
			if rule, ret, keep = historyOf(in, d, rec); !keep {
				return true
			}
			if expired() {
				return done()
			}
			cr = completionRecord(in, d, rec, rule, ret)
		} else {
			err = fmt.Errorf("reading the AppWrapper, its rules and its trigger before writing it: %w", err)
			unconfirmed = true
		}
	}
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
		deadline := rec.FinishedAt.Add(HistoryWriteDeadline)
		if due.After(rec.FinishedAt) {
			deadline = due.Add(HistoryWriteDeadline)
		}
		late := !in.Now.Before(deadline)
		msg := fmt.Sprintf("the run's CompletionRecord could not be written: %v", err)
		switch {
		case late && unconfirmed:
			msg += "; wrapup decides again on a fresh read, by its deadline, before any deletion"
		case late && !due.IsZero():
			msg += fmt.Sprintf("; deleting the AppWrapper anyway, %s after its deletion was due", HistoryWriteDeadline)
		case late:
			msg += "; the outcome stays recorded on the AppWrapper, and wrapup tries again after a restart"
		default:
			msg += "; wrapup tries again, and deletes nothing until it is written or its deadline has passed"
		}
		r.Recorder.Eventf(aw, nil, "Warning", wrapupv1alpha1.ReasonRecordNotWritten, "WriteRecord", "%s", decision.Truncate(msg, decision.MaxMessage))
		switch {
		case late && unconfirmed:
			// Late by the cached deadline only: not remembered, so that
			// the decision on a fresh read, which any deletion makes
			// first, weighs the record by its own deadline.
			return true
		case late:
			return done()
		}
		return false
	}
	return done()
}
