package main

import (
	"strings"
	"testing"

	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
)

// TestScalarPositions encodes expressions in every YAML scalar style, as
// the YAML encoder writes them, and checks that each character of the
// value read back is found at a place of the text that holds it (an
// escape's backslash for an escaped character, the end of a line for a
// folded line break).
func TestScalarPositions(t *testing.T) {
	values := []string{
		"object.status.succeeded > 0",
		"object.?status.?conditions.orValue([]).exists(c, c.type == 'Complete' && c.status == 'True')",
		"'benchmark ' + object.metadata.name + \": \" + string(object.?status.?failed.orValue(0))",
		"object.status.active == 0 &&\n  object.status.succeeded > 0\n",
		"object.metadata.name == \"naïve ✓\" && object.status.ready > 0",
		"a\n\nb\n",
		"tab\there",
	}
	styles := map[string]kyaml.Style{
		"literal": kyaml.LiteralStyle, "folded": kyaml.FoldedStyle, "double": kyaml.DoubleQuotedStyle,
		"single": kyaml.SingleQuotedStyle, "plain": 0,
	}
	walked := 0
	for _, v := range values {
		for name, style := range styles {
			doc := &kyaml.Node{Kind: kyaml.MappingNode, Content: []*kyaml.Node{
				{Kind: kyaml.ScalarNode, Value: "spec"},
				{Kind: kyaml.MappingNode, Content: []*kyaml.Node{
					{Kind: kyaml.ScalarNode, Value: "success"},
					{Kind: kyaml.ScalarNode, Value: v, Style: style},
				}},
			}}
			out, err := kyaml.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			d := &document{File: "r.yaml", Line: 1, Start: 1, Data: out}
			n := d.nodeAt("spec.success")
			if n == nil {
				t.Fatalf("%s %q: not read back:\n%s", name, v, out)
			}
			if n.Value != v {
				// The encoder does not round-trip every value in every
				// style (a folded block with more-indented lines).
				t.Logf("%s %q: read back as %q", name, v, n.Value)
				continue
			}
			lines := strings.Split(string(out), "\n")
			at := scalarPositions(lines, n)
			if at == nil {
				t.Logf("%s %q: not walked (style %v as written:\n%s)", name, v, n.Style, out)
				continue
			}
			walked++
			for i, r := range []rune(v) {
				p := at[i]
				line := []rune(lines[p.line-1])
				var src rune = '\n'
				if p.col-1 < len(line) {
					src = line[p.col-1]
				}
				switch {
				case src == r, src == '\\', r == '\n' && src == '\n', r == '\'' && src == '\'':
				case r == '\n' || src == '\n':
					// a folded break: at the end of its line
				default:
					t.Errorf("%s %q: character %d %q is at %d:%d, which holds %q:\n%s", name, v, i, r, p.line, p.col, src, out)
				}
			}
		}
	}
	if walked < len(values)*4 {
		t.Errorf("only %d of %d encodings walked", walked, len(values)*len(styles))
	}
}
