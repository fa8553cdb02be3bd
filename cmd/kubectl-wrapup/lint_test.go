package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/validation/spec"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
	"github.com/wrapup-dev/wrapup/celpolicies/schemas"
)

// lintText lints one file's text, named rule.yaml, with the shipped schemas.
func lintText(t *testing.T, text string) []string {
	t.Helper()
	docs, err := splitDocuments("rule.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	fs, _ := lintDocuments(context.Background(), docs, offlineSchemas())
	var out []string
	for _, f := range fs {
		out = append(out, f.String())
	}
	return out
}

const header = "apiVersion: wrapup.dev/v1alpha1\nkind: CompletionRule\nmetadata:\n  name: r\nspec:\n"

// TestLint holds each mistake lint finds, with its exact message and its
// position: the line and column of the field, and the position inside the
// CEL expression. Line 6 is the first line under spec.
func TestLint(t *testing.T) {
	tests := []struct {
		name string
		spec string
		want []string
	}{
		{name: "a clean rule", spec: "  trigger: {apiGroup: batch, kind: Job}\n", want: nil},
		{name: "Volcano's Job, not batch's", spec: "  trigger: {apiGroup: batch.volcano.sh, kind: Job}\n", want: nil},
		{name: "a clean rule without kind", spec: "  success: object.?status.?done.orValue(false) == true\n", want: nil},
		{name: "a success that is always true, and a failure never evaluated", spec: "  success: 'true'\n  failure: 'false'\n", want: []string{
			"rule.yaml:7:12: warning: spec.failure: is never evaluated: success is the literal true and success wins over failure (rule r)",
			"rule.yaml:7:12: warning: spec.failure: is the literal false: the trigger itself never counts as failed (it replaces the built-in failure expression); only an AppWrapper that its controller marks Failed reaches onFailure (rule r)"}},
		{
			name: "a misspelt field of the trigger (type check)",
			spec: "  trigger:\n    apiGroup: batch\n    kind: Job\n  success: object.status.succeded > 0\n",
			want: []string{"rule.yaml:9:25: warning: spec.success: 1:14: undefined field 'succeded' (rule r)"},
		},
		{
			name: "a field the kind does not have",
			spec: "  trigger: {apiGroup: batch, kind: Job}\n  failure: object.status.phase == 'Failed'\n",
			want: []string{"rule.yaml:7:25: warning: spec.failure: 1:14: undefined field 'phase' (rule r)"},
		},
		{
			name: "no such overload",
			spec: "  trigger: {apiGroup: batch, kind: Job}\n  success: object.status.succeeded > 'x'\n",
			want: []string{"rule.yaml:7:36: warning: spec.success: 1:25: found no matching overload for '_>_' applied to '(int, string)' (rule r)"},
		},
		{
			name: "an int where a bool is wanted",
			spec: "  trigger: {apiGroup: batch, kind: Job}\n  success: object.?status.?succeeded.orValue(0)\n",
			want: []string{"rule.yaml:7:12: warning: spec.success: must evaluate to bool but, for a Job, evaluates to int: every evaluation fails (taken as not finished) (rule r)"},
		},
		{
			name: "an optional field read without ? or has(): it errors on every Job that lacks it",
			spec: "  trigger: {apiGroup: batch, kind: Job}\n  success: object.status.conditions.exists(c, c.type == 'Complete' && c.status == 'True')\n",
			want: []string{"rule.yaml:7:25: warning: spec.success: 1:14: conditions is optional in the Job schema: object.status.conditions errors (no such key) on a Job without it, and every such evaluation counts as not finished, with an EvaluationError Warning; read it as object.status.?conditions.orValue([]), or test it with has() (rule r)"},
		},
		{
			name: "the forms the docs show read optional fields safely: has(), ?, and a built-in kind's status",
			spec: "  trigger: {apiGroup: batch, kind: Job}\n" +
				"  success: has(object.status.conditions) && object.status.conditions.exists(c, c.type == 'Complete' && c.status == 'True')\n" +
				"  failure: object.?status.?conditions.orValue([]).filter(c, c.type == 'Failed' && c.status == 'True').size() > 0\n" +
				"  message: \"object.metadata.name + ': ' + string(object.?status.?succeeded.orValue(0))\"\n",
			want: nil,
		},
		{
			name: "a custom resource has no status until its controller writes one",
			spec: "  trigger: {apiGroup: kubeflow.org, kind: PyTorchJob}\n  success: object.status.?completionTime.hasValue()\n",
			want: []string{"rule.yaml:7:18: warning: spec.success: 1:7: status is optional in the PyTorchJob schema: object.status errors (no such key) on a PyTorchJob without it, and every such evaluation counts as not finished, with an EvaluationError Warning; read it as object.?status, or test it with has() (rule r)"},
		},
		{
			name: "a key of a map may be absent",
			spec: "  trigger: {apiGroup: kubeflow.org, kind: PyTorchJob}\n  success: has(object.status.replicaStatuses) && object.status.replicaStatuses.Master.succeeded > 0\n",
			want: []string{
				"rule.yaml:7:22: warning: spec.success: 1:11: status is optional in the PyTorchJob schema: object.status errors (no such key) on a PyTorchJob without it, and every such evaluation counts as not finished, with an EvaluationError Warning; read it as object.?status.orValue({}), or test it with has() (rule r)",
				"rule.yaml:7:79: warning: spec.success: 1:68: Master is a map key, which may be absent: object.status.replicaStatuses.Master.succeeded errors (no such key) on a PyTorchJob without it, and every such evaluation counts as not finished, with an EvaluationError Warning; read it as object.status.replicaStatuses.?Master.?succeeded.orValue(0), or test it with has() (rule r)",
			},
		},
		{
			name: "a comprehension of 10^7 iterations",
			spec: "  trigger: {apiGroup: batch, kind: Job}\n  success: lists.range(10000000).all(i, i >= 0)\n",
			want: []string{"rule.yaml:7:12: warning: spec.success: estimated worst-case cost 60000012 exceeds 10000000, the API server's limit for a validation rule, " +
				"for a Job with lists of up to 3000 items and strings of up to 4096 bytes where its schema sets no bound: on such a trigger it fails with a cost error (taken as not finished); bound the lists and strings it reads (rule r)"},
		},
		{
			name: "a misspelt field of the rule",
			spec: "  trigger: {apiGroup: batch, kind: Job}\n  sucess: 'true'\n",
			want: []string{`rule.yaml:7:11: error: spec.sucess: unknown field (the API server rejects the rule: strict decoding error: unknown field "spec.sucess") (rule r)`},
		},
		{
			name: "an action that is not one, and a TTL out of bounds (the CRD's enum and bounds)",
			spec: "  trigger: {apiGroup: batch, kind: Job}\n  onFailure:\n    action: Delete\n    ttlSecondsAfterFinished: -1\n",
			want: []string{
				`rule.yaml:8:13: error: spec.onFailure.action: Unsupported value: "Delete": supported values: "DeleteAll", "UpdateStatus" (rule r)`,
				"rule.yaml:9:30: error: spec.onFailure.ttlSecondsAfterFinished: Invalid value: -1: spec.onFailure.ttlSecondsAfterFinished in body should be greater than or equal to 0 (rule r)",
			},
		},
		{
			name: "a priority out of bounds",
			spec: "  trigger: {apiGroup: batch, kind: Job}\n  priority: 2000000\n",
			want: []string{"rule.yaml:7:13: error: spec.priority: Invalid value: 2000000: spec.priority in body should be less than or equal to 1000000 (rule r)"},
		},
		{
			name: "a kind that is not one (the CRD's pattern)",
			spec: "  trigger: {apiGroup: batch, kind: jobs}\n  success: 'true'\n",
			want: []string{`rule.yaml:6:36: error: spec.trigger.kind: Invalid value: "jobs": spec.trigger.kind in body should match '^[A-Z][A-Za-z0-9]*$' (rule r)`,
				`rule.yaml:6:36: error: spec.trigger.kind: no kind jobs in the group batch; did you mean Job (apiGroup: batch)? (rule r)`},
		},
		{
			name: "a trigger name without kind (the CRD's x-kubernetes-validations)",
			spec: "  trigger:\n    name: bench\n",
			want: []string{"rule.yaml:6:3: error: spec.trigger: Invalid value: trigger.name needs trigger.kind (rule r)"},
		},
		{
			name: "a custom kind without success (the CRD's x-kubernetes-validations)",
			spec: "  trigger: {apiGroup: example.com, kind: EvalRun}\n",
			want: []string{"rule.yaml:5:1: error: spec: Invalid value: a trigger kind with no built-in expression needs spec.success (rule r)"},
		},
		{
			name: "a custom kind: not type-checked offline, and lint says so",
			spec: "  trigger: {apiGroup: example.com, kind: EvalRun}\n  success: object.done\n",
			want: []string{"rule.yaml:6:42: note: spec.trigger.kind: no schema of example.com/EvalRun is shipped (only: " + strings.Join(schemas.GroupVersions(), ", ") + "): " +
				"its expressions are not type-checked offline; --server-schema checks them against the cluster's (rule r)"},
		},
		{
			name: "an expression that does not compile, with the CEL position",
			spec: "  trigger: {apiGroup: batch, kind: Job}\n  variables:\n  - name: done\n    expression: object.status.?succeeded.orValue(0)\n  message: \"'pods: ' + 1\"\n",
			want: []string{"rule.yaml:10:22: error: spec.message: 1:10: found no matching overload for '_+_' applied to '(string, int)' (rule r)"},
		},
		{
			name: "a misspelt field in a variable",
			spec: "  trigger: {apiGroup: batch, kind: Job}\n  variables:\n  - name: done\n    expression: object.status.succeded\n  success: variables.done > 0\n",
			want: []string{"rule.yaml:9:30: warning: spec.variables[0].expression: 1:14: undefined field 'succeded' (rule r)"},
		},
		{
			name: "a literal block scalar: the character's own line and column",
			spec: "  trigger: {apiGroup: batch, kind: Job}\n  success: |\n    object.status.?active.orValue(0) == 0 &&\n      object.status.succeded > 0\n",
			want: []string{"rule.yaml:9:20: warning: spec.success: 2:16: undefined field 'succeded' (rule r)"},
		},
		{
			name: "an anchored value: the value, not the anchor",
			spec: "  trigger: {apiGroup: batch, kind: Job}\n  success: &s object.status.succeded > 0\n",
			want: []string{"rule.yaml:7:15: warning: spec.success: 1:14: undefined field 'succeded' (rule r)"},
		},
		{
			name: "a folded block scalar (>-), as config/samples/benchmarks.yaml writes messages",
			spec: "  trigger: {apiGroup: batch, kind: Job}\n  message: >-\n    'benchmark ' + object.metadata.name + ': ' +\n    string(object.?status.?succeeded.orValue(0)) + ' succeeded, ' +\n    string(object.status.faild)\n",
			want: []string{"rule.yaml:10:25: warning: spec.message: 1:130: undefined field 'faild' (rule r)"},
		},
		{
			name: "a folded block scalar with a blank line, kept as a line break",
			spec: "  trigger: {apiGroup: batch, kind: Job}\n  success: >\n    object.status.?active.orValue(0) == 0\n\n    && object.status.succeded > 0\n",
			want: []string{"rule.yaml:10:21: warning: spec.success: 2:17: undefined field 'succeded' (rule r)"},
		},
		{
			name: "a double-quoted string with escapes",
			spec: "  trigger: {apiGroup: batch, kind: Job}\n  success: \"object.metadata.name == \\\"a\\\" && object.status.succeded > 0\"\n",
			want: []string{"rule.yaml:7:59: warning: spec.success: 1:45: undefined field 'succeded' (rule r)"},
		},
		{
			name: "a single-quoted string with a doubled quote",
			spec: "  trigger: {apiGroup: batch, kind: Job}\n  success: 'object.metadata.name == ''a'' && object.status.succeded > 0'\n",
			want: []string{"rule.yaml:7:59: warning: spec.success: 1:45: undefined field 'succeded' (rule r)"},
		},
		{
			name: "a double-quoted string over two lines",
			spec: "  trigger: {apiGroup: batch, kind: Job}\n  success: \"object.metadata.name == 'a' &&\n    object.status.succeded > 0\"\n",
			want: []string{"rule.yaml:8:18: warning: spec.success: 1:45: undefined field 'succeded' (rule r)"},
		},
		{
			name: "a plain scalar over two lines",
			spec: "  trigger: {apiGroup: batch, kind: Job}\n  success: object.metadata.name == 'a' &&\n    object.status.succeded > 0\n",
			want: []string{"rule.yaml:8:18: warning: spec.success: 1:45: undefined field 'succeded' (rule r)"},
		},
		{
			name: "a syntax error: one line, after the unfinished expression",
			spec: "  trigger: {apiGroup: batch, kind: Job}\n  success: |\n    object.status.succeeded >=\n",
			want: []string{"rule.yaml:8:31: error: spec.success: 2:1: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER} (rule r)"},
		},
		{
			name: "a TTL UpdateStatus never waits for",
			spec: "  trigger: {apiGroup: batch, kind: Job}\n  onSuccess: {action: UpdateStatus, ttlSecondsAfterFinished: 60}\n",
			want: []string{"rule.yaml:7:62: warning: spec.onSuccess.ttlSecondsAfterFinished: is never used: UpdateStatus deletes nothing, so there is nothing to wait for (rule r)"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := lintText(t, header+tc.spec)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestLintList: kubectl get completionrules -o yaml prints a List; its
// rules are linted, each field positioned, and a namespace on the
// cluster-scoped rule is only a warning, since the API server clears it.
func TestLintList(t *testing.T) {
	got := lintText(t, "apiVersion: v1\nkind: List\nitems:\n- apiVersion: wrapup.dev/v1alpha1\n  kind: CompletionRule\n  metadata:\n    name: listed\n    namespace: team-a\n"+
		"  spec:\n    trigger: {apiGroup: batch, kind: Job}\n    onFailure: {action: Delete}\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: c}\n")
	want := []string{
		"rule.yaml:8:16: warning: metadata.namespace: CompletionRules are cluster-scoped: the namespace is ignored; use spec.namespaceSelector to scope the rule (rule listed)",
		`rule.yaml:11:25: error: spec.onFailure.action: Unsupported value: "Delete": supported values: "DeleteAll", "UpdateStatus" (rule listed)`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestLintNamesAndVersions(t *testing.T) {
	got := lintText(t, "apiVersion: wrapup.dev/v1\nkind: CompletionRule\nmetadata: {name: r}\n---\n"+
		"apiVersion: wrapup.dev/v1alpha1\nkind: CompletionRule\nmetadata:\n  name: Bad_Name/x\nspec: {}\n---\n"+
		"apiVersion: wrapup.dev/v1alpha1\nkind: CompletionRule\nmetadata: {}\nspec: {}\n")
	want := []string{
		`rule.yaml:1:13: error: apiVersion: "wrapup.dev/v1": wrapup serves wrapup.dev/v1alpha1`,
		`rule.yaml:8:9: error: metadata.name: Invalid value: "Bad_Name/x": may not contain '/' (rule Bad_Name/x)`,
		`rule.yaml:8:9: error: metadata.name: the API server refuses this name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*') (rule Bad_Name/x)`,
		`rule.yaml:13:11: error: metadata.name: Required value: name or generateName is required`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
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
	obj, gvk, err := loadObject(td("job-complete.yaml"), nil)
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
	if _, _, err := loadObject(f, nil); err == nil || !strings.Contains(err.Error(), "holds 2 documents") {
		t.Errorf("loadObject error = %v, want one about 2 documents", err)
	}
}

// lint refuses what the webhook and the controller refuse besides the
// expressions, at the field, one line each; --strict fails on warnings.
func TestLintSelectorsKindsAndStrict(t *testing.T) {
	got := lintText(t, "apiVersion: wrapup.dev/v1alpha1\nkind: CompletionRule\nmetadata: {name: bad-selector}\nspec:\n"+
		"  appWrapperSelector: {matchLabels: {role: a b}}\n  trigger: {apiGroup: batch, kind: Job}\n---\n"+
		"apiVersion: wrapup.dev/v1alpha1\nkind: CompletionRule\nmetadata: {name: core-job}\nspec:\n  trigger: {kind: Job}\n  success: 'true'\n")
	joined := strings.Join(got, "\n")
	for _, want := range []string{"rule.yaml:5:23: error: spec.appWrapperSelector: values[0][role]: Invalid value: \"a b\"", "error: spec.trigger.apiGroup: Kubernetes' core group (apiGroup unset) has no kind Job; Job is in the group batch: did you mean apiGroup: batch? (rule core-job)"} {
		if !strings.Contains(joined, want) {
			t.Errorf("findings:\n%s\nwant one containing %q", joined, want)
		}
	}
}

// A kind of the same name as a built-in kind of another group is no
// mistake where the group names it (Volcano's Job beside batch's): lint
// suggests no other group when its schemas know the kind there (the
// cluster serves it), and says how to check it when they do not.
func TestLintKindOfAnotherGroup(t *testing.T) {
	rule := &wrapupv1alpha1.CompletionRule{ObjectMeta: metav1.ObjectMeta{Name: "jobs"}, Spec: wrapupv1alpha1.CompletionRuleSpec{
		Trigger: wrapupv1alpha1.TriggerSpec{APIGroup: "example.com", Kind: "Job"}, Success: "object.?status.?state.orValue('') == 'Completed'"}}
	at := func(field string) string { return "rule.yaml:1:1" }
	served := lintSchemas{where: "cluster", schemaFor: func(gk schema.GroupKind) (schema.GroupVersionKind, *spec.Schema, string, bool) {
		if gk == (schema.GroupKind{Group: "example.com", Kind: "Job"}) {
			return gk.WithVersion("v1alpha1"), nil, "the cluster publishes no schema of example.com/v1alpha1, Kind=Job", false
		}
		return schema.GroupVersionKind{}, nil, "the cluster does not serve " + gk.String(), false
	}}
	for _, f := range lintRule(rule, served, at) {
		if strings.Contains(f.Message, "did you mean") {
			t.Errorf("the cluster serves example.com/Job, and lint says: %s", f)
		}
	}
	var found []string
	for _, f := range lintRule(rule, offlineSchemas(), at) {
		found = append(found, f.String())
	}
	if joined := strings.Join(found, "\n"); !strings.Contains(joined, "did you mean apiGroup: batch? (if your cluster serves example.com/Job, --server-schema finds it there") {
		t.Errorf("offline, without a schema of example.com/Job: findings\n%s\nwant the suggestion and how to check it", joined)
	}
}

// selectorsOverlap finds label sets both selectors select, or a key on
// which they contradict.
func TestSelectorsOverlap(t *testing.T) {
	sel := func(labels map[string]string, exprs ...metav1.LabelSelectorRequirement) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: labels, MatchExpressions: exprs}
	}
	req := func(key string, op metav1.LabelSelectorOperator, values ...string) metav1.LabelSelectorRequirement {
		return metav1.LabelSelectorRequirement{Key: key, Operator: op, Values: values}
	}
	tests := []struct {
		name string
		a, b *metav1.LabelSelector
		want bool
	}{
		{"both absent", nil, nil, true},
		{"one empty", sel(nil), sel(map[string]string{"role": "a"}), true},
		{"other keys", sel(map[string]string{"role": "a"}), sel(map[string]string{"team": "x"}), true},
		{"other values of a key", sel(map[string]string{"role": "a"}), sel(map[string]string{"role": "b"}), false},
		{"In and NotIn of the same values", sel(nil, req("role", metav1.LabelSelectorOpIn, "a", "b")), sel(nil, req("role", metav1.LabelSelectorOpNotIn, "a", "b")), false},
		{"In and NotIn leave a value", sel(nil, req("role", metav1.LabelSelectorOpIn, "a", "b")), sel(nil, req("role", metav1.LabelSelectorOpNotIn, "a")), true},
		{"Exists and DoesNotExist", sel(nil, req("role", metav1.LabelSelectorOpExists)), sel(nil, req("role", metav1.LabelSelectorOpDoesNotExist)), false},
		{"a value and DoesNotExist", sel(map[string]string{"role": "a"}), sel(nil, req("role", metav1.LabelSelectorOpDoesNotExist)), false},
		{"NotIn and DoesNotExist", sel(nil, req("role", metav1.LabelSelectorOpNotIn, "a")), sel(nil, req("role", metav1.LabelSelectorOpDoesNotExist)), true},
	}
	for _, tc := range tests {
		if got := selectorsOverlap(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: overlap %v, want %v", tc.name, got, tc.want)
		}
		if got := selectorsOverlap(tc.b, tc.a); got != tc.want {
			t.Errorf("%s (the other way): overlap %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The built-in expressions, written as a rule's own, compare only states
// their kind has, and finish runs only on final ones.
func TestLintStatesOfTheBuiltins(t *testing.T) {
	for _, gk := range celpolicies.BuiltinKinds() {
		success, failure, _ := celpolicies.BuiltinFor(gk)
		rule := &wrapupv1alpha1.CompletionRule{ObjectMeta: metav1.ObjectMeta{Name: "builtin"}, Spec: wrapupv1alpha1.CompletionRuleSpec{
			Trigger: wrapupv1alpha1.TriggerSpec{APIGroup: gk.Group, Kind: gk.Kind}, Success: success, Failure: failure}}
		for _, f := range stateFindings(rule) {
			t.Errorf("%s: %s", kindName(gk), f)
		}
	}
}

// comparisons finds what an expression compares with string literals:
// conditions' fields through a comprehension over them or an index, and
// fields under object, read plainly or optionally.
func TestComparisons(t *testing.T) {
	got := comparisons("object.?status.?conditions.orValue([]).exists(c, c.type in ['A', 'B'] && c.status != 'True') || " +
		"!(object.status.phase == 'P') || object.status.conditions[0].reason == 'R' || 'S' == object.?status.?state.orValue('')")
	var out []string
	for _, c := range got {
		out = append(out, fmt.Sprintf("%s %s %v %s", c.what, c.lit, c.positive, c.at))
	}
	want := []string{"type A true 1:61", "type B true 1:66", "status True false 1:86", "status.phase P false 1:122",
		"reason R true 1:168", "status.state S true 1:175"}
	if strings.Join(out, "; ") != strings.Join(want, "; ") {
		t.Errorf("comparisons:\n%s\nwant:\n%s", strings.Join(out, "\n"), strings.Join(want, "\n"))
	}
}
