package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
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

// TestInstallDocNamesEveryClusterRole: docs/install.md's table of who may do
// what names every ClusterRole the install ships.
func TestInstallDocNamesEveryClusterRole(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(root, "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "config", "rbac", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, part := range strings.Split(string(data), "\n---\n") {
			var obj struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if err := yaml.Unmarshal([]byte(part), &obj); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if obj.Kind != "ClusterRole" {
				continue
			}
			n++
			if !strings.Contains(string(doc), "| `"+obj.Metadata.Name+"` |") {
				t.Errorf("docs/install.md's table of ClusterRoles does not name %s (%s)", obj.Metadata.Name, filepath.Base(f))
			}
		}
	}
	if n == 0 {
		t.Fatal("no ClusterRole read from config/rbac")
	}
}

// TestDocsGiveTheDefaultRulesPriority: where a doc gives annotated-triggers'
// priority, it is the one config/rules gives it.
func TestDocsGiveTheDefaultRulesPriority(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "config", "rules", "annotated-triggers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rule struct {
		Spec struct {
			Priority int `json:"priority"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &rule); err != nil {
		t.Fatal(err)
	}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("priority %d", rule.Spec.Priority)
	for _, f := range append(docs, filepath.Join(root, "README.md")) {
		doc, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile("`annotated-triggers` \\((priority -?[0-9]+)").FindAllStringSubmatch(string(doc), -1) {
			if m[1] != want {
				t.Errorf("%s gives annotated-triggers %s; config/rules gives it %s", filepath.Base(f), m[1], want)
			}
		}
	}
}
