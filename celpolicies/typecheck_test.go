package celpolicies

import (
	"strings"
	"testing"

	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// jobLikeSchema is the part of batch/v1 Job's published schema that the
// expressions below touch.
func jobLikeSchema() *spec.Schema {
	str := *spec.StringProperty()
	i32 := *spec.Int32Property()
	condition := spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"object"}, Properties: map[string]spec.Schema{
		"type": str, "status": str, "reason": str, "message": str,
	}}}
	return &spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"object"}, Properties: map[string]spec.Schema{
		"apiVersion": str,
		"kind":       str,
		"metadata": {SchemaProps: spec.SchemaProps{Type: []string{"object"}, Properties: map[string]spec.Schema{
			"name": str, "namespace": str,
		}}},
		"status": {SchemaProps: spec.SchemaProps{Type: []string{"object"}, Properties: map[string]spec.Schema{
			"succeeded":  i32,
			"failed":     i32,
			"conditions": {SchemaProps: spec.SchemaProps{Type: []string{"array"}, Items: &spec.SchemaOrArray{Schema: &condition}}},
		}}},
	}}}
}

func TestTypeCheck(t *testing.T) {
	tests := []struct {
		name       string
		spec       v1alpha1.CompletionRuleSpec
		wantFields []string
		wantText   string
	}{
		{
			name: "well-typed expressions",
			spec: v1alpha1.CompletionRuleSpec{
				Variables: []v1alpha1.Variable{{Name: "done", Expression: "object.status.?succeeded.orValue(0)"}},
				Success:   "variables.done >= 1",
				Failure:   "object.status.?conditions.orValue([]).exists(c, c.type == 'Failed' && c.status == 'True')",
				Message:   "object.metadata.name + ' finished'",
			},
		},
		{
			name:       "a success of type int, and a message of type bool",
			spec:       v1alpha1.CompletionRuleSpec{Success: "object.?status.?succeeded.orValue(0)", Message: "object.?status.?failed.orValue(0) > 0"},
			wantFields: []string{"spec.success", "spec.message"},
			wantText:   "must evaluate to",
		},
		{
			name:       "an optional field read without ? or has(), and the same guarded",
			spec:       v1alpha1.CompletionRuleSpec{Success: "object.status.conditions.exists(c, c.type == 'Complete')", Failure: "has(object.status.conditions) && object.status.conditions.exists(c, c.type == 'Failed')"},
			wantFields: []string{"spec.success"},
			wantText:   "1:14: conditions is optional in the Job schema: object.status.conditions errors (no such key) on a Job without it",
		},
		{
			name: "has() guards where CEL's logic says the field is there, and only there",
			spec: v1alpha1.CompletionRuleSpec{
				Success: "object.status.failed > 0 && has(object.status.failed)",
				Failure: "!has(object.status.failed) || object.status.failed > 0",
				Message: "has(object.status.failed) ? string(object.status.failed) : 'none'",
				Variables: []v1alpha1.Variable{
					{Name: "wrong", Expression: "has(object.status.failed) || object.status.failed > 0"},
					{Name: "elsewhere", Expression: "object.status.succeeded > 0 && has(object.status.failed)"},
				},
			},
			wantFields: []string{"spec.variables[0].expression", "spec.variables[1].expression"},
			wantText:   "is optional in the Job schema",
		},
		{
			name:       "a misspelt status field",
			spec:       v1alpha1.CompletionRuleSpec{Success: "object.status.succeded > 0"},
			wantFields: []string{"spec.success"},
			wantText:   "succeded",
		},
		{
			name:       "a misspelt field in a variable, and not again in its users",
			spec:       v1alpha1.CompletionRuleSpec{Variables: []v1alpha1.Variable{{Name: "n", Expression: "object.status.succeded"}}, Success: "variables.n > 0"},
			wantFields: []string{"spec.variables[0].expression"},
		},
		{
			name:       "comparing a number with a string",
			spec:       v1alpha1.CompletionRuleSpec{Failure: "object.status.failed == 'yes'"},
			wantFields: []string{"spec.failure"},
		},
		{
			name:       "a condition field that does not exist",
			spec:       v1alpha1.CompletionRuleSpec{Message: "object.status.conditions[0].lastReason"},
			wantFields: []string{"spec.message"},
			wantText:   "lastReason",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := TypeCheck(&tc.spec, jobLikeSchema(), "Job")
			var fields []string
			for _, w := range got {
				fields = append(fields, w.FieldRef)
				if tc.wantText != "" && !strings.Contains(w.Warning, tc.wantText) {
					t.Errorf("warning %q does not mention %q", w.Warning, tc.wantText)
				}
			}
			if strings.Join(fields, ",") != strings.Join(tc.wantFields, ",") {
				t.Errorf("warnings on %v, want %v: %+v", fields, tc.wantFields, got)
			}
		})
	}
}

func TestTypeCheckWithoutSchema(t *testing.T) {
	if got := TypeCheck(&v1alpha1.CompletionRuleSpec{Success: "object.anything"}, nil, "Thing"); got != nil {
		t.Errorf("TypeCheck without a schema = %v, want nothing", got)
	}
}

// A nested comprehension over a list the schema does not bound costs more
// than one evaluation may, for large enough triggers: the type check says
// so when the rule is compiled, as CRD validation would, instead of the
// rule failing only at run time. A single walk of the list is fine.
func TestTypeCheckEstimatesCost(t *testing.T) {
	single := "has(object.status.conditions) && object.status.conditions.exists(c, c.type == 'Complete')"
	nested := "has(object.status.conditions) && object.status.conditions.all(a, object.status.conditions.exists(b, b.type == a.type))"
	if w := TypeCheck(&v1alpha1.CompletionRuleSpec{Success: single}, jobLikeSchema(), "Job"); len(w) != 0 {
		t.Errorf("one walk of the conditions: warnings %+v", w)
	}
	// A size the schema does not give (an optional chain) says nothing of
	// the cost: it was reported as 1.8e18 once.
	optional := v1alpha1.CompletionRuleSpec{Message: "'benchmark ' + object.metadata.name + ': ' + string(object.status.?succeeded.orValue(0)) + ' succeeded'"}
	if w := TypeCheck(&optional, jobLikeSchema(), "Job"); len(w) != 0 {
		t.Errorf("string() of an optional field: warnings %+v", w)
	}
	if w := TypeCheck(&v1alpha1.CompletionRuleSpec{Success: "lists.range(10000000).all(i, i >= 0)"}, jobLikeSchema(), "Job"); len(w) != 1 {
		t.Errorf("10^7 iterations: warnings %+v, want one on the cost", w)
	}
	// A costly walk beside an unknown size is still reported: the
	// estimate with the unknown taken as 1 is a lower bound.
	mixed := v1alpha1.CompletionRuleSpec{Message: "'run ' + string(object.status.?succeeded.orValue(0)) + (has(object.status.conditions) && object.status.conditions.all(c, object.status.conditions.all(d, c.type != d.type)) ? ' ok' : ' dup')"}
	if w := TypeCheck(&mixed, jobLikeSchema(), "Job"); len(w) != 1 {
		t.Errorf("a nested walk beside an optional field: warnings %+v, want one on the cost", w)
	}
	w := TypeCheck(&v1alpha1.CompletionRuleSpec{Success: nested}, jobLikeSchema(), "Job")
	if len(w) != 1 || w[0].FieldRef != "spec.success" || !strings.Contains(w[0].Warning, "estimated worst-case cost") {
		t.Errorf("nested walks: warnings %+v, want one on the cost", w)
	}
}
