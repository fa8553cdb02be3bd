package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/validation/spec"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
	"github.com/wrapup-dev/wrapup/celpolicies/schemas"
	"github.com/wrapup-dev/wrapup/gc/decision"
)

// severity of a lint finding: errors fail the run, warnings only print.
type severity string

const (
	sevError   severity = "error"
	sevWarning severity = "warning"
)

// finding is one thing lint reports.
type finding struct {
	// At is "file:line:column" of the field (or of the document).
	At       string
	Rule     string
	Severity severity
	// Field is the path in the rule, e.g. "spec.failure"; "" for the rule
	// or the document as a whole.
	Field   string
	Message string
}

// sevNote: something lint could not check; it neither fails nor warns.
const sevNote severity = "note"

func (f finding) String() string {
	s := fmt.Sprintf("%s: %s:", f.At, f.Severity)
	if f.Field != "" {
		s += " " + f.Field + ":"
	}
	// One line per finding (a CEL syntax error's caret line included), as
	// compilers print them.
	s += " " + strings.Join(strings.Fields(strings.ReplaceAll(f.Message, "\n", " ")), " ")
	if f.Rule != "" {
		s += " (rule " + f.Rule + ")"
	}
	return s
}

// lintSchemas say what to type-check against.
type lintSchemas struct {
	// schemaFor gives the schema of a trigger kind and the version it is
	// of, as the controller would check it; ok false when there is none
	// (then why says so).
	schemaFor func(gk schema.GroupKind) (gvk schema.GroupVersionKind, s *spec.Schema, why string, ok bool)
	// where names what the schemas are for notes: "shipped" or "cluster".
	where string
}

// offlineSchemas type-checks against the schemas shipped with the plugin.
func offlineSchemas() lintSchemas {
	return lintSchemas{where: "offline", schemaFor: func(gk schema.GroupKind) (schema.GroupVersionKind, *spec.Schema, string, bool) {
		gvk, ok := schemas.Preferred(gk)
		if !ok {
			return gvk, nil, fmt.Sprintf("no schema of %s is shipped (only: %s): its expressions are not type-checked offline; --server-schema checks them against the cluster's",
				kindName(gk), strings.Join(schemas.GroupVersions(), ", ")), false
		}
		s, err := schemas.Resolve(gvk)
		if err != nil {
			return gvk, nil, err.Error(), false
		}
		return gvk, s, "", true
	}}
}

// lintRule checks one rule as the controller checks it: it compiles the
// expressions, and type-checks them against the trigger kind's schema;
// then it warns of parts of the rule that can never take effect (every
// such warning holds whatever the trigger's status). at positions a field.
func lintRule(rule *wrapupv1alpha1.CompletionRule, opts lintSchemas, at func(field string) string) []finding {
	var out []finding
	add := func(sev severity, field, format string, args ...any) {
		where := at(field)
		out = append(out, finding{At: where, Rule: rule.Name, Severity: sev, Field: field, Message: fmt.Sprintf(format, args...)})
	}
	spec := &rule.Spec
	if rule.Namespace != "" {
		add(sevWarning, "metadata.namespace", "CompletionRules are cluster-scoped: the namespace is ignored; use spec.namespaceSelector to scope the rule")
	}
	// What the admission webhook and the controller refuse besides the
	// expressions: selectors that do not parse, a name the API server
	// refuses, a kind that cannot be in its group (errors), a near miss of
	// a built-in kind that may be a kind of its own (a warning).
	t := spec.Trigger
	gk := schema.GroupKind{Group: t.APIGroup, Kind: t.Kind}
	for _, p := range decision.RuleProblems(rule) {
		sev := sevWarning
		if p.Fatal {
			sev = sevError
		}
		msg := p.Message
		if !p.Fatal && strings.HasPrefix(p.Field, "spec.trigger.") {
			// A kind of the same name as a built-in kind of another group
			// (Volcano's batch.volcano.sh Job beside batch's): no mistake
			// when the named group has it.
			if knownKind(opts, gk) {
				continue
			}
			if opts.where != "cluster" {
				msg += fmt.Sprintf(" (if your cluster serves %s, --server-schema finds it there and says nothing of this)", kindName(gk))
			}
		}
		add(sev, p.Field, "%s", msg)
	}
	_, _, hasBuiltin := celpolicies.BuiltinFor(gk)

	// The expressions, compiled as the controller compiles them.
	if _, err := celpolicies.Compile(spec); err != nil {
		var ce *celpolicies.CompileError
		if !errors.As(err, &ce) {
			add(sevError, "spec", "%v", err)
			return sortFindings(out)
		}
		for _, fe := range ce.Errors {
			add(sevError, fe.Field, "%s", fe.Message)
		}
		return sortFindings(out)
	}

	// Type-checked against the trigger kind's schema, as the controller
	// does (a rule that names no kind takes components of any kind).
	if t.Kind != "" && opts.schemaFor != nil {
		if gvk, s, why, ok := opts.schemaFor(gk); ok {
			for _, w := range celpolicies.TypeChecking(rule, gvk, s).ExpressionWarnings {
				add(sevWarning, w.FieldRef, "%s", w.Warning)
			}
		} else {
			add(sevNote, "spec.trigger.kind", "%s", why)
		}
	}

	// Comparisons with states the kind never has, and outcomes on states
	// its controller moves on from.
	for _, f := range stateFindings(rule) {
		add(f.Severity, f.Field, "%s", f.Message)
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
	for _, fa := range []struct {
		field string
		a     wrapupv1alpha1.ActionSpec
	}{{"spec.onSuccess", spec.OnSuccess}, {"spec.onFailure", spec.OnFailure}} {
		if a := fa.a; a.Action == wrapupv1alpha1.ActionUpdateStatus && a.TTLSecondsAfterFinished != nil && *a.TTLSecondsAfterFinished > 0 {
			add(sevWarning, fa.field+".ttlSecondsAfterFinished", "is never used: UpdateStatus deletes nothing, so there is nothing to wait for")
		}
	}
	for _, name := range unusedVariables(spec) {
		add(sevWarning, "spec.variables", "variable %q is never used by success, failure, message or a later variable", name)
	}
	return sortFindings(out)
}

// knownKind says whether the schemas lint checks against know gk: a
// schema of it is shipped, or the cluster serves it.
func knownKind(opts lintSchemas, gk schema.GroupKind) bool {
	if opts.schemaFor == nil || gk.Kind == "" {
		return false
	}
	gvk, _, _, ok := opts.schemaFor(gk)
	return ok || gvk.Kind != ""
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

// lintDocuments lints every CompletionRule among docs, as the API server
// validates it (the CRD's schema and rules) and as the controller checks
// it. Documents of other kinds are skipped; it returns how many rules it
// checked.
func lintDocuments(ctx context.Context, docs []*document, opts lintSchemas) ([]finding, int) {
	fs, n, _ := lintAll(ctx, docs, opts)
	return fs, n
}

// lintAll is lintDocuments, and it also lints the AppWrappers among docs
// for what wrapup reads of them (where wrapup.dev/trigger is), returning
// how many it read.
func lintAll(ctx context.Context, docs []*document, opts lintSchemas) ([]finding, int, int) {
	var out []finding
	var usableRules []linted
	seen := map[string]string{}
	n, aws := 0, 0
	rs, err := loadRuleSchema()
	if err != nil {
		return []finding{{At: "kubectl-wrapup", Severity: sevError, Message: err.Error()}}, 0, 0
	}
	for _, d := range docs {
		tm, err := typeOf(d)
		if err != nil {
			out = append(out, finding{At: d.At(""), Severity: sevError, Message: err.Error()})
			continue
		}
		type item struct {
			fs   []finding
			rule *wrapupv1alpha1.CompletionRule
			at   func(string) string
		}
		var items []item
		switch {
		case tm.Kind == "List" && tm.APIVersion == "v1":
			// What kubectl get -o yaml prints: the rules among its items.
			obj, err := d.object()
			if err != nil {
				out = append(out, finding{At: d.At(""), Severity: sevError, Message: err.Error()})
				continue
			}
			list, _, _ := unstructured.NestedSlice(obj, "items")
			for i, it := range list {
				m, ok := it.(map[string]any)
				if !ok {
					continue
				}
				av, _ := m["apiVersion"].(string)
				k, _ := m["kind"].(string)
				itm := metav1.TypeMeta{APIVersion: av, Kind: k}
				if isAppWrapper(itm) {
					aws++
					out = append(out, appWrapperFindings(m, func(f string) string { return d.At(fmt.Sprintf("items[%d].", i) + f) })...)
					continue
				}
				if !isRule(itm) {
					continue
				}
				prefix := fmt.Sprintf("items[%d].", i)
				at := func(field string) string { return d.At(prefix + field) }
				fs, rule := lintRuleObject(ctx, rs, m, itm, opts, at)
				items = append(items, item{d.placeExpressions(prefix, fs), rule, at})
			}
		case isRule(tm):
			fs, rule := lintDocument(ctx, rs, d, tm, opts)
			items = append(items, item{d.placeExpressions("", fs), rule, d.At})
		case isAppWrapper(tm):
			aws++
			obj, err := d.object()
			if err != nil {
				out = append(out, finding{At: d.At(""), Severity: sevError, Message: err.Error()})
				continue
			}
			out = append(out, appWrapperFindings(obj, d.At)...)
		}
		for _, it := range items {
			n++
			out = append(out, it.fs...)
			if it.rule == nil || it.rule.Name == "" {
				continue
			}
			if prev, dup := seen[it.rule.Name]; dup {
				out = append(out, finding{At: it.at("metadata.name"), Rule: it.rule.Name, Severity: sevWarning, Field: "metadata.name",
					Message: "another rule of the same name is at " + prev + ": applying both keeps only the last"})
			} else {
				seen[it.rule.Name] = it.at("metadata.name")
			}
			if usable(it.fs) {
				usableRules = append(usableRules, linted{it.rule, it.at})
			}
		}
	}
	out = append(out, tieFindings(usableRules)...)
	return out, n, aws
}

// appWrapperFindings reports a wrapup.dev/trigger that wrapup does not read:
// on the AppWrapper's own metadata (the controller's
// TriggerAnnotationMisplaced Event says the same).
func appWrapperFindings(obj map[string]any, at func(string) string) []finding {
	name, _, _ := unstructured.NestedString(obj, "metadata", "name")
	v, found, _ := unstructured.NestedString(obj, "metadata", "annotations", wrapupv1alpha1.TriggerAnnotation)
	ignored, _, _ := unstructured.NestedString(obj, "metadata", "annotations", wrapupv1alpha1.IgnoreAnnotation)
	if !found || !decision.Truthy(v) || decision.Truthy(ignored) {
		// An AppWrapper wrapup ignores: the controller says nothing of it.
		return nil
	}
	field := "metadata.annotations"
	return []finding{{At: at(field), Severity: sevWarning, Field: field,
		Message: fmt.Sprintf("AppWrapper %s: %s", name, decision.MisplacedTriggerAnnotation)}}
}

// isAppWrapper says whether a document declares itself an AppWrapper.
func isAppWrapper(tm metav1.TypeMeta) bool {
	return tm.Kind == "AppWrapper" && schema.FromAPIVersionAndKind(tm.APIVersion, tm.Kind).Group == awv1beta2.GroupVersion.Group
}

// lintDocument lints one CompletionRule document; it returns the rule as
// the API server would store it (pruned and defaulted), when it decodes.
func lintDocument(ctx context.Context, rs *ruleSchema, d *document, tm metav1.TypeMeta, opts lintSchemas) ([]finding, *wrapupv1alpha1.CompletionRule) {
	if tm.APIVersion != wrapupv1alpha1.GroupVersion.String() {
		return lintRuleObject(ctx, rs, nil, tm, opts, d.At)
	}
	obj, err := d.object()
	if err != nil {
		return []finding{{At: d.At(""), Severity: sevError, Message: err.Error()}}, nil
	}
	return lintRuleObject(ctx, rs, obj, tm, opts, d.At)
}

// lintRuleObject lints one CompletionRule object; at positions its fields.
func lintRuleObject(ctx context.Context, rs *ruleSchema, obj map[string]any, tm metav1.TypeMeta, opts lintSchemas, at func(string) string) ([]finding, *wrapupv1alpha1.CompletionRule) {
	var out []finding
	if tm.APIVersion != wrapupv1alpha1.GroupVersion.String() {
		return []finding{{At: at("apiVersion"), Severity: sevError, Field: "apiVersion",
			Message: fmt.Sprintf("%q: wrapup serves %s", tm.APIVersion, wrapupv1alpha1.GroupVersion)}}, nil
	}
	name, _, _ := unstructured.NestedString(obj, "metadata", "name")
	unknown, errs := rs.validate(ctx, obj)
	for _, p := range unknown {
		out = append(out, finding{At: at(p), Rule: name, Severity: sevError, Field: p,
			Message: "unknown field (the API server rejects the rule: strict decoding error: unknown field \"" + p + "\")"})
	}
	for _, e := range errs {
		out = append(out, finding{At: at(e.Field), Rule: name, Severity: sevError, Field: e.Field, Message: e.ErrorBody()})
	}
	rejected := len(out) > 0
	rule := &wrapupv1alpha1.CompletionRule{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, rule); err != nil {
		if !rejected {
			out = append(out, finding{At: at(""), Rule: name, Severity: sevError, Message: "decoding CompletionRule: " + err.Error()})
		}
		sortByPosition(out)
		return out, nil
	}
	for _, f := range lintRule(rule, opts, at) {
		if rejected && f.Severity == sevNote {
			// The API server rejects the rule: what lint could not check
			// of it is no news.
			continue
		}
		out = append(out, f)
	}
	sortByPosition(out)
	return out, rule
}

// position splits At into the file, the line and the column (0 when At
// has none).
func (f finding) position() (file string, line, col int) {
	parts := strings.Split(f.At, ":")
	if len(parts) < 3 {
		return f.At, 0, 0
	}
	line, err1 := strconv.Atoi(parts[len(parts)-2])
	col, err2 := strconv.Atoi(parts[len(parts)-1])
	if err1 != nil || err2 != nil {
		return f.At, 0, 0
	}
	return strings.Join(parts[:len(parts)-2], ":"), line, col
}

// sortByPosition orders a document's findings as they come in the file.
func sortByPosition(fs []finding) {
	sort.SliceStable(fs, func(i, j int) bool {
		_, li, ci := fs[i].position()
		_, lj, cj := fs[j].position()
		return li < lj || li == lj && ci < cj
	})
}

// lintObject is the findings as lint -o json|yaml prints them.
func lintObject(fs []finding, rules, files int) map[string]any {
	var items []any
	errs, warns := 0, 0
	for _, f := range fs {
		file, line, col := f.position()
		m := map[string]any{"file": file, "line": int64(line), "column": int64(col), "severity": string(f.Severity), "message": f.Message}
		if f.Rule != "" {
			m["rule"] = f.Rule
		}
		if f.Field != "" {
			m["field"] = f.Field
		}
		items = append(items, m)
		switch f.Severity {
		case sevError:
			errs++
		case sevWarning:
			warns++
		}
	}
	if items == nil {
		items = []any{}
	}
	return map[string]any{
		"apiVersion": wrapupv1alpha1.GroupVersion.String(), "kind": "LintResult",
		"rules": int64(rules), "files": int64(files), "errors": int64(errs), "warnings": int64(warns), "findings": items,
	}
}

// printLint writes the findings and a summary; it returns the number of
// errors and of warnings.
func printLint(w io.Writer, fs []finding, rules, files int) (int, int) {
	errs, warns := 0, 0
	for _, f := range fs {
		fmt.Fprintln(w, f)
		switch f.Severity {
		case sevError:
			errs++
		case sevWarning:
			warns++
		}
	}
	fmt.Fprintf(w, "%s in %s: %s, %s\n", plural(rules, "rule"), plural(files, "file"), plural(errs, "error"), plural(warns, "warning"))
	return errs, warns
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
