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

// The Events of the controller's writes, not of a decision.
var (
	// WarningRecordNotWritten: the error.
	WarningRecordNotWritten = warning(wrapupv1alpha1.ReasonRecordNotWritten, "WriteRecord",
		"the run's CompletionRecord could not be written: %v; wrapup tries again, and records and deletes nothing until it is written")
)

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
