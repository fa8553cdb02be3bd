package v1alpha1

import (
	"os"
	"strings"
	"testing"
)

// gofmt rewrites two single quotes in a doc comment into a typographic
// quote, which breaks a CEL rule in a kubebuilder marker: the CRD then fails
// to install.
func TestValidationMarkersHaveNoTypographicQuotes(t *testing.T) {
	src, err := os.ReadFile("completionrule_types.go")
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(string(src), "\n") {
		if strings.Contains(line, "+kubebuilder:") && strings.ContainsAny(line, "\u201c\u201d\u2018\u2019") {
			t.Errorf("line %d: a marker holds a typographic quote (write size(x) == 0 instead of x == ''): %s", i+1, line)
		}
		if strings.Contains(line, "XValidation") && strings.Contains(line, "''") {
			t.Errorf("line %d: '' in a marker becomes a typographic quote under gofmt: %s", i+1, line)
		}
	}
}
