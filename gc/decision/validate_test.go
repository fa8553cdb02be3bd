package decision

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wrapup-dev/wrapup/test/util"
)

// TestRuleProblems: what the webhook refuses and lint reports, one line
// each, at the field.
func TestRuleProblems(t *testing.T) {
	bad := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpIn}}}
	space := &metav1.LabelSelector{MatchLabels: map[string]string{"role": "a b"}}
	for _, tc := range []struct {
		name  string
		rule  *util.RuleWrapper
		field string // "" for none
		fatal bool
		text  string
	}{
		{"a Job of batch", util.MakeRule("r").TriggerKind("batch", "Job", ""), "", false, ""},
		{"a Pod of the core group", util.MakeRule("r").TriggerKind("", "Pod", ""), "", false, ""},
		{"a custom kind", util.MakeRule("r").TriggerKind("example.com", "EvalRun", ""), "", false, ""},
		{"Job without its group", util.MakeRule("r").TriggerKind("", "Job", ""), "spec.trigger.apiGroup", true, "did you mean apiGroup: batch?"},
		{"a Job of another group may be a custom kind", util.MakeRule("r").TriggerKind("example.com", "Job", ""), "spec.trigger.apiGroup", false, "Job is in the group batch"},
		{"PytorchJob", util.MakeRule("r").TriggerKind("kubeflow.org", "PytorchJob", ""), "spec.trigger.kind", true, "did you mean PyTorchJob"},
		{"PyTorchJobs in kubeflow.org", util.MakeRule("r").TriggerKind("kubeflow.org", "PyTorchJobs", ""), "spec.trigger.kind", true, "did you mean PyTorchJob"},
		{"a near name in another group may be a kind of its own", util.MakeRule("r").TriggerKind("example.com", "RayJobs", ""), "spec.trigger.kind", false, "did you mean RayJob"},
		{"a kind batch does not have", util.MakeRule("r").TriggerKind("batch", "Jobs", ""), "spec.trigger.kind", true, "did you mean Job"},
		{"a matchLabels value with a space", util.MakeRule("r").AppWrapperSelector(space), "spec.appWrapperSelector", true, ""},
		{"In with no values", util.MakeRule("r").NamespaceSelector(bad), "spec.namespaceSelector", true, "values"},
		{"a name the API server refuses", util.MakeRule("Bad_Name"), "metadata.name", true, "RFC 1123"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := RuleProblems(tc.rule.Obj())
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
