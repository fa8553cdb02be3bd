package schemas

import (
	"slices"
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
		{Group: "batch.volcano.sh", Version: "v1alpha1", Kind: "Job"},
		{Group: "sparkoperator.k8s.io", Version: "v1beta2", Kind: "SparkApplication"},
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
		// Volcano's Job, beside batch/v1's
		{Group: "batch.volcano.sh", Kind: "Job"}:                  "v1alpha1",
		{Group: "sparkoperator.k8s.io", Kind: "SparkApplication"}: "v1beta2",
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

// notShipped are the built-in kinds whose schema is not shipped: their
// modules are not in the project's module graph (Argo's published CRD also
// keeps its status schemaless, x-kubernetes-preserve-unknown-fields;
// tektoncd/pipeline would bring Knative and much else for a YAML file).
// lint says their expressions are type-checked only with --server-schema.
var notShipped = []schema.GroupKind{
	{Group: "argoproj.io", Kind: "Workflow"},
	{Group: "tekton.dev", Kind: "PipelineRun"},
	{Group: "tekton.dev", Kind: "TaskRun"},
}

// TestEveryBuiltinKindIsShippedOrSaysWhyNot: each kind with built-in
// expressions is type-checked offline, except those in notShipped.
func TestEveryBuiltinKindIsShippedOrSaysWhyNot(t *testing.T) {
	for _, gk := range celpolicies.BuiltinKinds() {
		_, ok := Preferred(gk)
		if want := !slices.Contains(notShipped, gk); ok != want {
			t.Errorf("%s: shipped %v, want %v", gk, ok, want)
		}
	}
}
