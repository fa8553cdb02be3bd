package util

import (
	"strconv"
	"strings"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// RecordWrapper builds the CompletionRecord wrapup writes of a run: its
// memory of what it decided (gc/decision's CompletionRecordOf writes it,
// RecordOf reads it back).
type RecordWrapper struct {
	wrapupv1alpha1.CompletionRecord
}

// MakeRecord is the record of aw's run: outcome o, decided by rule at at,
// with rule's action for o in force (DeleteAll unless the rule says
// otherwise), due at + its TTL when it deletes. Name its deciding triggers
// with Trigger.
func MakeRecord(aw *awv1beta2.AppWrapper, rule *wrapupv1alpha1.CompletionRule, o wrapupv1alpha1.Outcome, at time.Time) *RecordWrapper {
	at = at.UTC().Truncate(time.Microsecond)
	w := &RecordWrapper{wrapupv1alpha1.CompletionRecord{
		ObjectMeta: metav1.ObjectMeta{Namespace: aw.Namespace, Name: wrapupv1alpha1.RecordName(aw.Name, aw.UID),
			Labels: map[string]string{wrapupv1alpha1.OutcomeLabel: string(o)}},
		AppWrapper: wrapupv1alpha1.RecordedAppWrapper{Name: aw.Name, UID: aw.UID},
		Rule:       rule.Name,
		RuleUID:    rule.UID,
		Policy:     wrapupv1alpha1.TriggerPolicyOne,
		Outcome:    o,
		FinishedAt: metav1.NewMicroTime(at),
		Retention:  wrapupv1alpha1.RecordRetention{TTLSecondsAfterFinished: wrapupv1alpha1.DefaultHistoryTTLSeconds, LimitPerNamespace: wrapupv1alpha1.DefaultHistoryLimit},
	}}
	if p := rule.Spec.Trigger.Policy; p != "" {
		w.CompletionRecord.Policy = p
	}
	a := rule.Spec.OnSuccess
	if o == wrapupv1alpha1.OutcomeFailed {
		a = rule.Spec.OnFailure
	}
	if a.Action == "" {
		a.Action = wrapupv1alpha1.ActionDeleteAll
	}
	var due *time.Time
	if a.Action == wrapupv1alpha1.ActionDeleteAll && !rule.Spec.DryRun {
		due = ptr.To(at.Add(time.Duration(ptr.Deref(a.TTLSecondsAfterFinished, 0)) * time.Second))
	}
	return w.Stamp(rule.Name, rule.UID, a, rule.Spec.DryRun, due)
}

// Trigger names a trigger whose state decided the outcome: its component
// index and the UID of its object ("" when the AppWrapper's phase decided
// without one).
func (w *RecordWrapper) Trigger(index int, uid types.UID) *RecordWrapper {
	w.Triggers = append(w.Triggers, wrapupv1alpha1.RecordedTrigger{ComponentIndex: int32(index), UID: uid, Decided: true})
	return w
}

// Policy sets the trigger policy that decided.
func (w *RecordWrapper) Policy(p wrapupv1alpha1.TriggerPolicy) *RecordWrapper {
	w.CompletionRecord.Policy = p
	return w
}

// Message sets the record's message.
func (w *RecordWrapper) Message(m string) *RecordWrapper {
	w.CompletionRecord.Message = m
	return w
}

// Stamp sets the action in force for the run: rule's (name, UID), a,
// dryRun, and when it deletes the AppWrapper (nil: never).
func (w *RecordWrapper) Stamp(rule string, uid types.UID, a wrapupv1alpha1.ActionSpec, dryRun bool, due *time.Time) *RecordWrapper {
	w.Action = wrapupv1alpha1.RecordedAction{Rule: rule, RuleUID: uid, Action: a.Action, TTLSecondsAfterFinished: a.TTLSecondsAfterFinished, DryRun: dryRun}
	if due != nil {
		// The TTL counts from due less the TTL; deleteAfter says due,
		// rounded up to the second, as wrapup writes it.
		since := due.UTC().Add(-time.Duration(ptr.Deref(a.TTLSecondsAfterFinished, 0)) * time.Second)
		w.Action.Since = ptr.To(metav1.NewMicroTime(since))
		d := due.UTC().Truncate(time.Second)
		if d.Before(*due) {
			d = d.Add(time.Second)
		}
		w.Action.DeleteAfter = ptr.To(metav1.NewTime(d))
	}
	return w
}

// Cleared says the outcome no longer holds, since at.
func (w *RecordWrapper) Cleared(at time.Time) *RecordWrapper {
	w.CompletionRecord.Cleared = &wrapupv1alpha1.RecordCleared{At: metav1.NewMicroTime(at)}
	return w
}

// ResourceVersion sets the record's resourceVersion, as a stored one has.
func (w *RecordWrapper) ResourceVersion(rv string) *RecordWrapper {
	w.CompletionRecord.ResourceVersion = rv
	return w
}

// Obj returns the record.
func (w *RecordWrapper) Obj() *wrapupv1alpha1.CompletionRecord { return &w.CompletionRecord }

// The record an earlier version of wrapup kept on an AppWrapper's
// metadata: the label wrapup.dev/outcome and annotations beside it. wrapup
// no longer reads it (its tenant can write it; the run's CompletionRecord
// is the memory): these builders write it for the tests of tenant writes
// and of an upgrade.
const (
	legacyTriggerUID    = "wrapup.dev/trigger-uid"
	legacyTriggerRef    = "wrapup.dev/trigger-ref"
	legacyTriggers      = "wrapup.dev/triggers"
	legacyAppWrapperUID = "wrapup.dev/appwrapper-uid"
)

// finishedAtLayout is how the finish time was written: to the
// nanosecond, always with its fraction.
const finishedAtLayout = "2006-01-02T15:04:05.000000000Z07:00"

// RecordedCandidate is, in a legacy record of several candidates, one
// whose state decided the outcome: its component index and the UID of its
// live object.
type RecordedCandidate struct {
	Index int
	UID   types.UID
}

// Recorded writes the legacy record of outcome o, finished at at, for the
// trigger of UID triggerUID.
func (w *AppWrapperWrapper) Recorded(o wrapupv1alpha1.Outcome, at time.Time, triggerUID types.UID) *AppWrapperWrapper {
	w.Label(wrapupv1alpha1.OutcomeLabel, string(o))
	w.Annotation(wrapupv1alpha1.FinishedAtAnnotation, at.UTC().Format(finishedAtLayout))
	for _, k := range []string{wrapupv1alpha1.RuleAnnotation, wrapupv1alpha1.MessageAnnotation} {
		if _, ok := w.Annotations[k]; !ok {
			w.Annotation(k, "")
		}
	}
	return w.recordedAnnotation(legacyTriggerUID, string(triggerUID))
}

// RecordedBy names, in the legacy record, the rule and the trigger
// component, as group/Kind/name.
func (w *AppWrapperWrapper) RecordedBy(rule, triggerRef string) *AppWrapperWrapper {
	w.Annotation(wrapupv1alpha1.RuleAnnotation, rule)
	return w.recordedAnnotation(legacyTriggerRef, triggerRef)
}

// RecordedMessage sets the legacy record's message.
func (w *AppWrapperWrapper) RecordedMessage(message string) *AppWrapperWrapper {
	return w.Annotation(wrapupv1alpha1.MessageAnnotation, message)
}

// RecordedOn names, in the legacy record, the UID of the AppWrapper.
func (w *AppWrapperWrapper) RecordedOn(awUID types.UID) *AppWrapperWrapper {
	return w.recordedAnnotation(legacyAppWrapperUID, string(awUID))
}

// RecordedCandidates names, in the legacy record of a rule of policy All
// or Any, the candidates that decided it, in order.
func (w *AppWrapperWrapper) RecordedCandidates(policy wrapupv1alpha1.TriggerPolicy, cs ...RecordedCandidate) *AppWrapperWrapper {
	v := ""
	if len(cs) > 0 {
		parts := make([]string, len(cs))
		for i, c := range cs {
			parts[i] = strconv.Itoa(c.Index) + "=" + string(c.UID)
		}
		v = string(policy) + ":" + strings.Join(parts, ",")
	}
	return w.recordedAnnotation(legacyTriggers, v)
}

// LegacyRecordKeys are the annotations of the legacy record besides the
// mirror's (rule, finished-at, message).
var LegacyRecordKeys = []string{legacyTriggerUID, legacyTriggerRef, legacyTriggers, legacyAppWrapperUID}

// recordedAnnotation sets k to v, or, for an empty value, leaves k out.
func (w *AppWrapperWrapper) recordedAnnotation(k, v string) *AppWrapperWrapper {
	if v == "" {
		delete(w.Annotations, k)
		return w
	}
	return w.Annotation(k, v)
}
