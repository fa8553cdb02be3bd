package decision

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
)

// Rule is a CompletionRule with its compiled policy, or the error of
// compiling it (Policy is then nil).
type Rule struct {
	Rule   *wrapupv1alpha1.CompletionRule
	Policy *celpolicies.Policy
	Err    error
}

// KindState is how far wrapup can read the objects of a trigger kind.
type KindState string

const (
	KindPending      KindState = "Pending"      // its informer has not listed yet (or not started): wait, without a warning
	KindWatched      KindState = "Watched"      // its informer has listed
	KindNotServed    KindState = "NotServed"    // its CRD is not installed, or was deleted
	KindNotWatchable KindState = "NotWatchable" // wrapup may not list and watch it (RBAC), or it is cluster-scoped
)

// Kind is the state of a trigger kind, and why.
type Kind struct {
	State   KindState
	Message string
}

// problem says why the triggers of kind gk (what, for people) cannot be
// acted on; "" when they can.
func (k Kind) problem(what string, gk schema.GroupKind) string {
	switch k.State {
	case KindNotServed:
		return fmt.Sprintf("%s kind %s is not served by the API server (is its CRD installed?)", what, gk)
	case KindNotWatchable:
		return fmt.Sprintf("wrapup cannot watch %s kind %s: %s", what, gk, k.Message)
	}
	return ""
}

// RuleStanding is how one CompletionRule stands for the AppWrapper.
type RuleStanding struct {
	Name     string
	Priority int32
	Ready    string // the rule's Ready condition as "Status/Reason", "" if unset
	Matches  bool   // the rule applies to the AppWrapper (selectRule)
	// Valid: the rule can act: it compiles, its selectors parse, and its
	// trigger kind (if it names one) can be watched.
	Valid bool
	Wins  bool // the rule decides; when it is not Valid, it blocks every rule below it
	Why   string
}

// selection is the outcome of choosing the rule that decides.
type selection struct {
	winner    *Rule          // the highest-priority matching rule, usable or not
	blocked   string         // why the winner cannot act; "" when it can
	standings []RuleStanding // every rule, in the order in which they would win
}

// labelsString renders labels as key=value, sorted; "none" for none.
func labelsString(set map[string]string) string {
	if len(set) == 0 {
		return "none"
	}
	return labels.Set(set).String()
}

// Better says whether rule a wins over rule b: the highest priority, ties
// to the name that sorts first.
func Better(a, b *wrapupv1alpha1.CompletionRule) bool {
	if a.Spec.Priority != b.Spec.Priority {
		return a.Spec.Priority > b.Spec.Priority
	}
	return a.Name < b.Name
}

// RuleKind is the trigger kind a rule names; empty for none.
func RuleKind(rule *wrapupv1alpha1.CompletionRule) schema.GroupKind {
	return schema.GroupKind{Group: rule.Spec.Trigger.APIGroup, Kind: rule.Spec.Trigger.Kind}
}

// unusable says why rule cannot act on anything; "" when it can.
func unusable(r *Rule, kinds map[schema.GroupKind]Kind) string {
	switch {
	case r.Err != nil:
		return "it does not compile: " + r.Err.Error()
	case r.Policy == nil:
		return "it is not compiled"
	}
	if gk := RuleKind(r.Rule); gk.Kind != "" {
		return kinds[gk].problem("its trigger", gk)
	}
	return ""
}

// selects says whether rule's selectors select the AppWrapper's labels and
// its namespace's. One that does not parse fails closed: it selects (so
// that the rule blocks, either or both broken), and broken says why.
func selects(rule *wrapupv1alpha1.CompletionRule, awLabels, nsLabels map[string]string) (awMatch, nsMatch bool, awSel, nsSel labels.Selector, broken string) {
	match := func(field string, sel *metav1.LabelSelector, set map[string]string) (bool, labels.Selector) {
		if sel == nil {
			return true, labels.Everything()
		}
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			broken = "its " + field + " does not parse: " + err.Error()
			return true, nil
		}
		return s.Matches(labels.Set(set)), s
	}
	nsMatch, nsSel = match("namespaceSelector", rule.Spec.NamespaceSelector, nsLabels)
	awMatch, awSel = match("appWrapperSelector", rule.Spec.AppWrapperSelector, awLabels)
	return awMatch, nsMatch, awSel, nsSel, broken
}

// selectRule chooses the rule that decides for aw in a namespace with
// nsLabels: the highest-priority rule that applies to it, whose selectors
// select it and which has a candidate trigger among its components (one of
// the kind it names, or an annotated one for a rule that names no kind;
// DESIGN 1a), so that one rule per kind finishes every kind it names. It
// fails closed: the highest-priority rule that applies decides even when
// it cannot act, and then blocks every rule below it, so that a typo in a
// rule that keeps failed runs never hands them to a rule that deletes
// them. Rules being deleted take no part.
func selectRule(rules []Rule, aw *awv1beta2.AppWrapper, nsLabels map[string]string, kinds map[schema.GroupKind]Kind) selection {
	awLabels, namespace := aw.Labels, aw.Namespace
	comps := parseComponents(aw)
	order := make([]*Rule, len(rules))
	for i := range rules {
		order[i] = &rules[i]
	}
	sort.SliceStable(order, func(i, j int) bool { return Better(order[i].Rule, order[j].Rule) })

	var sel selection
	sel.standings = make([]RuleStanding, 0, len(order))
	contenders := 0
	winnerAt := -1
	var tied []string // the matching valid rules of the winner's priority that lose by name
	for _, r := range order {
		rule := r.Rule
		s := RuleStanding{Name: rule.Name, Priority: rule.Spec.Priority}
		if c := apimeta.FindStatusCondition(rule.Status.Conditions, wrapupv1alpha1.ConditionReady); c != nil {
			s.Ready = string(c.Status) + "/" + c.Reason
		}
		why := unusable(r, kinds)
		awMatch, nsMatch, awSel, nsSel, broken := selects(rule, awLabels, nsLabels)
		if broken != "" {
			why = broken
		}
		s.Valid = why == ""
		s.Matches = awMatch && nsMatch
		switch {
		case !rule.DeletionTimestamp.IsZero():
			s.Why = "is being deleted"
		case !awMatch:
			s.Why = fmt.Sprintf("appWrapperSelector (%s) does not select the AppWrapper (labels: %s)",
				awSel, labelsString(awLabels))
		case !nsMatch:
			s.Why = fmt.Sprintf("namespaceSelector (%s) does not select namespace %s (labels: %s)",
				nsSel, namespace, labelsString(nsLabels))
		case !slices.ContainsFunc(comps, func(c parsedComponent) bool { return wants(rule, &c) }):
			s.Matches = false
			s.Why = fmt.Sprintf("does not apply: it wants %s as the trigger, and the AppWrapper has none", wanted(rule))
		case sel.winner == nil:
			sel.winner = r
			winnerAt = len(sel.standings)
			s.Wins = true
			contenders++
			if !s.Valid {
				sel.blocked = why
				s.Why = "blocks every lower-priority rule: it matches and is not usable, because " + why
			}
		case sel.blocked != "":
			s.Why = fmt.Sprintf("blocked by %s, which matches with a higher priority and is not usable", sel.winner.Rule.Name)
		case !s.Valid:
			s.Why = "is not usable (" + why + "), and loses to " + sel.winner.Rule.Name + " anyway"
		case rule.Spec.Priority < sel.winner.Rule.Spec.Priority:
			contenders++
			s.Why = fmt.Sprintf("loses to %s: lower priority (%d < %d)", sel.winner.Rule.Name, rule.Spec.Priority, sel.winner.Rule.Spec.Priority)
		default:
			contenders++
			tied = append(tied, rule.Name)
			s.Why = fmt.Sprintf("loses to %s: same priority %d, and %s sorts first by name", sel.winner.Rule.Name, rule.Spec.Priority, sel.winner.Rule.Name)
		}
		sel.standings = append(sel.standings, s)
	}
	if winnerAt >= 0 {
		w := sel.standings[winnerAt]
		if sel.blocked == "" {
			w.Why = "wins: the only matching valid rule"
			switch {
			case len(tied) > 0:
				w.Why = fmt.Sprintf("wins: the highest priority (%d) is shared with %s, and %s sorts first by name", w.Priority, strings.Join(tied, ", "), w.Name)
			case contenders > 1:
				w.Why = fmt.Sprintf("wins: highest priority of %d matching valid rules", contenders)
			}
		}
		sel.standings = slices.Insert(slices.Delete(sel.standings, winnerAt, winnerAt+1), 0, w)
	}
	return sel
}

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
