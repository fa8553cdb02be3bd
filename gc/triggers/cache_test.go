package triggers

import (
	"testing"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
		if cached.name != "j" || cached.namespace != "ns" || cached.getUID() != "u1" || cached.owner != "aw" {
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

// TestIdentityTriggerRoundTrip: a trigger kept with its identity apart from
// its JSON (no expression reads its metadata) reads back as the object
// identityOnly trims, but for the ownerReferences that are not the
// controller's, which nothing reads.
func TestIdentityTriggerRoundTrip(t *testing.T) {
	for name, doc := range map[string]string{
		"controlled and labelled, being deleted": `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j","namespace":"ns","uid":"u1","resourceVersion":"7",
			"deletionTimestamp":"2026-12-01T10:00:00Z","generation":3,"labels":{"workload.codeflare.dev/appwrapper":"aw","team":"a"},"annotations":{"keep":"me"},
			"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"cm","uid":"u9"},
				{"apiVersion":"workload.codeflare.dev/v1beta2","kind":"AppWrapper","name":"aw","uid":"u2","controller":true,"blockOwnerDeletion":true}],
			"managedFields":[{"manager":"m"}]},
			"spec":{"parallelism":1},"status":{"active":1,"ready":0,"startTime":"2026-12-01T09:00:00Z","uncountedTerminatedPods":{},"ratio":0.5,"conditions":[{"type":"Complete","status":"True"}]}}`,
		"canonical UIDs": `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j","namespace":"ns","uid":"0b5f6d2a-9c1e-4f3b-8a7d-2e4c6f8a0b1c","resourceVersion":"8",
			"labels":{"workload.codeflare.dev/appwrapper":"aw"},"ownerReferences":[{"apiVersion":"workload.codeflare.dev/v1beta2","kind":"AppWrapper","name":"aw",
			"uid":"7d9e1f3a-5b2c-4d6e-8f0a-1b3c5d7e9f2a","controller":true}]},"status":{"succeeded":1}}`,
		"upper-case UIDs are kept as written": `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j","namespace":"ns","uid":"0B5F6D2A-9C1E-4F3B-8A7D-2E4C6F8A0B1C","resourceVersion":"8",
			"ownerReferences":[{"apiVersion":"workload.codeflare.dev/v1beta2","kind":"AppWrapper","name":"other","uid":"7D9E1F3A-5B2C-4D6E-8F0A-1B3C5D7E9F2A","controller":true,"blockOwnerDeletion":false}]},"status":{}}`,
		"an empty AppWrapper label on a controlled trigger": `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j","namespace":"ns","uid":"u1","resourceVersion":"8",
			"labels":{"workload.codeflare.dev/appwrapper":""},"ownerReferences":[{"apiVersion":"workload.codeflare.dev/v1beta2","kind":"AppWrapper","name":"aw","uid":"u2","controller":true}]},"status":{}}`,
		"no uid, no resourceVersion": `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j","namespace":"ns"},"status":{}}`,
		"no controller, no label": `{"apiVersion":"ray.io/v1","kind":"RayJob","metadata":{"name":"r","namespace":"ns","uid":"u3","resourceVersion":"9",
			"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"cm","uid":"u9","controller":false}]},"status":{}}`,
		"a controller that is not an AppWrapper": `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns","uid":"u4","resourceVersion":"1",
			"labels":{"workload.codeflare.dev/appwrapper":"aw"},"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs","uid":"u5","controller":true}]},"status":{"phase":"Running"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			decode := func() *unstructured.Unstructured {
				u := &unstructured.Unstructured{}
				if err := u.UnmarshalJSON([]byte(doc)); err != nil {
					t.Fatal(err)
				}
				return u
			}
			keep := celpolicies.FieldsOf("status")
			out, err := keepFields(keep)(decode())
			if err != nil {
				t.Fatal(err)
			}
			cached := out.(*cachedTrigger)
			if !cached.identity {
				t.Fatal("identity not kept apart")
			}
			got, err := cached.deepCopy().object()
			if err != nil {
				t.Fatal(err)
			}
			want := decode()
			keep.Keep(want.Object)
			identityOnly(want)
			var refs []metav1.OwnerReference
			if c := metav1.GetControllerOf(want); c != nil {
				refs = append(refs, *c)
			}
			want.SetOwnerReferences(refs)
			if !apiequality.Semantic.DeepEqual(got.Object, want.Object) {
				t.Errorf("read back as\n%v\nwant\n%v", got.Object, want.Object)
			}
			if owningAppWrapper(got) != owningAppWrapper(decode()) {
				t.Errorf("owner %q, want %q", owningAppWrapper(got), owningAppWrapper(decode()))
			}
		})
	}
}
