package celpolicies

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wrapup-dev/wrapup/api/v1alpha1"
)

var gkUnknown = schema.GroupKind{Group: "example.com", Kind: "Benchmark"}

func mustCompile(t testing.TB, spec v1alpha1.CompletionRuleSpec) *Policy {
	t.Helper()
	p, err := Compile(&spec)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return p
}

// itemsObject has a list of n integers, for expressions whose cost grows
// with their input.
func itemsObject(n int) map[string]any {
	items := make([]any, n)
	for i := range items {
		items[i] = int64(i)
	}
	return map[string]any{"items": items, "status": map[string]any{"succeeded": int64(1)}}
}

func TestEvaluateUserExpressions(t *testing.T) {
	tests := []struct {
		name               string
		spec               v1alpha1.CompletionRuleSpec
		gk                 schema.GroupKind
		input              map[string]any
		want               Result // Cost is not compared
		wantErrField       string // "" means no error
		wantErrMsgContains string
	}{
		{
			name:  "success with message",
			spec:  v1alpha1.CompletionRuleSpec{Success: "object.status.succeeded >= 1", Message: "'finished after ' + string(object.status.succeeded) + ' pods'"},
			gk:    gkUnknown,
			input: map[string]any{"status": map[string]any{"succeeded": int64(2)}},
			want:  Result{Outcome: OutcomeSucceeded, Message: "finished after 2 pods"},
		},
		{
			name:  "neither: Running, failure never for a kind without built-ins",
			spec:  v1alpha1.CompletionRuleSpec{Success: "object.status.succeeded >= 1"},
			gk:    gkUnknown,
			input: map[string]any{"status": map[string]any{"succeeded": int64(0)}},
			want:  Result{Outcome: OutcomeRunning},
		},
		{
			name:  "failure",
			spec:  v1alpha1.CompletionRuleSpec{Success: "false", Failure: "object.status.failed > 0", Message: "'failed'"},
			gk:    gkUnknown,
			input: map[string]any{"status": map[string]any{"failed": int64(1)}},
			want:  Result{Outcome: OutcomeFailed, Message: "failed"},
		},
		{
			name: "success and failure both true: Succeeded",
			spec: v1alpha1.CompletionRuleSpec{Success: "true", Failure: "true"},
			gk:   gkUnknown,
			want: Result{Outcome: OutcomeSucceeded},
		},
		{
			name: "failure not evaluated once success holds",
			spec: v1alpha1.CompletionRuleSpec{Success: "true", Failure: "object.missing.field"},
			gk:   gkUnknown,
			want: Result{Outcome: OutcomeSucceeded},
		},
		{
			name:  "message not evaluated while Running",
			spec:  v1alpha1.CompletionRuleSpec{Success: "false", Message: "object.missing.field"},
			gk:    gkUnknown,
			input: map[string]any{},
			want:  Result{Outcome: OutcomeRunning},
		},
		{
			name:  "user success, built-in failure and its message",
			spec:  v1alpha1.CompletionRuleSpec{Success: "object.status.?succeeded.orValue(0) >= 3"},
			gk:    gkJob,
			input: job(t, jobFailed),
			want:  Result{Outcome: OutcomeFailed, Message: "BackoffLimitExceeded: " + jobBackoffMessage, BuiltinFailure: true},
		},
		{
			name:  "user success wins over built-in failure",
			spec:  v1alpha1.CompletionRuleSpec{Success: "object.status.failed == 7"},
			gk:    gkJob,
			input: job(t, jobFailed),
			want:  Result{Outcome: OutcomeSucceeded, BuiltinFailure: true},
		},
		{
			name:  "built-in success, user failure: no built-in message for a user outcome",
			spec:  v1alpha1.CompletionRuleSpec{Failure: "object.status.failed > 5"},
			gk:    gkJob,
			input: job(t, jobFailed),
			want:  Result{Outcome: OutcomeFailed, BuiltinSuccess: true},
		},
		{
			name:  "user message replaces the built-in message",
			spec:  v1alpha1.CompletionRuleSpec{Message: "'job ' + object.metadata.name + ' done'"},
			gk:    gkJob,
			input: job(t, jobSucceeded),
			want:  Result{Outcome: OutcomeSucceeded, Message: "job benchmark done", BuiltinSuccess: true, BuiltinFailure: true},
		},
		{
			name:  "appWrapper is visible",
			spec:  v1alpha1.CompletionRuleSpec{Success: "appWrapper.metadata.labels['llm-d.ai/role'] == 'benchmark'"},
			gk:    gkUnknown,
			input: map[string]any{},
			want:  Result{Outcome: OutcomeSucceeded},
		},
		{
			name: "variables",
			spec: v1alpha1.CompletionRuleSpec{
				Variables: []v1alpha1.Variable{
					{Name: "succeeded", Expression: "object.status.?succeeded.orValue(0)"},
					{Name: "enough", Expression: "variables.succeeded >= 2"},
				},
				Success: "variables.enough",
				Message: "string(variables.succeeded) + ' succeeded'",
			},
			gk:    gkUnknown,
			input: map[string]any{"status": map[string]any{"succeeded": int64(2)}},
			want:  Result{Outcome: OutcomeSucceeded, Message: "2 succeeded"},
		},
		{
			name: "failing variable that is not used does not fail",
			spec: v1alpha1.CompletionRuleSpec{
				Variables: []v1alpha1.Variable{{Name: "broken", Expression: "object.no.such.field"}},
				Success:   "true",
			},
			gk:   gkUnknown,
			want: Result{Outcome: OutcomeSucceeded},
		},
		{
			name: "failing variable absorbed by || does not fail",
			spec: v1alpha1.CompletionRuleSpec{
				Variables: []v1alpha1.Variable{{Name: "broken", Expression: "object.no.such.field == 1"}},
				Success:   "variables.broken || true",
			},
			gk:   gkUnknown,
			want: Result{Outcome: OutcomeSucceeded},
		},
		{
			name: "failing variable that is used names the variable",
			spec: v1alpha1.CompletionRuleSpec{
				Variables: []v1alpha1.Variable{
					{Name: "fine", Expression: "1"},
					{Name: "broken", Expression: "object.status.succeeded"},
				},
				Success: "variables.fine == 1 && variables.broken > 0",
			},
			gk:                 gkUnknown,
			input:              map[string]any{},
			want:               Result{Outcome: OutcomeRunning},
			wantErrField:       "spec.variables[1].expression",
			wantErrMsgContains: "no such key: status",
		},
		{
			name:               "missing field",
			spec:               v1alpha1.CompletionRuleSpec{Success: "object.status.succeeded > 0"},
			gk:                 gkUnknown,
			input:              map[string]any{"metadata": map[string]any{}},
			want:               Result{Outcome: OutcomeRunning},
			wantErrField:       "spec.success",
			wantErrMsgContains: "no such key: status",
		},
		{
			name:               "nil object",
			spec:               v1alpha1.CompletionRuleSpec{Success: "object.status.succeeded > 0"},
			gk:                 gkUnknown,
			input:              nil,
			want:               Result{Outcome: OutcomeRunning},
			wantErrField:       "spec.success",
			wantErrMsgContains: "no such key",
		},
		{
			name:               "dyn success that is not a bool",
			spec:               v1alpha1.CompletionRuleSpec{Success: "object.status.succeeded"},
			gk:                 gkUnknown,
			input:              map[string]any{"status": map[string]any{"succeeded": int64(1)}},
			want:               Result{Outcome: OutcomeRunning},
			wantErrField:       "spec.success",
			wantErrMsgContains: "must evaluate to bool but got int",
		},
		{
			name:               "dyn failure that is not a bool",
			spec:               v1alpha1.CompletionRuleSpec{Success: "false", Failure: "object.status.reason"},
			gk:                 gkUnknown,
			input:              map[string]any{"status": map[string]any{"reason": "OOMKilled"}},
			want:               Result{Outcome: OutcomeRunning},
			wantErrField:       "spec.failure",
			wantErrMsgContains: "must evaluate to bool but got string",
		},
		{
			name:               "dyn message that is not a string: not finished",
			spec:               v1alpha1.CompletionRuleSpec{Success: "true", Message: "object.status.succeeded"},
			gk:                 gkUnknown,
			input:              map[string]any{"status": map[string]any{"succeeded": int64(1)}},
			want:               Result{Outcome: OutcomeRunning},
			wantErrField:       "spec.message",
			wantErrMsgContains: "must evaluate to string but got int",
		},
		{
			name:               "wrong runtime type in an operator",
			spec:               v1alpha1.CompletionRuleSpec{Success: "object.status.succeeded > 0"},
			gk:                 gkUnknown,
			input:              map[string]any{"status": map[string]any{"succeeded": "one"}},
			want:               Result{Outcome: OutcomeRunning},
			wantErrField:       "spec.success",
			wantErrMsgContains: "no such overload",
		},
		{
			name:               "malformed conditions in a built-in",
			gk:                 gkJob,
			input:              map[string]any{"status": map[string]any{"conditions": "Complete"}},
			want:               Result{Outcome: OutcomeRunning, BuiltinSuccess: true, BuiltinFailure: true},
			wantErrField:       "spec.success",
			wantErrMsgContains: "",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := mustCompile(t, tc.spec)
			got, err := p.Evaluate(context.Background(), tc.gk, tc.input, appWrapper())
			if tc.wantErrField == "" && err != nil {
				t.Fatalf("Evaluate: %v", err)
			}
			if tc.wantErrField != "" {
				var ee *EvalError
				if !errors.As(err, &ee) {
					t.Fatalf("error = %v (%T), want an *EvalError", err, err)
				}
				if ee.Field != tc.wantErrField || !strings.Contains(ee.Error(), tc.wantErrMsgContains) {
					t.Errorf("error = {%s: %v}, want {%s: ...%s...}", ee.Field, ee.Err, tc.wantErrField, tc.wantErrMsgContains)
				}
			}
			got.Cost = 0
			if got != tc.want {
				t.Errorf("Result = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestEvaluateVariableOnce proves by cost that a variable used twice is
// evaluated once: reading it twice costs barely more than reading it once,
// while inlining its expression twice costs twice as much.
func TestEvaluateVariableOnce(t *testing.T) {
	const expensive = "object.items.map(x, x * 2).size()"
	spec := func(success string) v1alpha1.CompletionRuleSpec {
		return v1alpha1.CompletionRuleSpec{
			Variables: []v1alpha1.Variable{{Name: "n", Expression: expensive}},
			Success:   success,
		}
	}
	obj := itemsObject(1000)
	cost := func(s v1alpha1.CompletionRuleSpec) uint64 {
		t.Helper()
		r, err := mustCompile(t, s).Evaluate(context.Background(), gkUnknown, obj, nil)
		if err != nil {
			t.Fatalf("Evaluate: %v", err)
		}
		if r.Outcome != OutcomeSucceeded {
			t.Fatalf("Outcome = %s, want Succeeded", r.Outcome)
		}
		return r.Cost
	}
	once := cost(spec("variables.n > 0"))
	twice := cost(spec("variables.n > 0 && variables.n > 1"))
	inline := cost(v1alpha1.CompletionRuleSpec{Success: expensive + " > 0 && " + expensive + " > 1"})
	unused := cost(spec("true"))

	if once < 1000 {
		t.Fatalf("cost of one use = %d, want the cost of the map over 1000 items", once)
	}
	if twice-once > 10 {
		t.Errorf("cost of two uses = %d, of one use = %d: the variable was evaluated again", twice, once)
	}
	if inline < 2*once-20 {
		t.Errorf("inline cost %d, want about twice the cost of one use %d", inline, once)
	}
	if unused > 10 {
		t.Errorf("cost with the variable unused = %d: it was evaluated", unused)
	}
}

// TestEvaluateStringGrowthCharged guards against a rule that doubles a
// string through its variables: '+' on dyn strings costs 1 in cel-go, so
// without charging the variables' sizes, 16 variables would build a string
// 2^15 times the input for a cost of 81.
func TestEvaluateStringGrowthCharged(t *testing.T) {
	doubling := func(n int) v1alpha1.CompletionRuleSpec {
		s := v1alpha1.CompletionRuleSpec{Variables: []v1alpha1.Variable{{Name: "v0", Expression: "object.s"}}}
		for i := 1; i < n; i++ {
			s.Variables = append(s.Variables, v1alpha1.Variable{
				Name:       fmt.Sprintf("v%d", i),
				Expression: fmt.Sprintf("variables.v%d + variables.v%d", i-1, i-1),
			})
		}
		s.Success = fmt.Sprintf("size(variables.v%d) > 0", n-1)
		return s
	}
	tests := []struct {
		name     string
		input    int // length of object.s
		wantCost uint64
		wantErr  error
	}{
		// 500 bytes doubled 11 times: 1 MiB, charged about 200 KiB.
		{name: "charged by size", input: 500, wantCost: 50 * (1<<12 - 1)},
		// 1 MB doubled: the budget stops it at about 100 MB.
		{name: "stopped by the budget", input: 1 << 20, wantErr: ErrCostLimitExceeded},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := mustCompile(t, doubling(12))
			got, err := p.Evaluate(context.Background(), gkUnknown, map[string]any{"s": strings.Repeat("a", tc.input)}, nil)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr == nil && got.Cost < tc.wantCost {
				t.Errorf("Cost = %d, want at least %d", got.Cost, tc.wantCost)
			}
		})
	}
}

func TestEvaluateNoSuccessExpression(t *testing.T) {
	p := mustCompile(t, v1alpha1.CompletionRuleSpec{Failure: "true"})
	if p.HasSuccess(gkUnknown) {
		t.Errorf("HasSuccess(%v) = true, want false", gkUnknown)
	}
	if !p.HasSuccess(gkJob) {
		t.Errorf("HasSuccess(%v) = false, want true", gkJob)
	}
	got, err := p.Evaluate(context.Background(), gkUnknown, map[string]any{}, nil)
	if !errors.Is(err, ErrNoSuccessExpression) {
		t.Fatalf("error = %v, want ErrNoSuccessExpression", err)
	}
	if !strings.Contains(err.Error(), "example.com/Benchmark") {
		t.Errorf("error %q does not name the kind", err)
	}
	if got.Outcome != OutcomeRunning {
		t.Errorf("Outcome = %s, want Running", got.Outcome)
	}
	if !mustCompile(t, v1alpha1.CompletionRuleSpec{Success: "true"}).HasSuccess(gkUnknown) {
		t.Errorf("HasSuccess = false for a rule with spec.success")
	}
}

func TestEvaluateCostLimit(t *testing.T) {
	tests := []struct {
		name      string
		spec      v1alpha1.CompletionRuleSpec
		wantField string
	}{
		{
			name:      "nested comprehensions",
			spec:      v1alpha1.CompletionRuleSpec{Success: "object.items.all(x, object.items.all(y, x + y >= 0))"},
			wantField: "spec.success",
		},
		{
			name: "in a variable",
			spec: v1alpha1.CompletionRuleSpec{
				Variables: []v1alpha1.Variable{{Name: "pairs", Expression: "object.items.map(x, object.items.map(y, x * y)).size()"}},
				Success:   "variables.pairs > 0",
			},
			wantField: "spec.variables[0].expression",
		},
		{
			// Each variable stays under the per-call limit; together they
			// exceed the budget of one evaluation. A search in a long
			// string costs 0.1 per byte and runs natively, so the test
			// spends the budget in milliseconds.
			name: "evaluation budget",
			spec: func() v1alpha1.CompletionRuleSpec {
				s := v1alpha1.CompletionRuleSpec{Success: "true"}
				for _, n := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"} {
					s.Variables = append(s.Variables, v1alpha1.Variable{Name: n, Expression: "!object.s.contains('b')"})
					s.Success += " && variables." + n
				}
				return s
			}(),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := mustCompile(t, tc.spec)
			obj := itemsObject(2000)
			if tc.name == "evaluation budget" {
				obj["s"] = strings.Repeat("a", 9_000_000) // 900,000 per variable
			}
			// Long enough that the cost limit, not the deadline, stops it,
			// even under the race detector.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			start := time.Now()
			got, err := p.Evaluate(ctx, gkUnknown, obj, nil)
			if !errors.Is(err, ErrCostLimitExceeded) {
				t.Fatalf("error = %v, want ErrCostLimitExceeded", err)
			}
			var ee *EvalError
			if !errors.As(err, &ee) {
				t.Fatalf("error %T is not an *EvalError", err)
			}
			if tc.wantField != "" && ee.Field != tc.wantField {
				t.Errorf("Field = %s, want %s", ee.Field, tc.wantField)
			}
			if got.Outcome != OutcomeRunning {
				t.Errorf("Outcome = %s, want Running", got.Outcome)
			}
			t.Logf("stopped after %v, cost %d: %v", time.Since(start), got.Cost, err)
		})
	}
}

// lateCancelContext reports no error to the check before evaluation and is
// cancelled for the interpreter, to reach the interrupt inside a
// comprehension. It has a deadline so that Evaluate does not wrap it.
type lateCancelContext struct {
	context.Context
	once sync.Once
}

func (c *lateCancelContext) Deadline() (time.Time, bool) {
	return time.Now().Add(time.Hour), true
}

func (c *lateCancelContext) Err() error {
	first := false
	c.once.Do(func() { first = true })
	if first {
		return nil
	}
	return context.Canceled
}

func TestEvaluateContext(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	done, cancel3 := context.WithCancel(context.Background())
	cancel3()

	tests := []struct {
		name  string
		input func() (context.Context, context.CancelFunc)
		items int
		// wantBefore bounds how long the evaluation may run.
		wantBefore time.Duration
		wantErr    error
	}{
		{
			name:    "cancelled",
			input:   func() (context.Context, context.CancelFunc) { return cancelled, func() {} },
			items:   1000,
			wantErr: context.Canceled,
		},
		{
			name:    "deadline exceeded",
			input:   func() (context.Context, context.CancelFunc) { return expired, func() {} },
			items:   1000,
			wantErr: context.DeadlineExceeded,
		},
		{
			name:    "cancelled during a comprehension",
			input:   func() (context.Context, context.CancelFunc) { return &lateCancelContext{Context: done}, func() {} },
			items:   1000,
			wantErr: context.Canceled,
		},
		{
			// Far under the cost limit, yet slow: only the deadline stops it.
			name: "deadline during a slow comprehension",
			input: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 200*time.Millisecond)
			},
			items:      150000,
			wantBefore: 20 * time.Second,
			wantErr:    context.DeadlineExceeded,
		},
		{
			name:       "no deadline: DefaultTimeout",
			input:      func() (context.Context, context.CancelFunc) { return context.Background(), func() {} },
			items:      150000,
			wantBefore: DefaultTimeout + 20*time.Second,
			wantErr:    context.DeadlineExceeded,
		},
	}
	p := mustCompile(t, v1alpha1.CompletionRuleSpec{Success: "object.items.all(x, x >= 0)"})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.items > 1000 && testing.Short() {
				t.Skip("waits for a deadline")
			}
			ctx, cancel := tc.input()
			defer cancel()
			obj := itemsObject(tc.items)
			start := time.Now()
			got, err := p.Evaluate(ctx, gkUnknown, obj, nil)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error = %v, want %v", err, tc.wantErr)
			}
			if tc.wantBefore > 0 && time.Since(start) > tc.wantBefore {
				t.Errorf("evaluation ran %v, want less than %v", time.Since(start), tc.wantBefore)
			}
			var ee *EvalError
			if !errors.As(err, &ee) || ee.Field != "spec.success" {
				t.Errorf("error = %v, want an *EvalError for spec.success", err)
			}
			if got.Outcome != OutcomeRunning {
				t.Errorf("Outcome = %s, want Running", got.Outcome)
			}
		})
	}
}

func TestEvaluateMessageTruncated(t *testing.T) {
	p := mustCompile(t, v1alpha1.CompletionRuleSpec{Success: "true", Message: "object.long"})
	got, err := p.Evaluate(context.Background(), gkUnknown, map[string]any{"long": strings.Repeat("é", 4000)}, nil)
	if err != nil {
		t.Fatalf("Evaluate: %v", err)
	}
	if len(got.Message) > MaxMessageLength {
		t.Errorf("message is %d bytes, want at most %d", len(got.Message), MaxMessageLength)
	}
	if !strings.HasPrefix(strings.Repeat("é", 4000), got.Message) || got.Message == "" {
		t.Errorf("message was not cut on a rune boundary")
	}
}

// TestEvaluateConcurrent shares one Policy between goroutines, as the
// reconciler's workers do.
func TestEvaluateConcurrent(t *testing.T) {
	p := mustCompile(t, v1alpha1.CompletionRuleSpec{
		Variables: []v1alpha1.Variable{{Name: "n", Expression: "object.status.?succeeded.orValue(0)"}},
		Message:   "'n=' + string(variables.n)",
	})
	inputs := []struct {
		obj  map[string]any
		want Outcome
	}{
		{job(t, jobRunning), OutcomeRunning},
		{job(t, jobSucceeded), OutcomeSucceeded},
		{job(t, jobFailed), OutcomeFailed},
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				in := inputs[(g+i)%len(inputs)]
				got, err := p.Evaluate(context.Background(), gkJob, in.obj, nil)
				if err != nil || got.Outcome != in.want {
					t.Errorf("Evaluate = %v, %v, want %s", got.Outcome, err, in.want)
					return
				}
			}
		}()
	}
	wg.Wait()
}
