package gc

import (
	"encoding/json"
	"fmt"
	"strings"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// ruleMatches says whether rule selects an AppWrapper with awLabels in a
// namespace with nsLabels. A selector that does not parse matches nothing.
func ruleMatches(rule *wrapupv1alpha1.CompletionRule, awLabels, nsLabels map[string]string) bool {
	return selectorMatches(rule.Spec.AppWrapperSelector, awLabels) &&
		selectorMatches(rule.Spec.NamespaceSelector, nsLabels)
}

func selectorMatches(sel *metav1.LabelSelector, set map[string]string) bool {
	if sel == nil {
		return true
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false
	}
	return s.Matches(labels.Set(set))
}

// better says whether rule a wins over rule b: the highest priority, ties
// to the name that sorts first.
func better(a, b *wrapupv1alpha1.CompletionRule) bool {
	if a.Spec.Priority != b.Spec.Priority {
		return a.Spec.Priority > b.Spec.Priority
	}
	return a.Name < b.Name
}

// winningRule picks, among rules, the one that decides for an AppWrapper.
// usable filters out rules that cannot act (not compiled, being deleted).
func winningRule(rules []*wrapupv1alpha1.CompletionRule, awLabels, nsLabels map[string]string, usable func(*wrapupv1alpha1.CompletionRule) bool) *wrapupv1alpha1.CompletionRule {
	var best *wrapupv1alpha1.CompletionRule
	for _, r := range rules {
		if !r.DeletionTimestamp.IsZero() || !ruleMatches(r, awLabels, nsLabels) || (usable != nil && !usable(r)) {
			continue
		}
		if best == nil || better(r, best) {
			best = r
		}
	}
	return best
}

// triggerRef is the component that decides for an AppWrapper.
type triggerRef struct {
	// Index of the component in spec.components.
	Index int
	// Kind of the component.
	Kind schema.GroupKind
	// Name of the live object, in the AppWrapper's namespace; empty while the
	// template uses generateName and the AppWrapper controller has not yet
	// recorded the name it created.
	Name string
}

// componentMeta is the part of a component template that finding the
// trigger needs.
type componentMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name         string `json:"name"`
		GenerateName string `json:"generateName"`
	} `json:"metadata"`
}

// noTriggerError says why an AppWrapper has no trigger under a rule.
type noTriggerError struct{ reason, message string }

func (e *noTriggerError) Error() string { return e.message }

const (
	reasonNoTrigger        = "NoTrigger"
	reasonAmbiguousTrigger = "AmbiguousTrigger"
)

// findTrigger finds the one component of aw that rule's trigger names (or,
// with no trigger kind, the one annotated as the trigger).
func findTrigger(aw *awv1beta2.AppWrapper, rule *wrapupv1alpha1.CompletionRule) (triggerRef, error) {
	t := rule.Spec.Trigger
	var found []triggerRef
	var bad []string
	for i := range aw.Spec.Components {
		c := &aw.Spec.Components[i]
		if t.Kind == "" && !strings.EqualFold(c.Annotations[wrapupv1alpha1.TriggerAnnotation], "true") {
			continue
		}
		var m componentMeta
		if err := json.Unmarshal(c.Template.Raw, &m); err != nil || m.Kind == "" || m.APIVersion == "" {
			bad = append(bad, fmt.Sprintf("component %d has no apiVersion/kind", i))
			continue
		}
		gv, err := schema.ParseGroupVersion(m.APIVersion)
		if err != nil {
			bad = append(bad, fmt.Sprintf("component %d has a bad apiVersion %q", i, m.APIVersion))
			continue
		}
		gk := schema.GroupKind{Group: gv.Group, Kind: m.Kind}
		if t.Kind != "" && (gk.Group != t.APIGroup || gk.Kind != t.Kind || (t.Name != "" && m.Metadata.Name != t.Name)) {
			continue
		}
		name := m.Metadata.Name
		if name == "" && i < len(aw.Status.ComponentStatus) {
			name = aw.Status.ComponentStatus[i].Name
		}
		found = append(found, triggerRef{Index: i, Kind: gk, Name: name})
	}
	want := fmt.Sprintf("a component annotated %s: \"true\"", wrapupv1alpha1.TriggerAnnotation)
	if t.Kind != "" {
		want = fmt.Sprintf("a %s component", schema.GroupKind{Group: t.APIGroup, Kind: t.Kind})
		if t.Name != "" {
			want += fmt.Sprintf(" named %q", t.Name)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		msg := fmt.Sprintf("rule %s wants %s as the trigger, and the AppWrapper has none", rule.Name, want)
		if len(bad) > 0 {
			msg += " (" + strings.Join(bad, "; ") + ")"
		}
		return triggerRef{}, &noTriggerError{reason: reasonNoTrigger, message: msg}
	default:
		idx := make([]string, len(found))
		for i, f := range found {
			idx[i] = fmt.Sprint(f.Index)
		}
		return triggerRef{}, &noTriggerError{reason: reasonAmbiguousTrigger, message: fmt.Sprintf(
			"rule %s wants %s as the trigger, and the AppWrapper has %d (components %s): name one with trigger.name or annotate one",
			rule.Name, want, len(found), strings.Join(idx, ", "))}
	}
}
