package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wrapup-dev/wrapup/gc/decision"
)

// TestActionsDocListsEveryVerdict: docs/actions.md's table of verdicts has
// a row for each verdict the decision can give, and no other.
func TestActionsDocListsEveryVerdict(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(root, "docs", "actions.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "## Verdicts")
	if !ok {
		t.Fatal("docs/actions.md has no section Verdicts")
	}
	rows := map[string]bool{}
	for _, line := range strings.Split(table, "\n") {
		if strings.HasPrefix(line, "| `") {
			name, _, _ := strings.Cut(strings.TrimPrefix(line, "| `"), "`")
			rows[name] = true
		}
	}
	for _, v := range decision.Verdicts() {
		if !rows[string(v)] {
			t.Errorf("docs/actions.md: no row for the verdict %s", v)
		}
		delete(rows, string(v))
	}
	for name := range rows {
		t.Errorf("docs/actions.md: a row for %s, which is no verdict", name)
	}
}
