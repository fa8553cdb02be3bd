package gc

import (
	"os"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/wrapup-dev/wrapup/celpolicies"
)

// TestShippedRolesListEveryBuiltinKind: wrapup may list and watch every
// kind it has built-in expressions for, in the cluster it runs in (the
// generated manager role) and on a MultiKueue worker (the reader role an
// admin applies there), so that a rule for one works without an extra
// grant. A kind left out would be not watchable (TriggerKindNotWatchable).
func TestShippedRolesListEveryBuiltinKind(t *testing.T) {
	for _, file := range []string{"../config/rbac/role.yaml", "../config/multikueue/worker/reader.yaml"} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var rules []rbacv1.PolicyRule
		dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(data)), 4096)
		for {
			var role rbacv1.ClusterRole
			if err := dec.Decode(&role); err != nil {
				break
			}
			if role.Kind == "ClusterRole" {
				rules = append(rules, role.Rules...)
			}
		}
		if len(rules) == 0 {
			t.Fatalf("%s: no ClusterRole rules read", file)
		}
		for _, gk := range celpolicies.BuiltinKinds() {
			resource := strings.ToLower(gk.Kind) + "s"
			for _, verb := range []string{"list", "watch"} {
				if !slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool {
					return slices.Contains(r.APIGroups, gk.Group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb)
				}) {
					t.Errorf("%s: wrapup may not %s %s (%s), a kind with built-in expressions", file, verb, resource, gk)
				}
			}
		}
	}
}
