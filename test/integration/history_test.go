package integration

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/test/util"
)

var _ = Describe("The history of finished runs", func() {
	var ns *corev1.Namespace
	BeforeEach(func() { ns = specNamespace("history") })

	// run creates an AppWrapper with an inference ConfigMap and a benchmark
	// Job, waits until it runs, and returns it and the Job's key.
	run := func(name string, labels map[string]string) (*awv1beta2.AppWrapper, types.NamespacedName) {
		GinkgoHelper()
		w := util.MakeAppWrapper(name, ns.Name).
			Component(util.MakeConfigMap(name+"-config", nil), nil).
			Component(util.MakeJob(name+"-bench").Obj(), nil)
		for k, v := range labels {
			w.Label(k, v)
		}
		aw := w.Obj()
		return aw, runJob(aw, name+"-bench")
	}
	recordOf := func(aw *awv1beta2.AppWrapper) *wrapupv1alpha1.CompletionRecord {
		GinkgoHelper()
		cr := &wrapupv1alpha1.CompletionRecord{}
		Eventually(func() error {
			return k8sClient.Get(ctx, types.NamespacedName{Namespace: ns.Name, Name: wrapupv1alpha1.RecordName(aw.Name, aw.UID)}, cr)
		}, util.Timeout, util.Interval).Should(Succeed())
		return cr
	}

	It("leaves a record of a DeleteAll run after the AppWrapper is gone", func() {
		rule := createReadyRule(ns, util.MakeRule("bench").TriggerKind("batch", "Job", "").Message(`'benchmark ' + object.metadata.name + ' done'`))
		aw, job := run("run1", map[string]string{"llm-d.ai/run-id": "r-17"})
		live := &batchv1.Job{}
		Expect(k8sClient.Get(ctx, job, live)).To(Succeed())
		util.JobComplete(ctx, k8sClient, job)
		util.ExpectGone(ctx, k8sClient, aw, util.LongTimeout)

		cr := recordOf(aw)
		Expect(cr.AppWrapper.Name).To(Equal("run1"))
		Expect(cr.AppWrapper.UID).To(Equal(aw.UID))
		Expect(cr.AppWrapper.Labels).To(HaveKeyWithValue("llm-d.ai/run-id", "r-17"))
		Expect(cr.Labels).To(HaveKeyWithValue(wrapupv1alpha1.RecordAppWrapperLabel, "run1"))
		Expect(cr.Rule).To(Equal(rule.Name))
		Expect(cr.Outcome).To(Equal(wrapupv1alpha1.OutcomeSucceeded))
		Expect(cr.Message).To(Equal("benchmark run1-bench done"))
		Expect(cr.FinishedAt.IsZero()).To(BeFalse())
		Expect(cr.Action.Action).To(Equal(wrapupv1alpha1.ActionDeleteAll))
		Expect(cr.Action.DryRun).To(BeFalse())
		Expect(cr.Action.DeleteAfter).NotTo(BeNil())
		Expect(cr.Retention).To(Equal(wrapupv1alpha1.RecordRetention{TTLSecondsAfterFinished: 604800, LimitPerNamespace: 100}))
		Expect(cr.Triggers).To(HaveLen(1))
		t := cr.Triggers[0]
		Expect(t.APIVersion).To(Equal("batch/v1"))
		Expect(t.Kind).To(Equal("Job"))
		Expect(t.Name).To(Equal("run1-bench"))
		Expect(t.UID).To(Equal(live.UID))
		Expect(t.State).To(Equal("Succeeded"))
		Expect(t.Conditions).To(ContainElement(HaveField("Type", "Complete")))

		By("the record found by its AppWrapper's name, and by the AppWrapper's own labels")
		var list wrapupv1alpha1.CompletionRecordList
		Expect(k8sClient.List(ctx, &list, client.InNamespace(ns.Name), client.MatchingLabels{wrapupv1alpha1.RecordAppWrapperLabel: "run1"})).To(Succeed())
		Expect(list.Items).To(HaveLen(1))
		Expect(k8sClient.List(ctx, &list, client.InNamespace(ns.Name), client.MatchingLabels{"llm-d.ai/run-id": "r-17", wrapupv1alpha1.OutcomeLabel: "Succeeded"})).To(Succeed())
		Expect(list.Items).To(HaveLen(1))

		By("kubectl wrapup explain printing the record of the AppWrapper that is gone, and history listing it")
		run := plugin()
		out, code := run("explain", "run1", "-n", ns.Name)
		Expect(code).To(Equal(0), out)
		Expect(out).To(ContainSubstring("AppWrapper: %s/run1 (uid %s): gone", ns.Name, aw.UID))
		Expect(out).To(ContainSubstring("Outcome:    Succeeded by rule %s", rule.Name))
		Expect(out).To(ContainSubstring("Message:    benchmark run1-bench done"))
		Expect(out).To(MatchRegexp(`\* batch/v1 Job run1-bench\s+uid %s\s+Succeeded`, live.UID))
		out, code = run("history", "-n", ns.Name, "-l", "llm-d.ai/run-id=r-17")
		Expect(code).To(Equal(0), out)
		Expect(out).To(MatchRegexp(`run1\s+Succeeded\s+%s\s+DeleteAll`, rule.Name))
	})

	It("leaves records of UpdateStatus and dry-run runs, saying what was done", func() {
		createReadyRule(ns, util.MakeRule("status").TriggerKind("batch", "Job", "").OnSuccess(wrapupv1alpha1.ActionUpdateStatus, 0).
			AppWrapperLabels(map[string]string{"mode": "status"}))
		createReadyRule(ns, util.MakeRule("dry").TriggerKind("batch", "Job", "").DryRun().AppWrapperLabels(map[string]string{"mode": "dry"}))
		status, sj := run("status", map[string]string{"mode": "status"})
		dry, dj := run("dry", map[string]string{"mode": "dry"})
		util.JobComplete(ctx, k8sClient, sj)
		util.JobComplete(ctx, k8sClient, dj)

		cr := recordOf(status)
		Expect(cr.Action.Action).To(Equal(wrapupv1alpha1.ActionUpdateStatus))
		Expect(cr.Action.DeleteAfter).To(BeNil())
		cr = recordOf(dry)
		Expect(cr.Action.Action).To(Equal(wrapupv1alpha1.ActionDeleteAll))
		Expect(cr.Action.DryRun).To(BeTrue())
		Expect(cr.Action.DeleteAfter).To(BeNil())
		for _, aw := range []*awv1beta2.AppWrapper{status, dry} {
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(aw), &awv1beta2.AppWrapper{})).To(Succeed())
		}
	})

	It("deletes a record once its TTL has passed and its AppWrapper is gone, and, with history disabled, keeps one only while the AppWrapper exists", func() {
		createReadyRule(ns, util.MakeRule("short").TriggerKind("batch", "Job", "").AppWrapperLabels(map[string]string{"keep": "short"}).
			History(wrapupv1alpha1.HistorySpec{TTLSecondsAfterFinished: ptr.To[int32](3)}))
		createReadyRule(ns, util.MakeRule("none").TriggerKind("batch", "Job", "").AppWrapperLabels(map[string]string{"keep": "none"}).
			History(wrapupv1alpha1.HistorySpec{Disabled: true}))
		short, sj := run("short", map[string]string{"keep": "short"})
		none, nj := run("none", map[string]string{"keep": "none"})
		util.JobComplete(ctx, k8sClient, sj)
		util.JobComplete(ctx, k8sClient, nj)
		cr := recordOf(short)
		Expect(cr.OwnerReferences).To(BeEmpty(), "a record kept as history outlives its AppWrapper")
		util.ExpectGone(ctx, k8sClient, short, util.LongTimeout)
		util.ExpectGone(ctx, k8sClient, none, util.LongTimeout)

		By("the short-lived record going at its TTL, not before")
		Eventually(func(g Gomega) {
			err := k8sClient.Get(ctx, client.ObjectKeyFromObject(cr), &wrapupv1alpha1.CompletionRecord{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the record is still there: %v", err)
		}, util.Timeout, util.Interval).Should(Succeed())
		Expect(time.Now()).To(BeTemporally(">=", cr.FinishedAt.Add(3*time.Second-time.Second)))

		By("the record of the rule with history disabled gone with its AppWrapper (garbage collector)")
		Eventually(func(g Gomega) {
			var list wrapupv1alpha1.CompletionRecordList
			g.Expect(k8sClient.List(ctx, &list, client.InNamespace(ns.Name))).To(Succeed())
			g.Expect(list.Items).To(BeEmpty(), "the rule with history disabled left a record")
		}, util.LongTimeout, util.Interval).Should(Succeed())
	})

	It("keeps at most limitPerNamespace records of a rule in a namespace, the newest", func() {
		createReadyRule(ns, util.MakeRule("two").TriggerKind("batch", "Job", "").
			History(wrapupv1alpha1.HistorySpec{LimitPerNamespace: ptr.To[int32](2)}))
		var aws []*awv1beta2.AppWrapper
		for i := range 3 {
			aw, job := run(fmt.Sprintf("lim%d", i), nil)
			util.JobComplete(ctx, k8sClient, job)
			util.ExpectGone(ctx, k8sClient, aw, util.LongTimeout)
			recordOf(aw)
			aws = append(aws, aw)
		}
		Eventually(func(g Gomega) {
			var list wrapupv1alpha1.CompletionRecordList
			g.Expect(k8sClient.List(ctx, &list, client.InNamespace(ns.Name))).To(Succeed())
			var names []string
			for _, cr := range list.Items {
				names = append(names, cr.AppWrapper.Name)
			}
			g.Expect(names).To(ConsistOf("lim1", "lim2"))
		}, util.Timeout, util.Interval).Should(Succeed())
	})

	It("replaces the record when a retry clears a recorded failure, and never makes two", func() {
		// The rule calls a Job with a failed pod failed; the AppWrapper
		// controller sees no failed component until the Job is Failed
		// (appwrapper v1.2.2 getComponentStatus), and then resets at once
		// (FailedComponent, no grace). wrapup's grace is short in this
		// suite: it records the failure first; the retry clears it, and the
		// new attempt's success replaces the record.
		createReadyRule(ns, util.MakeRule("retry").TriggerKind("batch", "Job", "").
			Failure("object.status.?failed.orValue(0) >= 1").
			OnFailure(wrapupv1alpha1.ActionDeleteAll, 30))
		aw := util.MakeAppWrapper("retry", ns.Name).
			Annotation(awv1beta2.RetryLimitAnnotation, "1").
			Annotation(awv1beta2.RetryPausePeriodDurationAnnotation, "1s").
			Component(util.MakeJob("retry-bench").Obj(), nil).Obj()
		createRunning(aw)
		key := types.NamespacedName{Namespace: ns.Name, Name: "retry-bench"}
		first := expectJob(key)
		util.JobPodFailed(ctx, k8sClient, key)
		failed := recordOf(aw)
		Expect(failed.Outcome).To(Equal(wrapupv1alpha1.OutcomeFailed))

		By("the Job failing, the retry re-creating it, and its success replacing the record")
		util.JobFailed(ctx, k8sClient, key)
		second := &batchv1.Job{}
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, key, second)).To(Succeed())
			g.Expect(second.UID).NotTo(Equal(first.UID))
		}, util.LongTimeout, util.Interval).Should(Succeed())
		util.ExpectAppWrapperPhase(ctx, k8sClient, client.ObjectKeyFromObject(aw), awv1beta2.AppWrapperRunning)
		util.JobComplete(ctx, k8sClient, key)
		util.ExpectGone(ctx, k8sClient, aw, util.LongTimeout)
		Eventually(func(g Gomega) {
			cr := &wrapupv1alpha1.CompletionRecord{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(failed), cr)).To(Succeed())
			g.Expect(cr.Outcome).To(Equal(wrapupv1alpha1.OutcomeSucceeded))
			g.Expect(cr.UID).To(Equal(failed.UID), "replaced in place, not deleted and made again")
			g.Expect(cr.Triggers).To(ContainElement(HaveField("UID", second.UID)))
		}, util.Timeout, util.Interval).Should(Succeed())
		var list wrapupv1alpha1.CompletionRecordList
		Expect(k8sClient.List(ctx, &list, client.InNamespace(ns.Name))).To(Succeed())
		Expect(list.Items).To(HaveLen(1))
	})
})
