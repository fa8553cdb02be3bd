package celpolicies

// One sample per state that each built-in kind's controller writes, and the
// table test of the built-in expressions over them. Each kind's samples
// cite the upstream file and function that write the shape; the states
// themselves are listed in states.go (KindStates), and
// TestBuiltinSamplesCoverKindStates keeps the two in step.

import (
	"context"
	"slices"
	"strings"
	"testing"

	mpiv2beta1 "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	sparkv1beta2 "github.com/kubeflow/spark-operator/v2/api/v1beta2"
	trainerv1alpha1 "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	kftov1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	vcbatch "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	vcbus "volcano.sh/apis/pkg/apis/bus/v1alpha1"

	"github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// builtinCase is one status sample of a built-in kind.
type builtinCase struct {
	name        string
	input       map[string]any
	want        Outcome
	wantMessage string
}

// builtinSamples are the samples of every built-in kind.
func builtinSamples(t testing.TB) map[schema.GroupKind][]builtinCase {
	return map[schema.GroupKind][]builtinCase{
		gkJob:         jobCases(t),
		gkJobSet:      jobSetCases(t),
		gkPyTorchJob:  kubeflowCases(t, kftov1.PyTorchJobKind, pyTorchJob),
		gkTFJob:       kubeflowCases(t, kftov1.TFJobKind, tfJob),
		gkXGBoostJob:  kubeflowCases(t, kftov1.XGBoostJobKind, xgboostJob),
		gkJAXJob:      kubeflowCases(t, kftov1.JAXJobKind, jaxJob),
		gkPaddleJob:   kubeflowCases(t, kftov1.PaddleJobKind, paddleJob),
		gkMPIJob:      mpiJobCases(t),
		gkTrainJob:    trainJobCases(t),
		gkRayJob:      rayJobCases(t),
		gkPod:         podCases(t),
		gkWorkflow:    workflowCases(t),
		gkVolcanoJob:  volcanoJobCases(t),
		gkSparkApp:    sparkApplicationCases(t),
		gkPipelineRun: pipelineRunCases(t),
		gkTaskRun:     taskRunCases(t),
	}
}

// TestBuiltinSamples evaluates a rule that relies on the built-ins (no
// success, failure or message of its own) against each sample of each
// built-in kind.
func TestBuiltinSamples(t *testing.T) {
	samples := builtinSamples(t)
	for _, gk := range BuiltinKinds() {
		t.Run(kindKey(gk), func(t *testing.T) {
			cases, ok := samples[gk]
			if !ok {
				t.Fatalf("no samples of %s", kindKey(gk))
			}
			runBuiltinCases(t, gk, cases)
		})
	}
	if len(samples) != len(BuiltinKinds()) {
		t.Errorf("samples of %d kinds, %d built-in kinds", len(samples), len(BuiltinKinds()))
	}
}

// runBuiltinCases evaluates a rule that relies on the built-ins against
// each sample.
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

// TestBuiltinSamplesCoverKindStates: every condition type and state value
// that KindStates says a kind's controller writes is in some sample of the
// kind, and no sample holds one that KindStates does not list (unless the
// kind lets other writers add condition types). A sample whose state is
// transient is never an outcome.
func TestBuiltinSamplesCoverKindStates(t *testing.T) {
	for gk, cases := range builtinSamples(t) {
		ks, ok := StatesOf(gk)
		if !ok {
			t.Errorf("%s: no KindStates", kindKey(gk))
			continue
		}
		seenTypes := map[string]bool{}
		seen := map[string]map[string]bool{}
		fields := map[string][]string{}
		if ks.StateField != "" {
			fields[ks.StateField] = ks.States
		}
		for f, values := range ks.MoreStates {
			fields[f] = values
		}
		for _, tc := range cases {
			for _, c := range sampleConditions(tc.input) {
				seenTypes[c] = true
				if !slices.Contains(ks.ConditionTypes, c) && !ks.OtherConditions {
					t.Errorf("%s %q: condition type %q is not in KindStates", kindKey(gk), tc.name, c)
				}
			}
			for f, values := range fields {
				v, _, _ := unstructured.NestedString(tc.input, strings.Split(f, ".")...)
				if seen[f] == nil {
					seen[f] = map[string]bool{}
				}
				seen[f][v] = true
				if !slices.Contains(values, v) && (v != "" || tc.input["status"] != nil) {
					t.Errorf("%s %q: %s %q is not in KindStates", kindKey(gk), tc.name, f, v)
				}
				if f == ks.StateField && tc.want != OutcomeRunning && slices.Contains(ks.Transient, v) {
					t.Errorf("%s %q: %s %q is transient, but the sample wants %s", kindKey(gk), tc.name, f, v, tc.want)
				}
			}
		}
		for _, c := range ks.ConditionTypes {
			if !seenTypes[c] {
				t.Errorf("%s: no sample has a condition of type %q", kindKey(gk), c)
			}
		}
		for f, values := range fields {
			for _, v := range values {
				if !seen[f][v] {
					t.Errorf("%s: no sample has %s %q", kindKey(gk), f, v)
				}
			}
		}
	}
}

// sampleConditions are the types of the conditions in a sample's status.
func sampleConditions(object map[string]any) []string {
	conds, _, _ := unstructured.NestedSlice(object, "status", "conditions")
	var out []string
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if typ, ok := m["type"].(string); ok {
			out = append(out, typ)
		}
	}
	return out
}

func jobCases(t testing.TB) []builtinCase {
	return []builtinCase{
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
		{
			// The TTL-after-finished controller deletes a finished Job
			// with Foreground propagation (pkg/controller/ttlafterfinished
			// processTTL): the Job is seen with a deletionTimestamp. The
			// built-in reads the status; what a deletion means is the
			// decision's.
			name: "succeeded, deleted by its TTL",
			input: job(t, func(j *batchv1.Job) {
				jobSucceeded(j)
				j.DeletionTimestamp = &sampleEnd
				j.Finalizers = []string{metav1.FinalizerDeleteDependents}
			}),
			want:        OutcomeSucceeded,
			wantMessage: "CompletionsReached: " + jobCompletedMessage,
		},
	}
}

func jobSetCases(t testing.TB) []builtinCase {
	return []builtinCase{
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
		{
			// startup_policy.go: InOrder startup sets StartupPolicyInProgress
			// until every replicated Job is ready.
			name: "running, in-order startup under way",
			input: jobSet(t, func(js *jobsetv1alpha2.JobSet) {
				jobSetRunning(js)
				js.Status.Conditions = []metav1.Condition{jobSetCondition(jobsetv1alpha2.JobSetStartupPolicyInProgress, metav1.ConditionTrue,
					"InOrderStartupPolicyInProgress", "in order startup policy is in progress")}
			}),
			want: OutcomeRunning,
		},
	}
}

// kubeflowCases are shared by the training operator's v1 kinds, for which it
// writes the same conditions (pkg/controller.v1/common/job.go ReconcileJobs,
// each kind's UpdateJobStatus).
func kubeflowCases(t testing.TB, kind string, build func(testing.TB, kftov1.JobStatus) map[string]any) []builtinCase {
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

func trainJobCases(t testing.TB) []builtinCase {
	return []builtinCase{
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
	}
}

func rayJobCases(t testing.TB) []builtinCase {
	const (
		finished = "Job finished successfully."
		failed   = "Job entrypoint command failed with exit code 1"
	)
	return []builtinCase{
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
		{name: "suspending", input: rayJob(t, rayv1.JobDeploymentStatusSuspending, rayv1.JobStatusRunning, "", ""), want: OutcomeRunning},
		{
			// spec.submissionMode InteractiveMode: waiting for the user to
			// submit the job.
			name:  "waiting for an interactive submission",
			input: rayJob(t, rayv1.JobDeploymentStatusWaiting, rayv1.JobStatusNew, "", ""),
			want:  OutcomeRunning,
		},
		{
			name:        "failed, deadline exceeded (never retried)",
			input:       rayJob(t, rayv1.JobDeploymentStatusFailed, rayv1.JobStatusRunning, rayv1.DeadlineExceeded, "The RayJob has passed the activeDeadlineSeconds."),
			want:        OutcomeFailed,
			wantMessage: "DeadlineExceeded: The RayJob has passed the activeDeadlineSeconds.",
		},
	}
}

func podCases(t testing.TB) []builtinCase {
	return []builtinCase{
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
		{
			name:  "running, ready",
			input: podWithConditions(t, corev1.PodRunning, readyPodConditions()...),
			want:  OutcomeRunning,
		},
		{
			name: "running, resize pending",
			input: podWithConditions(t, corev1.PodRunning, append(readyPodConditions(),
				podCondition(corev1.PodResizePending, corev1.ConditionTrue, "Deferred", "Node didn't have enough capacity"))...),
			want: OutcomeRunning,
		},
		{
			name: "running, resize in progress",
			input: podWithConditions(t, corev1.PodRunning, append(readyPodConditions(),
				podCondition(corev1.PodResizeInProgress, corev1.ConditionTrue, "", ""))...),
			want: OutcomeRunning,
		},
		{
			name: "running, all containers restarting",
			input: podWithConditions(t, corev1.PodRunning, append(readyPodConditions(),
				podCondition(corev1.AllContainersRestarting, corev1.ConditionTrue, "", ""))...),
			want: OutcomeRunning,
		},
		{
			// The kubelet's getPhase (pkg/kubelet/kubelet_pods.go): a Pod
			// being deleted whose containers exit 0 on SIGTERM is
			// Succeeded. The built-in reads the phase; the decision never
			// takes a trigger being deleted as a new completion.
			name: "being deleted, containers exited 0 on SIGTERM",
			input: func() map[string]any {
				m := podWithConditions(t, corev1.PodSucceeded,
					podCondition(corev1.DisruptionTarget, corev1.ConditionTrue, "PreemptionByScheduler", "team-b/llm: preempting to accommodate a higher priority pod"))
				_ = unstructured.SetNestedField(m, "2026-03-01T10:42:00Z", "metadata", "deletionTimestamp")
				return m
			}(),
			want: OutcomeSucceeded,
		},
	}
}

func workflowCases(t testing.TB) []builtinCase {
	return []builtinCase{
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
		{
			name: "running, a pod running",
			input: workflow(map[string]any{
				"phase": "Running", "progress": "0/1",
				"conditions": []any{map[string]any{"type": "PodRunning", "status": "True"}},
			}),
			want: OutcomeRunning,
		},
		{
			name: "running, a spec warning",
			input: workflow(map[string]any{
				"phase": "Running", "progress": "0/1",
				"conditions": []any{map[string]any{"type": "SpecWarning", "status": "True", "message": "spec.arguments.parameters[0] is unused"}},
			}),
			want: OutcomeRunning,
		},
		{
			name: "error, spec error",
			input: workflow(map[string]any{
				"phase": "Error", "message": "invalid spec: templates.main.steps must be a list",
				"conditions": []any{map[string]any{"type": "SpecError", "status": "True", "message": "invalid spec"}},
			}),
			want:        OutcomeFailed,
			wantMessage: "invalid spec: templates.main.steps must be a list",
		},
		{
			name: "succeeded, a metrics error and an artifact GC error",
			input: workflow(map[string]any{
				"phase": "Succeeded", "progress": "1/1",
				"conditions": []any{
					map[string]any{"type": "Completed", "status": "True"},
					map[string]any{"type": "MetricsError", "status": "True", "message": "failed to compute metric"},
					map[string]any{"type": "ArtifactGCError", "status": "True", "message": "benchmark-1/out: access denied"},
				},
			}),
			want: OutcomeSucceeded,
		},
	}
}

// --- mpi-operator v2beta1 MPIJob ---

// mpiJobCondition is a condition as mpi-operator v0.8.0 writes it
// (pkg/controller/mpi_job_controller_status.go newCondition).
func mpiJobCondition(typ mpiv2beta1.JobConditionType, status corev1.ConditionStatus, reason, message string) mpiv2beta1.JobCondition {
	return mpiv2beta1.JobCondition{
		Type:               typ,
		Status:             status,
		LastUpdateTime:     sampleEnd,
		LastTransitionTime: sampleEnd,
		Reason:             reason,
		Message:            message,
	}
}

// The reasons and messages of mpi-operator v0.8.0
// (pkg/controller/mpi_job_controller_status.go, mpi_job_controller.go).
const (
	mpiCreatedMessage   = "MPIJob team-a/benchmark is created."
	mpiRunningMessage   = "MPIJob team-a/benchmark is running."
	mpiSucceededMessage = "MPIJob team-a/benchmark successfully completed."
	mpiEvictedMessage   = "1/2 workers are evicted"
	mpiBackoffMessage   = "Job has reached the specified backoff limit: "
)

var (
	mpiCreated    = mpiJobCondition(mpiv2beta1.JobCreated, corev1.ConditionTrue, "MPIJobCreated", mpiCreatedMessage)
	mpiRunning    = mpiJobCondition(mpiv2beta1.JobRunning, corev1.ConditionTrue, "MPIJobRunning", mpiRunningMessage)
	mpiNotRunning = mpiJobCondition(mpiv2beta1.JobRunning, corev1.ConditionFalse, "MPIJobRunning", mpiRunningMessage)
	mpiEvicted    = mpiJobCondition(mpiv2beta1.JobFailed, corev1.ConditionTrue, "MPIJobEvicted", mpiEvictedMessage)
	mpiSucceeded  = mpiJobCondition(mpiv2beta1.JobSucceeded, corev1.ConditionTrue, "MPIJobSucceeded", mpiSucceededMessage)
)

// mpiJob is an MPIJob (kubeflow.org/v2beta1) with the given status.
func mpiJob(t testing.TB, status mpiv2beta1.JobStatus) map[string]any {
	return toUnstructured(t, &mpiv2beta1.MPIJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: mpiv2beta1.SchemeGroupVersion.String(), Kind: mpiv2beta1.Kind},
		ObjectMeta: objectMeta("benchmark"),
		Spec: mpiv2beta1.MPIJobSpec{
			SlotsPerWorker: ptr.To[int32](1),
			MPIReplicaSpecs: map[mpiv2beta1.MPIReplicaType]*mpiv2beta1.ReplicaSpec{
				mpiv2beta1.MPIReplicaTypeLauncher: {Replicas: ptr.To[int32](1), Template: podTemplate()},
				mpiv2beta1.MPIReplicaTypeWorker:   {Replicas: ptr.To[int32](2), Template: podTemplate()},
			},
		},
		Status: status,
	})
}

func mpiStatus(completed bool, conditions ...mpiv2beta1.JobCondition) mpiv2beta1.JobStatus {
	st := mpiv2beta1.JobStatus{Conditions: conditions, StartTime: &sampleStart}
	if completed {
		st.CompletionTime = &sampleEnd
	}
	return st
}

// mpiJobCases follow mpi-operator v0.8.0 pkg/controller/mpi_job_controller.go:
// syncHandler adds Created; updateMPIJobStatus sets Suspended and Running,
// Succeeded with completionTime once the launcher Job succeeds,
// Failed=True/MPIJobEvicted without completionTime when a worker is
// evicted (filterOutCondition sets Running and the other terminal
// condition False), and updateMPIJobFailedStatus sets Failed with
// completionTime once the launcher Job has failed. It never sets
// Restarting.
func mpiJobCases(t testing.TB) []builtinCase {
	return []builtinCase{
		{name: "status missing entirely", input: withoutStatus(mpiJob(t, mpiv2beta1.JobStatus{})), want: OutcomeRunning},
		{name: "created", input: mpiJob(t, mpiStatus(false, mpiCreated)), want: OutcomeRunning},
		{name: "running", input: mpiJob(t, mpiStatus(false, mpiCreated, mpiRunning)), want: OutcomeRunning},
		{
			name: "suspended",
			input: mpiJob(t, mpiStatus(false, mpiCreated,
				mpiJobCondition(mpiv2beta1.JobSuspended, corev1.ConditionTrue, "MPIJobSuspended", "MPIJob suspended"),
				mpiJobCondition(mpiv2beta1.JobRunning, corev1.ConditionFalse, "MPIJobSuspended", "MPIJob team-a/benchmark is suspended."))),
			want: OutcomeRunning,
		},
		{
			name: "resumed",
			input: mpiJob(t, mpiStatus(false, mpiCreated,
				mpiJobCondition(mpiv2beta1.JobSuspended, corev1.ConditionFalse, "MPIJobResumed", "MPIJob resumed"), mpiRunning)),
			want: OutcomeRunning,
		},
		{
			// The launcher goes on; the MPIJob may still succeed.
			name:  "a worker evicted, launcher running",
			input: mpiJob(t, mpiStatus(false, mpiCreated, mpiNotRunning, mpiEvicted)),
			want:  OutcomeRunning,
		},
		{
			name: "a worker evicted, then the launcher succeeded",
			input: mpiJob(t, mpiStatus(true, mpiCreated, mpiNotRunning,
				mpiJobCondition(mpiv2beta1.JobFailed, corev1.ConditionFalse, "MPIJobEvicted", mpiEvictedMessage), mpiSucceeded)),
			want:        OutcomeSucceeded,
			wantMessage: "MPIJobSucceeded: " + mpiSucceededMessage,
		},
		{
			// The eviction check runs after the success in the same pass
			// while the evicted pod remains: both True.
			name:        "launcher succeeded, an evicted worker remains",
			input:       mpiJob(t, mpiStatus(true, mpiCreated, mpiNotRunning, mpiSucceeded, mpiEvicted)),
			want:        OutcomeSucceeded,
			wantMessage: "MPIJobSucceeded: " + mpiSucceededMessage,
		},
		{
			name:        "succeeded",
			input:       mpiJob(t, mpiStatus(true, mpiCreated, mpiNotRunning, mpiSucceeded)),
			want:        OutcomeSucceeded,
			wantMessage: "MPIJobSucceeded: " + mpiSucceededMessage,
		},
		{
			name: "launcher failed, backoff limit",
			input: mpiJob(t, mpiStatus(true, mpiCreated, mpiNotRunning,
				mpiJobCondition(mpiv2beta1.JobFailed, corev1.ConditionTrue, "BackoffLimitExceeded/Error", mpiBackoffMessage))),
			want:        OutcomeFailed,
			wantMessage: "BackoffLimitExceeded/Error: " + mpiBackoffMessage,
		},
		{
			// The eviction check overwrites the reason after
			// updateMPIJobFailedStatus: completionTime says it is final.
			name:        "launcher failed, an evicted worker remains",
			input:       mpiJob(t, mpiStatus(true, mpiCreated, mpiNotRunning, mpiEvicted)),
			want:        OutcomeFailed,
			wantMessage: "MPIJobEvicted: " + mpiEvictedMessage,
		},
	}
}

// --- Volcano batch.volcano.sh Job ---

// volcanoJob is a Volcano Job whose state went through phases (the last is
// current): each transition appends a condition with the new phase and
// its time, as killJob and syncJob do in volcano's
// pkg/controllers/job/job_controller_actions.go.
func volcanoJob(t testing.TB, mutate func(*vcbatch.JobStatus), phases ...vcbatch.JobPhase) map[string]any {
	j := &vcbatch.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: vcbatch.SchemeGroupVersion.String(), Kind: "Job"},
		ObjectMeta: objectMeta("benchmark"),
		Spec: vcbatch.JobSpec{
			SchedulerName: "volcano",
			MinAvailable:  2,
			Queue:         "default",
			MaxRetry:      3,
			Policies: []vcbatch.LifecyclePolicy{
				{Event: vcbus.PodEvictedEvent, Action: vcbus.RestartJobAction},
				{Event: vcbus.TaskCompletedEvent, Action: vcbus.CompleteJobAction},
			},
			Tasks: []vcbatch.TaskSpec{{Name: "workers", Replicas: 2, Template: podTemplate()}},
		},
	}
	for _, p := range phases {
		j.Status.State = vcbatch.JobState{Phase: p, LastTransitionTime: sampleEnd}
		j.Status.Conditions = append(j.Status.Conditions, vcbatch.JobCondition{Status: p, LastTransitionTime: &sampleEnd})
	}
	j.Status.MinAvailable = 2
	if mutate != nil {
		mutate(&j.Status)
	}
	return toUnstructured(t, j)
}

func volcanoRunning(s *vcbatch.JobStatus) {
	s.Running = 2
	s.TaskStatusCount = map[string]vcbatch.TaskState{"workers": {Phase: map[corev1.PodPhase]int32{corev1.PodRunning: 2}}}
}

// volcanoJobCases follow volcano pkg/controllers/job/state: NewState
// (factory.go) picks the state of the phase; pendingState and runningState
// move on RestartJob to Restarting, on AbortJob (vcctl job suspend) to
// Aborting, on TerminateJob to Terminating, on CompleteJob to Completing,
// and runningState to Completed or Failed from the pods; restartingState to
// Pending, Running, or Failed at maxRetry; abortingState to Aborted once the
// pods are gone and abortedState to Restarting on ResumeJob (vcctl job
// resume); completingState to Completed and terminatingState to Terminated
// once no pod is alive; finishedState (Completed, Failed, Terminated) only
// kills the remaining pods. The controller writes no state reason.
func volcanoJobCases(t testing.TB) []builtinCase {
	return []builtinCase{
		{name: "status missing entirely", input: withoutStatus(volcanoJob(t, nil)), want: OutcomeRunning},
		{name: "pending", input: volcanoJob(t, func(s *vcbatch.JobStatus) { s.Pending = 2 }, vcbatch.Pending), want: OutcomeRunning},
		{name: "running", input: volcanoJob(t, volcanoRunning, vcbatch.Pending, vcbatch.Running), want: OutcomeRunning},
		{
			name: "restarting after an evicted pod",
			input: volcanoJob(t, func(s *vcbatch.JobStatus) { s.RetryCount = 1; s.Terminating = 1 },
				vcbatch.Pending, vcbatch.Running, vcbatch.Restarting),
			want: OutcomeRunning,
		},
		{name: "suspending (vcctl job suspend)", input: volcanoJob(t, nil, vcbatch.Pending, vcbatch.Running, vcbatch.Aborting), want: OutcomeRunning},
		{name: "suspended", input: volcanoJob(t, nil, vcbatch.Pending, vcbatch.Running, vcbatch.Aborting, vcbatch.Aborted), want: OutcomeRunning},
		{
			name: "resumed (vcctl job resume)",
			input: volcanoJob(t, func(s *vcbatch.JobStatus) { s.RetryCount = 1 },
				vcbatch.Pending, vcbatch.Running, vcbatch.Aborting, vcbatch.Aborted, vcbatch.Restarting),
			want: OutcomeRunning,
		},
		{
			name:  "completing (a task completed)",
			input: volcanoJob(t, func(s *vcbatch.JobStatus) { s.Succeeded = 1; s.Running = 1 }, vcbatch.Pending, vcbatch.Running, vcbatch.Completing),
			want:  OutcomeRunning,
		},
		{
			name:  "completed",
			input: volcanoJob(t, func(s *vcbatch.JobStatus) { s.Succeeded = 2 }, vcbatch.Pending, vcbatch.Running, vcbatch.Completed),
			want:  OutcomeSucceeded,
		},
		{
			name:  "terminating",
			input: volcanoJob(t, func(s *vcbatch.JobStatus) { s.Failed = 1; s.Terminating = 1 }, vcbatch.Pending, vcbatch.Running, vcbatch.Terminating),
			want:  OutcomeRunning,
		},
		{
			name:  "terminated",
			input: volcanoJob(t, func(s *vcbatch.JobStatus) { s.Failed = 1 }, vcbatch.Pending, vcbatch.Running, vcbatch.Terminating, vcbatch.Terminated),
			want:  OutcomeFailed,
		},
		{
			name:  "failed, too few pods succeeded",
			input: volcanoJob(t, func(s *vcbatch.JobStatus) { s.Succeeded = 1; s.Failed = 1 }, vcbatch.Pending, vcbatch.Running, vcbatch.Failed),
			want:  OutcomeFailed,
		},
		{
			name: "failed, restarts spent",
			input: volcanoJob(t, func(s *vcbatch.JobStatus) {
				s.RetryCount = 3
				s.State.Reason, s.State.Message = "MaxRetryReached", "job restarted 3 times"
			}, vcbatch.Pending, vcbatch.Running, vcbatch.Restarting, vcbatch.Failed),
			want:        OutcomeFailed,
			wantMessage: "MaxRetryReached: job restarted 3 times",
		},
	}
}

// --- Spark operator SparkApplication ---

// sparkApp is a SparkApplication (sparkoperator.k8s.io/v1beta2) in state,
// after mutate.
func sparkApp(t testing.TB, state sparkv1beta2.ApplicationStateType, errorMessage string, mutate func(*sparkv1beta2.SparkApplication)) map[string]any {
	app := &sparkv1beta2.SparkApplication{
		TypeMeta:   metav1.TypeMeta{APIVersion: sparkv1beta2.GroupVersion.String(), Kind: "SparkApplication"},
		ObjectMeta: objectMeta("benchmark"),
		Spec: sparkv1beta2.SparkApplicationSpec{
			Type:                sparkv1beta2.SparkApplicationTypePython,
			Mode:                sparkv1beta2.DeployModeCluster,
			Image:               ptr.To("spark:3.5.5"),
			MainApplicationFile: ptr.To("local:///opt/spark/examples/src/main/python/pi.py"),
			SparkVersion:        "3.5.5",
			RestartPolicy: sparkv1beta2.RestartPolicy{
				Type:                       sparkv1beta2.RestartPolicyOnFailure,
				OnSubmissionFailureRetries: ptr.To[int32](2),
				OnFailureRetries:           ptr.To[int32](2),
			},
		},
		Status: sparkv1beta2.SparkApplicationStatus{
			AppState:           sparkv1beta2.ApplicationState{State: state, ErrorMessage: errorMessage},
			SubmissionAttempts: 1,
		},
	}
	if state != sparkv1beta2.ApplicationStateNew {
		app.Status.SparkApplicationID = "spark-4f0b0c1e9a5d4d2f"
		app.Status.DriverInfo.PodName = "benchmark-driver"
		app.Status.ExecutionAttempts = 1
		app.Status.LastSubmissionAttemptTime = sampleStart
	}
	if mutate != nil {
		mutate(app)
	}
	return toUnstructured(t, app)
}

// sparkDriverFailed is the message updateDriverState writes when the
// driver container fails.
const sparkDriverFailed = "driver container failed with ExitCode: 1, Reason: Error"

// sparkApplicationCases follow spark-operator v2.5.0
// internal/controller/sparkapplication/controller.go: Reconcile dispatches
// on the state; submitSparkApplication writes SUBMITTED or
// SUBMISSION_FAILED (with the error); updateDriverState RUNNING, SUCCEEDING,
// FAILING or UNKNOWN; reconcileSucceeding/FailingSparkApplication move to
// PENDING_RERUN while util.ShouldRetry, else to COMPLETED or FAILED;
// reconcileFailedSubmissionSparkApplication resubmits while
// onSubmissionFailureRetries remain, else writes FAILED (the error kept);
// spec.suspend moves through SUSPENDING, SUSPENDED and RESUMING; a spec
// change through INVALIDATING to PENDING_RERUN.
func sparkApplicationCases(t testing.TB) []builtinCase {
	submitErr := "failed to run spark-submit: exit status 1"
	return []builtinCase{
		{name: "status missing entirely", input: withoutStatus(sparkApp(t, "", "", nil)), want: OutcomeRunning},
		{name: "new", input: sparkApp(t, sparkv1beta2.ApplicationStateNew, "", nil), want: OutcomeRunning},
		{name: "submitted", input: sparkApp(t, sparkv1beta2.ApplicationStateSubmitted, "", nil), want: OutcomeRunning},
		{name: "running", input: sparkApp(t, sparkv1beta2.ApplicationStateRunning, "", nil), want: OutcomeRunning},
		{
			name:  "submission failed, retries remain",
			input: sparkApp(t, sparkv1beta2.ApplicationStateFailedSubmission, submitErr, nil),
			want:  OutcomeRunning,
		},
		{
			// The operator writes FAILED on its next pass.
			name: "submission failed, no retry left",
			input: sparkApp(t, sparkv1beta2.ApplicationStateFailedSubmission, submitErr, func(a *sparkv1beta2.SparkApplication) {
				a.Status.SubmissionAttempts = 3
			}),
			want: OutcomeRunning,
		},
		{
			name: "failed, submission retries spent",
			input: sparkApp(t, sparkv1beta2.ApplicationStateFailed, submitErr, func(a *sparkv1beta2.SparkApplication) {
				a.Status.SubmissionAttempts = 3
				a.Status.TerminationTime = sampleEnd
			}),
			want:        OutcomeFailed,
			wantMessage: submitErr,
		},
		{name: "driver succeeded, deciding on a rerun", input: sparkApp(t, sparkv1beta2.ApplicationStateSucceeding, "", nil), want: OutcomeRunning},
		{name: "driver failed, deciding on a rerun", input: sparkApp(t, sparkv1beta2.ApplicationStateFailing, sparkDriverFailed, nil), want: OutcomeRunning},
		{name: "pending rerun", input: sparkApp(t, sparkv1beta2.ApplicationStatePendingRerun, "", nil), want: OutcomeRunning},
		{name: "spec changed, invalidating", input: sparkApp(t, sparkv1beta2.ApplicationStateInvalidating, "", nil), want: OutcomeRunning},
		{name: "driver state unknown", input: sparkApp(t, sparkv1beta2.ApplicationStateUnknown, "", nil), want: OutcomeRunning},
		{name: "suspending", input: sparkApp(t, sparkv1beta2.ApplicationStateSuspending, "", nil), want: OutcomeRunning},
		{name: "suspended", input: sparkApp(t, sparkv1beta2.ApplicationStateSuspended, "", nil), want: OutcomeRunning},
		{name: "resuming", input: sparkApp(t, sparkv1beta2.ApplicationStateResuming, "", nil), want: OutcomeRunning},
		{
			name: "completed",
			input: sparkApp(t, sparkv1beta2.ApplicationStateCompleted, "", func(a *sparkv1beta2.SparkApplication) {
				a.Status.TerminationTime = sampleEnd
			}),
			want: OutcomeSucceeded,
		},
		{
			name: "failed, driver failed with no retry left",
			input: sparkApp(t, sparkv1beta2.ApplicationStateFailed, sparkDriverFailed, func(a *sparkv1beta2.SparkApplication) {
				a.Status.ExecutionAttempts = 3
				a.Status.TerminationTime = sampleEnd
			}),
			want:        OutcomeFailed,
			wantMessage: sparkDriverFailed,
		},
		{
			// reconcileTerminatedSparkApplication deletes an application
			// past spec.timeToLiveSeconds.
			name: "completed, deleted at its TTL",
			input: sparkApp(t, sparkv1beta2.ApplicationStateCompleted, "", func(a *sparkv1beta2.SparkApplication) {
				a.Status.TerminationTime = sampleEnd
				a.DeletionTimestamp = &sampleEnd
			}),
			want: OutcomeSucceeded,
		},
	}
}

// --- Tekton PipelineRun and TaskRun (unstructured: tektoncd/pipeline's
// module is not in this module graph) ---

// tektonRun is a PipelineRun or TaskRun (tekton.dev/v1) with the one
// condition Tekton writes, Succeeded (knative.dev/pkg
// apis.NewBatchConditionSet), in status and with reason; more conditions
// after it.
func tektonRun(kind, status, reason, message string, done bool, more ...map[string]any) map[string]any {
	m := map[string]any{
		"apiVersion": "tekton.dev/v1",
		"kind":       kind,
		"metadata":   map[string]any{"name": "benchmark", "namespace": "team-a", "uid": "0b6a2e4c-9d51-4a4f-8d1e-3f2b1c0d9e8f"},
		"spec":       map[string]any{"timeouts": map[string]any{"pipeline": "1h0m0s"}},
	}
	if kind == "TaskRun" {
		m["spec"] = map[string]any{"taskRef": map[string]any{"name": "benchmark"}, "timeout": "1h0m0s", "retries": int64(1)}
	} else {
		m["spec"] = map[string]any{"pipelineRef": map[string]any{"name": "benchmark"}, "timeouts": map[string]any{"pipeline": "1h0m0s"}}
	}
	if status == "" {
		return m
	}
	conds := []any{map[string]any{
		"type": "Succeeded", "status": status, "reason": reason, "message": message,
		"lastTransitionTime": "2026-03-01T10:42:00Z",
	}}
	for _, c := range more {
		conds = append(conds, c)
	}
	st := map[string]any{"conditions": conds, "startTime": "2026-03-01T10:00:00Z"}
	if done {
		// MarkSucceeded and MarkFailed set completionTime.
		st["completionTime"] = "2026-03-01T10:42:00Z"
	}
	m["status"] = st
	return m
}

// pipelineRunCases follow tektoncd/pipeline pkg/apis/pipeline/v1
// pipelinerun_types.go (PipelineRunReason, MarkSucceeded, MarkFailed,
// MarkRunning) and pkg/reconciler/pipelinerun/resources
// pipelinerunstate.go GetPipelineConditionStatus: Unknown while tasks run,
// while stopping, cancelling or timing out with finally tasks under way;
// True with Succeeded or Completed (skipped tasks); False with Failed,
// Cancelled, PipelineRunTimeout or a validation reason.
func pipelineRunCases(t testing.TB) []builtinCase {
	const (
		done      = "Tasks Completed: 2 (Failed: 0, Cancelled 0), Skipped: 0"
		failed    = "Tasks Completed: 2 (Failed: 1, Cancelled 0), Skipped: 0"
		cancelled = `PipelineRun "benchmark" was cancelled`
		timedOut  = `PipelineRun "benchmark" failed to finish within "1h0m0s"`
	)
	pr := func(status, reason, message string, done bool, more ...map[string]any) map[string]any {
		return tektonRun("PipelineRun", status, reason, message, done, more...)
	}
	// pkg/reconciler/pipelinerun/pipelinerun.go prepare, when a
	// VerificationPolicy applies.
	verified := map[string]any{"type": "TrustedResourcesVerified", "status": "True"}
	return []builtinCase{
		{name: "status missing entirely", input: pr("", "", "", false), want: OutcomeRunning},
		{name: "started", input: pr("Unknown", "Started", "", false), want: OutcomeRunning},
		{name: "pending (spec.status PipelineRunPending)", input: pr("Unknown", "PipelineRunPending", `PipelineRun "benchmark" is pending`, false), want: OutcomeRunning},
		{name: "resolving its pipeline", input: pr("Unknown", "ResolvingPipelineRef", "", false), want: OutcomeRunning},
		{name: "running", input: pr("Unknown", "Running", "Tasks Completed: 0 (Failed: 0, Cancelled 0), Incomplete: 2, Skipped: 0", false), want: OutcomeRunning},
		{name: "stopping after a failed task", input: pr("Unknown", "PipelineRunStopping", "Tasks Completed: 1 (Failed: 1, Cancelled 0), Incomplete: 1, Skipped: 0", false), want: OutcomeRunning},
		{name: "cancelled, finally tasks running", input: pr("Unknown", "CancelledRunningFinally", "", false), want: OutcomeRunning},
		{name: "stopped, finally tasks running", input: pr("Unknown", "StoppedRunningFinally", "", false), want: OutcomeRunning},
		{name: "cancellation under way", input: pr("Unknown", "Cancelled", cancelled, false), want: OutcomeRunning},
		{name: "succeeded", input: pr("True", "Succeeded", done, true, verified), want: OutcomeSucceeded, wantMessage: "Succeeded: " + done},
		{
			name:        "completed with skipped tasks",
			input:       pr("True", "Completed", "Tasks Completed: 1 (Failed: 0, Cancelled 0), Skipped: 1", true),
			want:        OutcomeSucceeded,
			wantMessage: "Completed: Tasks Completed: 1 (Failed: 0, Cancelled 0), Skipped: 1",
		},
		{name: "failed", input: pr("False", "Failed", failed, true), want: OutcomeFailed, wantMessage: "Failed: " + failed},
		{name: "cancelled", input: pr("False", "Cancelled", cancelled, true), want: OutcomeFailed, wantMessage: "Cancelled: " + cancelled},
		{name: "timed out", input: pr("False", "PipelineRunTimeout", timedOut, true), want: OutcomeFailed, wantMessage: "PipelineRunTimeout: " + timedOut},
		{
			name:        "its pipeline not found",
			input:       pr("False", "CouldntGetPipeline", `Error retrieving pipeline for pipelinerun team-a/benchmark: pipelines.tekton.dev "benchmark" not found`, true),
			want:        OutcomeFailed,
			wantMessage: `CouldntGetPipeline: Error retrieving pipeline for pipelinerun team-a/benchmark: pipelines.tekton.dev "benchmark" not found`,
		},
	}
}

// taskRunCases follow tektoncd/pipeline pkg/reconciler/taskrun/taskrun.go
// ReconcileKind: failTaskRun writes False (TaskRunCancelled,
// TaskRunTimeout, TaskRunImagePullFailed) and the pod's end Succeeded or
// Failed; finishReconcileUpdateEmitEvents turns a False of a retriable run
// into Unknown/ToBeRetried (retryTaskRun) in the same write, so a False
// that is written is final. prepare sets TrustedResourcesVerified.
func taskRunCases(t testing.TB) []builtinCase {
	const (
		failed    = `"step-benchmark" exited with code 1`
		cancelled = `TaskRun "benchmark" was cancelled. `
		timedOut  = `TaskRun "benchmark" failed to finish within "1h0m0s"`
	)
	tr := func(status, reason, message string, done bool, more ...map[string]any) map[string]any {
		return tektonRun("TaskRun", status, reason, message, done, more...)
	}
	verified := map[string]any{"type": "TrustedResourcesVerified", "status": "True"}
	return []builtinCase{
		{name: "status missing entirely", input: tr("", "", "", false), want: OutcomeRunning},
		{name: "started", input: tr("Unknown", "Started", "", false), want: OutcomeRunning},
		{name: "resolving its task", input: tr("Unknown", "ResolvingTaskRef", "TaskRun team-a/benchmark awaiting remote resource", false), want: OutcomeRunning},
		{name: "pod pending", input: tr("Unknown", "Pending", `pod status "PodScheduled":"False"; message: "0/3 nodes are available"`, false, verified), want: OutcomeRunning},
		{name: "running", input: tr("Unknown", "Running", "Not all Steps in the Task have finished executing", false, verified), want: OutcomeRunning},
		{name: "failed, to be retried", input: tr("Unknown", "ToBeRetried", failed, false, verified), want: OutcomeRunning},
		{name: "succeeded", input: tr("True", "Succeeded", "All Steps have completed executing", true, verified), want: OutcomeSucceeded, wantMessage: "Succeeded: All Steps have completed executing"},
		{name: "failed, retries spent", input: tr("False", "Failed", failed, true, verified), want: OutcomeFailed, wantMessage: "Failed: " + failed},
		{name: "cancelled", input: tr("False", "TaskRunCancelled", cancelled, true), want: OutcomeFailed, wantMessage: "TaskRunCancelled: " + cancelled},
		{name: "timed out", input: tr("False", "TaskRunTimeout", timedOut, true), want: OutcomeFailed, wantMessage: "TaskRunTimeout: " + timedOut},
		{
			name:        "image pull failed",
			input:       tr("False", "TaskRunImagePullFailed", `The step "benchmark" in TaskRun "benchmark" failed to pull the image "".`, true),
			want:        OutcomeFailed,
			wantMessage: `TaskRunImagePullFailed: The step "benchmark" in TaskRun "benchmark" failed to pull the image "".`,
		},
	}
}

// podCondition is a Pod condition as the kubelet or the scheduler writes it.
func podCondition(typ corev1.PodConditionType, status corev1.ConditionStatus, reason, message string) corev1.PodCondition {
	return corev1.PodCondition{Type: typ, Status: status, LastTransitionTime: sampleStart, Reason: reason, Message: message}
}

// readyPodConditions are those of a running, ready Pod
// (pkg/kubelet/status/generate.go, the scheduler's PodScheduled).
func readyPodConditions() []corev1.PodCondition {
	return []corev1.PodCondition{
		podCondition(corev1.PodReadyToStartContainers, corev1.ConditionTrue, "", ""),
		podCondition(corev1.PodInitialized, corev1.ConditionTrue, "", ""),
		podCondition(corev1.PodReady, corev1.ConditionTrue, "", ""),
		podCondition(corev1.ContainersReady, corev1.ConditionTrue, "", ""),
		podCondition(corev1.PodScheduled, corev1.ConditionTrue, "", ""),
	}
}

func podWithConditions(t testing.TB, phase corev1.PodPhase, conditions ...corev1.PodCondition) map[string]any {
	m := pod(t, phase, "", "")
	c := toUnstructured(t, &corev1.PodStatus{Conditions: conditions})
	_ = unstructured.SetNestedField(m, c["conditions"], "status", "conditions")
	return m
}

// TestBuiltinSuccessAndFailureExclusive: on no sample do a kind's built-in
// success and failure both hold. Evaluate lets success win, but a user who
// copies one of the two into a rule of their own gets it alone.
func TestBuiltinSuccessAndFailureExclusive(t *testing.T) {
	for gk, cases := range builtinSamples(t) {
		success, failure, _ := BuiltinFor(gk)
		alone := func(expr string) *Policy {
			p, err := Compile(&v1alpha1.CompletionRuleSpec{Success: expr})
			if err != nil {
				t.Fatalf("%s: compiling %s: %v", kindKey(gk), expr, err)
			}
			return p
		}
		s, f := alone(success), alone(failure)
		for _, tc := range cases {
			sr, err1 := s.Evaluate(context.Background(), gk, tc.input, appWrapper())
			fr, err2 := f.Evaluate(context.Background(), gk, tc.input, appWrapper())
			if err1 != nil || err2 != nil {
				t.Fatalf("%s %q: %v, %v", kindKey(gk), tc.name, err1, err2)
			}
			if sr.Outcome == OutcomeSucceeded && fr.Outcome == OutcomeSucceeded {
				t.Errorf("%s %q: the built-in success and failure both hold", kindKey(gk), tc.name)
			}
		}
	}
}
