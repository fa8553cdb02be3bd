package schemas

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
)

// TestCostWarningsMeanSomething: against the shipped schemas, the built-in
// expressions and every form the docs show for reading conditions get no
// cost warning (one walk of a list); a walk of a list inside a walk of it
// does, and the warning names the two walks.
func TestCostWarningsMeanSomething(t *testing.T) {
	job := schema.GroupKind{Group: "batch", Kind: "Job"}
	gvk, _ := Preferred(job)
	jobSchema, err := Resolve(gvk)
	if err != nil {
		t.Fatal(err)
	}
	for _, gk := range celpolicies.BuiltinKinds() {
		gvk, ok := Preferred(gk)
		if !ok {
			continue
		}
		s, err := Resolve(gvk)
		if err != nil {
			t.Fatal(err)
		}
		success, failure, _ := celpolicies.BuiltinFor(gk)
		if w := celpolicies.TypeCheck(&v1alpha1.CompletionRuleSpec{Success: success, Failure: failure}, s, gk.Kind); len(w) != 0 {
			t.Errorf("the built-in expressions of %s: warnings %+v", gk, w)
		}
	}
	for _, e := range []string{
		"has(object.status.conditions) && object.status.conditions.exists(c, c.type == 'Complete' && c.status == 'True')",
		"object.status.conditions.filter(c, c.type == 'Complete').size() > 0",
		"object.?status.?conditions.orValue([]).exists(c, c.type == 'Complete' && c.status == 'True')",
		"object.status.conditions.exists(c, c.type == 'Failed' && c.reason == 'BackoffLimitExceeded' && c.message.contains('limit'))",
	} {
		w := celpolicies.TypeCheck(&v1alpha1.CompletionRuleSpec{Success: e}, jobSchema, "Job")
		if c := costWarnings(w); len(c) != 0 {
			t.Errorf("%s: cost warnings %+v", e, c)
		}
		// Its real risk is reading conditions without ? or has(): that
		// is the warning, when it does.
		unguarded := strings.HasPrefix(e, "object.status.conditions")
		if optional := len(w) - len(costWarnings(w)); optional != map[bool]int{true: 1, false: 0}[unguarded] {
			t.Errorf("%s: warnings %+v, want %v an optional-field warning", e, w, unguarded)
		}
	}
	nested := "has(object.status.conditions) && object.status.conditions.exists(c, object.status.conditions.exists(d, d.type == c.type && d.status != c.status))"
	w := celpolicies.TypeCheck(&v1alpha1.CompletionRuleSpec{Success: nested}, jobSchema, "Job")
	if len(w) != 1 || !strings.Contains(w[0].Warning, "a walk of object.status.conditions inside a walk of object.status.conditions") {
		t.Errorf("a nested walk: warnings %+v, want one naming the two walks", w)
	}
}

// costWarnings are the cost warnings among w.
func costWarnings(w []v1alpha1.ExpressionWarning) []v1alpha1.ExpressionWarning {
	var out []v1alpha1.ExpressionWarning
	for _, x := range w {
		if strings.Contains(x.Warning, "estimated worst-case cost") {
			out = append(out, x)
		}
	}
	return out
}
