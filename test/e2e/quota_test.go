package e2e

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/test/framework"
	"github.com/wrapup-dev/wrapup/test/util"
)

// Each benchmark AppWrapper asks for 300m CPU (two inference pods and one
// benchmark pod at 100m); the ClusterQueue has quota for exactly one.
const quota = "300m"

var _ = Describe("Kueue quota after a benchmark finishes", func() {
	var (
		ns    *corev1.Namespace
		cq    *kueue.ClusterQueue
		lq    *kueue.LocalQueue
		rule  *wrapupv1alpha1.CompletionRule
		names string
	)

	BeforeEach(func() {
		ns = framework.CreateNamespace(ctx, k8sClient, "e2e", nil)
		ns.Labels = map[string]string{"wrapup.test/namespace": ns.Name}
		Expect(k8sClient.Update(ctx, ns)).To(Succeed())
		names = ns.Name
		flavor := util.MakeResourceFlavor(names)
		Expect(k8sClient.Create(ctx, flavor)).To(Succeed())
		cq = util.MakeClusterQueue(names, names, quota)
		Expect(k8sClient.Create(ctx, cq)).To(Succeed())
		lq = util.MakeLocalQueue("benchmarks", ns.Name, cq.Name)
		Expect(k8sClient.Create(ctx, lq)).To(Succeed())
		DeferCleanup(func() {
			if rule != nil {
				Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, rule))).To(Succeed())
			}
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, ns))).To(Succeed())
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, lq))).To(Succeed())
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, cq))).To(Succeed())
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, flavor))).To(Succeed())
		})
	})

	createRule := func(w *util.RuleWrapper) {
		GinkgoHelper()
		rule = w.AppWrapperLabels(map[string]string{"llm-d.ai/role": "benchmark"}).
			NamespaceLabels(map[string]string{"wrapup.test/namespace": ns.Name}).
			TriggerKind("batch", "Job", "").Obj()
		rule.Name = names + "-benchmarks"
		Expect(k8sClient.Create(ctx, rule)).To(Succeed())
	}

	// submit queues an llm-d style benchmark AppWrapper: two inference
	// Deployments, a ConfigMap and the benchmark Job (the trigger).
	submit := func(name string, annotations map[string]string) *awv1beta2.AppWrapper {
		GinkgoHelper()
		w := util.MakeBenchmarkAppWrapper(name, ns.Name, lq.Name)
		for k, v := range annotations {
			w.Annotation(k, v)
		}
		aw := w.Obj()
		Expect(k8sClient.Create(ctx, aw)).To(Succeed())
		return aw
	}

	// run plays the Deployment controller, the Job controller and the
	// kubelet for an admitted AppWrapper: its pods run.
	run := func(aw *awv1beta2.AppWrapper) types.NamespacedName {
		GinkgoHelper()
		util.ExpectAppWrapperPhase(ctx, k8sClient, client.ObjectKeyFromObject(aw), awv1beta2.AppWrapperRunning)
		for _, d := range []string{aw.Name + "-prefill", aw.Name + "-decode"} {
			deploy := &appsv1.Deployment{}
			Eventually(func() error {
				return k8sClient.Get(ctx, types.NamespacedName{Namespace: ns.Name, Name: d}, deploy)
			}, util.Timeout, util.Interval).Should(Succeed())
			deploy.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
			util.CreatePod(ctx, k8sClient, ns.Name, d+"-0", aw.Name, deploy, corev1.PodRunning)
		}
		job := types.NamespacedName{Namespace: ns.Name, Name: aw.Name + "-guidellm"}
		Eventually(func() error { return k8sClient.Get(ctx, job, &batchv1.Job{}) }, util.Timeout, util.Interval).Should(Succeed())
		util.JobStarted(ctx, k8sClient, job)
		return job
	}

	expectPending := func(aw *awv1beta2.AppWrapper, d time.Duration) {
		GinkgoHelper()
		Consistently(func(g Gomega) {
			wl, err := util.WorkloadFor(ctx, k8sClient, aw)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(wl).NotTo(BeNil())
			for _, c := range wl.Status.Conditions {
				if c.Type == kueue.WorkloadQuotaReserved || c.Type == kueue.WorkloadAdmitted {
					g.Expect(c.Status).To(Equal(metav1.ConditionFalse), "%s %s", c.Type, c.Message)
				}
			}
			got := &awv1beta2.AppWrapper{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(aw), got)).To(Succeed())
			g.Expect(got.Spec.Suspend).To(BeTrue())
		}, d, util.Interval).Should(Succeed())
	}

	expectUsage := func(admitted, pending int32, cpu string) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			got := &kueue.ClusterQueue{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(cq), got)).To(Succeed())
			g.Expect(got.Status.AdmittedWorkloads).To(Equal(admitted))
			g.Expect(got.Status.PendingWorkloads).To(Equal(pending))
			g.Expect(got.Status.FlavorsUsage).To(HaveLen(1))
			used := resource.Quantity{}
			for _, r := range got.Status.FlavorsUsage[0].Resources {
				if r.Name == corev1.ResourceCPU {
					used = r.Total
				}
			}
			g.Expect(used.Cmp(resource.MustParse(cpu))).To(BeZero(), "cpu in use %s, want %s", used.String(), cpu)
		}, util.LongTimeout, util.Interval).Should(Succeed())
	}

	// queueTwo submits two benchmarks: the first is admitted and runs, the
	// second waits for quota.
	queueTwo := func(firstAnnotations map[string]string) (*awv1beta2.AppWrapper, *awv1beta2.AppWrapper, types.NamespacedName) {
		GinkgoHelper()
		first := submit("first", firstAnnotations)
		util.ExpectWorkloadCondition(ctx, k8sClient, first, kueue.WorkloadAdmitted, metav1.ConditionTrue)
		job := run(first)
		second := submit("second", nil)
		util.ExpectWorkloadCondition(ctx, k8sClient, second, kueue.WorkloadQuotaReserved, metav1.ConditionFalse)
		expectUsage(1, 1, quota)
		expectPending(second, time.Second)
		return first, second, job
	}

	It("admits the next AppWrapper once the first one's benchmark Job completes", func() {
		createRule(util.MakeRule("x"))
		first, second, job := queueTwo(nil)

		util.JobComplete(ctx, k8sClient, job)
		completed := time.Now()
		firstWl, err := util.WorkloadFor(ctx, k8sClient, first)
		Expect(err).NotTo(HaveOccurred())
		Expect(firstWl).NotTo(BeNil())

		util.ExpectWorkloadCondition(ctx, k8sClient, second, kueue.WorkloadAdmitted, metav1.ConditionTrue)
		admittedAfter := time.Since(completed)
		AddReportEntry("Job Complete → next AppWrapper admitted", admittedAfter.String())
		GinkgoWriter.Printf("Job Complete -> second Workload admitted: %v\n", admittedAfter)

		util.ExpectGone(ctx, k8sClient, first, util.LongTimeout)
		util.ExpectGone(ctx, k8sClient, firstWl, util.LongTimeout)
		for _, name := range []string{"first-prefill-0", "first-decode-0"} {
			util.ExpectGone(ctx, k8sClient, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: name}}, util.LongTimeout)
		}
		expectUsage(1, 0, quota)
		util.ExpectAppWrapperPhase(ctx, k8sClient, client.ObjectKeyFromObject(second), awv1beta2.AppWrapperRunning)
	})

	It("keeps a failed benchmark for onFailure's TTL, then frees its quota", func() {
		createRule(util.MakeRule("x").OnFailure(wrapupv1alpha1.ActionDeleteAll, 4))
		first, second, job := queueTwo(map[string]string{awv1beta2.RetryLimitAnnotation: "0"})

		jobObj := &batchv1.Job{}
		Expect(k8sClient.Get(ctx, job, jobObj)).To(Succeed())
		jobObj.SetGroupVersionKind(batchv1.SchemeGroupVersion.WithKind("Job"))
		util.CreatePod(ctx, k8sClient, ns.Name, "first-guidellm-0", first.Name, jobObj, corev1.PodFailed)
		util.JobFailed(ctx, k8sClient, job)
		Eventually(func(g Gomega) {
			got := &awv1beta2.AppWrapper{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(first), got)).To(Succeed())
			g.Expect(got.Labels).To(HaveKeyWithValue(wrapupv1alpha1.OutcomeLabel, "Failed"))
		}, util.Timeout, util.Interval).Should(Succeed())

		By("the AppWrapper staying for the TTL")
		Consistently(func(g Gomega) {
			got := &awv1beta2.AppWrapper{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(first), got)).To(Succeed())
			g.Expect(got.DeletionTimestamp.IsZero()).To(BeTrue())
		}, "2s", util.Interval).Should(Succeed())

		By("the TTL expiring: the failed AppWrapper goes and the second is admitted")
		util.ExpectGone(ctx, k8sClient, first, util.LongTimeout)
		util.ExpectWorkloadCondition(ctx, k8sClient, second, kueue.WorkloadAdmitted, metav1.ConditionTrue)
	})

	It("keeps the quota held with UpdateStatus: the next AppWrapper waits", func() {
		createRule(util.MakeRule("x").OnSuccess(wrapupv1alpha1.ActionUpdateStatus, 0))
		first, second, job := queueTwo(nil)
		util.JobComplete(ctx, k8sClient, job)
		Eventually(func(g Gomega) {
			got := &awv1beta2.AppWrapper{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(first), got)).To(Succeed())
			g.Expect(got.Labels).To(HaveKeyWithValue(wrapupv1alpha1.OutcomeLabel, "Succeeded"))
		}, util.Timeout, util.Interval).Should(Succeed())
		expectPending(second, util.ConsistentDuration)
		expectUsage(1, 1, quota)
	})
})
