package celpolicies

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/runtime/schema"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
)

// builtinSource is what "finished" means for a well-known kind, in CEL over
// the status that its operator writes. Every expression uses ?. and orValue:
// a trigger whose status or conditions are not written yet is Running, not
// an error.
type builtinSource struct {
	success, failure string
	// successMessage and failureMessage describe the outcome. They are Go:
	// the same in CEL (filter, map, join) costs more than the decision
	// itself, and a description has no semantics a user would copy.
	successMessage, failureMessage func(object map[string]any) string
}

// conditionTrue is true once the object has condition t with status True.
// Only terminal condition types are passed in: transient ones (Suspended,
// Restarting, FailureTarget, SuccessCriteriaMet) must not finish anything.
func conditionTrue(t string) string {
	return conditionIs(t, "True")
}

// conditionIs is true once the object has condition t with the given
// status.
func conditionIs(t, status string) string {
	return fmt.Sprintf("object.?status.?conditions.orValue([]).exists(c, c.type == '%s' && c.status == '%s')", t, status)
}

// conditionMessage is "reason: message" of the True conditions of type t.
func conditionMessage(t string) func(map[string]any) string {
	return conditionStatusMessage(t, "True")
}

// conditionStatusMessage is "reason: message" of the conditions of type t
// with the given status.
func conditionStatusMessage(t, want string) func(map[string]any) string {
	return func(object map[string]any) string {
		status, _ := object["status"].(map[string]any)
		conds, _ := status["conditions"].([]any)
		var parts []string
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if typ, _ := m["type"].(string); typ != t {
				continue
			}
			if s, _ := m["status"].(string); s != want {
				continue
			}
			if msg := reasonMessage(m); msg != "" {
				parts = append(parts, msg)
			}
		}
		return strings.Join(parts, "; ")
	}
}

// statusMessage is "reason: message" from status.reason and status.message,
// for kinds that report a phase rather than conditions.
func statusMessage(object map[string]any) string {
	status, _ := object["status"].(map[string]any)
	return reasonMessage(status)
}

// volcanoMessage is "reason: message" from a Volcano Job's status.state.
func volcanoMessage(object map[string]any) string {
	status, _ := object["status"].(map[string]any)
	state, _ := status["state"].(map[string]any)
	return reasonMessage(state)
}

// sparkMessage is the error message of a SparkApplication's
// status.applicationState (the operator writes no reason).
func sparkMessage(object map[string]any) string {
	status, _ := object["status"].(map[string]any)
	state, _ := status["applicationState"].(map[string]any)
	message, _ := state["errorMessage"].(string)
	return message
}

// reasonMessage joins the reason and message fields of m that are set.
func reasonMessage(m map[string]any) string {
	reason, _ := m["reason"].(string)
	message, _ := m["message"].(string)
	switch {
	case reason == "":
		return message
	case message == "":
		return reason
	}
	return reason + ": " + message
}

// conditionKind is a kind whose operator reports completion as conditions.
func conditionKind(succeeded, failed string) builtinSource {
	return builtinSource{
		success:        conditionTrue(succeeded),
		failure:        conditionTrue(failed),
		successMessage: conditionMessage(succeeded),
		failureMessage: conditionMessage(failed),
	}
}

// builtinSources must list the same kinds as the x-kubernetes-validations
// rule on CompletionRuleSpec, which lets a rule omit spec.success only for
// these; a test keeps the two in step.
//
// Each expression says what the kind's own controller treats as final: a
// state it moves on from (a retry, a resubmission, a resume, an evicted
// worker) is never an outcome. The upstream file and function that make a
// state final are cited beside each; KindStates lists every state the
// controller writes, and the samples in builtin_samples_test.go hold one
// object per state.
var builtinSources = map[schema.GroupKind]builtinSource{
	// kubernetes pkg/controller/job/job_controller.go: syncJob sets
	// FailureTarget or SuccessCriteriaMet first, and enactJobFinished adds
	// Complete or Failed once no pod of the Job is terminating; a Job never
	// leaves either. Suspended is not final (the Job resumes).
	{Group: "batch", Kind: "Job"}: conditionKind("Complete", "Failed"),
	// jobset pkg/controllers/jobset_controller.go setJobSetCompletedCondition
	// and failure_policy.go setJobSetFailedCondition, the latter only once
	// executeFailurePolicy has no restart left (failurePolicyRecreateAll
	// restarts the JobSet below maxRestarts, with no Failed condition);
	// jobSetFinished stops the reconcile of a JobSet with either.
	{Group: "jobset.x-k8s.io", Kind: "JobSet"}: conditionKind("Completed", "Failed"),
	// training-operator v1.9.3 pkg/apis/kubeflow.org/v1/common_types.go
	// (JobConditionType), for every v1 kind Kueue also admits. Each kind's
	// UpdateJobStatus (pkg/controller.v1/pytorch/pytorchjob_controller.go
	// and its siblings) sets Restarting while a replica restarts (not
	// final) and Failed only when no restart is left; common/job.go
	// ReconcileJobs sets Failed on a backoff limit or deadline and, once
	// IsFinished, only cleans up.
	{Group: "kubeflow.org", Kind: "PyTorchJob"}: conditionKind("Succeeded", "Failed"),
	{Group: "kubeflow.org", Kind: "TFJob"}:      conditionKind("Succeeded", "Failed"),
	{Group: "kubeflow.org", Kind: "XGBoostJob"}: conditionKind("Succeeded", "Failed"),
	{Group: "kubeflow.org", Kind: "JAXJob"}:     conditionKind("Succeeded", "Failed"),
	{Group: "kubeflow.org", Kind: "PaddleJob"}:  conditionKind("Succeeded", "Failed"),
	// mpi-operator v0.8.0 pkg/controller/mpi_job_controller.go
	// updateMPIJobStatus sets Failed=True with reason MPIJobEvicted when a
	// worker is evicted, without completionTime, and keeps the launcher
	// running: a later launcher success sets Succeeded (and Failed back to
	// False). updateMPIJobFailedStatus, called once the launcher Job has
	// Failed (its backoffLimit reached), sets completionTime with Failed;
	// syncHandler stops once a finished MPIJob has completionTime. So a
	// failure is final only with completionTime (its reason may still read
	// MPIJobEvicted: the eviction check runs after it in the same pass),
	// and never beside Succeeded (an evicted worker pod that remains sets
	// Failed again after a success).
	{Group: "kubeflow.org", Kind: "MPIJob"}: {
		success: conditionTrue("Succeeded"),
		failure: conditionTrue("Failed") + " && object.?status.?completionTime.hasValue() && !" +
			conditionTrue("Succeeded"),
		successMessage: conditionMessage("Succeeded"),
		failureMessage: conditionMessage("Failed"),
	},
	// trainer v2.2.0 pkg/runtime/framework/plugins/jobset/jobset.go Status
	// copies the JobSet's terminal Completed (as Complete) and Failed;
	// pkg/controller/trainjob_controller.go reconcileDeadline sets Failed
	// with DeadlineExceeded, and Reconcile sets Failed for a runtime it does
	// not support (runtimeRef is immutable). Suspended is not final.
	{Group: "trainer.kubeflow.org", Kind: "TrainJob"}: conditionKind("Complete", "Failed"),
	// kuberay v1.6.0 controllers/ray/rayjob_controller.go: Reconcile sets
	// jobDeploymentStatus Complete once the Ray job is terminal (SUCCEEDED
	// or STOPPED) and Failed once it FAILED, its submission or deadline
	// failed; checkBackoffLimitAndUpdateStatusIfNeeded turns Failed into
	// Retrying in the same write while spec.backoffLimit allows, so a
	// Failed that is written is final (apis/ray/v1/rayjob_types.go
	// IsJobDeploymentTerminal). Releases before 1.3 reported a FAILED job as
	// Complete. ValidationFailed, Retrying, Suspending and Suspended are
	// not final.
	{Group: "ray.io", Kind: "RayJob"}: {
		success: "object.?status.?jobDeploymentStatus.orValue('') == 'Complete' && " +
			"object.?status.?jobStatus.orValue('') == 'SUCCEEDED'",
		failure: "object.?status.?jobDeploymentStatus.orValue('') == 'Failed' || " +
			"(object.?status.?jobDeploymentStatus.orValue('') == 'Complete' && " +
			"object.?status.?jobStatus.orValue('') in ['FAILED', 'STOPPED'])",
		successMessage: statusMessage,
		failureMessage: statusMessage,
	},
	// kubernetes pkg/kubelet/kubelet_pods.go getPhase: Succeeded or Failed
	// once every container has terminated and none will restart; the
	// status manager refuses to move a Pod out of a terminal phase.
	{Group: "", Kind: "Pod"}: {
		success:        "object.?status.?phase.orValue('') == 'Succeeded'",
		failure:        "object.?status.?phase.orValue('') == 'Failed'",
		successMessage: statusMessage,
		failureMessage: statusMessage,
	},
	// argo-workflows workflow/controller/operator.go markWorkflowPhase;
	// pkg/apis/workflow/v1alpha1/workflow_phase.go Completed: Succeeded,
	// Failed and Error (a workflow that could not run its steps). The
	// controller does not retry a completed workflow; `argo retry` is a
	// user's act. Argo writes no status.reason.
	{Group: "argoproj.io", Kind: "Workflow"}: {
		success:        "object.?status.?phase.orValue('') == 'Succeeded'",
		failure:        "object.?status.?phase.orValue('') in ['Failed', 'Error']",
		successMessage: statusMessage,
		failureMessage: statusMessage,
	},
	// volcano pkg/controllers/job/state/factory.go NewState maps Completed,
	// Failed and Terminated to finishedState, whose Execute only kills the
	// remaining pods: no action leaves them. running.go sets Completed or
	// Failed from the succeeded pods, restarting.go Failed once maxRetry
	// restarts are spent, terminating.go Terminated once no pod is alive
	// after a TerminateJob action. Aborted is not final: aborted.go moves it
	// to Restarting on ResumeJob (vcctl job suspend and resume).
	{Group: "batch.volcano.sh", Kind: "Job"}: {
		success:        "object.?status.?state.?phase.orValue('') == 'Completed'",
		failure:        "object.?status.?state.?phase.orValue('') in ['Failed', 'Terminated']",
		successMessage: volcanoMessage,
		failureMessage: volcanoMessage,
	},
	// spark-operator v2.5.0 internal/controller/sparkapplication/controller.go:
	// reconcileSucceedingSparkApplication and
	// reconcileFailingSparkApplication move to COMPLETED or FAILED only when
	// util.ShouldRetry says no (restartPolicy), otherwise to PENDING_RERUN;
	// reconcileFailedSubmissionSparkApplication resubmits SUBMISSION_FAILED
	// while onSubmissionFailureRetries remain and then writes FAILED. Only
	// COMPLETED and FAILED are terminal (pkg/util/sparkapplication.go
	// IsTerminated). A user's edit of a finished application's spec runs it
	// again (event_filter.go, INVALIDATING), as `argo retry` reruns a
	// workflow: a user's act, as a new attempt is.
	{Group: "sparkoperator.k8s.io", Kind: "SparkApplication"}: {
		success:        "object.?status.?applicationState.?state.orValue('') == 'COMPLETED'",
		failure:        "object.?status.?applicationState.?state.orValue('') == 'FAILED'",
		successMessage: sparkMessage,
		failureMessage: sparkMessage,
	},
	// tektoncd/pipeline pkg/apis/pipeline/v1/pipelinerun_types.go and
	// taskrun_types.go: one condition, Succeeded (knative.dev/pkg
	// apis.NewBatchConditionSet), Unknown while running (also while a
	// cancellation, a retry or the finally tasks are under way), True once
	// succeeded (MarkSucceeded), False once failed, cancelled or timed out
	// (MarkFailed, with completionTime). Tekton sets no Failed condition.
	{Group: "tekton.dev", Kind: "PipelineRun"}: tektonBuiltin,
	{Group: "tekton.dev", Kind: "TaskRun"}:     tektonBuiltin,
}

var tektonBuiltin = builtinSource{
	success:        conditionIs("Succeeded", "True"),
	failure:        conditionIs("Succeeded", "False"),
	successMessage: conditionStatusMessage("Succeeded", "True"),
	failureMessage: conditionStatusMessage("Succeeded", "False"),
}

// BuiltinFor returns the built-in success and failure expressions for a
// kind, for documentation and for the rule's status.
func BuiltinFor(gk schema.GroupKind) (success, failure string, ok bool) {
	b, ok := builtinSources[gk]
	return b.success, b.failure, ok
}

// BuiltinKinds returns the kinds with built-in expressions, sorted by group
// then kind.
func BuiltinKinds() []schema.GroupKind {
	kinds := make([]schema.GroupKind, 0, len(builtinSources))
	for gk := range builtinSources {
		kinds = append(kinds, gk)
	}
	sort.Slice(kinds, func(i, j int) bool {
		if kinds[i].Group != kinds[j].Group {
			return kinds[i].Group < kinds[j].Group
		}
		return kinds[i].Kind < kinds[j].Kind
	})
	return kinds
}

// kindKey spells a kind as the CompletionRule validation rule does,
// "group/Kind" with an empty group for the core API.
func kindKey(gk schema.GroupKind) string {
	return gk.Group + "/" + gk.Kind
}

// compiledBuiltin holds the programs of one built-in kind.
type compiledBuiltin struct {
	success, failure               *program
	successMessage, failureMessage func(map[string]any) string
}

var (
	builtinsOnce sync.Once
	builtins     map[schema.GroupKind]*compiledBuiltin
	builtinsErr  error
)

// compiledBuiltinFor returns the built-in programs for gk, or nil if the kind
// has none. They are compiled once per process, on first use, and shared
// by every Policy.
func compiledBuiltinFor(gk schema.GroupKind) (*compiledBuiltin, error) {
	builtinsOnce.Do(func() { builtins, builtinsErr = compileBuiltins() })
	if builtinsErr != nil {
		return nil, builtinsErr
	}
	return builtins[gk], nil
}

// compileBuiltins compiles the built-ins in an environment of their own,
// without the cost tracking of the Kubernetes environment. They are fixed
// expressions whose work is linear in the object's conditions; cost tracking
// would triple their time on every reconcile of every running trigger, and
// its bookkeeping grows quadratically with a long list. They stay
// interruptible by the context. A test checks that each compiles to the
// same type in the rule environment, so a user can copy one into a rule.
func compileBuiltins() (map[schema.GroupKind]*compiledBuiltin, error) {
	env, err := cel.NewEnv(
		cel.Variable(ObjectVarName, cel.DynType),
		cel.HomogeneousAggregateLiterals(),
		cel.OptionalTypes(),
		cel.EagerlyValidateDeclarations(true),
	)
	if err != nil {
		return nil, fmt.Errorf("building the built-in CEL environment: %w", err)
	}
	var errs []FieldError
	compile := func(field, expr string) *program {
		ast, iss := env.Compile(expr)
		if iss.Err() != nil {
			errs = append(errs, FieldError{Field: field, Expression: expr, Message: issuesMessage(iss)})
			return nil
		}
		if !ast.OutputType().IsExactType(cel.BoolType) {
			errs = append(errs, FieldError{Field: field, Expression: expr, Message: "must evaluate to bool but got " + ast.OutputType().String()})
			return nil
		}
		prog, err := env.Program(ast,
			cel.EvalOptions(cel.OptOptimize),
			cel.InterruptCheckFrequency(celconfig.CheckFrequency))
		if err != nil {
			errs = append(errs, FieldError{Field: field, Expression: expr, Message: err.Error()})
			return nil
		}
		r := readsOf(ast)
		// The messages, written in Go, read the status.
		r.object = r.object.with("status")
		return &program{field: field, prog: prog, builtin: true, reads: r}
	}
	out := make(map[schema.GroupKind]*compiledBuiltin, len(builtinSources))
	for gk, src := range builtinSources {
		out[gk] = &compiledBuiltin{
			success:        compile(fieldSuccess, src.success),
			failure:        compile(fieldFailure, src.failure),
			successMessage: src.successMessage,
			failureMessage: src.failureMessage,
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("built-in expressions: %w", &CompileError{Errors: errs})
	}
	return out, nil
}
