package celpolicies

// Status samples for the built-in kinds. Where the operator's module ships
// its Go types, the samples are built from them and converted the way the
// controller sees them (runtime.DefaultUnstructuredConverter), with the
// condition types, reasons and messages the operator writes; Argo Workflows
// and Tekton runs have no Go types in this module graph (their modules are
// heavy), so those samples are written as unstructured maps after the
// upstream types cited beside them. builtin_samples_test.go holds the
// samples of every state, kind by kind.

import (
	"fmt"
	"testing"
	"time"

	trainerv1alpha1 "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	trainerconstants "github.com/kubeflow/trainer/v2/pkg/constants"
	kftov1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	kftoutil "github.com/kubeflow/training-operator/pkg/util"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	jobsetconstants "sigs.k8s.io/jobset/pkg/constants"
)

var (
	gkJob         = schema.GroupKind{Group: "batch", Kind: "Job"}
	gkJobSet      = schema.GroupKind{Group: "jobset.x-k8s.io", Kind: "JobSet"}
	gkPyTorchJob  = schema.GroupKind{Group: "kubeflow.org", Kind: "PyTorchJob"}
	gkMPIJob      = schema.GroupKind{Group: "kubeflow.org", Kind: "MPIJob"}
	gkTFJob       = schema.GroupKind{Group: "kubeflow.org", Kind: "TFJob"}
	gkXGBoostJob  = schema.GroupKind{Group: "kubeflow.org", Kind: "XGBoostJob"}
	gkJAXJob      = schema.GroupKind{Group: "kubeflow.org", Kind: "JAXJob"}
	gkPaddleJob   = schema.GroupKind{Group: "kubeflow.org", Kind: "PaddleJob"}
	gkTrainJob    = schema.GroupKind{Group: "trainer.kubeflow.org", Kind: "TrainJob"}
	gkRayJob      = schema.GroupKind{Group: "ray.io", Kind: "RayJob"}
	gkPod         = schema.GroupKind{Group: "", Kind: "Pod"}
	gkWorkflow    = schema.GroupKind{Group: "argoproj.io", Kind: "Workflow"}
	gkVolcanoJob  = schema.GroupKind{Group: "batch.volcano.sh", Kind: "Job"}
	gkSparkApp    = schema.GroupKind{Group: "sparkoperator.k8s.io", Kind: "SparkApplication"}
	gkPipelineRun = schema.GroupKind{Group: "tekton.dev", Kind: "PipelineRun"}
	gkTaskRun     = schema.GroupKind{Group: "tekton.dev", Kind: "TaskRun"}
)

var (
	sampleStart = metav1.NewTime(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
	sampleEnd   = metav1.NewTime(time.Date(2026, 3, 1, 10, 42, 0, 0, time.UTC))
)

// toUnstructured converts a typed object as the dynamic client would hand
// it over.
func toUnstructured(t testing.TB, obj any) map[string]any {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatalf("converting %T: %v", obj, err)
	}
	return m
}

// withoutStatus is an object as first created, before its operator saw it.
func withoutStatus(m map[string]any) map[string]any {
	delete(m, "status")
	return m
}

func objectMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:              name,
		Namespace:         "team-a",
		UID:               "0b6a2e4c-9d51-4a4f-8d1e-3f2b1c0d9e8f",
		Generation:        1,
		CreationTimestamp: sampleStart,
		Labels:            map[string]string{"kueue.x-k8s.io/queue-name": "team-a"},
	}
}

func podTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name:    "benchmark",
				Image:   "ghcr.io/llm-d/benchmark:v0.3.0",
				Command: []string{"python", "-m", "bench", "--model", "llama-3-8b"},
				Resources: corev1.ResourceRequirements{
					Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")},
				},
			}},
		},
	}
}

// --- batch/v1 Job ---

func jobCondition(t batchv1.JobConditionType, reason, message string) batchv1.JobCondition {
	return batchv1.JobCondition{
		Type:               t,
		Status:             corev1.ConditionTrue,
		LastProbeTime:      sampleEnd,
		LastTransitionTime: sampleEnd,
		Reason:             reason,
		Message:            message,
	}
}

// job is a Job as the Job controller leaves it, after mutate.
func job(t testing.TB, mutate func(*batchv1.Job)) map[string]any {
	j := &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: objectMeta("benchmark"),
		Spec: batchv1.JobSpec{
			Parallelism:    ptr.To[int32](1),
			Completions:    ptr.To[int32](1),
			BackoffLimit:   ptr.To[int32](6),
			CompletionMode: ptr.To(batchv1.NonIndexedCompletion),
			Suspend:        ptr.To(false),
			Template:       podTemplate(),
		},
	}
	if mutate != nil {
		mutate(j)
	}
	return toUnstructured(t, j)
}

func jobRunning(j *batchv1.Job) {
	j.Status.StartTime = &sampleStart
	j.Status.Active = 1
	j.Status.Ready = ptr.To[int32](1)
	j.Status.Terminating = ptr.To[int32](0)
	j.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
}

// The messages below are the Job controller's (pkg/controller/job).
const (
	jobCompletedMessage = "Reached expected number of succeeded pods"
	jobBackoffMessage   = "Job has reached the specified backoff limit"
	jobDeadlineMessage  = "Job was active longer than specified deadline"
)

func jobSucceeded(j *batchv1.Job) {
	jobRunning(j)
	j.Status.Active = 0
	j.Status.Ready = ptr.To[int32](0)
	j.Status.Succeeded = 1
	j.Status.CompletionTime = &sampleEnd
	j.Status.Conditions = []batchv1.JobCondition{
		jobCondition(batchv1.JobSuccessCriteriaMet, batchv1.JobReasonCompletionsReached, jobCompletedMessage),
		jobCondition(batchv1.JobComplete, batchv1.JobReasonCompletionsReached, jobCompletedMessage),
	}
}

func jobFailed(j *batchv1.Job) {
	jobRunning(j)
	j.Status.Active = 0
	j.Status.Ready = ptr.To[int32](0)
	j.Status.Failed = 7
	j.Status.Conditions = []batchv1.JobCondition{
		jobCondition(batchv1.JobFailureTarget, batchv1.JobReasonBackoffLimitExceeded, jobBackoffMessage),
		jobCondition(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded, jobBackoffMessage),
	}
}

// --- JobSet ---

func jobSetCondition(t jobsetv1alpha2.JobSetConditionType, status metav1.ConditionStatus, reason, message string) metav1.Condition {
	return metav1.Condition{
		Type:               string(t),
		Status:             status,
		ObservedGeneration: 1,
		LastTransitionTime: sampleEnd,
		Reason:             reason,
		Message:            message,
	}
}

func jobSet(t testing.TB, mutate func(*jobsetv1alpha2.JobSet)) map[string]any {
	js := &jobsetv1alpha2.JobSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: jobsetv1alpha2.GroupVersion.String(), Kind: "JobSet"},
		ObjectMeta: objectMeta("benchmark"),
		Spec: jobsetv1alpha2.JobSetSpec{
			ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{
				Name:     "workers",
				Replicas: 2,
				Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: podTemplate()}},
			}},
		},
	}
	if mutate != nil {
		mutate(js)
	}
	return toUnstructured(t, js)
}

func jobSetRunning(js *jobsetv1alpha2.JobSet) {
	js.Status.ReplicatedJobsStatus = []jobsetv1alpha2.ReplicatedJobStatus{{Name: "workers", Ready: 2, Active: 2}}
}

// --- Kubeflow training operator v1 (PyTorchJob, TFJob, XGBoostJob, JAXJob, PaddleJob) ---

// kubeflowStatus replays the condition updates the training operator makes,
// through its own helper, so the conditions carry its exact transitions
// (Running dropped on Restarting, nothing after Failed).
func kubeflowStatus(kind string, steps ...kubeflowv1Step) kftov1.JobStatus {
	var st kftov1.JobStatus
	for _, s := range steps {
		kftoutil.UpdateJobConditions(&st, s.typ, s.status, kftoutil.NewReason(kind, s.reason), fmt.Sprintf(s.message, kind))
	}
	if len(steps) > 1 {
		st.StartTime = &sampleStart
		st.ReplicaStatuses = map[kftov1.ReplicaType]*kftov1.ReplicaStatus{"Master": {Active: 1}, "Worker": {Active: 3}}
	}
	return st
}

type kubeflowv1Step struct {
	typ     kftov1.JobConditionType
	status  corev1.ConditionStatus
	reason  string
	message string
}

var (
	kfCreated    = kubeflowv1Step{kftov1.JobCreated, corev1.ConditionTrue, kftoutil.JobCreatedReason, "%s benchmark is created."}
	kfRunning    = kubeflowv1Step{kftov1.JobRunning, corev1.ConditionTrue, kftoutil.JobRunningReason, "%s team-a/benchmark is running."}
	kfRestarting = kubeflowv1Step{kftov1.JobRestarting, corev1.ConditionTrue, kftoutil.JobRestartingReason, "%s benchmark is restarting because 1 Worker replica(s) failed."}
	kfSuspended  = kubeflowv1Step{kftov1.JobSuspended, corev1.ConditionTrue, kftoutil.JobSuspendedReason, "%s benchmark is suspended."}
	kfNotRunning = kubeflowv1Step{kftov1.JobRunning, corev1.ConditionFalse, kftoutil.JobSuspendedReason, "%s benchmark is suspended."}
	kfSucceeded  = kubeflowv1Step{kftov1.JobSucceeded, corev1.ConditionTrue, kftoutil.JobSucceededReason, "%s team-a/benchmark successfully completed."}
	kfFailed     = kubeflowv1Step{kftov1.JobFailed, corev1.ConditionTrue, kftoutil.JobFailedReason, "%s benchmark is failed because 1 Worker replica(s) failed."}
)

func pyTorchJob(t testing.TB, status kftov1.JobStatus) map[string]any {
	return toUnstructured(t, &kftov1.PyTorchJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: kftov1.GroupVersion.String(), Kind: kftov1.PyTorchJobKind},
		ObjectMeta: objectMeta("benchmark"),
		Spec: kftov1.PyTorchJobSpec{PyTorchReplicaSpecs: map[kftov1.ReplicaType]*kftov1.ReplicaSpec{
			kftov1.PyTorchJobReplicaTypeMaster: {Replicas: ptr.To[int32](1), Template: podTemplate()},
		}},
		Status: status,
	})
}

// --- Kubeflow Trainer TrainJob ---

func trainJob(t testing.TB, conditions ...metav1.Condition) map[string]any {
	tj := &trainerv1alpha1.TrainJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: trainerv1alpha1.GroupVersion.String(), Kind: "TrainJob"},
		ObjectMeta: objectMeta("benchmark"),
		Spec: trainerv1alpha1.TrainJobSpec{
			RuntimeRef: trainerv1alpha1.RuntimeRef{Name: "torch-distributed"},
		},
		Status: trainerv1alpha1.TrainJobStatus{
			Conditions: conditions,
			JobsStatus: []trainerv1alpha1.JobStatus{{
				Name: "node", Ready: ptr.To[int32](1), Succeeded: ptr.To[int32](0),
				Failed: ptr.To[int32](0), Active: ptr.To[int32](1), Suspended: ptr.To[int32](0),
			}},
		},
	}
	return toUnstructured(t, tj)
}

// trainJobCondition is a TrainJob condition; Complete and Failed are copied
// from the JobSet's Completed and Failed conditions by the trainer's JobSet
// plugin, reason and message included.
func trainJobCondition(t string, status metav1.ConditionStatus, reason, message string) metav1.Condition {
	return metav1.Condition{Type: t, Status: status, LastTransitionTime: sampleEnd, Reason: reason, Message: message}
}

// --- KubeRay RayJob ---

func rayJob(t testing.TB, deployment rayv1.JobDeploymentStatus, job rayv1.JobStatus, reason rayv1.JobFailedReason, message string) map[string]any {
	rj := &rayv1.RayJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: rayv1.GroupVersion.String(), Kind: "RayJob"},
		ObjectMeta: objectMeta("benchmark"),
		Spec: rayv1.RayJobSpec{
			Entrypoint:               "python /home/ray/samples/benchmark.py",
			ShutdownAfterJobFinishes: true,
		},
		Status: rayv1.RayJobStatus{
			JobId:               "benchmark-x7k2p",
			RayClusterName:      "benchmark-raycluster-9vq4d",
			JobDeploymentStatus: deployment,
			JobStatus:           job,
			Reason:              reason,
			Message:             message,
			StartTime:           &sampleStart,
			Succeeded:           ptr.To[int32](0),
			Failed:              ptr.To[int32](0),
		},
	}
	return toUnstructured(t, rj)
}

// --- core/v1 Pod ---

func pod(t testing.TB, phase corev1.PodPhase, reason, message string) map[string]any {
	p := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: objectMeta("benchmark"),
		Spec:       podTemplate().Spec,
		Status: corev1.PodStatus{
			Phase:     phase,
			Reason:    reason,
			Message:   message,
			StartTime: &sampleStart,
		},
	}
	return toUnstructured(t, p)
}

// --- Argo Workflow (hand-written: no Go types in this module graph) ---

func workflow(status map[string]any) map[string]any {
	m := map[string]any{
		"apiVersion": "argoproj.io/v1alpha1",
		"kind":       "Workflow",
		"metadata":   map[string]any{"name": "benchmark", "namespace": "team-a"},
		"spec": map[string]any{
			"entrypoint": "main",
			"templates":  []any{map[string]any{"name": "main", "container": map[string]any{"image": "alpine:3.20"}}},
		},
	}
	if status != nil {
		m["status"] = status
	}
	return m
}

// appWrapper is the AppWrapper that holds the trigger, as unstructured.
func appWrapper() map[string]any {
	return map[string]any{
		"apiVersion": "workload.codeflare.dev/v1beta2",
		"kind":       "AppWrapper",
		"metadata": map[string]any{
			"name":      "benchmark",
			"namespace": "team-a",
			"labels":    map[string]any{"llm-d.ai/role": "benchmark"},
		},
		"spec": map[string]any{"components": []any{map[string]any{"template": map[string]any{"kind": "Job"}}}},
		"status": map[string]any{
			"phase":      "Running",
			"conditions": []any{map[string]any{"type": "QuotaReserved", "status": "True"}},
		},
	}
}

// jobSetMessages are JobSet's own condition reasons and messages.
var (
	jobSetCompletedReason  = jobsetconstants.AllJobsCompletedReason
	jobSetCompletedMessage = jobsetconstants.AllJobsCompletedMessage
	jobSetFailedReason     = jobsetconstants.FailedJobsReason
	jobSetFailedMessage    = jobsetconstants.FailedJobsMessage
)

var (
	trainJobSuspendedMessage = trainerconstants.TrainJobSuspendedMessage
	trainJobResumedMessage   = trainerconstants.TrainJobResumedMessage
	trainJobDeadlineMessage  = trainerconstants.TrainJobDeadlineExceededMessage
)

// The other training-operator v1 kinds Kueue admits, built from the
// operator's own types (v1.9.3 pkg/apis/kubeflow.org/v1).

func tfJob(t testing.TB, status kftov1.JobStatus) map[string]any {
	return toUnstructured(t, &kftov1.TFJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: kftov1.GroupVersion.String(), Kind: kftov1.TFJobKind},
		ObjectMeta: objectMeta("benchmark"),
		Spec: kftov1.TFJobSpec{TFReplicaSpecs: map[kftov1.ReplicaType]*kftov1.ReplicaSpec{
			kftov1.TFJobReplicaTypeChief: {Replicas: ptr.To[int32](1), Template: podTemplate()},
		}},
		Status: status,
	})
}

func xgboostJob(t testing.TB, status kftov1.JobStatus) map[string]any {
	return toUnstructured(t, &kftov1.XGBoostJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: kftov1.GroupVersion.String(), Kind: kftov1.XGBoostJobKind},
		ObjectMeta: objectMeta("benchmark"),
		Spec: kftov1.XGBoostJobSpec{XGBReplicaSpecs: map[kftov1.ReplicaType]*kftov1.ReplicaSpec{
			kftov1.XGBoostJobReplicaTypeMaster: {Replicas: ptr.To[int32](1), Template: podTemplate()},
		}},
		Status: status,
	})
}

func jaxJob(t testing.TB, status kftov1.JobStatus) map[string]any {
	return toUnstructured(t, &kftov1.JAXJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: kftov1.GroupVersion.String(), Kind: kftov1.JAXJobKind},
		ObjectMeta: objectMeta("benchmark"),
		Spec: kftov1.JAXJobSpec{JAXReplicaSpecs: map[kftov1.ReplicaType]*kftov1.ReplicaSpec{
			kftov1.JAXJobReplicaTypeWorker: {Replicas: ptr.To[int32](1), Template: podTemplate()},
		}},
		Status: status,
	})
}

func paddleJob(t testing.TB, status kftov1.JobStatus) map[string]any {
	return toUnstructured(t, &kftov1.PaddleJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: kftov1.GroupVersion.String(), Kind: kftov1.PaddleJobKind},
		ObjectMeta: objectMeta("benchmark"),
		Spec: kftov1.PaddleJobSpec{PaddleReplicaSpecs: map[kftov1.ReplicaType]*kftov1.ReplicaSpec{
			kftov1.PaddleJobReplicaTypeMaster: {Replicas: ptr.To[int32](1), Template: podTemplate()},
		}},
		Status: status,
	})
}
