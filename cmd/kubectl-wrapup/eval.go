package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
	"github.com/wrapup-dev/wrapup/cmd/kubectl-wrapup/view"
	"github.com/wrapup-dev/wrapup/gc/decision"
)

// evalReport is what eval found for one rule and one trigger.
type evalReport struct {
	Rule    *wrapupv1alpha1.CompletionRule
	Trigger schema.GroupVersionKind
	Name    string
	Result  celpolicies.Result
	// Err is the evaluation's runtime error: the controller takes the
	// trigger as not finished.
	Err error
	// Note says what the controller would make of this trigger, when
	// eval read it from a cluster and it is not simply evaluated.
	Note string
	// WorkerCopy: the live AppWrapper is MultiKueue's copy on a worker,
	// which wrapup never deletes.
	WorkerCopy bool
	// Verdict and Reason are the controller's decision on the AppWrapper
	// given (--appwrapper) under this rule alone: what it does, rather
	// than what the rule's action is.
	Verdict decision.Verdict
	Reason  string
	// Disagreement says how the kind's built-in expressions judge the
	// trigger otherwise than the rule's own; "" when they agree.
	Disagreement string
}

// then says what the rule does once the trigger finished with outcome.
func (rep *evalReport) then(outcome wrapupv1alpha1.Outcome) string {
	if rep.WorkerCopy {
		return "record the outcome and delete nothing: the AppWrapper is MultiKueue's copy on a worker cluster, and the manager cluster's wrapup finishes it"
	}
	return view.DescribeAction(rep.Rule, outcome)
}

// output is the report as -o json|yaml prints it.
func (rep *evalReport) output() map[string]any {
	gk := rep.Trigger.GroupKind()
	_, _, hasBuiltin := celpolicies.BuiltinFor(gk)
	out := map[string]any{
		"apiVersion":     wrapupv1alpha1.GroupVersion.String(),
		"kind":           "Evaluation",
		"rule":           rep.Rule.Name,
		"trigger":        map[string]any{"apiVersion": rep.Trigger.GroupVersion().String(), "kind": rep.Trigger.Kind, "name": rep.Name},
		"outcome":        string(rep.Result.Outcome),
		"cost":           int64(rep.Result.Cost),
		"builtinSuccess": rep.Rule.Spec.Success == "" && hasBuiltin,
		"builtinFailure": rep.Rule.Spec.Failure == "" && hasBuiltin,
	}
	switch {
	case rep.Err != nil:
		out["outcome"] = string(celpolicies.OutcomeRunning)
		out["error"] = rep.Err.Error()
	case rep.Result.Outcome != celpolicies.OutcomeRunning:
		out["message"] = rep.Result.Message
	}
	if rep.Note != "" {
		out["note"] = rep.Note
	}
	if rep.Disagreement != "" {
		out["builtinDisagrees"] = rep.Disagreement
	}
	if rep.Verdict != "" {
		// The decision on the AppWrapper says what follows.
		out["verdict"], out["reason"] = string(rep.Verdict), rep.Reason
	} else {
		out["then"] = rep.thenLine()
	}
	return out
}

// thenLine says what follows the evaluation, as the text output's "then"
// line: the controller's decision on the AppWrapper when eval made it,
// else what the rule does with the outcome.
func (rep *evalReport) thenLine() string {
	if rep.Verdict != "" {
		return fmt.Sprintf("%s: %s", rep.Verdict, rep.Reason)
	}
	switch {
	case rep.Err != nil:
		return "nothing: a runtime error counts as not finished, and the controller emits an EvaluationError Event"
	case rep.Result.Outcome == celpolicies.OutcomeSucceeded:
		return rep.then(wrapupv1alpha1.OutcomeSucceeded)
	case rep.Result.Outcome == celpolicies.OutcomeFailed:
		return rep.then(wrapupv1alpha1.OutcomeFailed)
	}
	return "nothing yet: the trigger is not finished"
}

// evaluate compiles rule exactly as the controller does and evaluates it
// against trigger (of kind gvk) and appWrapper. A rule that does not
// compile yields the *celpolicies.CompileError; a trigger of another kind
// than the rule's is an error too, since the controller would never
// evaluate the rule on it.
func evaluate(ctx context.Context, rule *wrapupv1alpha1.CompletionRule, trigger map[string]any, gvk schema.GroupVersionKind, appWrapper map[string]any) (*evalReport, error) {
	policy, err := celpolicies.Compile(&rule.Spec)
	if err != nil {
		return nil, err
	}
	t := rule.Spec.Trigger
	if t.Kind != "" && (t.Kind != gvk.Kind || t.APIGroup != gvk.Group) {
		return nil, fmt.Errorf("rule %s takes a %s as the trigger, and the trigger file holds a %s",
			rule.Name, schema.GroupKind{Group: t.APIGroup, Kind: t.Kind}, gvk.GroupKind())
	}
	if appWrapper == nil {
		appWrapper = map[string]any{}
	}
	rep := &evalReport{Rule: rule, Trigger: gvk}
	if md, ok := trigger["metadata"].(map[string]any); ok {
		rep.Name, _ = md["name"].(string)
	}
	rep.Result, rep.Err = policy.Evaluate(ctx, gvk.GroupKind(), trigger, appWrapper)
	if rep.Err == nil {
		rep.Disagreement = builtinDisagreement(ctx, gvk.GroupKind(), trigger, rep.Result.Outcome, rep.Result.BuiltinSuccess, rep.Result.BuiltinFailure)
	}
	return rep, nil
}

// print writes the report for people, one "label: value" line each.
func (rep *evalReport) print(w io.Writer) {
	line := func(label, format string, args ...any) {
		fmt.Fprintf(w, "%-14s"+format+"\n", append([]any{label + ":"}, args...)...)
	}
	gk := rep.Trigger.GroupKind()
	builtinSuccess, builtinFailure, hasBuiltin := celpolicies.BuiltinFor(gk)
	res := rep.Result
	finished := rep.Err == nil && res.Outcome != celpolicies.OutcomeRunning

	line("rule", "%s", rep.Rule.Name)
	line("trigger", "%s %s %s", rep.Trigger.GroupVersion(), rep.Trigger.Kind, rep.Name)
	if rep.Note != "" {
		line("note", "%s", rep.Note)
	}
	if rep.Err != nil {
		line("outcome", "not finished (Running): the evaluation failed")
		line("error", "%v", rep.Err)
	} else {
		line("outcome", "%s", res.Outcome)
	}
	if rep.Disagreement != "" {
		line("built-in", "%s", rep.Disagreement)
	}
	if finished {
		line("message", "%s", res.Message)
	}
	line("cost", "%d (limits: %d per expression, %d per evaluation; built-in expressions are not counted)",
		res.Cost, celpolicies.PerCallCostLimit, celpolicies.EvaluationCostBudget)

	switch {
	case rep.Rule.Spec.Success != "":
		line("success", "from the rule")
	case hasBuiltin:
		line("success", "built-in for %s: %s", kindName(gk), builtinSuccess)
	default:
		line("success", "none: %s has no built-in expression, so the rule needs spec.success", kindName(gk))
	}
	switch {
	case rep.Rule.Spec.Failure != "":
		line("failure", "from the rule")
	case hasBuiltin:
		line("failure", "built-in for %s: %s", kindName(gk), builtinFailure)
	default:
		line("failure", "none: the trigger never counts as failed")
	}
	switch {
	case !finished:
	case rep.Rule.Spec.Message != "":
		line("message from", "the rule")
	case res.BuiltinSuccess && res.Outcome == celpolicies.OutcomeSucceeded, res.BuiltinFailure && res.Outcome == celpolicies.OutcomeFailed:
		line("message from", "the built-in expression (the status' reason and message)")
	default:
		line("message from", "nowhere: the rule has no message, and the outcome is not a built-in expression's")
	}

	line("then", "%s", rep.thenLine())
}

func kindName(gk schema.GroupKind) string {
	if gk.Group == "" {
		return gk.Kind
	}
	return gk.Group + "/" + gk.Kind
}

// printCompileError lists every invalid expression with its position; any
// other error is printed as it is.
func printCompileError(w io.Writer, where, rule string, err error) {
	var ce *celpolicies.CompileError
	if !errors.As(err, &ce) {
		fmt.Fprintf(w, "error: %s: %v\n", where, err)
		return
	}
	fmt.Fprintf(w, "error: %s: rule %s does not compile:\n", where, rule)
	for _, fe := range ce.Errors {
		fmt.Fprintf(w, "  %s: %s\n", fe.Field, fe.Message)
		if fe.Expression != "" {
			fmt.Fprintf(w, "    expression: %s\n", oneLine(fe.Expression))
		}
	}
}

// oneLine folds a multi-line expression (YAML's >- blocks) for display.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// pickRule chooses the rule to evaluate from the rules of a file.
func pickRule(rules []*wrapupv1alpha1.CompletionRule, docs []*document, name string) (*wrapupv1alpha1.CompletionRule, *document, error) {
	if name != "" {
		for i, r := range rules {
			if r.Name == name {
				return r, docs[i], nil
			}
		}
		return nil, nil, fmt.Errorf("no CompletionRule named %q", name)
	}
	switch len(rules) {
	case 0:
		return nil, nil, errors.New("no CompletionRule found")
	case 1:
		return rules[0], docs[0], nil
	}
	names := make([]string, len(rules))
	for i, r := range rules {
		names[i] = r.Name
	}
	return nil, nil, fmt.Errorf("%d CompletionRules found (%s): choose one with --name", len(rules), strings.Join(names, ", "))
}
