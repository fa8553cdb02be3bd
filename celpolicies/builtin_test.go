package celpolicies

import (
	"context"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	trainerv1alpha1 "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	kftov1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// builtinCase is one status sample of a built-in kind.
type builtinCase struct {
	name        string
	input       map[string]any
	want        Outcome
	wantMessage string
}

// runBuiltinCases evaluates a rule that relies on the built-ins (no success,
// failure or message of its own) against each sample.
func runBuiltinCases(t *testing.T, gk schema.GroupKind, cases []builtinCase) {
	t.Helper()
	p, err := Compile(&v1alpha1.CompletionRuleSpec{})
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := p.Evaluate(context.Background(), gk, tc.input, appWrapper())
			if err != nil {
				t.Fatalf("Evaluate: %v", err)
			}
			if got.Outcome != tc.want {
				t.Errorf("Outcome = %q, want %q", got.Outcome, tc.want)
			}
			if got.Message != tc.wantMessage {
				t.Errorf("Message = %q, want %q", got.Message, tc.wantMessage)
			}
			if !got.BuiltinSuccess || !got.BuiltinFailure {
				t.Errorf("BuiltinSuccess, BuiltinFailure = %v, %v, want true, true", got.BuiltinSuccess, got.BuiltinFailure)
			}
			// An informer keeps only what the policy reads: the same
			// evaluation on what it keeps.
			kept := runtime.DeepCopyJSON(tc.input)
			p.ObjectFields(gk).Keep(kept)
			if again, err := p.Evaluate(context.Background(), gk, kept, appWrapper()); err != nil || again != got {
				t.Errorf("on the fields kept (%s): %+v, %v; want %+v", p.ObjectFields(gk), again, err, got)
			}
		})
	}
}

func TestBuiltinJob(t *testing.T) {
	runBuiltinCases(t, gkJob, []builtinCase{
		{name: "status missing entirely", input: withoutStatus(job(t, nil)), want: OutcomeRunning},
		{name: "status with no conditions", input: job(t, nil), want: OutcomeRunning},
		{name: "running", input: job(t, jobRunning), want: OutcomeRunning},
		{
			name: "suspended",
			input: job(t, func(j *batchv1.Job) {
				j.Spec.Suspend = ptr.To(true)
				j.Status.Conditions = []batchv1.JobCondition{jobCondition(batchv1.JobSuspended, "JobSuspended", "Job suspended")}
			}),
			want: OutcomeRunning,
		},
		{
			name: "resumed",
			input: job(t, func(j *batchv1.Job) {
				jobRunning(j)
				c := jobCondition(batchv1.JobSuspended, "JobResumed", "Job resumed")
				c.Status = corev1.ConditionFalse
				j.Status.Conditions = []batchv1.JobCondition{c}
			}),
			want: OutcomeRunning,
		},
		{
			name: "retrying after a failed pod",
			input: job(t, func(j *batchv1.Job) {
				jobRunning(j)
				j.Status.Failed = 2
			}),
			want: OutcomeRunning,
		},
		{
			name: "success criteria met, pods still terminating",
			input: job(t, func(j *batchv1.Job) {
				jobRunning(j)
				j.Status.Terminating = ptr.To[int32](1)
				j.Status.Conditions = []batchv1.JobCondition{
					jobCondition(batchv1.JobSuccessCriteriaMet, batchv1.JobReasonCompletionsReached, jobCompletedMessage),
				}
			}),
			want: OutcomeRunning,
		},
		{
			name:        "succeeded",
			input:       job(t, jobSucceeded),
			want:        OutcomeSucceeded,
			wantMessage: "CompletionsReached: " + jobCompletedMessage,
		},
		{
			name: "failure target, pods still terminating",
			input: job(t, func(j *batchv1.Job) {
				jobRunning(j)
				j.Status.Conditions = []batchv1.JobCondition{
					jobCondition(batchv1.JobFailureTarget, batchv1.JobReasonBackoffLimitExceeded, jobBackoffMessage),
				}
			}),
			want: OutcomeRunning,
		},
		{
			name:        "failed, backoff limit",
			input:       job(t, jobFailed),
			want:        OutcomeFailed,
			wantMessage: "BackoffLimitExceeded: " + jobBackoffMessage,
		},
		{
			name: "failed, deadline",
			input: job(t, func(j *batchv1.Job) {
				jobRunning(j)
				j.Status.Conditions = []batchv1.JobCondition{
					jobCondition(batchv1.JobFailureTarget, batchv1.JobReasonDeadlineExceeded, jobDeadlineMessage),
					jobCondition(batchv1.JobFailed, batchv1.JobReasonDeadlineExceeded, jobDeadlineMessage),
				}
			}),
			want:        OutcomeFailed,
			wantMessage: "DeadlineExceeded: " + jobDeadlineMessage,
		},
	})
}

func TestBuiltinJobSet(t *testing.T) {
	runBuiltinCases(t, gkJobSet, []builtinCase{
		{name: "status missing entirely", input: withoutStatus(jobSet(t, nil)), want: OutcomeRunning},
		{name: "status with no conditions", input: jobSet(t, nil), want: OutcomeRunning},
		{name: "running", input: jobSet(t, jobSetRunning), want: OutcomeRunning},
		{
			name: "running, in-order startup done",
			input: jobSet(t, func(js *jobsetv1alpha2.JobSet) {
				jobSetRunning(js)
				js.Status.Conditions = []metav1.Condition{jobSetCondition(jobsetv1alpha2.JobSetStartupPolicyCompleted, metav1.ConditionTrue,
					"InOrderStartupPolicyCompleted", "in order startup policy has completed")}
			}),
			want: OutcomeRunning,
		},
		{
			name: "suspended",
			input: jobSet(t, func(js *jobsetv1alpha2.JobSet) {
				js.Spec.Suspend = ptr.To(true)
				js.Status.Conditions = []metav1.Condition{jobSetCondition(jobsetv1alpha2.JobSetSuspended, metav1.ConditionTrue,
					"SuspendedJobs", "jobset is suspended")}
			}),
			want: OutcomeRunning,
		},
		{
			name: "restarting",
			input: jobSet(t, func(js *jobsetv1alpha2.JobSet) {
				jobSetRunning(js)
				js.Status.Restarts = 1
				js.Status.RestartsCountTowardsMax = 1
			}),
			want: OutcomeRunning,
		},
		{
			name: "completed",
			input: jobSet(t, func(js *jobsetv1alpha2.JobSet) {
				js.Status.TerminalState = string(jobsetv1alpha2.JobSetCompleted)
				js.Status.ReplicatedJobsStatus = []jobsetv1alpha2.ReplicatedJobStatus{{Name: "workers", Succeeded: 2}}
				js.Status.Conditions = []metav1.Condition{jobSetCondition(jobsetv1alpha2.JobSetCompleted, metav1.ConditionTrue,
					jobSetCompletedReason, jobSetCompletedMessage)}
			}),
			want:        OutcomeSucceeded,
			wantMessage: jobSetCompletedReason + ": " + jobSetCompletedMessage,
		},
		{
			name: "failed",
			input: jobSet(t, func(js *jobsetv1alpha2.JobSet) {
				js.Status.TerminalState = string(jobsetv1alpha2.JobSetFailed)
				js.Status.ReplicatedJobsStatus = []jobsetv1alpha2.ReplicatedJobStatus{{Name: "workers", Failed: 1, Active: 1}}
				js.Status.Conditions = []metav1.Condition{jobSetCondition(jobsetv1alpha2.JobSetFailed, metav1.ConditionTrue,
					jobSetFailedReason, jobSetFailedMessage)}
			}),
			want:        OutcomeFailed,
			wantMessage: jobSetFailedReason + ": " + jobSetFailedMessage,
		},
	})
}

// kubeflowCases are shared by PyTorchJob and MPIJob: the training operator
// writes the same conditions for both.
func kubeflowCases(t *testing.T, kind string, build func(testing.TB, kftov1.JobStatus) map[string]any) []builtinCase {
	return []builtinCase{
		{name: "status missing entirely", input: withoutStatus(build(t, kftov1.JobStatus{})), want: OutcomeRunning},
		{name: "status with no conditions", input: build(t, kftov1.JobStatus{}), want: OutcomeRunning},
		{name: "created", input: build(t, kubeflowStatus(kind, kfCreated)), want: OutcomeRunning},
		{name: "running", input: build(t, kubeflowStatus(kind, kfCreated, kfRunning)), want: OutcomeRunning},
		{name: "restarting", input: build(t, kubeflowStatus(kind, kfCreated, kfRunning, kfRestarting)), want: OutcomeRunning},
		{name: "suspended", input: build(t, kubeflowStatus(kind, kfCreated, kfRunning, kfSuspended, kfNotRunning)), want: OutcomeRunning},
		{
			name:        "succeeded",
			input:       build(t, kubeflowStatus(kind, kfCreated, kfRunning, kfSucceeded)),
			want:        OutcomeSucceeded,
			wantMessage: kind + "Succeeded: " + kind + " team-a/benchmark successfully completed.",
		},
		{
			name:        "failed after restarting",
			input:       build(t, kubeflowStatus(kind, kfCreated, kfRunning, kfRestarting, kfFailed)),
			want:        OutcomeFailed,
			wantMessage: kind + "Failed: " + kind + " benchmark is failed because 1 Worker replica(s) failed.",
		},
	}
}

func TestBuiltinPyTorchJob(t *testing.T) {
	runBuiltinCases(t, gkPyTorchJob, kubeflowCases(t, kftov1.PyTorchJobKind, pyTorchJob))
}

func TestBuiltinTrainingOperatorV1Kinds(t *testing.T) {
	for _, k := range []struct {
		gk    schema.GroupKind
		build func(testing.TB, kftov1.JobStatus) map[string]any
	}{{gkTFJob, tfJob}, {gkXGBoostJob, xgboostJob}, {gkJAXJob, jaxJob}, {gkPaddleJob, paddleJob}} {
		t.Run(k.gk.Kind, func(t *testing.T) { runBuiltinCases(t, k.gk, kubeflowCases(t, k.gk.Kind, k.build)) })
	}
}

func TestBuiltinMPIJob(t *testing.T) {
	runBuiltinCases(t, gkMPIJob, kubeflowCases(t, kftov1.MPIJobKind, mpiJob))
}

func TestBuiltinTrainJob(t *testing.T) {
	runBuiltinCases(t, gkTrainJob, []builtinCase{
		{name: "status missing entirely", input: withoutStatus(trainJob(t)), want: OutcomeRunning},
		{name: "status with no conditions", input: trainJob(t), want: OutcomeRunning},
		{
			name:  "suspended",
			input: trainJob(t, trainJobCondition(trainerv1alpha1.TrainJobSuspended, metav1.ConditionTrue, trainerv1alpha1.TrainJobSuspendedReason, trainJobSuspendedMessage)),
			want:  OutcomeRunning,
		},
		{
			name:  "resumed",
			input: trainJob(t, trainJobCondition(trainerv1alpha1.TrainJobSuspended, metav1.ConditionFalse, trainerv1alpha1.TrainJobResumedReason, trainJobResumedMessage)),
			want:  OutcomeRunning,
		},
		{
			name:        "complete",
			input:       trainJob(t, trainJobCondition(trainerv1alpha1.TrainJobComplete, metav1.ConditionTrue, jobSetCompletedReason, jobSetCompletedMessage)),
			want:        OutcomeSucceeded,
			wantMessage: jobSetCompletedReason + ": " + jobSetCompletedMessage,
		},
		{
			name:        "failed",
			input:       trainJob(t, trainJobCondition(trainerv1alpha1.TrainJobFailed, metav1.ConditionTrue, jobSetFailedReason, jobSetFailedMessage)),
			want:        OutcomeFailed,
			wantMessage: jobSetFailedReason + ": " + jobSetFailedMessage,
		},
		{
			name:        "failed, deadline",
			input:       trainJob(t, trainJobCondition(trainerv1alpha1.TrainJobFailed, metav1.ConditionTrue, trainerv1alpha1.TrainJobDeadlineExceededReason, trainJobDeadlineMessage)),
			want:        OutcomeFailed,
			wantMessage: trainerv1alpha1.TrainJobDeadlineExceededReason + ": " + trainJobDeadlineMessage,
		},
	})
}

func TestBuiltinRayJob(t *testing.T) {
	const (
		finished = "Job finished successfully."
		failed   = "Job entrypoint command failed with exit code 1"
	)
	runBuiltinCases(t, gkRayJob, []builtinCase{
		{name: "status missing entirely", input: withoutStatus(rayJob(t, "", "", "", "")), want: OutcomeRunning},
		{name: "new", input: rayJob(t, rayv1.JobDeploymentStatusNew, rayv1.JobStatusNew, "", ""), want: OutcomeRunning},
		{name: "initializing", input: rayJob(t, rayv1.JobDeploymentStatusInitializing, rayv1.JobStatusNew, "", ""), want: OutcomeRunning},
		{name: "pending", input: rayJob(t, rayv1.JobDeploymentStatusRunning, rayv1.JobStatusPending, "", ""), want: OutcomeRunning},
		{name: "running", input: rayJob(t, rayv1.JobDeploymentStatusRunning, rayv1.JobStatusRunning, "", ""), want: OutcomeRunning},
		{name: "suspended", input: rayJob(t, rayv1.JobDeploymentStatusSuspended, rayv1.JobStatusNew, "", ""), want: OutcomeRunning},
		{name: "retrying after a failure", input: rayJob(t, rayv1.JobDeploymentStatusRetrying, rayv1.JobStatusFailed, rayv1.AppFailed, failed), want: OutcomeRunning},
		{
			name:  "job succeeded, deployment not yet complete",
			input: rayJob(t, rayv1.JobDeploymentStatusRunning, rayv1.JobStatusSucceeded, "", finished),
			want:  OutcomeRunning,
		},
		{
			name:        "complete, succeeded",
			input:       rayJob(t, rayv1.JobDeploymentStatusComplete, rayv1.JobStatusSucceeded, "", finished),
			want:        OutcomeSucceeded,
			wantMessage: finished,
		},
		{
			name:        "failed, app failed",
			input:       rayJob(t, rayv1.JobDeploymentStatusFailed, rayv1.JobStatusFailed, rayv1.AppFailed, failed),
			want:        OutcomeFailed,
			wantMessage: "AppFailed: " + failed,
		},
		{
			name:        "failed, submission failed",
			input:       rayJob(t, rayv1.JobDeploymentStatusFailed, rayv1.JobStatusNew, rayv1.SubmissionFailed, "submitter Job failed"),
			want:        OutcomeFailed,
			wantMessage: "SubmissionFailed: submitter Job failed",
		},
		{
			name:        "complete, stopped",
			input:       rayJob(t, rayv1.JobDeploymentStatusComplete, rayv1.JobStatusStopped, "", "Job was intentionally stopped."),
			want:        OutcomeFailed,
			wantMessage: "Job was intentionally stopped.",
		},
		{
			name:        "complete, failed (KubeRay before 1.3)",
			input:       rayJob(t, rayv1.JobDeploymentStatusComplete, rayv1.JobStatusFailed, "", failed),
			want:        OutcomeFailed,
			wantMessage: failed,
		},
		{
			// Not a final state for KubeRay (IsJobDeploymentTerminal says
			// no), so not for the built-in either.
			name:  "validation failed",
			input: rayJob(t, rayv1.JobDeploymentStatusValidationFailed, rayv1.JobStatusNew, rayv1.ValidationFailed, "invalid spec"),
			want:  OutcomeRunning,
		},
	})
}

func TestBuiltinPod(t *testing.T) {
	runBuiltinCases(t, gkPod, []builtinCase{
		{name: "status missing entirely", input: withoutStatus(pod(t, "", "", "")), want: OutcomeRunning},
		{name: "pending", input: pod(t, corev1.PodPending, "", ""), want: OutcomeRunning},
		{name: "running", input: pod(t, corev1.PodRunning, "", ""), want: OutcomeRunning},
		{name: "unknown", input: pod(t, corev1.PodUnknown, "NodeLost", "node is unreachable"), want: OutcomeRunning},
		{name: "succeeded", input: pod(t, corev1.PodSucceeded, "", ""), want: OutcomeSucceeded},
		{
			name:        "failed, evicted",
			input:       pod(t, corev1.PodFailed, "Evicted", "The node was low on resource: memory."),
			want:        OutcomeFailed,
			wantMessage: "Evicted: The node was low on resource: memory.",
		},
	})
}

func TestBuiltinWorkflow(t *testing.T) {
	runBuiltinCases(t, gkWorkflow, []builtinCase{
		{name: "status missing entirely", input: workflow(nil), want: OutcomeRunning},
		{name: "status with no phase", input: workflow(map[string]any{}), want: OutcomeRunning},
		{name: "pending", input: workflow(map[string]any{"phase": "Pending"}), want: OutcomeRunning},
		{
			name:  "running",
			input: workflow(map[string]any{"phase": "Running", "startedAt": "2026-03-01T10:00:00Z", "progress": "0/1"}),
			want:  OutcomeRunning,
		},
		{
			name: "succeeded",
			input: workflow(map[string]any{
				"phase": "Succeeded", "startedAt": "2026-03-01T10:00:00Z", "finishedAt": "2026-03-01T10:42:00Z", "progress": "1/1",
				"conditions": []any{map[string]any{"type": "Completed", "status": "True"}},
			}),
			want: OutcomeSucceeded,
		},
		{
			name:        "failed",
			input:       workflow(map[string]any{"phase": "Failed", "message": "child 'benchmark-1' failed", "progress": "0/1"}),
			want:        OutcomeFailed,
			wantMessage: "child 'benchmark-1' failed",
		},
		{
			name:        "error",
			input:       workflow(map[string]any{"phase": "Error", "message": "pods \"benchmark-1\" is forbidden"}),
			want:        OutcomeFailed,
			wantMessage: "pods \"benchmark-1\" is forbidden",
		},
	})
}

// TestBuiltinSamplesAreRealistic guards the samples: the converter writes
// an empty status for a zero status struct, so "status missing entirely"
// must remove it, and "no conditions" must really have none.
func TestBuiltinSamplesAreRealistic(t *testing.T) {
	j := job(t, nil)
	if _, ok := j["status"]; !ok {
		t.Fatalf("a Job with a zero status converts without status; the no-conditions cases would not test what they say")
	}
	if _, ok := withoutStatus(job(t, nil))["status"]; ok {
		t.Fatalf("withoutStatus left a status")
	}
	conds, _ := j["status"].(map[string]any)["conditions"]
	if conds != nil {
		t.Fatalf("a Job with a zero status has conditions %v", conds)
	}
}

// TestBuiltinKindsMatchCRDValidation keeps the built-in kinds and the
// x-kubernetes-validations rule of CompletionRuleSpec in step: the rule lets
// a CompletionRule omit spec.success only for the kinds listed there.
func TestBuiltinKindsMatchCRDValidation(t *testing.T) {
	src, err := os.ReadFile("../api/v1alpha1/completionrule_types.go")
	if err != nil {
		t.Fatalf("reading the API types: %v", err)
	}
	var line string
	for _, l := range strings.Split(string(src), "\n") {
		if strings.Contains(l, "+kubebuilder:validation:XValidation") && strings.Contains(l, "no built-in expression") {
			line = l
			break
		}
	}
	if line == "" {
		t.Fatalf("no XValidation rule about built-in expressions in completionrule_types.go")
	}
	list := regexp.MustCompile(`\bin \[([^\]]*)\]`).FindStringSubmatch(line)
	if list == nil {
		t.Fatalf("no `in [...]` list in %q", line)
	}
	var fromCRD []string
	for _, m := range regexp.MustCompile(`'([^']*)'`).FindAllStringSubmatch(list[1], -1) {
		fromCRD = append(fromCRD, m[1])
	}
	var fromCode []string
	for _, gk := range BuiltinKinds() {
		fromCode = append(fromCode, kindKey(gk))
	}
	slices.Sort(fromCRD)
	slices.Sort(fromCode)
	if !slices.Equal(fromCRD, fromCode) {
		t.Errorf("built-in kinds differ:\n  CRD validation: %v\n  BuiltinKinds:   %v", fromCRD, fromCode)
	}
}

func TestBuiltinKindsSorted(t *testing.T) {
	kinds := BuiltinKinds()
	if len(kinds) != len(builtinSources) {
		t.Fatalf("BuiltinKinds has %d kinds, want %d", len(kinds), len(builtinSources))
	}
	if !slices.IsSortedFunc(kinds, func(a, b schema.GroupKind) int {
		if c := strings.Compare(a.Group, b.Group); c != 0 {
			return c
		}
		return strings.Compare(a.Kind, b.Kind)
	}) {
		t.Errorf("BuiltinKinds not sorted: %v", kinds)
	}
}

func TestBuiltinFor(t *testing.T) {
	tests := []struct {
		name   string
		input  schema.GroupKind
		wantOK bool
	}{
		{name: "Job", input: gkJob, wantOK: true},
		{name: "core Pod", input: gkPod, wantOK: true},
		{name: "Pod in another group", input: schema.GroupKind{Group: "example.com", Kind: "Pod"}, wantOK: false},
		{name: "Deployment never finishes", input: schema.GroupKind{Group: "apps", Kind: "Deployment"}, wantOK: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			success, failure, ok := BuiltinFor(tc.input)
			if ok != tc.wantOK {
				t.Fatalf("ok = %v, want %v", ok, tc.wantOK)
			}
			if ok && (success == "" || failure == "") {
				t.Errorf("success %q, failure %q: want both", success, failure)
			}
			if !ok && (success != "" || failure != "") {
				t.Errorf("success %q, failure %q for a kind without built-ins", success, failure)
			}
		})
	}
}

// TestBuiltinOutputTypes checks that the built-ins compile in the rule
// environment too, to bool: they are documented as what a rule may copy.
func TestBuiltinOutputTypes(t *testing.T) {
	base, err := getBaseEnvironment()
	if err != nil {
		t.Fatal(err)
	}
	env := celEnv(base.envSet)
	for gk, src := range builtinSources {
		for _, e := range []struct {
			expr string
			want *cel.Type
		}{
			{src.success, cel.BoolType}, {src.failure, cel.BoolType},
		} {
			ast, iss := env.Compile(e.expr)
			if iss.Err() != nil {
				t.Errorf("%s: %q: %v", kindKey(gk), e.expr, iss.Err())
				continue
			}
			if !ast.OutputType().IsExactType(e.want) {
				t.Errorf("%s: %q has type %s, want %s", kindKey(gk), e.expr, ast.OutputType(), e.want)
			}
		}
	}
}
