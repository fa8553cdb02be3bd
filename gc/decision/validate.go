package decision

import (
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
)

// Problem is one thing wrong with a rule outside its expressions, at a
// field: what the API server, the admission webhook and the controller
// refuse, said the same way by each (and by kubectl wrapup lint).
type Problem struct {
	Field   string // as spec.trigger.kind
	Value   string
	Message string // on one line
	// Fatal: the rule cannot work (refused at admission); a near miss that
	// may be a kind of another group is not.
	Fatal bool
}

// SelectorProblems are the rule's selectors that do not parse, as the
// controller parses them: such a rule fails closed (see selects).
func SelectorProblems(rule *wrapupv1alpha1.CompletionRule) []Problem {
	var out []Problem
	for _, s := range []struct {
		field string
		sel   *metav1.LabelSelector
	}{{"spec.appWrapperSelector", rule.Spec.AppWrapperSelector}, {"spec.namespaceSelector", rule.Spec.NamespaceSelector}} {
		if s.sel == nil {
			continue
		}
		if _, err := metav1.LabelSelectorAsSelector(s.sel); err != nil {
			out = append(out, Problem{Field: s.field, Value: metav1.FormatLabelSelector(s.sel), Message: strings.Join(strings.Fields(err.Error()), " "), Fatal: true})
		}
	}
	return out
}

// RuleProblems are SelectorProblems, a name the API server refuses for a
// custom resource (not a DNS subdomain), and a trigger kind that cannot be
// in the group it names (kindProblems).
func RuleProblems(rule *wrapupv1alpha1.CompletionRule) []Problem {
	out := SelectorProblems(rule)
	if rule.Name != "" {
		if errs := validation.IsDNS1123Subdomain(rule.Name); len(errs) > 0 {
			out = append(out, Problem{Field: "metadata.name", Value: rule.Name, Fatal: true,
				Message: "the API server refuses this name: " + strings.Join(errs, "; ")})
		}
	}
	out = append(out, kindProblems(rule.Spec.Trigger)...)
	return out
}

// kindProblems checks a trigger's group and kind against Kubernetes' own
// groups and the kinds wrapup has built-in expressions for: a kind not of
// Kubernetes' group it names, a built-in kind of that name in another
// group ("Job is in batch"), and a near miss of a built-in kind's name.
func kindProblems(t wrapupv1alpha1.TriggerSpec) []Problem {
	if t.Kind == "" {
		return nil
	}
	gk := schema.GroupKind{Group: t.APIGroup, Kind: t.Kind}
	if _, _, ok := celpolicies.BuiltinFor(gk); ok {
		return nil
	}
	// Kubernetes' own groups (core, batch, apps, ...) have a fixed set of
	// kinds: any other kind there can never be served.
	core, known := kubernetesKind(gk)
	if core && known {
		return nil
	}
	var same, near []schema.GroupKind
	for _, b := range celpolicies.BuiltinKinds() {
		switch {
		case b.Kind == t.Kind:
			same = append(same, b)
		case strings.EqualFold(b.Kind, t.Kind) || editDistance(strings.ToLower(b.Kind), strings.ToLower(t.Kind)) <= 2:
			near = append(near, b)
		}
	}
	sort.Slice(near, func(i, j int) bool { return near[i].String() < near[j].String() })
	switch {
	case len(same) > 0:
		b := same[0]
		msg := fmt.Sprintf("%s is in the %s; did you mean apiGroup: %s?", t.Kind, groupName(b.Group), b.Group)
		if core {
			msg = fmt.Sprintf("Kubernetes' %s has no kind %s; %s is in the %s: did you mean apiGroup: %s?", groupName(t.APIGroup), t.Kind, t.Kind, groupName(b.Group), b.Group)
		}
		// In the core group it can never be served; in another group it
		// may be a custom kind of the same name.
		return []Problem{{Field: "spec.trigger.apiGroup", Value: t.APIGroup, Message: msg, Fatal: core}}
	case len(near) > 0:
		b := near[0]
		// Within the built-in kind's own group (kubeflow.org/PyTorchJobs)
		// it is a typo: such a rule would hold nothing, since a rule
		// applies only where it has a candidate.
		return []Problem{{Field: "spec.trigger.kind", Value: t.Kind, Fatal: core || b.Group == t.APIGroup,
			Message: fmt.Sprintf("no kind %s in the %s; did you mean %s (apiGroup: %s)?", t.Kind, groupName(t.APIGroup), b.Kind, b.Group)}}
	case core:
		return []Problem{{Field: "spec.trigger.kind", Value: t.Kind, Fatal: true,
			Message: fmt.Sprintf("Kubernetes' %s has no kind %s: set spec.trigger.apiGroup to the kind's group", groupName(t.APIGroup), t.Kind)}}
	}
	return nil
}

// kubernetesKind says whether gk's group is one of Kubernetes' own (the
// core group among them), whose kinds client-go knows, and gk one of them.
func kubernetesKind(gk schema.GroupKind) (group, kind bool) {
	for gvk := range clientgoscheme.Scheme.AllKnownTypes() {
		group = group || gvk.Group == gk.Group
		kind = kind || gvk.GroupKind() == gk
	}
	return group, kind
}

func groupName(g string) string {
	if g == "" {
		return "core group (apiGroup unset)"
	}
	return "group " + g
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
