package celpolicies

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/google/cel-go/cel"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/lazy"
	"k8s.io/apiserver/pkg/cel/library"

	"github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// Field paths used in errors, so that a condition or Event points at the
// exact place in the CompletionRule.
const (
	fieldSuccess = "spec.success"
	fieldFailure = "spec.failure"
	fieldMessage = "spec.message"
)

// variableNameRE mirrors the CompletionRule schema; it is checked again here
// because a name that is not an identifier could never be referenced.
var variableNameRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// CompileOptions tunes compilation. The zero value is what Compile uses.
type CompileOptions struct {
	// MaxEstimatedCost, when non-zero, rejects an expression whose estimated
	// worst-case cost exceeds it. object and appWrapper are dyn, so any
	// expression that iterates over them has an unbounded estimate; the
	// check is useful for rules whose inputs have a known size.
	MaxEstimatedCost uint64
}

// FieldError is one invalid expression of a rule.
type FieldError struct {
	// Field is the path of the expression in the rule, e.g. "spec.success"
	// or "spec.variables[1].expression".
	Field string
	// Expression is the offending expression, shortened when it was too long
	// to be parsed at all.
	Expression string
	// Message says what is wrong and, for CEL errors, where ("1:12: ...",
	// line:column).
	Message string
}

// Error implements error.
func (e FieldError) Error() string {
	return e.Field + ": " + e.Message
}

// CompileError lists every invalid expression of a rule, so that the user can
// fix them all in one edit.
type CompileError struct {
	// Errors has one entry per invalid expression, in the order of the spec.
	Errors []FieldError
}

// Error implements error.
func (e *CompileError) Error() string {
	parts := make([]string, len(e.Errors))
	for i, fe := range e.Errors {
		parts[i] = fe.Error()
	}
	return "compiling expressions: " + strings.Join(parts, "; ")
}

// program is one compiled expression.
type program struct {
	field   string
	prog    cel.Program
	builtin bool
	// reads are the fields of object and of appWrapper the expression
	// reads.
	reads reads
}

// reads are the fields of the trigger and of the AppWrapper that
// expressions read.
type reads struct {
	object, appWrapper Fields
	// appWrapperMetadata are the fields of appWrapper.metadata read.
	appWrapperMetadata Fields
}

func (r reads) union(o reads) reads {
	return reads{object: r.object.Union(o.object), appWrapper: r.appWrapper.Union(o.appWrapper),
		appWrapperMetadata: r.appWrapperMetadata.Union(o.appWrapperMetadata)}
}

func readsOf(a *cel.Ast) reads {
	e := a.NativeRep().Expr()
	return reads{object: fieldReads(e, ObjectVarName), appWrapper: fieldReads(e, AppWrapperVarName),
		appWrapperMetadata: subFieldReads(e, AppWrapperVarName, "metadata")}
}

// variable is one compiled rule variable.
type variable struct {
	name string
	program
}

// Policy is a compiled CompletionRule: its programs can be evaluated
// concurrently and are reused until the rule's generation changes.
type Policy struct {
	success *program
	failure *program
	message *program
	// variables are in spec order; variables[i] may use variables[:i].
	variables []variable
	// variablesType is the type of "variables", for the lazy map's type.
	variablesType *apiservercel.DeclType
	// emptyVariables is "variables" for a rule without variables, shared
	// because nothing is ever written to it.
	emptyVariables *lazy.MapValue
	// reads are what the rule's own expressions (variables included) read.
	reads reads
}

// Compile compiles the expressions of a rule spec. An invalid rule yields a
// *CompileError that lists every invalid expression.
func Compile(spec *v1alpha1.CompletionRuleSpec) (*Policy, error) {
	return CompileWithOptions(spec, CompileOptions{})
}

// CompileWithOptions is Compile with tuning.
func CompileWithOptions(spec *v1alpha1.CompletionRuleSpec, opts CompileOptions) (*Policy, error) {
	if spec == nil {
		return nil, errors.New("compiling expressions: nil rule spec")
	}
	base, err := getBaseEnvironment()
	if err != nil {
		return nil, err
	}
	c := compiler{opts: opts}

	env := celEnv(base.envSet)
	p := &Policy{variablesType: base.noVariables, emptyVariables: base.emptyVariables}
	if len(spec.Variables) > MaxVariables {
		// Admission rejects this already; checked again because each
		// variable adds to the evaluation budget's worst case.
		c.fail("spec.variables", "", fmt.Sprintf("has %d variables, more than the limit of %d", len(spec.Variables), MaxVariables))
	} else if len(spec.Variables) > 0 {
		// Each rule needs its own type for "variables", whose fields are
		// added as the variables compile, so that a variable sees only the
		// ones before it. The field map is shared with the environment's
		// type provider, as in ValidatingAdmissionPolicy's composition.
		p.variablesType = apiservercel.NewObjectType(variablesTypeName, map[string]*apiservercel.DeclField{})
		envSet, err := extendWithVariables(p.variablesType)
		if err != nil {
			return nil, err
		}
		env = celEnv(envSet)
		p.variables = make([]variable, 0, len(spec.Variables))
		for i, v := range spec.Variables {
			field := fmt.Sprintf("spec.variables[%d]", i)
			if msg := checkVariableName(v.Name); msg != "" {
				c.fail(field+".name", v.Name, msg)
				continue
			}
			if _, dup := p.variablesType.Fields[v.Name]; dup {
				c.fail(field+".name", v.Name, fmt.Sprintf("duplicate variable name %q", v.Name))
				continue
			}
			prog, outType := c.compile(env, field+".expression", v.Expression, nil)
			// A variable that failed is still declared (as dyn), so that its
			// users are not reported as well: the user fixes one thing.
			p.variablesType.Fields[v.Name] = apiservercel.NewDeclField(v.Name, declTypeOf(outType), true, nil, nil)
			if prog != nil {
				p.variables = append(p.variables, variable{name: v.Name, program: *prog})
			}
		}
	}
	if spec.Success != "" {
		p.success, _ = c.compile(env, fieldSuccess, spec.Success, cel.BoolType)
	}
	if spec.Failure != "" {
		p.failure, _ = c.compile(env, fieldFailure, spec.Failure, cel.BoolType)
	}
	if spec.Message != "" {
		p.message, _ = c.compile(env, fieldMessage, spec.Message, cel.StringType)
	}
	if len(c.errs) > 0 {
		return nil, &CompileError{Errors: c.errs}
	}
	for _, prog := range []*program{p.success, p.failure, p.message} {
		if prog != nil {
			p.reads = p.reads.union(prog.reads)
		}
	}
	for i := range p.variables {
		p.reads = p.reads.union(p.variables[i].reads)
	}
	return p, nil
}

// checkVariableName returns why name cannot be a variable, or "". Beyond
// the schema's pattern: literals and "in" do not parse after "variables.",
// and a name with "__" markers is unescaped by the lazy map into another
// name, so the variable could never be read.
func checkVariableName(name string) string {
	if !variableNameRE.MatchString(name) {
		return "must be a CEL identifier (letters, digits and '_', not starting with a digit)"
	}
	switch name {
	case "in", "true", "false", "null":
		return fmt.Sprintf("%q is a CEL keyword", name)
	}
	if unescaped, ok := apiservercel.Unescape(name); !ok || unescaped != name {
		return "must not contain \"__\" escape sequences"
	}
	return ""
}

// compiler collects the errors of one rule.
type compiler struct {
	opts CompileOptions
	errs []FieldError
}

func (c *compiler) fail(field, expr, msg string) {
	c.errs = append(c.errs, FieldError{Field: field, Expression: expr, Message: msg})
}

// compile compiles one expression; want is the required output type, nil
// for any. dyn is accepted for any want and checked when evaluated, since
// object and appWrapper are dyn and most expressions over them are too.
func (c *compiler) compile(env *cel.Env, field, expr string, want *cel.Type) (*program, *cel.Type) {
	if len(expr) > MaxExpressionLength {
		c.fail(field, shorten(expr), fmt.Sprintf("expression is %d bytes long, more than the limit of %d", len(expr), MaxExpressionLength))
		return nil, nil
	}
	if strings.TrimSpace(expr) == "" {
		c.fail(field, expr, "expression is blank")
		return nil, nil
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		c.fail(field, expr, issuesMessage(iss))
		return nil, nil
	}
	out := ast.OutputType()
	if want != nil && !out.IsExactType(want) && !out.IsExactType(cel.DynType) {
		c.fail(field, expr, fmt.Sprintf("must evaluate to %s but got %s", want, out))
		return nil, out
	}
	if c.opts.MaxEstimatedCost > 0 {
		est, err := env.EstimateCost(ast, &library.CostEstimator{})
		if err != nil {
			c.fail(field, expr, "estimating cost: "+err.Error())
			return nil, out
		}
		if est.Max > c.opts.MaxEstimatedCost {
			c.fail(field, expr, fmt.Sprintf("estimated cost %d exceeds the limit of %d", est.Max, c.opts.MaxEstimatedCost))
			return nil, out
		}
	}
	prog, err := env.Program(ast, cel.InterruptCheckFrequency(celconfig.CheckFrequency))
	if err != nil {
		c.fail(field, expr, "building program: "+err.Error())
		return nil, out
	}
	return &program{field: field, prog: prog, reads: readsOf(ast)}, out
}

// issuesMessage renders CEL issues on one line each, "line:column: message",
// without the source excerpt: the message goes into a condition, and the
// expression is next to it in the rule.
func issuesMessage(iss *cel.Issues) string {
	// The parser recovers and reports on; past the first few errors the rest
	// are usually consequences of the first.
	const maxReported = 5
	errs := iss.Errors()
	parts := make([]string, 0, min(len(errs), maxReported)+1)
	for i, e := range errs {
		if i == maxReported {
			parts = append(parts, fmt.Sprintf("and %d more errors", len(errs)-maxReported))
			break
		}
		// cel-go names the container of an undeclared reference; wrapup
		// declares none, so it says nothing but noise.
		msg := strings.ReplaceAll(e.Message, " (in container '')", "")
		if line := e.Location.Line(); line > 0 {
			msg = fmt.Sprintf("%d:%d: %s", line, e.Location.Column()+1, msg)
		}
		parts = append(parts, msg)
	}
	return strings.Join(parts, "; ")
}

// shorten keeps the start of an expression too long to keep whole.
func shorten(expr string) string {
	const keep = 64
	if len(expr) <= keep {
		return expr
	}
	return strings.ToValidUTF8(expr[:keep], "") + "..."
}
