package celpolicies

import (
	"context"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wrapup-dev/wrapup/api/v1alpha1"
)

func TestObjectFields(t *testing.T) {
	custom := schema.GroupKind{Group: "example.com", Kind: "EvalRun"}
	tests := []struct {
		name string
		spec v1alpha1.CompletionRuleSpec
		gk   schema.GroupKind
		want Fields
	}{
		{"built-ins for Job", v1alpha1.CompletionRuleSpec{}, gkJob, FieldsOf("status")},
		{"built-ins for a kind without them", v1alpha1.CompletionRuleSpec{Success: "true"}, custom, Fields{}},
		{"select", v1alpha1.CompletionRuleSpec{Success: "object.status.phase == 'Done'"}, custom, FieldsOf("status")},
		{"has", v1alpha1.CompletionRuleSpec{Success: "has(object.spec) && !has(object.status.x)"}, custom, FieldsOf("spec", "status")},
		{"optional select and index", v1alpha1.CompletionRuleSpec{Success: `object.?status.orValue({}).size() > 0 || object["spec"] != null || object[?"data"].hasValue()`}, custom, FieldsOf("data", "spec", "status")},
		{"metadata is a field like any", v1alpha1.CompletionRuleSpec{Success: "object.metadata.labels['done'] == 'true'"}, custom, FieldsOf("metadata")},
		{"whole object in a comprehension", v1alpha1.CompletionRuleSpec{Success: "object.exists(k, k == 'status')"}, custom, AllFields},
		{"whole object compared", v1alpha1.CompletionRuleSpec{Success: "object == {}"}, custom, AllFields},
		{"computed key", v1alpha1.CompletionRuleSpec{Success: "object['st' + 'atus'] != null"}, custom, AllFields},
		{"inside a macro", v1alpha1.CompletionRuleSpec{Success: "[1].all(i, object.status.n >= i)"}, custom, FieldsOf("status")},
		{"the root-scoped name, where a comprehension shadows it", v1alpha1.CompletionRuleSpec{Success: "[1].all(object, .object.spec.n >= object)"}, custom, FieldsOf("spec")},
		{"the root-scoped name, whole", v1alpha1.CompletionRuleSpec{Success: "[1].all(object, .object == {})"}, custom, AllFields},
		{"through variables", v1alpha1.CompletionRuleSpec{
			Variables: []v1alpha1.Variable{{Name: "w", Expression: "object.spec.workers"}},
			Success:   "variables.w > 0 && object.status.done",
		}, custom, FieldsOf("spec", "status")},
		{"message", v1alpha1.CompletionRuleSpec{Success: "true", Message: "string(object.status.x) + object.metadata.name"}, custom, FieldsOf("metadata", "status")},
		{"own success, built-in failure", v1alpha1.CompletionRuleSpec{Success: "object.spec.x == 1"}, gkJob, FieldsOf("spec", "status")},
		{"appWrapper fields are not the object's", v1alpha1.CompletionRuleSpec{Success: "appWrapper.spec.components.size() > 0"}, custom, Fields{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compile(&tc.spec)
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			if got := p.ObjectFields(tc.gk); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ObjectFields = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestAppWrapperFields(t *testing.T) {
	for expr, want := range map[string]Fields{
		"object.status.done":                                  {},
		"appWrapper.status.phase == 'Running'":                FieldsOf("status"),
		"appWrapper.spec.components.size() > 1":               FieldsOf("spec"),
		"appWrapper.metadata.labels['x'] == 'y'":              FieldsOf("metadata"),
		"appWrapper.exists(k, k == 'spec')":                   AllFields,
		"has(appWrapper.status) && object.status.phase == ''": FieldsOf("status"),
	} {
		p, err := Compile(&v1alpha1.CompletionRuleSpec{Success: expr})
		if err != nil {
			t.Fatalf("Compile(%q): %v", expr, err)
		}
		if got := p.AppWrapperFields(); !reflect.DeepEqual(got, want) {
			t.Errorf("AppWrapperFields(%q) = %+v, want %+v", expr, got, want)
		}
	}
}

func TestAppWrapperMetadataFields(t *testing.T) {
	for expr, want := range map[string]Fields{
		"object.status.done":                                                  {},
		"appWrapper.status.phase == 'Running'":                                {},
		"appWrapper.metadata.labels['x'] == 'y'":                              FieldsOf("labels"),
		"appWrapper.metadata.name == 'a' && has(appWrapper.metadata.uid)":     FieldsOf("name", "uid"),
		"appWrapper['metadata'].?annotations.orValue({}).size() > 0":          FieldsOf("annotations"),
		"appWrapper.metadata.exists(k, k == 'annotations')":                   AllFields,
		"size(appWrapper.metadata) > 0":                                       AllFields,
		"appWrapper.exists(k, k == 'spec')":                                   AllFields,
		"[appWrapper][0].metadata.labels.size() > 0":                          AllFields,
		"object.metadata.annotations.size() > 0":                              {},
		"appWrapper.metadata.labels.exists(k, appWrapper.metadata.name == k)": FieldsOf("labels", "name"),
	} {
		p, err := Compile(&v1alpha1.CompletionRuleSpec{Success: expr})
		if err != nil {
			t.Fatalf("Compile(%q): %v", expr, err)
		}
		if got := p.AppWrapperMetadataFields(); !reflect.DeepEqual(got, want) {
			t.Errorf("AppWrapperMetadataFields(%q) = %+v, want %+v", expr, got, want)
		}
	}
}

func TestFieldsSetOperations(t *testing.T) {
	a, b := FieldsOf("status", "spec", "status"), FieldsOf("metadata")
	if !reflect.DeepEqual(a.Names, []string{"spec", "status"}) {
		t.Errorf("FieldsOf sorts and dedups: %v", a.Names)
	}
	u := a.Union(b)
	if !u.Covers(a) || !u.Covers(b) || a.Covers(u) || u.String() != "metadata,spec,status" {
		t.Errorf("Union = %v", u)
	}
	if !AllFields.Covers(u) || u.Covers(AllFields) || !u.Covers(Fields{}) || !(Fields{}).Empty() || AllFields.Empty() {
		t.Error("AllFields and the empty set")
	}
	if !reflect.DeepEqual(a.Names, []string{"spec", "status"}) {
		t.Errorf("Union changed its receiver: %v", a.Names)
	}
	obj := map[string]any{"apiVersion": "v1", "kind": "K", "metadata": map[string]any{}, "spec": 1, "status": 2, "data": 3}
	FieldsOf("status").Keep(obj)
	if !reflect.DeepEqual(obj, map[string]any{"apiVersion": "v1", "kind": "K", "metadata": map[string]any{}, "status": 2}) {
		t.Errorf("Keep left %v", obj)
	}
}

// TestKeptFieldsEvaluateTheSame evaluates user rules on a whole object and
// on what an informer keeps for them: the results must be the same.
func TestKeptFieldsEvaluateTheSame(t *testing.T) {
	custom := schema.GroupKind{Group: "example.com", Kind: "EvalRun"}
	obj := map[string]any{
		"apiVersion": "example.com/v1", "kind": "EvalRun",
		"metadata": map[string]any{"name": "r", "labels": map[string]any{"done": "true"}},
		"spec":     map[string]any{"workers": int64(3), "template": map[string]any{"big": "x"}},
		"status":   map[string]any{"phase": "Done", "finished": int64(3)},
	}
	for _, spec := range []v1alpha1.CompletionRuleSpec{
		{Success: "object.status.phase == 'Done'", Message: "'finished ' + string(object.status.finished)"},
		{Success: "object.status.finished >= object.spec.workers"},
		{Success: "has(object.spec.template) && object.metadata.labels.done == 'true'"},
		{Success: "!has(object.spec)"}, // false on both
		{Variables: []v1alpha1.Variable{{Name: "w", Expression: "object.spec.workers"}}, Success: "variables.w == 3"},
		{Success: "object.size() == 5"},
	} {
		p, err := Compile(&spec)
		if err != nil {
			t.Fatalf("Compile(%+v): %v", spec, err)
		}
		want, err := p.Evaluate(context.Background(), custom, obj, appWrapper())
		if err != nil {
			t.Fatalf("Evaluate(%q): %v", spec.Success, err)
		}
		kept := runtime.DeepCopyJSON(obj)
		p.ObjectFields(custom).Keep(kept)
		got, err := p.Evaluate(context.Background(), custom, kept, appWrapper())
		if err != nil || got != want {
			t.Errorf("%q on the kept fields %s: %+v, %v; on the whole object %+v", spec.Success, p.ObjectFields(custom), got, err, want)
		}
	}
}

// The fields of a rule over a built-in are read on every reconcile: no
// allocation.
func TestObjectFieldsDoesNotAllocate(t *testing.T) {
	p, err := Compile(&v1alpha1.CompletionRuleSpec{})
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _ = p.ObjectFields(gkJob) }); n != 0 {
		t.Errorf("ObjectFields allocates %v times", n)
	}
}
