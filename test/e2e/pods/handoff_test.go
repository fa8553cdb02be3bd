package pods

import (
	"sort"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
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
// controller looks at a failed component about once a minute, so each
// attempt takes a minute or so before it is reset or failed.
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
		flavor := &kueue.ResourceFlavor{
			ObjectMeta: metav1.ObjectMeta{Name: "h100"},
			Spec:       kueue.ResourceFlavorSpec{NodeLabels: map[string]string{framework.GPUNodeLabel: "h100"}},
		}
		Expect(k8sClient.Create(ctx, flavor)).To(Succeed())
		cq := &kueue.ClusterQueue{
			ObjectMeta: metav1.ObjectMeta{Name: "gpus"},
			Spec: kueue.ClusterQueueSpec{
				NamespaceSelector: &metav1.LabelSelector{},
				ResourceGroups: []kueue.ResourceGroup{{
					CoveredResources: []corev1.ResourceName{corev1.ResourceCPU, framework.GPU},
					Flavors: []kueue.FlavorQuotas{{
						Name: "h100",
						Resources: []kueue.ResourceQuota{
							{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("32")},
							{Name: framework.GPU, NominalQuota: *resource.NewQuantity(nodeGPUs, resource.DecimalSI)},
						},
					}},
				}},
			},
		}
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
		first := submit(ns.Name, lq.Name, "llama-8b", "3s", false)
		second := submit(ns.Name, lq.Name, "qwen-32b", "3s", false)

		By("Kueue admits the first; its pods are bound to the GPU node and run")
		running := expectPodsRunning(ns.Name, first.Name, nodes[0].Name)
		Expect(gpusInUse(ns.Name, nodes[0].Name)).To(Equal(int64(nodeGPUs)))
		expectSuspended(second)

		By("the guidellm pod succeeds; the Job controller completes the Job; wrapup deletes the AppWrapper")
		job := &batchv1.Job{}
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: first.Name + "-guidellm"}, job)).To(Succeed())
			g.Expect(jobCondition(job, batchv1.JobComplete)).NotTo(BeNil())
		}, podTimeout, util.Interval).Should(Succeed())
		complete := jobCondition(job, batchv1.JobComplete).LastTransitionTime.Time
		util.ExpectGone(ctx, k8sClient, first, podTimeout)

		By("its pods terminate, and the second benchmark's pods run on the freed GPUs")
		Eventually(func() []string { return podsOf(ns.Name, first.Name) }, podTimeout, util.Interval).Should(BeEmpty())
		next := expectPodsRunning(ns.Name, second.Name, nodes[0].Name)
		Expect(gpusInUse(ns.Name, nodes[0].Name)).To(Equal(int64(nodeGPUs)))
		GinkgoWriter.Printf("first benchmark's pods Running at %s; its Job Complete at %s; the next benchmark's pods all Running %s later\n",
			running.Format(time.RFC3339), complete.Format(time.RFC3339), next.Sub(complete).Round(time.Millisecond))

		By("the second finishes the same way, and the node is free")
		util.ExpectGone(ctx, k8sClient, second, podTimeout)
		Eventually(func() int64 { return gpusInUse(ns.Name, nodes[0].Name) }, podTimeout, util.Interval).Should(BeZero())
	})

	It("finishes a failing benchmark only after the AppWrapper controller's retries, then frees its GPUs", func() {
		aw := submitWith(ns.Name, lq.Name, "mistral-7b", "1s", true, map[string]string{
			awv1beta2.RetryLimitAnnotation:                 "1",
			awv1beta2.FailureGracePeriodDurationAnnotation: "1s",
			awv1beta2.RetryPausePeriodDurationAnnotation:   "1s",
		})
		By("the guidellm pod fails; the Job fails; the AppWrapper controller resets and retries once, creating the Job again")
		jobs := map[string]bool{}
		phases := map[awv1beta2.AppWrapperPhase]bool{}
		Eventually(func(g Gomega) {
			job := &batchv1.Job{}
			if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: aw.Name + "-guidellm"}, job); err == nil {
				jobs[string(job.UID)] = true
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
		By("its pods are gone and the GPUs free")
		Eventually(func() []string { return podsOf(ns.Name, aw.Name) }, podTimeout, util.Interval).Should(BeEmpty())
		Eventually(func() int64 { return gpusInUse(ns.Name, nodes[0].Name) }, podTimeout, util.Interval).Should(BeZero())
	})
})

// submit queues an llm-d style benchmark AppWrapper for Kueue: two vLLM
// Deployments of 2 GPUs each and a guidellm Job of 4 GPUs whose pod runs
// for runTime (and fails if fail).
func submit(ns, queue, name, runTime string, fail bool) *awv1beta2.AppWrapper {
	GinkgoHelper()
	return submitWith(ns, queue, name, runTime, fail, nil)
}

// submitWith is submit with annotations on the AppWrapper.
func submitWith(ns, queue, name, runTime string, fail bool, annotations map[string]string) *awv1beta2.AppWrapper {
	GinkgoHelper()
	job := util.MakeJob(name + "-guidellm").Obj()
	job.Spec.Template.Spec = gpuPod(4)
	job.Spec.Template.Annotations = map[string]string{framework.RunTimeAnnotation: runTime}
	if fail {
		job.Spec.Template.Annotations[framework.FailAnnotation] = "true"
	}
	w := util.MakeAppWrapper(name, ns).
		Label("llm-d.ai/role", "benchmark").
		Label(util.QueueNameLabel, queue).
		Suspend(true)
	for k, v := range annotations {
		w.Annotation(k, v)
	}
	for _, role := range []string{"prefill", "decode"} {
		d := util.MakeDeployment(name+"-"+role, 1)
		d.Spec.Template.Spec = gpuPod(2)
		d.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
		w.Component(d, nil)
	}
	aw := w.Component(util.MakeConfigMap(name+"-config", map[string]string{"rate": "sweep"}), nil).Component(job, nil).Obj()
	Expect(k8sClient.Create(ctx, aw)).To(Succeed())
	return aw
}

func gpuPod(gpus int64) corev1.PodSpec {
	q := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("1"),
		framework.GPU:      *resource.NewQuantity(gpus, resource.DecimalSI),
	}
	return corev1.PodSpec{
		RestartPolicy:                 corev1.RestartPolicyNever,
		TerminationGracePeriodSeconds: ptr.To[int64](0),
		Containers: []corev1.Container{{
			Name: "main", Image: "registry.invalid/wrapup/test:1",
			Resources: corev1.ResourceRequirements{Requests: q, Limits: q},
		}},
	}
}

// podsOf lists the names of the pods of an AppWrapper's components.
func podsOf(ns, aw string) []string {
	GinkgoHelper()
	var pods corev1.PodList
	Expect(k8sClient.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{awv1beta2.AppWrapperLabel: aw})).To(Succeed())
	var names []string
	for _, p := range pods.Items {
		names = append(names, p.Name)
	}
	sort.Strings(names)
	return names
}

// expectPodsRunning waits until the AppWrapper's three pods are Running on
// node, and returns when the last of them started.
func expectPodsRunning(ns, aw, node string) time.Time {
	GinkgoHelper()
	var last time.Time
	Eventually(func(g Gomega) {
		var pods corev1.PodList
		g.Expect(k8sClient.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{awv1beta2.AppWrapperLabel: aw})).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(3), "pods of %s", aw)
		last = time.Time{}
		for _, p := range pods.Items {
			g.Expect(p.Spec.NodeName).To(Equal(node), "pod %s", p.Name)
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "pod %s", p.Name)
			g.Expect(p.Status.StartTime).NotTo(BeNil())
			if t := p.Status.StartTime.Time; t.After(last) {
				last = t
			}
		}
	}, podTimeout, util.Interval).Should(Succeed())
	return last
}

// gpusInUse sums the GPUs that the namespace's pods bound to node and not
// finished ask for.
func gpusInUse(ns, node string) int64 {
	GinkgoHelper()
	var pods corev1.PodList
	Expect(k8sClient.List(ctx, &pods, client.InNamespace(ns))).To(Succeed())
	var n int64
	for _, p := range pods.Items {
		if p.Spec.NodeName != node || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, c := range p.Spec.Containers {
			n += c.Resources.Requests.Name(framework.GPU, resource.DecimalSI).Value()
		}
	}
	return n
}

func expectSuspended(aw *awv1beta2.AppWrapper) {
	GinkgoHelper()
	got := &awv1beta2.AppWrapper{}
	Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(aw), got)).To(Succeed())
	Expect(got.Spec.Suspend).To(BeTrue(), "%s was admitted with no GPUs left", aw.Name)
}

func jobCondition(job *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range job.Status.Conditions {
		if c := job.Status.Conditions[i]; c.Type == t && c.Status == corev1.ConditionTrue {
			return &job.Status.Conditions[i]
		}
	}
	return nil
}
