package main

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
	"github.com/wrapup-dev/wrapup/cmd/kubectl-wrapup/view"
	"github.com/wrapup-dev/wrapup/gc/decision"
)

// present adds to ex what a reader of explain needs beside the decision:
// whether the kind's built-in expressions judge the trigger (or a
// candidate) otherwise than the rule's own. r reads the triggers.
func present(ctx context.Context, r client.Reader, ex *view.Explanation) {
	if t := ex.Trigger; t != nil {
		if n := explainDisagreement(ctx, r, ex, *t, ex.Evaluation); n != "" {
			ex.Notes = append(ex.Notes, n)
		}
	}
	for _, c := range ex.Candidates {
		if n := explainDisagreement(ctx, r, ex, c.TriggerInfo, c.Evaluation); n != "" {
			ex.Notes = append(ex.Notes, fmt.Sprintf("%s %s: %s", c.GroupVersionKind().Kind, c.Name, n))
		}
	}
}

// readyNote says what "Ready -" means, when a rule of ex shows it: a rule
// of a file (offline) has no status; a rule of the cluster has none until
// the controller compiled it.
func readyNote(ex *view.Explanation, offline bool) string {
	noStatus := false
	for _, s := range ex.Rules {
		noStatus = noStatus || s.Ready == ""
	}
	switch {
	case noStatus && offline:
		return "Ready -: a rule read from a file has no status (the controller sets Ready once it compiled the rule); the rules above compile, as lint checks them"
	case noStatus:
		return "Ready -: the controller has not written the rule's status yet (it does once it compiled the rule): is wrapup running?"
	}
	return ""
}

// builtinPolicy evaluates the kinds' built-in expressions alone.
var builtinPolicy = sync.OnceValues(func() (*celpolicies.Policy, error) {
	return celpolicies.Compile(&wrapupv1alpha1.CompletionRuleSpec{})
})

// builtinDisagreement says, in one line, when the built-in expressions of
// gk judge object otherwise than a rule that has expressions of its own
// (ruleOutcome, with builtinSuccess and builtinFailure saying which of the
// rule's were the built-in ones); "" when they agree, or when there is
// nothing to compare.
func builtinDisagreement(ctx context.Context, gk schema.GroupKind, object map[string]any, ruleOutcome celpolicies.Outcome, builtinSuccess, builtinFailure bool) string {
	if builtinSuccess && builtinFailure {
		return ""
	}
	if _, _, ok := celpolicies.BuiltinFor(gk); !ok {
		return ""
	}
	p, err := builtinPolicy()
	if err != nil {
		return ""
	}
	res, err := p.Evaluate(ctx, gk, object, map[string]any{})
	if err != nil || res.Outcome == ruleOutcome {
		return ""
	}
	what := "the kind's controller may not be done with it (a retry, a resume), or the built-in expressions do not know this state"
	switch {
	case ruleOutcome == celpolicies.OutcomeRunning:
		what = "if the run is finished, the rule's own expressions miss it, and its AppWrapper keeps its resources"
	case res.Outcome != celpolicies.OutcomeRunning:
		what = "they disagree on how the run ended"
	}
	return fmt.Sprintf("the rule's own expressions say %s, and the built-in expressions of %s say %s on the same object: %s",
		ruleOutcome, kindName(gk), res.Outcome, what)
}

// explainDisagreement is builtinDisagreement on a trigger t that explain
// evaluated (e), read again through r.
func explainDisagreement(ctx context.Context, r client.Reader, ex *view.Explanation, t decision.TriggerInfo, e *decision.Evaluation) string {
	if e == nil || e.Error != "" || e.FromAppWrapperPhase || t.Name == "" || r == nil || e.BuiltinSuccess && e.BuiltinFailure {
		return ""
	}
	gvk := t.GroupVersionKind()
	if _, _, ok := celpolicies.BuiltinFor(gvk.GroupKind()); !ok {
		return ""
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := r.Get(ctx, types.NamespacedName{Namespace: ex.AppWrapper.Namespace, Name: t.Name}, u); err != nil {
		return ""
	}
	return builtinDisagreement(ctx, gvk.GroupKind(), u.Object, e.Outcome, e.BuiltinSuccess, e.BuiltinFailure)
}
