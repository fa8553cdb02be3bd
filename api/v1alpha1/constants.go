package v1alpha1

// Labels and annotations that wrapup reads and writes.
const (
	// TriggerAnnotation on an AppWrapper component (spec.components[i].annotations)
	// marks it as the trigger for rules that name no trigger kind.
	TriggerAnnotation = "wrapup.dev/trigger"
	// IgnoreAnnotation set to "true" on an AppWrapper opts it out of every rule.
	IgnoreAnnotation = "wrapup.dev/ignore"

	// OutcomeLabel is set on a finished AppWrapper: Succeeded or Failed.
	OutcomeLabel = "wrapup.dev/outcome"
	// RuleAnnotation names the rule that finished the AppWrapper.
	RuleAnnotation = "wrapup.dev/rule"
	// FinishedAtAnnotation is when the trigger was seen finished (RFC 3339).
	FinishedAtAnnotation = "wrapup.dev/finished-at"
	// MessageAnnotation holds the rule's message for the outcome.
	MessageAnnotation = "wrapup.dev/message"
	// TriggerUIDAnnotation is the UID of the trigger object the outcome was
	// recorded for, so that a re-created trigger is evaluated afresh.
	TriggerUIDAnnotation = "wrapup.dev/trigger-uid"
)

// Outcome is how a trigger finished.
type Outcome string

const (
	OutcomeSucceeded Outcome = "Succeeded"
	OutcomeFailed    Outcome = "Failed"
)

// Condition types and reasons on CompletionRule status.
const (
	ConditionReady = "Ready"

	ReasonCompiled            = "Compiled"
	ReasonInvalidExpression   = "InvalidExpression"
	ReasonTriggerKindNotFound = "TriggerKindNotFound"
)
