package schemas

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wrapup-dev/wrapup/celpolicies"
)

// TestEveryBuiltinKindWithASchemaResolves: each shipped document resolves
// its kind, and the schema types the fields the built-in expressions read.
func TestEveryBuiltinKindWithASchemaResolves(t *testing.T) {
	for _, gvk := range []schema.GroupVersionKind{
		{Group: "batch", Version: "v1", Kind: "Job"},
		{Version: "v1", Kind: "Pod"},
		{Group: "jobset.x-k8s.io", Version: "v1alpha2", Kind: "JobSet"},
		{Group: "kubeflow.org", Version: "v1", Kind: "PyTorchJob"},
		{Group: "ray.io", Version: "v1", Kind: "RayJob"},
	} {
		s, err := Resolve(gvk)
		if err != nil {
			t.Fatalf("%s: %v", gvk, err)
		}
		if _, ok := s.Properties["status"]; !ok {
			t.Errorf("%s: the schema has no status", gvk)
		}
		if _, _, ok := celpolicies.BuiltinFor(gvk.GroupKind()); !ok {
			t.Errorf("%s has no built-in expressions: why ship it?", gvk)
		}
	}
	if _, err := Resolve(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Sweep"}); err == nil {
		t.Fatal("an unknown kind resolved")
	}
}

func TestPreferred(t *testing.T) {
	for gk, want := range map[schema.GroupKind]string{
		{Group: "batch", Kind: "Job"}:              "v1",
		{Kind: "Pod"}:                              "v1",
		{Group: "ray.io", Kind: "RayJob"}:          "v1",
		{Group: "jobset.x-k8s.io", Kind: "JobSet"}: "v1alpha2",
	} {
		got, ok := Preferred(gk)
		if !ok || got.Version != want {
			t.Errorf("%s: %v %v, want %s", gk, got, ok, want)
		}
	}
	if _, ok := Preferred(schema.GroupKind{Group: "kubeflow.org", Kind: "MPIJob"}); ok {
		t.Error("MPIJob's schema is not shipped")
	}
}
