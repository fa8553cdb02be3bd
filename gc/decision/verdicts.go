package decision

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// VerdictRow says what a decision of a verdict may ask for: the writes,
// the requeue and the Events. A decision that asks for more is a defect of
// Decide (CheckVerdict; the simulations check every decision).
type VerdictRow struct {
	// It may write a new outcome, clear the record, ask to decide again
	// after a while (not only on a change), change the action in force
	// for a recorded run, and emit the Events of Reasons.
	Write, Clear, Requeue, Stamp bool
	Reasons                      []string
}

// diagnostics are the Warnings of what was read of a trigger, which any
// verdict that reads one may carry.
var diagnostics = []string{wrapupv1alpha1.ReasonEvaluationError, wrapupv1alpha1.ReasonTriggerNotOwned, wrapupv1alpha1.ReasonTriggerAnnotationMisplaced}

// recording are the Events of an outcome recorded now.
var recording = []string{wrapupv1alpha1.ReasonTriggerSucceeded, wrapupv1alpha1.ReasonTriggerFailed}

// VerdictTable is, for each verdict, what its decisions may ask for.
var VerdictTable = map[Verdict]VerdictRow{
	VerdictGone:                {},
	VerdictBeingDeleted:        {},
	VerdictIgnored:             {},
	VerdictNoRule:              {Reasons: []string{wrapupv1alpha1.ReasonTriggerAnnotationMisplaced}},
	VerdictBlocked:             {Reasons: []string{wrapupv1alpha1.ReasonBlockedByRule, wrapupv1alpha1.ReasonTriggerAnnotationMisplaced}},
	VerdictNoTrigger:           {Reasons: slices.Concat(diagnostics, []string{wrapupv1alpha1.ReasonNoTrigger, wrapupv1alpha1.ReasonAmbiguousTrigger, wrapupv1alpha1.ReasonTooManyTriggers})},
	VerdictTriggerNotWatchable: {Requeue: true, Reasons: []string{wrapupv1alpha1.ReasonTriggerKindNotWatched, wrapupv1alpha1.ReasonTriggerAnnotationMisplaced}},
	VerdictWorkerUnreachable:   {Requeue: true, Reasons: []string{wrapupv1alpha1.ReasonWorkerUnreachable, wrapupv1alpha1.ReasonTriggerAnnotationMisplaced}},
	VerdictWaitingForTrigger:   {Requeue: true, Reasons: diagnostics},
	VerdictWaitingForRetries:   {Requeue: true, Reasons: diagnostics},
	VerdictClearOutcome:        {Clear: true, Requeue: true, Reasons: slices.Concat(diagnostics, []string{wrapupv1alpha1.ReasonOutcomeCleared})},
	VerdictRecordOnly:          {Write: true, Stamp: true, Reasons: slices.Concat(diagnostics, recording, []string{wrapupv1alpha1.ReasonMultiKueueWorker})},
	VerdictDryRun:              {Write: true, Requeue: true, Stamp: true, Reasons: slices.Concat(diagnostics, recording, []string{wrapupv1alpha1.ReasonWouldDelete})},
	VerdictDeleteAfterTTL:      {Write: true, Requeue: true, Stamp: true, Reasons: slices.Concat(diagnostics, recording)},
	VerdictDelete:              {Write: true, Stamp: true, Reasons: slices.Concat(diagnostics, recording, []string{wrapupv1alpha1.ReasonDeleted})},
}

// CheckVerdict says how d asks for more than its verdict allows; nil when
// it does not.
func CheckVerdict(d Decision) error {
	row, ok := VerdictTable[d.Verdict]
	switch {
	case !ok:
		return fmt.Errorf("verdict %q is not in the verdict table", d.Verdict)
	case d.Write != nil && !row.Write:
		return fmt.Errorf("verdict %s writes a record", d.Verdict)
	case d.Clear && !row.Clear:
		return fmt.Errorf("verdict %s clears the record", d.Verdict)
	case d.Requeue > 0 && !row.Requeue:
		return fmt.Errorf("verdict %s asks to decide again in %s", d.Verdict, d.Requeue)
	case d.Stamp != nil && !row.Stamp:
		return fmt.Errorf("verdict %s changes the action in force", d.Verdict)
	case d.Store != nil && d.Write == nil && !d.Clear && d.Stamp == nil:
		return fmt.Errorf("verdict %s writes a CompletionRecord for nothing it decided", d.Verdict)
	}
	for _, e := range d.Events {
		if !specOf(e) {
			return fmt.Errorf("verdict %s emits the %s Event %s (action %s, when %d), which is of no EventSpec", d.Verdict, e.Type, e.Reason, e.Action, e.When)
		}
		if !slices.Contains(row.Reasons, e.Reason) {
			return fmt.Errorf("verdict %s emits the Event %s: %s", d.Verdict, e.Reason, e.Message)
		}
		if slices.Contains(recording, e.Reason) && d.Write == nil {
			return fmt.Errorf("verdict %s emits %s, an outcome recorded now, with no record to write", d.Verdict, e.Reason)
		}
		if e.Type == corev1.EventTypeNormal && slices.Contains(diagnostics, e.Reason) {
			return fmt.Errorf("verdict %s emits the Warning %s as Normal", d.Verdict, e.Reason)
		}
	}
	return nil
}
