package gc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
)

// Verdict says in one word what wrapup does next with an AppWrapper.
type Verdict string

const (
	// VerdictBeingDeleted: the AppWrapper is being deleted (deletionTimestamp
	// set, or phase Terminating); wrapup leaves it alone.
	VerdictBeingDeleted Verdict = "BeingDeleted"
	// VerdictIgnored: the AppWrapper is annotated wrapup.dev/ignore: "true".
	VerdictIgnored Verdict = "Ignored"
	// VerdictNoRule: no valid CompletionRule selects the AppWrapper.
	VerdictNoRule Verdict = "NoRule"
	// VerdictNoTrigger: the winning rule finds no single trigger component,
	// or the live trigger cannot be taken as one (not created yet, not
	// owned by the AppWrapper, its kind not served).
	VerdictNoTrigger Verdict = "NoTrigger"
	// VerdictWaitingForTrigger: the trigger is not finished, or its
	// evaluation failed, which counts as not finished.
	VerdictWaitingForTrigger Verdict = "WaitingForTrigger"
	// VerdictWaitingForRetries: the trigger failed, and the AppWrapper
	// controller may still retry it, so the failure is not final yet.
	VerdictWaitingForRetries Verdict = "WaitingForRetries"
	// VerdictClearOutcome: an outcome was recorded, but the live trigger is
	// not finished any more (re-created by a retry, or reset): wrapup
	// removes the record and cancels any pending deletion.
	VerdictClearOutcome Verdict = "ClearOutcome"
	// VerdictRecordOnly: the outcome is (or is about to be) recorded, and
	// the action is UpdateStatus: nothing is deleted.
	VerdictRecordOnly Verdict = "RecordOnly"
	// VerdictDryRun: the outcome is recorded and the action would delete,
	// but the rule is in dry-run mode.
	VerdictDryRun Verdict = "DryRun"
	// VerdictDeleteAfterTTL: the AppWrapper is deleted once
	// ttlSecondsAfterFinished has passed (Explanation.After).
	VerdictDeleteAfterTTL Verdict = "DeleteAfterTTL"
	// VerdictDelete: the TTL has passed; the AppWrapper is deleted after a
	// final check on a fresh read of it and its trigger.
	VerdictDelete Verdict = "Delete"
)

// Explanation is what wrapup decides for one AppWrapper at one instant, and
// why. Explain builds it from the same pure decisions as the controller.
type Explanation struct {
	// AppWrapper is the AppWrapper explained.
	AppWrapper types.NamespacedName
	// Phase is the AppWrapper's phase, as its controller reports it.
	Phase awv1beta2.AppWrapperPhase
	// At is the instant the explanation is for.
	At time.Time

	// Rules lists every CompletionRule: the winner first, then the others
	// in the order in which they would win.
	Rules []RuleVerdict
	// Winner names the rule that wins the selection; "" when none. For an
	// ignored AppWrapper or one being deleted it decides nothing.
	Winner string

	// Trigger is the component the winning rule takes as the trigger; nil
	// when there is no winner or no single trigger.
	Trigger *TriggerInfo
	// Evaluation is the winning rule's result on the live trigger; nil when
	// nothing was evaluated.
	Evaluation *Evaluation
	// Recorded is the outcome wrapup has written on the AppWrapper; nil when
	// there is none.
	Recorded *RecordedOutcome

	// Outcome is the final outcome that wrapup acts on; "" while the trigger
	// is not finished or its failure is not final.
	Outcome wrapupv1alpha1.Outcome
	// WillRecord is true when wrapup has yet to record Outcome on the
	// AppWrapper (it does so on its next reconcile).
	WillRecord bool
	// Verdict says what wrapup does next.
	Verdict Verdict
	// Reason says why, in a sentence or two.
	Reason string
	// After is how long until the verdict's action, when it is known: the
	// TTL left for DeleteAfterTTL; for WaitingForRetries, the longest the
	// failure grace period can still run. 0 means now, or on the next change.
	After time.Duration
}

// RuleVerdict is how one CompletionRule stands for the AppWrapper.
type RuleVerdict struct {
	// Name of the rule.
	Name string
	// Priority of the rule.
	Priority int32
	// Ready is the rule's Ready condition as "Status/Reason", "" if unset.
	Ready string
	// Matches is true when both selectors select the AppWrapper and its
	// namespace.
	Matches bool
	// Valid is true when the rule's expressions compile.
	Valid bool
	// Wins is true for the rule that decides.
	Wins bool
	// Why says why the rule wins or does not.
	Why string
}

// TriggerInfo is the trigger component of the AppWrapper under the
// winning rule.
type TriggerInfo struct {
	// Component is the index in spec.components.
	Component int
	// GroupVersionKind is the component template's.
	GroupVersionKind schema.GroupVersionKind
	// Name is the live object's name; "" while the AppWrapper controller has
	// not recorded the name it generated.
	Name string
	// Annotated is true when the rule names no kind and the component was
	// found by its wrapup.dev/trigger annotation.
	Annotated bool
	// UID is the live object's UID, when it was read.
	UID types.UID
	// Problem says why the live object is not evaluated; "" when it is (or
	// when the AppWrapper's phase decided without it).
	Problem string
}

// Evaluation is the result of the winning rule's expressions.
type Evaluation struct {
	// Outcome is Running, Succeeded or Failed; Running on any error.
	Outcome celpolicies.Outcome
	// Message is the evaluated message.
	Message string
	// Cost is the CEL cost of the rule's own expressions.
	Cost uint64
	// BuiltinSuccess and BuiltinFailure say which expressions were the
	// trigger kind's built-in ones.
	BuiltinSuccess, BuiltinFailure bool
	// Error is the runtime error, if any: the trigger then counts as not
	// finished, and wrapup emits an EvaluationError Event.
	Error string
	// FromAppWrapperPhase is true when the AppWrapper's phase (Failed)
	// decided the outcome and the trigger was not evaluated.
	FromAppWrapperPhase bool
}

// RecordedOutcome is the outcome wrapup wrote on the AppWrapper's metadata.
type RecordedOutcome struct {
	Outcome    wrapupv1alpha1.Outcome
	Rule       string
	FinishedAt time.Time
	Message    string
	TriggerUID string
}

// Explain says what wrapup does with the AppWrapper key at now, and why. It
// only reads, through r: the AppWrapper, its Namespace, every CompletionRule
// and the live trigger (as unstructured, with the version of the component
// template). It makes the same decisions as AppWrapperReconciler, with the
// differences a reader outside the controller cannot avoid: the time wrapup
// first saw a failed trigger lives in the controller's memory, so for a
// Running AppWrapper Explain gives the longest the failure grace period can
// still run, assuming DefaultFailureGracePeriod (the manager's flag may set
// another); and the controller reads the trigger at the version its REST
// mapper prefers, which for a CRD serving several versions may not be the
// template's. policies may be nil.
func Explain(ctx context.Context, r client.Reader, policies *celpolicies.Cache, key types.NamespacedName, now time.Time) (*Explanation, error) {
	if policies == nil {
		policies = &celpolicies.Cache{}
	}
	aw := &awv1beta2.AppWrapper{}
	if err := r.Get(ctx, key, aw); err != nil {
		return nil, fmt.Errorf("reading appwrapper %s: %w", key, err)
	}
	ex := &Explanation{AppWrapper: key, Phase: aw.Status.Phase, At: now}
	rec, recorded := readRecord(aw)
	if recorded {
		ex.Recorded = &RecordedOutcome{Outcome: rec.Outcome, Rule: rec.Rule, FinishedAt: rec.FinishedAt, Message: rec.Message, TriggerUID: rec.TriggerUID}
	}

	var rules wrapupv1alpha1.CompletionRuleList
	if err := r.List(ctx, &rules); err != nil {
		return nil, fmt.Errorf("listing rules: %w", err)
	}
	var winner *wrapupv1alpha1.CompletionRule
	if len(rules.Items) > 0 {
		// Like the controller, the namespace is read only when some rule
		// could select it.
		ns := &corev1.Namespace{}
		if err := r.Get(ctx, types.NamespacedName{Name: aw.Namespace}, ns); err != nil {
			return nil, fmt.Errorf("reading namespace: %w", err)
		}
		winner = ex.explainRules(rules.Items, aw.Labels, ns, policies)
	}

	switch {
	case !aw.DeletionTimestamp.IsZero() || aw.Status.Phase == awv1beta2.AppWrapperTerminating:
		ex.Verdict, ex.Reason = VerdictBeingDeleted, "the AppWrapper is being deleted: wrapup leaves it to its controller"
		return ex, nil
	case aw.Annotations[wrapupv1alpha1.IgnoreAnnotation] == "true":
		ex.Verdict, ex.Reason = VerdictIgnored, fmt.Sprintf("the AppWrapper is annotated %s: \"true\": no rule applies", wrapupv1alpha1.IgnoreAnnotation)
		return ex, nil
	case winner == nil:
		ex.Verdict, ex.Reason = VerdictNoRule, "no valid CompletionRule selects the AppWrapper"
		return ex, nil
	}
	policy, err := policies.Get(winner)
	if err != nil {
		// explainRules only picks rules that compile.
		return nil, fmt.Errorf("compiling rule %s: %w", winner.Name, err)
	}

	ref, err := findTrigger(aw, winner)
	if err != nil {
		var nt *noTriggerError
		if !errors.As(err, &nt) {
			return nil, err
		}
		ex.Verdict = VerdictNoTrigger
		ex.Reason = fmt.Sprintf("%s (Warning Event %s)", nt.message, nt.reason)
		return ex, nil
	}
	ex.Trigger = &TriggerInfo{
		Component:        ref.Index,
		GroupVersionKind: templateGVK(aw, ref),
		Name:             ref.Name,
		Annotated:        winner.Spec.Trigger.Kind == "",
	}
	ex.decide(ctx, r, aw, winner, policy, ref, rec, recorded)
	return ex, nil
}

// explainRules fills ex.Rules and returns the winning rule, which is the one
// winningRule picks: the verdicts only say why.
func (ex *Explanation) explainRules(items []wrapupv1alpha1.CompletionRule, awLabels map[string]string, ns *corev1.Namespace,
	policies *celpolicies.Cache) *wrapupv1alpha1.CompletionRule {
	ptrs := make([]*wrapupv1alpha1.CompletionRule, len(items))
	for i := range items {
		ptrs[i] = &items[i]
	}
	usable := func(rule *wrapupv1alpha1.CompletionRule) bool {
		_, err := policies.Get(rule)
		return err == nil
	}
	winner := winningRule(ptrs, awLabels, ns.Labels, usable)
	if winner != nil {
		ex.Winner = winner.Name
	}
	// The order in which rules win: highest priority first, ties to the name.
	sort.SliceStable(ptrs, func(i, j int) bool { return better(ptrs[i], ptrs[j]) })
	ex.Rules = make([]RuleVerdict, 0, len(ptrs))
	contenders := 0
	for _, rule := range ptrs {
		_, compileErr := policies.Get(rule)
		v := RuleVerdict{
			Name:     rule.Name,
			Priority: rule.Spec.Priority,
			Matches:  ruleMatches(rule, awLabels, ns.Labels),
			Valid:    compileErr == nil,
		}
		if c := apimeta.FindStatusCondition(rule.Status.Conditions, wrapupv1alpha1.ConditionReady); c != nil {
			v.Ready = string(c.Status) + "/" + c.Reason
		}
		// The same order of checks as winningRule.
		switch {
		case !rule.DeletionTimestamp.IsZero():
			v.Why = "is being deleted"
		case !selectorMatches(rule.Spec.AppWrapperSelector, awLabels):
			v.Why = "appWrapperSelector does not select the AppWrapper"
		case !selectorMatches(rule.Spec.NamespaceSelector, ns.Labels):
			v.Why = fmt.Sprintf("namespaceSelector does not select namespace %s", ns.Name)
		case compileErr != nil:
			v.Why = "is invalid, so it acts on nothing: " + compileErr.Error()
		case rule == winner:
			contenders++
			v.Wins = true
		case winner == nil:
			// Unreachable: winningRule picks any rule that gets this far.
			v.Why = "matches, yet no rule won"
		case rule.Spec.Priority < winner.Spec.Priority:
			contenders++
			v.Why = fmt.Sprintf("loses to %s: lower priority (%d < %d)", winner.Name, rule.Spec.Priority, winner.Spec.Priority)
		default:
			contenders++
			v.Why = fmt.Sprintf("loses to %s: same priority %d, and %s sorts first by name", winner.Name, rule.Spec.Priority, winner.Name)
		}
		ex.Rules = append(ex.Rules, v)
	}
	for i := range ex.Rules {
		if ex.Rules[i].Wins {
			ex.Rules[i].Why = "wins: the only matching valid rule"
			if contenders > 1 {
				ex.Rules[i].Why = fmt.Sprintf("wins: highest priority of %d matching valid rules", contenders)
			}
			// Winner first.
			v := ex.Rules[i]
			copy(ex.Rules[1:i+1], ex.Rules[:i])
			ex.Rules[0] = v
		}
	}
	return winner
}

// templateGVK is the apiVersion and kind of the trigger's component
// template; findTrigger has already checked that they parse.
func templateGVK(aw *awv1beta2.AppWrapper, ref triggerRef) schema.GroupVersionKind {
	var m componentMeta
	_ = json.Unmarshal(aw.Spec.Components[ref.Index].Template.Raw, &m)
	gv, _ := schema.ParseGroupVersion(m.APIVersion)
	return gv.WithKind(ref.Kind.Kind)
}

// decide is the read-only part of AppWrapperReconciler.decide and of the
// rest of Reconcile: it emits no Events, remembers nothing, and writes the
// outcome and what follows into ex.
func (ex *Explanation) decide(ctx context.Context, r client.Reader, aw *awv1beta2.AppWrapper, rule *wrapupv1alpha1.CompletionRule,
	policy *celpolicies.Policy, ref triggerRef, rec record, recorded bool) {
	var outcome wrapupv1alpha1.Outcome
	var trigger *unstructured.Unstructured
	switch {
	case aw.Status.Phase == awv1beta2.AppWrapperFailed:
		ex.Evaluation = &Evaluation{FromAppWrapperPhase: true}
		if recorded && rec.Outcome == wrapupv1alpha1.OutcomeSucceeded {
			outcome = wrapupv1alpha1.OutcomeSucceeded
			ex.Evaluation.Outcome, ex.Evaluation.Message = celpolicies.OutcomeSucceeded, rec.Message
			break
		}
		msg := "the AppWrapper controller marked the AppWrapper Failed"
		if c := apimeta.FindStatusCondition(aw.Status.Conditions, string(awv1beta2.Unhealthy)); c != nil && c.Message != "" {
			msg += ": " + c.Message
		}
		outcome = wrapupv1alpha1.OutcomeFailed
		ex.Evaluation.Outcome, ex.Evaluation.Message = celpolicies.OutcomeFailed, msg
	case ref.Name == "":
		ex.noTrigger("the AppWrapper controller has not created the trigger yet (its template uses generateName)")
		return
	default:
		var problem string
		var err error
		trigger, problem, err = readLiveTrigger(ctx, r, ex.Trigger.GroupVersionKind, ref.Name, aw)
		if err != nil {
			ex.noTrigger(err.Error())
			return
		}
		if problem != "" {
			ex.noTrigger(problem)
			return
		}
		ex.Trigger.UID = trigger.GetUID()
		awMap, err := appWrapperMap(aw)
		if err != nil {
			ex.noTrigger(err.Error())
			return
		}
		res, err := policy.Evaluate(ctx, ref.Kind, trigger.Object, awMap)
		ex.Evaluation = &Evaluation{Outcome: res.Outcome, Message: res.Message, Cost: res.Cost,
			BuiltinSuccess: res.BuiltinSuccess, BuiltinFailure: res.BuiltinFailure}
		if err != nil {
			ex.Evaluation.Error = err.Error()
			break
		}
		switch res.Outcome {
		case celpolicies.OutcomeSucceeded:
			outcome = wrapupv1alpha1.OutcomeSucceeded
		case celpolicies.OutcomeFailed:
			if recorded && rec.Outcome == wrapupv1alpha1.OutcomeFailed && rec.TriggerUID == string(trigger.GetUID()) {
				outcome = wrapupv1alpha1.OutcomeFailed
				break
			}
			// wrapup's first sight of the failure is in its memory; taking
			// it as now gives the latest the failure can become final.
			final, wait := failureIsFinal(aw, ex.At, ex.At, DefaultFailureGracePeriod)
			if !final {
				ex.Verdict, ex.After = VerdictWaitingForRetries, wait
				if wait > 0 {
					ex.Reason = fmt.Sprintf("the trigger failed while the AppWrapper is %s: the AppWrapper controller may still retry it; "+
						"the failure is final once the AppWrapper stays Running for its failure grace period (default %s) after wrapup first saw the failure",
						aw.Status.Phase, DefaultFailureGracePeriod)
				} else {
					ex.Reason = fmt.Sprintf("the trigger failed while the AppWrapper is %s: the AppWrapper controller is acting (retrying); "+
						"wrapup looks again when the AppWrapper changes, and evaluates a re-created trigger afresh", phaseOrNone(aw.Status.Phase))
				}
				return
			}
			outcome = wrapupv1alpha1.OutcomeFailed
		}
	}

	if outcome == "" {
		switch {
		case recorded && trigger != nil:
			ex.Verdict = VerdictClearOutcome
			ex.Reason = fmt.Sprintf("the recorded outcome %s no longer holds (the trigger was re-created or reset): wrapup clears it and cancels any pending deletion", rec.Outcome)
		case ex.Evaluation != nil && ex.Evaluation.Error != "":
			ex.Verdict = VerdictWaitingForTrigger
			ex.Reason = "the evaluation failed, which counts as not finished (Warning Event EvaluationError); wrapup evaluates again when the trigger changes"
		default:
			ex.Verdict = VerdictWaitingForTrigger
			ex.Reason = "the trigger is not finished; wrapup evaluates again when it changes"
		}
		return
	}

	ex.Outcome = outcome
	finishedAt := ex.At.UTC().Truncate(time.Second)
	ex.WillRecord = !recorded || rec.Outcome != outcome
	if !ex.WillRecord {
		finishedAt = rec.FinishedAt
	}
	action := actionFor(rule, outcome)
	switch {
	case action.Action == wrapupv1alpha1.ActionUpdateStatus:
		ex.Verdict = VerdictRecordOnly
		ex.Reason = fmt.Sprintf("the trigger %s and rule %s's action for it is UpdateStatus: the outcome is recorded, everything keeps running", outcome, rule.Name)
	case rule.Spec.DryRun:
		ex.Verdict = VerdictDryRun
		ex.Reason = fmt.Sprintf("the trigger %s and rule %s is in dry-run mode: the outcome is recorded with a WouldDelete Event, nothing is deleted", outcome, rule.Name)
	default:
		ttl := time.Duration(0)
		if action.TTLSecondsAfterFinished != nil {
			ttl = time.Duration(*action.TTLSecondsAfterFinished) * time.Second
		}
		if left := timeLeft(finishedAt, ttl, ex.At); left > 0 {
			ex.Verdict, ex.After = VerdictDeleteAfterTTL, left
			ex.Reason = fmt.Sprintf("the trigger %s: rule %s deletes the AppWrapper %s after it finished (ttlSecondsAfterFinished), at %s",
				outcome, rule.Name, ttl, finishedAt.Add(ttl).UTC().Format(time.RFC3339))
		} else {
			ex.Verdict = VerdictDelete
			ex.Reason = fmt.Sprintf("the trigger %s: rule %s deletes the AppWrapper now, if a fresh read of it and its trigger still gives %s", outcome, rule.Name, outcome)
		}
	}
	if ex.WillRecord {
		ex.Reason += "; the outcome is not recorded yet"
	}
}

func (ex *Explanation) noTrigger(problem string) {
	ex.Trigger.Problem = problem
	ex.Verdict, ex.Reason = VerdictNoTrigger, problem
}

func phaseOrNone(p awv1beta2.AppWrapperPhase) string {
	if p == "" {
		return "not started"
	}
	return string(p)
}

// readLiveTrigger reads the live trigger as the controller's watch sees it.
// problem says why there is none to evaluate; err is a failure to read.
func readLiveTrigger(ctx context.Context, r client.Reader, gvk schema.GroupVersionKind, name string, aw *awv1beta2.AppWrapper) (*unstructured.Unstructured, string, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := r.Get(ctx, types.NamespacedName{Namespace: aw.Namespace, Name: name}, u); err != nil {
		switch {
		case apierrors.IsNotFound(err):
			return nil, fmt.Sprintf("%s %s does not exist (not created yet, or deleted)", gvk.Kind, name), nil
		case apimeta.IsNoMatchError(err):
			return nil, fmt.Sprintf("%s is not served by the API server (is its CRD installed?)", gvk), nil
		default:
			return nil, "", fmt.Errorf("reading trigger %s %s: %w", gvk.Kind, name, err)
		}
	}
	// The controller evaluates objects from its informers, which drop
	// these (and the fields no expression reads, which changes no result).
	stripMetadata(u)
	if _, ok := u.GetLabels()[awv1beta2.AppWrapperLabel]; !ok {
		// wrapup's informers list only labelled objects: it never sees this one.
		return nil, fmt.Sprintf("%s %s lacks the label %s, so wrapup's watch does not see it", gvk.Kind, name, awv1beta2.AppWrapperLabel), nil
	}
	if !ownedBy(u, aw) {
		return nil, fmt.Sprintf("%s %s is not controlled by this AppWrapper: it is not taken as the trigger (Warning Event %s)", gvk.Kind, name, ReasonTriggerNotOwned), nil
	}
	return u, "", nil
}

// appWrapperMap is the appWrapper variable: the AppWrapper as unstructured
// content, with its apiVersion and kind, as the controller's cache gives it.
func appWrapperMap(aw *awv1beta2.AppWrapper) (map[string]any, error) {
	c := aw.DeepCopy()
	c.SetGroupVersionKind(awv1beta2.GroupVersion.WithKind("AppWrapper"))
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(c)
	if err != nil {
		return nil, fmt.Errorf("converting appwrapper: %w", err)
	}
	return m, nil
}

// String renders the explanation for people, in the manner of kubectl
// describe.
func (ex *Explanation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "AppWrapper: %s (phase %s) at %s\n", ex.AppWrapper, phaseOrNone(ex.Phase), ex.At.UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "Verdict:    %s", ex.Verdict)
	switch {
	case ex.After > 0 && ex.Verdict == VerdictWaitingForRetries:
		fmt.Fprintf(&b, " (final in at most %s)", ex.After.Round(time.Second))
	case ex.After > 0:
		fmt.Fprintf(&b, " (in %s)", ex.After.Round(time.Second))
	}
	fmt.Fprintf(&b, "\n            %s\n", ex.Reason)

	b.WriteString("Rules:")
	if len(ex.Rules) == 0 {
		b.WriteString("      none\n")
	} else {
		b.WriteString("\n")
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		for _, v := range ex.Rules {
			mark := " "
			if v.Wins {
				mark = "*"
			}
			ready := v.Ready
			if ready == "" {
				ready = "-"
			}
			fmt.Fprintf(tw, "  %s %s\tpriority %d\tReady %s\t%s\n", mark, v.Name, v.Priority, ready, v.Why)
		}
		_ = tw.Flush()
	}

	if t := ex.Trigger; t != nil {
		how := "by kind"
		if t.Annotated {
			how = "annotated " + wrapupv1alpha1.TriggerAnnotation
		}
		name := t.Name
		if name == "" {
			name = "(name not generated yet)"
		}
		fmt.Fprintf(&b, "Trigger:    %s %s %s, component %d (%s)", t.GroupVersionKind.GroupVersion(), t.GroupVersionKind.Kind, name, t.Component, how)
		if t.UID != "" {
			fmt.Fprintf(&b, ", uid %s", t.UID)
		}
		b.WriteString("\n")
		if t.Problem != "" {
			fmt.Fprintf(&b, "            not evaluated: %s\n", t.Problem)
		}
	}

	if e := ex.Evaluation; e != nil {
		switch {
		case e.FromAppWrapperPhase:
			fmt.Fprintf(&b, "Evaluation: %s, from the AppWrapper's phase (the trigger is not evaluated)\n", e.Outcome)
		case e.Error != "":
			fmt.Fprintf(&b, "Evaluation: not finished: %s\n", e.Error)
		default:
			fmt.Fprintf(&b, "Evaluation: %s (cost %d; success %s, failure %s)\n", e.Outcome, e.Cost, builtinOrRule(e.BuiltinSuccess), builtinOrRule(e.BuiltinFailure))
		}
		if e.Message != "" {
			fmt.Fprintf(&b, "Message:    %s\n", e.Message)
		}
	}

	if rec := ex.Recorded; rec != nil {
		fmt.Fprintf(&b, "Recorded:   %s by rule %s at %s", rec.Outcome, rec.Rule, rec.FinishedAt.UTC().Format(time.RFC3339))
		if rec.Message != "" {
			fmt.Fprintf(&b, ": %s", rec.Message)
		}
		b.WriteString("\n")
	} else {
		b.WriteString("Recorded:   no outcome\n")
	}
	return b.String()
}

func builtinOrRule(builtin bool) string {
	if builtin {
		return "built-in"
	}
	return "from the rule"
}

// DescribeAction says what rule does once a trigger finished with outcome,
// as the controller does it: the action (DeleteAll by default), its TTL,
// and dry-run mode. It is for tools that show a rule's effect offline.
func DescribeAction(rule *wrapupv1alpha1.CompletionRule, outcome wrapupv1alpha1.Outcome) string {
	a := actionFor(rule, outcome)
	var what string
	switch {
	case a.Action == wrapupv1alpha1.ActionUpdateStatus:
		what = "UpdateStatus: record the outcome on the AppWrapper, delete nothing"
	default:
		when := "at once"
		if ttl := a.TTLSecondsAfterFinished; ttl != nil && *ttl > 0 {
			when = fmt.Sprintf("%s after the trigger finished", time.Duration(*ttl)*time.Second)
		}
		what = "DeleteAll: record the outcome, then delete the AppWrapper " + when
		if rule.Spec.DryRun {
			what = "dryRun: record the outcome and emit a WouldDelete Event, delete nothing (without dryRun: delete the AppWrapper " + when + ")"
		}
	}
	if outcome == wrapupv1alpha1.OutcomeFailed {
		what += "; a failure is final only once the AppWrapper controller stops retrying"
	}
	return what
}
