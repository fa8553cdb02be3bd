package celpolicies

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/version"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/common"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/library"
	"k8s.io/apiserver/pkg/cel/openapi"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// TypeCheck checks a rule's expressions against the trigger kind's schema,
// as the API server publishes it (OpenAPI v3, through discovery), the way
// the API server type-checks a ValidatingAdmissionPolicy: object is typed by
// the schema, so a misspelt field (object.status.succeded) or a wrong
// comparison is found before any trigger finishes. It returns a warning per
// expression that does not type-check; the rule itself is compiled and run
// with a dynamically typed object regardless, so warnings never stop it.
// A nil schema, or one that yields no type, checks nothing.
func TypeCheck(ruleSpec *v1alpha1.CompletionRuleSpec, objectSchema *spec.Schema, kind string) []v1alpha1.ExpressionWarning {
	if ruleSpec == nil || objectSchema == nil {
		return nil
	}
	objectType := common.SchemaDeclType(&openapi.Schema{Schema: objectSchema}, true)
	if objectType == nil {
		return nil
	}
	objectType = objectType.MaybeAssignTypeName("wrapup.trigger." + kind)
	variablesType := apiservercel.NewObjectType(variablesTypeName, map[string]*apiservercel.DeclField{})
	envSet, err := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()).Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions: []cel.EnvOption{
			cel.Variable(ObjectVarName, objectType.CelType()),
			cel.Variable(AppWrapperVarName, cel.DynType),
			cel.Variable(VariablesVarName, variablesType.CelType()),
			cel.ParserRecursionLimit(MaxNestingDepth),
			cel.ParserExpressionSizeLimit(MaxExpressionLength),
		},
		DeclTypes: []*apiservercel.DeclType{objectType, variablesType},
	})
	if err != nil {
		return []v1alpha1.ExpressionWarning{{FieldRef: "spec", Warning: fmt.Sprintf("building the type-checking environment: %v", err)}}
	}
	env := celEnv(envSet)

	var warnings []v1alpha1.ExpressionWarning
	check := func(field, expr string, want *cel.Type) *cel.Type {
		if expr == "" || len(expr) > MaxExpressionLength {
			return nil
		}
		ast, iss := env.Compile(expr)
		if iss.Err() != nil {
			warnings = append(warnings, v1alpha1.ExpressionWarning{FieldRef: field, Warning: issuesMessage(iss)})
			return nil
		}
		// As CRD validation does: the worst case over every object the
		// schema allows (lists bounded by maxItems, or by what fits in a
		// request), against the limit of one evaluation. A size the schema
		// does not give (an optional chain, a value computed at run time)
		// is taken as 1: the estimate is then a lower bound of the worst
		// case, and over the limit it is real (taken as the largest
		// integer, as the estimator would, string() of an optional field
		// would cost more than any budget).
		low := &library.CostEstimator{SizeEstimator: &schemaSizes{root: objectType, unknown: &checker.SizeEstimate{Min: 0, Max: 1}}}
		if est, err := env.EstimateCost(ast, low); err == nil && est.Max > StaticCostLimit {
			warnings = append(warnings, v1alpha1.ExpressionWarning{FieldRef: field, Warning: fmt.Sprintf(
				"estimated worst-case cost %s exceeds %d, the API server's limit for a validation rule, for a %s with lists of up to %d items and strings of up to %d bytes where its schema sets no bound: "+
					"on such a trigger it fails with a cost error (taken as not finished); %s",
				costString(est.Max), StaticCostLimit, kind, UnboundedListItems, UnboundedStringBytes, costAdvice(ast.NativeRep().Expr()))})
		}
		// A field the schema does not require, read without ? or has():
		// an error on every trigger that lacks it.
		for _, m := range optionalReads(ast, objectType, kind, ruleSpec.Trigger.APIGroup) {
			warnings = append(warnings, v1alpha1.ExpressionWarning{FieldRef: field, Warning: m})
		}
		// The rule compiles with a dynamically typed object, so that a
		// success of an int type passes there and fails at every
		// evaluation: typed, it is found now.
		if out := ast.OutputType(); want != nil && !out.IsExactType(want) && !out.IsExactType(cel.DynType) {
			warnings = append(warnings, v1alpha1.ExpressionWarning{FieldRef: field, Warning: fmt.Sprintf(
				"must evaluate to %s but, for a %s, evaluates to %s: every evaluation fails (taken as not finished)", want, kind, out)})
		}
		return ast.OutputType()
	}
	for i, v := range ruleSpec.Variables {
		if i >= MaxVariables || checkVariableName(v.Name) != "" {
			break
		}
		out := check(fmt.Sprintf("spec.variables[%d].expression", i), v.Expression, nil)
		variablesType.Fields[v.Name] = apiservercel.NewDeclField(v.Name, declTypeOf(out), true, nil, nil)
	}
	check(fieldSuccess, ruleSpec.Success, cel.BoolType)
	check(fieldFailure, ruleSpec.Failure, cel.BoolType)
	check(fieldMessage, ruleSpec.Message, cel.StringType)
	return warnings
}

// costString writes an estimate, "more than 10^19" for a saturated one.
func costString(c uint64) string {
	if c == math.MaxUint64 {
		return "more than 10^19"
	}
	return fmt.Sprint(c)
}

// schemaSizes gives the cost estimator the sizes the trigger kind's schema
// allows for what a path under object reaches (as the API server's CRD
// validation estimates them); nil, unknown, for anything else.
type schemaSizes struct {
	root *apiservercel.DeclType
	// unknown is the size of what the schema does not size; nil: unknown
	// (the estimator then takes the largest integer).
	unknown *checker.SizeEstimate
}

func (s *schemaSizes) EstimateSize(element checker.AstNode) *checker.SizeEstimate {
	if est := s.estimateSize(element); est != nil {
		return est
	}
	return s.unknown
}

func (s *schemaSizes) estimateSize(element checker.AstNode) *checker.SizeEstimate {
	path := element.Path()
	if len(path) == 0 || path[0] != ObjectVarName {
		return nil
	}
	node := s.root
	for _, name := range path[1:] {
		switch name {
		case "@items", "@values":
			node = node.ElemType
		case "@keys":
			node = node.KeyType
		default:
			f, ok := node.Fields[name]
			if !ok {
				return nil
			}
			node = f.Type
		}
		if node == nil {
			return nil
		}
	}
	max := uint64(node.MaxElements)
	switch {
	case (node.IsList() || node.IsMap()) && max > UnboundedListItems:
		max = UnboundedListItems
	case (node.CelType() == cel.StringType || node.CelType() == cel.BytesType) && max > UnboundedStringBytes:
		max = UnboundedStringBytes
	}
	return &checker.SizeEstimate{Min: 0, Max: max}
}

// UnboundedListItems and UnboundedStringBytes are the sizes the cost
// estimate takes for a list (or map) and a string of the trigger that its
// schema does not bound. CRD validation takes them as large as a request
// may be (3 MB: a million conditions), so that one walk of a status's
// conditions (every built-in expression, every form the docs show) was
// over the budget. A stored object is at most 1.5 MB (etcd's default
// request limit): 3,000 items of 500 bytes, or 4 KiB strings by the
// hundred. Taken together these bounds are generous (their product is
// far above any object), and still tell one walk of a list (3,000 steps)
// from a walk of it inside a walk of it (9,000,000 steps, each comparing
// something), which no budget affords.
const (
	UnboundedListItems   = 3000
	UnboundedStringBytes = 4096
)

// costAdvice names what makes an expression costly: comprehensions
// (exists, all, map, filter) over lists of the trigger, nested in one
// another, or, failing that, the walks it makes.
func costAdvice(e celast.Expr) string {
	var walks, nested []string
	var visit func(x celast.Expr, outer string)
	visit = func(x celast.Expr, outer string) {
		if x.Kind() == celast.ComprehensionKind {
			c := x.AsComprehension()
			over := exprPath(c.IterRange())
			visit(c.IterRange(), outer)
			if over != "" {
				walks = append(walks, over)
				if outer != "" {
					nested = append(nested, fmt.Sprintf("a walk of %s inside a walk of %s", over, outer))
				}
			}
			in := outer
			if over != "" {
				in = over
			}
			visit(c.AccuInit(), outer)
			visit(c.LoopCondition(), in)
			visit(c.LoopStep(), in)
			visit(c.Result(), outer)
			return
		}
		walkChildren(x, "", false, func(y celast.Expr, _ bool) { visit(y, outer) })
	}
	visit(e, "")
	switch {
	case len(nested) > 0:
		return "it makes " + strings.Join(dedupe(nested), ", ") + ": each step of the outer walk walks the inner list again; compare within one walk, or bound the lists (size() checks)"
	case len(walks) > 0:
		return "it walks " + strings.Join(dedupe(walks), ", ") + ": bound what it does per item, or the lists (size() checks)"
	}
	return "bound the lists and strings it reads"
}

// exprPath is the path an expression reads from a variable (object.status
// .conditions), through selects and optional selects; "" when it is not one.
func exprPath(x celast.Expr) string {
	switch x.Kind() {
	case celast.IdentKind:
		return x.AsIdent()
	case celast.SelectKind:
		if p := exprPath(x.AsSelect().Operand()); p != "" {
			return p + "." + x.AsSelect().FieldName()
		}
	case celast.CallKind:
		c := x.AsCall()
		args := c.Args()
		switch {
		case c.FunctionName() == operators.OptSelect && len(args) == 2 && args[1].Kind() == celast.LiteralKind:
			if p := exprPath(args[0]); p != "" {
				return fmt.Sprintf("%s.%v", p, args[1].AsLiteral().Value())
			}
		case c.FunctionName() == "orValue" && c.IsMemberFunction():
			return exprPath(c.Target())
		}
	}
	return ""
}

func dedupe(s []string) []string {
	var out []string
	for _, x := range s {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

func (s *schemaSizes) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

// TypeChecking is what a rule's status says of checking its expressions
// against the schema s of its trigger kind gvk: the warnings of TypeCheck,
// as many and as long as the status holds. The rule controller, its
// admission webhook and kubectl wrapup lint report the same.
func TypeChecking(rule *v1alpha1.CompletionRule, gvk schema.GroupVersionKind, s *spec.Schema) *v1alpha1.TypeChecking {
	warnings := TypeCheck(&rule.Spec, s, gvk.Kind)
	if len(warnings) > maxTypeCheckWarnings {
		warnings = warnings[:maxTypeCheckWarnings]
	}
	for i := range warnings {
		warnings[i].Warning = Truncate(warnings[i].Warning, 4000)
	}
	return &v1alpha1.TypeChecking{Schema: gvk.String(), ExpressionWarnings: warnings}
}

const maxTypeCheckWarnings = 32

// Truncate cuts s to at most n bytes, on a character boundary, marking the cut.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
