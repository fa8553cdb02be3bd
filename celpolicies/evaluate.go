package celpolicies

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"github.com/google/cel-go/common"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/cel/lazy"
)

// Outcome is what an evaluation says of the trigger.
type Outcome string

const (
	// OutcomeRunning means neither success nor failure holds yet. It is also
	// the outcome returned with every error.
	OutcomeRunning Outcome = "Running"
	// OutcomeSucceeded means the success expression is true.
	OutcomeSucceeded Outcome = "Succeeded"
	// OutcomeFailed means the failure expression is true and success is not.
	OutcomeFailed Outcome = "Failed"
)

// Result is the outcome of evaluating a Policy against one trigger.
type Result struct {
	// Outcome is Running unless success or failure holds.
	Outcome Outcome
	// Message is the evaluated message expression, or the built-in message
	// when the outcome came from a built-in expression; empty while Running.
	Message string
	// Cost is the summed actual CEL cost of the rule's own expressions,
	// variables included; exported as a metric, it shows rules that are
	// close to the limit before they hit it. Built-in expressions are not
	// cost-tracked and add nothing.
	Cost uint64
	// BuiltinSuccess is true when the success expression was the built-in
	// one for the trigger's kind.
	BuiltinSuccess bool
	// BuiltinFailure is true when the failure expression was the built-in
	// one for the trigger's kind.
	BuiltinFailure bool
}

// DefaultTimeout bounds an evaluation whose context has no deadline. The
// cost limits bound the work an expression describes, but not its time:
// with cost tracking on, cel-go takes time quadratic in the length of the
// list a single comprehension walks (about 30 s for 150,000 items at a cost
// of 900,000), so only a deadline bounds it.
const DefaultTimeout = 2 * time.Second

// ErrNoSuccessExpression is returned (wrapped) by Evaluate when the rule has
// no success expression and the trigger's kind has no built-in one: the rule
// can never finish anything, which is a configuration error, not a state.
var ErrNoSuccessExpression = errors.New("no success expression")

// ErrCostLimitExceeded is wrapped by an EvalError when an expression, or the
// evaluation as a whole, ran past its cost limit.
var ErrCostLimitExceeded = errors.New("cost limit exceeded")

// EvalError is a runtime error of one expression. The trigger must then be
// treated as not finished: a missing field or an exhausted budget is never a
// reason to delete anything.
type EvalError struct {
	// Field is the path of the failing expression in the rule, e.g.
	// "spec.success" or "spec.variables[0].expression".
	Field string
	// Builtin is true when the failing expression was a built-in one.
	Builtin bool
	// Err is the cause; it wraps context.Canceled, context.DeadlineExceeded
	// or ErrCostLimitExceeded where those apply.
	Err error
}

// Error implements error.
func (e *EvalError) Error() string {
	if e.Builtin {
		return "evaluating built-in " + e.Field + ": " + e.Err.Error()
	}
	return "evaluating " + e.Field + ": " + e.Err.Error()
}

// Unwrap lets errors.Is see the cause.
func (e *EvalError) Unwrap() error { return e.Err }

// HasSuccess reports whether Evaluate can decide success for a trigger of
// the given kind: the rule has a success expression or the kind a built-in.
func (p *Policy) HasSuccess(gk schema.GroupKind) bool {
	if p.success != nil {
		return true
	}
	_, ok := builtinSources[gk]
	return ok
}

// Evaluate evaluates the policy against a trigger of kind gk and the
// AppWrapper that holds it, both as unstructured content. Success wins when
// success and failure both hold. Any error comes with OutcomeRunning.
//
// ctx interrupts comprehensions; without a deadline, DefaultTimeout applies.
// The maps are read, never written.
func (p *Policy) Evaluate(ctx context.Context, gk schema.GroupKind, object, appWrapper map[string]any) (Result, error) {
	res := Result{Outcome: OutcomeRunning}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	b, err := compiledBuiltinFor(gk)
	if err != nil {
		return res, err
	}
	success, failure := p.success, p.failure
	if success == nil {
		if b == nil {
			return res, fmt.Errorf("%w for %s: the rule needs spec.success", ErrNoSuccessExpression, kindKey(gk))
		}
		success, res.BuiltinSuccess = b.success, true
	}
	if failure == nil && b != nil {
		failure, res.BuiltinFailure = b.failure, true
	}
	if err := ctx.Err(); err != nil {
		return res, &EvalError{Field: success.field, Builtin: success.builtin, Err: err}
	}

	ev := &evaluation{ctx: ctx}
	ev.act.object = object
	ev.act.appWrapper = appWrapper
	ev.act.variables = p.variablesValue(ev)

	ok, err := ev.evalBool(success)
	if err == nil && ok {
		res.Outcome = OutcomeSucceeded
	} else if err == nil && failure != nil {
		ok, err = ev.evalBool(failure)
		if err == nil && ok {
			res.Outcome = OutcomeFailed
		}
	}
	res.Cost = ev.cost
	if err != nil || res.Outcome == OutcomeRunning {
		return res, err
	}

	switch {
	case p.message != nil:
		s, err := ev.evalString(p.message)
		res.Cost = ev.cost
		if err != nil {
			res.Outcome = OutcomeRunning
			return res, err
		}
		res.Message = s
	// A built-in message describes the built-in condition; it would mislead
	// next to a success or failure the user defined.
	case res.Outcome == OutcomeSucceeded && res.BuiltinSuccess:
		res.Message = b.successMessage(object)
	case res.Outcome == OutcomeFailed && res.BuiltinFailure:
		res.Message = b.failureMessage(object)
	}
	res.Message = truncate(res.Message, MaxMessageLength)
	return res, nil
}

// variablesValue is the runtime value of "variables": a map that evaluates
// each variable when first used, so that an unused variable costs nothing
// and cannot fail the evaluation.
func (p *Policy) variablesValue(ev *evaluation) ref.Val {
	if len(p.variables) == 0 {
		return p.emptyVariables
	}
	m := lazy.NewMapValue(p.variablesType)
	for i := range p.variables {
		v := &p.variables[i]
		m.Append(v.name, func(*lazy.MapValue) ref.Val { return ev.evalVariable(v) })
	}
	return m
}

// evaluation is the state of one Evaluate call.
type evaluation struct {
	ctx  context.Context
	act  activation
	cost uint64
}

// activation resolves the variables without building a map per call.
type activation struct {
	object     map[string]any
	appWrapper map[string]any
	variables  ref.Val
}

var _ interpreter.Activation = (*activation)(nil)

// ResolveName implements interpreter.Activation.
func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case ObjectVarName:
		return a.object, true
	case AppWrapperVarName:
		return a.appWrapper, true
	case VariablesVarName:
		return a.variables, true
	}
	return nil, false
}

// Parent implements interpreter.Activation.
func (a *activation) Parent() interpreter.Activation { return nil }

// variableError carries a variable's own error through the CEL value that
// the expression using it sees, so that the EvalError names the variable.
type variableError struct {
	field string
	err   error
}

func (e *variableError) Error() string { return e.field + ": " + e.err.Error() }
func (e *variableError) Unwrap() error { return e.err }

func (ev *evaluation) evalVariable(v *variable) ref.Val {
	val, err := ev.run(&v.program)
	if err == nil {
		err = ev.chargeSize(val)
	}
	if err != nil {
		return types.WrapErr(&variableError{field: v.field, err: err})
	}
	return val
}

// chargeSize adds the size of a variable's string or bytes value to the
// cost. cel-go charges '+' by operand size only when the checker picked the
// string overload; on dyn operands, which is what object fields are, it
// charges 1, so variables that each double the previous one would build a
// string of gigabytes for a cost of a few dozen. Charging each variable's
// value, as a traversal, bounds that by the evaluation budget.
func (ev *evaluation) chargeSize(val ref.Val) error {
	var n int
	switch v := val.(type) {
	case types.String:
		n = len(v)
	case types.Bytes:
		n = len(v)
	default:
		return nil
	}
	ev.cost += uint64(math.Ceil(float64(n) * common.StringTraversalCostFactor))
	if ev.cost > EvaluationCostBudget {
		return ev.overBudget()
	}
	return nil
}

// run evaluates one program and accounts for its cost.
func (ev *evaluation) run(p *program) (ref.Val, error) {
	// Once over budget, the terms that && and || still evaluate after an
	// error must not each spend a full per-call limit.
	if ev.cost > EvaluationCostBudget {
		return nil, ev.overBudget()
	}
	val, det, err := p.prog.ContextEval(ev.ctx, &ev.act)
	if det != nil {
		if c := det.ActualCost(); c != nil {
			ev.cost += *c
		}
	}
	if err != nil {
		return nil, err
	}
	if ev.cost > EvaluationCostBudget {
		return nil, ev.overBudget()
	}
	return val, nil
}

func (ev *evaluation) overBudget() error {
	return fmt.Errorf("%w: the evaluation cost %d, more than the budget of %d", ErrCostLimitExceeded, ev.cost, EvaluationCostBudget)
}

func (ev *evaluation) evalBool(p *program) (bool, error) {
	val, err := ev.run(p)
	if err != nil {
		return false, ev.evalError(p, err)
	}
	b, ok := val.(types.Bool)
	if !ok {
		return false, &EvalError{Field: p.field, Builtin: p.builtin, Err: fmt.Errorf("must evaluate to bool but got %s", val.Type().TypeName())}
	}
	return bool(b), nil
}

func (ev *evaluation) evalString(p *program) (string, error) {
	val, err := ev.run(p)
	if err != nil {
		return "", ev.evalError(p, err)
	}
	s, ok := val.(types.String)
	if !ok {
		return "", &EvalError{Field: p.field, Builtin: p.builtin, Err: fmt.Errorf("must evaluate to string but got %s", val.Type().TypeName())}
	}
	return string(s), nil
}

// evalError attributes err to the variable that caused it, if any, and
// marks cost-limit errors so that callers can count them apart.
func (ev *evaluation) evalError(p *program, err error) *EvalError {
	field, builtin := p.field, p.builtin
	var ve *variableError
	if errors.As(err, &ve) {
		field, builtin, err = ve.field, false, ve.err
	}
	var cancelled interpreter.EvalCancelledError
	if errors.As(err, &cancelled) && cancelled.Cause == interpreter.CostLimitExceeded {
		err = fmt.Errorf("%w: more than the per-call limit of %d", ErrCostLimitExceeded, PerCallCostLimit)
	}
	return &EvalError{Field: field, Builtin: builtin, Err: err}
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
