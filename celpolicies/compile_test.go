package celpolicies

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// positionRE matches the "line:column: " that CEL errors start with.
var positionRE = regexp.MustCompile(`^\d+:\d+: `)

func TestCompileValid(t *testing.T) {
	tests := []struct {
		name  string
		input v1alpha1.CompletionRuleSpec
	}{
		{name: "empty spec relies on built-ins", input: v1alpha1.CompletionRuleSpec{}},
		{
			name: "success, failure and message",
			input: v1alpha1.CompletionRuleSpec{
				Success: "object.status.?succeeded.orValue(0) >= 1",
				Failure: "object.status.?failed.orValue(0) > 3",
				Message: "'done after ' + string(object.status.?succeeded.orValue(0)) + ' pods'",
			},
		},
		{
			name:  "dyn output accepted and checked when evaluated",
			input: v1alpha1.CompletionRuleSpec{Success: "object.status.done", Message: "object.status.reason"},
		},
		{
			name: "variables used by later variables and expressions",
			input: v1alpha1.CompletionRuleSpec{
				Variables: []v1alpha1.Variable{
					{Name: "conds", Expression: "object.?status.?conditions.orValue([])"},
					{Name: "done", Expression: "variables.conds.exists(c, c.type == 'Complete')"},
					{Name: "count", Expression: "size(variables.conds)"},
				},
				Success: "variables.done && variables.count > 0",
				Message: "'conditions: ' + string(variables.count)",
			},
		},
		{
			name: "Kubernetes CEL libraries",
			input: v1alpha1.CompletionRuleSpec{Success: "object.metadata.name.matches('^bench-') && " +
				"quantity('1Gi').isGreaterThan(quantity('1Mi')) && " +
				"url('https://example.com/x').getHost() == 'example.com' && " +
				"isIP('10.0.0.1') && " +
				"[3, 1, 2].sort() == [1, 2, 3] && " +
				"'a,b'.split(',').size() == 2 && " +
				"optional.of(1).hasValue() && " +
				"object.?spec.?parallelism.orValue(1) == 1 && " +
				"appWrapper.metadata.labels.exists_one(k, k == 'llm-d.ai/role')"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compile(&tc.input)
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			if p == nil {
				t.Fatalf("Compile returned a nil policy and no error")
			}
		})
	}
}

func TestCompileErrors(t *testing.T) {
	nested := func(open, close string, n int) string {
		return strings.Repeat(open, n) + "true" + strings.Repeat(close, n)
	}
	tests := []struct {
		name  string
		input v1alpha1.CompletionRuleSpec
		// want lists the expected errors in order, each a field and a
		// substring of its message.
		want         []FieldError
		wantPosition bool
	}{
		{
			name:         "syntax error",
			input:        v1alpha1.CompletionRuleSpec{Success: "object.status.succeeded >"},
			want:         []FieldError{{Field: "spec.success", Message: "Syntax error"}},
			wantPosition: true,
		},
		{
			name:  "success of type int",
			input: v1alpha1.CompletionRuleSpec{Success: "1 + 1"},
			want:  []FieldError{{Field: "spec.success", Message: "must evaluate to bool but got int"}},
		},
		{
			name:  "failure of type string",
			input: v1alpha1.CompletionRuleSpec{Failure: "'failed'"},
			want:  []FieldError{{Field: "spec.failure", Message: "must evaluate to bool but got string"}},
		},
		{
			name:  "message of type bool",
			input: v1alpha1.CompletionRuleSpec{Message: "true"},
			want:  []FieldError{{Field: "spec.message", Message: "must evaluate to string but got bool"}},
		},
		{
			name:         "unknown identifier",
			input:        v1alpha1.CompletionRuleSpec{Success: "job.status.done"},
			want:         []FieldError{{Field: "spec.success", Message: "undeclared reference to 'job'"}},
			wantPosition: true,
		},
		{
			name:         "unknown variable",
			input:        v1alpha1.CompletionRuleSpec{Success: "variables.done"},
			want:         []FieldError{{Field: "spec.success", Message: "undefined field 'done'"}},
			wantPosition: true,
		},
		{
			name: "variable using a later variable",
			input: v1alpha1.CompletionRuleSpec{Variables: []v1alpha1.Variable{
				{Name: "a", Expression: "variables.b + 1"},
				{Name: "b", Expression: "1"},
			}},
			want:         []FieldError{{Field: "spec.variables[0].expression", Message: "undefined field 'b'"}},
			wantPosition: true,
		},
		{
			name: "broken variable reported once, not at its users",
			input: v1alpha1.CompletionRuleSpec{
				Variables: []v1alpha1.Variable{{Name: "a", Expression: "object.("}},
				Success:   "variables.a == 1",
			},
			want: []FieldError{{Field: "spec.variables[0].expression", Message: "Syntax error"}},
		},
		{
			name: "duplicate variable name",
			input: v1alpha1.CompletionRuleSpec{Variables: []v1alpha1.Variable{
				{Name: "a", Expression: "1"},
				{Name: "a", Expression: "2"},
			}},
			want: []FieldError{{Field: "spec.variables[1].name", Message: `duplicate variable name "a"`}},
		},
		{
			name:  "variable name not an identifier",
			input: v1alpha1.CompletionRuleSpec{Variables: []v1alpha1.Variable{{Name: "my-var", Expression: "1"}}},
			want:  []FieldError{{Field: "spec.variables[0].name", Message: "must be a CEL identifier"}},
		},
		{
			name:  "variable name a keyword",
			input: v1alpha1.CompletionRuleSpec{Variables: []v1alpha1.Variable{{Name: "in", Expression: "1"}}},
			want:  []FieldError{{Field: "spec.variables[0].name", Message: "CEL keyword"}},
		},
		{
			name:  "variable name an escape sequence",
			input: v1alpha1.CompletionRuleSpec{Variables: []v1alpha1.Variable{{Name: "__dot__", Expression: "1"}}},
			want:  []FieldError{{Field: "spec.variables[0].name", Message: "escape sequences"}},
		},
		{
			name: "too many variables",
			input: func() v1alpha1.CompletionRuleSpec {
				var s v1alpha1.CompletionRuleSpec
				for i := range MaxVariables + 1 {
					s.Variables = append(s.Variables, v1alpha1.Variable{Name: fmt.Sprintf("v%d", i), Expression: "1"})
				}
				return s
			}(),
			want: []FieldError{{Field: "spec.variables", Message: "more than the limit of 16"}},
		},
		{
			name:  "blank expression",
			input: v1alpha1.CompletionRuleSpec{Success: "  \n"},
			want:  []FieldError{{Field: "spec.success", Message: "expression is blank"}},
		},
		{
			name:  "1 MiB expression",
			input: v1alpha1.CompletionRuleSpec{Success: strings.Repeat("true && ", 1<<17)},
			want:  []FieldError{{Field: "spec.success", Message: "more than the limit of 4096"}},
		},
		{
			name:  "1000 nested parentheses",
			input: v1alpha1.CompletionRuleSpec{Success: nested("(", ")", 1000)},
			want:  []FieldError{{Field: "spec.success", Message: "recursion"}},
		},
		{
			name:  "1000 nested lists",
			input: v1alpha1.CompletionRuleSpec{Success: nested("[", "]", 1000) + " != []"},
			want:  []FieldError{{Field: "spec.success", Message: "recursion"}},
		},
		{
			name: "every invalid expression, in spec order",
			input: v1alpha1.CompletionRuleSpec{
				Variables: []v1alpha1.Variable{{Name: "ok", Expression: "1"}, {Name: "bad", Expression: "nope"}},
				Success:   "1",
				Failure:   "variables.ok == 1",
				Message:   "(",
			},
			want: []FieldError{
				{Field: "spec.variables[1].expression", Message: "undeclared reference to 'nope'"},
				{Field: "spec.success", Message: "must evaluate to bool"},
				{Field: "spec.message", Message: "Syntax error"},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			p, err := Compile(&tc.input)
			elapsed := time.Since(start)
			if p != nil {
				t.Errorf("Compile returned a policy with an error")
			}
			var ce *CompileError
			if !errors.As(err, &ce) {
				t.Fatalf("Compile error = %v (%T), want a *CompileError", err, err)
			}
			if len(ce.Errors) != len(tc.want) {
				t.Fatalf("got %d errors, want %d: %v", len(ce.Errors), len(tc.want), err)
			}
			for i, want := range tc.want {
				got := ce.Errors[i]
				if got.Field != want.Field || !strings.Contains(got.Message, want.Message) {
					t.Errorf("error %d = {%s: %s}, want {%s: ...%s...}", i, got.Field, got.Message, want.Field, want.Message)
				}
				if len(got.Expression) > MaxExpressionLength+3 {
					t.Errorf("error %d keeps a %d-byte expression", i, len(got.Expression))
				}
				if !strings.Contains(err.Error(), got.Field+": ") {
					t.Errorf("Error() = %q does not name %s", err.Error(), got.Field)
				}
			}
			if tc.wantPosition && !positionRE.MatchString(ce.Errors[0].Message) {
				t.Errorf("message %q does not start with line:column", ce.Errors[0].Message)
			}
			// Generous for a loaded machine; a parse of 1 MiB or a deep
			// recursion would take far longer.
			if elapsed > 2*time.Second {
				t.Errorf("Compile took %v", elapsed)
			}
		})
	}
}

func TestCompileErrorMessage(t *testing.T) {
	_, err := Compile(&v1alpha1.CompletionRuleSpec{Success: "object.status.\n  succeeded >"})
	want := regexp.MustCompile(`^compiling expressions: spec\.success: 2:\d+: Syntax error`)
	if err == nil || !want.MatchString(err.Error()) {
		t.Errorf("Error() = %v, want a match for %s", err, want)
	}
}

func TestCompileNilSpec(t *testing.T) {
	if _, err := Compile(nil); err == nil {
		t.Errorf("Compile(nil) returned no error")
	}
}

func TestCompileEstimatedCost(t *testing.T) {
	tests := []struct {
		name    string
		input   string
		wantErr bool
	}{
		{name: "constant cost", input: "1 < 2", wantErr: false},
		{name: "field access", input: "object.status.done == true", wantErr: false},
		{name: "comprehension over dyn is unbounded", input: "object.items.all(x, x > 0)", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := CompileWithOptions(&v1alpha1.CompletionRuleSpec{Success: tc.input}, CompileOptions{MaxEstimatedCost: 1000})
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "estimated cost") {
				t.Errorf("err = %v, want an estimated cost error", err)
			}
		})
	}
	// Without the option the unbounded expression compiles: the runtime
	// cost limit is what bounds it.
	if _, err := Compile(&v1alpha1.CompletionRuleSpec{Success: "object.items.all(x, x > 0)"}); err != nil {
		t.Errorf("Compile without a cost estimate limit: %v", err)
	}
}

// An undeclared name is reported without cel-go's "(in container ”)":
// wrapup declares no container, and the words say nothing to a user.
func TestUndeclaredReferenceMessage(t *testing.T) {
	_, err := Compile(&v1alpha1.CompletionRuleSpec{Success: "objet.status.succeeded > 0"})
	if err == nil {
		t.Fatal("a rule reading an undeclared name compiled")
	}
	if msg := err.Error(); !strings.Contains(msg, "undeclared reference to 'objet'") || strings.Contains(msg, "in container") {
		t.Errorf("message %q: want the undeclared name, without the container", msg)
	}
}
