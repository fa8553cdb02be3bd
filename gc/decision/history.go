package decision

import (
	"fmt"
	"hash/fnv"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// What a run's CompletionRecord is, under which rule's retention, and when
// a deletion stops waiting for it: pure, as the rest of the decision; the
// controller writes what these say.

// HistoryWriteDeadline is how long after a run finished wrapup keeps
// trying to write its CompletionRecord before it deletes the AppWrapper
// anyway: a record must never hold GPUs hostage.
const HistoryWriteDeadline = 2 * time.Minute

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

// CompletionRecordOf returns the CompletionRecord of the outcome rec of
// in.AppWrapper, decided by d on the observations in. rule names the rule
// whose retention ret it has (HistoryOf): the rule that
// decides, never a name read from the AppWrapper's metadata alone.
func CompletionRecordOf(in Input, d Decision, rec *Record, rule string, ret wrapupv1alpha1.RecordRetention) *wrapupv1alpha1.CompletionRecord {
	aw := in.AppWrapper
	cr := &wrapupv1alpha1.CompletionRecord{
		ObjectMeta: metav1.ObjectMeta{Namespace: aw.Namespace, Name: RecordName(aw.Name, string(aw.UID)), Labels: map[string]string{}},
		AppWrapper: wrapupv1alpha1.RecordedAppWrapper{Name: aw.Name, UID: aw.UID, QueueName: aw.Labels["kueue.x-k8s.io/queue-name"]},
		Rule:       rule,
		Outcome:    rec.Outcome,
		Message:    Truncate(rec.Message, MaxMessage),
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
	add := func(info TriggerInfo, state string) {
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
		t.Phase = Truncate(p, 64)
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
		str := func(k string, n int) string { s, _ := m[k].(string); return Truncate(s, n) }
		t.Conditions = append(t.Conditions, wrapupv1alpha1.RecordedCondition{
			Type: str("type", 316), Status: str("status", 16), Reason: str("reason", 1024), Message: str("message", 1024)})
	}
}

// SameRun says whether the stored record a is of the run that b records:
// the same AppWrapper, outcome, rule and deciding triggers, finished in the
// same microsecond (what the API server keeps of a time).
func SameRun(a, b *wrapupv1alpha1.CompletionRecord) bool {
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

// HistoryOf is the retention of the run under the rule that decides it now
// (d.Winner; the record's own rule only when none does), among in's rules:
// that rule's deletion waits on the record, even when the rule that
// recorded the outcome was renamed or deleted since. keep is false when it
// keeps no history, or is not among the rules. rule is its name: the
// record's retention, its count limit and its rule label are that rule's,
// so that the rule named in the AppWrapper's metadata (which a tenant may
// write) never makes a retention of its own.
func HistoryOf(in Input, d Decision, rec *Record) (rule string, ret wrapupv1alpha1.RecordRetention, keep bool) {
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

// RecordExpired says whether the retention ret of the CompletionRecord of
// rec has passed at now: there is nothing left to keep.
func RecordExpired(now time.Time, rec *Record, ret wrapupv1alpha1.RecordRetention) bool {
	return !now.Before(rec.FinishedAt.Add(time.Duration(ret.TTLSecondsAfterFinished) * time.Second))
}

// RecordDeadline is when a deletion stops waiting for the CompletionRecord
// of rec that cannot be written: HistoryWriteDeadline after the run
// finished, or after the deletion was due when that is later (a long TTL
// leaves time to try again, and the deadline of a deletion due already
// does not move).
func RecordDeadline(rec *Record, due time.Time) time.Time {
	if due.After(rec.FinishedAt) {
		return due.Add(HistoryWriteDeadline)
	}
	return rec.FinishedAt.Add(HistoryWriteDeadline)
}

// HistoryInput is what the controller knows of the CompletionRecords of
// an AppWrapper's outcomes: its memory, and its cache.
type HistoryInput struct {
	// Off says the controller writes no CompletionRecords (their CRD is not
	// installed).
	Off bool
	// Written is the outcome whose CompletionRecord the controller wrote,
	// found, or stopped waiting for; nil for none.
	Written *Record
	// Counted is the outcome the controller recorded itself, or saw land
	// after a write whose answer was lost; nil for none.
	Counted *Record
	// Cached is the CompletionRecord named for the AppWrapper
	// (RecordName) in the controller's cache; nil for none.
	Cached *wrapupv1alpha1.CompletionRecord
}

// Refusal says why an outcome gets no CompletionRecord although its rule
// keeps history.
type Refusal string

const (
	// RefusedOutsideLife: the outcome recorded on the AppWrapper finished
	// outside the AppWrapper's life. It never will get one, and no
	// deletion waits on it.
	RefusedOutsideLife Refusal = "OutsideLife"
	// RefusedNotBorneOut: the outcome recorded on the AppWrapper is no
	// decision the controller knows of, and what it observes does not bear
	// it out (a tenant may have written it). A deletion waits for it as for
	// a CompletionRecord that cannot be written: a later observation may
	// bear it out.
	RefusedNotBorneOut Refusal = "NotBorneOut"
)

// HistoryStep is the CompletionRecord of an outcome, to write before any
// deletion of the AppWrapper.
type HistoryStep struct {
	// Of is the outcome it records.
	Of *Record
	// Record is the CompletionRecord to write.
	Record *wrapupv1alpha1.CompletionRecord
	// Expired says its retention has passed: there is nothing to keep.
	Expired bool
	// Deadline is when a deletion stops waiting for it (RecordDeadline).
	Deadline time.Time
	// Refused says why the outcome gets none; "" when it does.
	Refused Refusal
}

// history says which CompletionRecord of the outcome acted on is still to
// write (Steps.History), or that the cache holds it (HistoryWritten). The
// retention is the deciding rule's (HistoryOf). An outcome that is not
// the one this decision writes, and not one the controller counted, is
// refused one when it finished outside the AppWrapper's life or what was
// observed does not bear it out (BorneOut): a record is the AppWrapper's
// metadata, which a tenant may write.
func (d *Decision) history(in Input) {
	d.History, d.HistoryWritten = HistoryStepOf(in, *d)
}

// HistoryStepOf is Decide's history step of the decision d on in
// (Steps.History), and the outcome whose CompletionRecord in's cache
// shows written (Remember.HistoryWritten).
func HistoryStepOf(in Input, d Decision) (*HistoryStep, *Record) {
	h := in.History
	rec := d.Write
	if rec == nil {
		rec = d.Recorded
	}
	if h.Off || d.Clear || d.Outcome == "" || rec == nil || rec.Same(h.Written) {
		return nil, nil
	}
	rule, ret, keep := HistoryOf(in, d, rec)
	if !keep {
		return nil, nil
	}
	cr := CompletionRecordOf(in, d, rec, rule, ret)
	if h.Cached != nil && SameRun(h.Cached, cr) {
		return nil, rec
	}
	step := &HistoryStep{Of: rec, Record: cr, Expired: RecordExpired(in.Now, rec, ret), Deadline: RecordDeadline(rec, d.DueAt)}
	if d.Write == nil && !rec.Same(h.Counted) {
		switch {
		case !FinishedInLife(in, rec):
			step.Refused = RefusedOutsideLife
		case !BorneOut(in, d):
			step.Refused = RefusedNotBorneOut
		}
	}
	return step, nil
}
