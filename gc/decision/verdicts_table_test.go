package decision

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// TestVerdictTable: every verdict has a row, and CheckVerdict refuses a
// decision that asks for more than its verdict allows.
func TestVerdictTable(t *testing.T) {
	for _, v := range Verdicts() {
		if _, ok := VerdictTable[v]; !ok {
			t.Errorf("verdict %s has no row", v)
		}
	}
	// event is an Event of the first spec of typ and reason.
	event := func(typ, reason string) Event {
		for _, s := range EventSpecs {
			if s.Type == typ && s.Reason == reason {
				return s.Event("x", "y", "z", "")
			}
		}
		return Event{Type: typ, Reason: reason}
	}
	for _, tc := range []struct {
		name string
		d    Decision
		want string // "" for allowed
	}{
		{"a deletion, recorded now", Decision{Verdict: VerdictDelete, Steps: Steps{Write: &Record{}, Events: []Event{event(corev1.EventTypeNormal, wrapupv1alpha1.ReasonTriggerSucceeded), event(corev1.EventTypeNormal, wrapupv1alpha1.ReasonDeleted)}}}, ""},
		{"waiting, with a failed evaluation", Decision{Verdict: VerdictWaitingForTrigger, Steps: Steps{Requeue: 1, Events: []Event{event(corev1.EventTypeWarning, wrapupv1alpha1.ReasonEvaluationError)}}}, ""},
		{"a record written while waiting", Decision{Verdict: VerdictWaitingForTrigger, Steps: Steps{Write: &Record{}}}, "writes a record"},
		{"a record cleared by a deletion", Decision{Verdict: VerdictDelete, Steps: Steps{Clear: true}}, "clears the record"},
		{"Deleted before the TTL", Decision{Verdict: VerdictDeleteAfterTTL, Steps: Steps{Events: []Event{event(corev1.EventTypeNormal, wrapupv1alpha1.ReasonDeleted)}}}, "emits the Event Deleted"},
		{"an outcome announced and not recorded", Decision{Verdict: VerdictDelete, Steps: Steps{Events: []Event{event(corev1.EventTypeNormal, wrapupv1alpha1.ReasonTriggerSucceeded)}}}, "no record to write"},
		{"a blocked AppWrapper that requeues", Decision{Verdict: VerdictBlocked, Steps: Steps{Requeue: 1}}, "asks to decide again"},
		{"an ignored AppWrapper with a Warning", Decision{Verdict: VerdictIgnored, Steps: Steps{Events: []Event{event(corev1.EventTypeWarning, wrapupv1alpha1.ReasonTriggerAnnotationMisplaced)}}}, "emits the Event"},
		{"a CompletionRecord written while waiting", Decision{Verdict: VerdictWaitingForRetries, Steps: Steps{Store: &wrapupv1alpha1.CompletionRecord{}}}, "writes a CompletionRecord for nothing"},
		{"a CompletionRecord written for nothing decided, before a deletion", Decision{Verdict: VerdictDelete, Steps: Steps{Store: &wrapupv1alpha1.CompletionRecord{}}}, "writes a CompletionRecord for nothing"},
		{"the action in force changed while waiting", Decision{Verdict: VerdictWaitingForTrigger, Steps: Steps{Stamp: &Stamp{}, Store: &wrapupv1alpha1.CompletionRecord{}}}, "changes the action in force"},
		{"the action in force changed on a clear", Decision{Verdict: VerdictClearOutcome, Steps: Steps{Clear: true, Stamp: &Stamp{}, Store: &wrapupv1alpha1.CompletionRecord{}}}, "changes the action in force"},
		{"a deletion after the TTL, restamped", Decision{Verdict: VerdictDeleteAfterTTL, Steps: Steps{Requeue: 1, Stamp: &Stamp{}, Store: &wrapupv1alpha1.CompletionRecord{}}}, ""},
		{"a clear, stored", Decision{Verdict: VerdictClearOutcome, Steps: Steps{Clear: true, Store: &wrapupv1alpha1.CompletionRecord{}}}, ""},
		{"an Event of no spec", Decision{Verdict: VerdictDelete, Steps: Steps{Write: &Record{}, Events: []Event{{Type: corev1.EventTypeNormal, Reason: wrapupv1alpha1.ReasonDeleted, Action: "Remove", When: EventAfterDelete}}}}, "of no EventSpec"},
		{"a Deleted Event said before the deletion", Decision{Verdict: VerdictDelete, Steps: Steps{Write: &Record{}, Events: []Event{{Type: corev1.EventTypeNormal, Reason: wrapupv1alpha1.ReasonDeleted, Action: "Delete", When: EventAfterWrite}}}}, "of no EventSpec"},
		{"a verdict nobody knows", Decision{Verdict: "Maybe"}, "not in the verdict table"},
	} {
		err := CheckVerdict(tc.d)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
