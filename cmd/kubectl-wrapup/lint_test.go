package main

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

func jobRule(mods ...func(*wrapupv1alpha1.CompletionRuleSpec)) *wrapupv1alpha1.CompletionRule {
	r := &wrapupv1alpha1.CompletionRule{
		ObjectMeta: metav1.ObjectMeta{Name: "r"},
		Spec:       wrapupv1alpha1.CompletionRuleSpec{Trigger: wrapupv1alpha1.TriggerSpec{APIGroup: "batch", Kind: "Job"}},
	}
	for _, m := range mods {
		m(&r.Spec)
	}
	return r
}

func TestLintRule(t *testing.T) {
	evalRun := wrapupv1alpha1.TriggerSpec{APIGroup: "example.com", Kind: "EvalRun"}
	tests := []struct {
		name string
		rule *wrapupv1alpha1.CompletionRule
		// want is "severity field: message substring" per finding, in order.
		want []string
	}{
		{name: "a clean rule", rule: jobRule(), want: nil},
		{name: "a clean rule without kind", rule: jobRule(func(s *wrapupv1alpha1.CompletionRuleSpec) { s.Trigger = wrapupv1alpha1.TriggerSpec{} }), want: nil},
		{
			name: "no name, and a namespace",
			rule: func() *wrapupv1alpha1.CompletionRule { r := jobRule(); r.Name, r.Namespace = "", "team-a"; return r }(),
			want: []string{"error metadata.name: is required", "warning metadata.namespace: CompletionRules are cluster-scoped"},
		},
		{
			name: "trigger name or group without kind",
			rule: jobRule(func(s *wrapupv1alpha1.CompletionRuleSpec) {
				s.Trigger = wrapupv1alpha1.TriggerSpec{APIGroup: "batch", Name: "bench"}
			}),
			want: []string{"error spec.trigger.name: needs spec.trigger.kind", "error spec.trigger.apiGroup: needs spec.trigger.kind"},
		},
		{
			name: "a kind that is not one",
			rule: jobRule(func(s *wrapupv1alpha1.CompletionRuleSpec) { s.Trigger.Kind = "jobs" }),
			want: []string{`error spec.trigger.kind: "jobs" is not a kind`, "error spec.success: batch/jobs has no built-in expression"},
		},
		{
			name: "a custom kind without success",
			rule: jobRule(func(s *wrapupv1alpha1.CompletionRuleSpec) { s.Trigger = evalRun }),
			want: []string{"error spec.success: example.com/EvalRun has no built-in expression"},
		},
		{
			name: "a custom kind with success and no failure is fine",
			rule: jobRule(func(s *wrapupv1alpha1.CompletionRuleSpec) {
				s.Trigger, s.Success = evalRun, "object.status.phase == 'Done'"
			}),
			want: nil,
		},
		{
			name: "out-of-range priority and TTL, unknown action",
			rule: jobRule(func(s *wrapupv1alpha1.CompletionRuleSpec) {
				s.Priority = 2000000
				s.OnSuccess = wrapupv1alpha1.ActionSpec{Action: "Delete", TTLSecondsAfterFinished: ptr.To[int32](3000000)}
			}),
			want: []string{"error spec.priority: 2000000 is out of range", `error spec.onSuccess.action: "Delete" is not`, "error spec.onSuccess.ttlSecondsAfterFinished: 3000000 is out of range"},
		},
		{
			name: "TTL with UpdateStatus",
			rule: jobRule(func(s *wrapupv1alpha1.CompletionRuleSpec) {
				s.OnFailure = wrapupv1alpha1.ActionSpec{Action: wrapupv1alpha1.ActionUpdateStatus, TTLSecondsAfterFinished: ptr.To[int32](60)}
			}),
			want: []string{"warning spec.onFailure.ttlSecondsAfterFinished: is never used"},
		},
		{
			name: "TTL 0 with UpdateStatus is fine",
			rule: jobRule(func(s *wrapupv1alpha1.CompletionRuleSpec) {
				s.OnSuccess = wrapupv1alpha1.ActionSpec{Action: wrapupv1alpha1.ActionUpdateStatus, TTLSecondsAfterFinished: ptr.To[int32](0)}
			}),
			want: nil,
		},
		{
			name: "UpdateStatus on both with dryRun is fine",
			rule: jobRule(func(s *wrapupv1alpha1.CompletionRuleSpec) {
				s.OnSuccess.Action, s.OnFailure.Action, s.DryRun = wrapupv1alpha1.ActionUpdateStatus, wrapupv1alpha1.ActionUpdateStatus, true
			}),
			want: nil,
		},
		{
			name: "compile errors, each with its field",
			rule: jobRule(func(s *wrapupv1alpha1.CompletionRuleSpec) { s.Success, s.Message = "object.status.(", "1 + 'a'" }),
			want: []string{"error spec.success: 1:15: Syntax error", "error spec.message: 1:3: found no matching overload"},
		},
		{
			name: "failure is the literal false",
			rule: jobRule(func(s *wrapupv1alpha1.CompletionRuleSpec) { s.Failure = " ( false ) " }),
			want: []string{"warning spec.failure: is the literal false: the trigger itself never counts as failed (it replaces the built-in failure expression)"},
		},
		{
			name: "failure false on a kind without built-in",
			rule: jobRule(func(s *wrapupv1alpha1.CompletionRuleSpec) { s.Trigger, s.Success, s.Failure = evalRun, "true", "false" }),
			want: []string{"warning spec.failure: is never evaluated", "warning spec.failure: is the literal false: the trigger itself never counts as failed (no failure expression would apply either)"},
		},
		{
			name: "a failure that mentions false is not the literal",
			rule: jobRule(func(s *wrapupv1alpha1.CompletionRuleSpec) {
				s.Failure = "object.status.?failed.orValue(0) > 0 && false"
			}),
			want: nil,
		},
		{
			name: "success is the literal false",
			rule: jobRule(func(s *wrapupv1alpha1.CompletionRuleSpec) { s.Success = "false" }),
			want: []string{"warning spec.success: is the literal false: the trigger never succeeds"},
		},
		{
			name: "success is the literal true: the built-in failure is never used",
			rule: jobRule(func(s *wrapupv1alpha1.CompletionRuleSpec) { s.Success = "true" }),
			want: []string{"warning spec.failure: is never evaluated: success is the literal true"},
		},
		{
			name: "success true with no failure at all is fine",
			rule: jobRule(func(s *wrapupv1alpha1.CompletionRuleSpec) { s.Trigger, s.Success = evalRun, "true" }),
			want: nil,
		},
		{
			name: "unused variables",
			rule: jobRule(func(s *wrapupv1alpha1.CompletionRuleSpec) {
				s.Variables = []wrapupv1alpha1.Variable{
					{Name: "a", Expression: "1"},
					{Name: "b", Expression: "variables.a + 1"},
					{Name: "c", Expression: "2"},
					{Name: "d", Expression: "3"},
				}
				s.Success = "variables.b > 1 && has(variables.c)"
			}),
			want: []string{`warning spec.variables: variable "d" is never used`},
		},
		{
			name: "variables read with ?. are used",
			rule: jobRule(func(s *wrapupv1alpha1.CompletionRuleSpec) {
				s.Variables = []wrapupv1alpha1.Variable{{Name: "a", Expression: "1"}}
				s.Message = "string(variables.?a.orValue(0))"
			}),
			want: nil,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, f := range lintRule(tc.rule) {
				got = append(got, string(f.Severity)+" "+f.Field+": "+f.Message)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d findings, want %d:\n%s", len(got), len(tc.want), strings.Join(got, "\n"))
			}
			for i := range got {
				if !strings.HasPrefix(got[i], strings.SplitN(tc.want[i], ": ", 2)[0]+": ") || !strings.Contains(got[i], tc.want[i]) {
					t.Errorf("finding %d = %q, want it to contain %q", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestVariableRefs(t *testing.T) {
	tests := []struct {
		name    string
		expr    string
		want    []string
		wantAll bool
	}{
		{name: "empty", expr: "", want: nil},
		{name: "no variables", expr: "object.status.succeeded > 0", want: nil},
		{name: "select", expr: "variables.a && variables.b", want: []string{"a", "b"}},
		{name: "has", expr: "has(variables.a)", want: []string{"a"}},
		{name: "optional select", expr: "variables.?a.orValue(1) == variables.b", want: []string{"a", "b"}},
		{name: "inside a macro", expr: "object.items.exists(i, i.name == variables.name)", want: []string{"name"}},
		{name: "the map itself", expr: "size(variables) > 0 || variables.a", want: []string{"a"}, wantAll: true},
		{name: "index", expr: "variables['a']", want: nil, wantAll: true},
		{name: "does not parse", expr: "variables.(", want: nil, wantAll: true},
		{name: "a field named variables", expr: "object.variables.a", want: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			names, all := variableRefs(tc.expr)
			var got []string
			for n := range names {
				got = append(got, n)
			}
			sort.Strings(got)
			if !reflect.DeepEqual(got, tc.want) || all != tc.wantAll {
				t.Errorf("variableRefs(%q) = %v, %v; want %v, %v", tc.expr, got, all, tc.want, tc.wantAll)
			}
		})
	}
}

func TestSplitDocuments(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		wantLines []int
		wantFirst string
	}{
		{name: "one document", in: "a: 1\nb: 2\n", wantLines: []int{1}, wantFirst: "a: 1\nb: 2\n"},
		{name: "leading comments are skipped for the line", in: "# c\n\nkind: X\n", wantLines: []int{3}},
		{name: "separators", in: "---\na: 1\n---\n# only a comment\n---\nb: 2\n--- # trailing\nc: 3\n", wantLines: []int{2, 6, 8}, wantFirst: "a: 1\n"},
		{name: "empty", in: "\n---\n\n", wantLines: nil},
		{name: "a --- inside a block is not a separator", in: "a: |\n  ---x\nb: 1\n", wantLines: []int{1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			docs, err := splitDocuments("f.yaml", []byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			var lines []int
			for _, d := range docs {
				lines = append(lines, d.Line)
			}
			if !reflect.DeepEqual(lines, tc.wantLines) {
				t.Errorf("document lines = %v, want %v", lines, tc.wantLines)
			}
			if tc.wantFirst != "" && string(docs[0].Data) != tc.wantFirst {
				t.Errorf("first document = %q, want %q", docs[0].Data, tc.wantFirst)
			}
		})
	}
}

// TestLoadObjectIntegers checks that integers reach CEL as ints, as the API
// server's objects do: as doubles, an expression that the controller
// evaluates without error could fail here, or the other way round.
func TestLoadObjectIntegers(t *testing.T) {
	obj, gvk, err := loadObject(td("job-complete.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if gvk.String() != "batch/v1, Kind=Job" {
		t.Errorf("gvk = %s", gvk)
	}
	status := obj["status"].(map[string]any)
	if v, ok := status["succeeded"].(int64); !ok || v != 1 {
		t.Errorf("status.succeeded = %#v, want int64(1)", status["succeeded"])
	}
}

func TestLoadObjectNeedsOneDocument(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "two.yaml")
	if err := os.WriteFile(f, []byte("apiVersion: v1\nkind: Pod\n---\napiVersion: v1\nkind: Pod\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := loadObject(f); err == nil || !strings.Contains(err.Error(), "holds 2 documents") {
		t.Errorf("loadObject error = %v, want one about 2 documents", err)
	}
}
