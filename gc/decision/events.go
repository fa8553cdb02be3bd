package decision

import (
	"fmt"
	"hash/fnv"
	"slices"

	corev1 "k8s.io/api/core/v1"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// The Events wrapup emits on AppWrappers: each reason with its type, its
// action and the message said with it, in one place.

// EventSpec is one kind of Event: a reason and the message said with it.
type EventSpec struct {
	Type   string
	Reason string
	Action string
	// Format is the message: a fmt format of the arguments Event takes,
	// as the spec's comment names them.
	Format string
	When   EventWhen
}

// Event is the Event of s, its message Format of args (at most MaxMessage
// bytes). A Warning's action carries a digest of its message: the
// events.k8s.io recorder folds Events of the same reason and action into
// one series, the first one's note kept (client-go tools/events, getKey),
// so a Warning whose message changed is an Event of its own.
func (s EventSpec) Event(args ...any) Event {
	e := Event{Type: s.Type, Reason: s.Reason, Action: s.Action, Message: Truncate(fmt.Sprintf(s.Format, args...), MaxMessage), When: s.When}
	if s.Type == corev1.EventTypeWarning {
		h := fnv.New32a()
		_, _ = h.Write([]byte(e.Message))
		e.Action = fmt.Sprintf("%s-%08x", s.Action, h.Sum32())
	}
	return e
}

func normal(reason, action, format string, when EventWhen) EventSpec {
	return EventSpec{Type: corev1.EventTypeNormal, Reason: reason, Action: action, Format: format, When: when}
}

func warning(reason, action, format string) EventSpec {
	return EventSpec{Type: corev1.EventTypeWarning, Reason: reason, Action: action, Format: format, When: EventNow}
}

// The Events of a decision.
var (
	// EventSucceeded and EventFailed: an outcome recorded; the rule, the
	// outcome, what follows, and ": " and the trigger's message when it
	// has one.
	EventSucceeded = normal(wrapupv1alpha1.ReasonTriggerSucceeded, "RecordOutcome", "rule %s: trigger %s; %s%s", EventAfterWrite)
	EventFailed    = normal(wrapupv1alpha1.ReasonTriggerFailed, "RecordOutcome", "rule %s: trigger %s; %s%s", EventAfterWrite)
	// EventMultiKueueWorker: the rule.
	EventMultiKueueWorker = normal(wrapupv1alpha1.ReasonMultiKueueWorker, "RecordOutcome",
		"rule %s: this AppWrapper is MultiKueue's copy on a worker cluster: wrapup records its outcome here and deletes nothing "+
			"(deleting it would make MultiKueue dispatch the run again); the manager cluster's wrapup finishes the AppWrapper", EventAfterWrite)
	// EventWouldDelete: the rule.
	EventWouldDelete = normal(wrapupv1alpha1.ReasonWouldDelete, "Delete", "rule %s (dryRun): would delete the AppWrapper", EventAfterWrite)
	// EventOutcomeCleared: why the recorded outcome no longer holds.
	EventOutcomeCleared = normal(wrapupv1alpha1.ReasonOutcomeCleared, "ClearOutcome", "%s: the record is cleared", EventAfterWrite)
	// EventDeleted: the rule, the outcome.
	EventDeleted = normal(wrapupv1alpha1.ReasonDeleted, "Delete", "rule %s: trigger %s; AppWrapper deleted with its components", EventAfterDelete)
	// EventDeletedStartedAgain: the rule, the outcome.
	EventDeletedStartedAgain = normal(wrapupv1alpha1.ReasonDeleted, "Delete", "rule %s: trigger %s, and the run started again; AppWrapper deleted with its components", EventAfterDelete)

	// WarningMisplacedAnnotation: no argument.
	WarningMisplacedAnnotation = warning(wrapupv1alpha1.ReasonTriggerAnnotationMisplaced, "FindTrigger",
		wrapupv1alpha1.TriggerAnnotation+" is on the AppWrapper's metadata, where it names no component, and is not read: put it on the trigger component "+
			"(spec.components[i].annotations) or on that component's template (spec.components[i].template.metadata.annotations)")
	// WarningBlockedByRule: why (the decision's reason).
	WarningBlockedByRule = warning(wrapupv1alpha1.ReasonBlockedByRule, "SelectRule", "%s")
	// WarningNoTrigger, WarningAmbiguousTrigger, WarningTooManyTriggers:
	// what FindTriggers found (NoTrigger.Message).
	WarningNoTrigger        = warning(wrapupv1alpha1.ReasonNoTrigger, "FindTrigger", "%s")
	WarningAmbiguousTrigger = warning(wrapupv1alpha1.ReasonAmbiguousTrigger, "FindTrigger", "%s")
	WarningTooManyTriggers  = warning(wrapupv1alpha1.ReasonTooManyTriggers, "FindTrigger", "%s")
	// WarningWorkerUnreachable: why (the decision's reason).
	WarningWorkerUnreachable = warning(wrapupv1alpha1.ReasonWorkerUnreachable, "ReadWorker", "%s")
	// WarningTriggerKindNotWatched: why (the decision's reason).
	WarningTriggerKindNotWatched = warning(wrapupv1alpha1.ReasonTriggerKindNotWatched, "WatchTrigger", "%s")
	// WarningTriggerNotOwned: the object and whose it is.
	WarningTriggerNotOwned = warning(wrapupv1alpha1.ReasonTriggerNotOwned, "ReadTrigger", "%s")
	// WarningEvaluationError: the rule, the trigger, the error.
	WarningEvaluationError = warning(wrapupv1alpha1.ReasonEvaluationError, "Evaluate", "rule %s on %s: %s (taken as not finished)")
)

// WarningRecordNotWritten is an Event of the controller's write, not of a
// decision: the error.
var WarningRecordNotWritten = warning(wrapupv1alpha1.ReasonRecordNotWritten, "WriteRecord",
	"the run's CompletionRecord could not be written: %v; wrapup tries again, and records and deletes nothing until it is written")

// EventSpecs are every kind of Event wrapup emits on AppWrappers.
var EventSpecs = []EventSpec{
	EventSucceeded, EventFailed, EventMultiKueueWorker, EventWouldDelete, EventOutcomeCleared, EventDeleted, EventDeletedStartedAgain,
	WarningMisplacedAnnotation, WarningBlockedByRule, WarningNoTrigger, WarningAmbiguousTrigger, WarningTooManyTriggers,
	WarningWorkerUnreachable, WarningTriggerKindNotWatched, WarningTriggerNotOwned, WarningEvaluationError,
	WarningRecordNotWritten,
}

// specOf says whether e is an Event of a spec in EventSpecs: its type,
// reason, action (a Warning's, less its digest) and when.
func specOf(e Event) bool {
	return slices.ContainsFunc(EventSpecs, func(s EventSpec) bool {
		action := e.Action
		if s.Type == corev1.EventTypeWarning && len(action) > 9 {
			action = action[:len(action)-9]
		}
		return s.Type == e.Type && s.Reason == e.Reason && s.Action == action && s.When == e.When
	})
}

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
