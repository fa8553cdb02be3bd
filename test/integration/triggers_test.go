package integration

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gstruct"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/test/util"
)

var _ = Describe("Several triggers", func() {
	var ns *corev1.Namespace
	BeforeEach(func() { ns = specNamespace("triggers") })

	// harness creates an AppWrapper with an inference ConfigMap and n
	// harness Jobs, waits until it runs, and returns the Jobs' keys.
	harness := func(name string, n int, w *util.AppWrapperWrapper) (*awv1beta2.AppWrapper, []types.NamespacedName) {
		GinkgoHelper()
		w.Component(util.MakeConfigMap(name+"-config", map[string]string{"rate": "10"}), nil)
		var jobs []types.NamespacedName
		for i := range n {
			jn := fmt.Sprintf("%s-h%d", name, i)
			w.Component(util.MakeJob(jn).Obj(), nil)
			jobs = append(jobs, types.NamespacedName{Namespace: ns.Name, Name: jn})
		}
		aw := w.Obj()
		createRunning(aw)
		for _, j := range jobs {
			expectJob(j)
			util.JobStarted(ctx, k8sClient, j)
		}
		return aw, jobs
	}

	It("under All, deletes an AppWrapper with three harness Jobs only once the third has succeeded", func() {
		createReadyRule(ns, util.MakeRule("all").TriggerKind("batch", "Job", "").Policy(wrapupv1alpha1.TriggerPolicyAll).
			Message(`'done: ' + object.metadata.name`).OnSuccess(wrapupv1alpha1.ActionDeleteAll, 2))
		aw, jobs := harness("sweep", 3, util.MakeAppWrapper("sweep", ns.Name))

		By("two of the three succeeding: nothing happens")
		util.JobComplete(ctx, k8sClient, jobs[0])
		util.JobComplete(ctx, k8sClient, jobs[1])
		expectUndecided(aw)

		By("the third succeeding: the outcome names all three, then the AppWrapper goes")
		util.JobComplete(ctx, k8sClient, jobs[2])
		cr := expectRecord(aw, wrapupv1alpha1.OutcomeSucceeded)
		Expect(cr.Policy).To(Equal(wrapupv1alpha1.TriggerPolicyAll))
		Expect(cr.Message).To(And(ContainSubstring("done: sweep-h0"), ContainSubstring("done: sweep-h1"), ContainSubstring("done: sweep-h2")))
		var decided []gstruct.Fields
		for i, j := range jobs {
			live := &batchv1.Job{}
			Expect(k8sClient.Get(ctx, j, live)).To(Succeed())
			decided = append(decided, gstruct.Fields{"ComponentIndex": Equal(int32(i + 1)), "UID": Equal(live.UID), "Decided": BeTrue()})
		}
		Expect(cr.Triggers).To(ConsistOf(
			gstruct.MatchFields(gstruct.IgnoreExtras, decided[0]), gstruct.MatchFields(gstruct.IgnoreExtras, decided[1]), gstruct.MatchFields(gstruct.IgnoreExtras, decided[2])))
		Eventually(func(g Gomega) {
			got := &awv1beta2.AppWrapper{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(aw), got)).To(Succeed())
			g.Expect(got.Labels).To(HaveKeyWithValue(wrapupv1alpha1.OutcomeLabel, "Succeeded"), "the outcome mirrored while the TTL runs")
		}, util.Timeout, util.Interval).Should(Succeed())
		expectEvent(aw, "", "Deleted", "")
		util.ExpectGone(ctx, k8sClient, aw, util.LongTimeout)
	})

	It("under Any, deletes an AppWrapper with two harness Jobs once one has succeeded", func() {
		createReadyRule(ns, util.MakeRule("any").TriggerKind("batch", "Job", "").Policy(wrapupv1alpha1.TriggerPolicyAny))
		aw, jobs := harness("race", 2, util.MakeAppWrapper("race", ns.Name))
		expectUndecided(aw)

		util.JobComplete(ctx, k8sClient, jobs[1])
		expectEvent(aw, "", "TriggerSucceeded", "")
		expectEvent(aw, "", "Deleted", "")
		util.ExpectGone(ctx, k8sClient, aw, util.LongTimeout)
	})

	It("under All, waits while the AppWrapper controller retries one failed Job of three, and decides on the new attempt", func() {
		createReadyRule(ns, util.MakeRule("all-retry").TriggerKind("batch", "Job", "").Policy(wrapupv1alpha1.TriggerPolicyAll).
			OnFailure(wrapupv1alpha1.ActionDeleteAll, 5))
		aw, jobs := harness("retry", 3, util.MakeAppWrapper("retry", ns.Name).
			Annotation(awv1beta2.RetryLimitAnnotation, "1").
			Annotation(awv1beta2.FailureGracePeriodDurationAnnotation, "0s").
			Annotation(awv1beta2.RetryPausePeriodDurationAnnotation, "1s"))
		first := &batchv1.Job{}
		Expect(k8sClient.Get(ctx, jobs[1], first)).To(Succeed())
		util.JobComplete(ctx, k8sClient, jobs[0])
		failJob(aw, jobs[1])

		By("the AppWrapper controller re-creating the Jobs, and wrapup deleting nothing meanwhile")
		Eventually(func(g Gomega) {
			second := &batchv1.Job{}
			g.Expect(k8sClient.Get(ctx, jobs[1], second)).To(Succeed())
			g.Expect(second.UID).NotTo(Equal(first.UID))
			got := &awv1beta2.AppWrapper{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(aw), got)).To(Succeed())
			g.Expect(got.DeletionTimestamp.IsZero()).To(BeTrue())
			g.Expect(got.Status.Retries).To(Equal(int32(1)))
			g.Expect(got.Labels).NotTo(HaveKey(wrapupv1alpha1.OutcomeLabel))
			g.Expect(recordedOutcome(g, got)).To(BeEmpty())
		}, util.LongTimeout, util.Interval).Should(Succeed())
		util.ExpectAppWrapperPhase(ctx, k8sClient, client.ObjectKeyFromObject(aw), awv1beta2.AppWrapperRunning)
		Expect(countEvents(aw, "Deleted")).To(BeZero())

		By("the new attempt's three Jobs succeeding")
		for _, j := range jobs {
			expectJob(j)
			util.JobComplete(ctx, k8sClient, j)
		}
		expectEvent(aw, "", "TriggerSucceeded", "")
		util.ExpectGone(ctx, k8sClient, aw, util.LongTimeout)
	})

	It("finishes an AppWrapper whose annotated triggers are a Job and a Pod, under a rule with no kind", func() {
		createReadyRule(ns, util.MakeRule("mixed").Policy(wrapupv1alpha1.TriggerPolicyAll).OnSuccess(wrapupv1alpha1.ActionDeleteAll, 2))
		pod := &corev1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: "mixed-checker"},
			Spec:       util.MakeJob("x").Obj().Spec.Template.Spec,
		}
		pod.Spec.RestartPolicy = corev1.RestartPolicyNever
		aw := util.MakeAppWrapper("mixed", ns.Name).
			Component(util.MakeConfigMap("mixed-config", nil), nil).
			Trigger(util.MakeJob("mixed-load").Obj()).
			Trigger(pod).Obj()
		createRunning(aw)
		load := types.NamespacedName{Namespace: ns.Name, Name: "mixed-load"}
		checker := types.NamespacedName{Namespace: ns.Name, Name: "mixed-checker"}
		expectJob(load)
		Eventually(func() error { return k8sClient.Get(ctx, checker, &corev1.Pod{}) }, util.Timeout, util.Interval).Should(Succeed())
		util.JobStarted(ctx, k8sClient, load)
		util.SetPodPhase(ctx, k8sClient, checker, corev1.PodRunning)

		By("the load Job succeeding while the checker Pod runs: nothing happens")
		util.JobComplete(ctx, k8sClient, load)
		expectUndecided(aw)

		By("the checker Pod succeeding: both decide")
		util.SetPodPhase(ctx, k8sClient, checker, corev1.PodSucceeded)
		cr := expectRecord(aw, wrapupv1alpha1.OutcomeSucceeded)
		Expect(cr.Triggers).To(ConsistOf(
			And(HaveField("ComponentIndex", int32(1)), HaveField("Kind", "Job"), HaveField("Decided", true)),
			And(HaveField("ComponentIndex", int32(2)), HaveField("Kind", "Pod"), HaveField("Decided", true))))
		util.ExpectGone(ctx, k8sClient, aw, util.LongTimeout)
	})
})
