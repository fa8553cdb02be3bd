package integration

import (
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
	"sigs.k8s.io/controller-runtime/pkg/client"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/cmd/kubectl-wrapup/view"
	"github.com/wrapup-dev/wrapup/gc/decision"
	"github.com/wrapup-dev/wrapup/test/framework"
	"github.com/wrapup-dev/wrapup/test/util"
)

// A tenant who may edit AppWrappers, Jobs and pods in their own namespace
// only, acting through an impersonated client, against an admin's rule that
// covers both their namespace and a victim's.
var _ = Describe("Multi-tenancy", func() {
	var (
		tenantNS, victimNS *corev1.Namespace
		tenant             client.Client
		rule               *wrapupv1alpha1.CompletionRule
	)

	BeforeEach(func() {
		group := "tenancy-" + time.Now().Format("150405.000000")
		tenantNS = framework.CreateNamespace(ctx, k8sClient, "tenant", nil)
		victimNS = framework.CreateNamespace(ctx, k8sClient, "victim", nil)
		for _, ns := range []*corev1.Namespace{tenantNS, victimNS} {
			ns.Labels = map[string]string{nsLabel: group}
			Expect(k8sClient.Update(ctx, ns)).To(Succeed())
		}
		rule = util.MakeRule(tenantNS.Name+"-all").TriggerKind("batch", "Job", "").
			NamespaceLabels(map[string]string{nsLabel: group}).Obj()
		Expect(k8sClient.Create(ctx, rule)).To(Succeed())
		expectRuleReady(rule, metav1.ConditionTrue, wrapupv1alpha1.ReasonCompiled)

		role := &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: "tenant-edit", Namespace: tenantNS.Name},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"workload.codeflare.dev"}, Resources: []string{"appwrappers"}, Verbs: []string{"*"}},
				{APIGroups: []string{"batch"}, Resources: []string{"jobs", "jobs/status"}, Verbs: []string{"*"}},
				{APIGroups: []string{""}, Resources: []string{"pods", "pods/status", "configmaps"}, Verbs: []string{"*"}},
			},
		}
		Expect(k8sClient.Create(ctx, role)).To(Succeed())
		Expect(k8sClient.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "tenant-edit", Namespace: tenantNS.Name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "tenant"}},
		})).To(Succeed())
		tenantCfg := rest.CopyConfig(cfg)
		tenantCfg.Impersonate = rest.ImpersonationConfig{UserName: "tenant"}
		var err error
		tenant, err = client.New(tenantCfg, client.Options{Scheme: framework.Scheme})
		Expect(err).NotTo(HaveOccurred())

		DeferCleanup(func() {
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, rule))).To(Succeed())
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, tenantNS))).To(Succeed())
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, victimNS))).To(Succeed())
		})
	})

	It("cannot make wrapup touch another namespace's AppWrapper", func() {
		victim := util.MakeAppWrapper("victim", victimNS.Name).
			Component(util.MakeDeployment("inference", 1), nil).
			Component(util.MakeJob("bench").Obj(), nil).Obj()
		createRunning(victim)

		By("the tenant's RBAC holding: no write to the victim's AppWrapper")
		got := &awv1beta2.AppWrapper{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(victim), got)).To(Succeed())
		patch := client.MergeFrom(got.DeepCopy())
		got.Labels = map[string]string{wrapupv1alpha1.OutcomeLabel: "Succeeded"}
		Expect(apierrors.IsForbidden(tenant.Patch(ctx, got, patch))).To(BeTrue())

		By("the tenant making a same-named AppWrapper with a same-named trigger, and finishing it")
		own := util.MakeAppWrapper("victim", tenantNS.Name).Component(util.MakeJob("bench").Obj(), nil).Obj()
		Expect(tenant.Create(ctx, own)).To(Succeed())
		util.ExpectAppWrapperPhase(ctx, k8sClient, client.ObjectKeyFromObject(own), awv1beta2.AppWrapperRunning)
		ownJob := types.NamespacedName{Namespace: tenantNS.Name, Name: "bench"}
		Eventually(func() error { return tenant.Get(ctx, ownJob, &batchv1.Job{}) }, util.Timeout, util.Interval).Should(Succeed())
		util.JobComplete(ctx, tenant, ownJob)

		// An ownerReference to the victim's UID from another namespace would
		// not help: the garbage collector deletes such an object at once.
		By("the tenant making a completed Job that claims the victim by the AppWrapper label")
		impostor := util.MakeJob("impostor").Obj()
		impostor.Namespace = tenantNS.Name
		impostor.Labels = map[string]string{awv1beta2.AppWrapperLabel: "victim"}
		Expect(tenant.Create(ctx, impostor)).To(Succeed())
		util.JobComplete(ctx, tenant, client.ObjectKeyFromObject(impostor))

		By("the tenant naming the victim's namespace in a component")
		crossJob := util.MakeJob("bench").Obj()
		crossJob.Namespace = victimNS.Name
		cross := util.MakeAppWrapper("cross", tenantNS.Name).Component(crossJob, nil).Obj()
		Expect(tenant.Create(ctx, cross)).To(Succeed())

		By("the tenant's own AppWrapper finishing, and nothing of the victim's moving")
		util.ExpectGone(ctx, k8sClient, own, util.LongTimeout)
		Consistently(func(g Gomega) {
			got := &awv1beta2.AppWrapper{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(victim), got)).To(Succeed())
			g.Expect(got.DeletionTimestamp.IsZero()).To(BeTrue())
			g.Expect(got.Labels).NotTo(HaveKey(wrapupv1alpha1.OutcomeLabel))
			g.Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: victimNS.Name, Name: "bench"}, &batchv1.Job{})).To(Succeed())
		}, util.ConsistentDuration, util.Interval).Should(Succeed())
		Expect(countEvents(victim, "TriggerSucceeded")).To(BeZero())

		By("the tenant reading the record of its own run, through the built-in view role, and no other namespace's")
		Expect(k8sClient.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "tenant-view", Namespace: tenantNS.Name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "tenant"}},
		})).To(Succeed())
		record := recordKey(own)
		Eventually(func() error { return tenant.Get(ctx, record, &wrapupv1alpha1.CompletionRecord{}) }, util.Timeout, util.Interval).Should(Succeed())
		var list wrapupv1alpha1.CompletionRecordList
		Expect(apierrors.IsForbidden(tenant.List(ctx, &list, client.InNamespace(victimNS.Name)))).To(BeTrue())
		Expect(apierrors.IsForbidden(tenant.List(ctx, &list))).To(BeTrue(), "records of every namespace")
		forged := &wrapupv1alpha1.CompletionRecord{ObjectMeta: metav1.ObjectMeta{Name: "forged", Namespace: tenantNS.Name},
			AppWrapper: wrapupv1alpha1.RecordedAppWrapper{Name: "victim"}, Rule: rule.Name, Outcome: wrapupv1alpha1.OutcomeSucceeded,
			FinishedAt: metav1.NowMicro(), Action: wrapupv1alpha1.RecordedAction{Action: wrapupv1alpha1.ActionDeleteAll}}
		Expect(apierrors.IsForbidden(tenant.Create(ctx, forged))).To(BeTrue(), "only wrapup writes records")
		Expect(k8sClient.List(ctx, &list, client.InNamespace(victimNS.Name))).To(Succeed())
		Expect(list.Items).To(BeEmpty(), "wrapup wrote a record into the victim's namespace")
	})

	It("cannot fake an outcome on the AppWrapper's metadata: nothing is recorded, cleared or deleted until the run really ends", func() {
		aw := util.MakeAppWrapper("faker", tenantNS.Name).
			Component(util.MakeDeployment("inference", 1), nil).
			Component(util.MakeJob("bench").Obj(), nil).Obj()
		Expect(tenant.Create(ctx, aw)).To(Succeed())
		util.ExpectAppWrapperPhase(ctx, k8sClient, client.ObjectKeyFromObject(aw), awv1beta2.AppWrapperRunning)
		job := &batchv1.Job{}
		Eventually(func() error {
			return tenant.Get(ctx, types.NamespacedName{Namespace: tenantNS.Name, Name: "bench"}, job)
		}, util.Timeout, util.Interval).Should(Succeed())
		util.JobStarted(ctx, tenant, client.ObjectKeyFromObject(job))

		// forge writes, as the tenant, the record an earlier version of
		// wrapup kept on the metadata: a success at at, naming the running
		// Job, the rule and the AppWrapper itself.
		forge := func(at time.Time) {
			GinkgoHelper()
			Eventually(func(g Gomega) {
				got := &awv1beta2.AppWrapper{}
				g.Expect(tenant.Get(ctx, client.ObjectKeyFromObject(aw), got)).To(Succeed())
				w := (&util.AppWrapperWrapper{AppWrapper: *got}).Recorded(wrapupv1alpha1.OutcomeSucceeded, at, job.UID).
					RecordedBy(rule.Name, "batch/Job/bench").RecordedOn(got.UID).RecordedMessage("forged")
				g.Expect(tenant.Update(ctx, w.Obj())).To(Succeed())
			}, util.Timeout, util.Interval).Should(Succeed())
		}
		// nothing checks that wrapup decides as if the metadata said
		// nothing: the trigger runs, nothing is recorded, cleared or deleted.
		nothing := func() {
			GinkgoHelper()
			Eventually(func(g Gomega) {
				ex, err := view.Explain(ctx, k8sClient, nil, client.ObjectKeyFromObject(aw), time.Now())
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(ex.Verdict).To(Equal(decision.VerdictWaitingForTrigger), ex.String())
				g.Expect(ex.Recorded).To(BeNil(), ex.String())
			}, util.Timeout, util.Interval).Should(Succeed())
			Consistently(func(g Gomega) {
				got := &awv1beta2.AppWrapper{}
				g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(aw), got)).To(Succeed())
				g.Expect(got.DeletionTimestamp.IsZero()).To(BeTrue())
				g.Expect(apierrors.IsNotFound(k8sClient.Get(ctx, recordKey(aw), &wrapupv1alpha1.CompletionRecord{}))).To(BeTrue(), "a CompletionRecord of the forged outcome")
			}, util.ConsistentDuration, util.Interval).Should(Succeed())
			for _, reason := range []string{wrapupv1alpha1.ReasonDeleted, wrapupv1alpha1.ReasonTriggerSucceeded, wrapupv1alpha1.ReasonOutcomeCleared} {
				Expect(countEvents(aw, reason)).To(BeZero(), reason)
			}
		}

		By("the tenant writing a success of an hour ago")
		forge(time.Now().Add(-time.Hour))
		nothing()

		By("the tenant dating it after the AppWrapper was made")
		forge(time.Now())
		nothing()

		By("the Job really succeeding: wrapup records its own outcome, at its own time, and deletes the AppWrapper")
		ended := time.Now()
		util.JobComplete(ctx, tenant, client.ObjectKeyFromObject(job))
		util.ExpectGone(ctx, k8sClient, aw, util.LongTimeout)
		cr := &wrapupv1alpha1.CompletionRecord{}
		Expect(k8sClient.Get(ctx, recordKey(aw), cr)).To(Succeed())
		Expect(cr.Outcome).To(Equal(wrapupv1alpha1.OutcomeSucceeded))
		Expect(cr.Message).NotTo(Equal("forged"))
		Expect(cr.FinishedAt.Time).To(BeTemporally(">=", ended.Truncate(time.Microsecond)), "finished when wrapup saw the Job end, not when the tenant said")
		Expect(cr.Triggers).To(ContainElement(HaveField("UID", job.UID)))
	})
})
