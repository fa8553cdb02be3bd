package main

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"sync"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"k8s.io/apimachinery/pkg/runtime/schema"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
)

// severity of a lint finding: errors fail the run, warnings only print.
type severity string

const (
	sevError   severity = "error"
	sevWarning severity = "warning"
)

// finding is one thing lint reports.
type finding struct {
	// Where is "file:line" of the rule's document.
	Where    string
	Rule     string
	Severity severity
	// Field is the path in the rule, e.g. "spec.failure"; "" for the rule
	// or the document as a whole.
	Field   string
	Message string
}

func (f finding) String() string {
	s := fmt.Sprintf("%s: %s:", f.Where, f.Severity)
	if f.Rule != "" {
		s += " rule " + f.Rule + ":"
	}
	if f.Field != "" {
		s += " " + f.Field + ":"
	}
	return s + " " + f.Message
}

// Bounds of the CompletionRule schema, checked offline because the API
// server would reject a rule outside them.
const (
	maxPriority = 1000000
	maxTTL      = 2592000
)

var kindRE = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)

// lintRule checks one rule. Errors are what the API server or the
// controller rejects; warnings are parts of the rule that can never take
// effect. Every warning is sound: it holds whatever the trigger's status.
func lintRule(rule *wrapupv1alpha1.CompletionRule) []finding {
	var out []finding
	add := func(sev severity, field, format string, args ...any) {
		out = append(out, finding{Rule: rule.Name, Severity: sev, Field: field, Message: fmt.Sprintf(format, args...)})
	}
	spec := &rule.Spec
	if rule.Name == "" {
		add(sevError, "metadata.name", "is required")
	}
	if rule.Namespace != "" {
		add(sevWarning, "metadata.namespace", "CompletionRules are cluster-scoped: the namespace is ignored; use spec.namespaceSelector to scope the rule")
	}

	// The schema's cross-field rules (x-kubernetes-validations).
	t := spec.Trigger
	if t.Name != "" && t.Kind == "" {
		add(sevError, "spec.trigger.name", "needs spec.trigger.kind (the API server rejects the rule): without a kind, the trigger is the component annotated %s", wrapupv1alpha1.TriggerAnnotation)
	}
	if t.APIGroup != "" && t.Kind == "" {
		add(sevError, "spec.trigger.apiGroup", "needs spec.trigger.kind (the API server rejects the rule)")
	}
	if t.Kind != "" && !kindRE.MatchString(t.Kind) {
		add(sevError, "spec.trigger.kind", "%q is not a kind (want e.g. Job, PyTorchJob)", t.Kind)
	}
	gk := schema.GroupKind{Group: t.APIGroup, Kind: t.Kind}
	_, _, hasBuiltin := celpolicies.BuiltinFor(gk)
	if t.Kind != "" && spec.Success == "" && !hasBuiltin {
		add(sevError, "spec.success", "%s has no built-in expression: the rule needs a success expression (the API server rejects it without one)", kindName(gk))
	}
	if spec.Priority < -maxPriority || spec.Priority > maxPriority {
		add(sevError, "spec.priority", "%d is out of range [%d, %d]", spec.Priority, -maxPriority, maxPriority)
	}
	for _, fa := range []struct {
		field string
		a     wrapupv1alpha1.ActionSpec
	}{{"spec.onSuccess", spec.OnSuccess}, {"spec.onFailure", spec.OnFailure}} {
		field, a := fa.field, fa.a
		switch a.Action {
		case "", wrapupv1alpha1.ActionDeleteAll, wrapupv1alpha1.ActionUpdateStatus:
		default:
			add(sevError, field+".action", "%q is not DeleteAll or UpdateStatus", a.Action)
		}
		if ttl := a.TTLSecondsAfterFinished; ttl != nil && (*ttl < 0 || *ttl > maxTTL) {
			add(sevError, field+".ttlSecondsAfterFinished", "%d is out of range [0, %d]", *ttl, maxTTL)
		}
		if a.Action == wrapupv1alpha1.ActionUpdateStatus && a.TTLSecondsAfterFinished != nil && *a.TTLSecondsAfterFinished > 0 {
			add(sevWarning, field+".ttlSecondsAfterFinished", "is never used: UpdateStatus deletes nothing, so there is nothing to wait for")
		}
	}

	// The expressions, compiled as the controller compiles them.
	if _, err := celpolicies.Compile(spec); err != nil {
		var ce *celpolicies.CompileError
		if !errors.As(err, &ce) {
			add(sevError, "spec", "%v", err)
			return sortFindings(out)
		}
		for _, fe := range ce.Errors {
			msg := fe.Message
			if fe.Expression != "" {
				msg += " (in: " + oneLine(fe.Expression) + ")"
			}
			add(sevError, fe.Field, "%s", msg)
		}
		return sortFindings(out)
	}

	// Parts that can never take effect.
	switch {
	case isBoolLiteral(spec.Success, false):
		add(sevWarning, "spec.success", "is the literal false: the trigger never succeeds, so onSuccess and the message on success are never used")
	case isBoolLiteral(spec.Success, true) && (spec.Failure != "" || hasBuiltin):
		add(sevWarning, "spec.failure", "is never evaluated: success is the literal true and success wins over failure")
	}
	if isBoolLiteral(spec.Failure, false) {
		what := "no failure expression would apply either"
		if hasBuiltin || t.Kind == "" {
			what = "it replaces the built-in failure expression"
		}
		add(sevWarning, "spec.failure", "is the literal false: the trigger itself never counts as failed (%s); only an AppWrapper that its controller marks Failed reaches onFailure", what)
	}
	for _, name := range unusedVariables(spec) {
		add(sevWarning, "spec.variables", "variable %q is never used by success, failure, message or a later variable", name)
	}
	return sortFindings(out)
}

// sortFindings puts errors first, each kind in the order of the spec.
func sortFindings(fs []finding) []finding {
	sort.SliceStable(fs, func(i, j int) bool { return fs[i].Severity == sevError && fs[j].Severity != sevError })
	return fs
}

// parseEnv only parses: references are found in the syntax tree, and the
// rule was compiled in the real environment before.
var parseEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(cel.OptionalTypes())
})

// parse returns the syntax tree of expr, or nil when it cannot be had;
// callers then assume the least (the expression may use anything).
func parse(expr string) *celast.AST {
	env, err := parseEnv()
	if err != nil || expr == "" {
		return nil
	}
	a, iss := env.Parse(expr)
	if iss.Err() != nil {
		return nil
	}
	return a.NativeRep()
}

// isBoolLiteral says whether expr is the literal want (parentheses and
// spacing aside).
func isBoolLiteral(expr string, want bool) bool {
	a := parse(expr)
	if a == nil {
		return false
	}
	e := a.Expr()
	return e.Kind() == celast.LiteralKind && e.AsLiteral() == types.Bool(want)
}

// variableRefs lists the variables.<name> that expr reads. all is true when
// expr uses "variables" in a way other than selecting a field (passing the
// map itself, or an expression that cannot be parsed here), so that every
// variable must be taken as used.
func variableRefs(expr string) (names map[string]bool, all bool) {
	names = map[string]bool{}
	if expr == "" {
		return names, false
	}
	a := parse(expr)
	if a == nil {
		return names, true
	}
	idents, selected := 0, 0
	isVariables := func(e celast.Expr) bool {
		return e.Kind() == celast.IdentKind && e.AsIdent() == celpolicies.VariablesVarName
	}
	celast.PreOrderVisit(a.Expr(), celast.NewExprVisitor(func(e celast.Expr) {
		switch e.Kind() {
		case celast.IdentKind:
			if isVariables(e) {
				idents++
			}
		case celast.SelectKind:
			// variables.x, and has(variables.x).
			if s := e.AsSelect(); isVariables(s.Operand()) {
				names[s.FieldName()] = true
				selected++
			}
		case celast.CallKind:
			// variables.?x parses as _?._(variables, "x").
			c := e.AsCall()
			if c.FunctionName() == operators.OptSelect && len(c.Args()) == 2 && isVariables(c.Args()[0]) &&
				c.Args()[1].Kind() == celast.LiteralKind {
				if s, ok := c.Args()[1].AsLiteral().(types.String); ok {
					names[string(s)] = true
					selected++
				}
			}
		}
	}))
	return names, idents > selected
}

// unusedVariables lists the variables that no expression that can run
// reads: variables are lazy, so these are never evaluated.
func unusedVariables(spec *wrapupv1alpha1.CompletionRuleSpec) []string {
	used := map[string]bool{}
	readers := []string{spec.Success, spec.Failure, spec.Message}
	for _, v := range spec.Variables {
		readers = append(readers, v.Expression)
	}
	for _, expr := range readers {
		names, all := variableRefs(expr)
		if all {
			return nil
		}
		for n := range names {
			used[n] = true
		}
	}
	// Only later variables can read a variable (an earlier one reading it
	// would not compile), so any reader counts.
	var unused []string
	for _, v := range spec.Variables {
		if !used[v.Name] {
			unused = append(unused, v.Name)
		}
	}
	return unused
}

// lintDocuments lints every CompletionRule among docs. Documents of other
// kinds are skipped; it returns how many rules it checked.
func lintDocuments(docs []document) ([]finding, int) {
	var out []finding
	seen := map[string]string{}
	n := 0
	for _, d := range docs {
		tm, err := typeOf(d)
		if err != nil {
			out = append(out, finding{Where: d.Where(), Severity: sevError, Message: err.Error()})
			continue
		}
		if !isRule(tm) {
			continue
		}
		n++
		rule, err := decodeRule(d)
		if err != nil {
			out = append(out, finding{Where: d.Where(), Severity: sevError, Message: err.Error()})
			continue
		}
		for _, f := range lintRule(rule) {
			f.Where = d.Where()
			out = append(out, f)
		}
		if rule.Name == "" {
			continue
		}
		if prev, dup := seen[rule.Name]; dup {
			out = append(out, finding{Where: d.Where(), Rule: rule.Name, Severity: sevWarning, Field: "metadata.name",
				Message: "another rule of the same name is at " + prev + ": applying both keeps only the last"})
		} else {
			seen[rule.Name] = d.Where()
		}
	}
	return out, n
}

// printLint writes the findings and a summary; it returns the number of
// errors.
func printLint(w io.Writer, fs []finding, rules, files int) int {
	errs, warns := 0, 0
	for _, f := range fs {
		fmt.Fprintln(w, f)
		if f.Severity == sevError {
			errs++
		} else {
			warns++
		}
	}
	fmt.Fprintf(w, "%s in %s: %s, %s\n", plural(rules, "rule"), plural(files, "file"), plural(errs, "error"), plural(warns, "warning"))
	return errs
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
