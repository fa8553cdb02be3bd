package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// TestSecurityDocNamesEveryGrant: docs/security.md's table names every
// resource the generated manager role grants, so that a new grant cannot
// go unsaid.
func TestSecurityDocNamesEveryGrant(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(root, "docs", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal(data, &role); err != nil {
		t.Fatal(err)
	}
	if len(role.Rules) == 0 {
		t.Fatal("no rules read from config/rbac/role.yaml")
	}
	for _, r := range role.Rules {
		for _, res := range r.Resources {
			if !strings.Contains(string(doc), res) {
				t.Errorf("docs/security.md does not name %s (%v), which config/rbac/role.yaml grants %v", res, r.APIGroups, r.Verbs)
			}
		}
	}
}
