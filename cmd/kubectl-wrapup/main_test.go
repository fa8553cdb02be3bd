package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// samples are the rules shipped in config/samples.
const samples = "../../config/samples"

func sample(name string) string { return filepath.Join(samples, name) }

func td(name string) string { return filepath.Join("testdata", name) }

// TestRun runs whole command lines against the sample rules and the
// testdata triggers, as a user would.
func TestRun(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		// wantOut and wantErr must each appear in stdout and stderr.
		wantOut []string
		wantErr []string
		// notOut must not appear in stdout.
		notOut []string
		// stdin is the command's input.
		stdin string
	}{
		{
			name:     "eval: the benchmarks sample on a completed Job",
			args:     []string{"eval", "-f", sample("benchmarks.yaml"), "--trigger", td("job-complete.yaml")},
			wantCode: exitOK,
			wantOut: []string{
				"outcome:      Succeeded\n",
				"message:      benchmark llama-8b-sweep-guidellm: 1 succeeded, 0 failed\n",
				"trigger:      batch/v1 Job llama-8b-sweep-guidellm\n",
				"success:      built-in for batch/Job: object.?status.?conditions.orValue([]).exists(c, c.type == 'Complete' && c.status == 'True')\n",
				"failure:      built-in for batch/Job:",
				"message from: the rule\n",
				"then:         DeleteAll: record the outcome, then delete the AppWrapper at once\n",
			},
		},
		{
			name:     "eval: the benchmarks sample on a running Job",
			args:     []string{"eval", "-f", sample("benchmarks.yaml"), "--trigger", td("job-running.yaml")},
			wantCode: exitOK,
			wantOut:  []string{"outcome:      Running\n", "then:         nothing yet: the trigger is not finished\n"},
			notOut:   []string{"message:"},
		},
		{
			name:     "eval -o json: a running Job, and what follows",
			args:     []string{"eval", "-f", sample("benchmarks.yaml"), "--trigger", td("job-running.yaml"), "-o", "json"},
			wantCode: exitOK,
			wantOut:  []string{`"outcome": "Running"`, `"then": "nothing yet: the trigger is not finished"`},
			notOut:   []string{`"message"`},
		},
		{
			name:     "eval -o yaml: an evaluation that fails, and what follows",
			args:     []string{"eval", "-f", td("rules/runtime-error.yaml"), "--trigger", td("job-complete.yaml"), "-o", "yaml"},
			wantCode: exitFail,
			wantOut:  []string{"outcome: Running\n", "then: 'nothing: a runtime error counts as not finished"},
		},
		{
			name:     "eval: the benchmarks sample on a failed Job",
			args:     []string{"eval", "-f", sample("benchmarks.yaml"), "--trigger", td("job-failed.yaml")},
			wantCode: exitOK,
			wantOut: []string{
				"outcome:      Failed\n",
				"message:      benchmark llama-8b-sweep-guidellm: 0 succeeded, 1 failed\n",
				"delete the AppWrapper 5m0s after the trigger finished; a failure is final only once the AppWrapper controller stops retrying\n",
			},
		},
		{
			name:     "eval: built-in expressions and message for a rule without a kind",
			args:     []string{"eval", "-f", filepath.Join("../../config/rules", "annotated-triggers.yaml"), "--trigger", td("job-complete.yaml")},
			wantCode: exitOK,
			wantOut: []string{
				"outcome:      Succeeded\n",
				"message:      CompletionsReached: Reached expected number of succeeded pods\n",
				"message from: the built-in expression",
				"cost:         0 ",
				"1m0s after the trigger finished\n",
			},
		},
		{
			name:     "eval: the built-in failure message",
			args:     []string{"eval", "-f", filepath.Join("../../config/rules", "annotated-triggers.yaml"), "--trigger", td("job-failed.yaml")},
			wantCode: exitOK,
			wantOut:  []string{"outcome:      Failed\n", "message:      BackoffLimitExceeded: Job has reached the specified backoff limit\n", "10m0s after"},
		},
		{
			name:     "eval: a custom kind with variables, in dry-run mode",
			args:     []string{"eval", "-f", sample("custom-kind.yaml"), "--trigger", td("evalrun-done.yaml")},
			wantCode: exitOK,
			wantOut: []string{
				"trigger:      example.com/v1 EvalRun suite\n",
				"outcome:      Succeeded\n",
				"message:      2 checks passed\n",
				"success:      from the rule\n",
				"failure:      from the rule\n",
				"then:         dryRun: record the outcome and emit a WouldDelete Event, delete nothing",
			},
			notOut: []string{"cost:         0 "},
		},
		{
			name:     "eval: a trigger of another kind than the rule's",
			args:     []string{"eval", "-f", sample("pytorchjob-status-only.yaml"), "--trigger", td("job-complete.yaml")},
			wantCode: exitFail,
			wantErr:  []string{"rule training-record-only takes a PyTorchJob.kubeflow.org as the trigger, and the trigger file holds a Job.batch"},
		},
		{
			name:     "eval: a broken rule lists every bad expression with its position",
			args:     []string{"eval", "-f", td("rules/broken.yaml"), "--trigger", td("job-complete.yaml")},
			wantCode: exitFail,
			wantErr: []string{
				"testdata/rules/broken.yaml:9:51: error: spec.success: 1:39: Syntax error: mismatched input '<EOF>'",
				"testdata/rules/broken.yaml:10:22: error: spec.message: 1:10: found no matching overload for '_+_' applied to '(string, int)' (rule broken)\n",
			},
			notOut: []string{"outcome:"},
		},
		{
			name:     "eval: a rule of a file that the API server would reject",
			args:     []string{"eval", "-f", td("lint/schema-errors.yaml"), "--name", "bad-action", "--trigger", td("job-complete.yaml")},
			wantCode: exitFail,
			wantErr:  []string{`testdata/lint/schema-errors.yaml:22:23: error: spec.onFailure.action: Unsupported value: "Delete"`},
			notOut:   []string{"outcome:"},
		},
		{
			name:     "eval: the rule and the trigger from stdin and a file",
			args:     []string{"eval", "-f", "-", "--trigger", td("job-complete.yaml"), "-o", "json"},
			stdin:    "apiVersion: wrapup.dev/v1alpha1\nkind: CompletionRule\nmetadata: {name: piped}\nspec:\n  trigger: {apiGroup: batch, kind: Job}\n",
			wantCode: exitOK,
			wantOut:  []string{`"kind": "Evaluation"`, `"outcome": "Succeeded"`, `"rule": "piped"`, `"then": "DeleteAll: record the outcome, then delete the AppWrapper at once"`},
		},
		{
			name:     "eval: a runtime error is not finished, and fails the command",
			args:     []string{"eval", "-f", td("rules/runtime-error.yaml"), "--trigger", td("job-complete.yaml")},
			wantCode: exitFail,
			wantOut:  []string{"outcome:      not finished (Running): the evaluation failed\n", "error:        evaluating spec.success: no such key: finished\n", "EvaluationError Event"},
			wantErr:  []string{"the controller takes the trigger as not finished"},
		},
		{
			name:     "eval: appWrapper from --appwrapper",
			args:     []string{"eval", "-f", td("rules/uses-appwrapper.yaml"), "--trigger", td("job-complete.yaml"), "--appwrapper", td("appwrapper.yaml")},
			wantCode: exitOK,
			wantOut: []string{"message:      llama-8b-sweep: benchmark done\n",
				"then:         RecordOnly: the trigger Succeeded and rule uses-appwrapper's action for it is UpdateStatus: the outcome is recorded, everything keeps running"},
		},
		{
			name:     "eval: an AppWrapper the controller ignores is not finished, whatever its trigger says",
			args:     []string{"eval", "-f", td("rules/uses-appwrapper.yaml"), "--trigger", td("job-complete.yaml"), "--appwrapper", td("appwrapper-ignored.yaml"), "-o", "json"},
			wantCode: exitOK,
			wantOut:  []string{`"outcome": "Succeeded"`, `"verdict": "Ignored"`, `"reason": "the AppWrapper is annotated wrapup.dev/ignore`},
			notOut:   []string{`"then"`},
		},
		{
			name:     "eval: without --appwrapper, appWrapper is empty",
			args:     []string{"eval", "-f", td("rules/uses-appwrapper.yaml"), "--trigger", td("job-complete.yaml")},
			wantCode: exitFail,
			wantOut:  []string{"evaluating spec.message: no such key: metadata"},
		},
		{
			name:     "eval: --appwrapper must hold an AppWrapper",
			args:     []string{"eval", "-f", td("rules/uses-appwrapper.yaml"), "--trigger", td("job-complete.yaml"), "--appwrapper", td("job-running.yaml")},
			wantCode: exitFail,
			wantErr:  []string{"holds a Job, not an AppWrapper"},
		},
		{
			name:     "eval: a folder of rules needs --name",
			args:     []string{"eval", "-f", samples, "--trigger", td("job-complete.yaml")},
			wantCode: exitFail,
			wantErr:  []string{"4 CompletionRules found (benchmarks, eval-suite, parallel-harness, training-record-only): choose one with --name"},
		},
		{
			name:     "eval: --name picks a rule, flags in any order",
			args:     []string{"eval", "--trigger", td("job-complete.yaml"), "--name", "benchmarks", "--filename", samples},
			wantCode: exitOK,
			wantOut:  []string{"rule:         benchmarks\n"},
		},
		{
			name:     "eval: a rule name that is not there",
			args:     []string{"eval", "-f", samples, "--trigger", td("job-complete.yaml"), "--name", "nope"},
			wantCode: exitFail,
			wantErr:  []string{`no CompletionRule named "nope"`},
		},
		{
			name:     "eval: a trigger file without kind",
			args:     []string{"eval", "-f", sample("benchmarks.yaml"), "--trigger", td("no-kind.yaml")},
			wantCode: exitFail,
			wantErr:  []string{"the object has no apiVersion or kind"},
		},
		{
			name:     "eval: a trigger file that is not there",
			args:     []string{"eval", "-f", sample("benchmarks.yaml"), "--trigger", td("nope.yaml")},
			wantCode: exitFail,
			wantErr:  []string{"no such file or directory"},
		},
		{
			name:     "eval: flags missing",
			args:     []string{"eval", "-f", sample("benchmarks.yaml")},
			wantCode: exitUsage,
			wantErr:  []string{"error: eval needs the trigger: --trigger OBJECT.yaml, or --appwrapper [NAMESPACE/]NAME to read it from the cluster\n", "See 'kubectl wrapup eval --help' for usage."},
		},
		{
			name:     "eval: an unknown flag",
			args:     []string{"eval", "--rules", "x"},
			wantCode: exitUsage,
			wantErr:  []string{"error: unknown flag: --rules\n"},
		},
		{
			name: "explain offline: upstream AppWrappers under one rule per kind, as expected",
			args: []string{"explain", "-f", td("offline"), "--rules", td("offline/rules"),
				"--expect", td("offline/expect.yaml"), "--now", "2026-12-03T10:00:00Z"},
			wantCode: exitOK,
			wantOut: []string{
				"AppWrapper: team-a/sample-pytorch-job (phase Running) at 2026-12-03T10:00:00Z\nVerdict:    Delete\n",
				"Message:    PyTorchJobSucceeded: PyTorchJob pytorch-simple is successfully completed.\n",
				"AppWrapper: team-a/sample-jobset (phase Running) at 2026-12-03T10:00:00Z\nVerdict:    DeleteAfterTTL (in 5m0s)\n",
				"Message:    AllJobsCompleted: jobset completed successfully\n",
				"Trigger:    v1 Pod annotated-pod, component 0 (annotated wrapup.dev/trigger)",
				"AppWrapper: team-a/sample-pod (phase Running) at 2026-12-03T10:00:00Z\nVerdict:    NoRule\n",
			},
			wantErr: []string{"6 expectations met\n"},
		},
		{
			// Rules read from files have no UID: each is still evaluated
			// with its own expressions, as the controller evaluates it.
			name: "explain offline: a folder of rules of several kinds, each with expressions of its own",
			args: []string{"explain", "-f", td("kinds"), "--rules", td("kinds/rules"),
				"--expect", td("kinds/expect.yaml"), "--now", "2026-12-03T10:00:00Z"},
			wantCode: exitOK,
			wantOut: []string{
				"Message:    load test load done\n",
				"AppWrapper: team-b/train (phase Running) at 2026-12-03T10:00:00Z\nVerdict:    Delete\n",
				"AppWrapper: team-b/eval (phase Running) at 2026-12-03T10:00:00Z\nVerdict:    RecordOnly\n",
			},
			wantErr: []string{"3 expectations met\n"},
		},
		{
			name:     "explain offline: a tie won by name, and a rule whose own expression misses what the built-in sees",
			args:     []string{"explain", "-f", td("disagree/appwrapper.yaml"), "--rules", td("disagree/rules.yaml"), "--now", "2026-12-03T10:00:00Z"},
			wantCode: exitOK,
			wantOut: []string{
				"Verdict:    WaitingForTrigger\n",
				"  * benchmarks   priority 10  Ready -  wins: the highest priority (10) is shared with delete-runs, and benchmarks sorts first by name\n",
				"Note:       the rule's own expressions say Running, and the built-in expressions of batch/Job say Succeeded on the same object: if the run is finished, the rule's own expressions miss it, and its AppWrapper keeps its resources\n",
				"\nNote: Ready -: a rule read from a file has no status (the controller sets Ready once it compiled the rule); the rules above compile, as lint checks them\n",
			},
			notOut: []string{"highest priority of"},
		},
		{
			name:     "explain offline: a candidate the built-in expressions judge otherwise than the rule's own",
			args:     []string{"explain", "-f", td("disagree/candidates.yaml"), "--now", "2026-12-03T10:00:00Z"},
			wantCode: exitOK,
			wantOut: []string{
				"Note:       Pod harness-1: the rule's own expressions say Succeeded, and the built-in expressions of Pod say Failed on the same object: they disagree on how the run ended\n",
			},
			notOut: []string{"Pod harness-0:"},
		},
		{
			name:     "eval: the built-in expressions disagree with the rule's own",
			args:     []string{"eval", "-f", td("disagree/rules.yaml"), "--name", "benchmarks", "--trigger", td("job-complete.yaml")},
			wantCode: exitOK,
			wantOut: []string{
				"outcome:      Running\n",
				"built-in:     the rule's own expressions say Running, and the built-in expressions of batch/Job say Succeeded on the same object: if the run is finished, the rule's own expressions miss it, and its AppWrapper keeps its resources\n",
			},
		},
		{
			name:     "eval -o json: the built-in expressions disagree with the rule's own",
			args:     []string{"eval", "-f", td("disagree/rules.yaml"), "--name", "benchmarks", "--trigger", td("job-complete.yaml"), "-o", "json"},
			wantCode: exitOK,
			wantOut:  []string{`"builtinDisagrees": "the rule's own expressions say Running, and the built-in expressions of batch/Job say Succeeded on the same object`},
		},
		{
			name:     "eval: a rule's own expressions that agree with the built-in say nothing of it",
			args:     []string{"eval", "-f", sample("benchmarks.yaml"), "--trigger", td("job-running.yaml")},
			wantCode: exitOK,
			notOut:   []string{"built-in:  "},
		},
		{
			name: "explain offline: an expectation not met fails",
			args: []string{"explain", "-f", td("offline"), "--rules", td("offline/rules"), "sample-job", "-n", "team-a",
				"--expect", "sample-job=Delete", "--now", "2026-12-03T10:00:00Z"},
			wantCode: exitFail,
			wantOut:  []string{"AppWrapper: team-a/sample-job (phase Running)", "Verdict:    WaitingForTrigger\n"},
			notOut:   []string{"sample-pod"},
			wantErr:  []string{"expectation not met: team-a/sample-job: verdict WaitingForTrigger, expected Delete\n"},
		},
		{
			name:     "explain offline: a verdict that does not exist",
			args:     []string{"explain", "-f", td("offline"), "--rules", td("offline/rules"), "--expect", "sample-job=Deleted"},
			wantCode: exitUsage,
			wantErr:  []string{`error: --expect sample-job=Deleted: "Deleted" is not a verdict: one of Gone, BeingDeleted,`},
		},
		{
			name:     "explain offline: as JSON, the decision's fields",
			args:     []string{"explain", "-f", td("offline"), "--rules", td("offline/rules"), "team-a/sample-jobset", "-o", "json", "--now", "2026-12-03T10:00:00Z"},
			wantCode: exitOK,
			wantOut:  []string{`"kind": "Explanation"`, `"verdict": "DeleteAfterTTL"`, `"winner": "jobsets"`, `"dueAt": "2026-12-03T10:05:00Z"`},
		},
		{
			name:     "explain offline: a rule the API server refuses is not explained with",
			args:     []string{"explain", "-f", td("offline/pytorchjob.yaml"), "--rules", td("lint/schema-errors.yaml")},
			wantCode: exitFail,
			wantErr:  []string{"spec.sucess: unknown field", "error: a CompletionRule above is one the API server or wrapup's webhook refuses"},
		},
		{
			// The outcome mirrored on the AppWrapper's metadata is for
			// people: without the run's CompletionRecord among the files,
			// the run is not recorded, and its TTL counts from --now.
			name: "explain offline: an AppWrapper whose metadata shows an outcome, without its CompletionRecord",
			args: []string{"explain", "-f", td("recorded/appwrapper.yaml"), "-f", td("job-complete.yaml"), "--rules", td("recorded/rule.yaml"),
				"--now", "2026-05-01T11:00:00Z"},
			wantCode: exitOK,
			wantOut:  []string{"Verdict:    DeleteAfterTTL (in 1h0m0s)\n", "the outcome is not recorded yet", "Recorded:   no outcome\n"},
			notOut:   []string{"In force:"},
		},
		{
			name: "explain offline: a recorded run, its CompletionRecord among the files",
			args: []string{"explain", "-f", td("recorded/appwrapper.yaml"), "-f", td("job-complete.yaml"), "-f", td("recorded/record.yaml"),
				"--rules", td("recorded/rule.yaml"), "--now", "2026-05-01T11:00:00Z"},
			wantCode: exitOK,
			wantOut: []string{
				"Verdict:    DeleteAfterTTL (in 41m13s)\n",
				"Recorded:   Succeeded by rule benchmarks at 2026-05-01T10:41:13.25Z: CompletionsReached: Reached expected number of succeeded pods\n",
				"In force:   rule benchmarks's DeleteAll, deleting from 2026-05-01T11:41:13.25Z (the run's CompletionRecord)\n",
			},
			notOut: []string{"not recorded yet"},
		},
		{
			name:     "explain offline: without AppWrappers",
			args:     []string{"explain", "-f", td("job-complete.yaml"), "--rules", td("offline/rules")},
			wantCode: exitFail,
			wantErr:  []string{"error: no AppWrapper in the -f files\n"},
		},
		{
			name:     "lint: wrapup.dev/trigger on an AppWrapper's own metadata",
			args:     []string{"lint", "-f", td("lint/misplaced-annotation.yaml")},
			wantCode: exitOK,
			wantOut: []string{
				"testdata/lint/misplaced-annotation.yaml:8:3: warning: metadata.annotations: AppWrapper on-the-appwrapper: wrapup.dev/trigger is on the AppWrapper's metadata, where it names no component, and is not read: put it on the trigger component (spec.components[i].annotations) or on that component's template (spec.components[i].template.metadata.annotations)\n",
				"0 rules in 1 file: 0 errors, 1 warning\n",
			},
			notOut: []string{"on-the-template"},
		},
		{
			name:     "lint --strict: the misplaced annotation fails",
			args:     []string{"lint", "--strict", "-f", td("lint/misplaced-annotation.yaml")},
			wantCode: exitFail,
		},
		{
			name:     "lint: the samples are clean",
			args:     []string{"lint", "-f", samples},
			wantCode: exitOK,
			wantOut:  []string{"4 rules in 5 files: 0 errors, 0 warnings\n"},
		},
		{
			name:     "lint: the shipped rules, through their kustomization",
			args:     []string{"lint", "-k", "../../config/rules"},
			wantCode: exitOK,
			wantOut:  []string{"1 rule in 1 file: 0 errors, 0 warnings\n"},
		},
		{
			name:     "lint: no rule at all is an error",
			args:     []string{"lint", "-f", "-"},
			stdin:    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
			wantCode: exitFail,
			wantOut:  []string{"-: error: no CompletionRule found in 1 document(s) (--allow-no-rules accepts that)\n", "0 rules in 1 file: 1 error, 0 warnings\n"},
		},
		{
			name:     "lint: no rule at all, when allowed",
			args:     []string{"lint", "-f", "-", "--allow-no-rules"},
			stdin:    "",
			wantCode: exitOK,
			wantOut:  []string{"0 rules in 1 file: 0 errors, 0 warnings\n"},
		},
		{
			name:     "lint: JSON files are read",
			args:     []string{"lint", "-f", td("lint/json")},
			wantCode: exitOK,
			wantOut:  []string{"1 rule in 1 file: 0 errors, 0 warnings\n"},
		},
		{
			name:     "lint: rules of the same priority over the same AppWrappers that do different things",
			args:     []string{"lint", "-f", td("lint/ties.yaml")},
			wantCode: exitOK,
			wantOut: []string{
				"testdata/lint/ties.yaml:9:13: warning: spec.priority: ties with rule jobs (testdata/lint/ties.yaml:16:18): the same priority 10, selectors that can both select an AppWrapper, and this rule has onSuccess UpdateStatus where jobs has DeleteAll after 60s; where both apply, jobs wins (a tie goes to the name that sorts first, as the controller breaks it): give the rule meant to win a higher priority (rule keep-benchmarks)\n",
				"testdata/lint/ties.yaml:26:13: warning: spec.priority: ties with rule jobs (testdata/lint/ties.yaml:16:18): the same priority 10, selectors that can both select an AppWrapper, and this rule has onSuccess UpdateStatus where jobs has DeleteAll after 60s; where both apply, jobs wins (a tie goes to the name that sorts first, as the controller breaks it): give the rule meant to win a higher priority (rule serving)\n",
				"4 rules in 1 file: 0 errors, 2 warnings\n",
			},
		},
		{
			name:     "lint: conditions and states a built-in kind never has, and outcomes on states its controller moves on from",
			args:     []string{"lint", "-f", td("lint/states.yaml")},
			wantCode: exitOK,
			wantOut: []string{
				`testdata/lint/states.yaml:10:72: warning: spec.success: 1:60: batch/Job never has a condition of type "Succeeded" (its controller sets `,
				`testdata/lint/states.yaml:11:72: warning: spec.failure: 1:60: condition "FailureTarget" is one batch/Job's controller moves on from (a retry, a restart, a suspension), never final: taken as the outcome, it ends a run that goes on (final: `,
				`testdata/lint/states.yaml:18:83: warning: spec.failure: 1:71: condition "Restarting" is one kubeflow.org/PyTorchJob's controller moves on from`,
				`testdata/lint/states.yaml:25:72: warning: spec.failure: 1:60: kubeflow.org/MPIJob's controller also sets condition "Failed" with reason "MPIJobEvicted" while the run goes on, which is not final: tell it apart (final: `,
				`testdata/lint/states.yaml:33:68: warning: spec.failure: 1:56: state "Aborted" is one batch.volcano.sh/Job's controller moves on from`,
				`testdata/lint/states.yaml:33:79: warning: spec.failure: 1:67: batch.volcano.sh/Job's controller never writes "Finished" in status.state.phase (it writes `,
				`testdata/lint/states.yaml:41:99: warning: spec.failure: 1:87: condition "Succeeded" is "Unknown" while the run goes on, which is not final, and this comparison lets it through: compare the status with "True" or "False" (final: `,
				`testdata/lint/states.yaml:49:69: warning: spec.failure: 1:57: state "SUBMISSION_FAILED" is one sparkoperator.k8s.io/SparkApplication's controller moves on from`,
				`testdata/lint/states.yaml:65:72: warning: spec.failure: 1:60: tekton.dev/TaskRun never has a condition of type "Failed" (its controller sets `,
				`testdata/lint/states.yaml:72:36: warning: spec.success: 1:24: Pod's controller never writes "Completed" in status.phase (it writes `,
				"9 rules in 1 file: 0 errors, 10 warnings\n",
			},
			notOut: []string{"(rule fine-job)"},
		},
		{
			name:     "lint: unreachable parts are warnings",
			args:     []string{"lint", "-f", td("lint/unreachable.yaml")},
			wantCode: exitOK,
			wantOut: []string{
				"testdata/lint/unreachable.yaml:9:12: warning: spec.failure: is the literal false: the trigger itself never counts as failed (it replaces the built-in failure expression); only an AppWrapper that its controller marks Failed reaches onFailure (rule never-fails)\n",
				`testdata/lint/unreachable.yaml:17:3: warning: spec.variables: variable "passed" is never used by success, failure, message or a later variable (rule unused-variable)` + "\n",
				"testdata/lint/unreachable.yaml:30:62: warning: spec.onSuccess.ttlSecondsAfterFinished: is never used: UpdateStatus deletes nothing, so there is nothing to wait for (rule record-only-with-ttl)\n",
				"testdata/lint/unreachable.yaml:39:12: warning: spec.failure: is never evaluated: success is the literal true and success wins over failure (rule always-succeeds)\n",
				"testdata/lint/unreachable.yaml:37:42: note: spec.trigger.kind: no schema of example.com/EvalRun is shipped",
				"testdata/lint/unreachable.yaml:28:1: warning: spec.priority: ties with rule never-fails (testdata/lint/unreachable.yaml:6:9): the same priority 0, selectors that can both select an AppWrapper, and this rule has onSuccess UpdateStatus where never-fails has DeleteAll; where both apply, never-fails wins (a tie goes to the name that sorts first, as the controller breaks it): give the rule meant to win a higher priority (rule record-only-with-ttl)\n",
				"4 rules in 1 file: 0 errors, 5 warnings\n",
			},
		},
		{
			name:     "lint: what the API server rejects is an error",
			args:     []string{"lint", "-f", td("lint/schema-errors.yaml")},
			wantCode: exitFail,
			wantOut: []string{
				"schema-errors.yaml:7:12: error: spec.trigger: Invalid value: trigger.name needs trigger.kind (rule name-without-kind)\n",
				"schema-errors.yaml:13:1: error: spec: Invalid value: a trigger kind with no built-in expression needs spec.success (rule custom-kind-without-success)\n",
				`schema-errors.yaml:22:23: error: spec.onFailure.action: Unsupported value: "Delete": supported values: "DeleteAll", "UpdateStatus" (rule bad-action)`,
				"schema-errors.yaml:22:56: error: spec.onFailure.ttlSecondsAfterFinished: Invalid value: -1: spec.onFailure.ttlSecondsAfterFinished in body should be greater than or equal to 0 (rule bad-action)\n",
				`schema-errors.yaml:30:11: error: spec.sucess: unknown field (the API server rejects the rule: strict decoding error: unknown field "spec.sucess") (rule misspelt-field)`,
				"4 rules in 1 file: 5 errors, 0 warnings\n",
			},
		},
		{
			name:     "lint: a rule that does not compile",
			args:     []string{"lint", "-f", td("rules/broken.yaml"), "-f", sample("benchmarks.yaml")},
			wantCode: exitFail,
			wantOut: []string{
				"testdata/rules/broken.yaml:9:51: error: spec.success: 1:39: Syntax error",
				"testdata/rules/broken.yaml:10:22: error: spec.message: 1:10: found no matching overload for '_+_' applied to '(string, int)' (rule broken)\n",
				"2 rules in 2 files: 2 errors, 0 warnings\n",
			},
		},
		{
			name:     "lint: duplicate names across files",
			args:     []string{"lint", "-f", sample("benchmarks.yaml"), "-f", td("lint/duplicate.yaml")},
			wantCode: exitOK,
			wantOut:  []string{"testdata/lint/duplicate.yaml:5:9: warning: metadata.name: another rule of the same name is at ../../config/samples/benchmarks.yaml:12:9: applying both keeps only the last (rule benchmarks)\n"},
		},
		{
			name:     "lint: a wrong apiVersion",
			args:     []string{"lint", "-f", td("lint/wrong-version.yaml")},
			wantCode: exitFail,
			wantOut:  []string{`wrong-version.yaml:2:13: error: apiVersion: "wrapup.dev/v1": wrapup serves wrapup.dev/v1alpha1`},
		},
		{
			name:     "lint: a path that is not there",
			args:     []string{"lint", "-f", td("nope")},
			wantCode: exitFail,
			wantErr:  []string{"no such file or directory"},
		},
		{
			name:     "lint: no -f",
			args:     []string{"lint", td("lint")},
			wantCode: exitUsage,
			wantErr:  []string{`error: unknown command "testdata/lint" for "kubectl wrapup lint"`},
		},
		{
			name:     "explain: no name",
			args:     []string{"explain", "-n", "ns"},
			wantCode: exitUsage,
			wantErr:  []string{"error: explain needs an AppWrapper's name, or -f FILE to explain the AppWrappers of files offline\n", "See 'kubectl wrapup explain --help' for usage."},
		},
		{
			name:     "explain: a cluster that cannot be reached",
			args:     []string{"explain", "sweep", "-n", "bench", "--kubeconfig", td("unreachable-kubeconfig.yaml")},
			wantCode: exitFail,
			wantErr:  []string{"error: reading appwrapper bench/sweep:"},
		},
		{
			name:     "explain: a kubeconfig that is not there",
			args:     []string{"explain", "sweep", "--kubeconfig", td("nope.yaml")},
			wantCode: exitFail,
			wantErr:  []string{"error: loading kubeconfig:"},
		},
		{
			name:     "explain: kubectl's connection flags",
			args:     []string{"explain", "sweep", "-n", "bench", "--kubeconfig", td("unreachable-kubeconfig.yaml"), "--as", "alice", "--request-timeout", "2s"},
			wantCode: exitFail,
			wantErr:  []string{"error: reading appwrapper bench/sweep:"},
		},
		{
			name:     "explain: an output format it does not have",
			args:     []string{"explain", "sweep", "-o", "wide"},
			wantCode: exitUsage,
			wantErr:  []string{`error: unsupported output format "wide": json or yaml`},
		},
		{name: "no command: the help, on stdout", args: nil, wantCode: exitOK, wantOut: []string{"Usage:\n  kubectl wrapup [flags]\n  kubectl wrapup [command]\n", "  lint        Check CompletionRules"}},
		{name: "help", args: []string{"help"}, wantCode: exitOK, wantOut: []string{"Available Commands:\n", "  completion  Generate the autocompletion script"}},
		{name: "help of a command, on stdout", args: []string{"help", "eval"}, wantCode: exitOK, wantOut: []string{"Usage:\n  kubectl wrapup eval (-f RULE.yaml | --rule NAME)", "Examples:\n  # A rule file against a Job", "      --as string"}},
		{name: "--help of a command", args: []string{"lint", "--help"}, wantCode: exitOK, wantOut: []string{"kubectl wrapup lint -k config/rules", "-R, --recursive"}},
		{name: "version", args: []string{"version"}, wantCode: exitOK, wantOut: []string{"kubectl-wrapup devel (wrapup devel, API wrapup.dev/v1alpha1)\n"}},
		{name: "--version", args: []string{"--version"}, wantCode: exitOK, wantOut: []string{"kubectl-wrapup devel (wrapup devel, API wrapup.dev/v1alpha1)\n"}},
		{name: "completion", args: []string{"completion", "bash"}, wantCode: exitOK, wantOut: []string{"bash completion V2 for kubectl-wrapup"}},
		{name: "help of no command", args: []string{"help", "frob"}, wantCode: exitUsage, wantErr: []string{`error: unknown help topic "frob"`}},
		{name: "stdin twice", args: []string{"eval", "-f", "-", "--trigger", "-"}, wantCode: exitUsage, wantErr: []string{"error: stdin (-) can give only one of -f, --trigger and --appwrapper"}},
		{name: "stdin twice, lint", args: []string{"lint", "-f", "-", "-f", "-"}, wantCode: exitUsage, wantErr: []string{"error: stdin (-f -) can be read once"}},
		{name: "explain NS/NAME", args: []string{"explain", "bench/sweep"}, wantCode: exitUsage, wantErr: []string{`error: "bench/sweep" is not an AppWrapper name: give the namespace with -n`}},
		{name: "an unknown command", args: []string{"delete"}, wantCode: exitUsage, wantErr: []string{`error: unknown command "delete" for "kubectl wrapup"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			streams := genericiooptions.IOStreams{In: strings.NewReader(tc.stdin), Out: &stdout, ErrOut: &stderr}
			code := run(context.Background(), tc.args, streams)
			if code != tc.wantCode {
				t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.wantCode, stdout.String(), stderr.String())
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout.String())
				}
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
				}
			}
			for _, w := range tc.notOut {
				if strings.Contains(stdout.String(), w) {
					t.Errorf("stdout has %q:\n%s", w, stdout.String())
				}
			}
		})
	}
}
