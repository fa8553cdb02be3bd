package util

import (
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// The record wrapup keeps of an outcome on an AppWrapper's metadata: the
// label wrapupv1alpha1.OutcomeLabel and the annotations beside it, written
// here as wrapup writes them and its decision reads them back
// (gc/decision's Record.Apply and ReadRecord; a test there keeps the two
// in step).

// finishedAtLayout is how wrapup writes the finish time: to the
// nanosecond, always with its fraction.
const finishedAtLayout = "2006-01-02T15:04:05.000000000Z07:00"

// RecordedCandidate is, in a record of several candidates, one whose
// state decided the outcome: its component index and the UID of its live
// object ("" when the AppWrapper's phase decided without one).
type RecordedCandidate struct {
	Index int
	UID   types.UID
}

// Recorded writes the record of outcome o, finished at at, for the trigger
// of UID triggerUID ("" when the AppWrapper's phase decided it with no live
// trigger). The rule and the message are empty until RecordedBy and
// RecordedMessage name them.
func (w *AppWrapperWrapper) Recorded(o wrapupv1alpha1.Outcome, at time.Time, triggerUID types.UID) *AppWrapperWrapper {
	w.Label(wrapupv1alpha1.OutcomeLabel, string(o))
	w.Annotation(wrapupv1alpha1.FinishedAtAnnotation, at.UTC().Format(finishedAtLayout))
	for _, k := range []string{wrapupv1alpha1.RuleAnnotation, wrapupv1alpha1.MessageAnnotation} {
		if _, ok := w.Annotations[k]; !ok {
			w.Annotation(k, "")
		}
	}
	return w.recordedAnnotation(wrapupv1alpha1.TriggerUIDAnnotation, string(triggerUID))
}

// RecordedBy names, in the record, the rule that recorded it and the
// trigger component it was recorded for, as group/Kind/name
// ("batch/Job/bench", "/Pod/p"; "" for a record of an older wrapup, which
// named none).
func (w *AppWrapperWrapper) RecordedBy(rule, triggerRef string) *AppWrapperWrapper {
	w.Annotation(wrapupv1alpha1.RuleAnnotation, rule)
	return w.recordedAnnotation(wrapupv1alpha1.TriggerRefAnnotation, triggerRef)
}

// RecordedMessage sets the record's message (the rule's, for the outcome).
func (w *AppWrapperWrapper) RecordedMessage(message string) *AppWrapperWrapper {
	return w.Annotation(wrapupv1alpha1.MessageAnnotation, message)
}

// RecordedOn names, in the record, the UID of the AppWrapper it was
// recorded on ("" for a record of an older wrapup, which named none).
func (w *AppWrapperWrapper) RecordedOn(awUID types.UID) *AppWrapperWrapper {
	return w.recordedAnnotation(wrapupv1alpha1.AppWrapperUIDAnnotation, string(awUID))
}

// RecordedCandidates names, in the record of a rule of trigger policy
// policy (All or Any) over several candidates, the candidates that decided
// it, in order.
func (w *AppWrapperWrapper) RecordedCandidates(policy wrapupv1alpha1.TriggerPolicy, cs ...RecordedCandidate) *AppWrapperWrapper {
	v := ""
	if len(cs) > 0 {
		parts := make([]string, len(cs))
		for i, c := range cs {
			parts[i] = strconv.Itoa(c.Index) + "=" + string(c.UID)
		}
		v = string(policy) + ":" + strings.Join(parts, ",")
	}
	return w.recordedAnnotation(wrapupv1alpha1.TriggersAnnotation, v)
}

// recordedAnnotation sets k to v, or, as wrapup does for an empty value,
// leaves k out.
func (w *AppWrapperWrapper) recordedAnnotation(k, v string) *AppWrapperWrapper {
	if v == "" {
		delete(w.Annotations, k)
		return w
	}
	return w.Annotation(k, v)
}
