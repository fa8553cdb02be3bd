package integration

import (
	"encoding/json"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/gc/decision"
	"github.com/wrapup-dev/wrapup/test/util"
)

// Specs of the decision where the real API server and the real AppWrapper
// controller matter: rule selection that fails closed, a run Kueue
// preempted after it finished, the AppWrapper's own deletion hold, a
// trigger kind wrapup may not watch.
var _ = Describe("Deciding safely", func() {
	var ns *corev1.Namespace
	BeforeEach(func() { ns = specNamespace("decide") })

	makeRule := func(name string) *util.RuleWrapper {
		return util.MakeRule(fmt.Sprintf("%s-%s", ns.Name, name)).NamespaceLabels(map[string]string{nsLabel: ns.Name})
	}
	// runningJob creates an AppWrapper whose trigger is its Job, and waits
	// until the Job runs.
	runningJob := func(w *util.AppWrapperWrapper, name string) (*awv1beta2.AppWrapper, types.NamespacedName) {
		GinkgoHelper()
		aw := w.Obj()
		return aw, runJob(aw, name)
	}

	It("lets no rule act in the place of a higher-priority rule that does not compile", func() {
		keep := makeRule("keep-failed").TriggerKind("batch", "Job", "").Priority(10).
			Success(`object.status.(`).OnSuccess(wrapupv1alpha1.ActionUpdateStatus, 0).OnFailure(wrapupv1alpha1.ActionUpdateStatus, 0).Obj()
		createSpecRule(keep)
		expectRuleReady(keep, metav1.ConditionFalse, wrapupv1alpha1.ReasonInvalidExpression)
		deleteAll := makeRule("delete-all").TriggerKind("batch", "Job", "").Obj()
		createSpecRule(deleteAll)
		expectRuleReady(deleteAll, metav1.ConditionTrue, wrapupv1alpha1.ReasonCompiled)

		aw, job := runningJob(util.MakeAppWrapper("blocked", ns.Name).Component(util.MakeJob("blocked-bench").Obj(), nil), "blocked-bench")
		util.JobComplete(ctx, k8sClient, job)
		expectEvent(aw, "", wrapupv1alpha1.ReasonBlockedByRule, keep.Name)
		expectUndecided(aw)

		By("fixing the rule: it decides, and keeps the run")
		Eventually(func(g Gomega) {
			got := &wrapupv1alpha1.CompletionRule{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(keep), got)).To(Succeed())
			got.Spec.Success = ""
			g.Expect(k8sClient.Update(ctx, got)).To(Succeed())
		}, util.Timeout, util.Interval).Should(Succeed())
		Eventually(func(g Gomega) {
			got := &awv1beta2.AppWrapper{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(aw), got)).To(Succeed())
			g.Expect(got.Labels).To(HaveKeyWithValue(wrapupv1alpha1.OutcomeLabel, "Succeeded"))
			g.Expect(got.Annotations).To(HaveKeyWithValue(wrapupv1alpha1.RuleAnnotation, keep.Name))
		}, util.Timeout, util.Interval).Should(Succeed())
		Expect(expectRecord(aw, wrapupv1alpha1.OutcomeSucceeded).Rule).To(Equal(keep.Name))
		expectKept(aw, util.ConsistentDuration)
	})

	It("deletes at once, not at its TTL, a run that Kueue preempts after it finished, so that it never runs again", func() {
		// Re-admitted, the AppWrapper controller would create the Job again
		// and run the benchmark a second time: once the success is
		// recorded, a new attempt makes the deletion due at once.
		createSpecRule(makeRule("benchmarks").TriggerKind("batch", "Job", "").OnSuccess(wrapupv1alpha1.ActionDeleteAll, 3600).Obj())
		aw, job := runningJob(util.MakeAppWrapper("preempted", ns.Name).
			Annotation(awv1beta2.RetryPausePeriodDurationAnnotation, "1s").
			Component(util.MakeJob("preempted-bench").Obj(), nil), "preempted-bench")
		first := &batchv1.Job{}
		Expect(k8sClient.Get(ctx, job, first)).To(Succeed())
		util.JobComplete(ctx, k8sClient, job)
		expectEvent(aw, "", wrapupv1alpha1.ReasonTriggerSucceeded, "")
		expectKept(aw, util.ConsistentDuration, "deleted before its TTL of an hour")

		By("Kueue preempting it during the TTL")
		Eventually(func(g Gomega) {
			got := &awv1beta2.AppWrapper{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(aw), got)).To(Succeed())
			got.Spec.Suspend = true
			g.Expect(k8sClient.Update(ctx, got)).To(Succeed())
		}, util.Timeout, util.Interval).Should(Succeed())

		By("the AppWrapper going at once, its Job never created again")
		util.ExpectGone(ctx, k8sClient, aw, util.LongTimeout)
		expectEvent(aw, "", wrapupv1alpha1.ReasonDeleted, "the run started again")
		Expect(countEvents(aw, wrapupv1alpha1.ReasonOutcomeCleared)).To(BeZero())
		again := &batchv1.Job{}
		if err := k8sClient.Get(ctx, job, again); err == nil {
			Expect(again.UID).To(Equal(first.UID), "the Job was created again")
		}
	})

	It("keeps a failed AppWrapper as long as its deletion-on-failure hold says", func() {
		createSpecRule(makeRule("failures").TriggerKind("batch", "Job", "").OnFailure(wrapupv1alpha1.ActionDeleteAll, 0).Obj())
		aw, job := runningJob(util.MakeAppWrapper("held", ns.Name).
			Annotation(awv1beta2.RetryLimitAnnotation, "0").
			Annotation(awv1beta2.DeletionOnFailureGracePeriodAnnotation, "12s").
			Component(util.MakeJob("held-bench").Obj(), nil), "held-bench")
		failJob(aw, job)
		util.ExpectAppWrapperPhase(ctx, k8sClient, client.ObjectKeyFromObject(aw), awv1beta2.AppWrapperFailed)
		var holdStart metav1.Time
		Eventually(func(g Gomega) {
			got := &awv1beta2.AppWrapper{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(aw), got)).To(Succeed())
			c := apimeta.FindStatusCondition(got.Status.Conditions, string(awv1beta2.DeletingResources))
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal("DeletionPaused"))
			holdStart = c.LastTransitionTime
		}, util.Timeout, util.Interval).Should(Succeed())
		expectEvent(aw, "", wrapupv1alpha1.ReasonTriggerFailed, "")
		util.ExpectGone(ctx, k8sClient, aw, util.LongTimeout)

		By("the deletion coming after the hold, by the API server's clock")
		var deleted *eventsv1.Event
		var list eventsv1.EventList
		Expect(k8sClient.List(ctx, &list, client.InNamespace(ns.Name))).To(Succeed())
		for i := range list.Items {
			if e := &list.Items[i]; e.Regarding.Name == aw.Name && e.Reason == wrapupv1alpha1.ReasonDeleted {
				deleted = e
			}
		}
		Expect(deleted).NotTo(BeNil())
		// Conditions keep seconds; the Event's time is in microseconds.
		Expect(deleted.EventTime.Time).To(BeTemporally(">=", holdStart.Add(11*1e9)))
	})

	It("says once, on the rule and in an Event, that an annotated ConfigMap cannot be watched, and leaves it alone", func() {
		r := makeRule("annotated").Obj()
		createSpecRule(r)
		expectRuleReady(r, metav1.ConditionTrue, wrapupv1alpha1.ReasonCompiled)
		aw := util.MakeAppWrapper("configured", ns.Name).
			Component(util.MakeJob("configured-bench").Obj(), nil).
			Component(util.MakeConfigMap("configured-config", map[string]string{"rate": "10"}), map[string]string{wrapupv1alpha1.TriggerAnnotation: "true"}).Obj()
		createRunning(aw)
		expectEvent(aw, "", wrapupv1alpha1.ReasonTriggerKindNotWatched, "configmaps")
		Eventually(func(g Gomega) {
			got := &wrapupv1alpha1.CompletionRule{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(r), got)).To(Succeed())
			c := apimeta.FindStatusCondition(got.Status.Conditions, wrapupv1alpha1.ConditionTriggerKindsWatchable)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Message).To(ContainSubstring(ns.Name + "/configured"))
		}, util.Timeout, util.Interval).Should(Succeed())
		// The AppWrapper controller writes its status meanwhile; wrapup says
		// it once.
		Consistently(func() int { return countEvents(aw, wrapupv1alpha1.ReasonTriggerKindNotWatched) },
			util.ConsistentDuration, util.Interval).Should(Equal(1))
		expectUndecided(aw)
		By("no informer for a kind wrapup may not list (asked first): no informer metric, so no admin's alert, and no failing watch logging")
		Expect(informerRunning(schema.GroupKind{Kind: "ConfigMap"})).To(BeFalse())

		By("explain, run as cluster-admin, decides with wrapup's rights, as the controller did, and says where the user's view differs")
		run := plugin()
		out, code := run("explain", "configured", "-n", ns.Name, "-o", "json")
		Expect(code).To(Equal(0), out)
		var ex struct {
			Verdict string
			Notes   []string
		}
		Expect(json.Unmarshal([]byte(out), &ex)).To(Succeed(), out)
		Expect(ex.Verdict).To(Equal(string(decision.VerdictTriggerNotWatchable)), out)
		Expect(ex.Notes).To(ContainElement(ContainSubstring("wrapup may not list configmaps in every namespace")), out)

		By("the AppWrapper going: the rule says nothing more")
		Expect(k8sClient.Delete(ctx, aw)).To(Succeed())
		util.ExpectGone(ctx, k8sClient, aw, util.LongTimeout)
		Eventually(func(g Gomega) {
			got := &wrapupv1alpha1.CompletionRule{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(r), got)).To(Succeed())
			g.Expect(apimeta.FindStatusCondition(got.Status.Conditions, wrapupv1alpha1.ConditionTriggerKindsWatchable)).To(BeNil())
		}, util.Timeout, util.Interval).Should(Succeed())
	})

	It("stops a pending deletion at once when the rule is set to dryRun", func() {
		r := makeRule("dry-later").TriggerKind("batch", "Job", "").OnSuccess(wrapupv1alpha1.ActionDeleteAll, 6).Obj()
		createSpecRule(r)
		aw, job := runningJob(util.MakeAppWrapper("incident", ns.Name).Component(util.MakeJob("incident-bench").Obj(), nil), "incident-bench")
		util.JobComplete(ctx, k8sClient, job)
		expectEvent(aw, "", wrapupv1alpha1.ReasonTriggerSucceeded, "deleted in 6s")
		Eventually(func(g Gomega) {
			got := &wrapupv1alpha1.CompletionRule{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(r), got)).To(Succeed())
			got.Spec.DryRun = true
			g.Expect(k8sClient.Update(ctx, got)).To(Succeed())
		}, util.Timeout, util.Interval).Should(Succeed())
		Consistently(func(g Gomega) {
			got := &awv1beta2.AppWrapper{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(aw), got)).To(Succeed())
			g.Expect(got.DeletionTimestamp.IsZero()).To(BeTrue())
		}, util.ConsistentDuration*3, util.Interval).Should(Succeed())
		Expect(countEvents(aw, wrapupv1alpha1.ReasonDeleted)).To(BeZero())
	})
})
