package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestTroubleshootingNamesWhatWrapupSays: every reason the troubleshooting
// guide's tables name (the first column's `Words`) is one of the API's
// reason constants, and every log line it names is in the manager's code;
// and every Warning reason the API declares has a row.
func TestTroubleshootingNamesWhatWrapupSays(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(root, "docs", "troubleshooting.md"))
	if err != nil {
		t.Fatal(err)
	}
	api, err := os.ReadFile(filepath.Join(root, "api", "v1alpha1", "constants.go"))
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]bool{}
	for _, m := range regexp.MustCompile(`Reason\w*\s*=\s*"(\w+)"`).FindAllStringSubmatch(string(api), -1) {
		reasons[m[1]] = true
	}
	if len(reasons) < 15 {
		t.Fatalf("read %d reasons from api/v1alpha1/constants.go: the extraction is broken", len(reasons))
	}
	var code strings.Builder
	for _, dir := range []string{"cmd/manager", "gc", "gc/triggers", "cmd/kubectl-wrapup/view", "gc/decision"} {
		files, _ := filepath.Glob(filepath.Join(root, dir, "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, _ := os.ReadFile(f)
			code.Write(b)
		}
	}
	section := ""
	named := map[string]bool{}
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "## ") {
			section = line
		}
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first := strings.SplitN(line, "|", 3)[1]
		for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(first, -1) {
			w := m[1]
			named[w] = true
			switch {
			case strings.Contains(section, "log"):
				if !strings.Contains(code.String(), `"`+w) {
					t.Errorf("troubleshooting.md names the log line %q, which the manager's code does not print", w)
				}
			case !reasons[w]:
				t.Errorf("troubleshooting.md names %q (%s), which is no reason the API declares", w, section)
			}
		}
	}
	for r := range reasons {
		if !named[r] {
			t.Errorf("troubleshooting.md has no row for the reason %s", r)
		}
	}
}
