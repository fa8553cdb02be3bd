package gc

import (
	"encoding/json"
	"fmt"
	"testing"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	"k8s.io/apimachinery/pkg/runtime"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/gc/decision"
)

// FuzzFindTrigger feeds arbitrary AppWrapper specs (components with missing
// kinds, bad apiVersions, huge or broken templates, duplicate names) to the
// trigger-finding path: it must never panic, and what it finds must be one
// of the components, of the kind the rule asks for, the same as in the
// AppWrapper that wrapup's cache keeps.
func FuzzFindTrigger(f *testing.F) {
	f.Add([]byte(`{"components":[{"template":{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"a"}}}]}`), "batch", "Job", "", "", false)
	f.Add([]byte(`{"components":[{"annotations":{"wrapup.dev/trigger":"true"},"template":{"apiVersion":"v1","kind":"Pod","metadata":{"generateName":"p-"}}}]}`), "", "", "", "p-xyz", false)
	f.Add([]byte(`{"components":[{"template":{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"a"}}},{"template":{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"a"}}}]}`), "batch", "Job", "a", "", false)
	f.Add([]byte(`{"components":[{"template":{"apiVersion":"a/b/c","kind":""}}]}`), "a", "Job", "", "", true)
	f.Add([]byte(`{"components":[{"template":null},{"template":"x"},{"template":[1,2]}]}`), "", "", "", "", false)
	f.Fuzz(func(t *testing.T, specJSON []byte, group, kind, name, statusName string, annotateAll bool) {
		var spec struct {
			Components []struct {
				Annotations map[string]string `json:"annotations"`
				Template    json.RawMessage   `json:"template"`
			} `json:"components"`
		}
		if err := json.Unmarshal(specJSON, &spec); err != nil {
			return
		}
		aw := &awv1beta2.AppWrapper{}
		for _, c := range spec.Components {
			ann := c.Annotations
			if annotateAll {
				ann = map[string]string{wrapupv1alpha1.TriggerAnnotation: "true"}
			}
			aw.Spec.Components = append(aw.Spec.Components, awv1beta2.AppWrapperComponent{Annotations: ann, Template: runtime.RawExtension{Raw: c.Template}})
			aw.Status.ComponentStatus = append(aw.Status.ComponentStatus, awv1beta2.AppWrapperComponentStatus{Name: statusName})
		}
		rule := &wrapupv1alpha1.CompletionRule{}
		rule.Name = "fuzz"
		rule.Spec.Trigger = wrapupv1alpha1.TriggerSpec{APIGroup: group, Kind: kind, Name: name}
		ref, nt := decision.FindTrigger(aw, rule)
		// wrapup's cache keeps only the identity of each template: the
		// same trigger, or the same error, is found in what it keeps.
		slim, serr := slimAppWrapper(aw.DeepCopy())
		if serr != nil {
			t.Fatalf("slimAppWrapper: %v", serr)
		}
		if ref2, nt2 := decision.FindTrigger(slim.(*awv1beta2.AppWrapper), rule); ref2 != ref || fmt.Sprint(nt2) != fmt.Sprint(nt) {
			t.Fatalf("in the cached AppWrapper: %+v, %v; in the whole one: %+v, %v", ref2, nt2, ref, nt)
		}
		if nt != nil {
			if nt.Reason == "" || nt.Message == "" {
				t.Fatalf("FindTrigger gave no reason or message: %+v", nt)
			}
			return
		}
		if ref.Index < 0 || ref.Index >= len(aw.Spec.Components) {
			t.Fatalf("index %d out of range (%d components)", ref.Index, len(aw.Spec.Components))
		}
		if kind != "" && (ref.Kind.Kind != kind || ref.Kind.Group != group) {
			t.Fatalf("found %v, rule asks for %s/%s", ref.Kind, group, kind)
		}
		if kind == "" && !decision.Truthy(aw.Spec.Components[ref.Index].Annotations[wrapupv1alpha1.TriggerAnnotation]) {
			t.Fatalf("found component %d, which is not annotated", ref.Index)
		}
	})
}
