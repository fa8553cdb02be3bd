package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Action is what wrapup does once the trigger of an AppWrapper has finished.
// +kubebuilder:validation:Enum=DeleteAll;UpdateStatus
type Action string

const (
	// ActionDeleteAll records the outcome, waits ttlSecondsAfterFinished, then
	// deletes the AppWrapper with Background propagation: the AppWrapper
	// controller tears its components down and Kueue releases the quota only
	// once they are gone.
	ActionDeleteAll Action = "DeleteAll"
	// ActionUpdateStatus records the outcome only: the components keep
	// running and the Kueue quota stays held.
	ActionUpdateStatus Action = "UpdateStatus"
)

// TriggerPolicy says how the candidates of a rule's trigger decide for
// their AppWrapper.
// +kubebuilder:validation:Enum=One;All;Any
type TriggerPolicy string

const (
	// TriggerPolicyOne: exactly one component is the trigger; several
	// candidates are ambiguous, and nothing happens until the rule names
	// one (trigger.name) or one is annotated.
	TriggerPolicyOne TriggerPolicy = "One"
	// TriggerPolicyAll: the AppWrapper succeeded once every candidate has
	// succeeded, and failed as soon as one candidate's failure is final.
	TriggerPolicyAll TriggerPolicy = "All"
	// TriggerPolicyAny: the AppWrapper succeeded as soon as one candidate
	// has succeeded, and failed once every candidate's failure is final.
	TriggerPolicyAny TriggerPolicy = "Any"
)

// MaxTriggers bounds the candidates of one AppWrapper under a rule whose
// policy is All or Any: an AppWrapper with more is not decided on.
const MaxTriggers = 64

// TriggerSpec names the component of an AppWrapper whose completion finishes
// the whole AppWrapper.
// +kubebuilder:validation:XValidation:rule="!has(self.name) || has(self.kind)",message="trigger.name needs trigger.kind"
// +kubebuilder:validation:XValidation:rule="!has(self.apiGroup) || size(self.apiGroup) == 0 || has(self.kind)",message="trigger.apiGroup needs trigger.kind"
type TriggerSpec struct {
	// apiGroup is the API group of the trigger component's kind; empty for
	// the core group (Pods). Example: "batch", "jobset.x-k8s.io", "kubeflow.org".
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	APIGroup string `json:"apiGroup,omitempty"`

	// kind is the kind of the trigger component. Example: "Job", "JobSet",
	// "PyTorchJob". Without a kind, the trigger is the one component of the
	// AppWrapper annotated wrapup.dev/trigger: "true".
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Z][A-Za-z0-9]*$`
	Kind string `json:"kind,omitempty"`

	// name is the name of the trigger component, for AppWrappers that wrap
	// several objects of the trigger's kind. Example: "benchmark-job".
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name,omitempty"`

	// policy says how the candidates decide: the components that match
	// apiGroup, kind and name, or, without a kind, the components annotated
	// wrapup.dev/trigger: "true". One (the default): exactly one candidate
	// is the trigger, and several are ambiguous. All: the AppWrapper
	// succeeded once every candidate succeeded, and failed as soon as one
	// candidate's failure is final. Any: it succeeded as soon as one
	// candidate succeeded, and failed once every candidate's failure is
	// final. The expressions are evaluated on each candidate; an AppWrapper
	// with more than 64 candidates is not decided on.
	// +optional
	// +kubebuilder:default=One
	Policy TriggerPolicy `json:"policy,omitempty"`
}

// Variable is a named CEL expression that the success, failure and message
// expressions can use as variables.<name>. Variables are evaluated lazily, at
// most once per evaluation, as in a ValidatingAdmissionPolicy.
type Variable struct {
	// name of the variable, a CEL identifier. Example: "completed".
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-zA-Z_][a-zA-Z0-9_]*$`
	Name string `json:"name"`

	// expression is the CEL expression of the variable, over object (the
	// trigger), appWrapper and earlier variables.
	// Example: "object.status.?succeeded.orValue(0)".
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Expression string `json:"expression"`
}

// ActionSpec says what wrapup does with a finished AppWrapper, and when.
type ActionSpec struct {
	// action is DeleteAll (delete the AppWrapper and with it every component,
	// after ttlSecondsAfterFinished) or UpdateStatus (record the outcome only).
	// +optional
	// +kubebuilder:default=DeleteAll
	Action Action `json:"action,omitempty"`

	// ttlSecondsAfterFinished is how long after the trigger finished the
	// AppWrapper is deleted, so that logs and results can be collected first.
	// 0 deletes at once. Used by DeleteAll only. Example: 300.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2592000
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
}

// CompletionRuleSpec says which AppWrappers a rule applies to, which of their
// components is the trigger, what "finished" means and what happens then.
// +kubebuilder:validation:XValidation:rule="!has(self.trigger) || !has(self.trigger.kind) || (has(self.success) && size(self.success) > 0) || ((has(self.trigger.apiGroup) ? self.trigger.apiGroup + '/' : '/') + self.trigger.kind) in ['batch/Job', 'jobset.x-k8s.io/JobSet', 'kubeflow.org/PyTorchJob', 'kubeflow.org/TFJob', 'kubeflow.org/XGBoostJob', 'kubeflow.org/JAXJob', 'kubeflow.org/PaddleJob', 'kubeflow.org/MPIJob', 'trainer.kubeflow.org/TrainJob', 'ray.io/RayJob', '/Pod', 'argoproj.io/Workflow', 'batch.volcano.sh/Job', 'sparkoperator.k8s.io/SparkApplication', 'tekton.dev/PipelineRun', 'tekton.dev/TaskRun']",message="a trigger kind with no built-in expression needs spec.success"
type CompletionRuleSpec struct {
	// appWrapperSelector selects the AppWrappers this rule applies to, by
	// their labels. Empty or absent selects every AppWrapper.
	// Example: {matchLabels: {llm-d.ai/role: benchmark}}.
	// +optional
	AppWrapperSelector *metav1.LabelSelector `json:"appWrapperSelector,omitempty"`

	// namespaceSelector selects the namespaces this rule applies in, by their
	// labels. Empty or absent selects every namespace.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// priority decides between rules that match the same AppWrapper: the
	// highest wins, ties go to the rule whose name sorts first. Example: 10.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=-1000000
	// +kubebuilder:validation:Maximum=1000000
	Priority int32 `json:"priority,omitempty"`

	// trigger names the component whose completion finishes the AppWrapper.
	// Absent or without a kind: the component annotated
	// wrapup.dev/trigger: "true" in the AppWrapper's spec.components.
	// +optional
	Trigger TriggerSpec `json:"trigger,omitempty"`

	// success is a CEL expression over object (the live trigger), appWrapper
	// and variables that is true once the trigger succeeded. Empty: the
	// built-in expression for the trigger's kind.
	// Example: "object.status.?succeeded.orValue(0) >= 1".
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Success string `json:"success,omitempty"`

	// failure is a CEL expression that is true once the trigger failed.
	// Empty: the built-in expression for the trigger's kind, or never for a
	// kind with none. Success wins when both are true.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Failure string `json:"failure,omitempty"`

	// message is an optional CEL expression of type string, recorded with the
	// outcome in the wrapup.dev/message annotation and the Event.
	// Example: "'benchmark finished after ' + string(object.status.?succeeded.orValue(0)) + ' pods'".
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Message string `json:"message,omitempty"`

	// variables are named CEL expressions that success, failure and message
	// can use as variables.<name>; each may use the ones before it.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Variables []Variable `json:"variables,omitempty"`

	// onSuccess is what happens once the trigger succeeded. Default:
	// DeleteAll at once.
	// +optional
	// +kubebuilder:default={}
	OnSuccess ActionSpec `json:"onSuccess,omitempty"`

	// onFailure is what happens once the trigger failed and the AppWrapper
	// controller will not retry it. Default: DeleteAll at once.
	// +optional
	// +kubebuilder:default={}
	OnFailure ActionSpec `json:"onFailure,omitempty"`

	// dryRun records outcomes and emits "would delete" Events, and never
	// deletes anything: for trying a new rule on a live cluster.
	// +optional
	// +kubebuilder:default=false
	DryRun bool `json:"dryRun,omitempty"`

	// history says how long the CompletionRecords of the runs this rule
	// finishes are kept in their namespaces, after the AppWrappers are gone.
	// Default: 7 days, at most 100 per namespace.
	// +optional
	History HistorySpec `json:"history,omitempty"`
}

// CompletionRuleStatus is what wrapup observed of a rule.
type CompletionRuleStatus struct {
	// observedGeneration is the rule generation that the conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready is True when every expression compiled and the
	// trigger kind is served; False with reason InvalidExpression or
	// TriggerKindNotFound and a message that says what is wrong.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// matchedAppWrappers is how many AppWrappers this rule currently decides
	// for (it matches them and wins over every other matching rule).
	// +optional
	// +kubebuilder:default=0
	MatchedAppWrappers int32 `json:"matchedAppWrappers,omitempty"`

	// succeeded counts AppWrappers finished by this rule with a succeeded trigger.
	// +optional
	// +kubebuilder:default=0
	Succeeded int64 `json:"succeeded,omitempty"`

	// failed counts AppWrappers finished by this rule with a failed trigger.
	// +optional
	// +kubebuilder:default=0
	Failed int64 `json:"failed,omitempty"`

	// typeChecking holds the results of checking the rule's expressions
	// against the trigger kind's schema, as the API server publishes it.
	// A warning is likely a typo (object.status.succeded) that makes an
	// expression fail at run time, or an expression whose worst-case cost,
	// for a trigger as large as the schema allows, exceeds the API server's
	// limit for a validation rule; the rule still runs.
	// +optional
	TypeChecking *TypeChecking `json:"typeChecking,omitempty"`
}

// TypeChecking holds the warnings of checking a rule's expressions against
// the trigger kind's schema.
type TypeChecking struct {
	// schema names the kind and version the expressions were checked
	// against. Example: "batch/v1, Kind=Job".
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Schema string `json:"schema,omitempty"`

	// expressionWarnings lists one entry per expression with a warning.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	ExpressionWarnings []ExpressionWarning `json:"expressionWarnings,omitempty"`
}

// ExpressionWarning is a type-checking warning for one expression.
type ExpressionWarning struct {
	// fieldRef is the path of the expression. Example: "spec.success".
	// +required
	// +kubebuilder:validation:MaxLength=256
	FieldRef string `json:"fieldRef"`

	// warning says what does not type-check and where.
	// +required
	// +kubebuilder:validation:MaxLength=4096
	Warning string `json:"warning"`
}

// CompletionRule tells wrapup when the AppWrappers it selects are finished
// (their trigger component succeeded or failed, by a CEL expression) and what
// to do then (delete them, or record the outcome only).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=crule;crules,categories=wrapup
// +kubebuilder:printcolumn:name="Priority",type=integer,JSONPath=`.spec.priority`
// +kubebuilder:printcolumn:name="Trigger",type=string,JSONPath=`.spec.trigger.kind`
// +kubebuilder:printcolumn:name="Group",type=string,JSONPath=`.spec.trigger.apiGroup`,description="The trigger kind's API group (empty: the core group), which tells batch's Job from batch.volcano.sh's"
// +kubebuilder:printcolumn:name="On-Success",type=string,JSONPath=`.spec.onSuccess.action`
// +kubebuilder:printcolumn:name="On-Failure",type=string,JSONPath=`.spec.onFailure.action`,priority=1
// +kubebuilder:printcolumn:name="DryRun",type=boolean,JSONPath=`.spec.dryRun`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Matched",type=integer,JSONPath=`.status.matchedAppWrappers`
// +kubebuilder:printcolumn:name="Succeeded",type=integer,JSONPath=`.status.succeeded`
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.failed`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type CompletionRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is what the rule selects, evaluates and does.
	// +required
	Spec CompletionRuleSpec `json:"spec"`

	// status is what wrapup observed of the rule.
	// +optional
	Status CompletionRuleStatus `json:"status,omitempty"`
}

// CompletionRuleList is a list of CompletionRules.
// +kubebuilder:object:root=true
type CompletionRuleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CompletionRule `json:"items"`
}

func init() {
	SchemeBuilder.Register(&CompletionRule{}, &CompletionRuleList{})
}
