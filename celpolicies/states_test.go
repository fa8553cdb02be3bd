package celpolicies

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestStatesOfEveryBuiltinKind: every kind with built-in expressions has
// its known states, with their source, and only those kinds have them.
func TestStatesOfEveryBuiltinKind(t *testing.T) {
	for _, gk := range BuiltinKinds() {
		ks, ok := StatesOf(gk)
		if !ok {
			t.Errorf("%s: no KindStates", kindKey(gk))
			continue
		}
		if ks.Source == "" {
			t.Errorf("%s: KindStates has no Source", kindKey(gk))
		}
		if len(ks.ConditionTypes) == 0 && ks.StateField == "" {
			t.Errorf("%s: neither condition types nor a state field", kindKey(gk))
		}
		if (ks.StateField == "") != (len(ks.States) == 0) {
			t.Errorf("%s: StateField %q with states %q", kindKey(gk), ks.StateField, ks.States)
		}
	}
	for gk := range kindStates {
		if _, _, ok := BuiltinFor(gk); !ok {
			t.Errorf("%s has KindStates but no built-in expressions", kindKey(gk))
		}
	}
	if _, ok := StatesOf(schema.GroupKind{Group: "example.com", Kind: "Sweep"}); ok {
		t.Error("an unknown kind has KindStates")
	}
}

// quoted are the string literals of a CEL expression.
var quoted = regexp.MustCompile(`'([^']*)'`)

// TestBuiltinExpressionsNameKnownStates: each literal that a built-in
// expression compares is a condition type, a condition status or a state
// value that the kind's controller writes, and none is a state it moves on
// from.
func TestBuiltinExpressionsNameKnownStates(t *testing.T) {
	for _, gk := range BuiltinKinds() {
		ks, _ := StatesOf(gk)
		known := append([]string{"True", "False", "Unknown"}, ks.ConditionTypes...)
		known = append(known, ks.States...)
		for _, values := range ks.MoreStates {
			known = append(known, values...)
		}
		success, failure, _ := BuiltinFor(gk)
		for _, expr := range []string{success, failure} {
			for _, m := range quoted.FindAllStringSubmatch(expr, -1) {
				v := m[1]
				if v == "" {
					continue // orValue('')
				}
				if !slices.Contains(known, v) {
					t.Errorf("%s: the built-in names %q, which its controller never writes (%s)", kindKey(gk), v, expr)
				}
				if slices.Contains(ks.Transient, v) {
					t.Errorf("%s: the built-in names %q, a state its controller moves on from (%s)", kindKey(gk), v, expr)
				}
			}
		}
	}
}

// TestTransientStatesAreKnown: each transient state is one the kind's
// controller writes, spelled as KindStates documents.
func TestTransientStatesAreKnown(t *testing.T) {
	for _, gk := range BuiltinKinds() {
		ks, _ := StatesOf(gk)
		values := slices.Clone(ks.States)
		for _, v := range ks.MoreStates {
			values = append(values, v...)
		}
		for _, tr := range ks.Transient {
			if typ, reason, ok := strings.Cut(tr, "/"); ok {
				if !slices.Contains(ks.ConditionTypes, typ) || reason == "" {
					t.Errorf("%s: transient %q: %q is not a condition type of the kind", kindKey(gk), tr, typ)
				}
				continue
			}
			if typ, status, ok := strings.Cut(tr, "="); ok {
				if !slices.Contains(ks.ConditionTypes, typ) || !slices.Contains([]string{"True", "False", "Unknown"}, status) {
					t.Errorf("%s: transient %q is not Type=Status of a condition type of the kind", kindKey(gk), tr)
				}
				continue
			}
			if !slices.Contains(ks.ConditionTypes, tr) && !slices.Contains(values, tr) {
				t.Errorf("%s: transient %q is neither a condition type nor a state of the kind", kindKey(gk), tr)
			}
		}
	}
}

// TestStatesOfReturnsACopy: a caller that changes what it got does not
// change the table.
func TestStatesOfReturnsACopy(t *testing.T) {
	gk := schema.GroupKind{Group: "ray.io", Kind: "RayJob"}
	ks, _ := StatesOf(gk)
	ks.States[0] = "changed"
	ks.Transient[0] = "changed"
	ks.MoreStates["status.jobStatus"][0] = "changed"
	again, _ := StatesOf(gk)
	if again.States[0] == "changed" || again.Transient[0] == "changed" || again.MoreStates["status.jobStatus"][0] == "changed" {
		t.Errorf("StatesOf shares its lists: %+v", again)
	}
}

// TestDocsListEveryKindsStates: docs/writing-rules.md has a row for each
// built-in kind in its table of built-in kinds, and the row names every
// condition type and state value the kind's controller writes, so that the
// table and KindStates do not drift apart.
func TestDocsListEveryKindsStates(t *testing.T) {
	data, err := os.ReadFile("../docs/writing-rules.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "## Built-in kinds and their states")
	if !ok {
		t.Fatal("docs/writing-rules.md has no section on the built-in kinds and their states")
	}
	var rows []string
	for _, line := range strings.Split(section, "\n") {
		if strings.HasPrefix(line, "| ") && !strings.HasPrefix(line, "| kind ") {
			rows = append(rows, line)
		}
	}
	for _, gk := range BuiltinKinds() {
		group := gk.Group
		if group == "" {
			group = "v1"
		}
		i := slices.IndexFunc(rows, func(r string) bool {
			first, _, _ := strings.Cut(strings.TrimPrefix(r, "| "), " |")
			return (strings.HasPrefix(first, group+" ") || strings.HasPrefix(first, group+"/")) && strings.Contains(first, gk.Kind)
		})
		if i < 0 {
			t.Errorf("%s: no row in the table of built-in kinds", kindKey(gk))
			continue
		}
		ks, _ := StatesOf(gk)
		values := slices.Clone(ks.ConditionTypes)
		values = append(values, ks.States...)
		for _, v := range ks.MoreStates {
			values = append(values, v...)
		}
		for _, v := range values {
			if v != "" && !strings.Contains(rows[i], "`"+v+"`") {
				t.Errorf("%s: its row does not name `%s`", kindKey(gk), v)
			}
		}
	}
}
