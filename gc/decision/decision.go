// Package decision is what wrapup decides for one AppWrapper, as one pure
// function of what was observed: Decide. The controller gathers the
// observations from its caches, and again from the API server before it
// deletes anything; kubectl wrapup explain gathers them with whatever
// reader it has. All three call Decide, so that they never disagree.
// Nothing here reads a clock, calls the API server or emits an Event.
package decision

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
)

// Input is what was observed of one AppWrapper and its world at one instant.
type Input struct {
	Now        time.Time
	AppWrapper *awv1beta2.AppWrapper // nil when it does not exist
	// AppWrapperVariable is the expressions' appWrapper variable, the whole
	// AppWrapper unstructured; nil unless Needs.ReadAppWrapper.
	AppWrapperVariable map[string]any
	Namespace          *corev1.Namespace // the AppWrapper's; needed only when there are rules
	Rules              []Rule            // every CompletionRule, with their compile results
	// Kinds are the states of the trigger kinds the rules name and of the
	// annotated components'; a kind not in it counts as Pending.
	Kinds    map[schema.GroupKind]Kind
	Triggers []Trigger // the live triggers that Plan named, as read
	// FailureSeen and HoldStart are the controller's memory of when it
	// first saw the trigger failed, and the AppWrapper controller hold
	// this failed AppWrapper for debugging (the hold runs from the first:
	// see failedHoldStart); zero when it did not, or restarted since.
	FailureSeen    FailureSeen
	HoldStart      time.Time
	WorkerFailures int      // the decisions in a row before this one that found the worker unreadable (WorkerBackoff)
	Warned         []string // the Warnings said after the previous decision (Remember.Warned), not said again
	// FailureGracePeriod: how long a Running AppWrapper with a failed
	// trigger, not reported Unhealthy, is given to retry; 0: the default.
	FailureGracePeriod time.Duration
	Worker             *Worker // the worker cluster MultiKueue dispatched the AppWrapper to, where Triggers were read; or nil
	// Record is the run's CompletionRecord (RecordName), as stored; nil
	// for none. It is the run's memory: what wrapup decided before.
	Record *wrapupv1alpha1.CompletionRecord
}

// TriggerState is how the live trigger was observed.
type TriggerState string

const (
	TriggerUnread      TriggerState = ""            // not read (no candidate, or the gatherer did not know it)
	TriggerNotDeployed TriggerState = "NotDeployed" // not read: the AppWrapper is Suspended, or not started
	TriggerPending     TriggerState = "Pending"     // the cache of its kind has not listed yet
	TriggerAbsent      TriggerState = "Absent"      // no such object
	TriggerPresent     TriggerState = "Present"     // Object holds it
)

// Trigger is a read of the live trigger.
type Trigger struct {
	Ref    Ref
	State  TriggerState
	Object *unstructured.Unstructured // when Present, with the fields the rule reads
	// Note says why an object that exists counts as Absent (to the
	// controller's label-filtered watches, say); "" for none.
	Note string
}

// FailureSeen is when a trigger, by UID, was first seen failed.
type FailureSeen struct {
	TriggerUID types.UID
	At         time.Time
}

// Verdict says in one word what wrapup does next with an AppWrapper
// (docs/actions.md, Verdicts, says more of each).
type Verdict string

const (
	VerdictGone                Verdict = "Gone"                // the AppWrapper does not exist
	VerdictBeingDeleted        Verdict = "BeingDeleted"        // deletionTimestamp set, or phase Terminating: left alone
	VerdictIgnored             Verdict = "Ignored"             // annotated wrapup.dev/ignore
	VerdictNoRule              Verdict = "NoRule"              // no CompletionRule applies
	VerdictBlocked             Verdict = "Blocked"             // the winning rule is not usable, and no lower one acts in its place
	VerdictNoTrigger           Verdict = "NoTrigger"           // no single trigger, or the live object is not the AppWrapper's
	VerdictTriggerNotWatchable Verdict = "TriggerNotWatchable" // the annotated trigger's kind is not served, forbidden, or cluster-scoped
	VerdictWorkerUnreachable   Verdict = "WorkerUnreachable"   // MultiKueue's worker cluster cannot be read: nothing is done until it can
	VerdictWaitingForTrigger   Verdict = "WaitingForTrigger"   // not finished, not created yet, or its evaluation failed
	VerdictWaitingForRetries   Verdict = "WaitingForRetries"   // a failure the AppWrapper controller may still retry, or a recorded one held during a new attempt
	VerdictClearOutcome        Verdict = "ClearOutcome"        // the recorded outcome no longer holds: cleared, any pending deletion cancelled
	VerdictRecordOnly          Verdict = "RecordOnly"          // recorded; the action is UpdateStatus
	VerdictDryRun              Verdict = "DryRun"              // recorded; the rule is in dry-run mode
	VerdictDeleteAfterTTL      Verdict = "DeleteAfterTTL"      // deleted once the TTL (and, after a failure, the AppWrapper's own hold) has passed: After says when
	VerdictDelete              Verdict = "Delete"              // deleted now, if a decision on a fresh read from the API server says so too
)

// Verdicts lists every verdict, in the order of the constants.
func Verdicts() []Verdict {
	return []Verdict{VerdictGone, VerdictBeingDeleted, VerdictIgnored, VerdictNoRule, VerdictBlocked,
		VerdictNoTrigger, VerdictTriggerNotWatchable, VerdictWorkerUnreachable, VerdictWaitingForTrigger,
		VerdictWaitingForRetries, VerdictClearOutcome, VerdictRecordOnly, VerdictDryRun, VerdictDeleteAfterTTL, VerdictDelete}
}

// Decision is what to do with one AppWrapper, and why: the verdict, the
// steps to take, what to remember, and what was observed and weighed.
type Decision struct {
	Verdict Verdict
	Reason  string // why, for people

	Steps
	Remember
	Why
}

// Steps are what the controller does on a decision, in order: write (or
// clear) the record, with its Events; then, for VerdictDelete, delete; and
// decide again after Requeue.
type Steps struct {
	Outcome wrapupv1alpha1.Outcome // the final outcome acted on; "" for none
	Write   *Record                // a new outcome to record now; nil for none
	Clear   bool                   // the recorded outcome no longer holds
	Stamp   *Stamp                 // the action in force for the run, when its record holds another
	// Store is the CompletionRecord to write first, for Write, Clear or
	// Stamp: created when its resourceVersion is "", else updated under it.
	Store *wrapupv1alpha1.CompletionRecord
	// Action and DryRun are the winning rule's for Outcome, defaults applied.
	Action wrapupv1alpha1.ActionSpec
	DryRun bool
	// After is how long until the verdict's action, when known: the TTL
	// (or hold) left for DeleteAfterTTL; the longest a failure can still
	// take to become final for WaitingForRetries. 0: now, or on a change.
	After time.Duration
	// DueAt is when the deletion is (or was) due, for DeleteAfterTTL and
	// Delete, counted from when the TTL and any hold started.
	DueAt   time.Time
	Requeue time.Duration // when to decide again if nothing changes; 0: on a change
	Events  []Event
}

// Remember is what the controller keeps of the AppWrapper after the
// decision, for the next one.
type Remember struct {
	// Assigned names the rule counted as deciding for the AppWrapper
	// (matchedAppWrappers): the winner, unless the AppWrapper is ignored or
	// being deleted, or the rule names no kind and no component is annotated.
	Assigned string
	// FailureSeen and HoldStart are Input's for the next decision; nil
	// and zero to forget.
	FailureSeen    *FailureSeen
	HoldStart      time.Time
	WorkerFailures int // Input's, this decision included
	// Warned are the Warnings this decision says now, said or not (Events
	// holds those not said before), by Event.key.
	Warned []string
	// Claims are the kinds it needs watched itself: its annotated
	// triggers', under a rule that names no kind, in component order.
	Claims []schema.GroupKind
}

// Why is what the decision observed and weighed.
type Why struct {
	Rules      []RuleStanding // every CompletionRule, in the order in which they would win
	Winner     string         // the rule that decides (it may be blocked); "" for none
	Trigger    *TriggerInfo   // the single trigger and what was read of it; nil for none
	Worker     *WorkerInfo    // where the triggers of an AppWrapper MultiKueue dispatches were read
	Evaluation *Evaluation    // the winning rule's result on the single trigger; nil for none
	Recorded   *Record        // the outcome the run's CompletionRecord holds; nil for none
	// Candidates are, when the rule (policy All or Any) has several, each
	// one and what was read and evaluated of it; Trigger is then nil.
	Candidates []Candidate
	Policy     wrapupv1alpha1.TriggerPolicy // the winning rule's, when it has several candidates
}

// Candidate is one candidate of a rule whose trigger policy is All or Any.
type Candidate struct {
	TriggerInfo
	Evaluation *Evaluation // nil when not evaluated
	// State is Running, Succeeded, Failed, Error (its evaluation failed),
	// TornDown (which is no completion: see tornDown), Absent or Unknown.
	State   string
	Decided bool // its state decided the outcome
}

// Evaluations returns every evaluation the decision made.
func (d Decision) Evaluations() []*Evaluation {
	es := []*Evaluation{d.Evaluation}
	for _, c := range d.Candidates {
		es = append(es, c.Evaluation)
	}
	return slices.DeleteFunc(es, func(e *Evaluation) bool { return e == nil })
}

// WillRecord says whether the decision writes a record.
func (d *Decision) WillRecord() bool { return d.Write != nil }

// TriggerInfo is the trigger component and what was read of it.
type TriggerInfo struct {
	Ref
	UID types.UID // the live object's, when it was read
	// Problem says why the live object is not evaluated; "" when it is (or
	// when the AppWrapper's phase or the record decided without it).
	Problem string
}

// Evaluation is the result of the winning rule's expressions.
type Evaluation struct {
	Outcome                        celpolicies.Outcome // Running, Succeeded or Failed; Running on any error
	Message                        string
	Cost                           uint64        // the CEL cost of the rule's own expressions
	Took                           time.Duration // for the controller's metrics; no decision reads it
	BuiltinSuccess, BuiltinFailure bool          // the expressions were the trigger kind's built-in ones
	// Error is the runtime error: the trigger then counts as not finished,
	// with an EvaluationError Event.
	Error               string
	FromAppWrapperPhase bool // the AppWrapper's phase decided the outcome, unevaluated
}

// EventWhen says when an Event is emitted.
type EventWhen int

const (
	EventNow         EventWhen = iota // a Warning about the state (sayOnce)
	EventAfterWrite                   // once the record write (or clear) succeeded
	EventAfterDelete                  // once the deletion was accepted
)

// Event is an Event to emit on the AppWrapper.
type Event struct {
	Type    string
	Reason  string
	Action  string
	Message string
	When    EventWhen
}

func (e Event) key() string { return e.Reason + "\x00" + e.Message }

// sayOnce keeps in d.Warned the Warnings d says now, and drops from
// d.Events those said after the previous decision (warned): a state worth
// a Warning is said once, and again when it changes or comes back.
func (d *Decision) sayOnce(warned []string) {
	d.Warned = nil
	for _, e := range d.Events {
		if e.When == EventNow {
			d.Warned = append(d.Warned, e.key())
		}
	}
	d.Events = slices.DeleteFunc(d.Events, func(e Event) bool { return e.When == EventNow && slices.Contains(warned, e.key()) })
}

// ActionFor is what rule does once a trigger finished with outcome,
// defaults applied.
func ActionFor(rule *wrapupv1alpha1.CompletionRule, outcome wrapupv1alpha1.Outcome) wrapupv1alpha1.ActionSpec {
	a := rule.Spec.OnSuccess
	if outcome == wrapupv1alpha1.OutcomeFailed {
		a = rule.Spec.OnFailure
	}
	if a.Action == "" {
		a.Action = wrapupv1alpha1.ActionDeleteAll
	}
	return a
}

// How soon a decision looks again, if nothing brings the AppWrapper back
// sooner.
const (
	PendingRetry      = 5 * time.Second // the trigger kind's cache has not listed yet
	NotWatchableRetry = 5 * time.Minute // the annotated trigger's kind cannot be watched
	// WorkerRetry and WorkerBackoffMax bound WorkerBackoff.
	WorkerRetry      = 5 * time.Second
	WorkerBackoffMax = 2 * time.Minute
	// holdStartRetry: the AppWrapper controller has not yet written when
	// a failed AppWrapper's deletion hold started.
	holdStartRetry = 10 * time.Second
)

// Needs is what a decision needs read besides the AppWrapper, its
// Namespace, the rules and their kinds.
type Needs struct {
	Rule           *Rule // the winning rule, when it can act
	Refs           []Ref // the triggers to read: those with a name, when the components exist
	ReadAppWrapper bool  // the rule reads the appWrapper variable
}

// Plan says what a decision on in needs read besides what in holds.
func Plan(in Input) Needs {
	aw := in.AppWrapper
	if aw == nil || beingDeleted(aw) || Truthy(aw.Annotations[wrapupv1alpha1.IgnoreAnnotation]) {
		return Needs{}
	}
	sel := selectRule(in.Rules, aw, namespaceLabels(in.Namespace), in.Kinds)
	if sel.winner == nil || sel.blocked != "" {
		return Needs{}
	}
	// The names the copy's controller gave its components, as Decide reads them.
	refs, nt := FindTriggers(withCopyStatus(in), sel.winner.Rule)
	if nt != nil {
		return Needs{}
	}
	n := Needs{Rule: sel.winner, ReadAppWrapper: !sel.winner.Policy.AppWrapperFields().Empty()}
	if owner, _, _ := componentsOwner(in); owner != nil && deployed(aw) {
		n.Refs = slices.DeleteFunc(refs, func(r Ref) bool { return r.Name == "" })
	}
	return n
}

// read is the read of ref among in's triggers; TriggerUnread when none.
func (in *Input) read(ref Ref) Trigger {
	for _, t := range in.Triggers {
		if t.Ref == ref {
			return t
		}
	}
	return Trigger{}
}

func beingDeleted(aw *awv1beta2.AppWrapper) bool {
	return !aw.DeletionTimestamp.IsZero() || aw.Status.Phase == awv1beta2.AppWrapperTerminating
}

// deployed says whether the AppWrapper controller may have created aw's
// components: not while it is Suspended or not yet started.
func deployed(aw *awv1beta2.AppWrapper) bool {
	return aw.Status.Phase != awv1beta2.AppWrapperSuspended && aw.Status.Phase != awv1beta2.AppWrapperEmpty
}

func namespaceLabels(ns *corev1.Namespace) map[string]string {
	if ns == nil {
		return nil
	}
	return ns.Labels
}

// liveState is what the evaluation of the live trigger says.
type liveState int

const (
	liveUnknown liveState = iota // not read yet (cache pending)
	liveAbsent                   // does not exist (or not deployed, or not ours)
	liveRunning
	liveSucceeded
	liveFailed
	liveError
	liveTornDown // whatever it says, no completion (see tornDown)
)

// stateWords name the live states, as Candidate.State does.
var stateWords = [...]string{liveUnknown: "Unknown", liveAbsent: "Absent", liveRunning: "Running", liveSucceeded: "Succeeded",
	liveFailed: "Failed", liveError: "Error", liveTornDown: "TornDown"}

// tornDown says why obj, a live trigger, is being torn down; "" when it is
// not. A trigger being torn down says nothing of how its run went:
//   - any object with a deletionTimestamp: the AppWrapper controller
//     deletes its components (Background propagation) when it suspends
//     (Kueue preempts), resets (a retry) or fails the AppWrapper
//     (appwrapper v1.2.2 internal/controller/appwrapper/resource_management.go,
//     deleteComponents), and kubectl drain and the scheduler's preemption
//     delete pods gracefully;
//   - the kubelet gives a Pod being deleted a terminal phase: Succeeded
//     when every container exited 0, whatever its restartPolicy (k8s
//     v1.37.2 pkg/kubelet/kubelet_pods.go, getPhase with podIsTerminal,
//     from SyncTerminatingPod): a harness that exits 0 on SIGTERM succeeds;
//   - a Pod with DisruptionTarget=True is being evicted, preempted or shut
//     down (the scheduler's preemption, the taint manager, the eviction
//     API, the pod GC, the kubelet's node-pressure eviction and node
//     shutdown), possibly left Failed or Succeeded without being deleted.
//
// A Job finished before its deletion began is not torn down: that is how
// its own TTL removes it, only once finished, with Foreground propagation,
// so that it is seen with a deletionTimestamp while its pods go (k8s
// v1.37.2 pkg/controller/ttlafterfinished/ttlafterfinished_controller.go,
// processJob); the Job controller never changes a finished Job again
// (pkg/controller/job/job_controller.go, syncJob returns at
// IsJobFinished). Its terminal condition must be two seconds or more
// before the deletionTimestamp: a Job deleted while it runs may still be
// finished on the way (syncJob goes on for a Job being deleted), and the
// condition's time is kube-controller-manager's clock, the
// deletionTimestamp the API server's, both kept to the second, so that a
// skew under a second never makes a finish after the deletion look before
// it. (The AppWrapper controller fails the AppWrapper of such a Job
// anyway, a component being deleted: appwrapper v1.2.2
// internal/controller/appwrapper/appwrapper_controller.go, Reconcile,
// MissingComponent.)
func tornDown(obj *unstructured.Unstructured) string {
	if ts := obj.GetDeletionTimestamp(); ts != nil {
		if finishedBefore(obj, ts.Time) {
			return ""
		}
		return "is being deleted (deletionTimestamp " + ts.UTC().Format(time.RFC3339) + ")"
	}
	if obj.GetKind() != "Pod" || obj.GroupVersionKind().Group != "" {
		return ""
	}
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == string(corev1.DisruptionTarget) && m["status"] == string(corev1.ConditionTrue) {
			reason, _ := m["reason"].(string)
			return fmt.Sprintf("is disrupted (condition DisruptionTarget=True, reason %s)", reason)
		}
	}
	return ""
}

// finishedBefore says whether obj is a batch/v1 Job whose terminal
// condition (Complete or Failed, True) is from two seconds or more before
// deleted (see tornDown).
func finishedBefore(obj *unstructured.Unstructured, deleted time.Time) bool {
	if obj.GetKind() != "Job" || obj.GroupVersionKind().Group != "batch" {
		return false
	}
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["status"] != string(corev1.ConditionTrue) || (m["type"] != "Complete" && m["type"] != "Failed") {
			continue
		}
		s, _ := m["lastTransitionTime"].(string)
		at, err := time.Parse(time.RFC3339, s)
		if err == nil && !at.Truncate(time.Second).After(deleted.Truncate(time.Second).Add(-2*time.Second)) {
			return true
		}
	}
	return false
}

// MisplacedTriggerAnnotation says why wrapup.dev/trigger on an
// AppWrapper's own metadata is not read, and where it belongs.
var MisplacedTriggerAnnotation = WarningMisplacedAnnotation.Format

// Decide decides what to do with in.AppWrapper. ctx bounds the evaluation
// of the rule's expressions only.
func Decide(ctx context.Context, in Input) Decision {
	gathered := in
	if in.FailureGracePeriod <= 0 {
		in.FailureGracePeriod = DefaultFailureGracePeriod
	}
	in.AppWrapper = withCopyStatus(in)
	d := decideOn(ctx, in)
	if aw := gathered.AppWrapper; d.HoldStart.IsZero() && aw != nil &&
		(aw.Status.Phase == awv1beta2.AppWrapperFailed || in.AppWrapper.Status.Phase == awv1beta2.AppWrapperFailed) {
		// Kept by a decision that returns before it acts (an evaluation
		// error, a rule being edited, a worker unreachable).
		d.HoldStart = in.HoldStart
	}
	if aw := in.AppWrapper; aw != nil && Truthy(aw.Annotations[wrapupv1alpha1.TriggerAnnotation]) &&
		d.Verdict != VerdictBeingDeleted && d.Verdict != VerdictIgnored {
		// It names no component there: said, never guessed.
		d.warn(WarningMisplacedAnnotation)
	}
	if MultiKueueManaged(in.AppWrapper) {
		// Its components' kinds are watched on the worker, not here.
		d.Claims = nil
	}
	d.sayOnce(in.Warned)
	d.store(gathered)
	return d
}

func decideOn(ctx context.Context, in Input) Decision {
	var d Decision
	aw := in.AppWrapper
	if aw == nil {
		d.Verdict, d.Reason = VerdictGone, "the AppWrapper does not exist"
		return d
	}
	d.Recorded = RecordOf(in.Record, aw)
	if f := in.FailureSeen; !f.At.IsZero() {
		d.FailureSeen = &f
	}
	sel := selectRule(in.Rules, aw, namespaceLabels(in.Namespace), in.Kinds)
	d.Rules = sel.standings
	if sel.winner != nil {
		d.Winner = sel.winner.Rule.Name
	}

	switch {
	case beingDeleted(aw):
		d.Verdict, d.Reason = VerdictBeingDeleted, "the AppWrapper is being deleted: wrapup leaves it to its controller"
		return d
	case Truthy(aw.Annotations[wrapupv1alpha1.IgnoreAnnotation]):
		d.Verdict, d.Reason = VerdictIgnored, fmt.Sprintf("the AppWrapper is annotated %s: \"true\": no rule applies", wrapupv1alpha1.IgnoreAnnotation)
		return d
	case sel.winner == nil:
		d.Verdict, d.Reason = VerdictNoRule, "no CompletionRule applies to the AppWrapper (selects it, and has a candidate trigger among its components)"
		return d
	}
	rule := sel.winner.Rule
	d.Assigned = rule.Name
	if sel.blocked != "" {
		d.Verdict = VerdictBlocked
		d.Reason = fmt.Sprintf("rule %s (priority %d) selects the AppWrapper and is not usable: %s; no lower-priority rule acts in its place, and nothing is recorded or deleted",
			rule.Name, rule.Spec.Priority, sel.blocked)
		d.warn(WarningBlockedByRule, d.Reason)
		return d
	}

	refs, nt := FindTriggers(aw, rule)
	if nt != nil {
		d.Verdict, d.Reason = VerdictNoTrigger, nt.Message
		if nt.Quiet {
			// The rule does not apply, and that is no news.
			d.Assigned = ""
		} else {
			i := slices.IndexFunc(EventSpecs, func(s EventSpec) bool { return s.Reason == nt.Reason })
			d.warn(EventSpecs[i], nt.Message)
		}
		return d
	}
	if MultiKueueManaged(aw) && d.workerUnreachable(in) {
		return d
	}
	if len(refs) == 1 {
		d.Trigger = &TriggerInfo{Ref: refs[0]}
	} else {
		d.Policy = Policy(rule)
	}
	if deployed(aw) && d.annotatedKindUnusable(in, refs) {
		return d
	}
	d.decide(in, rule, d.observe(ctx, in, sel.winner, refs))
	return d
}

// workerUnreachable sets d.Worker and decides, for an AppWrapper that
// MultiKueue dispatches, that it waits while its worker cluster cannot be
// read, whatever its status (of no copy known to be this one's) says; it
// says whether it did. A recorded success is final and does not wait:
// that would outlast Kueue's workerLostTimeout, after which MultiKueue
// dispatches the finished run again elsewhere.
func (d *Decision) workerUnreachable(in Input) bool {
	if in.Worker == nil {
		return false
	}
	owner, problem, unknown := componentsOwner(in)
	d.Worker = &WorkerInfo{Cluster: in.Worker.Cluster}
	if owner == nil {
		d.Worker.Problem = problem
	}
	if c := in.Worker.AppWrapper; c != nil {
		d.Worker.CopyUID, d.Worker.CopyPhase = string(c.UID), c.Status.Phase
	}
	if unknown && !(d.Recorded != nil && d.Recorded.Outcome == wrapupv1alpha1.OutcomeSucceeded) {
		d.Verdict, d.Requeue = VerdictWorkerUnreachable, WorkerBackoff(in.WorkerFailures+1)
		d.WorkerFailures = in.WorkerFailures + 1
		d.Reason = fmt.Sprintf("MultiKueue dispatched the AppWrapper to worker cluster %s, which wrapup cannot read: %s; nothing is recorded or deleted until it can",
			in.Worker.Cluster, problem)
		d.warn(WarningWorkerUnreachable, d.Reason)
		return true
	}
	return false
}

// annotatedKindUnusable claims the kinds of the annotated triggers among
// refs (d.Claims) and, when one cannot be watched, decides to wait for it.
func (d *Decision) annotatedKindUnusable(in Input, refs []Ref) bool {
	for _, ref := range refs {
		if ref.Annotated && !slices.Contains(d.Claims, ref.Kind) {
			d.Claims = append(d.Claims, ref.Kind)
		}
	}
	whose := "the annotated trigger's"
	if len(refs) > 1 {
		whose = "the annotated triggers'"
	}
	for _, gk := range d.Claims {
		why := in.Kinds[gk].problem(whose, gk)
		if why == "" {
			continue
		}
		d.Verdict, d.Requeue, d.Reason = VerdictTriggerNotWatchable, NotWatchableRetry, why
		if d.Trigger != nil {
			d.Trigger.Problem = d.Reason
		} else {
			for _, ref := range refs {
				c := Candidate{TriggerInfo: TriggerInfo{Ref: ref}, State: "Unknown"}
				if ref.Kind == gk {
					c.Problem = d.Reason
				}
				d.Candidates = append(d.Candidates, c)
			}
		}
		d.warn(WarningTriggerKindNotWatched, d.Reason)
		return true
	}
	return false
}

// observe reads and evaluates the triggers refs of rule w, with their
// Warnings, into d.Trigger and d.Evaluation or d.Candidates.
func (d *Decision) observe(ctx context.Context, in Input, w *Rule, refs []Ref) []observed {
	cs := make([]observed, len(refs))
	for i, ref := range refs {
		cs[i] = observeCandidate(ctx, in, w.Policy, ref)
		switch c := &cs[i]; {
		case c.notOwned:
			d.warn(WarningTriggerNotOwned, c.info.Problem)
		case c.state == liveError:
			d.warn(WarningEvaluationError, w.Rule.Name, c.name(), c.eval.Error)
		}
	}
	if d.Trigger != nil {
		*d.Trigger, d.Evaluation = cs[0].info, cs[0].eval
		return cs
	}
	d.Candidates = make([]Candidate, len(cs))
	for i, c := range cs {
		d.Candidates[i] = Candidate{TriggerInfo: c.info, Evaluation: c.eval, State: stateWords[c.state]}
	}
	return cs
}

// observed is what was read and evaluated of one trigger.
type observed struct {
	info     TriggerInfo
	eval     *Evaluation
	state    liveState
	notOwned bool
}

// observeCandidate evaluates the live trigger ref, when there is one.
func observeCandidate(ctx context.Context, in Input, policy *celpolicies.Policy, ref Ref) observed {
	aw := in.AppWrapper
	t := in.read(ref)
	c := observed{info: TriggerInfo{Ref: ref}}
	unread := func(state liveState, problem string) observed {
		c.state, c.info.Problem = state, problem
		return c
	}
	owner, problem, unknown := componentsOwner(in)
	switch {
	case unknown:
		return unread(liveUnknown, problem)
	case owner == nil:
		return unread(liveAbsent, problem)
	case !deployed(aw):
		return unread(liveAbsent, fmt.Sprintf("the AppWrapper is %s: its components do not exist", phaseOrNone(aw.Status.Phase)))
	case ref.Name == "":
		return unread(liveAbsent, "the AppWrapper controller has not created the trigger yet (its template uses generateName)")
	case t.State == TriggerUnread:
		return unread(liveUnknown, "the trigger was not read")
	case t.State == TriggerPending:
		return unread(liveUnknown, fmt.Sprintf("the cache of %s has not listed yet", ref.Kind))
	case t.State == TriggerAbsent || t.State == TriggerNotDeployed || t.Object == nil:
		if t.Note != "" {
			return unread(liveAbsent, t.Note)
		}
		return unread(liveAbsent, fmt.Sprintf("%s %s does not exist (not created yet, or deleted)", ref.Kind.Kind, ref.Name))
	}
	obj := t.Object
	if !OwnedBy(obj, owner) {
		c.notOwned = true
		if owner != aw {
			return unread(liveAbsent, fmt.Sprintf("%s %s on worker cluster %s is not controlled by MultiKueue's copy of this AppWrapper there: it is not taken as the trigger", ref.Kind.Kind, ref.Name, in.Worker.Cluster))
		}
		return unread(liveAbsent, fmt.Sprintf("%s %s is not controlled by this AppWrapper: it is not taken as the trigger", ref.Kind.Kind, ref.Name))
	}
	c.info.UID = obj.GetUID()
	torn := tornDown(obj)
	if torn != "" {
		torn = fmt.Sprintf("%s %s %s: a trigger being torn down is never taken as finished", ref.Kind.Kind, ref.Name, torn)
	}
	start := time.Now()
	res, err := policy.Evaluate(ctx, ref.Kind, obj.Object, in.AppWrapperVariable)
	c.eval = &Evaluation{Outcome: res.Outcome, Message: res.Message, Cost: res.Cost, Took: time.Since(start),
		BuiltinSuccess: res.BuiltinSuccess, BuiltinFailure: res.BuiltinFailure}
	if err != nil {
		c.eval.Error = err.Error()
	}
	switch {
	case torn != "":
		// Evaluated all the same, for explain.
		c.info.Problem, c.state = torn, liveTornDown
	case err != nil:
		c.state = liveError
	case res.Outcome == celpolicies.OutcomeSucceeded:
		c.state = liveSucceeded
	case res.Outcome == celpolicies.OutcomeFailed:
		c.state = liveFailed
	default:
		c.state = liveRunning
	}
	return c
}

// decide is the heart: from the triggers' live states cs, the record and
// the AppWrapper's phase, the outcome and what to do with it.
func (d *Decision) decide(in Input, rule *wrapupv1alpha1.CompletionRule, cs []observed) {
	v := d.settle(in, Policy(rule), cs)
	switch {
	case d.Recorded != nil:
		// The run's record is final for the triggers it names.
		d.decideRecorded(in, rule, cs)
	case v.outcome == "":
		d.decideUnsettled(in, rule, cs)
	default:
		if final, wait, why := d.recordFinal(in, rule, cs, v); !final {
			who := "the trigger"
			if len(cs) > 1 {
				who = joinNames(cs, v.deciders)
			}
			d.Verdict, d.After, d.Requeue = VerdictWaitingForRetries, wait, wait
			d.Reason = who + " failed and " + why
		}
	}
}

// A rule whose policy is All or Any decides over several candidates, each
// read as a single trigger is; the policy combines their states, and the
// record keeps which decided (Record.Triggers), so that what holds for a
// single trigger holds for each of them (decideRecorded).

// settled is what a policy makes of its candidates' states.
type settled struct {
	// outcome is "" while the candidates have not decided; Failed is final
	// only once the AppWrapper controller will not retry (failureFinality).
	outcome  wrapupv1alpha1.Outcome
	deciders []int // the candidates whose states decide it
}

// combine combines the candidates' states under policy: All succeeds once
// every candidate succeeded and fails as soon as one failed; Any succeeds
// as soon as one succeeded and fails once every one failed.
func combine(policy wrapupv1alpha1.TriggerPolicy, cs []observed) settled {
	var succeeded, failed []int
	for i, c := range cs {
		switch c.state {
		case liveSucceeded:
			succeeded = append(succeeded, i)
		case liveFailed:
			failed = append(failed, i)
		}
	}
	switch policy {
	case wrapupv1alpha1.TriggerPolicyAny:
		if len(succeeded) > 0 {
			return settled{outcome: wrapupv1alpha1.OutcomeSucceeded, deciders: succeeded[:1]}
		}
		if len(failed) == len(cs) {
			return settled{outcome: wrapupv1alpha1.OutcomeFailed, deciders: failed}
		}
	default: // All
		if len(failed) > 0 {
			return settled{outcome: wrapupv1alpha1.OutcomeFailed, deciders: failed[:1]}
		}
		if len(succeeded) == len(cs) {
			return settled{outcome: wrapupv1alpha1.OutcomeSucceeded, deciders: succeeded}
		}
	}
	return settled{}
}

func (c *observed) name() string {
	if c.info.Name != "" {
		return c.info.Kind.Kind + " " + c.info.Name
	}
	return c.info.Kind.Kind + " " + c.info.Template
}

// settle combines the triggers' states cs under policy, and keeps what
// the controller remembers of a failure, by the triggers that failed.
func (d *Decision) settle(in Input, policy wrapupv1alpha1.TriggerPolicy, cs []observed) settled {
	v := combine(policy, cs)
	failed := v.outcome == wrapupv1alpha1.OutcomeFailed
	if failed && policy == wrapupv1alpha1.TriggerPolicyAll {
		// The failed candidate whose failure the controller remembers
		// decides: its grace runs from when it was first seen.
		for i := range cs {
			if cs[i].state == liveFailed && cs[i].info.UID != "" && cs[i].info.UID == in.FailureSeen.TriggerUID {
				v.deciders = []int{i}
			}
		}
	}
	switch {
	case failed:
		// A failure is remembered by the UIDs of the triggers that failed, sorted.
		uids := make([]string, len(v.deciders))
		for k, i := range v.deciders {
			uids[k] = string(cs[i].info.UID)
		}
		sort.Strings(uids)
		key, first := types.UID(strings.Join(uids, ",")), in.Now
		if in.FailureSeen.TriggerUID == key && !in.FailureSeen.At.IsZero() && in.FailureSeen.At.Before(first) {
			first = in.FailureSeen.At
		}
		d.FailureSeen = &FailureSeen{TriggerUID: key, At: first}
	case !slices.ContainsFunc(cs, func(c observed) bool { return c.state == liveUnknown || c.state == liveError }):
		d.FailureSeen = nil
	}
	return v
}

// decideUnsettled decides for a run with no record whose triggers cs have
// not settled.
func (d *Decision) decideUnsettled(in Input, rule *wrapupv1alpha1.CompletionRule, cs []observed) {
	aw, one := in.AppWrapper, d.Trigger != nil
	var unknown, errs, notOwned, unfinished int
	var running, all []int
	for i, c := range cs {
		switch {
		case c.notOwned:
			notOwned++
		case c.state == liveError:
			errs++
		case c.state == liveUnknown:
			unknown++
		}
		if c.state != liveSucceeded && c.state != liveFailed && c.state != liveAbsent {
			unfinished++
		}
		if c.state != liveSucceeded {
			running = append(running, i)
		}
		all = append(all, i)
	}
	fromPhase := func(outcome wrapupv1alpha1.Outcome) {
		message := "the AppWrapper controller marked the AppWrapper " + string(outcome)
		if c := apimeta.FindStatusCondition(aw.Status.Conditions, string(awv1beta2.Unhealthy)); c != nil && c.Message != "" && outcome == wrapupv1alpha1.OutcomeFailed {
			message += ": " + c.Message
		}
		if one {
			d.Evaluation = &Evaluation{Outcome: celpolicies.Outcome(outcome), FromAppWrapperPhase: true, Message: message}
		}
		d.record(in, rule, outcome, cs, all, message)
	}
	switch phase := aw.Status.Phase; {
	case unknown > 0 && one:
		d.Verdict, d.Requeue = VerdictWaitingForTrigger, PendingRetry
		d.Reason = d.Trigger.Problem + "; wrapup looks again when it has"
	case unknown > 0:
		d.Verdict, d.Requeue = VerdictWaitingForTrigger, PendingRetry
		d.Reason = fmt.Sprintf("%d of %d triggers were not read (their cache has not listed yet); wrapup looks again when it has", unknown, len(cs))
	case phase == awv1beta2.AppWrapperFailed && errs == 0:
		// The AppWrapper controller gave up (retry limit, a deleted
		// component, a fatal error) and tears the components down.
		fromPhase(wrapupv1alpha1.OutcomeFailed)
	case phase == awv1beta2.AppWrapperSucceeded && unfinished == 0 && (notOwned == 0 || one):
		// Every pod succeeded, as the AppWrapper controller saw it, and the
		// triggers that are not there any more (their own TTL) succeeded.
		fromPhase(wrapupv1alpha1.OutcomeSucceeded)
	case one && errs > 0:
		d.Verdict = VerdictWaitingForTrigger
		d.Reason = "the evaluation failed, which counts as not finished (Warning Event EvaluationError); wrapup evaluates again when the trigger changes"
	case one && notOwned > 0:
		d.Verdict, d.Reason = VerdictNoTrigger, d.Trigger.Problem
	case one && cs[0].state != liveRunning:
		d.Verdict = VerdictWaitingForTrigger
		d.Reason = d.Trigger.Problem + "; wrapup looks again when it changes"
	case one:
		d.Verdict = VerdictWaitingForTrigger
		d.Reason = "the trigger is not finished; wrapup evaluates again when it changes"
	default:
		d.Verdict = VerdictWaitingForTrigger
		d.Reason = fmt.Sprintf("policy %s: %d of %d triggers have not finished (%s); wrapup evaluates again when one changes",
			d.Policy, len(running), len(cs), joinNames(cs, running))
		if errs > 0 {
			d.Reason += fmt.Sprintf("; %d evaluation(s) failed, which counts as not finished (Warning Event EvaluationError)", errs)
		}
	}
}

func joinNames(cs []observed, idx []int) string {
	names := make([]string, len(idx))
	for k, i := range idx {
		names[k] = cs[i].name()
	}
	return Truncate(strings.Join(names, ", "), MaxMessage/2)
}

// decideRecorded decides for a run with a record, whichever rule wins now,
// on the triggers cs. The record is final for the triggers that decided
// it (by component index and UID): only one of them seen running again
// clears it, and, after a failure, a new attempt (one of them re-created),
// evaluated afresh; not after a success: running it again is what wrapup
// exists to prevent. A trigger the record does not name changes nothing.
func (d *Decision) decideRecorded(in Input, rule *wrapupv1alpha1.CompletionRule, cs []observed) {
	aw := in.AppWrapper
	rec := d.Recorded
	phase := aw.Status.Phase
	var again *observed
	evalErr, replaced := false, false
	for i := range cs {
		c := &cs[i]
		t, ok := rec.recorded(c.info.Index)
		if !ok {
			continue
		}
		if len(d.Candidates) > i {
			d.Candidates[i].Decided = true
		}
		present := c.state != liveUnknown && c.state != liveAbsent
		if present && t.UID != "" && c.info.UID == t.UID && c.state == liveRunning && phase != awv1beta2.AppWrapperFailed && again == nil {
			again = c
		}
		evalErr = evalErr || c.state == liveError
		replaced = replaced || present && c.info.UID != t.UID
	}
	// A reset (status.retries went up), or the components deployed again
	// (a reset, or a re-admission after Kueue preempted it) since the
	// outcome was recorded: a new attempt, whichever component decides.
	reset := aw.Status.Retries > rec.Retries || !rec.DeployedAt.IsZero() && deployedAt(aw).After(rec.DeployedAt)
	switch {
	case again != nil:
		d.clear(fmt.Sprintf("the trigger %s is running again: the recorded outcome %s no longer holds", again.name(), rec.Outcome))
		return
	case evalErr:
		d.Verdict = VerdictWaitingForTrigger
		d.Reason = fmt.Sprintf("the evaluation of a trigger that decided failed, which counts as not finished (Warning Event EvaluationError): the recorded outcome %s stays, and nothing is deleted until it evaluates again", rec.Outcome)
		return
	case (replaced || reset) && rec.Outcome == wrapupv1alpha1.OutcomeFailed && phase != awv1beta2.AppWrapperFailed:
		for i := range d.Candidates {
			d.Candidates[i].Decided = false
		}
		if final, _, _ := d.recordFinal(in, rule, cs, combine(Policy(rule), cs)); final {
			return
		}
		d.clear("a new attempt replaced the trigger whose failure was recorded: the recorded outcome Failed no longer holds")
		return
	}
	if d.holdRecordedFailure(in) {
		return
	}
	d.act(in, rule, rec, startedAgain(aw, rec, replaced, reset))
}

// startedAgain says why aw, whose success rec records, is making a new
// attempt (replaced: a recorded trigger was; reset: see decideRecorded);
// "" when it is not. The AppWrapper controller tears every
// component down when Kueue suspends it (spec.suspend set, then
// Suspending) and when it resets it for a retry, even after the trigger
// succeeded, when a pod of the trigger failed on the way (appwrapper
// v1.2.2 appwrapper_controller.go, Reconcile: a Failed pod counted by
// getPodStatus keeps the AppWrapper from Succeeded, and FoundFailedPods
// leads to resetOrFail).
func startedAgain(aw *awv1beta2.AppWrapper, rec *Record, replaced, reset bool) string {
	if rec.Outcome != wrapupv1alpha1.OutcomeSucceeded {
		return ""
	}
	switch p := aw.Status.Phase; {
	case p == awv1beta2.AppWrapperSuspending || p == awv1beta2.AppWrapperSuspended:
		return fmt.Sprintf("the AppWrapper is %s after its recorded success (Kueue preempted it): re-admitted, it would run again", p)
	case p == awv1beta2.AppWrapperResetting || p == awv1beta2.AppWrapperResuming:
		return fmt.Sprintf("the AppWrapper is %s after its recorded success: its controller tears the components down to run them again", p)
	case aw.Spec.Suspend && (p == awv1beta2.AppWrapperRunning):
		return "Kueue suspends the AppWrapper after its recorded success: re-admitted, it would run again"
	case p == awv1beta2.AppWrapperFailed || p == awv1beta2.AppWrapperSucceeded:
		// The AppWrapper controller makes no new attempt.
	case replaced:
		return "a new trigger replaced the one whose success was recorded: the run started again"
	case reset:
		return fmt.Sprintf("the AppWrapper controller deployed the components again after the recorded success (status.retries %d, %d when recorded; deployed at %s): the run started again",
			aw.Status.Retries, rec.Retries, deployedAt(aw).UTC().Format(time.RFC3339))
	}
	return ""
}

// holdRecordedFailure decides to act on no recorded failure while the
// AppWrapper controller makes a new attempt, or is about to (it reports a
// Running AppWrapper Unhealthy with retries left, within the grace), if it
// is: that attempt may yet clear the record.
func (d *Decision) holdRecordedFailure(in Input) bool {
	aw, rec := in.AppWrapper, d.Recorded
	if rec.Outcome != wrapupv1alpha1.OutcomeFailed {
		return false
	}
	switch p := aw.Status.Phase; p {
	case awv1beta2.AppWrapperResetting, awv1beta2.AppWrapperResuming:
		d.Reason = fmt.Sprintf("the AppWrapper is %s after the recorded failure: the AppWrapper controller is making a new attempt; wrapup keeps the record and deletes nothing until it ends", p)
	case awv1beta2.AppWrapperRunning:
		first := rec.FinishedAt
		if d.FailureSeen != nil && d.FailureSeen.At.Before(first) {
			first = d.FailureSeen.At
		}
		if final, _, _ := failureFinality(aw, first, in.Now, in.FailureGracePeriod); final || !mayRetry(aw) {
			return false
		}
		d.Reason = "the AppWrapper controller reports the AppWrapper Unhealthy with retries left after the recorded failure: wrapup keeps the record and deletes nothing until it resets or fails it"
	default:
		return false
	}
	d.Verdict = VerdictWaitingForRetries
	return true
}

// recordFinal decides to record the outcome v that cs settled on, if it is
// final; if it is not, wait and why say how long until it may be, and why.
func (d *Decision) recordFinal(in Input, rule *wrapupv1alpha1.CompletionRule, cs []observed, v settled) (final bool, wait time.Duration, why string) {
	final = v.outcome != ""
	if v.outcome == wrapupv1alpha1.OutcomeFailed {
		final, wait, why = failureFinality(in.AppWrapper, d.FailureSeen.At, in.Now, in.FailureGracePeriod)
	}
	if final {
		d.record(in, rule, v.outcome, cs, v.deciders, "")
	}
	return final, wait, why
}

// record decides to record outcome for the triggers deciders of cs, with
// message ("": the trigger's own, or the deciders' joined), then to act.
func (d *Decision) record(in Input, rule *wrapupv1alpha1.CompletionRule, outcome wrapupv1alpha1.Outcome, cs []observed, deciders []int, message string) {
	ts := make([]RecordedTrigger, len(deciders))
	var msgs []string
	for k, i := range deciders {
		ts[k] = RecordedTrigger{Index: cs[i].info.Index, UID: cs[i].info.UID}
		if d.Candidates != nil {
			d.Candidates[i].Decided = true
		}
		if cs[i].eval != nil && cs[i].eval.Message != "" {
			msgs = append(msgs, cs[i].name()+": "+cs[i].eval.Message)
		}
	}
	switch {
	case message != "":
	case len(cs) == 1 && cs[0].eval != nil:
		message = cs[0].eval.Message
	default:
		message = Truncate(strings.Join(msgs, "; "), MaxMessage)
	}
	rec := &Record{Outcome: outcome, Rule: rule.Name, RuleUID: rule.UID, FinishedAt: in.Now.UTC().Truncate(time.Microsecond), Message: message,
		Triggers: ts, Policy: Policy(rule), Retries: in.AppWrapper.Status.Retries, DeployedAt: deployedAt(in.AppWrapper)}
	d.Write = rec
	d.act(in, rule, rec, "")
	if d.Stamp != nil {
		rec.Stamp = *d.Stamp
	}
	what := "the AppWrapper is deleted"
	if ttl := d.Action.TTLSecondsAfterFinished; ttl != nil && *ttl > 0 {
		what = fmt.Sprintf("the AppWrapper is deleted in %ds", *ttl)
	}
	_, worker := MultiKueueWorkerCopy(in.AppWrapper)
	switch {
	case worker:
		what = "outcome recorded only (MultiKueue worker copy)"
		d.Events = append(d.Events, EventMultiKueueWorker.Event(rule.Name))
	case d.Action.Action == wrapupv1alpha1.ActionUpdateStatus:
		what = "outcome recorded only (UpdateStatus)"
	case d.DryRun:
		what = "dry run: the AppWrapper would be deleted"
		d.Events = append(d.Events, EventWouldDelete.Event(rule.Name))
	}
	if m := Truncate(message, MaxMessage); m != "" {
		message = ": " + m
	}
	spec := map[wrapupv1alpha1.Outcome]EventSpec{wrapupv1alpha1.OutcomeSucceeded: EventSucceeded, wrapupv1alpha1.OutcomeFailed: EventFailed}[outcome]
	d.Events = append(d.Events, spec.Event(rule.Name, outcome, what, message))
	d.Reason += "; the outcome is not recorded yet"
}

func (d *Decision) clear(why string) {
	d.Verdict, d.Clear = VerdictClearOutcome, true
	d.Reason = why + ": wrapup clears it and cancels any pending deletion"
	d.Events = append(d.Events, EventOutcomeCleared.Event(why))
}

// act decides what follows the final outcome rec, recorded or about to
// be. again says why the run started again (startedAgain): it is then due
// at once, TTL or not. The TTL keeps a finished run's components for its
// logs and results; a new attempt tore them down, and would only run the
// benchmark again.
func (d *Decision) act(in Input, rule *wrapupv1alpha1.CompletionRule, rec *Record, again string) {
	outcome, aw := rec.Outcome, in.AppWrapper
	d.Outcome = outcome
	d.Action = ActionFor(rule, outcome)
	d.DryRun = rule.Spec.DryRun
	origin, workerCopy := MultiKueueWorkerCopy(aw)
	if workerCopy {
		// Deleting MultiKueue's copy on a worker makes the manager see its
		// remote workload gone and dispatch the run again: here wrapup
		// records the outcome and nothing more, whatever the rule says.
		d.Action, d.DryRun = wrapupv1alpha1.ActionSpec{Action: wrapupv1alpha1.ActionUpdateStatus}, false
	}
	// The action in force for the run (StampFor), kept when rec holds another.
	stamp := StampFor(Stamp{Rule: rule.Name, RuleUID: rule.UID, Action: d.Action, DryRun: d.DryRun}, rec, in.Now)
	if !stamp.Same(rec.Stamp) {
		d.Stamp = &stamp
	}
	switch {
	case workerCopy:
		d.Verdict, d.Reason = VerdictRecordOnly, fmt.Sprintf("the trigger %s and the AppWrapper is MultiKueue's copy on a worker cluster (label %s=%s): "+
			"wrapup records the outcome here and deletes nothing, since deleting it would make MultiKueue dispatch the run again; "+
			"the manager cluster's wrapup finishes the AppWrapper", outcome, kueue.MultiKueueOriginLabel, origin)
		return
	case d.Action.Action == wrapupv1alpha1.ActionUpdateStatus:
		d.Verdict, d.Reason = VerdictRecordOnly, fmt.Sprintf("the trigger %s and rule %s's action for it is UpdateStatus: the outcome is recorded, everything keeps running", outcome, rule.Name)
		return
	case d.DryRun:
		d.Verdict, d.Reason = VerdictDryRun, fmt.Sprintf("the trigger %s and rule %s is in dry-run mode: the outcome is recorded with a WouldDelete Event, nothing is deleted", outcome, rule.Name)
		return
	}
	if again != "" {
		// As if its TTL were 0: a time that does not move with each
		// decision.
		d.DueAt = rec.FinishedAt
		d.Verdict = VerdictDelete
		d.Reason = fmt.Sprintf("%s; rule %s deletes it now rather than run it again, its TTL notwithstanding (the record and its CompletionRecord keep the outcome), "+
			"if a decision on a fresh read of it, its rules and its trigger still says so", again, rule.Name)
		d.Events = append(d.Events, EventDeletedStartedAgain.Event(rule.Name, outcome))
		return
	}
	ttl := stamp.ttl()
	notBefore := stamp.DueAt
	why := fmt.Sprintf("rule %s deletes the AppWrapper %s after it finished (ttlSecondsAfterFinished)", rule.Name, ttl)
	if stamp.Since.After(rec.FinishedAt) {
		why = fmt.Sprintf("rule %s deletes the AppWrapper %s after wrapup saw its action in force for this run, after the run was recorded (the record's action.deleteAfter: no change makes a deletion sooner)",
			rule.Name, ttl)
	}
	if hold, _ := annotationDuration(aw, awv1beta2.DeletionOnFailureGracePeriodAnnotation); hold > 0 && (outcome == wrapupv1alpha1.OutcomeFailed || aw.Status.Phase == awv1beta2.AppWrapperFailed) {
		// Kept for debugging, as its user asked the AppWrapper controller
		// (the AppWrapper's own hold), whatever the trigger said (another
		// component may have failed).
		var started bool
		if notBefore, started = d.failedHold(in, rec, hold, notBefore); !started {
			return
		}
		why += fmt.Sprintf(", and not before the AppWrapper's own hold of %s after it failed (%s)", hold, awv1beta2.DeletionOnFailureGracePeriodAnnotation)
	}
	d.DueAt = notBefore
	if left := notBefore.Sub(in.Now); left > 0 {
		d.Verdict, d.After, d.Requeue = VerdictDeleteAfterTTL, left, left
		d.Reason = fmt.Sprintf("the trigger %s: %s, at %s", outcome, why, notBefore.UTC().Format(time.RFC3339))
		return
	}
	d.Verdict = VerdictDelete
	d.Reason = fmt.Sprintf("the trigger %s: rule %s deletes the AppWrapper now, if a decision on a fresh read of it, its rules and its trigger still says so", outcome, rule.Name)
	d.Events = append(d.Events, EventDeleted.Event(rule.Name, outcome))
}

// failedHold moves notBefore past a failed AppWrapper's own hold, from the
// run's failure and from when its controller started the hold; false when
// the AppWrapper waits for the controller to start it.
func (d *Decision) failedHold(in Input, rec *Record, hold time.Duration, notBefore time.Time) (time.Time, bool) {
	aw, outcome := in.AppWrapper, rec.Outcome
	if t := rec.FinishedAt.Add(hold); outcome == wrapupv1alpha1.OutcomeFailed && t.After(notBefore) {
		notBefore = t
	}
	if aw.Status.Phase == awv1beta2.AppWrapperFailed && !aw.Spec.Suspend {
		start, ok := failedHoldStart(aw)
		if r := in.HoldStart; !r.IsZero() && (!ok || r.Before(start)) {
			// The hold runs from the first time seen (failedHoldStart).
			start, ok = r, true
		}
		if !ok {
			d.Verdict, d.After, d.Requeue = VerdictDeleteAfterTTL, hold, holdStartRetry
			d.DueAt = in.Now.Add(hold)
			d.Reason = fmt.Sprintf("the trigger %s: the AppWrapper asks to be kept %s after it failed (%s), and its controller has not started that hold yet",
				outcome, hold, awv1beta2.DeletionOnFailureGracePeriodAnnotation)
			return notBefore, false
		}
		d.HoldStart = start
		if t := start.Add(hold); t.After(notBefore) {
			notBefore = t
		}
	}
	return notBefore, true
}

func (d *Decision) warn(spec EventSpec, args ...any) {
	d.Events = append(d.Events, spec.Event(args...))
}

// MultiKueueWorkerCopy says whether aw is a copy MultiKueue's AppWrapper
// adapter created on a worker cluster, and names its origin: only the
// adapter sets kueue.x-k8s.io/multikueue-origin. Deleting such a copy is
// never wrapup's to do (see act).
func MultiKueueWorkerCopy(aw *awv1beta2.AppWrapper) (origin string, ok bool) {
	if aw == nil {
		return "", false
	}
	origin, ok = aw.Labels[kueue.MultiKueueOriginLabel]
	return origin, ok
}

// TriggerFields are the top-level fields of a trigger of kind gk that a
// decision under policy p reads: its evaluation's, and a Pod's status (see
// tornDown); the metadata that says it is being deleted is kept anyway.
func TriggerFields(p *celpolicies.Policy, gk schema.GroupKind) celpolicies.Fields {
	f := p.ObjectFields(gk)
	if gk.Group == "" && gk.Kind == "Pod" {
		f = f.Union(celpolicies.FieldsOf("status"))
	}
	return f
}

// WorkerBackoff is how long to wait before reading an unreachable worker
// again for an AppWrapper, after n failed reads in a row: WorkerRetry,
// doubled for each further failure, at most WorkerBackoffMax.
func WorkerBackoff(n int) time.Duration {
	d := WorkerRetry
	for i := 1; i < n && d < WorkerBackoffMax; i++ {
		d *= 2
	}
	return min(d, WorkerBackoffMax)
}
