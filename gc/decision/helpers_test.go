package decision

import (
	"errors"
	"testing"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
)

var errBroken = errors.New("spec.success: syntax error")

// compiled is rule with its compiled policy, as the controller's cache gives it.
func compiled(t *testing.T, rule *wrapupv1alpha1.CompletionRule) Rule {
	t.Helper()
	p, err := celpolicies.Compile(&rule.Spec)
	if err != nil {
		t.Fatalf("compiling rule %s: %v", rule.Name, err)
	}
	return Rule{Rule: rule, Policy: p}
}
