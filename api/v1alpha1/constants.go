package v1alpha1

// Labels and annotations that wrapup reads and writes.
const (
	// TriggerAnnotation on an AppWrapper component (spec.components[i].annotations)
	// marks it as the trigger for rules that name no trigger kind. Any
	// capitalisation of "true" opts in.
	TriggerAnnotation = "wrapup.dev/trigger"
	// IgnoreAnnotation on an AppWrapper opts it out of every rule. Any
	// capitalisation of "true" (and "yes", "1", "on") opts out: the opt-out
	// is at least as lenient as the opt-in.
	IgnoreAnnotation = "wrapup.dev/ignore"

	// OutcomeLabel on a finished AppWrapper mirrors its run's recorded
	// outcome for people: Succeeded or Failed. The label, and the
	// annotations below, are a mirror of the run's CompletionRecord,
	// which is wrapup's memory: no decision reads them (the AppWrapper's
	// tenant can write them). OutcomeLabel is on the record too.
	OutcomeLabel = "wrapup.dev/outcome"
	// RuleAnnotation names the rule that decided the outcome (mirror).
	RuleAnnotation = "wrapup.dev/rule"
	// FinishedAtAnnotation is when wrapup saw the outcome (RFC 3339, to
	// the nanosecond; mirror).
	FinishedAtAnnotation = "wrapup.dev/finished-at"
	// MessageAnnotation holds the rule's message for the outcome (mirror).
	MessageAnnotation = "wrapup.dev/message"
	// RecordAppWrapperLabel on a CompletionRecord is the name of its
	// AppWrapper (when it fits in a label value).
	RecordAppWrapperLabel = "wrapup.dev/appwrapper"
	// RecordRuleLabel on a CompletionRecord is the name of its rule (when
	// it fits in a label value).
	RecordRuleLabel = "wrapup.dev/rule"
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
	ReasonInvalidSelector     = "InvalidSelector"
	ReasonTriggerKindNotFound = "TriggerKindNotFound"
	// ReasonTriggerKindNotWatchable: wrapup may not list and watch the
	// trigger kind (RBAC), or the kind is cluster-scoped.
	ReasonTriggerKindNotWatchable = "TriggerKindNotWatchable"
)

// Condition types on CompletionRule status besides Ready.
const (
	// ConditionTriggerKindsWatchable is False on a rule that names no
	// trigger kind while some AppWrapper it decides for annotates a
	// component of a kind wrapup cannot watch (reason
	// TriggerKindNotWatchable); those AppWrappers wait, the others work.
	ConditionTriggerKindsWatchable = "TriggerKindsWatchable"
	// ConditionTriggerStatusProtected is False on a rule whose trigger
	// kind the API server serves with no status subresource (reason
	// NoStatusSubresource): whoever may update such an object, not only
	// its controller, writes its status, and so can finish the AppWrapper
	// it is the trigger of. The rule works all the same.
	ConditionTriggerStatusProtected = "TriggerStatusProtected"
	// ConditionTriggerCached is False on a rule that reads a field of its
	// trigger kind which the kind's informer, started before the rule,
	// does not keep (reason FieldsReadLive): its decisions read the
	// trigger from the API server, one request each, until wrapup
	// restarts (the informer then keeps what every rule reads). The rule
	// works all the same.
	ConditionTriggerCached = "TriggerCached"
)

// ReasonNoStatusSubresource: the trigger kind has no status subresource.
const ReasonNoStatusSubresource = "NoStatusSubresource"

// ReasonFieldsReadLive: the rule reads trigger fields its kind's informer
// does not keep.
const ReasonFieldsReadLive = "FieldsReadLive"

// Event reasons on rules.
const (
	ReasonTypeCheckWarning = "TypeCheckWarning"
)

// Event reasons on AppWrappers. Users alert on these: they are part of the API.
const (
	// ReasonTriggerSucceeded: the outcome Succeeded was recorded.
	ReasonTriggerSucceeded = "TriggerSucceeded"
	// ReasonTriggerFailed: the outcome Failed was recorded.
	ReasonTriggerFailed = "TriggerFailed"
	// ReasonDeleted: wrapup deleted the AppWrapper.
	ReasonDeleted = "Deleted"
	// ReasonWouldDelete: a dry-run rule would have deleted the AppWrapper.
	ReasonWouldDelete = "WouldDelete"
	// ReasonOutcomeCleared: a recorded outcome no longer holds (the trigger
	// runs again, or the AppWrapper controller made a new attempt after a
	// failure) and any pending deletion is cancelled.
	ReasonOutcomeCleared = "OutcomeCleared"
	// ReasonEvaluationError (Warning): an expression failed at run time; the
	// trigger counts as not finished.
	ReasonEvaluationError = "EvaluationError"
	// ReasonBlockedByRule (Warning): the highest-priority rule that matches
	// the AppWrapper is not usable (it does not compile, or its trigger
	// kind is not served or not watchable): no lower-priority rule acts in
	// its place, and nothing is recorded or deleted.
	ReasonBlockedByRule = "BlockedByRule"
	// ReasonNoTrigger (Warning): the winning rule names a trigger kind the
	// AppWrapper has no component of.
	ReasonNoTrigger = "NoTrigger"
	// ReasonAmbiguousTrigger (Warning): several components match the rule's trigger.
	ReasonAmbiguousTrigger = "AmbiguousTrigger"
	// ReasonTriggerAnnotationMisplaced (Warning): wrapup.dev/trigger is on
	// the AppWrapper's own metadata, where it names no component.
	ReasonTriggerAnnotationMisplaced = "TriggerAnnotationMisplaced"
	// ReasonTooManyTriggers (Warning): more components than MaxTriggers match
	// a rule whose trigger policy is All or Any.
	ReasonTooManyTriggers = "TooManyTriggers"
	// ReasonRecordNotWritten (Warning): wrapup could not write the run's
	// CompletionRecord, its memory of the run: it tries again, and acts on
	// nothing until it is written.
	ReasonRecordNotWritten = "RecordNotWritten"
	// ReasonTriggerNotOwned (Warning): the live object of the trigger's name
	// is not controlled by the AppWrapper: it is not taken as the trigger.
	ReasonTriggerNotOwned = "TriggerNotOwned"
	// ReasonTriggerKindNotWatched (Warning): the annotated trigger's kind
	// cannot be watched (not served, forbidden, cluster-scoped).
	ReasonTriggerKindNotWatched = "TriggerKindNotWatched"
	// ReasonMultiKueueWorker: the AppWrapper is MultiKueue's copy on a
	// worker cluster; wrapup records its outcome there and deletes
	// nothing, since deleting it makes MultiKueue dispatch the run again.
	// The manager cluster's wrapup finishes the AppWrapper.
	ReasonMultiKueueWorker = "MultiKueueWorker"
	// ReasonWorkerUnreachable: the AppWrapper is dispatched by MultiKueue
	// to a worker cluster that wrapup cannot read (no kubeconfig Secret, or
	// the worker's API server does not answer): nothing is recorded or
	// deleted until it can.
	ReasonWorkerUnreachable = "WorkerUnreachable"
)
