package integration

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/cmd/kubectl-wrapup/view"
	"github.com/wrapup-dev/wrapup/test/framework"
	"github.com/wrapup-dev/wrapup/test/util"
)

// A run's memory is its CompletionRecord, which only wrapup writes: what
// a tenant writes on the AppWrapper (an earlier version's record shape
// among it) steers no decision, a record says nothing of another
// AppWrapper, records outlive nothing they should not, an upgrade from
// the version that kept the record on the AppWrapper's metadata deletes
// nothing it should not, and a rule change after recording never makes a
// deletion sooner.
var _ = Describe("The run's memory", func() {
	var ns *corev1.Namespace
	BeforeEach(func() { ns = specNamespace("memory") })

	// bench is an AppWrapper name of the spec with an inference
	// Deployment and the benchmark Job name-bench, the rule's trigger.
	bench := func(name string) *util.AppWrapperWrapper {
		return util.MakeAppWrapper(name, ns.Name).
			Component(util.MakeDeployment(name+"-inference", 1), nil).
			Component(util.MakeJob(name+"-bench").Obj(), nil)
	}
	// jobOf is the key of the benchmark Job of aw.
	jobOf := func(aw *awv1beta2.AppWrapper) types.NamespacedName {
		return types.NamespacedName{Namespace: aw.Namespace, Name: aw.Name + "-bench"}
	}
	// expectUntouched checks that, for util.ConsistentDuration, none of
	// aws is being deleted and none has a CompletionRecord.
	expectUntouched := func(aws ...*awv1beta2.AppWrapper) {
		GinkgoHelper()
		Consistently(func(g Gomega) {
			for _, aw := range aws {
				got := &awv1beta2.AppWrapper{}
				g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(aw), got)).To(Succeed(), aw.Name)
				g.Expect(got.DeletionTimestamp.IsZero()).To(BeTrue(), aw.Name)
				err := k8sClient.Get(ctx, recordKey(aw), &wrapupv1alpha1.CompletionRecord{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a CompletionRecord of %s: %v", aw.Name, err)
			}
		}, util.ConsistentDuration, util.Interval).Should(Succeed())
	}
	// deletedAt is when the API server received wrapup's delete of aw that
	// succeeded.
	deletedAt := func(aw *awv1beta2.AppWrapper) time.Time {
		GinkgoHelper()
		for _, r := range fwk.AuditedAppWrapperRequests("delete", framework.ControllerUser, aw.Namespace) {
			if r.Name == aw.Name && r.Succeeded() {
				return r.Received
			}
		}
		Fail("no delete of " + aw.Name + " by wrapup in the audit log")
		return time.Time{}
	}

	It("takes nothing from an earlier version's record that a tenant who may only create AppWrappers plants at creation", func() {
		rule := createReadyRule(ns, util.MakeRule("planted").TriggerKind("batch", "Job", ""))
		creator := namespaceUser(ns.Name, "creator", rbacv1.PolicyRule{APIGroups: []string{awv1beta2.GroupVersion.Group}, Resources: []string{"appwrappers"}, Verbs: []string{"create"}})

		By("the tenant creating an AppWrapper that carries an earlier version's record of a success an hour ago (no AppWrapper UID, no trigger UID: neither exists yet)")
		aw := bench("planted").Recorded(wrapupv1alpha1.OutcomeSucceeded, time.Now().Add(-time.Hour), "").
			RecordedBy(rule.Name, "batch/Job/planted-bench").RecordedMessage("planted").Obj()
		Expect(creator.Create(ctx, aw)).To(Succeed())
		Expect(creator.Get(ctx, client.ObjectKeyFromObject(aw), &awv1beta2.AppWrapper{})).NotTo(Succeed(), "the tenant may only create")
		util.ExpectAppWrapperPhase(ctx, k8sClient, client.ObjectKeyFromObject(aw), awv1beta2.AppWrapperRunning)
		expectJob(jobOf(aw))
		util.JobStarted(ctx, k8sClient, jobOf(aw))

		By("nothing recorded or deleted while the trigger runs")
		expectUntouched(aw)
		Expect(countEvents(aw, wrapupv1alpha1.ReasonDeleted)).To(BeZero())

		By("the trigger succeeding: recorded by wrapup, naming the real trigger, finished after it did")
		live := &batchv1.Job{}
		Expect(k8sClient.Get(ctx, jobOf(aw), live)).To(Succeed())
		ended := time.Now().Truncate(time.Microsecond)
		util.JobComplete(ctx, k8sClient, jobOf(aw))
		util.ExpectGone(ctx, k8sClient, aw, util.LongTimeout)
		cr := &wrapupv1alpha1.CompletionRecord{}
		Expect(k8sClient.Get(ctx, recordKey(aw), cr)).To(Succeed())
		Expect(cr.Outcome).To(Equal(wrapupv1alpha1.OutcomeSucceeded))
		Expect(cr.RuleUID).To(Equal(rule.UID))
		Expect(cr.Message).NotTo(Equal("planted"))
		Expect(cr.Triggers).To(ConsistOf(And(HaveField("ComponentIndex", int32(1)), HaveField("UID", live.UID), HaveField("Decided", true))))
		Expect(cr.FinishedAt.Time).To(BeTemporally(">=", ended))
		Expect(deletedAt(aw)).To(BeTemporally(">=", cr.FinishedAt.Time.Truncate(time.Microsecond)))
	})

	It("changes no decision and no record when a tenant rewrites the outcome mirrored on the AppWrapper", func() {
		rule := createReadyRule(ns, util.MakeRule("mirror").TriggerKind("batch", "Job", "").OnSuccess(wrapupv1alpha1.ActionDeleteAll, 3600))
		tenant := namespaceUser(ns.Name, "mirror-tenant", rbacv1.PolicyRule{APIGroups: []string{awv1beta2.GroupVersion.Group}, Resources: []string{"appwrappers"}, Verbs: []string{"*"}})
		aw := bench("mirrored").Obj()
		runJob(aw, aw.Name+"-bench")
		live := &batchv1.Job{}
		Expect(k8sClient.Get(ctx, jobOf(aw), live)).To(Succeed())
		util.JobComplete(ctx, k8sClient, jobOf(aw))
		cr := expectRecord(aw, wrapupv1alpha1.OutcomeSucceeded)
		Eventually(func(g Gomega) {
			got := &awv1beta2.AppWrapper{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(aw), got)).To(Succeed())
			g.Expect(got.Labels).To(HaveKeyWithValue(wrapupv1alpha1.OutcomeLabel, "Succeeded"))
		}, util.Timeout, util.Interval).Should(Succeed())

		By("the tenant rewriting the mirror: a failure of an hour ago, by its own rule, naming the Job")
		Eventually(func(g Gomega) {
			got := &awv1beta2.AppWrapper{}
			g.Expect(tenant.Get(ctx, client.ObjectKeyFromObject(aw), got)).To(Succeed())
			w := (&util.AppWrapperWrapper{AppWrapper: *got}).Recorded(wrapupv1alpha1.OutcomeFailed, time.Now().Add(-time.Hour), live.UID).
				RecordedBy("tenant-rule", "batch/Job/"+live.Name).RecordedOn(got.UID).RecordedMessage("rewritten")
			g.Expect(tenant.Update(ctx, w.Obj())).To(Succeed())
		}, util.Timeout, util.Interval).Should(Succeed())

		By("the record, its action and the AppWrapper as they were")
		Consistently(func(g Gomega) {
			got := &wrapupv1alpha1.CompletionRecord{}
			g.Expect(k8sClient.Get(ctx, recordKey(aw), got)).To(Succeed())
			g.Expect(got.ResourceVersion).To(Equal(cr.ResourceVersion), "the record was written")
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(aw), &awv1beta2.AppWrapper{})).To(Succeed())
		}, util.ConsistentDuration, util.Interval).Should(Succeed())
		ex := explainAt(aw)
		Expect(ex.Recorded).NotTo(BeNil(), ex.String())
		Expect(ex.Recorded.Outcome).To(Equal(wrapupv1alpha1.OutcomeSucceeded), ex.String())
		Expect(ex.Recorded.Rule).To(Equal(rule.Name), ex.String())
		Expect(ex.After).To(BeNumerically(">", 3500*time.Second), ex.String())
		for _, reason := range []string{wrapupv1alpha1.ReasonDeleted, wrapupv1alpha1.ReasonOutcomeCleared, wrapupv1alpha1.ReasonTriggerFailed} {
			Expect(countEvents(aw, reason)).To(BeZero(), reason)
		}
		Expect(countEvents(aw, wrapupv1alpha1.ReasonTriggerSucceeded)).To(Equal(1))
	})

	It("never copies a tenant's wrapup.dev label onto the record of an AppWrapper whose name is too long for a label", func() {
		// The AppWrapper controller cannot label a component with a name
		// over 63 characters: the AppWrapper fails, and its phase decides.
		createReadyRule(ns, util.MakeRule("long").TriggerKind("batch", "Job", "").OnFailure(wrapupv1alpha1.ActionUpdateStatus, 0))
		name := "benchmark-" + strings.Repeat("x", 60)
		aw := util.MakeAppWrapper(name, ns.Name).
			Label(wrapupv1alpha1.RecordAppWrapperLabel, "evil").
			Label(wrapupv1alpha1.OutcomeLabel, "Succeeded").
			Label("llm-d.ai/run-id", "r-42").
			Annotation(awv1beta2.RetryLimitAnnotation, "0").
			Annotation(awv1beta2.FailureGracePeriodDurationAnnotation, "0s").
			Component(util.MakeJob("long-bench").Obj(), nil).Obj()
		Expect(len(name)).To(BeNumerically(">", 63))
		Expect(k8sClient.Create(ctx, aw)).To(Succeed())

		cr := expectRecord(aw, wrapupv1alpha1.OutcomeFailed)
		Expect(cr.AppWrapper.Name).To(Equal(name))
		Expect(cr.Labels).NotTo(HaveKey(wrapupv1alpha1.RecordAppWrapperLabel), "the name does not fit a label value: no label names the AppWrapper")
		Expect(cr.Labels).To(HaveKeyWithValue(wrapupv1alpha1.OutcomeLabel, "Failed"), "wrapup's own outcome, not the tenant's")
		Expect(cr.Labels).To(HaveKeyWithValue("llm-d.ai/run-id", "r-42"), "the users' own labels are kept")
		for k := range cr.AppWrapper.Labels {
			Expect(k).NotTo(HavePrefix(wrapupv1alpha1.GroupVersion.Group+"/"), "a wrapup.dev label of the AppWrapper on the record")
		}
		var list wrapupv1alpha1.CompletionRecordList
		Expect(k8sClient.List(ctx, &list, client.InNamespace(ns.Name), client.MatchingLabels{wrapupv1alpha1.RecordAppWrapperLabel: "evil"})).To(Succeed())
		Expect(list.Items).To(BeEmpty())
	})

	It("upgrades from the version that kept the record on the AppWrapper: a genuine record is recorded anew before its AppWrapper goes, forged ones change nothing", func() {
		const ttl = 4
		rule := createReadyRule(ns, util.MakeRule("upgrade").TriggerKind("batch", "Job", "").OnSuccess(wrapupv1alpha1.ActionDeleteAll, ttl))
		var genuine, running, otherUID *awv1beta2.AppWrapper
		var genuineJob *batchv1.Job
		var legacy *wrapupv1alpha1.CompletionRecord
		// upgraded is when the new version starts, at the latest.
		var upgraded time.Time
		restartManager(func() {
			By("the earlier version's world: a run it recorded while its TTL runs, with its CompletionRecord of that version")
			genuine = bench("genuine").Obj()
			runJob(genuine, genuine.Name+"-bench")
			util.JobComplete(ctx, k8sClient, jobOf(genuine))
			genuineJob = &batchv1.Job{}
			Expect(k8sClient.Get(ctx, jobOf(genuine), genuineJob)).To(Succeed())
			finished := time.Now()
			record := func(aw *awv1beta2.AppWrapper, triggerUID types.UID) {
				GinkgoHelper()
				Eventually(func(g Gomega) {
					got := &awv1beta2.AppWrapper{}
					g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(aw), got)).To(Succeed())
					rec := (&util.AppWrapperWrapper{AppWrapper: *got}).Recorded(wrapupv1alpha1.OutcomeSucceeded, finished, triggerUID).
						RecordedBy(rule.Name, "batch/Job/"+got.Name+"-bench").RecordedOn(got.UID).RecordedMessage("recorded by the earlier version")
					g.Expect(k8sClient.Update(ctx, rec.Obj())).To(Succeed())
				}, util.Timeout, util.Interval).Should(Succeed())
			}
			record(genuine, genuineJob.UID)
			legacy = &wrapupv1alpha1.CompletionRecord{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: wrapupv1alpha1.RecordName(genuine.Name, genuine.UID),
					Labels: map[string]string{wrapupv1alpha1.OutcomeLabel: "Succeeded", wrapupv1alpha1.RecordAppWrapperLabel: genuine.Name}},
				AppWrapper: wrapupv1alpha1.RecordedAppWrapper{Name: genuine.Name, UID: genuine.UID},
				Rule:       rule.Name, Outcome: wrapupv1alpha1.OutcomeSucceeded, FinishedAt: metav1.NewMicroTime(finished),
				Message: "recorded by the earlier version",
				Action: wrapupv1alpha1.RecordedAction{Action: wrapupv1alpha1.ActionDeleteAll, TTLSecondsAfterFinished: ptr.To[int32](ttl),
					DeleteAfter: ptr.To(metav1.NewTime(finished.Add(ttl * time.Second)))},
				Triggers: []wrapupv1alpha1.RecordedTrigger{{APIVersion: "batch/v1", Kind: "Job", Name: genuineJob.Name, UID: genuineJob.UID,
					State: "Succeeded", Decided: true}},
				Retention: wrapupv1alpha1.RecordRetention{TTLSecondsAfterFinished: wrapupv1alpha1.DefaultHistoryTTLSeconds, LimitPerNamespace: wrapupv1alpha1.DefaultHistoryLimit},
			}
			Expect(k8sClient.Create(ctx, legacy)).To(Succeed())

			By("forged records of the same shape: one on a run whose trigger still runs, one naming another trigger")
			running = bench("forged-running").Obj()
			runJob(running, running.Name+"-bench")
			runningJob := &batchv1.Job{}
			Expect(k8sClient.Get(ctx, jobOf(running), runningJob)).To(Succeed())
			record(running, runningJob.UID)
			otherUID = bench("forged-other").Obj()
			runJob(otherUID, otherUID.Name+"-bench")
			record(otherUID, "6a0c1e2d-0000-4000-8000-000000000000")
			upgraded = time.Now()
		})

		By("the new version recording the genuine run anew, in place of the earlier version's record, before its AppWrapper goes")
		cr := &wrapupv1alpha1.CompletionRecord{}
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(legacy), cr)).To(Succeed())
			g.Expect(cr.RuleUID).To(Equal(rule.UID))
		}, util.Timeout, util.Interval).Should(Succeed())
		Expect(cr.UID).To(Equal(legacy.UID), "updated in place")
		Expect(cr.Triggers).To(ConsistOf(And(HaveField("ComponentIndex", int32(1)), HaveField("UID", genuineJob.UID), HaveField("Decided", true))))
		Expect(cr.FinishedAt.Time).To(BeTemporally(">=", upgraded.Truncate(time.Microsecond)), "recorded again now: its TTL counts from now, later, never sooner")
		Expect(cr.Action.Since).NotTo(BeNil())
		util.ExpectGone(ctx, k8sClient, genuine, util.LongTimeout)
		Expect(deletedAt(genuine)).To(BeTemporally(">=", cr.Action.Since.Add(time.Duration(*cr.Action.TTLSecondsAfterFinished)*time.Second)))

		By("the forged ones: nothing recorded or deleted while their triggers run")
		expectUntouched(running, otherUID)

		By("their triggers succeeding: finished as any run")
		for _, aw := range []*awv1beta2.AppWrapper{running, otherUID} {
			live := &batchv1.Job{}
			Expect(k8sClient.Get(ctx, jobOf(aw), live)).To(Succeed())
			util.JobComplete(ctx, k8sClient, jobOf(aw))
			rec := expectRecord(aw, wrapupv1alpha1.OutcomeSucceeded)
			Expect(rec.Triggers).To(ContainElement(HaveField("UID", live.UID)))
			Expect(rec.Message).NotTo(Equal("recorded by the earlier version"))
		}
		for _, aw := range []*awv1beta2.AppWrapper{running, otherUID} {
			util.ExpectGone(ctx, k8sClient, aw, util.LongTimeout)
			Expect(countEvents(aw, wrapupv1alpha1.ReasonDeleted)).To(Equal(1))
		}
	})

	It("keeps a record while its AppWrapper exists: with history disabled it goes with the AppWrapper, with history on it outlives its TTL", func() {
		createReadyRule(ns, util.MakeRule("off").TriggerKind("batch", "Job", "").AppWrapperLabels(map[string]string{"history": "off"}).
			OnSuccess(wrapupv1alpha1.ActionUpdateStatus, 0).History(wrapupv1alpha1.HistorySpec{Disabled: true}))
		createReadyRule(ns, util.MakeRule("short").TriggerKind("batch", "Job", "").AppWrapperLabels(map[string]string{"history": "short"}).
			OnSuccess(wrapupv1alpha1.ActionUpdateStatus, 0).History(wrapupv1alpha1.HistorySpec{TTLSecondsAfterFinished: ptr.To[int32](1)}))
		off := bench("off").Label("history", "off").Obj()
		short := bench("short").Label("history", "short").Obj()
		for _, aw := range []*awv1beta2.AppWrapper{off, short} {
			runJob(aw, aw.Name+"-bench")
			util.JobComplete(ctx, k8sClient, jobOf(aw))
		}

		By("history disabled: a record owned by the AppWrapper")
		offRec := expectRecord(off, wrapupv1alpha1.OutcomeSucceeded)
		Expect(offRec.Retention.TTLSecondsAfterFinished).To(BeZero())
		Expect(offRec.OwnerReferences).To(ConsistOf(And(HaveField("APIVersion", awv1beta2.GroupVersion.String()), HaveField("Kind", "AppWrapper"),
			HaveField("Name", off.Name), HaveField("UID", off.UID))))

		By("history on with a TTL of 1 s: the record still there well after it, while its AppWrapper lives")
		shortRec := expectRecord(short, wrapupv1alpha1.OutcomeSucceeded)
		Expect(shortRec.Retention.TTLSecondsAfterFinished).To(Equal(int32(1)))
		Expect(shortRec.OwnerReferences).To(BeEmpty())
		Eventually(time.Now, util.Timeout, util.Interval).Should(BeTemporally(">", shortRec.FinishedAt.Add(time.Second)))
		Consistently(func(g Gomega) {
			for _, cr := range []*wrapupv1alpha1.CompletionRecord{offRec, shortRec} {
				got := &wrapupv1alpha1.CompletionRecord{}
				g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(cr), got)).To(Succeed())
				g.Expect(got.UID).To(Equal(cr.UID))
			}
		}, util.ConsistentDuration, util.Interval).Should(Succeed())

		By("the AppWrappers deleted: both records go")
		for _, aw := range []*awv1beta2.AppWrapper{off, short} {
			Expect(k8sClient.Delete(ctx, aw)).To(Succeed())
		}
		for _, cr := range []*wrapupv1alpha1.CompletionRecord{offRec, shortRec} {
			util.ExpectGone(ctx, k8sClient, cr, util.LongTimeout)
		}
	})

	It("makes no deletion sooner when the rule changes after recording: UpdateStatus to DeleteAll counts the TTL from the change", func() {
		const ttl = 30
		r := createReadyRule(ns, util.MakeRule("later").TriggerKind("batch", "Job", "").OnSuccess(wrapupv1alpha1.ActionUpdateStatus, 0))
		aw := bench("later").Obj()
		runJob(aw, aw.Name+"-bench")
		util.JobComplete(ctx, k8sClient, jobOf(aw))
		recorded := expectRecord(aw, wrapupv1alpha1.OutcomeSucceeded)

		By("the rule turned to DeleteAll with a TTL of 30 s")
		edited := time.Now()
		Eventually(func(g Gomega) {
			got := &wrapupv1alpha1.CompletionRule{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(r), got)).To(Succeed())
			got.Spec.OnSuccess = wrapupv1alpha1.ActionSpec{Action: wrapupv1alpha1.ActionDeleteAll, TTLSecondsAfterFinished: ptr.To[int32](ttl)}
			g.Expect(k8sClient.Update(ctx, got)).To(Succeed())
		}, util.Timeout, util.Interval).Should(Succeed())
		Eventually(func(g Gomega) {
			got := &wrapupv1alpha1.CompletionRecord{}
			g.Expect(k8sClient.Get(ctx, recordKey(aw), got)).To(Succeed())
			g.Expect(got.Action.Action).To(Equal(wrapupv1alpha1.ActionDeleteAll))
			g.Expect(got.Action.DeleteAfter).NotTo(BeNil())
			g.Expect(got.Action.DeleteAfter.Time).To(BeTemporally(">=", edited.Add(ttl*time.Second)), "due %s after the edit", got.Action.DeleteAfter.Sub(edited))
			g.Expect(got.FinishedAt.Time).To(Equal(recorded.FinishedAt.Time))
		}, util.Timeout, util.Interval).Should(Succeed())
		expectKept(aw, util.ConsistentDuration, "deleted before the TTL counted from the change")
		Expect(countEvents(aw, wrapupv1alpha1.ReasonDeleted)).To(BeZero())
	})
})

// namespaceUser is a client acting as user name, whose Role in namespace
// ns grants rules alone.
func namespaceUser(ns, name string, rules ...rbacv1.PolicyRule) client.Client {
	GinkgoHelper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Rules: rules}
	Expect(k8sClient.Create(ctx, role)).To(Succeed())
	Expect(k8sClient.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}}})).To(Succeed())
	userCfg := rest.CopyConfig(cfg)
	userCfg.Impersonate = rest.ImpersonationConfig{UserName: name}
	c, err := client.New(userCfg, client.Options{Scheme: framework.Scheme})
	Expect(err).NotTo(HaveOccurred())
	return c
}

// explainAt is what wrapup decides now for aw, as Explain says it.
func explainAt(aw *awv1beta2.AppWrapper) *view.Explanation {
	GinkgoHelper()
	ex, err := view.Explain(ctx, k8sClient, nil, client.ObjectKeyFromObject(aw), time.Now())
	Expect(err).NotTo(HaveOccurred())
	return ex
}
