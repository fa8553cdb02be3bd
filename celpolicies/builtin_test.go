package celpolicies

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestBuiltinSamplesAreRealistic guards the samples: the converter writes
// an empty status for a zero status struct, so "status missing entirely"
// must remove it, and "no conditions" must really have none.
func TestBuiltinSamplesAreRealistic(t *testing.T) {
	j := job(t, nil)
	if _, ok := j["status"]; !ok {
		t.Fatalf("a Job with a zero status converts without status; the no-conditions cases would not test what they say")
	}
	if _, ok := withoutStatus(job(t, nil))["status"]; ok {
		t.Fatalf("withoutStatus left a status")
	}
	conds, _ := j["status"].(map[string]any)["conditions"]
	if conds != nil {
		t.Fatalf("a Job with a zero status has conditions %v", conds)
	}
}

// TestBuiltinKindsMatchCRDValidation keeps the built-in kinds and the
// x-kubernetes-validations rule of CompletionRuleSpec in step: the rule lets
// a CompletionRule omit spec.success only for the kinds listed there.
func TestBuiltinKindsMatchCRDValidation(t *testing.T) {
	src, err := os.ReadFile("../api/v1alpha1/completionrule_types.go")
	if err != nil {
		t.Fatalf("reading the API types: %v", err)
	}
	var line string
	for _, l := range strings.Split(string(src), "\n") {
		if strings.Contains(l, "+kubebuilder:validation:XValidation") && strings.Contains(l, "no built-in expression") {
			line = l
			break
		}
	}
	if line == "" {
		t.Fatalf("no XValidation rule about built-in expressions in completionrule_types.go")
	}
	list := regexp.MustCompile(`\bin \[([^\]]*)\]`).FindStringSubmatch(line)
	if list == nil {
		t.Fatalf("no `in [...]` list in %q", line)
	}
	var fromCRD []string
	for _, m := range regexp.MustCompile(`'([^']*)'`).FindAllStringSubmatch(list[1], -1) {
		fromCRD = append(fromCRD, m[1])
	}
	var fromCode []string
	for _, gk := range BuiltinKinds() {
		fromCode = append(fromCode, kindKey(gk))
	}
	slices.Sort(fromCRD)
	slices.Sort(fromCode)
	if !slices.Equal(fromCRD, fromCode) {
		t.Errorf("built-in kinds differ:\n  CRD validation: %v\n  BuiltinKinds:   %v", fromCRD, fromCode)
	}
}

func TestBuiltinKindsSorted(t *testing.T) {
	kinds := BuiltinKinds()
	if len(kinds) != len(builtinSources) {
		t.Fatalf("BuiltinKinds has %d kinds, want %d", len(kinds), len(builtinSources))
	}
	if !slices.IsSortedFunc(kinds, func(a, b schema.GroupKind) int {
		if c := strings.Compare(a.Group, b.Group); c != 0 {
			return c
		}
		return strings.Compare(a.Kind, b.Kind)
	}) {
		t.Errorf("BuiltinKinds not sorted: %v", kinds)
	}
}

func TestBuiltinFor(t *testing.T) {
	tests := []struct {
		name   string
		input  schema.GroupKind
		wantOK bool
	}{
		{name: "Job", input: gkJob, wantOK: true},
		{name: "core Pod", input: gkPod, wantOK: true},
		{name: "Pod in another group", input: schema.GroupKind{Group: "example.com", Kind: "Pod"}, wantOK: false},
		{name: "Deployment never finishes", input: schema.GroupKind{Group: "apps", Kind: "Deployment"}, wantOK: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			success, failure, ok := BuiltinFor(tc.input)
			if ok != tc.wantOK {
				t.Fatalf("ok = %v, want %v", ok, tc.wantOK)
			}
			if ok && (success == "" || failure == "") {
				t.Errorf("success %q, failure %q: want both", success, failure)
			}
			if !ok && (success != "" || failure != "") {
				t.Errorf("success %q, failure %q for a kind without built-ins", success, failure)
			}
		})
	}
}

// TestBuiltinOutputTypes checks that the built-ins compile in the rule
// environment too, to bool: they are documented as what a rule may copy.
func TestBuiltinOutputTypes(t *testing.T) {
	base, err := getBaseEnvironment()
	if err != nil {
		t.Fatal(err)
	}
	env := celEnv(base.envSet)
	for gk, src := range builtinSources {
		for _, e := range []struct {
			expr string
			want *cel.Type
		}{
			{src.success, cel.BoolType}, {src.failure, cel.BoolType},
		} {
			ast, iss := env.Compile(e.expr)
			if iss.Err() != nil {
				t.Errorf("%s: %q: %v", kindKey(gk), e.expr, iss.Err())
				continue
			}
			if !ast.OutputType().IsExactType(e.want) {
				t.Errorf("%s: %q has type %s, want %s", kindKey(gk), e.expr, ast.OutputType(), e.want)
			}
		}
	}
}
