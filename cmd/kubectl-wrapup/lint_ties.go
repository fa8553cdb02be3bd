package main

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/sets"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/gc/decision"
)

// linted is a rule lint read, with where its fields are.
type linted struct {
	rule *wrapupv1alpha1.CompletionRule
	at   func(field string) string
}

// tieFindings warns of two usable rules of the same priority that can both
// apply to one AppWrapper and do different things: the controller then
// takes the one whose name sorts first (decision.Better), which a reader
// of either rule alone cannot tell. Rules of different trigger kinds (or
// names) apply together only to an AppWrapper holding both components,
// which one rule per kind is written for: they are not compared.
func tieFindings(rules []linted) []finding {
	var out []finding
	for i := range rules {
		for j := i + 1; j < len(rules); j++ {
			a, b := rules[i], rules[j]
			if a.rule.Spec.Priority != b.rule.Spec.Priority || a.rule.Name == b.rule.Name {
				continue
			}
			if actionDifference(a.rule, b.rule) == "" || !sameTriggers(a.rule.Spec.Trigger, b.rule.Spec.Trigger) ||
				!selectorsOverlap(a.rule.Spec.AppWrapperSelector, b.rule.Spec.AppWrapperSelector) ||
				!selectorsOverlap(a.rule.Spec.NamespaceSelector, b.rule.Spec.NamespaceSelector) {
				continue
			}
			win, lose := a, b
			if decision.Better(b.rule, a.rule) {
				win, lose = b, a
			}
			out = append(out, finding{At: lose.at("spec.priority"), Rule: lose.rule.Name, Severity: sevWarning, Field: "spec.priority",
				Message: fmt.Sprintf("ties with rule %s (%s): the same priority %d, selectors that can both select an AppWrapper, and %s; where both apply, %s wins (a tie goes to the name that sorts first, as the controller breaks it): give the rule meant to win a higher priority",
					win.rule.Name, win.at("metadata.name"), lose.rule.Spec.Priority, actionDifference(win.rule, lose.rule), win.rule.Name)})
		}
	}
	return out
}

// actionDifference says how what a and b do once a trigger finished
// differs; "" when it does not.
func actionDifference(a, b *wrapupv1alpha1.CompletionRule) string {
	var diffs []string
	for _, o := range []wrapupv1alpha1.Outcome{wrapupv1alpha1.OutcomeSucceeded, wrapupv1alpha1.OutcomeFailed} {
		field := "onSuccess"
		if o == wrapupv1alpha1.OutcomeFailed {
			field = "onFailure"
		}
		if x, y := describeActionSpec(decision.ActionFor(a, o)), describeActionSpec(decision.ActionFor(b, o)); x != y {
			diffs = append(diffs, fmt.Sprintf("%s %s where %s has %s", field, y, a.Name, x))
		}
	}
	if a.Spec.DryRun != b.Spec.DryRun {
		diffs = append(diffs, fmt.Sprintf("dryRun %t where %s has %t", b.Spec.DryRun, a.Name, a.Spec.DryRun))
	}
	if len(diffs) == 0 {
		return ""
	}
	return "this rule has " + strings.Join(diffs, ", ")
}

// describeActionSpec is an action with its TTL, as a rule says it.
func describeActionSpec(a wrapupv1alpha1.ActionSpec) string {
	s := string(a.Action)
	if s == "" {
		s = string(wrapupv1alpha1.ActionDeleteAll)
	}
	if a.TTLSecondsAfterFinished != nil && *a.TTLSecondsAfterFinished > 0 && s == string(wrapupv1alpha1.ActionDeleteAll) {
		s += fmt.Sprintf(" after %ds", *a.TTLSecondsAfterFinished)
	}
	return s
}

// sameTriggers says whether rules with triggers a and b can both apply to
// one AppWrapper for the same component: the same kind (with names that do
// not differ), or one that names no kind (it takes an annotated component,
// which may be of any kind).
func sameTriggers(a, b wrapupv1alpha1.TriggerSpec) bool {
	if a.Kind == "" || b.Kind == "" {
		return true
	}
	if a.Kind != b.Kind || a.APIGroup != b.APIGroup {
		return false
	}
	return a.Name == "" || b.Name == "" || a.Name == b.Name
}

// selectorsOverlap says whether some set of labels can be selected by both
// a and b (nil selects everything). A selector that does not parse is
// left to the findings on it.
func selectorsOverlap(a, b *metav1.LabelSelector) bool {
	type want struct {
		exists, absent bool
		in             sets.Set[string] // nil: any value
		notIn          sets.Set[string]
	}
	keys := map[string]*want{}
	for _, sel := range []*metav1.LabelSelector{a, b} {
		if sel == nil {
			continue
		}
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			return false
		}
		reqs, _ := s.Requirements()
		for _, r := range reqs {
			w := keys[r.Key()]
			if w == nil {
				w = &want{notIn: sets.New[string]()}
				keys[r.Key()] = w
			}
			vals := sets.New(r.Values().UnsortedList()...)
			switch r.Operator() {
			case selection.In, selection.Equals, selection.DoubleEquals:
				w.exists = true
				if w.in == nil {
					w.in = vals
				} else {
					w.in = w.in.Intersection(vals)
				}
			case selection.NotIn, selection.NotEquals:
				w.notIn = w.notIn.Union(vals)
			case selection.Exists:
				w.exists = true
			case selection.DoesNotExist:
				w.absent = true
			}
		}
	}
	for _, w := range keys {
		if w.exists && w.absent {
			return false
		}
		if w.in != nil && len(w.in.Difference(w.notIn)) == 0 {
			return false
		}
	}
	return true
}

// usable says whether fs, a rule's findings, leave it usable: no error.
func usable(fs []finding) bool {
	return !slices.ContainsFunc(fs, func(f finding) bool { return f.Severity == sevError })
}
