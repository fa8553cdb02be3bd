package pods

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/test/framework"
	"github.com/wrapup-dev/wrapup/test/util"
)

// One node of 8 GPUs; each benchmark asks for all 8: two inference
// Deployments of 2 GPUs and a guidellm Job of 4.
const nodeGPUs = 8

// podTimeout bounds what takes the whole chain (Kueue, the AppWrapper
// controller, the Deployment and Job controllers, the scheduler, kwok).
const podTimeout = 2 * time.Minute

// retryTimeout bounds a failing benchmark's two attempts: the AppWrapper
// controller may take up to a minute (its recheck period) to see a failed
// component.
const retryTimeout = 5 * time.Minute

var _ = Describe("GPUs handed to the next benchmark, with real pods", Ordered, func() {
	var (
		ns    *corev1.Namespace
		lq    *kueue.LocalQueue
		nodes []*corev1.Node
	)

	BeforeAll(func() {
		ns = framework.CreateNamespace(ctx, k8sClient, "pods", nil)
		ns.Labels = map[string]string{"wrapup.test/namespace": ns.Name}
		Expect(k8sClient.Update(ctx, ns)).To(Succeed())
		nodes = framework.CreateGPUNodes(ctx, k8sClient, "gpu", "h100", 1, nodeGPUs)
		flavor := util.MakeGPUFlavor("h100", framework.GPUNodeLabel, "h100")
		Expect(k8sClient.Create(ctx, flavor)).To(Succeed())
		cq := util.MakeGPUClusterQueue("gpus", flavor.Name, "32", nodeGPUs)
		Expect(k8sClient.Create(ctx, cq)).To(Succeed())
		lq = util.MakeLocalQueue("benchmarks", ns.Name, cq.Name)
		Expect(k8sClient.Create(ctx, lq)).To(Succeed())
		rule := util.MakeRule("gpu-benchmarks").AppWrapperLabels(map[string]string{"llm-d.ai/role": "benchmark"}).
			NamespaceLabels(map[string]string{"wrapup.test/namespace": ns.Name}).
			TriggerKind("batch", "Job", "").
			OnFailure(wrapupv1alpha1.ActionDeleteAll, 0).Obj()
		Expect(k8sClient.Create(ctx, rule)).To(Succeed())
		DeferCleanup(func() {
			for _, o := range []client.Object{rule, ns, lq, cq, flavor} {
				Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, o))).To(Succeed())
			}
		})
	})

	It("finishes a benchmark when its guidellm pod succeeds, and the next one's pods run on the freed GPUs", func() {
		first := submit(ns.Name, lq.Name, "llama-8b", "3s", false, nil)

		By("Kueue admits the first; its pods are bound to the GPU node and run")
		running := expectPodsRunning(ns.Name, first.Name, nodes[0].Name)
		Expect(gpusInUse(nodes[0].Name)).To(Equal(int64(nodeGPUs)))
		// Queued once the first is admitted: Kueue orders Workloads created
		// in the same second by UID.
		second := submit(ns.Name, lq.Name, "qwen-32b", "3s", false, nil)
		util.ExpectWorkloadCondition(ctx, k8sClient, second, kueue.WorkloadQuotaReserved, metav1.ConditionFalse)

		By("the guidellm pod succeeds; the Job controller completes the Job; wrapup deletes the AppWrapper")
		// The test's own clock: the conditions' and pods' times have
		// whole seconds only.
		complete := util.AwaitJobComplete(ctx, k8sClient, client.ObjectKey{Namespace: ns.Name, Name: first.Name + "-guidellm"}, podTimeout)
		util.ExpectGone(ctx, k8sClient, first, podTimeout)

		By("its pods terminate, and the second benchmark's pods run on the freed GPUs")
		Eventually(func() []string { return podsOf(ns.Name, first.Name) }, podTimeout, util.Interval).Should(BeEmpty())
		expectPodsRunning(ns.Name, second.Name, nodes[0].Name)
		Expect(gpusInUse(nodes[0].Name)).To(Equal(int64(nodeGPUs)))
		GinkgoWriter.Printf("first benchmark's pods Running at %s; its Job seen Complete, then the next benchmark's pods all seen Running %s later\n",
			running.Format(time.RFC3339), time.Since(complete).Round(10*time.Millisecond))

		By("the second finishes the same way, and the node is free")
		util.ExpectGone(ctx, k8sClient, second, podTimeout)
		Eventually(func() int64 { return gpusInUse(nodes[0].Name) }, podTimeout, util.Interval).Should(BeZero())
	})

	It("finishes a failing benchmark only after the AppWrapper controller's retry, on the last attempt's Job, then frees its GPUs", func() {
		aw := submit(ns.Name, lq.Name, "mistral-7b", "1s", true, map[string]string{
			awv1beta2.RetryLimitAnnotation:                 "1",
			awv1beta2.FailureGracePeriodDurationAnnotation: "1s",
			awv1beta2.RetryPausePeriodDurationAnnotation:   "1s",
		})
		By("the guidellm pod fails; the Job fails; the AppWrapper controller resets and retries once, creating the Job again")
		jobs := map[string]bool{}
		var lastJob string
		phases := map[awv1beta2.AppWrapperPhase]bool{}
		Eventually(func(g Gomega) {
			job := &batchv1.Job{}
			if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: aw.Name + "-guidellm"}, job); err == nil {
				jobs[string(job.UID)] = true
				lastJob = string(job.UID)
			}
			got := &awv1beta2.AppWrapper{}
			err := k8sClient.Get(ctx, client.ObjectKeyFromObject(aw), got)
			if err == nil {
				phases[got.Status.Phase] = true
			}
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the AppWrapper is still there (phase %s)", got.Status.Phase)
		}, retryTimeout, 100*time.Millisecond).Should(Succeed())
		Expect(len(jobs)).To(BeNumerically(">=", 2), "the Job was not created again by the retry: %v", jobs)
		Expect(phases).To(HaveKey(awv1beta2.AppWrapperResetting), "the AppWrapper controller did not retry (phases seen: %v)", phases)
		By("wrapup decided on the last attempt's Job: the outcome Failed")
		var records wrapupv1alpha1.CompletionRecordList
		Expect(k8sClient.List(ctx, &records, client.InNamespace(ns.Name))).To(Succeed())
		var record *wrapupv1alpha1.CompletionRecord
		for i := range records.Items {
			if records.Items[i].AppWrapper.Name == aw.Name {
				record = &records.Items[i]
			}
		}
		Expect(record).NotTo(BeNil(), "no CompletionRecord of %s", aw.Name)
		Expect(record.Outcome).To(Equal(wrapupv1alpha1.OutcomeFailed))
		var decided []string
		for _, t := range record.Triggers {
			if t.Decided {
				decided = append(decided, string(t.UID))
			}
		}
		// The AppWrapper controller deletes a Failed AppWrapper's components
		// at once (appwrapper internal/controller/appwrapper/
		// appwrapper_controller.go, Reconcile, case AppWrapperFailed, with no
		// deletionOnFailureGracePeriod): when wrapup decides after the last
		// Job is gone from its cache, the AppWrapper's phase decides, and the
		// record names no Job. Never an earlier attempt's.
		for uid := range jobs {
			if uid != lastJob {
				Expect(decided).NotTo(ContainElement(uid), "the outcome was decided on a Job of an earlier attempt")
			}
		}
		Expect(decided).To(Or(ConsistOf(lastJob), ConsistOf("")), "the outcome was decided on neither the last attempt's Job nor the AppWrapper's phase")
		By("its pods are gone and the GPUs free")
		Eventually(func() []string { return podsOf(ns.Name, aw.Name) }, podTimeout, util.Interval).Should(BeEmpty())
		Eventually(func() int64 { return gpusInUse(nodes[0].Name) }, podTimeout, util.Interval).Should(BeZero())
	})

	It("never takes a pod its kubelet made Succeeded while deleting it (Kueue's preemption) as the trigger's success", func() {
		rule := util.MakeRule("pod-probes").AppWrapperLabels(map[string]string{"llm-d.ai/role": "probe"}).
			NamespaceLabels(map[string]string{"wrapup.test/namespace": ns.Name}).
			TriggerKind("", "Pod", "").
			OnSuccess(wrapupv1alpha1.ActionDeleteAll, 0).Obj()
		Expect(k8sClient.Create(ctx, rule)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, rule))).To(Succeed()) })

		// A bare Pod that serves until stopped, and exits 0 on SIGTERM; it
		// lingers a moment once terminal (the kwok stages pod-terminate
		// and pod-delete), as a kubelet's status reaches the API server
		// before the pod goes.
		pod := &corev1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: "probe", Annotations: map[string]string{"pod-linger.stage.kwok.x-k8s.io/delay": "3s"}},
			Spec:       util.GPUPod(1),
		}
		pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
		aw := util.MakeAppWrapper("probe", ns.Name).Label("llm-d.ai/role", "probe").Label(util.QueueNameLabel, lq.Name).
			Suspend(true).Component(pod, nil).Obj()
		Expect(k8sClient.Create(ctx, aw)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, aw))).To(Succeed()) })
		util.ExpectPodsRunning(ctx, k8sClient, ns.Name, aw.Name, nodes[0].Name, 1, podTimeout)

		By("Kueue evicts the Workload (deactivated); the AppWrapper controller tears its Pod down")
		Eventually(func(g Gomega) {
			wl, err := util.WorkloadFor(ctx, k8sClient, aw)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(wl).NotTo(BeNil())
			wl.Spec.Active = ptr.To(false)
			g.Expect(k8sClient.Update(ctx, wl)).To(Succeed())
		}, podTimeout, util.Interval).Should(Succeed())

		By("the pod is Succeeded while it is deleted, and wrapup records nothing")
		sawTerminal := false
		Eventually(func(g Gomega) {
			for _, p := range util.PodsOf(ctx, k8sClient, ns.Name, aw.Name) {
				if p.DeletionTimestamp != nil && p.Status.Phase == corev1.PodSucceeded {
					sawTerminal = true
				}
			}
			got := &awv1beta2.AppWrapper{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(aw), got)).To(Succeed(), "wrapup deleted the preempted AppWrapper")
			g.Expect(got.Labels).NotTo(HaveKey(wrapupv1alpha1.OutcomeLabel), "wrapup recorded an outcome of the torn-down pod")
			g.Expect(sawTerminal).To(BeTrue(), "the pod was not seen Succeeded while being deleted")
			g.Expect(util.PodsOf(ctx, k8sClient, ns.Name, aw.Name)).To(BeEmpty())
			g.Expect(got.Status.Phase).To(Equal(awv1beta2.AppWrapperSuspended))
		}, podTimeout, 50*time.Millisecond).Should(Succeed())
		Consistently(func(g Gomega) {
			got := &awv1beta2.AppWrapper{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(aw), got)).To(Succeed(), "wrapup deleted the preempted AppWrapper")
			g.Expect(got.Labels).NotTo(HaveKey(wrapupv1alpha1.OutcomeLabel))
			err := k8sClient.Get(ctx, client.ObjectKey{Namespace: got.Namespace, Name: wrapupv1alpha1.RecordName(got.Name, got.UID)}, &wrapupv1alpha1.CompletionRecord{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "wrapup recorded an outcome of the torn-down pod: %v", err)
		}, 3*time.Second, util.Interval).Should(Succeed())
	})
})

// submit queues a GPU benchmark whose guidellm pod runs for runTime, and
// fails if fail; annotations go on the AppWrapper.
func submit(ns, queue, name, runTime string, fail bool, annotations map[string]string) *awv1beta2.AppWrapper {
	GinkgoHelper()
	job := map[string]string{framework.RunTimeAnnotation: runTime}
	if fail {
		job[framework.FailAnnotation] = "true"
	}
	w := util.GPUBenchmark(ns, queue, name, job)
	for k, v := range annotations {
		w.Annotation(k, v)
	}
	aw := w.Obj()
	Expect(k8sClient.Create(ctx, aw)).To(Succeed())
	return aw
}

func podsOf(ns, aw string) []string {
	GinkgoHelper()
	var names []string
	for _, p := range util.PodsOf(ctx, k8sClient, ns, aw) {
		names = append(names, p.Name)
	}
	return names
}

func expectPodsRunning(ns, aw, node string) time.Time {
	GinkgoHelper()
	_, last := util.ExpectPodsRunning(ctx, k8sClient, ns, aw, node, 3, podTimeout)
	return last
}

// gpusInUse counts the GPUs in use on node, in every namespace.
func gpusInUse(node string) int64 {
	GinkgoHelper()
	return util.GPUsInUse(ctx, k8sClient, node)
}
