package util

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The local control plane runs no kubelet and no workload controllers: these
// helpers write the status those would write, through the status
// subresource, in the shape the API server's validation accepts.

// JobStarted writes the status the Job controller writes once its pods run.
func JobStarted(ctx context.Context, c client.Client, key types.NamespacedName) {
	ginkgo.GinkgoHelper()
	updateJobStatus(ctx, c, key, func(j *batchv1.Job) { startJob(j, metav1.Now()) })
}

// startJob gives j the status the Job controller writes once its pods
// run, started at now unless it had started already.
func startJob(j *batchv1.Job, now metav1.Time) {
	if j.Status.StartTime == nil {
		j.Status.StartTime = &now
	}
	j.Status.Active = ptr.Deref(j.Spec.Parallelism, 1)
	j.Status.Ready = ptr.To(j.Status.Active)
}

// JobComplete writes the status the Job controller writes when a Job
// succeeds: SuccessCriteriaMet, then Complete, with completion time.
func JobComplete(ctx context.Context, c client.Client, key types.NamespacedName) {
	ginkgo.GinkgoHelper()
	updateJobStatus(ctx, c, key, func(j *batchv1.Job) { completeJob(j, metav1.Now()) })
}

// JobCompleteAt writes the status the Job controller writes when a Job
// succeeds, as it wrote it at at.
func JobCompleteAt(ctx context.Context, c client.Client, key types.NamespacedName, at time.Time) {
	ginkgo.GinkgoHelper()
	updateJobStatus(ctx, c, key, func(j *batchv1.Job) { completeJob(j, metav1.NewTime(at)) })
}

// completeJob gives j the status the Job controller writes when it
// succeeds at now (pkg/controller/job/job_controller.go, syncJob: the
// SuccessCriteriaMet condition, then Complete once its pods are done).
func completeJob(j *batchv1.Job, now metav1.Time) {
	if j.Status.StartTime == nil {
		j.Status.StartTime = ptr.To(metav1.NewTime(now.Add(-time.Second)))
	}
	j.Status.Active = 0
	j.Status.Ready = ptr.To[int32](0)
	j.Status.Succeeded = ptr.Deref(j.Spec.Completions, 1)
	j.Status.CompletionTime = &now
	j.Status.Conditions = append(j.Status.Conditions,
		batchv1.JobCondition{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, Reason: "CompletionsReached", Message: "Reached expected number of succeeded pods", LastProbeTime: now, LastTransitionTime: now},
		batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, Reason: "CompletionsReached", Message: "Reached expected number of succeeded pods", LastProbeTime: now, LastTransitionTime: now},
	)
}

// JobFailed writes the status the Job controller writes when a Job fails
// (backoff limit exceeded): FailureTarget, then Failed.
func JobFailed(ctx context.Context, c client.Client, key types.NamespacedName) {
	ginkgo.GinkgoHelper()
	updateJobStatus(ctx, c, key, func(j *batchv1.Job) { failJob(j, metav1.Now()) })
}

// failJob gives j the status the Job controller writes when it fails at
// now: FailureTarget, then Failed.
func failJob(j *batchv1.Job, now metav1.Time) {
	if j.Status.StartTime == nil {
		j.Status.StartTime = ptr.To(metav1.NewTime(now.Add(-time.Second)))
	}
	j.Status.Active = 0
	j.Status.Ready = ptr.To[int32](0)
	j.Status.Failed = 1
	j.Status.Conditions = append(j.Status.Conditions,
		batchv1.JobCondition{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", LastProbeTime: now, LastTransitionTime: now},
		batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", LastProbeTime: now, LastTransitionTime: now},
	)
}

// JobPodFailed writes a Job's status as its controller does when one of
// its pods failed and it retries (failed 1, no terminal condition): the
// AppWrapper controller sees no failed component yet.
func JobPodFailed(ctx context.Context, c client.Client, key types.NamespacedName) {
	ginkgo.GinkgoHelper()
	updateJobStatus(ctx, c, key, func(j *batchv1.Job) {
		if j.Status.StartTime == nil {
			j.Status.StartTime = ptr.To(metav1.NewTime(time.Now().Add(-time.Second)))
		}
		j.Status.Failed = 1
	})
}

func updateJobStatus(ctx context.Context, c client.Client, key types.NamespacedName, mutate func(*batchv1.Job)) {
	ginkgo.GinkgoHelper()
	gomega.Eventually(func(g gomega.Gomega) {
		j := &batchv1.Job{}
		g.Expect(c.Get(ctx, key, j)).To(gomega.Succeed())
		mutate(j)
		err := c.Status().Update(ctx, j)
		if apierrors.IsInvalid(err) && strings.Contains(err.Error(), string(batchv1.JobSuccessCriteriaMet)) {
			// An API server older than the Job controller that writes
			// SuccessCriteriaMet for every Job (v1.30, make test-oldest)
			// refuses it on a Job without a success policy, whose Job
			// controller writes Complete alone.
			j.Status.Conditions = slices.DeleteFunc(j.Status.Conditions, func(c batchv1.JobCondition) bool {
				return c.Type == batchv1.JobSuccessCriteriaMet
			})
			err = c.Status().Update(ctx, j)
		}
		g.Expect(err).To(gomega.Succeed())
	}, Timeout, Interval).Should(gomega.Succeed(), "writing the status of Job %s", key)
}

// CreatePod creates a pod as a workload controller would, labelled as part
// of the AppWrapper and owned by owner, then writes its phase as the kubelet
// would. It returns the pod.
func CreatePod(ctx context.Context, c client.Client, ns, name, appWrapper string, owner client.Object, phase corev1.PodPhase) *corev1.Pod {
	ginkgo.GinkgoHelper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: ns,
			Labels:    map[string]string{awv1beta2.AppWrapperLabel: appWrapper},
		},
		Spec: podSpec(),
	}
	if owner != nil {
		gvk := owner.GetObjectKind().GroupVersionKind()
		pod.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind,
			Name: owner.GetName(), UID: owner.GetUID(), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
		}}
	}
	gomega.Expect(c.Create(ctx, pod)).To(gomega.Succeed())
	SetPodPhase(ctx, c, client.ObjectKeyFromObject(pod), phase)
	return pod
}

// SetPodPhase writes a pod's phase as the kubelet would.
func SetPodPhase(ctx context.Context, c client.Client, key types.NamespacedName, phase corev1.PodPhase) {
	ginkgo.GinkgoHelper()
	gomega.Eventually(func(g gomega.Gomega) {
		pod := &corev1.Pod{}
		g.Expect(c.Get(ctx, key, pod)).To(gomega.Succeed())
		pod.Status.Phase = phase
		now := metav1.Now()
		if pod.Status.StartTime == nil {
			pod.Status.StartTime = &now
		}
		ready := corev1.ConditionFalse
		if phase == corev1.PodRunning {
			ready = corev1.ConditionTrue
		}
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready, LastTransitionTime: now}}
		g.Expect(c.Status().Update(ctx, pod)).To(gomega.Succeed())
	}, Timeout, Interval).Should(gomega.Succeed(), "writing the phase of pod %s", key)
}

// ExpectAppWrapperPhase waits for an AppWrapper's phase.
func ExpectAppWrapperPhase(ctx context.Context, c client.Client, key types.NamespacedName, phase awv1beta2.AppWrapperPhase) {
	ginkgo.GinkgoHelper()
	gomega.Eventually(func(g gomega.Gomega) {
		aw := &awv1beta2.AppWrapper{}
		g.Expect(c.Get(ctx, key, aw)).To(gomega.Succeed())
		g.Expect(aw.Status.Phase).To(gomega.Equal(phase))
	}, Timeout, Interval).Should(gomega.Succeed())
}

// ExpectGone waits until obj no longer exists.
func ExpectGone(ctx context.Context, c client.Client, obj client.Object, timeout time.Duration) {
	ginkgo.GinkgoHelper()
	gomega.Eventually(func() error {
		err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("%T %s still exists (deletionTimestamp %v)", obj, client.ObjectKeyFromObject(obj), obj.GetDeletionTimestamp())
	}, timeout, Interval).Should(gomega.Succeed())
}
