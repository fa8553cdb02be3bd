package decision

import (
	"slices"
	"strings"
	"testing"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// TestEventSpecs: every reason a verdict may emit has its EventSpec, every
// EventSpec of a decision is allowed by some verdict, and a Warning's
// action names its message.
func TestEventSpecs(t *testing.T) {
	var allowed []string
	for _, row := range VerdictTable {
		allowed = append(allowed, row.Reasons...)
	}
	for _, r := range allowed {
		if !slices.ContainsFunc(EventSpecs, func(s EventSpec) bool { return s.Reason == r }) {
			t.Errorf("reason %s, which a verdict may emit, has no EventSpec", r)
		}
	}
	for _, s := range EventSpecs {
		if s.Reason != wrapupv1alpha1.ReasonRecordNotWritten && !slices.Contains(allowed, s.Reason) {
			t.Errorf("EventSpec %s/%s is allowed by no verdict", s.Reason, s.Action)
		}
		if strings.Contains(s.Format, "%!") {
			t.Errorf("EventSpec %s: format %q", s.Reason, s.Format)
		}
	}
	a, b := WarningBlockedByRule.Event("one"), WarningBlockedByRule.Event("two")
	if a.Action == b.Action || !strings.HasPrefix(a.Action, "SelectRule-") || !specOf(a) {
		t.Errorf("Warnings of two messages: actions %q and %q, want SelectRule-<digest of each>", a.Action, b.Action)
	}
	if e := EventDeleted.Event("jobs", wrapupv1alpha1.OutcomeSucceeded); e.Message != "rule jobs: trigger Succeeded; AppWrapper deleted with its components" || e.Action != "Delete" {
		t.Errorf("EventDeleted: %+v", e)
	}
}
