package celpolicies

import (
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
