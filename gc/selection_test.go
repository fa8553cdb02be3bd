package gc

import (
	"testing"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/wrapup-dev/wrapup/celpolicies"
)

func TestOwningAppWrapper(t *testing.T) {
	tests := []struct {
		name   string
		refs   []metav1.OwnerReference
		labels map[string]string
		want   string
	}{
		{name: "controller reference", refs: []metav1.OwnerReference{{APIVersion: "workload.codeflare.dev/v1beta2", Kind: "AppWrapper", Name: "aw", Controller: ptr.To(true)}}, want: "aw"},
		{name: "label only", labels: map[string]string{awv1beta2.AppWrapperLabel: "aw2"}, want: "aw2"},
		{name: "an AppWrapper kind of another group is not ours", refs: []metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "AppWrapper", Name: "x", Controller: ptr.To(true)}}, want: ""},
		{name: "nothing", want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: map[string]any{}}
			u.SetOwnerReferences(tc.refs)
			u.SetLabels(tc.labels)
			if got := owningAppWrapper(u); got != tc.want {
				t.Errorf("owningAppWrapper = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestAssignments(t *testing.T) {
	a := NewAssignments()
	x, y := types.NamespacedName{Namespace: "n", Name: "x"}, types.NamespacedName{Namespace: "n", Name: "y"}
	a.Set(x, "r1")
	a.Set(y, "r1")
	a.Set(x, "r1") // no change
	if got := a.Count("r1"); got != 2 {
		t.Fatalf("Count(r1) = %d, want 2", got)
	}
	a.Set(x, "r2")
	a.Set(y, "")
	if a.Count("r1") != 0 || a.Count("r2") != 1 {
		t.Fatalf("counts r1=%d r2=%d, want 0 and 1", a.Count("r1"), a.Count("r2"))
	}
	// Each change notifies the rules it touched: r1 (x, y, x moved away, y gone), r2 once.
	if got := len(a.events); got != 5 {
		t.Errorf("%d rule notifications, want 5", got)
	}
}

func TestKeepFields(t *testing.T) {
	newObj := func() *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "batch/v1", "kind": "Job",
			"spec":   map[string]any{"template": map[string]any{"spec": map[string]any{}}},
			"status": map[string]any{"succeeded": int64(1)},
		}}
		u.SetName("j")
		u.SetNamespace("ns")
		u.SetUID("u1")
		u.SetResourceVersion("7")
		u.SetGeneration(3)
		u.SetLabels(map[string]string{awv1beta2.AppWrapperLabel: "aw", "team": "a"})
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "workload.codeflare.dev/v1beta2", Kind: "AppWrapper", Name: "aw", UID: "a1", Controller: ptr.To(true)}})
		u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl"}})
		u.SetAnnotations(map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}", "keep": "me"})
		return u
	}
	for _, tc := range []struct {
		keep     celpolicies.Fields
		wantSpec bool
		wantMeta bool
	}{
		{celpolicies.FieldsOf("status"), false, false},
		{celpolicies.FieldsOf("spec", "status"), true, false},
		{celpolicies.FieldsOf("metadata", "status"), false, true},
		{celpolicies.AllFields, true, true},
	} {
		out, err := keepFields(tc.keep)(newObj())
		if err != nil {
			t.Fatal(err)
		}
		cached := out.(*cachedTrigger)
		if cached.name != "j" || cached.namespace != "ns" || cached.uid != "u1" || cached.owner != "aw" {
			t.Errorf("%s: cached as %+v", tc.keep, cached)
		}
		if again, err := keepFields(tc.keep)(cached); err != nil || again != cached {
			t.Errorf("%s: a cached trigger transformed again: %v, %v", tc.keep, again, err)
		}
		got, err := cached.object()
		if err != nil {
			t.Fatal(err)
		}
		if len(got.GetManagedFields()) != 0 {
			t.Errorf("%s: managedFields kept", tc.keep)
		}
		if _, ok := got.GetAnnotations()["kubectl.kubernetes.io/last-applied-configuration"]; ok {
			t.Errorf("%s: last-applied annotation kept", tc.keep)
		}
		if got.GetName() != "j" || got.GetNamespace() != "ns" || got.GetUID() != "u1" || got.GetResourceVersion() != "7" ||
			got.GetKind() != "Job" || got.GetAPIVersion() != "batch/v1" || owningAppWrapper(got) != "aw" ||
			got.GetLabels()[awv1beta2.AppWrapperLabel] != "aw" || len(got.GetOwnerReferences()) != 1 {
			t.Errorf("%s: identity dropped: %v", tc.keep, got.Object)
		}
		if kept := got.GetAnnotations()["keep"] == "me" && got.GetLabels()["team"] == "a" && got.GetGeneration() == 3; kept != tc.wantMeta {
			t.Errorf("%s: other metadata kept = %v, want %v: %v", tc.keep, kept, tc.wantMeta, got.Object["metadata"])
		}
		if _, ok := got.Object["status"]; !ok {
			t.Errorf("%s: status dropped", tc.keep)
		}
		if _, ok := got.Object["spec"]; ok != tc.wantSpec {
			t.Errorf("%s: spec kept = %v, want %v", tc.keep, ok, tc.wantSpec)
		}
	}
}
