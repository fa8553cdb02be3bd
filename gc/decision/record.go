package decision

import (
	"sort"
	"strings"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// A run's memory is its CompletionRecord, which only wrapup writes: the
// outcome, the triggers that decided it, and the action in force (the
// stamp). Nothing a decision reads of a run's past comes from the
// AppWrapper's metadata, which its tenant can write: that is a mirror for
// people (Mirror).

// Record is an outcome wrapup decided for a run, as its CompletionRecord
// keeps it (final as decideRecorded says).
type Record struct {
	Outcome    wrapupv1alpha1.Outcome
	Rule       string    // the rule that decided it
	RuleUID    types.UID // the rule's
	FinishedAt time.Time // when wrapup saw the outcome
	Message    string
	Policy     wrapupv1alpha1.TriggerPolicy
	// Triggers are those whose states decided the outcome (see combine);
	// every candidate when the AppWrapper's phase decided.
	Triggers []RecordedTrigger
	// Retries is the AppWrapper's status.retries when it was recorded, and
	// DeployedAt when its components were last deployed then (zero: not
	// known).
	Retries    int32
	DeployedAt time.Time
	Stamp      Stamp // the action in force for the run
}

// RecordedTrigger is a trigger that decided an outcome, by its component
// index (which tells apart two of one kind and generateName) and its live
// object's UID ("" when the AppWrapper's phase decided without one).
type RecordedTrigger struct {
	Index int
	UID   types.UID
}

// Stamp is the action in force for a recorded run: whose, what, and when
// it deletes the AppWrapper. It belongs to the run, not to the rule that
// wins now (StampFor).
type Stamp struct {
	Rule    string
	RuleUID types.UID
	Action  wrapupv1alpha1.ActionSpec
	DryRun  bool
	// Since is when its TTL counts from, DueAt Since plus the TTL; both
	// zero when the stamp deletes nothing.
	Since, DueAt time.Time
}

func (s Stamp) deletes() bool {
	return s.Action.Action == wrapupv1alpha1.ActionDeleteAll && !s.DryRun
}

func (s Stamp) ttl() time.Duration {
	return time.Duration(ptr.Deref(s.Action.TTLSecondsAfterFinished, 0)) * time.Second
}

// Same says whether s and o are one stamp.
func (s Stamp) Same(o Stamp) bool {
	return s.RuleUID == o.RuleUID && s.Rule == o.Rule && s.Action.Action == o.Action.Action &&
		ptr.Deref(s.Action.TTLSecondsAfterFinished, 0) == ptr.Deref(o.Action.TTLSecondsAfterFinished, 0) &&
		s.DryRun == o.DryRun && s.Since.Equal(o.Since) && s.DueAt.Equal(o.DueAt)
}

// StampFor is the stamp of the action cur (its times ignored) for the run
// rec at now. Its TTL counts from the run's finish, unless rec's stamp
// says otherwise: a change of the action in force (another rule, the
// action, the TTL, dryRun) that makes the deletion later, and not past,
// takes effect at once; any other counts the TTL from now, so that no
// change makes a deletion sooner (nor a run kept past its due time, by no
// rule applying for a while, deleted at once by the rule taking it over).
func StampFor(cur Stamp, rec *Record, now time.Time) Stamp {
	cur.Since, cur.DueAt = time.Time{}, time.Time{}
	if !cur.deletes() {
		return cur
	}
	old, oldAction := rec.Stamp, rec.Stamp
	oldAction.Since, oldAction.DueAt = time.Time{}, time.Time{}
	ttl := cur.ttl()
	natural := rec.FinishedAt.Add(ttl)
	switch {
	case oldAction.Same(cur) && !old.Since.IsZero():
		cur.Since = old.Since
	case old.Action.Action == "" || old.deletes() && !natural.Before(old.DueAt) && !natural.Before(now):
		// A new record, or a change that makes the deletion later, and not past.
		cur.Since = ceil(rec.FinishedAt, time.Microsecond).UTC()
	default:
		seen := now
		if seen.Before(rec.FinishedAt) {
			seen = rec.FinishedAt
		}
		cur.Since = ceil(seen, time.Microsecond).UTC()
	}
	cur.DueAt = cur.Since.Add(ttl)
	return cur
}

// ceil rounds t up to the unit a record keeps: a due time rounded down
// would delete early.
func ceil(t time.Time, unit time.Duration) time.Time {
	r := t.Truncate(unit)
	if r.Before(t) {
		r = r.Add(unit)
	}
	return r
}

// RecordOf is the outcome cr, named for aw, holds for aw's run; nil for
// none, another AppWrapper's (a UID that hashes alike), an earlier
// version's (no rule UID: see docs/install.md), or a cleared one.
func RecordOf(cr *wrapupv1alpha1.CompletionRecord, aw *awv1beta2.AppWrapper) *Record {
	if cr == nil || aw == nil || cr.AppWrapper.UID != aw.UID || cr.RuleUID == "" || cr.Cleared != nil {
		return nil
	}
	rec := &Record{Outcome: cr.Outcome, Rule: cr.Rule, RuleUID: cr.RuleUID, FinishedAt: cr.FinishedAt.Time, Message: cr.Message, Policy: cr.Policy,
		Retries: cr.AppWrapper.Retries,
		Stamp: Stamp{Rule: cr.Action.Rule, RuleUID: cr.Action.RuleUID, DryRun: cr.Action.DryRun,
			Action: wrapupv1alpha1.ActionSpec{Action: cr.Action.Action, TTLSecondsAfterFinished: cr.Action.TTLSecondsAfterFinished}}}
	if t := cr.AppWrapper.DeployedAt; t != nil {
		rec.DeployedAt = t.Time
	}
	if rec.Stamp.deletes() {
		rec.Stamp.Since = rec.FinishedAt
		if cr.Action.Since != nil {
			rec.Stamp.Since = cr.Action.Since.Time
		}
		rec.Stamp.DueAt = rec.Stamp.Since.Add(rec.Stamp.ttl())
	}
	for _, t := range cr.Triggers {
		if t.Decided {
			rec.Triggers = append(rec.Triggers, RecordedTrigger{Index: int(t.ComponentIndex), UID: t.UID})
		}
	}
	return rec
}

// deployedAt is when the AppWrapper controller last deployed aw's
// components (its ResourcesDeployed condition True, since); zero when it
// does not say. It sets that condition True only when it deploys them
// (appwrapper v1.2.2 internal/controller/appwrapper/appwrapper_controller.go,
// Reconcile, on Resuming: first, after a reset, and after Kueue admits it
// again), so a later time than a record's is a new attempt.
func deployedAt(aw *awv1beta2.AppWrapper) time.Time {
	c := apimeta.FindStatusCondition(aw.Status.Conditions, string(awv1beta2.ResourcesDeployed))
	if c == nil || c.Status != metav1.ConditionTrue {
		return time.Time{}
	}
	return c.LastTransitionTime.Time
}

// recorded is the trigger of component index, if rec names it.
func (rec *Record) recorded(index int) (RecordedTrigger, bool) {
	for _, t := range rec.Triggers {
		if t.Index == index {
			return t, true
		}
	}
	return RecordedTrigger{}, false
}

// MaxMessage bounds the message of a record (and of Events).
const MaxMessage = 1024

// RecordName is wrapupv1alpha1.RecordName, of a string UID.
func RecordName(name string, uid string) string {
	return wrapupv1alpha1.RecordName(name, types.UID(uid))
}

// store sets d.Store, the CompletionRecord to write for what d decided:
// a new outcome (over a cleared one), a cleared one, or a new stamp.
func (d *Decision) store(in Input) {
	aw, old := in.AppWrapper, in.Record
	if aw == nil {
		return
	}
	if old != nil && old.AppWrapper.UID != aw.UID {
		// Another AppWrapper's (a UID that hashes alike): a create fails
		// (AlreadyExists), and it is never written over.
		old = nil
	}
	switch {
	case d.Write != nil:
		d.Store = CompletionRecordOf(in, *d, d.Write)
		if old != nil {
			d.Store.ResourceVersion = old.ResourceVersion
		}
	case d.Clear && old != nil:
		d.Store = old.DeepCopy()
		d.Store.Cleared = &wrapupv1alpha1.RecordCleared{At: metav1.NewMicroTime(in.Now), Message: Truncate(d.Reason, MaxMessage)}
		delete(d.Store.Labels, wrapupv1alpha1.OutcomeLabel)
	case d.Stamp != nil && old != nil:
		d.Store = old.DeepCopy()
		d.Store.Action = recordedAction(*d.Stamp)
	}
}

func recordedAction(s Stamp) wrapupv1alpha1.RecordedAction {
	a := wrapupv1alpha1.RecordedAction{Rule: s.Rule, RuleUID: s.RuleUID, Action: s.Action.Action, TTLSecondsAfterFinished: s.Action.TTLSecondsAfterFinished, DryRun: s.DryRun}
	if s.deletes() {
		a.Since = ptr.To(metav1.NewMicroTime(s.Since))
		a.DeleteAfter = ptr.To(metav1.NewTime(ceil(s.DueAt, time.Second)))
	}
	return a
}

// CompletionRecordOf returns the CompletionRecord of the outcome rec of
// in.AppWrapper, decided by d, with the deciding rule's retention: how long
// it is kept once the AppWrapper is gone, if it is (keep).
func CompletionRecordOf(in Input, d Decision, rec *Record) *wrapupv1alpha1.CompletionRecord {
	aw := in.AppWrapper
	var ret wrapupv1alpha1.RecordRetention
	keep := false
	for _, ru := range in.Rules {
		if h := ru.Rule.Spec.History; ru.Rule.UID == rec.RuleUID {
			ret = wrapupv1alpha1.RecordRetention{TTLSecondsAfterFinished: ptr.Deref(h.TTLSecondsAfterFinished, wrapupv1alpha1.DefaultHistoryTTLSeconds),
				LimitPerNamespace: ptr.Deref(h.LimitPerNamespace, wrapupv1alpha1.DefaultHistoryLimit)}
			if keep = !h.Disabled && ret.TTLSecondsAfterFinished > 0; !keep {
				ret.TTLSecondsAfterFinished = 0
			}
		}
	}
	cr := &wrapupv1alpha1.CompletionRecord{
		ObjectMeta: metav1.ObjectMeta{Namespace: aw.Namespace, Name: RecordName(aw.Name, string(aw.UID)), Labels: map[string]string{}},
		AppWrapper: wrapupv1alpha1.RecordedAppWrapper{Name: aw.Name, UID: aw.UID, Retries: rec.Retries, QueueName: aw.Labels["kueue.x-k8s.io/queue-name"]},
		Rule:       rec.Rule,
		RuleUID:    rec.RuleUID,
		Policy:     rec.Policy,
		Outcome:    rec.Outcome,
		Message:    Truncate(rec.Message, MaxMessage),
		FinishedAt: metav1.NewMicroTime(rec.FinishedAt),
		Action:     recordedAction(rec.Stamp),
		Retention:  ret,
	}
	if !rec.DeployedAt.IsZero() {
		cr.AppWrapper.DeployedAt = &metav1.Time{Time: rec.DeployedAt}
	}
	if !keep {
		// Gone with the AppWrapper.
		cr.OwnerReferences = []metav1.OwnerReference{{APIVersion: awv1beta2.GroupVersion.String(), Kind: "AppWrapper", Name: aw.Name, UID: aw.UID}}
	}
	recordLabels(cr, aw, rec)
	recordTriggers(cr, in, d, rec)
	return cr
}

// recordLabels copies onto cr, as its own and as the AppWrapper's, up to
// MaxRecordedLabels of aw's labels, never wrapup's (wrapup.dev/...), which
// its tenant can write; wrapup's own it sets from what it decided alone.
func recordLabels(cr *wrapupv1alpha1.CompletionRecord, aw *awv1beta2.AppWrapper, rec *Record) {
	keys := make([]string, 0, len(aw.Labels))
	for k := range aw.Labels {
		if !strings.HasPrefix(k, wrapupv1alpha1.GroupVersion.Group+"/") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys[:min(len(keys), wrapupv1alpha1.MaxRecordedLabels)] {
		if cr.AppWrapper.Labels == nil {
			cr.AppWrapper.Labels = map[string]string{}
		}
		cr.AppWrapper.Labels[k] = aw.Labels[k]
		cr.Labels[k] = aw.Labels[k]
	}
	if len(validation.IsValidLabelValue(aw.Name)) == 0 {
		cr.Labels[wrapupv1alpha1.RecordAppWrapperLabel] = aw.Name
	}
	if len(validation.IsValidLabelValue(rec.Rule)) == 0 {
		cr.Labels[wrapupv1alpha1.RecordRuleLabel] = rec.Rule
	}
	cr.Labels[wrapupv1alpha1.OutcomeLabel] = string(rec.Outcome)
}

// recordTriggers lists on cr the triggers of d: every one that decided
// (the record's memory), and the others up to MaxRecordedTriggers; the
// first MaxRecordedTriggers with their status.
func recordTriggers(cr *wrapupv1alpha1.CompletionRecord, in Input, d Decision, rec *Record) {
	add := func(info TriggerInfo, state string) {
		rt, decided := rec.recorded(info.Index)
		full := len(cr.Triggers) >= wrapupv1alpha1.MaxRecordedTriggers
		if full && !decided {
			return
		}
		gvk := info.GroupVersionKind()
		t := wrapupv1alpha1.RecordedTrigger{ComponentIndex: int32(info.Index), APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: info.Name, UID: info.UID, State: state}
		if t.Name == "" {
			t.Name = info.Template
		}
		if decided {
			t.Decided = true
			if t.UID != rt.UID {
				// Not the object that decided: say nothing of its state.
				t.UID, t.State = rt.UID, ""
			}
		}
		if tr := in.read(info.Ref); !full && tr.Object != nil && tr.Object.GetUID() == t.UID {
			triggerStatus(&t, tr.Object)
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

// finishedAtLayout keeps the time exactly, with its fraction.
const finishedAtLayout = "2006-01-02T15:04:05.000000000Z07:00"

// Mirror is what the AppWrapper's metadata shows of rec (nil: none) for
// people (kubectl get appwrappers -l wrapup.dev/outcome=Failed), as the
// keys of a merge patch.
func Mirror(rec *Record) (labels, annotations map[string]any) {
	if rec == nil {
		return map[string]any{wrapupv1alpha1.OutcomeLabel: nil},
			map[string]any{wrapupv1alpha1.RuleAnnotation: nil, wrapupv1alpha1.FinishedAtAnnotation: nil, wrapupv1alpha1.MessageAnnotation: nil}
	}
	return map[string]any{wrapupv1alpha1.OutcomeLabel: string(rec.Outcome)},
		map[string]any{wrapupv1alpha1.RuleAnnotation: rec.Rule, wrapupv1alpha1.FinishedAtAnnotation: rec.FinishedAt.UTC().Format(finishedAtLayout),
			wrapupv1alpha1.MessageAnnotation: Truncate(rec.Message, MaxMessage)}
}
