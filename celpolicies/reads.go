package celpolicies

import (
	"slices"
	"strings"

	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Fields are the top-level fields of an object that a policy reads. A
// Fields is never changed in place (its methods copy), so values may share
// their Names. An
// informer can drop every other field (a Job's spec, its pod template being
// the bulk of it) and the policy still sees all it reads. The zero value
// reads nothing.
type Fields struct {
	// All: the object is used whole (passed to a function, iterated, or
	// indexed by a computed key), so no field may be dropped.
	All bool
	// Names are the fields read, sorted and unique.
	Names []string
}

// AllFields reads every field.
var AllFields = Fields{All: true}

// FieldsOf reads the named fields.
func FieldsOf(names ...string) Fields {
	var f Fields
	for _, n := range names {
		f = f.with(n)
	}
	return f
}

// Has says whether name is read.
func (f Fields) Has(name string) bool {
	if f.All {
		return true
	}
	_, found := slices.BinarySearch(f.Names, name)
	return found
}

// Empty says whether nothing is read.
func (f Fields) Empty() bool { return !f.All && len(f.Names) == 0 }

// Covers says whether every field g reads is in f.
func (f Fields) Covers(g Fields) bool {
	if f.All {
		return true
	}
	if g.All {
		return false
	}
	for _, n := range g.Names {
		if !f.Has(n) {
			return false
		}
	}
	return true
}

// Union reads what f or g reads.
func (f Fields) Union(g Fields) Fields {
	if f.All || g.All {
		return AllFields
	}
	// The usual case (a rule over a built-in, one rule per kind) needs no
	// new set: a Fields is never changed in place, so sharing is safe.
	if f.Covers(g) {
		return f
	}
	if g.Covers(f) {
		return g
	}
	out := Fields{Names: slices.Clone(f.Names)}
	for _, n := range g.Names {
		out = out.with(n)
	}
	return out
}

// String is "*" for all fields, else the names joined by commas.
func (f Fields) String() string {
	if f.All {
		return "*"
	}
	return strings.Join(f.Names, ",")
}

func (f Fields) with(name string) Fields {
	if f.All {
		return f
	}
	i, found := slices.BinarySearch(f.Names, name)
	if !found {
		f.Names = slices.Insert(slices.Clone(f.Names), i, name)
	}
	return f
}

// fieldReads walks a compiled expression and returns the top-level fields
// of the variable named root that it reads: root.f, has(root.f), root.?f,
// root["f"] and root[?"f"]. Any other use of root reads it whole.
func fieldReads(e ast.Expr, root string) Fields {
	var f Fields
	// isRoot says whether an identifier names the variable root where a
	// comprehension may shadow it: the root-scoped ".root" always does.
	isRoot := func(name string, shadowed bool) bool {
		return name == "."+root || name == root && !shadowed
	}
	var walk func(ast.Expr, bool)
	walk = func(e ast.Expr, shadowed bool) {
		if f.All || e == nil {
			return
		}
		switch e.Kind() {
		case ast.IdentKind:
			if isRoot(e.AsIdent(), shadowed) {
				f = AllFields
			}
			return
		case ast.SelectKind:
			s := e.AsSelect()
			if op := s.Operand(); op.Kind() == ast.IdentKind && isRoot(op.AsIdent(), shadowed) {
				f = f.with(s.FieldName())
				return
			}
		case ast.CallKind:
			c := e.AsCall()
			args := c.Args()
			switch c.FunctionName() {
			case operators.Index, operators.OptSelect, operators.OptIndex:
				if len(args) == 2 && args[0].Kind() == ast.IdentKind && isRoot(args[0].AsIdent(), shadowed) &&
					args[1].Kind() == ast.LiteralKind {
					if s, ok := args[1].AsLiteral().(types.String); ok {
						f = f.with(string(s))
						return
					}
				}
			}
		}
		walkChildren(e, root, shadowed, walk)
	}
	walk(e, false)
	return f
}

// walkChildren calls walk on each child of e, with whether root is
// shadowed there: inside a comprehension's loop, its own variables shadow
// root.
func walkChildren(e ast.Expr, root string, shadowed bool, walk func(ast.Expr, bool)) {
	switch e.Kind() {
	case ast.SelectKind:
		walk(e.AsSelect().Operand(), shadowed)
	case ast.CallKind:
		c := e.AsCall()
		if c.IsMemberFunction() {
			walk(c.Target(), shadowed)
		}
		for _, a := range c.Args() {
			walk(a, shadowed)
		}
	case ast.ComprehensionKind:
		c := e.AsComprehension()
		walk(c.IterRange(), shadowed)
		walk(c.AccuInit(), shadowed)
		inner := shadowed || c.IterVar() == root || c.AccuVar() == root || c.HasIterVar2() && c.IterVar2() == root
		walk(c.LoopCondition(), inner)
		walk(c.LoopStep(), inner)
		walk(c.Result(), inner)
	case ast.ListKind:
		for _, el := range e.AsList().Elements() {
			walk(el, shadowed)
		}
	case ast.MapKind:
		for _, en := range e.AsMap().Entries() {
			me := en.AsMapEntry()
			walk(me.Key(), shadowed)
			walk(me.Value(), shadowed)
		}
	case ast.StructKind:
		for _, fl := range e.AsStruct().Fields() {
			walk(fl.AsStructField().Value(), shadowed)
		}
	}
}

// subFieldReads walks a compiled expression and returns the fields of
// root.field that it reads (root.field.f, root.field["f"] and their
// optional and has() forms). A use of root or of root.field whole reads
// all of them; other fields of root are not looked at.
func subFieldReads(e ast.Expr, root, field string) Fields {
	var f Fields
	isRoot := func(x ast.Expr, shadowed bool) bool {
		if x.Kind() != ast.IdentKind {
			return false
		}
		name := x.AsIdent()
		return name == "."+root || name == root && !shadowed
	}
	// literalKey is the field a select or a literal index names.
	literalKey := func(x ast.Expr) (operand ast.Expr, key string, ok bool) {
		switch x.Kind() {
		case ast.SelectKind:
			return x.AsSelect().Operand(), x.AsSelect().FieldName(), true
		case ast.CallKind:
			c := x.AsCall()
			args := c.Args()
			switch c.FunctionName() {
			case operators.Index, operators.OptSelect, operators.OptIndex:
				if len(args) == 2 && args[1].Kind() == ast.LiteralKind {
					if s, ok := args[1].AsLiteral().(types.String); ok {
						return args[0], string(s), true
					}
				}
			}
		}
		return nil, "", false
	}
	isField := func(x ast.Expr, shadowed bool) bool {
		op, key, ok := literalKey(x)
		return ok && key == field && isRoot(op, shadowed)
	}
	var walk func(ast.Expr, bool)
	walk = func(e ast.Expr, shadowed bool) {
		if f.All || e == nil {
			return
		}
		if op, key, ok := literalKey(e); ok {
			switch {
			case isField(op, shadowed):
				f = f.with(key)
				return
			case isRoot(op, shadowed) && key != field:
				return
			case isRoot(op, shadowed):
				f = AllFields // root.field whole
				return
			}
		}
		if isRoot(e, shadowed) {
			f = AllFields
			return
		}
		walkChildren(e, root, shadowed, walk)
	}
	walk(e, false)
	return f
}

// ObjectFields are the fields of a trigger of kind gk that an evaluation
// reads: the rule's expressions', and the built-in ones' that stand in for
// a missing success or failure.
func (p *Policy) ObjectFields(gk schema.GroupKind) Fields {
	f := p.reads.object
	if p.success != nil && p.failure != nil {
		return f
	}
	b, err := compiledBuiltinFor(gk)
	if err != nil {
		return AllFields
	}
	if b == nil {
		return f
	}
	if p.success == nil && b.success != nil {
		f = f.Union(b.success.reads.object)
	}
	if p.failure == nil && b.failure != nil {
		f = f.Union(b.failure.reads.object)
	}
	return f
}

// AppWrapperFields are the fields of the AppWrapper that the rule's
// expressions read (the built-ins read none).
func (p *Policy) AppWrapperFields() Fields { return p.reads.appWrapper }

// AppWrapperMetadataFields are the fields of the AppWrapper's metadata that
// the rule's expressions read.
func (p *Policy) AppWrapperMetadataFields() Fields { return p.reads.appWrapperMetadata }

// Keep drops from obj, in place, every top-level field that f does not
// read, except apiVersion, kind and metadata, which identify the object and
// its owner. An evaluation of a policy reading f sees the same values in
// the result as in obj.
func (f Fields) Keep(obj map[string]any) {
	if f.All {
		return
	}
	for k := range obj {
		switch k {
		case "apiVersion", "kind", "metadata":
			continue
		}
		if !f.Has(k) {
			delete(obj, k)
		}
	}
}

// Equal says whether f and g read the same fields.
func (f Fields) Equal(g Fields) bool {
	return f.All == g.All && (f.All || slices.Equal(f.Names, g.Names))
}
