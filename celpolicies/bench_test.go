package celpolicies

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// benchContext has a deadline, as the reconciler's context does, so that
// Evaluate does not add its own.
func benchContext(b *testing.B) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	b.Cleanup(cancel)
	return ctx
}

func benchEvaluate(b *testing.B, obj map[string]any, want Outcome) {
	p, err := Compile(&v1alpha1.CompletionRuleSpec{})
	if err != nil {
		b.Fatal(err)
	}
	ctx, aw := benchContext(b), appWrapper()
	b.ReportAllocs()
	for b.Loop() {
		r, err := p.Evaluate(ctx, gkJob, obj, aw)
		if err != nil || r.Outcome != want {
			b.Fatalf("Evaluate = %v, %v", r.Outcome, err)
		}
	}
}

// BenchmarkEvaluateBuiltinJob is the common case: a completed Job, decided
// by the built-in success expression, with the built-in message.
func BenchmarkEvaluateBuiltinJob(b *testing.B) {
	benchEvaluate(b, job(b, jobSucceeded), OutcomeSucceeded)
}

// BenchmarkEvaluateBuiltinJobRunning evaluates both success and failure and
// no message.
func BenchmarkEvaluateBuiltinJobRunning(b *testing.B) {
	benchEvaluate(b, job(b, jobRunning), OutcomeRunning)
}

// plainGoJob is the built-in Job check written in Go over the unstructured
// object, the baseline for the CEL evaluation. nested is
// unstructured.NestedSlice (which deep-copies) or a no-copy lookup.
func plainGoJob(obj map[string]any, nested func(map[string]any) ([]any, bool, error)) (Outcome, string, error) {
	conds, found, err := nested(obj)
	if err != nil || !found {
		return OutcomeRunning, "", err
	}
	find := func(typ string) (map[string]any, bool) {
		for _, c := range conds {
			m, ok := c.(map[string]any)
			if !ok {
				continue
			}
			if t, _ := m["type"].(string); t != typ {
				continue
			}
			if s, _ := m["status"].(string); s == "True" {
				return m, true
			}
		}
		return nil, false
	}
	message := func(m map[string]any) string {
		reason, _ := m["reason"].(string)
		msg, _ := m["message"].(string)
		switch {
		case reason == "":
			return msg
		case msg == "":
			return reason
		}
		return reason + ": " + msg
	}
	if m, ok := find("Complete"); ok {
		return OutcomeSucceeded, message(m), nil
	}
	if m, ok := find("Failed"); ok {
		return OutcomeFailed, message(m), nil
	}
	return OutcomeRunning, "", nil
}

func nestedSlice(obj map[string]any) ([]any, bool, error) {
	return unstructured.NestedSlice(obj, "status", "conditions")
}

func nestedSliceNoCopy(obj map[string]any) ([]any, bool, error) {
	v, found, err := unstructured.NestedFieldNoCopy(obj, "status", "conditions")
	if err != nil || !found {
		return nil, found, err
	}
	s, _ := v.([]any)
	return s, true, nil
}

func benchPlainGo(b *testing.B, obj map[string]any, nested func(map[string]any) ([]any, bool, error), want Outcome) {
	b.ReportAllocs()
	for b.Loop() {
		got, _, err := plainGoJob(obj, nested)
		if err != nil || got != want {
			b.Fatalf("plainGoJob = %v, %v", got, err)
		}
	}
}

// BenchmarkPlainGoJob is BenchmarkEvaluateBuiltinJob in Go, with
// unstructured.NestedSlice as typical controller code has it.
func BenchmarkPlainGoJob(b *testing.B) {
	benchPlainGo(b, job(b, jobSucceeded), nestedSlice, OutcomeSucceeded)
}

// BenchmarkPlainGoJobNoCopy is the fastest Go equivalent: no deep copy.
func BenchmarkPlainGoJobNoCopy(b *testing.B) {
	benchPlainGo(b, job(b, jobSucceeded), nestedSliceNoCopy, OutcomeSucceeded)
}

func BenchmarkPlainGoJobRunning(b *testing.B) {
	benchPlainGo(b, job(b, jobRunning), nestedSlice, OutcomeRunning)
}

// TestPlainGoJobAgreesWithBuiltin keeps the baseline honest: it must decide
// and describe like the built-in it is compared with.
func TestPlainGoJobAgreesWithBuiltin(t *testing.T) {
	p, err := Compile(&v1alpha1.CompletionRuleSpec{})
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range []map[string]any{job(t, nil), job(t, jobRunning), job(t, jobSucceeded), job(t, jobFailed)} {
		want, err := p.Evaluate(context.Background(), gkJob, obj, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, nested := range []func(map[string]any) ([]any, bool, error){nestedSlice, nestedSliceNoCopy} {
			got, msg, err := plainGoJob(obj, nested)
			if err != nil || got != want.Outcome || msg != want.Message {
				t.Errorf("plainGoJob = %s, %q, %v; CEL = %s, %q", got, msg, err, want.Outcome, want.Message)
			}
		}
	}
}

var benchRule = v1alpha1.CompletionRuleSpec{
	Variables: []v1alpha1.Variable{
		{Name: "conds", Expression: "object.?status.?conditions.orValue([])"},
		{Name: "complete", Expression: "variables.conds.exists(c, c.type == 'Complete' && c.status == 'True')"},
	},
	Success: "variables.complete && object.status.?succeeded.orValue(0) >= 1",
	Failure: "variables.conds.exists(c, c.type == 'Failed' && c.status == 'True')",
	Message: "'benchmark finished after ' + string(object.status.?succeeded.orValue(0)) + ' pods'",
}

// BenchmarkCompile compiles a rule with variables, which needs an
// environment of its own.
func BenchmarkCompile(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile(&benchRule); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompileNoVariables compiles in the shared environment.
func BenchmarkCompileNoVariables(b *testing.B) {
	spec := benchRule
	spec.Variables = nil
	spec.Success = "object.?status.?conditions.orValue([]).exists(c, c.type == 'Complete' && c.status == 'True')"
	spec.Failure = "object.?status.?conditions.orValue([]).exists(c, c.type == 'Failed' && c.status == 'True')"
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile(&spec); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEvaluateUserRule evaluates benchRule (lazy variables, message)
// on a completed Job.
func BenchmarkEvaluateUserRule(b *testing.B) {
	p, err := Compile(&benchRule)
	if err != nil {
		b.Fatal(err)
	}
	ctx, obj, aw := benchContext(b), job(b, jobSucceeded), appWrapper()
	b.ReportAllocs()
	for b.Loop() {
		r, err := p.Evaluate(ctx, gkJob, obj, aw)
		if err != nil || r.Outcome != OutcomeSucceeded {
			b.Fatalf("Evaluate = %v, %v", r.Outcome, err)
		}
	}
}

// BenchmarkCacheHit is the reconciler's lookup of an unchanged rule; it
// must not allocate.
func BenchmarkCacheHit(b *testing.B) {
	var c Cache
	for i := range 100 {
		if _, err := c.Get(rule(uidN(i), 1, "true")); err != nil {
			b.Fatal(err)
		}
	}
	r := rule(uidN(42), 1, "true")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Get(r); err != nil {
			b.Fatal(err)
		}
	}
}
