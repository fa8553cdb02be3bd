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
		{Group: "kubeflow.org", Version: "v1", Kind: "TFJob"},
		{Group: "kubeflow.org", Version: "v1", Kind: "XGBoostJob"},
		{Group: "kubeflow.org", Version: "v1", Kind: "JAXJob"},
		{Group: "kubeflow.org", Version: "v1", Kind: "PaddleJob"},
		{Group: "kubeflow.org", Version: "v2beta1", Kind: "MPIJob"},
		{Group: "trainer.kubeflow.org", Version: "v1alpha1", Kind: "TrainJob"},
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
		// mpi-operator's v2beta1, beside the training operator's v1 kinds
		{Group: "kubeflow.org", Kind: "MPIJob"}:           "v2beta1",
		{Group: "kubeflow.org", Kind: "TFJob"}:            "v1",
		{Group: "trainer.kubeflow.org", Kind: "TrainJob"}: "v1alpha1",
	} {
		got, ok := Preferred(gk)
		if !ok || got.Version != want {
			t.Errorf("%s: %v %v, want %s", gk, got, ok, want)
		}
	}
	if _, ok := Preferred(schema.GroupKind{Group: "argoproj.io", Kind: "Workflow"}); ok {
		t.Error("Workflow's schema is not shipped")
	}
}

// TestEveryBuiltinKindButWorkflowIsShipped: each kind with built-in
// expressions is type-checked offline, except Argo's Workflow, whose
// module is not in the project's graph (and whose published CRD keeps its
// status schemaless, x-kubernetes-preserve-unknown-fields).
func TestEveryBuiltinKindButWorkflowIsShipped(t *testing.T) {
	for _, gk := range celpolicies.BuiltinKinds() {
		_, ok := Preferred(gk)
		if want := gk != (schema.GroupKind{Group: "argoproj.io", Kind: "Workflow"}); ok != want {
			t.Errorf("%s: shipped %v, want %v", gk, ok, want)
		}
	}
}
