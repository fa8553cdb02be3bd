package v1alpha1

import (
	"fmt"
	"hash/fnv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// HistorySpec says how long wrapup keeps the CompletionRecords of the runs
// a rule finished.
type HistorySpec struct {
	// disabled writes no CompletionRecords for this rule's runs.
	// +optional
	Disabled bool `json:"disabled,omitempty"`

	// ttlSecondsAfterFinished is how long a CompletionRecord is kept after
	// its run finished; 0 writes none. Default: 604800 (7 days, the
	// AppWrapper controller's ceiling for keeping a succeeded AppWrapper).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=31536000
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`

	// limitPerNamespace is how many CompletionRecords of this rule's runs
	// each namespace keeps at most: past it, the oldest go first.
	// Default: 100.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	LimitPerNamespace *int32 `json:"limitPerNamespace,omitempty"`
}

// History defaults.
const (
	DefaultHistoryTTLSeconds = 7 * 24 * 3600
	DefaultHistoryLimit      = 100
)

// Bounds of a CompletionRecord.
const (
	// MaxRecordedLabels is how many of the AppWrapper's labels a record keeps.
	MaxRecordedLabels = 32
	// MaxRecordedTriggers is how many triggers a record describes (their
	// phase and conditions); it lists every trigger that decided besides,
	// with its component index and UID (at most MaxTriggers in all).
	MaxRecordedTriggers = 16
	// MaxRecordedConditions is how many conditions of a trigger it keeps.
	MaxRecordedConditions = 8
)

// RecordedAppWrapper is the AppWrapper a CompletionRecord is of.
type RecordedAppWrapper struct {
	// name of the AppWrapper.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// uid of the AppWrapper.
	UID types.UID `json:"uid"`
	// labels are the AppWrapper's labels (at most 32), to find runs by
	// their own labels (an llm-d run id, say).
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	Labels map[string]string `json:"labels,omitempty"`
	// retries is the AppWrapper controller's status.retries when the
	// outcome was recorded: a new attempt since (a reset) clears a
	// recorded failure, whichever component the rule takes.
	// +optional
	Retries int32 `json:"retries,omitempty"`
	// deployedAt is when the AppWrapper controller last deployed the
	// components before the outcome was recorded (its ResourcesDeployed
	// condition's lastTransitionTime): a deployment since (a reset, or a
	// re-admission after Kueue preempted it) is a new attempt, whichever
	// component the rule takes.
	// +optional
	DeployedAt *metav1.Time `json:"deployedAt,omitempty"`
	// queueName is the Kueue LocalQueue the AppWrapper came through
	// (its kueue.x-k8s.io/queue-name label), if any.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	QueueName string `json:"queueName,omitempty"`
}

// RecordedAction is what wrapup does with the finished AppWrapper: the
// stamp of the rule whose action is in force for the run. A change wrapup
// sees after it recorded the run (another rule taking it over, the action
// becoming DeleteAll, the TTL shortened, dryRun turned off) never makes
// its deletion due sooner than when wrapup saw the change plus the TTL
// then in force; a change that makes it later takes effect at once.
type RecordedAction struct {
	// rule is the CompletionRule whose action this is; the rule that
	// decided the outcome until another takes the run over.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Rule string `json:"rule,omitempty"`
	// ruleUID is that rule's UID.
	// +optional
	RuleUID types.UID `json:"ruleUID,omitempty"`
	// action is DeleteAll or UpdateStatus.
	Action Action `json:"action"`
	// ttlSecondsAfterFinished is the delay of a DeleteAll.
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
	// dryRun is true when the rule was in dry-run mode: nothing was deleted.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`
	// since is when the TTL of a DeleteAll counts from: the run's finish,
	// or when wrapup saw a change that would have made the deletion
	// sooner; absent when nothing is deleted (UpdateStatus, dryRun).
	// +optional
	Since *metav1.MicroTime `json:"since,omitempty"`
	// deleteAfter is when a DeleteAll deletes the AppWrapper at the
	// earliest (since plus the TTL, rounded up to the second), for people.
	// +optional
	DeleteAfter *metav1.Time `json:"deleteAfter,omitempty"`
}

// RecordCleared says that a recorded outcome no longer holds: its trigger
// runs again, or the AppWrapper controller made a new attempt after a
// failure. The record keeps the outcome that was, as history, until
// wrapup records the next one in its place.
type RecordCleared struct {
	// at is when wrapup cleared the outcome.
	At metav1.MicroTime `json:"at"`
	// message says why.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// RecordedCondition is one condition of a trigger, as wrapup evaluated it.
type RecordedCondition struct {
	// +kubebuilder:validation:MaxLength=316
	Type string `json:"type"`
	// +kubebuilder:validation:MaxLength=16
	Status string `json:"status"`
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// RecordedTrigger is a trigger as wrapup evaluated it.
type RecordedTrigger struct {
	// componentIndex is the trigger's index in the AppWrapper's
	// spec.components: with its UID, what the trigger is.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ComponentIndex int32 `json:"componentIndex"`
	// +kubebuilder:validation:MaxLength=316
	APIVersion string `json:"apiVersion"`
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// +optional
	UID types.UID `json:"uid,omitempty"`
	// state is Running, Succeeded, Failed, Error or Absent.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	State string `json:"state,omitempty"`
	// decided is true for the triggers whose states decided the outcome.
	// +optional
	Decided bool `json:"decided,omitempty"`
	// phase is the trigger's status.phase, if it has one.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Phase string `json:"phase,omitempty"`
	// conditions are the trigger's last status.conditions (at most 8).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	Conditions []RecordedCondition `json:"conditions,omitempty"`
}

// RecordRetention is how long a record is kept, as its rule said when it
// was written.
type RecordRetention struct {
	// ttlSecondsAfterFinished: the record is kept this long after the run
	// finished and after its AppWrapper is gone, never while the
	// AppWrapper exists; 0 (history off): it goes with its AppWrapper (an
	// ownerReference).
	TTLSecondsAfterFinished int32 `json:"ttlSecondsAfterFinished"`
	// limitPerNamespace: past this many records of the rule in the
	// namespace, the oldest go first.
	LimitPerNamespace int32 `json:"limitPerNamespace"`
}

// CompletionRecord is the record of one AppWrapper run, and wrapup's
// memory of it: wrapup creates it in the AppWrapper's namespace when it
// records the outcome (before any deletion), decides on it and on nothing
// its tenant can write, and only wrapup writes it. It is kept while the
// AppWrapper exists and, by its retention, after the AppWrapper is gone,
// so that its users can see how their run ended.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=crec;crecs,categories=wrapup
// +kubebuilder:printcolumn:name="AppWrapper",type=string,JSONPath=`.appWrapper.name`
// +kubebuilder:printcolumn:name="Outcome",type=string,JSONPath=`.outcome`
// +kubebuilder:printcolumn:name="Rule",type=string,JSONPath=`.rule`
// +kubebuilder:printcolumn:name="Action",type=string,JSONPath=`.action.action`,priority=1
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.message`,priority=1
// +kubebuilder:printcolumn:name="Finished",type=date,JSONPath=`.finishedAt`
// +kubebuilder:printcolumn:name="Cleared",type=date,JSONPath=`.cleared.at`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type CompletionRecord struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// appWrapper is the AppWrapper the run was.
	AppWrapper RecordedAppWrapper `json:"appWrapper"`
	// rule is the CompletionRule that decided.
	// +kubebuilder:validation:MaxLength=253
	Rule string `json:"rule"`
	// ruleUID is that rule's UID.
	// +optional
	RuleUID types.UID `json:"ruleUID,omitempty"`
	// policy is the rule's trigger policy (One, All or Any) that decided.
	// +optional
	Policy TriggerPolicy `json:"policy,omitempty"`
	// outcome is Succeeded or Failed.
	// +kubebuilder:validation:Enum=Succeeded;Failed
	Outcome Outcome `json:"outcome"`
	// message is the rule's message for the outcome (at most 1024 bytes).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// finishedAt is when wrapup saw the trigger finished, to the
	// microsecond (runs that finish within a second keep their order).
	FinishedAt metav1.MicroTime `json:"finishedAt"`
	// action is what wrapup did, or does, with the AppWrapper.
	Action RecordedAction `json:"action"`
	// triggers are the triggers as wrapup evaluated them: every one that
	// decided, and others up to 16 in all; the first 16 with their status.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Triggers []RecordedTrigger `json:"triggers,omitempty"`
	// retention says how long the record is kept.
	Retention RecordRetention `json:"retention"`
	// cleared, when set, says that the outcome no longer holds (a new
	// attempt): the record is history until the next outcome.
	// +optional
	Cleared *RecordCleared `json:"cleared,omitempty"`
}

// CompletionRecordList is a list of CompletionRecords.
// +kubebuilder:object:root=true
type CompletionRecordList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CompletionRecord `json:"items"`
}

func init() {
	SchemeBuilder.Register(&CompletionRecord{}, &CompletionRecordList{})
}

// RecordName is the name of the CompletionRecord of the run of the
// AppWrapper name with uid: the name and a hash of the UID, so that a
// retry, a restart or a second replica writes the same one, and an
// AppWrapper created again under the same name gets another.
func RecordName(name string, uid types.UID) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(uid))
	suffix := fmt.Sprintf("-%08x", h.Sum32())
	if max := validation.DNS1123SubdomainMaxLength - len(suffix); len(name) > max {
		name = name[:max]
	}
	return name + suffix
}
