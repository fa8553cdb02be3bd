package decision

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// TestRuleProblems: what the webhook refuses and lint reports, one line
// each, at the field.
func TestRuleProblems(t *testing.T) {
	bad := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpIn}}}
	space := &metav1.LabelSelector{MatchLabels: map[string]string{"role": "a b"}}
	for _, tc := range []struct {
		name  string
		mod   func(r *wrapupv1alpha1.CompletionRule)
		field string // "" for none
		fatal bool
		text  string
	}{
		{"a Job of batch", func(r *wrapupv1alpha1.CompletionRule) {
			r.Spec.Trigger = wrapupv1alpha1.TriggerSpec{APIGroup: "batch", Kind: "Job"}
		}, "", false, ""},
		{"a Pod of the core group", func(r *wrapupv1alpha1.CompletionRule) { r.Spec.Trigger = wrapupv1alpha1.TriggerSpec{Kind: "Pod"} }, "", false, ""},
		{"a custom kind", func(r *wrapupv1alpha1.CompletionRule) {
			r.Spec.Trigger = wrapupv1alpha1.TriggerSpec{APIGroup: "example.com", Kind: "EvalRun"}
		}, "", false, ""},
		{"Job without its group", func(r *wrapupv1alpha1.CompletionRule) { r.Spec.Trigger = wrapupv1alpha1.TriggerSpec{Kind: "Job"} },
			"spec.trigger.apiGroup", true, "did you mean apiGroup: batch?"},
		{"a Job of another group may be a custom kind", func(r *wrapupv1alpha1.CompletionRule) {
			r.Spec.Trigger = wrapupv1alpha1.TriggerSpec{APIGroup: "example.com", Kind: "Job"}
		}, "spec.trigger.apiGroup", false, "Job is in the group batch"},
		{"PytorchJob", func(r *wrapupv1alpha1.CompletionRule) {
			r.Spec.Trigger = wrapupv1alpha1.TriggerSpec{APIGroup: "kubeflow.org", Kind: "PytorchJob"}
		}, "spec.trigger.kind", true, "did you mean PyTorchJob"},
		{"PyTorchJobs in kubeflow.org", func(r *wrapupv1alpha1.CompletionRule) {
			r.Spec.Trigger = wrapupv1alpha1.TriggerSpec{APIGroup: "kubeflow.org", Kind: "PyTorchJobs"}
		}, "spec.trigger.kind", true, "did you mean PyTorchJob"},
		{"a near name in another group may be a kind of its own", func(r *wrapupv1alpha1.CompletionRule) {
			r.Spec.Trigger = wrapupv1alpha1.TriggerSpec{APIGroup: "example.com", Kind: "RayJobs"}
		}, "spec.trigger.kind", false, "did you mean RayJob"},
		{"a kind batch does not have", func(r *wrapupv1alpha1.CompletionRule) {
			r.Spec.Trigger = wrapupv1alpha1.TriggerSpec{APIGroup: "batch", Kind: "Jobs"}
		}, "spec.trigger.kind", true, "did you mean Job"},
		{"a matchLabels value with a space", func(r *wrapupv1alpha1.CompletionRule) { r.Spec.AppWrapperSelector = space }, "spec.appWrapperSelector", true, ""},
		{"In with no values", func(r *wrapupv1alpha1.CompletionRule) { r.Spec.NamespaceSelector = bad }, "spec.namespaceSelector", true, "values"},
		{"a name the API server refuses", func(r *wrapupv1alpha1.CompletionRule) { r.Name = "Bad_Name" }, "metadata.name", true, "RFC 1123"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &wrapupv1alpha1.CompletionRule{ObjectMeta: metav1.ObjectMeta{Name: "r"}}
			tc.mod(r)
			ps := RuleProblems(r)
			if tc.field == "" {
				if len(ps) > 0 {
					t.Errorf("problems %+v, want none", ps)
				}
				return
			}
			if len(ps) != 1 || ps[0].Field != tc.field || ps[0].Fatal != tc.fatal || !strings.Contains(ps[0].Message, tc.text) || strings.Contains(ps[0].Message, "\n") {
				t.Errorf("problems %+v, want one at %s (fatal %v) saying %q, on one line", ps, tc.field, tc.fatal, tc.text)
			}
		})
	}
}
