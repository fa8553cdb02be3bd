package decision

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
)

// Ref is the component that decides for an AppWrapper.
type Ref struct {
	Index   int // in spec.components
	Kind    schema.GroupKind
	Version string // the template's
	// Name is the live object's; "" while the template uses generateName
	// and the AppWrapper controller has not yet recorded the name it
	// created.
	Name string
	// Template is the template's name, or its generateName followed by "*":
	// the component's identity, whatever object is created for it.
	Template  string
	Annotated bool // the rule names no kind, and the component is annotated wrapup.dev/trigger
}

// String names the component as records keep it ("batch/Job/benchmark",
// "/Pod/worker-*" for generateName: worker-).
func (r Ref) String() string { return r.Kind.Group + "/" + r.Kind.Kind + "/" + r.Template }

// GroupVersionKind is the template's.
func (r Ref) GroupVersionKind() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: r.Kind.Group, Version: r.Version, Kind: r.Kind.Kind}
}

// parsedComponent is what a decision reads of one of an AppWrapper's components.
type parsedComponent struct {
	index              int
	kind               schema.GroupKind
	version            string
	name, generateName string
	// annotated: wrapup.dev/trigger on the component, or on its template's
	// own metadata, where people annotate Kubernetes objects.
	annotated bool
	bad       string // why the template names no kind; "" when it does
}

// parseComponents reads aw's components once for every rule.
func parseComponents(aw *awv1beta2.AppWrapper) []parsedComponent {
	out := make([]parsedComponent, len(aw.Spec.Components))
	for i := range aw.Spec.Components {
		c, pc := &aw.Spec.Components[i], &out[i]
		pc.index, pc.annotated = i, Truthy(c.Annotations[wrapupv1alpha1.TriggerAnnotation])
		var m struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name         string            `json:"name"`
				GenerateName string            `json:"generateName"`
				Annotations  map[string]string `json:"annotations"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(c.Template.Raw, &m); err != nil || m.Kind == "" || m.APIVersion == "" {
			pc.bad = fmt.Sprintf("component %d has no apiVersion/kind", i)
			continue
		}
		gv, err := schema.ParseGroupVersion(m.APIVersion)
		if err != nil {
			pc.bad = fmt.Sprintf("component %d has a bad apiVersion %q", i, m.APIVersion)
			continue
		}
		pc.kind, pc.version = schema.GroupKind{Group: gv.Group, Kind: m.Kind}, gv.Version
		pc.name, pc.generateName = m.Metadata.Name, m.Metadata.GenerateName
		pc.annotated = pc.annotated || Truthy(m.Metadata.Annotations[wrapupv1alpha1.TriggerAnnotation])
	}
	return out
}

// wants says whether c is a candidate trigger of rule: of its kind (and
// name), or, for a rule that names no kind, annotated.
func wants(rule *wrapupv1alpha1.CompletionRule, c *parsedComponent) bool {
	t := rule.Spec.Trigger
	if t.Kind == "" {
		return c.annotated
	}
	return c.bad == "" && c.kind.Group == t.APIGroup && c.kind.Kind == t.Kind && (t.Name == "" || c.name == t.Name)
}

// NoTrigger says why an AppWrapper has no trigger under a rule.
type NoTrigger struct {
	// Reason is the Event's: NoTrigger, AmbiguousTrigger or TooManyTriggers.
	Reason  string
	Message string
	// Quiet: the rule simply does not apply (it names no kind, and no
	// component is annotated), which is worth no Event.
	Quiet bool
}

// Truthy says whether an annotation value opts in: "true" in any case, and
// the other usual spellings of yes.
func Truthy(v string) bool {
	return slices.Contains([]string{"true", "yes", "1", "on"}, strings.ToLower(strings.TrimSpace(v)))
}

// FindTrigger finds the one component of aw that rule's trigger names (or,
// with no trigger kind, the one annotated as the trigger), as FindTriggers
// does under the policy One, whatever the rule's policy.
func FindTrigger(aw *awv1beta2.AppWrapper, rule *wrapupv1alpha1.CompletionRule) (Ref, *NoTrigger) {
	refs, nt := findTriggers(aw, rule, wrapupv1alpha1.TriggerPolicyOne)
	if nt != nil {
		return Ref{}, nt
	}
	return refs[0], nil
}

// FindTriggers finds the candidates of rule's trigger in aw. Under the
// policy One there is exactly one: of several, the one annotated as the
// trigger, if one is; under All and Any, one to MaxTriggers.
func FindTriggers(aw *awv1beta2.AppWrapper, rule *wrapupv1alpha1.CompletionRule) ([]Ref, *NoTrigger) {
	return findTriggers(aw, rule, Policy(rule))
}

func findTriggers(aw *awv1beta2.AppWrapper, rule *wrapupv1alpha1.CompletionRule, policy wrapupv1alpha1.TriggerPolicy) ([]Ref, *NoTrigger) {
	t := rule.Spec.Trigger
	var found, marked []Ref // marked: annotated among the components of the kind the rule names
	var bad []string
	annotated := 0
	for _, c := range parseComponents(aw) {
		if t.Kind == "" {
			if !c.annotated {
				continue
			}
			annotated++
		}
		if c.bad != "" {
			bad = append(bad, c.bad)
			continue
		}
		if !wants(rule, &c) {
			continue
		}
		name, tmpl := c.name, c.name
		if name == "" {
			tmpl = c.generateName + "*"
			if c.index < len(aw.Status.ComponentStatus) {
				name = aw.Status.ComponentStatus[c.index].Name
			}
		}
		found = append(found, Ref{Index: c.index, Kind: c.kind, Version: c.version, Name: name, Template: tmpl, Annotated: t.Kind == ""})
		if c.annotated && t.Kind != "" {
			marked = append(marked, found[len(found)-1])
		}
	}
	switch {
	case len(found) == 0:
		msg := fmt.Sprintf("rule %s wants %s as the trigger, and the AppWrapper has none", rule.Name, wanted(rule))
		if len(bad) > 0 {
			msg += " (" + strings.Join(bad, "; ") + ")"
		}
		return nil, &NoTrigger{Reason: wrapupv1alpha1.ReasonNoTrigger, Message: msg, Quiet: t.Kind == "" && annotated == 0}
	case len(found) > 1 && policy == wrapupv1alpha1.TriggerPolicyOne && len(marked) == 1:
		return marked, nil
	case len(found) > 1 && policy == wrapupv1alpha1.TriggerPolicyOne:
		idx := make([]string, len(found))
		for i, f := range found {
			idx[i] = fmt.Sprint(f.Index)
		}
		return nil, &NoTrigger{Reason: wrapupv1alpha1.ReasonAmbiguousTrigger, Message: fmt.Sprintf(
			"rule %s wants %s as the trigger, and the AppWrapper has %d (components %s): name one with trigger.name or annotate one, or set trigger.policy to All or Any",
			rule.Name, wanted(rule), len(found), strings.Join(idx, ", "))}
	case len(found) > wrapupv1alpha1.MaxTriggers:
		return nil, &NoTrigger{Reason: wrapupv1alpha1.ReasonTooManyTriggers, Message: fmt.Sprintf(
			"rule %s wants %s as the triggers (policy %s), and the AppWrapper has %d: more than the %d wrapup decides on; nothing is recorded or deleted",
			rule.Name, wanted(rule), policy, len(found), wrapupv1alpha1.MaxTriggers)}
	}
	return found, nil
}

// Policy is rule's trigger policy, One when unset.
func Policy(rule *wrapupv1alpha1.CompletionRule) wrapupv1alpha1.TriggerPolicy {
	if p := rule.Spec.Trigger.Policy; p != "" {
		return p
	}
	return wrapupv1alpha1.TriggerPolicyOne
}

func wanted(rule *wrapupv1alpha1.CompletionRule) string {
	t := rule.Spec.Trigger
	want := fmt.Sprintf("a component annotated %s: \"true\"", wrapupv1alpha1.TriggerAnnotation)
	if t.Kind != "" {
		want = fmt.Sprintf("%s %s component", article(t.Kind), schema.GroupKind{Group: t.APIGroup, Kind: t.Kind})
		if t.Name != "" {
			want += fmt.Sprintf(" named %q", t.Name)
		}
	}
	return want
}

// OwnedBy says whether aw controls obj: only then is obj a component of aw
// rather than a same-named object someone else made.
func OwnedBy(obj metav1.Object, aw *awv1beta2.AppWrapper) bool {
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.UID == aw.UID && ref.Kind == "AppWrapper" &&
		schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind).Group == awv1beta2.GroupVersion.Group
}

// Truncate cuts s to at most n bytes, on a character boundary, marking the cut.
func Truncate(s string, n int) string { return celpolicies.Truncate(s, n) }

func article(word string) string {
	if word != "" && strings.ContainsRune("AEIOUaeiou", rune(word[0])) {
		return "an"
	}
	return "a"
}
