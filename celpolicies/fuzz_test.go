package celpolicies

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/json"

	"github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// FuzzCompileEvaluate feeds arbitrary expression text, in every position a
// rule can hold one, and an arbitrary JSON object as the trigger. Whatever
// the input: no panic, errors of the documented types, and no outcome other
// than Running next to an error. More seeds are in testdata/fuzz.
func FuzzCompileEvaluate(f *testing.F) {
	for _, seed := range []struct{ expr, object string }{
		{"object.status.succeeded >= 1", `{"status":{"succeeded":1}}`},
		{"object.?status.?conditions.orValue([]).exists(c, c.type == 'Complete' && c.status == 'True')",
			`{"status":{"conditions":[{"type":"Complete","status":"True","reason":"CompletionsReached"}]}}`},
		{"object.status.conditions", `{"status":{"conditions":"Complete"}}`},
		{"'done: ' + object.status.reason", `{"status":{"reason":7}}`},
		{"object.items.all(x, object.items.all(y, x + y > 0))", `{"items":[1,2,3,4,5,6,7,8,9,10]}`},
		{"quantity(object.spec.memory).isGreaterThan(quantity('1Gi'))", `{"spec":{"memory":"2Gi"}}`},
		{"object.metadata.name.matches('^[a-z(')", `{"metadata":{"name":"x"}}`},
		{"((((((((((true))))))))))", `{}`},
		{"object[?'status'].orValue({}).size() == 0", `null`},
		{"1 / 0 == 1", `{}`},
		{"variables.v", `{}`},
		{"", `{}`},
	} {
		f.Add(seed.expr, seed.object)
	}
	f.Fuzz(func(t *testing.T, expr, objectJSON string) {
		var object map[string]any
		if err := json.Unmarshal([]byte(objectJSON), &object); err != nil {
			object = nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		specs := []v1alpha1.CompletionRuleSpec{
			{Success: expr},
			{Success: "false", Failure: expr, Message: expr},
			{
				Variables: []v1alpha1.Variable{{Name: "v", Expression: expr}, {Name: "w", Expression: "variables.v"}},
				Success:   "variables.w == variables.v",
			},
		}
		for _, spec := range specs {
			p, err := Compile(&spec)
			if err != nil {
				var ce *CompileError
				if !errors.As(err, &ce) || len(ce.Errors) == 0 {
					t.Fatalf("Compile error %v (%T) is not a non-empty *CompileError", err, err)
				}
				for _, fe := range ce.Errors {
					if fe.Field == "" || fe.Message == "" {
						t.Fatalf("FieldError %+v lacks a field or message", fe)
					}
				}
				if p != nil {
					t.Fatalf("Compile returned a policy with an error")
				}
				continue
			}
			for _, gk := range []schema.GroupKind{gkJob, gkUnknown} {
				res, err := p.Evaluate(ctx, gk, object, object)
				if object != nil && ctx.Err() == nil {
					// An informer keeps only the fields the policy reads:
					// evaluating what it keeps gives the same result.
					kept := runtime.DeepCopyJSON(object)
					p.ObjectFields(gk).Keep(kept)
					again, err2 := p.Evaluate(ctx, gk, kept, object)
					if ctx.Err() == nil && ((err == nil) != (err2 == nil) || again.Outcome != res.Outcome || again.Message != res.Message) {
						t.Fatalf("on the fields kept (%s): %+v, %v; on the whole object: %+v, %v", p.ObjectFields(gk), again, err2, res, err)
					}
				}
				if err != nil {
					var ee *EvalError
					if !errors.As(err, &ee) && !errors.Is(err, ErrNoSuccessExpression) {
						t.Fatalf("Evaluate error %v (%T) is neither an *EvalError nor ErrNoSuccessExpression", err, err)
					}
					if res.Outcome != OutcomeRunning {
						t.Fatalf("Outcome %s with error %v", res.Outcome, err)
					}
					continue
				}
				switch res.Outcome {
				case OutcomeRunning, OutcomeSucceeded, OutcomeFailed:
				default:
					t.Fatalf("Outcome %q", res.Outcome)
				}
				if len(res.Message) > MaxMessageLength {
					t.Fatalf("message of %d bytes", len(res.Message))
				}
			}
		}
	})
}
