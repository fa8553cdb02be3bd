package main

import (
	"fmt"
	"slices"
	"strings"

	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"k8s.io/apimachinery/pkg/runtime/schema"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
)

// comparison is an expression's comparison of something a kind's
// controller writes with a string literal.
type comparison struct {
	// what is compared: "type", "status" or "reason" of a condition, or
	// the dotted path of a field under object ("status.phase").
	what string
	// lit is the literal compared with.
	lit string
	// positive: the comparison holds when what is lit (==, in), and is not
	// under a negation; a positive comparison in success or failure
	// finishes a run on lit.
	positive bool
	// at is "line:column" of the literal in the expression.
	at string
}

// comparisons lists the comparisons of expr with string literals of the
// conditions' type, status and reason, and of fields under object.
func comparisons(expr string) []comparison {
	a := parse(expr)
	if a == nil {
		return nil
	}
	w := &stateWalker{info: a.SourceInfo(), conds: map[string]bool{}}
	w.walk(a.Expr(), false)
	return w.out
}

type stateWalker struct {
	info *celast.SourceInfo
	// conds are the comprehension variables that range over conditions.
	conds map[string]bool
	out   []comparison
}

func (w *stateWalker) walk(e celast.Expr, negated bool) {
	switch e.Kind() {
	case celast.CallKind:
		c := e.AsCall()
		args := c.Args()
		switch c.FunctionName() {
		case operators.LogicalNot:
			w.walk(args[0], !negated)
			return
		case operators.Equals, operators.NotEquals:
			for _, sides := range [][2]celast.Expr{{args[0], args[1]}, {args[1], args[0]}} {
				if what, ok := w.compared(sides[0]); ok {
					if lit, ok := stringLiteral(sides[1]); ok {
						w.add(what, lit, sides[1].ID(), c.FunctionName() == operators.Equals && !negated)
					}
				}
			}
		case operators.In:
			if what, ok := w.compared(args[0]); ok && args[1].Kind() == celast.ListKind {
				for _, el := range args[1].AsList().Elements() {
					if lit, ok := stringLiteral(el); ok {
						w.add(what, lit, el.ID(), !negated)
					}
				}
			}
		}
		if c.IsMemberFunction() {
			w.walk(c.Target(), negated)
		}
		for _, arg := range args {
			w.walk(arg, negated)
		}
	case celast.ComprehensionKind:
		c := e.AsComprehension()
		w.walk(c.IterRange(), negated)
		bound := false
		if p, ok := objectPath(c.IterRange()); ok && (p == "conditions" || strings.HasSuffix(p, ".conditions")) && !w.conds[c.IterVar()] {
			w.conds[c.IterVar()], bound = true, true
		}
		w.walk(c.AccuInit(), negated)
		w.walk(c.LoopCondition(), negated)
		w.walk(c.LoopStep(), negated)
		w.walk(c.Result(), negated)
		if bound {
			delete(w.conds, c.IterVar())
		}
	case celast.SelectKind:
		w.walk(e.AsSelect().Operand(), negated)
	case celast.ListKind:
		for _, el := range e.AsList().Elements() {
			w.walk(el, negated)
		}
	case celast.MapKind:
		for _, en := range e.AsMap().Entries() {
			me := en.AsMapEntry()
			w.walk(me.Key(), negated)
			w.walk(me.Value(), negated)
		}
	}
}

func (w *stateWalker) add(what, lit string, id int64, positive bool) {
	loc := w.info.GetStartLocation(id)
	w.out = append(w.out, comparison{what: what, lit: lit, positive: positive, at: fmt.Sprintf("%d:%d", loc.Line(), loc.Column()+1)})
}

// compared says what e reads: a condition's type, status or reason (of a
// comprehension variable over conditions, or of an indexed condition), or
// a field under object.
func (w *stateWalker) compared(e celast.Expr) (string, bool) {
	e = unwrapOrValue(e)
	operand, field, ok := selected(e)
	if !ok {
		return "", false
	}
	switch field {
	case "type", "status", "reason":
		if operand.Kind() == celast.IdentKind && w.conds[operand.AsIdent()] {
			return field, true
		}
		if operand.Kind() == celast.CallKind && operand.AsCall().FunctionName() == operators.Index {
			if p, ok := objectPath(operand.AsCall().Args()[0]); ok && strings.HasSuffix(p, "conditions") {
				return field, true
			}
		}
	}
	return objectPath(e)
}

// selected splits a field selection (x.f, x.?f) into x and f.
func selected(e celast.Expr) (celast.Expr, string, bool) {
	switch e.Kind() {
	case celast.SelectKind:
		s := e.AsSelect()
		if s.IsTestOnly() {
			return nil, "", false
		}
		return s.Operand(), s.FieldName(), true
	case celast.CallKind:
		c := e.AsCall()
		if c.FunctionName() == operators.OptSelect && len(c.Args()) == 2 {
			if f, ok := stringLiteral(c.Args()[1]); ok {
				return c.Args()[0], f, true
			}
		}
	}
	return nil, "", false
}

// unwrapOrValue is x for x.orValue(d) and x.value().
func unwrapOrValue(e celast.Expr) celast.Expr {
	for e.Kind() == celast.CallKind {
		c := e.AsCall()
		if !c.IsMemberFunction() || (c.FunctionName() != "orValue" && c.FunctionName() != "value") {
			break
		}
		e = c.Target()
	}
	return e
}

// objectPath is the dotted path under object that e reads
// (object.status.phase, object.?status.?phase.orValue(”): "status.phase").
func objectPath(e celast.Expr) (string, bool) {
	e = unwrapOrValue(e)
	if e.Kind() == celast.IdentKind {
		return "", e.AsIdent() == celpolicies.ObjectVarName
	}
	operand, field, ok := selected(e)
	if !ok {
		return "", false
	}
	p, ok := objectPath(operand)
	if !ok {
		return "", false
	}
	if p == "" {
		return field, true
	}
	return p + "." + field, true
}

func stringLiteral(e celast.Expr) (string, bool) {
	if e.Kind() != celast.LiteralKind {
		return "", false
	}
	s, ok := e.AsLiteral().(types.String)
	return string(s), ok
}

// stateFindings warns, for a rule of a kind whose states wrapup knows
// (celpolicies.StatesOf), of comparisons with a condition type or a state
// value the kind's controller never writes (the comparison never holds),
// and of success and failure expressions that finish a run on a state the
// controller moves on from (a retry, a restart, a suspension): the run
// would be recorded, and deleted, while it goes on.
func stateFindings(rule *wrapupv1alpha1.CompletionRule) []finding {
	spec := &rule.Spec
	gk := schema.GroupKind{Group: spec.Trigger.APIGroup, Kind: spec.Trigger.Kind}
	ks, ok := celpolicies.StatesOf(gk)
	if gk.Kind == "" || !ok {
		return nil
	}
	kind := kindName(gk)
	var out []finding
	seen := map[string]bool{}
	add := func(field, format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		if seen[field+msg] {
			return
		}
		seen[field+msg] = true
		out = append(out, finding{Rule: rule.Name, Severity: sevWarning, Field: field, Message: msg})
	}
	exprs := []struct{ field, expr string }{{"spec.success", spec.Success}, {"spec.failure", spec.Failure}, {"spec.message", spec.Message}}
	for i, v := range spec.Variables {
		exprs = append(exprs, struct{ field, expr string }{fmt.Sprintf("spec.variables[%d].expression", i), v.Expression})
	}
	for _, x := range exprs {
		cmps := comparisons(x.expr)
		finishes := x.field == "spec.success" || x.field == "spec.failure"
		for _, c := range cmps {
			values, isState := stateValues(ks, c.what)
			switch {
			case c.what == "type" && !slices.Contains(ks.ConditionTypes, c.lit) && !ks.OtherConditions:
				add(x.field, "%s: %s never has a condition of type %q (its controller sets %s): this comparison never holds",
					c.at, kind, c.lit, listOrNone(ks.ConditionTypes))
			case isState && !slices.Contains(values, c.lit):
				add(x.field, "%s: %s's controller never writes %q in %s (it writes %s): this comparison never holds",
					c.at, kind, c.lit, c.what, listOrNone(values))
			case finishes && c.positive && (c.what == "type" || isState) && slices.Contains(ks.Transient, c.lit):
				what := "state"
				if c.what == "type" {
					what = "condition"
				}
				add(x.field, "%s: %s %q is one %s's controller moves on from (a retry, a restart, a suspension), never final: "+
					"taken as the outcome, it ends a run that goes on (final: %s)", c.at, what, c.lit, kind, ks.Final)
			}
		}
		if finishes {
			for _, msg := range conditionQualifiers(ks, kind, x.expr, cmps) {
				add(x.field, "%s", msg)
			}
		}
	}
	return out
}

// stateValues are the values the controller writes in the field at path
// under object, when it is a state field of the kind.
func stateValues(ks celpolicies.KindStates, path string) ([]string, bool) {
	if ks.StateField != "" && path == ks.StateField {
		return ks.States, true
	}
	v, ok := ks.MoreStates[path]
	return v, ok
}

// conditionQualifiers warns of a condition type tested as an outcome that
// is final only with some reason or status: a transient "Type/Reason"
// (Failed/MPIJobEvicted) tested without its reason nor completionTime, and
// a transient "Type=Status" (Succeeded=Unknown) tested with that status or
// with an inequality that lets it through.
func conditionQualifiers(ks celpolicies.KindStates, kind, expr string, cmps []comparison) []string {
	var out []string
	mentions := func(what, lit string) bool {
		return slices.ContainsFunc(cmps, func(c comparison) bool { return c.what == what && c.lit == lit })
	}
	for _, t := range ks.Transient {
		if typ, reason, ok := strings.Cut(t, "/"); ok {
			for _, c := range cmps {
				// completionTime tells a final condition from one the
				// controller moves on from (an MPIJob's eviction).
				if c.what == "type" && c.lit == typ && c.positive && !mentions("reason", reason) && !strings.Contains(expr, "completionTime") {
					out = append(out, fmt.Sprintf("%s: %s's controller also sets condition %q with reason %q while the run goes on, which is not final: "+
						"tell it apart (final: %s)", c.at, kind, typ, reason, ks.Final))
					break
				}
			}
		}
		if typ, status, ok := strings.Cut(t, "="); ok && mentions("type", typ) {
			for _, c := range cmps {
				if c.what != "status" {
					continue
				}
				if c.positive && c.lit == status || !c.positive && c.lit != status && !mentions("status", status) {
					out = append(out, fmt.Sprintf("%s: condition %q is %q while the run goes on, which is not final, and this comparison lets it through: "+
						"compare the status with \"True\" or \"False\" (final: %s)", c.at, typ, status, ks.Final))
					break
				}
			}
		}
	}
	return out
}

func listOrNone(values []string) string {
	if len(values) == 0 {
		return "none"
	}
	q := make([]string, len(values))
	for i, v := range values {
		q[i] = fmt.Sprintf("%q", v)
	}
	return strings.Join(q, ", ")
}
