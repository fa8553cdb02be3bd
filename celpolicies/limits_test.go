package celpolicies

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wrapup-dev/wrapup/api/v1alpha1"
)

var jobKind = schema.GroupKind{Group: "batch", Kind: "Job"}

// jobWithConditions is a Job whose status holds n conditions, the last one
// of type last (True).
func jobWithConditions(n int, last string) map[string]any {
	conds := make([]any, 0, n)
	for i := 0; i < n-1; i++ {
		conds = append(conds, map[string]any{"type": fmt.Sprintf("Progress%d", i), "status": "False", "reason": "Noise", "message": strings.Repeat("m", 32)})
	}
	conds = append(conds, map[string]any{"type": last, "status": "True", "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit"})
	return map[string]any{
		"apiVersion": "batch/v1", "kind": "Job",
		"metadata": map[string]any{"name": "big"},
		"status":   map[string]any{"conditions": conds},
	}
}

// Objects at the limits: the built-in and a user expression over a trigger
// with 10,000 conditions, and over a 1 MiB status, give the right answer or
// a cost error, never a hang.
func TestObjectsAtTheLimits(t *testing.T) {
	huge := map[string]any{
		"apiVersion": "batch/v1", "kind": "Job",
		"metadata": map[string]any{"name": "huge"},
		"status": map[string]any{
			"log":        strings.Repeat("x", 1<<20),
			"conditions": []any{map[string]any{"type": "Complete", "status": "True"}},
		},
	}
	tests := []struct {
		name    string
		spec    v1alpha1.CompletionRuleSpec
		object  map[string]any
		want    Outcome
		wantErr error
	}{
		{name: "built-in, 10,000 conditions", object: jobWithConditions(10000, "Failed"), want: OutcomeFailed},
		{name: "built-in, 1 MiB status", object: huge, want: OutcomeSucceeded},
		{
			name:   "user expression scanning 10,000 conditions",
			spec:   v1alpha1.CompletionRuleSpec{Success: "object.status.conditions.exists(c, c.type == 'Complete' && c.status == 'True')", Failure: "object.status.conditions.exists(c, c.type == 'Failed')"},
			object: jobWithConditions(10000, "Failed"),
			want:   OutcomeFailed,
		},
		{
			name:    "user expression pairing 10,000 conditions blows the cost limit",
			spec:    v1alpha1.CompletionRuleSpec{Success: "object.status.conditions.all(a, object.status.conditions.exists(b, b.type == a.type))"},
			object:  jobWithConditions(10000, "Complete"),
			wantErr: ErrCostLimitExceeded,
		},
		{
			name:   "user expression over a 1 MiB string",
			spec:   v1alpha1.CompletionRuleSpec{Success: "object.status.log.contains('done')"},
			object: huge,
			want:   OutcomeRunning,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compile(&tc.spec)
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			// A deadline far off: what these cases check is the cost limit
			// and the answer, which count operations, not seconds (a busy
			// machine must not turn a cost error into a deadline).
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			res, err := p.Evaluate(ctx, jobKind, tc.object, nil)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Evaluate error = %v, want %v", err, tc.wantErr)
				}
				if res.Outcome != OutcomeRunning {
					t.Errorf("outcome with an error = %s, want Running", res.Outcome)
				}
				return
			}
			if err != nil {
				t.Fatalf("Evaluate: %v", err)
			}
			if res.Outcome != tc.want {
				t.Errorf("outcome = %s, want %s", res.Outcome, tc.want)
			}
		})
	}
}

// Rules at the limits: the largest expressions and the most variables the
// schema allows compile and evaluate.
func TestRulesAtTheLimits(t *testing.T) {
	clause := "object.status.?succeeded.orValue(0) >= 1 || "
	expr := strings.Repeat(clause, (MaxExpressionLength-len("false"))/len(clause)) + "false"
	if len(expr) > MaxExpressionLength {
		t.Fatalf("test expression is %d bytes", len(expr))
	}
	spec := v1alpha1.CompletionRuleSpec{Success: expr}
	for i := 0; i < MaxVariables; i++ {
		prev := "object.status.?succeeded.orValue(0)"
		if i > 0 {
			prev = fmt.Sprintf("variables.v%d", i-1)
		}
		spec.Variables = append(spec.Variables, v1alpha1.Variable{Name: fmt.Sprintf("v%d", i), Expression: prev + " + 1"})
	}
	spec.Message = fmt.Sprintf("string(variables.v%d)", MaxVariables-1)
	p, err := Compile(&spec)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	obj := map[string]any{"status": map[string]any{"succeeded": int64(1)}}
	res, err := p.Evaluate(context.Background(), jobKind, obj, nil)
	if err != nil {
		t.Fatalf("Evaluate: %v", err)
	}
	if res.Outcome != OutcomeSucceeded || res.Message != fmt.Sprint(1+MaxVariables) {
		t.Errorf("result = %+v, want Succeeded with message %d", res, 1+MaxVariables)
	}
}

// TestEveryBuiltinOverALongStatus: each kind's built-in expressions over a
// status of 10,000 conditions that mean nothing to them, and a state field
// of 64 KiB, decide Running without an error, within the deadline of a
// reconcile (their work is linear in the conditions).
func TestEveryBuiltinOverALongStatus(t *testing.T) {
	p, err := Compile(&v1alpha1.CompletionRuleSpec{})
	if err != nil {
		t.Fatal(err)
	}
	long := jobWithConditions(10000, "Progress")
	status := long["status"].(map[string]any)
	status["phase"] = strings.Repeat("p", 64<<10)
	status["state"] = map[string]any{"phase": strings.Repeat("p", 64<<10)}
	status["applicationState"] = map[string]any{"state": strings.Repeat("p", 64<<10)}
	status["jobDeploymentStatus"] = strings.Repeat("p", 64<<10)
	for _, gk := range BuiltinKinds() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		start := time.Now()
		got, err := p.Evaluate(ctx, gk, long, nil)
		cancel()
		if err != nil || got.Outcome != OutcomeRunning {
			t.Errorf("%s: %+v, %v; want Running", kindKey(gk), got, err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("%s: %v over 10,000 conditions", kindKey(gk), d)
		}
	}
}
