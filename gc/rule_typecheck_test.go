package gc

import (
	"context"
	"testing"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/validation/spec"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

type countingResolver struct{ calls int }

func (c *countingResolver) ResolveSchema(schema.GroupVersionKind) (*spec.Schema, error) {
	c.calls++
	return &spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"object"}, Properties: map[string]spec.Schema{
		"status": {SchemaProps: spec.SchemaProps{Type: []string{"object"}}},
	}}}, nil
}

// TestTypeCheckIsReused: a rule is reconciled again whenever the AppWrappers
// it decides for change; its type check (a schema resolved, every
// expression checked) is made again only when the rule, its kind's version
// or the schemas (a CRD changed) did.
func TestTypeCheckIsReused(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}
	mapper := apimeta.NewDefaultRESTMapper([]schema.GroupVersion{gvk.GroupVersion()})
	mapper.Add(gvk, apimeta.RESTScopeNamespace)
	schemas := &countingResolver{}
	r := &ruleReconciler{Mapper: mapper, Schemas: schemas}
	rule := &wrapupv1alpha1.CompletionRule{ObjectMeta: metav1.ObjectMeta{Name: "jobs", UID: "uid-1", Generation: 1},
		Spec: wrapupv1alpha1.CompletionRuleSpec{Trigger: wrapupv1alpha1.TriggerSpec{APIGroup: "batch", Kind: "Job"}}}
	gk := gvk.GroupKind()
	ctx := context.Background()

	first := r.typeCheck(ctx, rule, gk)
	if first == nil || schemas.calls != 1 {
		t.Fatalf("first check: %v, %d schema resolutions", first, schemas.calls)
	}
	first.Schema = "changed by the caller"
	if again := r.typeCheck(ctx, rule, gk); schemas.calls != 1 || again.Schema != gvk.String() {
		t.Fatalf("the same rule again: %d schema resolutions (want 1), schema %q", schemas.calls, again.Schema)
	}
	rule.Generation = 2
	if r.typeCheck(ctx, rule, gk); schemas.calls != 2 {
		t.Fatalf("a new generation: %d schema resolutions, want 2", schemas.calls)
	}
	r.schemaEpoch.Add(1) // a CRD changed
	if r.typeCheck(ctx, rule, gk); schemas.calls != 3 {
		t.Fatalf("after a CRD changed: %d schema resolutions, want 3", schemas.calls)
	}
	rule.UID = "uid-2" // deleted and created again under the same name
	if r.typeCheck(ctx, rule, gk); schemas.calls != 4 {
		t.Fatalf("a rule created again: %d schema resolutions, want 4", schemas.calls)
	}
}
