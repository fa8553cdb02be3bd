// Package docs tests what the project's documentation and samples teach:
// every CompletionRule they show compiles, type-checks without a warning
// against its kind's shipped schema, and its expressions evaluate, without
// an error, on a trigger that has no status yet (a custom resource just
// created) and on a finished one. A doc that teaches an expression
// failing on every new object cannot come back.
package docs

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
	"github.com/wrapup-dev/wrapup/celpolicies/schemas"
)

// root is the repository's root, from this package's folder.
const root = "../.."

// yamlBlock finds the YAML code blocks of a Markdown file.
var yamlBlock = regexp.MustCompile("(?s)```ya?ml\n(.*?)```")

// documents are the YAML documents of the docs' code blocks and of the
// samples and shipped rules, each with where it came from.
func documents(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	mds, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	mds = append(mds, filepath.Join(root, "README.md"))
	for _, md := range mds {
		b, err := os.ReadFile(md)
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range yamlBlock.FindAllSubmatch(b, -1) {
			for j, doc := range bytes.Split(m[1], []byte("\n---")) {
				out[filepath.Base(md)+"#block"+itoa(i)+"/"+itoa(j)] = doc
			}
		}
	}
	for _, dir := range []string{"config/samples", "config/rules"} {
		files, _ := filepath.Glob(filepath.Join(root, dir, "*.yaml"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for j, doc := range bytes.Split(b, []byte("\n---")) {
				out[dir+"/"+filepath.Base(f)+"/"+itoa(j)] = doc
			}
		}
	}
	return out
}

func itoa(i int) string { return strconv.Itoa(i) }

// finished is a finished trigger of kind gk, as its operator writes it,
// for the kinds the docs and samples use; nil for others.
func finished(gk schema.GroupKind) map[string]any {
	status := map[string]any{}
	switch gk {
	case schema.GroupKind{Group: "batch", Kind: "Job"}:
		status = map[string]any{"succeeded": int64(1), "failed": int64(0),
			"conditions": []any{map[string]any{"type": "Complete", "status": "True", "reason": "Completed", "message": "done"}}}
	case schema.GroupKind{Kind: "Pod"}:
		status = map[string]any{"phase": "Succeeded"}
	case schema.GroupKind{Group: "kubeflow.org", Kind: "PyTorchJob"}, schema.GroupKind{Group: "jobset.x-k8s.io", Kind: "JobSet"}:
		status = map[string]any{"conditions": []any{map[string]any{"type": "Succeeded", "status": "True", "reason": "Done", "message": "done"},
			map[string]any{"type": "Completed", "status": "True", "reason": "Done", "message": "done"}}}
	case schema.GroupKind{Group: "ray.io", Kind: "RayJob"}:
		status = map[string]any{"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}
	default:
		// A custom kind (EvalRun in the docs): a phase and results.
		status = map[string]any{"phase": "Done", "passed": int64(3), "results": []any{map[string]any{"name": "a", "passed": true}}}
	}
	return map[string]any{"apiVersion": "v1", "kind": gk.Kind, "metadata": map[string]any{"name": "t", "namespace": "ns"}, "status": status}
}

func TestEveryRuleTheDocsShowEvaluatesOnNewAndFinishedTriggers(t *testing.T) {
	rules := 0
	for where, doc := range documents(t) {
		var head map[string]any
		if yaml.Unmarshal(doc, &head) != nil || head == nil {
			continue
		}
		var rule wrapupv1alpha1.CompletionRule
		switch {
		case head["kind"] == "CompletionRule":
			if err := yaml.Unmarshal(doc, &rule); err != nil {
				// A sketch with elisions ({...}) is not a rule to check.
				continue
			}
		case head["success"] != nil || head["failure"] != nil || head["message"] != nil || head["variables"] != nil:
			// Part of a rule's spec, as the docs show it (the Variables
			// example): its trigger is a custom kind unless it says.
			if err := yaml.Unmarshal(doc, &rule.Spec); err != nil {
				continue
			}
			rule.Name = "(spec)"
			if rule.Spec.Trigger.Kind == "" {
				rule.Spec.Trigger = wrapupv1alpha1.TriggerSpec{APIGroup: "example.com", Kind: "EvalRun"}
			}
		default:
			continue
		}
		rules++
		p, err := celpolicies.Compile(&rule.Spec)
		if err != nil {
			t.Errorf("%s: rule %s does not compile: %v", where, rule.Name, err)
			continue
		}
		gk := schema.GroupKind{Group: rule.Spec.Trigger.APIGroup, Kind: rule.Spec.Trigger.Kind}
		if gk.Kind == "" {
			gk = schema.GroupKind{Group: "batch", Kind: "Job"}
		}
		fresh := map[string]any{"apiVersion": "v1", "kind": gk.Kind, "metadata": map[string]any{"name": "t", "namespace": "ns"}}
		aw := map[string]any{"apiVersion": "workload.codeflare.dev/v1beta2", "kind": "AppWrapper",
			"metadata": map[string]any{"name": "run", "namespace": "ns", "labels": map[string]any{}, "annotations": map[string]any{}}, "spec": map[string]any{}, "status": map[string]any{}}
		if res, err := p.Evaluate(context.Background(), gk, fresh, aw); err != nil {
			t.Errorf("%s: rule %s on a %s with no status yet: %v (every new trigger would get an EvaluationError)", where, rule.Name, gk, err)
		} else if res.Outcome != celpolicies.OutcomeRunning {
			t.Errorf("%s: rule %s on a %s with no status yet: %s, want Running", where, rule.Name, gk, res.Outcome)
		}
		if _, err := p.Evaluate(context.Background(), gk, finished(gk), aw); err != nil {
			t.Errorf("%s: rule %s on a finished %s: %v", where, rule.Name, gk, err)
		}
		// And no warning from the type check (cost, an optional field
		// read without ? or has()), where the plugin ships the schema.
		if rule.Spec.Trigger.Kind != "" {
			if gvk, ok := schemas.Preferred(gk); ok {
				s, err := schemas.Resolve(gvk)
				if err != nil {
					t.Fatal(err)
				}
				for _, w := range celpolicies.TypeCheck(&rule.Spec, s, gk.Kind) {
					t.Errorf("%s: rule %s: type-check warning on %s: %s", where, rule.Name, w.FieldRef, w.Warning)
				}
			}
		}
	}
	if rules < 5 {
		t.Fatalf("found %d CompletionRules in the docs and samples: the extraction is broken", rules)
	}
	t.Logf("%d CompletionRules from the docs, the README, the samples and the shipped rules", rules)
}
