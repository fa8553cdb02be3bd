package celpolicies

import (
	"fmt"
	"slices"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	apiservercel "k8s.io/apiserver/pkg/cel"
)

// alwaysPresent are the paths under object that every stored object has,
// whatever its schema says: the API server sets them.
var alwaysPresent = []string{"apiVersion", "kind", "metadata", "metadata.name", "metadata.uid",
	"metadata.resourceVersion", "metadata.creationTimestamp", "metadata.generation"}

// alwaysPresentOf are the paths a built-in kind's objects always have
// besides: the API server sets them when it creates one (a Pod's phase is
// Pending from its creation, pkg/registry/core/pod/strategy.go
// PrepareForCreate).
var alwaysPresentOf = map[string][]string{"Pod": {"status.phase"}}

// builtinStatus says whether the objects of group always have spec and
// status: the Kubernetes API's own kinds (their Go types serialize both
// even when empty), unlike custom resources, which have no status until
// their controller writes one.
func builtinStatus(group string) bool {
	return group == "" || !strings.Contains(group, ".") || strings.HasSuffix(group, ".k8s.io") && !strings.HasSuffix(group, "x-k8s.io")
}

// optionalReads finds, in a type-checked expression, each chain of field
// selections under object (object.status.conditions) that reads a field
// the schema does not mark required, without ? or has(): on an object that
// lacks it, the evaluation errors ("no such key") and counts as not
// finished, with an EvaluationError Warning, on every such trigger. A
// field is guarded where has() says it is there: on both sides of an &&
// with has(f) on either side (CEL's && absorbs the error of one side when
// the other is false), on both sides of an || with !has(f) on either, and
// in the branch of ?: its condition chooses; the fields above it count as
// guarded too (has() reads them first), except in the chain has() itself
// tests.
// Each finding is "line:column: message", at the field's selection.
func optionalReads(a *cel.Ast, root *apiservercel.DeclType, kind, group string) []string {
	native := a.NativeRep()
	type top struct {
		chain  []ast.Expr
		guards map[string]bool
	}
	var tops []top
	// optTarget: chains that are the target of an optional selection
	// (object.status.?phase), by the ID of their last selection.
	optTarget := map[int64]bool{}
	// hasOperand: chains that has() tests a field of (has(object.status.x)
	// reads object.status, which must be there).
	hasOperand := map[int64]bool{}
	var visit func(e ast.Expr, shadowed, inChain bool, guards map[string]bool)
	visit = func(e ast.Expr, shadowed, inChain bool, guards map[string]bool) {
		if e.Kind() == ast.CallKind {
			c := e.AsCall()
			args := c.Args()
			switch {
			case c.FunctionName() == operators.OptSelect && len(args) == 2:
				optTarget[args[0].ID()] = true
			case c.FunctionName() == operators.LogicalAnd && len(args) == 2 && !shadowed:
				// CEL's && absorbs an error when the other side is
				// false: has(f) on either side guards f on both.
				g := union(guards, tested(args[0], false), tested(args[1], false))
				visit(args[0], shadowed, false, g)
				visit(args[1], shadowed, false, g)
				return
			case c.FunctionName() == operators.LogicalOr && len(args) == 2 && !shadowed:
				// || absorbs an error when the other side is true:
				// !has(f) on either side guards f on both.
				g := union(guards, tested(args[0], true), tested(args[1], true))
				visit(args[0], shadowed, false, g)
				visit(args[1], shadowed, false, g)
				return
			case c.FunctionName() == operators.Conditional && len(args) == 3 && !shadowed:
				visit(args[0], shadowed, false, guards)
				visit(args[1], shadowed, false, union(guards, tested(args[0], false)))
				visit(args[2], shadowed, false, union(guards, tested(args[0], true)))
				return
			}
		}
		if e.Kind() == ast.SelectKind {
			s := e.AsSelect()
			if s.IsTestOnly() {
				hasOperand[s.Operand().ID()] = true
				visit(s.Operand(), shadowed, false, guards)
				return
			}
			if !inChain && !shadowed {
				if chain := selectChain(e); chain != nil {
					tops = append(tops, top{chain, guards})
				}
			}
			visit(s.Operand(), shadowed, true, guards)
			return
		}
		walkChildren(e, ObjectVarName, shadowed, func(c ast.Expr, sh bool) { visit(c, sh, false, guards) })
	}
	visit(native.Expr(), false, false, nil)

	var out []string
	for _, tp := range tops {
		chain, guarded := tp.chain, tp.guards
		t := root
		path := ObjectVarName
		for i, sel := range chain {
			name := sel.AsSelect().FieldName()
			path += "." + name
			rel := strings.TrimPrefix(path, ObjectVarName+".")
			var optional bool
			switch {
			case t == nil:
			case t.IsMap():
				optional, t = true, t.ElemType
			case t.IsObject():
				f, ok := t.Fields[name]
				if !ok {
					t = nil
					break
				}
				optional, t = !f.Required, f.Type
			default:
				t = nil
			}
			if t == nil && !optional {
				break
			}
			if !optional || guarded[path] || !hasOperand[chain[len(chain)-1].ID()] && guardedBelow(guarded, path) || slices.Contains(alwaysPresent, rel) ||
				group == "" && slices.Contains(alwaysPresentOf[kind], rel) ||
				(rel == "spec" || rel == "status") && builtinStatus(group) {
				continue
			}
			loc := native.SourceInfo().GetStartLocation(sel.ID())
			names := make([]string, len(chain))
			for k, s := range chain {
				names[k] = s.AsSelect().FieldName()
			}
			safe := ObjectVarName
			if i > 0 {
				safe += "." + strings.Join(names[:i], ".")
			}
			safe += ".?" + strings.Join(names[i:], ".?")
			if !optTarget[chain[len(chain)-1].ID()] {
				safe += ".orValue(" + zeroOf(native.GetType(chain[len(chain)-1].ID())) + ")"
			}
			what := "optional in the " + kind + " schema"
			if t != nil && i > 0 && chainIsMapKey(root, names[:i]) {
				what = "a map key, which may be absent"
			}
			out = append(out, fmt.Sprintf("%d:%d: %s is %s: %s errors (no such key) on a %s without it, and every such evaluation counts as not finished, with an EvaluationError Warning; read it as %s, or test it with has()",
				loc.Line(), loc.Column()+1, name, what, ObjectVarName+"."+strings.Join(names, "."), kind, safe))
			break
		}
	}
	return out
}

// tested are the paths that e, true (or, negated, false), says are there:
// the fields has() tests in its conjuncts (for negated, the disjuncts
// !has(f)).
func tested(e ast.Expr, negated bool) map[string]bool {
	out := map[string]bool{}
	var walk func(e ast.Expr, neg bool)
	walk = func(e ast.Expr, neg bool) {
		switch e.Kind() {
		case ast.SelectKind:
			if e.AsSelect().IsTestOnly() && !neg {
				if p := exprPath(e); p != "" {
					out[p] = true
				}
			}
		case ast.CallKind:
			c := e.AsCall()
			args := c.Args()
			switch {
			case c.FunctionName() == operators.LogicalNot && len(args) == 1:
				walk(args[0], !neg)
			case c.FunctionName() == operators.LogicalAnd && !neg, c.FunctionName() == operators.LogicalOr && neg:
				for _, a := range args {
					walk(a, neg)
				}
			}
		}
	}
	walk(e, negated)
	return out
}

// union is the paths of every set.
func union(sets ...map[string]bool) map[string]bool {
	out := map[string]bool{}
	for _, s := range sets {
		for p := range s {
			out[p] = true
		}
	}
	return out
}

// guardedBelow says whether has() tests a field under path: it then reads
// path first (and errors itself when path is absent), so a later read of
// path adds no error of its own.
func guardedBelow(guarded map[string]bool, path string) bool {
	for p := range guarded {
		if strings.HasPrefix(p, path+".") {
			return true
		}
	}
	return false
}

// chainIsMapKey says whether the field after names is a key of a map.
func chainIsMapKey(root *apiservercel.DeclType, names []string) bool {
	t := root
	for _, n := range names {
		switch {
		case t == nil:
			return false
		case t.IsMap():
			t = t.ElemType
		case t.IsObject():
			f, ok := t.Fields[n]
			if !ok {
				return false
			}
			t = f.Type
		default:
			return false
		}
	}
	return t != nil && t.IsMap()
}

// selectChain is the chain of plain selections e ends, from the one
// nearest object, when it starts at the variable object; nil otherwise.
func selectChain(e ast.Expr) []ast.Expr {
	var chain []ast.Expr
	for e.Kind() == ast.SelectKind && !e.AsSelect().IsTestOnly() {
		chain = append(chain, e)
		e = e.AsSelect().Operand()
	}
	if e.Kind() != ast.IdentKind || e.AsIdent() != ObjectVarName {
		return nil
	}
	slices.Reverse(chain)
	return chain
}

// zeroOf is a CEL literal of the empty value of t, for orValue().
func zeroOf(t *cel.Type) string {
	if t == nil {
		return "null"
	}
	switch t.Kind() {
	case cel.ListType(cel.DynType).Kind():
		return "[]"
	case cel.MapType(cel.DynType, cel.DynType).Kind(), cel.ObjectType("x").Kind():
		return "{}"
	case cel.StringType.Kind():
		return "''"
	case cel.IntType.Kind():
		return "0"
	case cel.DoubleType.Kind():
		return "0.0"
	case cel.BoolType.Kind():
		return "false"
	}
	return "null"
}
