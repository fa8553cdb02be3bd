package decision

import (
	"errors"
	"testing"
	"time"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
)

var errBroken = errors.New("spec.success: syntax error")

// compiled is rule with its compiled policy, as the controller's cache gives it.
//
// Its status says it has deleted as it does since long before any run
// (status.deletingSince), as for a rule that never changed its action.
func compiled(t *testing.T, rule *wrapupv1alpha1.CompletionRule) Rule {
	t.Helper()
	if rule.Status.DeletingSince == nil {
		rule.Status.DeletingSince = DeletingSince(rule, now.Add(-30*24*time.Hour))
	}
	p, err := celpolicies.Compile(&rule.Spec)
	if err != nil {
		t.Fatalf("compiling rule %s: %v", rule.Name, err)
	}
	return Rule{Rule: rule, Policy: p}
}
