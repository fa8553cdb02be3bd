package decision

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"testing"
)

// TestVerdictsListsEveryVerdict: Verdicts (which docs, --expect and the
// verdict table read) holds every Verdict constant of decision.go.
func TestVerdictsListsEveryVerdict(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "decision.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var declared []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, sp := range g.Specs {
			vs := sp.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); ok && id.Name == "Verdict" {
				for _, lit := range vs.Values {
					if bl, ok := lit.(*ast.BasicLit); ok {
						declared = append(declared, bl.Value[1:len(bl.Value)-1])
					}
				}
			}
		}
	}
	var listed []string
	for _, v := range Verdicts() {
		listed = append(listed, string(v))
	}
	slices.Sort(declared)
	slices.Sort(listed)
	if len(declared) < 10 || !slices.Equal(declared, listed) {
		t.Errorf("Verdict constants %v, Verdicts() %v", declared, listed)
	}
}
