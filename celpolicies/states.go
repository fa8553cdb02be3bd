package celpolicies

import (
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// KindStates says what a built-in kind's own controller writes in its status.
type KindStates struct {
	// ConditionTypes: every condition type the controller sets (empty if the
	// kind reports no conditions).
	ConditionTypes []string
	// StateField: the dotted path of the phase/state field ("status.phase",
	// "status.state.phase", "status.applicationState.state",
	// "status.jobDeploymentStatus"...), "" if none.
	StateField string
	// States: every value the controller writes in StateField, "" included
	// when the field is left empty before the controller first sees the
	// object.
	States []string
	// MoreStates: other state fields the controller writes, dotted path to
	// every value it writes there (RayJob's "status.jobStatus", JobSet's
	// "status.terminalState").
	MoreStates map[string][]string
	// OtherConditions: other writers add condition types of their own (a
	// Pod's readiness gates), so a type not in ConditionTypes may still be
	// set.
	OtherConditions bool
	// Transient: condition types or state values the controller moves on
	// from, which are never final (Restarting, FailureTarget,
	// SuccessCriteriaMet, Suspended, Aborted, PENDING_RERUN,
	// SUBMISSION_FAILED...). A condition with a reason is spelled
	// "Type/Reason" ("Failed/MPIJobEvicted"): that condition with that
	// reason is not final though the type otherwise is. A condition with a
	// status is spelled "Type=Status" ("Succeeded=Unknown", Tekton's
	// condition while the run goes on).
	Transient []string
	// Final: what the kind's built-in expressions read as final, in words,
	// where it is more than a state or condition above (an MPIJob's Failed
	// is final only with status.completionTime).
	Final string
	// Source: upstream file and function the lists come from.
	Source string
}

// kindStates lists, for each built-in kind, what its controller writes, read
// from the controller's code at the version named in Source.
var kindStates = map[schema.GroupKind]KindStates{
	{Group: "batch", Kind: "Job"}: {
		ConditionTypes: []string{"Suspended", "FailureTarget", "SuccessCriteriaMet", "Complete", "Failed"},
		Transient:      []string{"Suspended", "FailureTarget", "SuccessCriteriaMet"},
		Final:          "Complete=True is a success; Failed=True a failure",
		Source: "k8s.io/api batch/v1 types.go (JobConditionType); kubernetes pkg/controller/job/job_controller.go " +
			"(syncJob sets SuccessCriteriaMet or FailureTarget; enactJobFinished adds Complete or Failed once no " +
			"pod is terminating)",
	},
	{Group: "jobset.x-k8s.io", Kind: "JobSet"}: {
		ConditionTypes: []string{"Completed", "Failed", "Suspended", "StartupPolicyInProgress", "StartupPolicyCompleted"},
		MoreStates:     map[string][]string{"status.terminalState": {"", "Completed", "Failed"}},
		Transient:      []string{"Suspended", "StartupPolicyInProgress", "StartupPolicyCompleted"},
		Final:          "Completed=True is a success; Failed=True a failure (written once no restart is left)",
		Source: "sigs.k8s.io/jobset api/jobset/v1alpha2/jobset_types.go (JobSetConditionType); " +
			"pkg/controllers/jobset_controller.go (setJobSetCompletedCondition, setJobSetFailedCondition, " +
			"failure_policy.go executeFailurePolicy: a failed child Job restarts the JobSet while restarts remain)",
	},
	{Group: "kubeflow.org", Kind: "PyTorchJob"}: trainingOperatorV1States,
	{Group: "kubeflow.org", Kind: "TFJob"}:      trainingOperatorV1States,
	{Group: "kubeflow.org", Kind: "XGBoostJob"}: trainingOperatorV1States,
	{Group: "kubeflow.org", Kind: "JAXJob"}:     trainingOperatorV1States,
	{Group: "kubeflow.org", Kind: "PaddleJob"}:  trainingOperatorV1States,
	{Group: "kubeflow.org", Kind: "MPIJob"}: {
		ConditionTypes: []string{"Created", "Running", "Succeeded", "Suspended", "Failed"},
		Transient:      []string{"Created", "Running", "Suspended", "Failed/MPIJobEvicted"},
		Final: "Succeeded=True is a success; Failed=True a failure once status.completionTime is set (the " +
			"launcher Job failed), whatever its reason, and while Succeeded is not True",
		Source: "github.com/kubeflow/mpi-operator v0.8.0 pkg/apis/kubeflow/v2beta1/types.go (JobConditionType); " +
			"pkg/controller/mpi_job_controller.go (updateMPIJobStatus: Failed/MPIJobEvicted without " +
			"completionTime on an evicted worker while the launcher goes on and may still succeed; " +
			"updateMPIJobFailedStatus: Failed with completionTime once the launcher Job failed; no Restarting)",
	},
	{Group: "trainer.kubeflow.org", Kind: "TrainJob"}: {
		ConditionTypes: []string{"Suspended", "Complete", "Failed"},
		Transient:      []string{"Suspended"},
		Final:          "Complete=True is a success; Failed=True a failure",
		Source: "github.com/kubeflow/trainer/v2 v2.2.0 pkg/apis/trainer/v1alpha1/trainjob_types.go " +
			"(TrainJobSuspended, TrainJobComplete, TrainJobFailed); pkg/runtime/framework/plugins/jobset " +
			"(Status: Complete and Failed copied from the JobSet's terminal conditions)",
	},
	{Group: "ray.io", Kind: "RayJob"}: {
		StateField: "status.jobDeploymentStatus",
		States: []string{"", "Initializing", "Running", "Complete", "Failed", "ValidationFailed",
			"Suspending", "Suspended", "Retrying", "Waiting"},
		MoreStates: map[string][]string{
			"status.jobStatus": {"", "PENDING", "RUNNING", "STOPPED", "SUCCEEDED", "FAILED"},
		},
		Transient: []string{"", "Initializing", "Running", "ValidationFailed", "Suspending", "Suspended",
			"Retrying", "Waiting", "PENDING", "RUNNING"},
		Final: "jobDeploymentStatus Complete with jobStatus SUCCEEDED is a success; jobDeploymentStatus Failed, " +
			"or Complete with jobStatus FAILED or STOPPED, a failure",
		Source: "github.com/ray-project/kuberay/ray-operator v1.6.0 apis/ray/v1/rayjob_types.go " +
			"(JobDeploymentStatus, JobStatus, IsJobDeploymentTerminal); controllers/ray/rayjob_controller.go (Reconcile)",
	},
	{Group: "", Kind: "Pod"}: {
		ConditionTypes: []string{"PodScheduled", "PodReadyToStartContainers", "Initialized", "ContainersReady",
			"Ready", "DisruptionTarget", "PodResizePending", "PodResizeInProgress", "AllContainersRestarting"},
		OtherConditions: true,
		StateField:      "status.phase",
		States:          []string{"Pending", "Running", "Succeeded", "Failed", "Unknown"},
		Transient: []string{"Pending", "Running", "Unknown", "PodScheduled", "PodReadyToStartContainers",
			"Initialized", "ContainersReady", "Ready", "DisruptionTarget", "PodResizePending", "PodResizeInProgress",
			"AllContainersRestarting"},
		Final: "phase Succeeded is a success; phase Failed a failure",
		Source: "k8s.io/api core/v1 types.go (PodPhase, PodConditionType); kubernetes pkg/kubelet/kubelet_pods.go " +
			"(getPhase: Succeeded or Failed once every container has terminated and none will restart)",
	},
	{Group: "argoproj.io", Kind: "Workflow"}: {
		ConditionTypes: []string{"PodRunning", "Completed", "SpecWarning", "SpecError", "MetricsError", "ArtifactGCError"},
		StateField:     "status.phase",
		States:         []string{"", "Pending", "Running", "Succeeded", "Failed", "Error"},
		Transient:      []string{"", "Pending", "Running", "PodRunning"},
		Final: "phase Succeeded is a success; phase Failed or Error a failure (the Completed condition is True " +
			"for either)",
		Source: "github.com/argoproj/argo-workflows pkg/apis/workflow/v1alpha1/workflow_types.go (WorkflowPhase, " +
			"ConditionType); workflow/controller/operator.go (markWorkflowPhase)",
	},
	{Group: "batch.volcano.sh", Kind: "Job"}: {
		StateField: "status.state.phase",
		States: []string{"", "Pending", "Aborting", "Aborted", "Running", "Restarting", "Completing",
			"Completed", "Terminating", "Terminated", "Failed"},
		Transient: []string{"", "Pending", "Aborting", "Aborted", "Running", "Restarting", "Completing",
			"Terminating"},
		Final: "status.state.phase Completed is a success; Failed or Terminated a failure (Aborted is a " +
			"suspended job that vcctl job resume brings back)",
		Source: "volcano.sh/apis v1.14.0 pkg/apis/batch/v1alpha1/job.go (JobPhase); volcano-sh/volcano " +
			"pkg/controllers/job/state/*.go (factory.go NewState: finishedState for Completed, Failed and " +
			"Terminated; aborted.go: ResumeJob to Restarting; restarting.go: Failed at maxRetry)",
	},
	{Group: "sparkoperator.k8s.io", Kind: "SparkApplication"}: {
		StateField: "status.applicationState.state",
		States: []string{"", "SUBMITTED", "RUNNING", "COMPLETED", "FAILED", "SUBMISSION_FAILED",
			"PENDING_RERUN", "INVALIDATING", "SUCCEEDING", "FAILING", "UNKNOWN", "SUSPENDING", "SUSPENDED", "RESUMING"},
		Transient: []string{"", "SUBMITTED", "RUNNING", "SUBMISSION_FAILED", "PENDING_RERUN", "INVALIDATING",
			"SUCCEEDING", "FAILING", "UNKNOWN", "SUSPENDING", "SUSPENDED", "RESUMING"},
		Final: "status.applicationState.state COMPLETED is a success; FAILED a failure (SUBMISSION_FAILED is " +
			"resubmitted while retries remain, then FAILED)",
		Source: "github.com/kubeflow/spark-operator/v2 v2.5.0 api/v1beta2/sparkapplication_types.go " +
			"(ApplicationStateType); internal/controller/sparkapplication/controller.go (Reconcile, " +
			"reconcileFailedSubmissionSparkApplication, reconcileSucceedingSparkApplication, " +
			"reconcileFailingSparkApplication; pkg/util ShouldRetry, IsTerminated)",
	},
	{Group: "tekton.dev", Kind: "PipelineRun"}: tektonStates,
	{Group: "tekton.dev", Kind: "TaskRun"}:     tektonStates,
}

var trainingOperatorV1States = KindStates{
	ConditionTypes: []string{"Created", "Running", "Restarting", "Succeeded", "Suspended", "Failed"},
	Transient:      []string{"Created", "Running", "Restarting", "Suspended"},
	Final:          "Succeeded=True is a success; Failed=True a failure (written once no restart is left)",
	Source: "github.com/kubeflow/training-operator v1.9.3 pkg/apis/kubeflow.org/v1/common_types.go " +
		"(JobConditionType); pkg/controller.v1/common/job.go (ReconcileJobs)",
}

// tektonStates: Tekton reports one condition, Succeeded, as Knative does:
// Unknown while running, True or False once done.
var tektonStates = KindStates{
	ConditionTypes: []string{"Succeeded", "TrustedResourcesVerified"},
	Transient:      []string{"Succeeded=Unknown", "TrustedResourcesVerified"},
	Final:          "Succeeded=True is a success; Succeeded=False (failed, cancelled, timed out) a failure",
	Source: "github.com/tektoncd/pipeline pkg/apis/pipeline/v1 pipelinerun_types.go and taskrun_types.go " +
		"(PipelineRunReason, TaskRunReason, MarkSucceeded, MarkFailed); pkg/reconciler/taskrun/taskrun.go " +
		"(finishReconcileUpdateEmitEvents: a retriable False becomes Unknown/ToBeRetried in the same write); " +
		"knative.dev/pkg apis/condition_set.go (ConditionSucceeded)",
}

// StatesOf returns the known states of a built-in kind. The lists are the
// caller's to keep or change.
func StatesOf(gk schema.GroupKind) (KindStates, bool) {
	s, ok := kindStates[gk]
	if !ok {
		return KindStates{}, false
	}
	s.ConditionTypes = slices.Clone(s.ConditionTypes)
	s.States = slices.Clone(s.States)
	s.Transient = slices.Clone(s.Transient)
	if s.MoreStates != nil {
		more := make(map[string][]string, len(s.MoreStates))
		for field, values := range s.MoreStates {
			more[field] = slices.Clone(values)
		}
		s.MoreStates = more
	}
	return s, true
}
